"""`merge` at fleet scale: one row per host (the newest report of each), its verdict, age and what went
unjudged, a host × check matrix, totals, and an exit code for the whole fleet.

Reports come from `check --format json`, bundles, or the agent's --json-report; each was read back
with its size and shape checked (compare.load_report). Cells stay English (the HTML classes are
their severities and states); renderers say them in the user's language.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..engine.findings import Outcome, Severity, State, Verdict, fails
from ..i18n import N_, _, current, ngettext
from ..i18n.labels import Labelled
from ..i18n.width import width as display_width

FUTURE_SLACK_S = 300  # clocks disagree this much; a later stamp is not a time


class Stale(Labelled):
    """A host's status in place of its verdict when its report is older than --max-age (or of no known
    time when an age is asked): the verdict no longer stands, so the fleet counts it as incomplete."""

    STALE = "stale", N_("stale")

    @property
    def incomplete(self) -> bool:
        return True


STALE = Stale.STALE
STATUSES: tuple[Verdict | Stale, ...] = (*Verdict, STALE)  # a host's status: its verdict, or stale
L = TypeVar("L", bound=Labelled)


def _read(kind: type[L], value: object) -> L | None:
    """The member of kind a report holds as its value; None for anything else (a report is read, not trusted)."""
    return next((member for member in kind if member.value == value), None)


def started_at(report: dict[str, Any]) -> float | None:
    """The run's start as Unix time; None when the report does not say it in ISO 8601."""
    try:
        moment = dt.datetime.fromisoformat(str((report.get("run") or {}).get("started", "")))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    stamp = moment.timestamp()
    return stamp if math.isfinite(stamp) else None


def _outcome(result: dict[str, Any], kept: int) -> Outcome:
    """A result's outcome as the report states it. The legacy mapping, for a version 2 report from
    before outcomes (results[].state only): derived as view.outcome_of derives it, the state's own
    outcome when it ended before a verdict (State.outcome: "timed out" is timed_out), and a state this
    version does not know read as crashed (nothing it judged can be counted on)."""
    stated = _read(Outcome, result.get("outcome"))
    if stated is not None:
        return stated
    state = _read(State, result.get("state"))
    if state is None:
        return Outcome.CRASHED
    if state.ended:
        return state.outcome
    if kept:
        return Outcome.FINDINGS
    return Outcome.NOT_JUDGED if result.get("not_judged") else Outcome.PASSED


def _verdict(report: dict[str, Any], outcomes: dict[str, Outcome]) -> Verdict:
    found = report.get("summary")
    summary: dict[str, Any] = found if isinstance(found, dict) else {}
    if _load_errors(report):
        return Verdict.INCOMPLETE  # whatever an older version stated: a module that did not load judged nothing
    stated = _read(Verdict, summary.get("outcome"))
    if stated is not None:
        return stated
    # a report from before summary.outcome: its summary.verdict ("complete" or "incomplete"), or its outcomes
    complete = summary.get("verdict") != "incomplete" and not any(o.incomplete for o in outcomes.values())
    return Verdict.of(complete, bool(report["findings"]))


def _load_errors(report: dict[str, Any]) -> int:
    errors = report.get("load_errors")
    return len(errors) if isinstance(errors, list) else 0


@dataclass(frozen=True)
class HostRow:
    host: str
    file: str
    started: str
    started_at: float | None
    verdict: Verdict
    counts: dict[str, int]  # findings kept by severity
    not_judged: int
    cells: dict[str, str]  # check → "severity: CODE, CODE" or its outcome
    codes: tuple[str, ...]

    def age_s(self, now: float) -> float | None:
        return max(0.0, now - self.started_at) if self.started_at is not None else None

    def fails(self, fail_on: str) -> bool:
        return any(fails(Severity(s), fail_on) for s, n in self.counts.items() if n)


