"""Small JSON lists kept in the state directory (bandwidth and calibration records): read with a
size limit, written atomically (a kill leaves the old file or the new, never a torn one or a
temporary file)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

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
