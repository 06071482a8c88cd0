"""The model files' fixes: display-only, the command that downloads a damaged file again."""

from __future__ import annotations

from decode_doctor.checks.artifacts.codes import REDOWNLOADABLE
from decode_doctor.engine import Applicability, CommandsParams, Context, Finding, Fixer
from decode_doctor.fixes.actions import FixPlan, ShowCommands


class RedownloadCommands(Fixer):
    name = "model-files"
    claims = dict.fromkeys(REDOWNLOADABLE, Applicability.DISPLAY_ONLY)
    takes = (CommandsParams,)

    def plan(self, finding: Finding, ctx: Context) -> FixPlan:
        params = self.params(finding, CommandsParams)
        return FixPlan(finding, params.description, [ShowCommands(params.commands)])