def host_row(name: str, file: str, report: dict[str, Any]) -> HostRow:
    by_check: dict[str, list[dict[str, Any]]] = {}
    for finding in report["findings"]:
        by_check.setdefault(str(finding["check"]), []).append(finding)
    cells: dict[str, str] = {}
    outcomes: dict[str, Outcome] = {}
    for result in report["results"]:
        check = str(result["check"])
        findings = by_check.get(check, [])
        outcomes[check] = _outcome(result, len(findings))
        if findings:
            worst = max((Severity(f["severity"]) for f in findings), key=lambda s: s.rank)
            codes = sorted({str(f["code"]) for f in findings if f["severity"] == worst.value})
            cells[check] = f"{worst.value}: {', '.join(codes)}"
        else:
            cells[check] = outcomes[check].value
    counts = Counter(str(f["severity"]) for f in report["findings"])
    unjudged = sum(len(r.get("not_judged") or []) for r in report["results"] if isinstance(r.get("not_judged"), list))
    unjudged += _load_errors(report)  # each module that did not load: what it would judge
    return HostRow(
        host=name,
        file=file,
        started=str((report.get("run") or {}).get("started", "?")),
        started_at=started_at(report),
        verdict=_verdict(report, outcomes),
        counts={s.value: counts.get(s.value, 0) for s in Severity},
        not_judged=unjudged,
        cells=cells,
        codes=tuple(sorted({str(f["code"]) for f in report["findings"]})),
    )


def check_names(rows: list[HostRow]) -> list[str]:
    return sorted({check for row in rows for check in row.cells})


@dataclass
class Fleet:
    hosts: list[HostRow]
    now: float
    fail_on: str = "error"
    max_age_s: float | None = None
    left_out: list[dict[str, str]] = field(default_factory=list)  # older reports of a host given twice
    unreadable: list[dict[str, str]] = field(default_factory=list)  # files that are not reports: what they would judge, not judged

    @property
    def checks(self) -> list[str]:
        """Every check any host ran, sorted: a pass over every row, so a renderer asks once, never per row."""
        return check_names(self.hosts)

    def stale(self, row: HostRow) -> bool:
        """Older than --max-age (or of no known time, when an age is asked): its verdict no longer stands."""
        if self.max_age_s is None:
            return False
        age = row.age_s(self.now)
        return age is None or age > self.max_age_s

    def status(self, row: HostRow) -> Verdict | Stale:
        return STALE if self.stale(row) else row.verdict

    @property
    def exit_code(self) -> int:
        """The exit code of an incomplete verdict (3) when a host is incomplete or stale or a file is
        unreadable, else a verdict with findings' (1) when one has findings at or above --fail-on, else 0."""
        if self.unreadable or any(self.status(row).incomplete for row in self.hosts):
            return Verdict.INCOMPLETE.exit_code
        return (Verdict.FINDINGS if any(row.fails(self.fail_on) for row in self.hosts) else Verdict.READY).exit_code

    def totals(self) -> dict[str, Any]:
        statuses = Counter(self.status(row) for row in self.hosts)
        by_code = Counter(code for row in self.hosts for code in row.codes)
        return {
            "hosts": len(self.hosts),
            **{status.value: statuses.get(status, 0) for status in STATUSES},
            **{f"{s.value}s" if s is not Severity.INFO else "infos": sum(r.counts[s.value] for r in self.hosts) for s in Severity},
            "not_judged": sum(row.not_judged for row in self.hosts),
            "unreadable": len(self.unreadable),
            "hosts_by_code": dict(sorted(by_code.items())),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "generated": dt.datetime.fromtimestamp(self.now, dt.timezone.utc).isoformat(timespec="seconds"),
            "fail_on": self.fail_on,
            "max_age_s": self.max_age_s,
            "exit_code": self.exit_code,
            "totals": self.totals(),
            "hosts": [
                {
                    "host": row.host,
                    "file": row.file,
                    "started": row.started,
                    "age_s": round(age, 1) if (age := row.age_s(self.now)) is not None else None,
                    "verdict": row.verdict.value,
                    "stale": self.stale(row),
                    "findings": row.counts,
                    "not_judged": row.not_judged,
                    "codes": list(row.codes),
                    "checks": row.cells,
                }
                for row in self.hosts
            ],
            "left_out": self.left_out,
            "unreadable": self.unreadable,
        }


