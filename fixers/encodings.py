"""Converts a model text file to UTF-8 (or drops a UTF-8 BOM), proving the text is unchanged."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from decode_doctor.checks.encodings.codes import ENC001, ENC006, ConvertParams, DropBomParams
from decode_doctor.checks.encodings.textenc import Status, Verdict, converted_bytes, parses
from decode_doctor.engine import Applicability, Context, Finding, Fixer
from decode_doctor.fixes.actions import FixPlan, ReplaceFile
from decode_doctor.i18n import _, said


class EncodingsFixer(Fixer):
    name = "encodings"
    claims = {ENC001: Applicability.SAFE, ENC006: Applicability.SAFE}
    takes = (ConvertParams, DropBomParams)

    def plan(self, finding: Finding, ctx: Context) -> FixPlan:
        if finding.fix is None or finding.path is None:
            raise ValueError(said("{code} names no file to fix", code=finding.code))
        params = finding.fix.params
        path = Path(finding.path)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
        sha = hashlib.sha256(data).hexdigest()
        if not isinstance(params, (ConvertParams, DropBomParams)):
            raise TypeError(f"{finding.code} carries {type(params).__name__}")  # untranslated: a programmer's error
        if sha != params.sha256:
            raise ValueError(said("{path} changed since it was checked; run the check again", path=path))
        if isinstance(params, DropBomParams):
            if not data.startswith(b"\xef\xbb\xbf"):
                raise ValueError(said("{path} no longer starts with a UTF-8 BOM", path=path))
            content, description = data[3:], _("remove the UTF-8 byte-order mark")
        else:
            encoding = params.encoding
            text = data.decode(encoding)  # strict: the check decided on exactly these bytes
            content = converted_bytes(Verdict(Status.CONVERT, encoding, text=text), keep_utf8_bom=False)
            if not parses(content.decode("utf-8"), path.suffix.lower()):
                raise ValueError(said("{path}: the converted text does not parse; not converting", path=path))
            description = _("convert from {encoding} to UTF-8", encoding=encoding)
        crlf = b"\r\n" in data
        notes = [
            _("same text, {before} → {after} bytes", before=len(data), after=len(content)) + (_("; CRLF line endings kept") if crlf else "")
        ]
        within = _tree_of(path, ctx.models)
        action = ReplaceFile(path, content, expected_sha256=sha, label=str(path), within=within)
        return FixPlan(finding, description, [action], notes)


def _tree_of(path: Path, trees: tuple[Path, ...]) -> Path | None:
    """The --model tree that holds path (the deepest, as given): writes are reached from it without links."""
    holders = [Path(tree) for tree in trees if Path(tree).is_dir() and Path(tree) in path.parents]
    return max(holders, key=lambda tree: len(tree.parts)) if holders else None
