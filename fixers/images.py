"""Quarantines broken images (with a manifest) and renames images whose extension lies."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from decode_doctor.checks.images.codes import BROKEN, DAMAGED, IMG005, QuarantineParams, RenameParams
from decode_doctor.engine import Applicability, Context, Finding, FixableCode, Fixer
from decode_doctor.fixes.actions import FixPlan, MoveFile
from decode_doctor.i18n import N_, _, said


class ImagesFixer(Fixer):
    name = "images"
    claims: ClassVar[Mapping[FixableCode[Any], Applicability]] = dict.fromkeys(
        (*BROKEN.values(), *DAMAGED.values(), IMG005), Applicability.SAFE
    )
    takes = (QuarantineParams, RenameParams)

    def plan(self, finding: Finding, ctx: Context) -> FixPlan:
        if finding.fix is None or finding.path is None:
            raise ValueError(said("{code} names no file to move", code=finding.code))
        params = finding.fix.params
        source = Path(finding.path)
        within = next((Path(d) for d in ctx.images if Path(d) in source.parents), None)
        if isinstance(params, RenameParams):
            destination = Path(params.destination)
            if destination.exists():
                raise ValueError(said("{destination} already exists; rename {name} by hand", destination=destination, name=source.name))
            move = MoveFile(
                source,
                destination,
                reason=N_("the extension did not match the image format"),
                expected_sha256=params.sha256,
                within=within,
            )
            return FixPlan(
                finding, _("rename to {name}", name=destination.name), [move], [_("update annotation files that name the old file")]
            )
        quarantine = self.params(finding, QuarantineParams)
        move = MoveFile(
            source,
            Path(quarantine.destination),
            reason=quarantine.reason,
            manifest=Path(quarantine.manifest),
            expected_sha256=quarantine.sha256,
            within=within,
            shown_reason=quarantine.shown_reason,
        )
        return FixPlan(finding, _("quarantine"), [move])
