"""node_exporter textfile-collector output, by the conventions of node_exporter's collectors and
dcgm-exporter: base units in names, low-cardinality labels (no paths, no free text), exact values,
the run's verdict and exit code, the last run's and the last complete run's timestamps, a
build-info gauge; then whatever metrics the features' facts declare (bandwidth, decode ceilings…).

Every series carries the host's name (`host`): node_exporter adds `instance`, which is an address.
"""

from __future__ import annotations

import datetime as dt
import math
import platform
import re
import time
from collections import Counter
from dataclasses import dataclass

from ..engine.facts import Metric, Sample
from ..engine.findings import Outcome, Severity, Verdict
from .view import ReportView

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
LAST_SUCCESS = "decode_doctor_last_success_timestamp_seconds"
EXACT_INTEGER = 2**63
EARLIEST = 1577836800.0  # 2020-01-01: no decode-doctor run was earlier
FAILED_EXIT = 2  # the exit code of an agent run that failed to write what it was asked to
COUNTERS = frozenset({"decode_doctor_agent_failed_runs_total"})


@dataclass(frozen=True)
class Schedule:
    """What a scheduled run knows beyond its report: when the last complete run ended (carried from the
    previous textfile, or kept by the agent) and how often runs come (the agent's interval)."""

    last_success: float | None = None
    interval_s: float | None = None
    textfiles_beside: int | None = None  # other decode-doctor textfiles in the agent's directory
    failed_runs: int | None = None  # the agent's runs that failed since it started (this one included)
    run_failed: bool | None = None  # this run failed to write all it was asked to (its JSON report): it exits 2


def value_text(value: float) -> str:
    """A sample's value, exactly: integers as integers (3221221376, never 3.22122e+09), other numbers
    as the shortest text that reads back as the same float, NaN and infinities as Prometheus spells them."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < EXACT_INTEGER:
        return str(int(value))
    return repr(float(value))


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in labels.items()) + "}"


def run_times(view: ReportView) -> tuple[float | None, float]:
    """(when the run started, how long it took) from the report's meta; None when not recorded."""
    duration = view.meta.get("duration_s")
    seconds = float(duration) if isinstance(duration, int | float) and math.isfinite(duration) and duration >= 0 else 0.0
    try:
        started = dt.datetime.fromisoformat(str(view.meta.get("started"))).timestamp()
    except ValueError:
        return None, seconds
    return started, seconds


def last_success(view: ReportView, schedule: Schedule) -> float | None:
    """This run's end when it was complete (every check judged everything it was given), else the last one's."""
    started, duration = run_times(view)
    if view.complete and started is not None:
        return round(started + duration, 3)
    return schedule.last_success


