"""node_exporter textfile-collector output: findings, check states and durations, bandwidth, ceilings."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .model import State
from .report import Report


def _label(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: Any) -> str:
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in labels.items()) + "}"


def render_prometheus(report: Report) -> str:
    host = report.meta.get("host", "")
    lines: list[str] = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[dict[str, Any], float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            lines.append(f"{name}{_labels(host=host, **labels)} {value:g}")

    counts = Counter((f.code, f.severity.value, f.check) for f in report.findings)
    metric("decode_doctor_findings", "gauge", "Findings by code and severity.", [({"code": c, "severity": s, "check": k}, n) for (c, s, k), n in sorted(counts.items())])
    metric("decode_doctor_check_state", "gauge", "1 for each check's state in the last run.", [({"check": r.check, "state": state.value}, 1.0 if r.state is state else 0.0) for r in report.results for state in State])
    metric("decode_doctor_check_duration_seconds", "gauge", "How long each check ran.", [({"check": r.check}, r.duration_s) for r in report.results])
    bandwidth, ceilings = [], []
    for result in report.results:
        cpu = result.facts.get("bandwidth", {}).get("cpu") if result.facts.get("bandwidth") else None
        if cpu:
            bandwidth += [({"device": "cpu", "kind": "read"}, cpu["read_gbps"]), ({"device": "cpu", "kind": "copy"}, cpu["copy_gbps"])]
        for gpu in (result.facts.get("bandwidth") or {}).get("gpus", []):
            bandwidth.append(({"device": f"cuda:{gpu['index']}", "kind": "copy"}, gpu["copy_gbps"]))
    for finding in report.findings:
        if finding.code == "DEC001":
            for device, budget in finding.evidence.get("budgets", {}).items():
                if budget.get("tps_per_sequence"):
                    ceilings.append(({"model": finding.evidence.get("model", {}).get("path", ""), "device": device, "context": budget["context"]}, budget["tps_per_sequence"]))
    metric("decode_doctor_memory_bandwidth_gbps", "gauge", "Measured memory bandwidth in GB/s.", bandwidth)
    metric("decode_doctor_decode_ceiling_tokens_per_second", "gauge", "Decode tokens/s ceiling per sequence.", ceilings)
    metric("decode_doctor_exit_code", "gauge", "The run's exit code (0 clean, 1 findings at or above --fail-on).", [({}, report.exit_code)])
    return "\n".join(lines) + "\n"
