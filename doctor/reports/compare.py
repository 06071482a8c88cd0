"""Reading reports back: loading one with its size and shape checked (for `diff` and `merge`), and `diff`.

What is compared comes from each feature's facts (Facts.compared): strings are versions and
settings, numbers are measurements with a change in percent.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.check import Check
from ..engine.facts import Facts
from ..engine.files import open_regular
from ..engine.findings import Outcome, Severity, State
from ..i18n import _, chinese, explanation, json_failure, localized, os_reason
from .report import SCHEMA_VERSION

MAX_REPORT_BYTES = 64 << 20
ABSENT = "absent"
UNNAMED_HOST = "unknown"  # the name a run gives a host whose name it could not read (app.service)


def _unreadable(exc: BaseException) -> str:
    """Why a file could not be read as a report, in the reader's words (never an exception's repr)."""
    if isinstance(exc, OSError):
        return localized(os_reason(exc))
    if isinstance(exc, StopIteration):
        return _("the bundle holds no report.json")
    if isinstance(exc, tarfile.TarError):
        return _("not a readable .tar.gz bundle")
    return json_failure(exc)


class ReportError(Exception):
    """A file given as a report that is not one; the message is for the user."""


def load_report(path: Path) -> dict[str, Any]:
    """A report.json, or the report.json inside a bundle."""
    try:
        # a FIFO or device given as a report is refused at once (never a blocking open), and the read is
        # sized by the file: no 64 MiB buffer per report when a fleet's thousands are merged
        with open_regular(path) as opened:
            if path.name.endswith((".tar.gz", ".tgz")):
                with tarfile.open(fileobj=opened) as tar:
                    member = next(m for m in tar.getmembers() if m.name.endswith("/report.json"))
                    handle = tar.extractfile(member)
                    raw = handle.read(MAX_REPORT_BYTES + 1) if handle else b""
            else:
                raw = opened.read(min(os.fstat(opened.fileno()).st_size, MAX_REPORT_BYTES) + 1)
        if len(raw) > MAX_REPORT_BYTES:
            raise ReportError(_("{path}: larger than {amount} MiB; not a decode-doctor report", path=path, amount=MAX_REPORT_BYTES >> 20))
        data = json.loads(raw.decode("utf-8"))
    except (OSError, StopIteration, ValueError, tarfile.TarError, RecursionError) as exc:
        raise ReportError(_("{path}: not a decode-doctor report ({why})", path=path, why=_unreadable(exc))) from None
    if not isinstance(data, dict) or "findings" not in data:
        raise ReportError(_("{path}: not a decode-doctor report", path=path))
    if data.get("schema_version") != SCHEMA_VERSION:
        raise ReportError(
            _(
                "{path}: report schema {value}; this decode-doctor reads schema {schema} (run the check again with this version)",
                path=path,
                value=repr(str(data.get("schema_version"))[:20]),
                schema=SCHEMA_VERSION,
            )
        )
    problem = shape_problem(data)
    if problem:
        raise ReportError(_("{path}: not a decode-doctor report: {problem}", path=path, problem=problem))
    return data


def shape_problem(data: dict[str, Any]) -> str | None:
    """What diff and merge read, checked against the report schema before they read it (a hand-edited
    or truncated report is refused with the field named, never a traceback)."""
    from .schema import problem

    return problem(data)


def typed_facts(report: dict[str, Any], checks: Mapping[str, type[Check]]) -> dict[str, Facts]:
    """The report's facts rebuilt as each installed check's facts type; what does not fit is left out."""
    found: dict[str, Facts] = {}
    for name, data in (report.get("facts") or {}).items():
        facts_type = checks[name].facts_type if name in checks else None
        if facts_type is None:
            continue
        try:
            facts = facts_type.from_dict(data)
            facts.compared()  # facts that cannot say what they compare are left out with the rest
        except (ValueError, TypeError, KeyError, AttributeError, IndexError, ArithmeticError, RecursionError):
            continue
        found[name] = facts
    return found


def compared(report: dict[str, Any], checks: Mapping[str, type[Check]]) -> dict[str, str | float]:
    values: dict[str, str | float] = {"decode-doctor": str(report.get("tool", {}).get("version", "?"))}
    for facts in typed_facts(report, checks).values():
        values.update(facts.compared())
    return values


@dataclass
class Difference:
    before: dict[str, Any]
    after: dict[str, Any]
    changed: dict[str, tuple[str, str]]
    measured: dict[str, tuple[float, float, float | None]]  # before, after, change in percent
    appeared: list[dict[str, Any]]
    disappeared: list[dict[str, Any]]
    states: dict[str, tuple[str, str]]

    def to_json(self) -> dict[str, Any]:
        return {
            "before": self.before,
            "after": self.after,
            "changed": {k: {"before": a, "after": b} for k, (a, b) in self.changed.items()},
            "measured": {k: {"before": a, "after": b, "change_percent": c} for k, (a, b, c) in self.measured.items()},
            "appeared": self.appeared,
            "disappeared": self.disappeared,
            "states": {k: {"before": a, "after": b} for k, (a, b) in self.states.items()},
        }

    def lines(self) -> list[str]:
        out = [
            _("before: {run}", run=_run_text(self.before)),
            _("after:  {run}", run=_run_text(self.after)),
        ]
        out += [
            _("changed  {name}: {before} → {after}", name=name, before=_value_text(a), after=_value_text(b))
            for name, (a, b) in self.changed.items()
        ]
        out += [f"+ {f['code']} {_finding_text(f)}" for f in self.appeared]
        out += [f"- {f['code']} {_finding_text(f)}" for f in self.disappeared]
        out += [
            _("state    {check}: {before} → {after}", check=check, before=_state_text(a), after=_state_text(b))
            for check, (a, b) in self.states.items()
        ]
        for name, (a, b, change) in self.measured.items():
            change_text = f" ({change:+.1f}%)" if change is not None else ""
            out.append(_("measured {name}: {before} → {after}", name=name, before=format(a, "g"), after=format(b, "g")) + change_text)
        if len(out) == 2:
            out.append(_("no differences"))
        return out


def _run_text(run: dict[str, str]) -> str:
    host = _("an unnamed host") if run["host"] == UNNAMED_HOST else _value_text(run["host"])
    return _("{host} at {started} ({file})", host=host, started=_value_text(run["started"]), file=run["file"])


def _value_text(value: str) -> str:
    """A compared value as a reader reads it: ABSENT (the report does not hold it) in words."""
    return _("not recorded") if value == ABSENT else value


def _state_text(value: str) -> str:
    """A result's state of a compared report in the user's language (State.label); ABSENT (the check is
    not in that report) in words; a state this version does not know as the report has it."""
    found = Outcome.parse(value) or State.parse(value)
    return found.label if found is not None else _value_text(value)


def _finding_text(finding: dict[str, Any]) -> str:
    """A finding of a compared report: its severity in the user's language, its message as the report
    has it. A message in the other language (a report made with --lang en read in Chinese) is quoted
    after the code's title in the user's language."""
    severity = str(finding.get("severity"))
    found = Severity.parse(severity)
    word = found.label if found is not None else severity  # a severity this version does not know, as the report has it
    message = str(finding.get("message") or "")
    if bool(re.search(r"[\u4e00-\u9fff]", message)) == chinese():
        return _("{severity} {check}: {message}", severity=word, check=finding.get("check"), message=message)
    # a report in the other language: the code's title in the reader's, and only the evidence its message
    # quotes (a log line stays as the log wrote it); never the other language's sentence
    title = explanation(str(finding.get("code")), "title", str(finding.get("title") or ""))
    quoted = re.findall(r'"([^"\n]{1,300})"', message)
    if quoted:
        evidence = "; ".join(f'"{text}"' for text in quoted[:2])
        return _(
            "{severity} {check}: {title} (quoted: {evidence})", severity=word, check=finding.get("check"), title=title, evidence=evidence
        )
    return _("{severity} {check}: {title}", severity=word, check=finding.get("check"), title=title)


def _key(finding: dict[str, Any]) -> tuple[str, str, str]:
    return str(finding.get("code")), str(finding.get("check")), str(finding.get("path") or "")


def _brief(finding: dict[str, Any]) -> dict[str, Any]:
    return {k: finding.get(k) for k in ("code", "severity", "check", "title", "message", "path")}


def _run_of(report: dict[str, Any], path: Path) -> dict[str, Any]:
    run = report.get("run") or {}
    return {"file": str(path), "host": str(run.get("host") or ABSENT), "started": str(run.get("started") or ABSENT)}


def difference(a: dict[str, Any], b: dict[str, Any], paths: tuple[Path, Path], checks: Mapping[str, type[Check]]) -> Difference:
    va, vb = compared(a, checks), compared(b, checks)
    changed: dict[str, tuple[str, str]] = {}
    measured: dict[str, tuple[float, float, float | None]] = {}
    for name in sorted(set(va) | set(vb), key=lambda n: (n not in va, n)):
        x, y = va.get(name), vb.get(name)
        if isinstance(x, float | int) and isinstance(y, float | int) and not isinstance(x, bool):
            measured[name] = (x, y, round((y - x) / x * 100, 1) if x else None)
        elif x != y:
            changed[name] = (str(x) if x is not None else ABSENT, str(y) if y is not None else ABSENT)
    fa = {_key(f): f for f in a["findings"] if isinstance(f, dict)}
    fb = {_key(f): f for f in b["findings"] if isinstance(f, dict)}
    # what the report says of each check (its outcome: "not judged" where it passed on part of what it was
    # given), as check and merge say it; a report without outcomes, by its state
    states_a = {r.get("check"): r.get("outcome") or r.get("state") for r in a.get("results", []) if isinstance(r, dict)}
    states_b = {r.get("check"): r.get("outcome") or r.get("state") for r in b.get("results", []) if isinstance(r, dict)}
    states = {
        str(c): (str(states_a.get(c) or ABSENT), str(states_b.get(c) or ABSENT))
        for c in sorted(set(states_a) | set(states_b), key=str)
        if states_a.get(c) != states_b.get(c)
    }
    return Difference(
        before=_run_of(a, paths[0]),
        after=_run_of(b, paths[1]),
        changed=changed,
        measured=measured,
        appeared=[_brief(fb[k]) for k in sorted(set(fb) - set(fa))],
        disappeared=[_brief(fa[k]) for k in sorted(set(fa) - set(fb))],
        states=states,
    )
