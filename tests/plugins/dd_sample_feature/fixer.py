"""The sample feature's fixer, registered through the decode_doctor.fixers entry-point group."""

from __future__ import annotations

from decode_doctor.engine import Applicability, Context, Finding, Fixer, NoParams
from decode_doctor.fixes.actions import FixPlan, ReplaceFile

from . import CONF, SAMPLE001, WANTED


class SampleFixer(Fixer):
    name = "sample"
    claims = {SAMPLE001: Applicability.SAFE}
    takes = (NoParams,)

    def plan(self, finding: Finding, ctx: Context) -> FixPlan:
        return FixPlan(finding, "turn batching on", [ReplaceFile(ctx.host_path(CONF), WANTED.encode(), label=CONF)])
