"""node_exporter textfile-collector output: findings, check states and durations, and whatever
metrics the features' facts declare (bandwidth, decode ceilings…)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..engine.facts import Metric, Sample
from ..engine.findings import State
from .view import ReportView


def _label(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: dict[str, Any]) -> str:
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in labels.items()) + "}"


def _core_metrics(view: ReportView) -> list[Metric]:
    counts = Counter((f.code, f.severity.value, f.check) for f in view.findings)
    findings = tuple(Sample({"code": c, "severity": s, "check": k}, n) for (c, s, k), n in sorted(counts.items()))
    states = tuple(
        Sample({"check": r.check, "state": state.value}, 1.0 if r.state is state else 0.0) for r in view.results for state in State
    )
    durations = tuple(Sample({"check": r.check}, r.duration_s) for r in view.results)
    return [
        Metric("decode_doctor_findings", "Findings by code and severity.", findings),
        Metric("decode_doctor_check_state", "1 for each check's state in the last run.", states),
        Metric("decode_doctor_check_duration_seconds", "How long each check ran.", durations),
    ]


def render_prometheus(view: ReportView) -> str:
    host = view.meta.get("host", "")
    exit_code = Metric(
        "decode_doctor_exit_code",
        "The run's exit code (0 clean, 1 findings at or above --fail-on, 3 a check reached no verdict).",
        (Sample({}, view.exit_code),),
    )
    families: dict[str, tuple[str, list[Sample]]] = {}  # two facts may share a metric: its samples join
    for metric in [*_core_metrics(view), *view.metrics, exit_code]:
        families.setdefault(metric.name, (metric.help, []))[1].extend(metric.samples)
    lines: list[str] = []
    for name, (help_text, samples) in families.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        lines.extend(f"{name}{_labels({'host': host, **s.labels})} {s.value:g}" for s in samples)
    return "\n".join(lines) + "\n"
