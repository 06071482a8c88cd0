"""`diff` (what changed between two reports) and `merge` (a host × check matrix for a fleet), from
reports read back with their size and shape checked."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..engine.registry import Registry, load
from ..i18n import reason
from ..reports.compare import ReportError, difference, load_report
from ..reports.fleet import Fleet, FleetReader
from ..reports.formats import Use, get
from ..reports.render import render_diff, render_fleet_as
from .requests import RequestError


def _load(path: Path) -> dict[str, Any]:
    try:
        return load_report(path)
    except ReportError as exc:
        raise RequestError(reason(exc)) from None


def diff(before: Path, after: Path, fmt: str = "text", registry: Registry | None = None) -> str:
    """The difference in a format of choices(Use.DIFF); UnknownFormat, before a report is read, for another."""
    get(fmt, Use.DIFF)
    change = difference(_load(before), _load(after), (before, after), (registry or load()).checks)
    return render_diff(change, fmt)


def merge(reports: tuple[Path, ...], fail_on: str = "error", max_age_s: float | None = None) -> Fleet:
    """The fleet from many reports: the newest of each host, judged as of now. A file that is not a
    report it can read is listed as unreadable (its host not judged), never the end of the merge. Each
    report becomes its host's row as it is read, and is dropped: memory holds rows, not parsed reports."""
    reader = FleetReader(time.time())
    unreadable: list[dict[str, str]] = []
    for path in reports:
        try:
            report = load_report(path)
        except ReportError as exc:
            unreadable.append({"file": str(path), "why": str(exc)})
            continue
        reader.add(str(path), report)  # its row is built now; the parsed report is not kept
        del report
    return reader.fleet(fail_on, max_age_s, unreadable)


def render(merged: Fleet, fmt: str) -> str:
    """The fleet in a format of choices(Use.FLEET); UnknownFormat for another."""
    return render_fleet_as(merged, fmt)