class FleetReader:
    """The fleet built one report at a time: each report becomes its host's row as it is read and is
    not kept (what stays is a row per host, never the parsed reports). A host given twice keeps its
    newest report, the older ones are listed as left out (ties: the later file on the command line). A
    report stamped in the future has no time it can be judged by (never the newest, stale under --max-age)."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.newest: dict[str, tuple[HostRow, float]] = {}
        self.left_out: list[dict[str, str]] = []

    def add(self, file: str, report: dict[str, Any]) -> None:
        name = str((report.get("run") or {}).get("host") or file)
        stamp = started_at(report)
        if stamp is not None and stamp > self.now + FUTURE_SLACK_S:
            report = {**report, "run": {**(report.get("run") or {}), "started": "?"}}
            stamp = None
        key = -math.inf if stamp is None else stamp
        kept = self.newest.get(name)
        if kept is not None:
            kept_row, kept_key = kept
            if key >= kept_key:
                self.left_out.append({"host": name, "file": kept_row.file, "kept": file})
            else:
                self.left_out.append({"host": name, "file": file, "kept": kept_row.file})
                return
        self.newest[name] = (host_row(name, file, report), key)

    def fleet(self, fail_on: str = "error", max_age_s: float | None = None, unreadable: list[dict[str, str]] | None = None) -> Fleet:
        rows = sorted((row for row, _key in self.newest.values()), key=lambda r: r.host)
        return Fleet(rows, self.now, fail_on, max_age_s, self.left_out, list(unreadable or []))


def fleet(
    reports: Iterable[tuple[str, dict[str, Any]]],
    now: float,
    fail_on: str = "error",
    max_age_s: float | None = None,
    unreadable: list[dict[str, str]] | None = None,
) -> Fleet:
    """(file, report) pairs → the fleet (FleetReader: each host's newest report, the older ones left out)."""
    reader = FleetReader(now)
    for file, report in reports:
        reader.add(file, report)
    return reader.fleet(fail_on, max_age_s, unreadable)


def _cell_text(cell: str) -> str:
    """A matrix cell (kept in English: the HTML classes are its severity or outcome) as the user reads it:
    "severity: CODE, CODE" or an outcome's value (host_row writes nothing else: another is an error)."""
    severity, _colon, codes = cell.partition(": ")
    found = _read(Severity, severity)
    if codes and found is not None:
        return _("{severity}: {codes}", severity=found.label, codes=_(", ").join(codes.split(", ")))
    return Outcome(cell).label


def age_text(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 120:
        return _("{count} s", count=int(seconds))
    if seconds < 7200:
        return _("{count} min", count=int(seconds // 60))
    if seconds < 172800:
        return _("{count} h", count=int(seconds // 3600))
    return _("{count} d", count=int(seconds // 86400))


def _columns(f: Fleet) -> tuple[list[str], list[list[str]]]:
    """The table's heading and rows as the user reads them: host, verdict, age, not judged, then each check."""
    checks = f.checks
    head = [_("host"), _("verdict"), _("age"), _("not judged"), *checks]
    statuses = {status: status.label for status in STATUSES}  # each status and distinct cell said once per render, not once per host
    cells: dict[str, str] = {}

    def say(cell: str, word: Callable[[str], str], said: dict[str, str]) -> str:
        text = said.get(cell)
        if text is None:
            text = said[cell] = word(cell)
        return text

    rows = [
        [
            row.host,
            statuses[f.status(row)],
            age_text(row.age_s(f.now)),
            str(row.not_judged),
            *(say(row.cells[c], _cell_text, cells) if c in row.cells else "—" for c in checks),
        ]
        for row in f.hosts
    ]
    return head, rows


def totals_line(f: Fleet) -> str:
    t = f.totals()
    hosts = ngettext("{count} host", "{count} hosts", t["hosts"])
    return _(
        "{hosts}: {ready} ready, {findings} with findings, {incomplete} incomplete, {stale} stale; "
        "{errors} error(s), {warnings} warning(s), {not_judged} not judged{unreadable}",
        hosts=hosts,
        ready=t["ready"],
        findings=t["findings"],
        incomplete=t["incomplete"],
        stale=t[STALE.value],
        errors=t["errors"],
        warnings=t["warnings"],
        not_judged=t["not_judged"],
        unreadable=ngettext("; {count} file unreadable", "; {count} files unreadable", t["unreadable"]) if t["unreadable"] else "",
    )


def _left_out_lines(f: Fleet) -> list[str]:
    lines = [_("{host}: {file} left out, {kept} is newer", host=item["host"], file=item["file"], kept=item["kept"]) for item in f.left_out]
    return lines + [_("not judged: {why}", why=item["why"]) for item in f.unreadable]


def render_fleet(f: Fleet, fmt: str) -> str:
    if fmt == "json":
        import json

        return json.dumps(f.to_json(), indent=2, ensure_ascii=False) + "\n"
    if fmt == "html":
        return _html(f)
    head, rows = _columns(f)
    if fmt == "markdown":
        lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        lines += ["", totals_line(f)] + [f"- {line}" for line in _left_out_lines(f)]
        return "\n".join(lines) + "\n"
    measured: dict[str, int] = {}  # display width of each distinct cell, measured once per render

    def columns(cell: str) -> int:
        found = measured.get(cell)
        if found is None:
            found = measured[cell] = len(cell) if cell.isascii() else display_width(cell)  # ASCII: a column a character
        return found

    widths = [max(columns(cell) for cell in column) for column in zip(head, *rows, strict=True)]
    lines = [
        "  ".join(cell + " " * max(0, w - columns(cell)) for cell, w in zip(line, widths, strict=True)).rstrip() for line in [head, *rows]
    ]  # each cell padded to its column's display width (i18n.width.ljust, its width looked up, not measured again)
    lines += ["", totals_line(f), *_left_out_lines(f)]
    return "\n".join(lines) + "\n"


def _html(f: Fleet) -> str:
    head, rows = _columns(f)
    checks = f.checks
    classes = [
        ["", f.status(row).value, "", "", *(row.cells.get(c, "").split(":")[0] for c in checks)] for row in f.hosts
    ]  # the first four columns are the host's, the rest its checks' cells
    heading = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    written: dict[tuple[str, str], str] = {}  # each distinct cell of a class escaped once per render, not once per host

    def td(cell: str, kind: str) -> str:
        found = written.get((cell, kind))
        if found is None:
            found = written[cell, kind] = f'<td class="{html.escape(kind)}">{html.escape(cell)}</td>'
        return found

    body = "".join(
        "<tr><th>" + html.escape(row[0]) + "</th>" + "".join(td(cell, k) for cell, k in zip(row[1:], kinds[1:], strict=True)) + "</tr>"
        for row, kinds in zip(rows, classes, strict=True)
    )
    title = html.escape(_("decode-doctor fleet"))
    h1 = html.escape(ngettext("decode-doctor fleet: {count} host", "decode-doctor fleet: {count} hosts", len(f.hosts)))
    notes = "".join(f"<li>{html.escape(line)}</li>" for line in _left_out_lines(f))
    return (
        f'<!DOCTYPE html><html lang="{html.escape(current())}"><head><meta charset="utf-8"><title>{title}</title><style>'
        "body{font:14px system-ui,'PingFang SC','Hiragino Sans GB','Microsoft YaHei','Noto Sans CJK SC','Source Han Sans SC',"
        "'WenQuanYi Micro Hei',sans-serif;margin:2rem}"
        "table{border-collapse:collapse}th,td{border:1px solid #ddd;padding:.3rem .5rem}"
        ".error,.incomplete,.stale,.crashed,.timed_out{background:#fde7e9}.warning,.not_judged{background:#fff4d6}"
        ".info{background:#e8f0fe}.passed,.ready{background:#e6f4ea}</style></head>"
        f"<body><h1>{h1}</h1><table><tr>{heading}</tr>{body}</table><p>{html.escape(totals_line(f))}</p>"
        + (f"<ul>{notes}</ul>" if notes else "")
        + "</body></html>\n"
    )
