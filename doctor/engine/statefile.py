"""Small JSON lists of records kept in the state directory (bandwidth figures, calibrations), and the
host identity they are kept under:
read with a size limit, each record a dataclass (an entry that does not fit one is skipped),
appended and written atomically (a kill leaves the old file or the new, never a torn one or a
temporary file), the oldest dropped past a count."""

from __future__ import annotations

import json
import os
import platform
import tempfile
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

from decode_doctor.i18n import said

R = TypeVar("R", bound="DataclassInstance")

READ_LIMIT = 1 << 20


def read_list(path: Path) -> list[dict[str, object]]:
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read(READ_LIMIT))
    except (OSError, ValueError):
        return []
    return [dict(entry) for entry in data if isinstance(entry, dict)] if isinstance(data, list) else []


def write_list(path: Path, entries: list[dict[str, object]]) -> None:
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
    names = {f.name for f in fields(kind)}
    found = []
    for entry in read_list(path):
        try:
            found.append(kind(**{key: value for key, value in entry.items() if key in names}))
        except (TypeError, AttributeError):
            continue
    return found


def append_record(path: Path, record: R, kind: type[R], keep: int) -> None:
    """record appended to path's records, the oldest dropped past keep, written atomically."""
    write_list(path, [asdict(r) for r in [*read_records(path, kind), record][-keep:]])


def age_text(seconds: float) -> str:
    """How long ago, as the records say it: "just now", "3.2 h ago", "4.0 days ago"."""
    hours = seconds / 3600
    if hours < 0.05:
        return said("just now")
    return said("{hours:.1f} h ago", hours=hours) if hours < 48 else said("{days:.1f} days ago", days=hours / 24)


def host_id() -> str:
    """This machine as its records name it: its node name and CPU model ("gpu-node-1/AMD EPYC 9654")."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle.read(READ_LIMIT).splitlines():
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{platform.node()}/{model or platform.machine()}"
