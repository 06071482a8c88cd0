"""`diff` (what changed between two reports) and `merge` (a host × check matrix for a fleet), from
reports read back with their size and shape checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..engine.registry import Registry, load
from ..reports.compare import ReportError, difference, load_report, matrix, render_matrix
from .requests import RequestError


def _load(path: Path) -> dict[str, Any]:
    try:
        return load_report(path)
    except ReportError as exc:
        raise RequestError(str(exc)) from None


def diff(before: Path, after: Path, fmt: str = "text", registry: Registry | None = None) -> str:
    change = difference(_load(before), _load(after), (before, after), (registry or load()).checks)
    if fmt == "json":
        return json.dumps(change.to_json(), indent=2, ensure_ascii=False) + "\n"
    return "\n".join(change.lines()) + "\n"


def merge(reports: tuple[Path, ...], fmt: str = "text") -> str:
    loaded, seen = [], set()
    for path in reports:
        data = _load(path)
        name = str((data.get("run") or {}).get("host", path.name))
        if name in seen:
            name = f"{name} ({path.name})"
        seen.add(name)
        loaded.append((name, data))
    hosts, checks, cells = matrix(loaded)
    return render_matrix(hosts, checks, cells, fmt)