def _core_metrics(view: ReportView, schedule: Schedule) -> list[Metric]:
    counts = Counter((f.code, f.severity.value, f.check) for f in view.findings)
    findings = tuple(Sample({"code": c, "severity": s, "check": k}, n) for (c, s, k), n in sorted(counts.items()))
    by_severity = Counter(f.severity for f in view.findings)
    severities = tuple(Sample({"severity": s.value}, by_severity[s]) for s in Severity)
    left_out = Counter(
        (i.code, i.check, "not_selected" if i.selector == "not selected" else "ignored") for i in view.ignored
    )  # the selector itself is the user's text: only its kind is a label
    ignored = tuple(Sample({"code": c, "check": k, "why": w}, n) for (c, k, w), n in sorted(left_out.items()))
    states = tuple(
        Sample({"check": r.check, "state": outcome.value}, 1 if r.outcome is outcome else 0) for r in view.results for outcome in Outcome
    )
    unjudged = tuple(Sample({"check": r.check}, len(r.not_judged)) for r in view.results)
    accepted = tuple(Sample({"check": check, "gap": name}, 1) for check, name in sorted({(c, a.gap) for c, a in view.accepted_gaps()}))
    durations = tuple(Sample({"check": r.check}, round(r.duration_s, 3)) for r in view.results)
    verdict = view.verdict
    verdicts = tuple(Sample({"verdict": v.value}, 1 if v is verdict else 0) for v in Verdict)
    started, duration = run_times(view)
    found = [
        Metric("decode_doctor_findings", "Findings kept in the last run, by code, severity and check.", findings),
        Metric("decode_doctor_findings_by_severity", "Findings kept in the last run, by severity.", severities),
        Metric(
            "decode_doctor_findings_left_out", "Findings left out by --ignore (why=ignored) or the selection (why=not_selected).", ignored
        ),
        Metric(
            "decode_doctor_check_state", "1 for the state each check ended in (not_judged: something it was given went unjudged).", states
        ),
        Metric("decode_doctor_check_not_judged", "What each check was given and could not judge, counted.", unjudged),
        Metric("decode_doctor_check_duration_seconds", "How long each check ran.", durations),
        Metric("decode_doctor_verdict", "1 for the run's verdict: ready, findings, or incomplete (something went unjudged).", verdicts),
        Metric(
            "decode_doctor_exit_code",
            "The run's exit code under its --fail-on (0 clean, 1 findings at or above it, 3 incomplete).",
            (Sample({}, FAILED_EXIT if schedule.run_failed else view.exit_code),),
        ),
        Metric("decode_doctor_run_duration_seconds", "How long the last run took.", (Sample({}, round(duration, 3)),)),
    ]
    if accepted:  # the series exist while a rule accepts the gap, as an alert's condition would
        found.append(
            Metric(
                "decode_doctor_accepted_gap",
                "1 for each gap a check's documented rule accepts (judged in part; the verdict stays complete), by the rule's name.",
                accepted,
            ),
        )
    if started is not None:
        found.append(
            Metric("decode_doctor_last_run_timestamp_seconds", "When the last run started (Unix time).", (Sample({}, round(started, 3)),))
        )
    success = last_success(view, schedule)
    if success is not None:
        found.append(
            Metric(LAST_SUCCESS, "When the last complete run (every check judged everything) ended (Unix time).", (Sample({}, success),))
        )
    if schedule.interval_s is not None:
        found.append(Metric("decode_doctor_interval_seconds", "How often the agent runs the checks.", (Sample({}, schedule.interval_s),)))
    if schedule.failed_runs is not None:
        help_text = "The agent's runs since it started that failed to write what they were asked to (its stderr says why)."
        found.append(Metric("decode_doctor_agent_failed_runs_total", help_text, (Sample({}, schedule.failed_runs),)))
    if schedule.run_failed is not None:
        help_text = "1 when the last run failed to write what it was asked to (its JSON report): it exited 2."
        found.append(Metric("decode_doctor_agent_last_run_failed", help_text, (Sample({}, int(schedule.run_failed)),)))
    found.append(
        Metric(
            "decode_doctor_load_errors",
            "Checks or plugins that failed to load: what they would judge was not judged.",
            (Sample({}, len(view.load_errors)),),
        )
    )
    if schedule.textfiles_beside is not None:
        help_text = "Other decode-doctor textfiles in the agent's directory (node_exporter drops the series they share)."
        found.append(Metric("decode_doctor_textfiles_beside", help_text, (Sample({}, schedule.textfiles_beside),)))
    info = {"version": str(view.meta.get("version", "")), "python": platform.python_version()}
    found.append(Metric("decode_doctor_build_info", "decode-doctor's version and Python, as labels; always 1.", (Sample(info, 1),)))
    return found


def render_prometheus(view: ReportView, schedule: Schedule | None = None) -> str:
    host = str(view.meta.get("host", ""))
    families: dict[str, tuple[str, list[Sample]]] = {}  # two facts may share a metric: its samples join
    for metric in [*_core_metrics(view, schedule or Schedule()), *view.metrics]:
        if not METRIC_NAME.fullmatch(metric.name):
            continue
        families.setdefault(metric.name, (metric.help, []))[1].extend(metric.samples)
    lines: list[str] = []
    for name, (help_text, samples) in families.items():
        kind = "counter" if name in COUNTERS else "gauge"
        lines += [f"# HELP {name} {_help(help_text)}", f"# TYPE {name} {kind}"]
        seen: set[tuple[tuple[str, str], ...]] = set()
        for sample in samples:
            labels = {"host": host, **{k: str(v) for k, v in sample.labels.items() if LABEL_NAME.fullmatch(k) and k != "host"}}
            key = tuple(labels.items())
            if key in seen:  # a duplicate series fails the whole scrape: the first stands
                continue
            seen.add(key)
            lines.append(f"{name}{_labels(labels)} {value_text(sample.value)}")
    return "\n".join(lines) + "\n"


def previous_success(text: str) -> float | None:
    """The last-success stamp a previous textfile holds (its first sample of it), for a run that was not complete."""
    for line in text.splitlines():
        if line.startswith(LAST_SUCCESS) and not line.startswith(LAST_SUCCESS + "_"):
            try:
                value = float(line.rsplit(" ", 1)[1])
            except (ValueError, IndexError):
                return None
            return value if EARLIEST <= value <= time.time() + 300 else None  # a stamp from the future or before 2020 is garbage
    return None
