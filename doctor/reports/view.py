"""The one view every output format renders from: the report with every string redacted, and the
sections the features' facts contribute (summary lines, environment rows, metrics, HTML blocks).

Building the view is where redaction happens; a renderer never sees an unredacted value, and no
renderer names a check, a code or a facts key.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..engine.facts import Chart, EnvRow, HtmlBlock, Metric, Sample, Series
from ..engine.findings import AcceptedGap, Code, Finding, FixParams, NotJudged, Outcome, Severity, State, Verdict
from ..i18n import _, explanation
from .redact import Redactor
from .report import SCHEMA_VERSION, Report

COMMAND_OUTPUT_LIMIT = 8000
NOT_JUDGED_ROW = "not judged"


@dataclass(frozen=True)
class JudgedRow:
    name: str
    value: str
    judged: str  # "ok", "not judged" (its value could not be read), or the codes of the findings about it

    @property
    def judged_shown(self) -> str:
        """The judged column as a person reads it: "ok" in the language of the command, or the codes."""
        return _("ok") if self.judged == "ok" else _("not judged") if self.judged == NOT_JUDGED_ROW else self.judged

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "value": self.value, "judged": self.judged}


@dataclass(frozen=True)
class FactLine:
    check: str
    text: str
    shown_by_default: bool


@dataclass(frozen=True)
class ResultView:
    check: str
    state: State
    duration_s: float
    findings: int
    reason: str | None
    error: str | None
    commands: list[dict[str, Any]]
    files: list[str]
    not_judged: list[NotJudged] = field(default_factory=list)
    outcome: Outcome = Outcome.PASSED
    ignored: int = 0  # its findings left out by --ignore or the selection
    accepted: list[AcceptedGap] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """As CheckResult.complete: its state is not incomplete (State.incomplete) and it judged all it was given."""
        return not self.state.incomplete and not self.not_judged

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "state": self.state.value,
            "outcome": self.outcome.value,
            "ignored": self.ignored,
            "duration_s": round(self.duration_s, 4),
            "findings": self.findings,
            "reason": self.reason,
            "commands": self.commands,
            "files": self.files,
            "not_judged": [item.to_dict() for item in self.not_judged],
            "accepted_gaps": [item.to_dict() for item in self.accepted],
        }


@dataclass(frozen=True)
class IgnoredView:
    code: str
    check: str
    selector: str
    reason: str | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


HOST_PREFIXES = ("/proc/", "/sys/", "/etc/", "/usr/", "/run/", "/var/", "/dev/", "/boot/", "/lib/")


@dataclass
class FindingGroup:
    findings: list[Finding]

    @property
    def first(self) -> Finding:
        return self.findings[0]

    @property
    def code(self) -> str:
        return self.first.code

    @property
    def check(self) -> str:
        return self.first.check

    @property
    def severity(self) -> Severity:
        return self.first.severity

    @property
    def about_host(self) -> bool:
        """About the machine (no path, or a system path), not about files in a dataset or model."""
        return all(f.path is None or f.path.startswith(HOST_PREFIXES) for f in self.findings)


@dataclass
class ReportView:
    meta: dict[str, Any]
    fail_on: str
    exit_code: int
    findings: list[Finding]
    ignored: list[IgnoredView]
    results: list[ResultView]
    facts: dict[str, dict[str, Any]]
    fact_lines: list[FactLine]
    environment: list[JudgedRow]
    metrics: list[Metric]
    html_blocks: list[HtmlBlock]
    load_errors: list[str]
    fixes: dict[str, Any] | None
    verdict_exits: bool = True
    explanations: dict[str, str] = field(default_factory=dict)  # code → how to fix it by hand

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)

    def states(self) -> dict[str, int]:
        counts = {state.value: 0 for state in State}
        for result in self.results:
            counts[result.state.value] += 1
        return counts

    def fixable(self) -> list[Finding]:
        return [f for f in self.findings if f.fix is not None]

    def command_exit_code(self) -> int | None:
        """The exit code of the command that made this report, where it is the verdict's (check,
        analyze, bench); `report` exits 0 once its bundle is written, whatever the verdict."""
        return self.exit_code if self.verdict_exits else None

    def unjudged(self) -> list[tuple[str, NotJudged]]:
        """(check, what) for everything a check was given and could not judge."""
        return [(r.check, item) for r in self.results for item in r.not_judged]

    def accepted_gaps(self) -> list[tuple[str, AcceptedGap]]:
        """(check, gap) for everything judged only in part by a rule that accepts it."""
        return [(r.check, item) for r in self.results for item in r.accepted]

    @property
    def complete(self) -> bool:
        """Every check reached a verdict on everything it was given and every module loaded: only then
        is a run "Ready"."""
        return all(r.complete for r in self.results) and not self.load_errors

    @property
    def verdict(self) -> Verdict:
        return Verdict.of(self.complete, bool(self.findings))

    def outcomes(self) -> dict[str, int]:
        counts = {outcome.value: 0 for outcome in Outcome}
        for result in self.results:
            counts[result.outcome.value] += 1
        return counts

    def groups(self) -> list[FindingGroup]:
        """Findings grouped by check and code, the host's first, then by severity: 29 broken images are
        one row that does not bury the two host findings a support engineer needs first."""
        grouped: dict[tuple[str, str], list[Finding]] = {}
        for finding in self.findings:
            grouped.setdefault((finding.check, finding.code), []).append(finding)
        groups = [FindingGroup(items) for items in grouped.values()]
        return sorted(groups, key=lambda g: (not g.about_host, -g.severity.rank, g.check, g.code))

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "decode-doctor", "version": self.meta.get("version", "")},
            "run": {k: v for k, v in self.meta.items() if k != "version"},
            "summary": {
                "errors": self.count(Severity.ERROR),
                "warnings": self.count(Severity.WARNING),
                "infos": self.count(Severity.INFO),
                "ignored": len(self.ignored),
                "fixable": len(self.fixable()),
                "checks": self.states(),
                "fail_on": self.fail_on,
                "exit_code": self.exit_code,
                "verdict": "complete" if self.complete else "incomplete",
                "outcome": self.verdict.value,
                "outcomes": self.outcomes(),
                "not_judged": len(self.unjudged()),
                "accepted_gaps": len(self.accepted_gaps()),
                "load_errors": len(self.load_errors),
            },
            "findings": [f.to_dict() for f in self.findings],
            "ignored": [i.to_dict() for i in self.ignored],
            "results": [r.to_dict() for r in self.results],
            "not_judged": [{"check": check, **item.to_dict()} for check, item in self.unjudged()],
            "accepted_gaps": [{"check": check, **item.to_dict()} for check, item in self.accepted_gaps()],
            "facts": self.facts,
            "environment": [row.to_dict() for row in self.environment],
            "load_errors": list(self.load_errors),
            "fixes": self.fixes,
        }


def judging_codes(registry_codes: Mapping[str, tuple[Code, Any]], report: Report) -> dict[str, Code]:
    """The codes of the checks that ran to a verdict in this report: only they can call an environment
    row "ok" (a row whose judging check was not selected is shown, not judged)."""
    ran = {r.check for r in report.results if not r.state.ended}
    return {code: spec for code, (spec, cls) in registry_codes.items() if getattr(cls, "name", None) in ran}


def build_view(
    report: Report,
    redactor: Redactor | None = None,
    codes: Mapping[str, Code] | None = None,
    host_rows: list[EnvRow] | None = None,
    debug: bool = False,
) -> ReportView:
    """The redacted view of a report. codes (the registry's) let environment rows be judged by the
    rows a code declares it concerns; host_rows are the generic rows (OS, CPU…) of a support bundle."""
    redact = redactor or Redactor(enabled=False)
    facts = report.facts()
    findings = [_redacted_finding(f, redact) for f in report.sorted_findings()]
    rows = list(host_rows or [])
    lines: list[FactLine] = []
    metrics: list[Metric] = []
    blocks: list[HtmlBlock] = []
    facts_json: dict[str, Any] = {}
    kept = Counter(f.check for f in report.findings)
    kept_ids = {id(f) for f in report.findings}  # analyze's results are "serving (FILE)", their findings "serving"
    left_out = Counter(i.finding.check for i in report.ignored)
    for check, item in facts.items():
        rows.extend(item.environment())
        lines.extend(FactLine(check, redact.text(line), item.shown_by_default) for line in item.summary())
        metrics.extend(_redacted_metric(m, redact) for m in item.metrics())
        blocks.extend(_redacted_block(b, redact) for b in item.html())
        facts_json[check] = redact.json(item.to_dict())
    return ReportView(
        meta=redact.json(dict(report.meta)),
        fail_on=report.fail_on,
        exit_code=report.exit_code,
        findings=findings,
        ignored=[
            IgnoredView(i.finding.code, i.finding.check, i.selector, i.reason, redact.text(i.finding.message)) for i in report.ignored
        ],
        results=[
            ResultView(
                r.check,
                r.state,
                r.duration_s,
                len(r.findings),
                redact.text(r.reason) if r.reason else None,
                redact.text(r.error) if (debug and r.error) else None,
                [redact.json(c.to_dict(limit=COMMAND_OUTPUT_LIMIT)) for c in r.commands],
                list(r.files),
                [NotJudged(redact.text(n.what), redact.text(n.why), n.cause) for n in r.not_judged],
                outcome_of(
                    r.state,
                    kept[r.check] or sum(id(f) in kept_ids for f in r.findings),
                    bool(r.not_judged),
                    r.check in report.pulled_in,
                    bool(r.accepted),
                ),
                left_out[r.check],
                [AcceptedGap(redact.text(a.what), redact.text(a.why), a.gap) for a in r.accepted],
            )
            for r in report.results
        ],
        facts=facts_json,
        fact_lines=lines,
        environment=[_judged(row, report.findings, codes or {}, redact) for row in rows],
        metrics=metrics,
        html_blocks=blocks,
        load_errors=list(report.load_errors),
        fixes=redact.json(report.fixes.to_dict()) if report.fixes else None,
        verdict_exits=report.verdict_exits,
        explanations={code: explanation(code, "fix_by_hand", spec.fix_by_hand) for code, spec in (codes or {}).items()},
    )


def outcome_of(state: State, kept: int, unjudged: bool, pulled_in: bool, accepted: bool = False) -> Outcome:
    """What a report says of a check: the state it ended in, then whether it was selected, then the
    findings kept, then what it could not judge."""
    if state.ended:
        return state.outcome
    if pulled_in:
        return Outcome.NOT_SELECTED
    if kept:
        return Outcome.FINDINGS
    if unjudged:
        return Outcome.NOT_JUDGED
    return Outcome.ACCEPTED_GAP if accepted else Outcome.PASSED


def _redacted_finding(finding: Finding, redact: Redactor) -> Finding:
    data = redact.finding(finding.to_dict())
    fix = None
    if finding.fix is not None:
        fix = replace(finding.fix, summary=data["fix"]["summary"], params=ShownParams(data["fix"]["params"]))
    return replace(finding, message=data["message"], evidence=data["evidence"], path=data["path"], fix=fix)


@dataclass(frozen=True)
class ShownParams(FixParams):
    """A fix's params as a report shows them: plain data, redacted like the rest of the finding."""

    values: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.values)


