"""The GPU health feature's fix: the command that turns persistence mode on, shown, never run (it
changes the driver's state for every process on the node)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from decode_doctor.checks.gpuhealth.codes import GPH030
from decode_doctor.engine import Applicability, CommandsParams, Context, Finding, FixableCode, Fixer
from decode_doctor.fixes.actions import FixPlan, ShowCommands


class PersistenceCommands(Fixer):
    name = "nvidia-persistenced"
    claims: ClassVar[Mapping[FixableCode[Any], Applicability]] = {GPH030: Applicability.DISPLAY_ONLY}
    takes = (CommandsParams,)

    def plan(self, finding: Finding, ctx: Context) -> FixPlan:
        params = self.params(finding, CommandsParams)
        return FixPlan(finding, params.description, [ShowCommands(params.commands)])
