"""Small JSON lists of records kept in the state directory (bandwidth and calibration records):
read with a size limit, each record a dataclass (an entry that does not fit one is skipped),
appended and written atomically (a kill leaves the old file or the new, never a torn one or a
temporary file), the oldest dropped past a count."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, TypeVar

from decode_doctor.i18n import said

R = TypeVar("R")

READ_LIMIT = 1 << 20


def read_list(path: Path) -> list[dict[str, Any]]:
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read(READ_LIMIT))
    except (OSError, ValueError):
        return []
    return [entry for entry in data if isinstance(entry, dict)] if isinstance(data, list) else []


def write_list(path: Path, entries: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".dd-tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(entries, handle, indent=1)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_records(path: Path, kind: type[R]) -> list[R]:
    """The entries of path as kind (a dataclass): unknown keys ignored, a malformed entry skipped."""
    names = {f.name for f in fields(kind)}  # type: ignore[arg-type]
    found = []
    for entry in read_list(path):
        try:
            found.append(kind(**{key: value for key, value in entry.items() if key in names}))
        except (TypeError, AttributeError):
            continue
    return found


def append_record(path: Path, record: Any, kind: type[Any], keep: int) -> None:
    """record appended to path's records, the oldest dropped past keep, written atomically."""
    write_list(path, [asdict(r) for r in [*read_records(path, kind), record][-keep:]])


def age_text(seconds: float) -> str:
    """How long ago, as the records say it: "just now", "3.2 h ago", "4.0 days ago"."""
    hours = seconds / 3600
    if hours < 0.05:
        return said("just now")
    return said("{hours:.1f} h ago", hours=hours) if hours < 48 else said("{days:.1f} days ago", days=hours / 24)
