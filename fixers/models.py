"""The model files' fixes: display-only, the command that downloads a damaged file again."""

from __future__ import annotations

from decode_doctor.engine import Applicability, Context, Finding, Fixer
from decode_doctor.fixes.actions import Plan, ShowCommands


class RedownloadCommands(Fixer):
    name = "model-files"
    claims = dict.fromkeys(("MDL001", "MDL002", "MDL005", "MDL006", "MDL007"), Applicability.DISPLAY_ONLY)

    def plan(self, finding: Finding, ctx: Context) -> Plan:
        assert finding.fix is not None
        commands = tuple(str(command) for command in finding.fix.params["commands"])
        return Plan(finding, "download it again", [ShowCommands(commands)])