def _judged(row: EnvRow, findings: list[Finding], codes: Mapping[str, Code], redact: Redactor) -> JudgedRow:
    about = sorted(
        {
            f.code
            for f in findings
            if f.severity is not Severity.INFO
            and ((row.prefixes and f.code.startswith(row.prefixes)) or (f.code in codes and row.name in codes[f.code].concerns))
        }
    )
    judging = bool(row.prefixes) or any(row.name in code.concerns for code in codes.values())
    # a row no code judges (the OS, the CPU model) is shown, never called "ok"
    judged = ", ".join(about) if about else NOT_JUDGED_ROW if judging and not row.known else "ok" if judging else "—"
    return JudgedRow(redact.text(row.name), redact.text(row.value), judged)


def _redacted_metric(metric: Metric, redact: Redactor) -> Metric:
    samples = tuple(Sample({k: redact.text(str(v)) for k, v in s.labels.items()}, s.value) for s in metric.samples)
    return replace(metric, samples=samples)


def _redacted_block(block: HtmlBlock, redact: Redactor) -> HtmlBlock:
    rows = tuple((redact.text(a), redact.text(b)) for a, b in block.rows)
    chart = block.chart
    if chart is not None:
        series = tuple(Series(redact.text(s.label), s.points) for s in chart.series)
        chart = Chart(chart.x_label, chart.y_label, series, chart.log_x)
    return HtmlBlock(redact.text(block.title), rows, chart)
