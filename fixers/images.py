"""Quarantines broken images (with a manifest) and renames images whose extension lies."""

from __future__ import annotations

from pathlib import Path

from decode_doctor.engine import Applicability, Context, Finding, Fixer
from decode_doctor.fixes.actions import MoveFile, Plan


class ImagesFixer(Fixer):
    name = "images"
    claims = dict.fromkeys(("IMG001", "IMG002", "IMG003", "IMG004", "IMG005", "IMG011", "IMG013"), Applicability.SAFE)

    def plan(self, finding: Finding, ctx: Context) -> Plan:
        assert finding.fix is not None and finding.path is not None
        params = finding.fix.params
        source, destination = Path(finding.path), Path(params["destination"])
        if params["action"] == "rename":
            if destination.exists():
                raise ValueError(f"{destination} already exists; rename {source.name} by hand")
            within = next((Path(d) for d in ctx.images if Path(d) in source.parents), None)
            move = MoveFile(
                source,
                destination,
                reason="the extension did not match the image format",
                expected_sha256=params.get("sha256"),
                within=within,
            )
            return Plan(finding, f"rename to {destination.name}", [move], ["update annotation files that name the old file"])
        within = next((Path(d) for d in ctx.images if Path(d) in source.parents), None)
        move = MoveFile(
            source,
            destination,
            reason=params["reason"],
            manifest=Path(params["manifest"]),
            expected_sha256=params.get("sha256"),
            within=within,
        )
        return Plan(finding, "quarantine", [move])
