"""The sample feature's fixer, registered through the decode_doctor.fixers entry-point group."""

from __future__ import annotations

from decode_doctor.engine import Applicability, Context, Finding, Fixer
from decode_doctor.fixes.actions import Plan, ReplaceFile

from . import CONF, WANTED


class SampleFixer(Fixer):
    name = "sample"
    claims = {"SAMPLE001": Applicability.SAFE}

    def plan(self, finding: Finding, ctx: Context) -> Plan:
        return Plan(finding, "turn batching on", [ReplaceFile(ctx.host_path(CONF), WANTED.encode(), label=CONF)])
