"""GPU health on a fleet: the metrics GpuHealthFacts declares, rendered into the agent's textfile by the
project's Prometheus renderer, parse and stay bounded (one state per GPU, codes and actions from the
catalog); a real Prometheus scraping that textfile through node_exporter, with the shipped rules, fires
DecodeDoctorGpuNeedsReset for a GPU that needs a reset and clears it when the next run finds it healthy."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any, TypeVar

import pytest

from decode_doctor.checks.gpuhealth.codes import ACTIONS, Action
from decode_doctor.checks.gpuhealth.contract import GpuHealth, GpuHealthFacts, HealthState

from .support.services import node_exporter, prometheus, prometheus_api, wait_until
from .test_fleet import DASHBOARD, RULES, _alerts, readme_queries, samples

T = TypeVar("T")
HOST = "gpu-node-17"
STATES = {state.value for state in HealthState}
ACTION_NAMES = {action.value for action in Action}
GPU_PANELS = ("GPUs by health state", "GPUs not healthy: conditions and actions")

NEEDS_RESET = GpuHealthFacts(
    source="NVML",
    gpus=(
        GpuHealth(0, "NVIDIA H100 80GB HBM3", "GPU-5d3c0a4e-6f1b-4c2d-9e8f-0a1b2c3d4e5f"),
        GpuHealth(1, "NVIDIA H100 80GB HBM3", "GPU-7a9b8c6d-1e2f-4a3b-8c7d-6e5f4a3b2c1d", ("GPH020", "GPH023", "GPH021", "GPH011")),
    ),
)
HEALTHY = GpuHealthFacts(source="NVML", gpus=tuple(GpuHealth(g.index, g.name, g.uuid) for g in NEEDS_RESET.gpus))
EVERY_STATE = GpuHealthFacts(
    source="nvidia-smi -q",
    gpus=(
        GpuHealth(0, "NVIDIA H200", "GPU-00000000-0000-0000-0000-000000000000"),
        GpuHealth(1, "NVIDIA H200", "GPU-11111111-1111-1111-1111-111111111111", ("GPH001", "GPH011", "GPH021")),
        GpuHealth(2, "NVIDIA H200", "GPU-22222222-2222-2222-2222-222222222222", ("GPH023", "GPH020", "GPH020")),  # repeated: one series
        GpuHealth(3, "NVIDIA H200", None, ("GPH024", "GPH040", "GPH999")),  # no UUID shown; an unknown code is no label
    ),
    host_conditions=("GPH041",),
)


def textfile(facts: GpuHealthFacts, started: float | None = None) -> str:
    """The agent's textfile for a run whose gpu-health check published facts, through the project's renderer."""
    from decode_doctor.app.service import run_meta
    from decode_doctor.engine.findings import CheckResult, State
    from decode_doctor.reports.prometheus import Schedule, render_prometheus
    from decode_doctor.reports.report import Report
    from decode_doctor.reports.view import build_view

    state = State.PASSED if all(g.state is HealthState.HEALTHY for g in facts.gpus) else State.FINDINGS
    result = CheckResult("gpu-health", state, 0.2, facts=facts)
    meta = run_meta(time.time() if started is None else started, HOST, "/", ["decode-doctor", "agent"])
    return render_prometheus(build_view(Report([result], [], [], meta)), Schedule(interval_s=900))


def write_textfile(directory: Path, facts: GpuHealthFacts) -> None:
    """Replaced whole, as the agent does: node_exporter never reads half a run."""
    from decode_doctor.engine.files import replace_file

    replace_file(directory / "decode_doctor.prom", textfile(facts).encode())


def started(stack: ExitStack, service: AbstractContextManager[T]) -> T:
    """A Debian service for this test, or a skip where it is not installed; in CI (CI=true) a failure."""
    try:
        return stack.enter_context(service)
    except FileNotFoundError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))


# --- the textfile -----------------------------------------------------------------------------------------


def test_the_textfile_holds_one_state_per_gpu_and_conditions_from_the_catalog_only():
    families = samples(textfile(EVERY_STATE))
    states = families["decode_doctor_gpu_health_state"]
    assert all(set(labels) == {"host", "gpu", "uuid", "state"} and labels["host"] == HOST for labels, _ in states)
    assert {labels["state"] for labels, _ in states} == STATES
    assert len(states) == len(STATES) * len(EVERY_STATE.gpus)  # every state of every GPU, 0 or 1: no series appears with a change
    by_gpu: dict[tuple[str, str], dict[str, float]] = {}
    for labels, value in states:
        by_gpu.setdefault((labels["gpu"], labels["uuid"]), {})[labels["state"]] = value
    assert {gpu: {s for s, v in values.items() if v == 1} for gpu, values in by_gpu.items()} == {
        ("0", "GPU-00000000-0000-0000-0000-000000000000"): {"healthy"},
        ("1", "GPU-11111111-1111-1111-1111-111111111111"): {"degraded"},  # reseat and cooling; GPH021 is history (none)
        ("2", "GPU-22222222-2222-2222-2222-222222222222"): {"reset"},
        ("3", ""): {"rma"},  # the worst of rma and reset
    }
    assert all(sum(values.values()) == 1 and set(values.values()) <= {0, 1} for values in by_gpu.values())

    conditions = families["decode_doctor_gpu_condition"]
    assert all(set(labels) == {"host", "gpu", "uuid", "code", "action"} and value == 1 for labels, value in conditions)
    assert all(labels["code"] in ACTIONS and labels["action"] == ACTIONS[labels["code"]].value for labels, _ in conditions)
    assert {labels["action"] for labels, _ in conditions} <= ACTION_NAMES
    found = sorted((labels["gpu"], labels["code"], labels["action"]) for labels, _ in conditions)
    assert found == [
        ("", "GPH041", "configure"),  # the node's fabric: no GPU, no UUID
        ("1", "GPH001", "reseat"),
        ("1", "GPH011", "cooling"),
        ("1", "GPH021", "none"),
        ("2", "GPH020", "reset"),
        ("2", "GPH023", "reset"),
        ("3", "GPH024", "rma"),
        ("3", "GPH040", "reset"),
    ]
    for labels, _ in [*states, *conditions]:
        assert labels["gpu"] == "" or labels["gpu"].isdigit(), labels
        assert all("/" not in v and "\n" not in v and " " not in v for v in labels.values()), labels  # no paths, no names


def test_a_node_without_gpus_declares_no_gpu_series_and_healthy_gpus_no_condition():
    assert "decode_doctor_gpu_health_state{" not in textfile(GpuHealthFacts(source="NVML"))
    healthy = samples(textfile(HEALTHY))
    assert "decode_doctor_gpu_condition" not in healthy
    assert sorted(labels["gpu"] for labels, value in healthy["decode_doctor_gpu_health_state"] if value == 1) == ["0", "1"]
    assert {labels["state"] for labels, value in healthy["decode_doctor_gpu_health_state"] if value == 1} == {"healthy"}


def test_promtool_accepts_the_gpu_health_textfile():
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is not installed (.ci/run installs Debian's prometheus)")
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    for facts in (EVERY_STATE, HEALTHY, GpuHealthFacts(source="NVML")):
        checked = subprocess.run([promtool, "check", "metrics"], input=textfile(facts), capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr


# --- a real Prometheus --------------------------------------------------------------------------------------


def _gpu_alerts(url: str) -> list[dict[str, Any]]:
    data = prometheus_api(url, "alerts")
    assert isinstance(data, dict)
    return [a for a in data["alerts"] if str(a["labels"]["alertname"]).startswith("DecodeDoctorGpu")]


def test_a_real_prometheus_fires_needs_reset_for_a_gpu_and_clears_it_when_the_next_run_finds_it_healthy(tmp_path):
    """One node's textfile, scraped by node_exporter and Prometheus every second with the shipped rules:
    GPU 1 needs a reset (GPH020, GPH023), GPU 0 is healthy; the next run finds both healthy."""
    directory = tmp_path / "textfile"
    directory.mkdir()
    write_textfile(directory, NEEDS_RESET)
    with ExitStack() as stack:
        target = started(stack, node_exporter(directory))
        url = started(stack, prometheus([target], [RULES], tmp_path))
        fired = wait_until(lambda: _alerts(url, "DecodeDoctorGpuNeedsReset"), 60, "the needs-reset alert")
        assert fired == {HOST: "firing"}
        (alert,) = [a for a in _gpu_alerts(url) if a["labels"]["alertname"] == "DecodeDoctorGpuNeedsReset"]
        assert alert["labels"]["gpu"] == "1" and alert["labels"]["uuid"] == NEEDS_RESET.gpus[1].uuid
        assert alert["annotations"]["summary"] == f"{HOST}: GPU 1 needs a reset (GPH020, GPH023)"  # the reset codes, joined on the GPU
        assert "sudo nvidia-smi -r -i 1" in alert["annotations"]["description"]
        assert [a["labels"]["alertname"] for a in _gpu_alerts(url)] == ["DecodeDoctorGpuNeedsReset"]  # degraded waits its 30 minutes
        # the dashboard's GPU panels and the README's queries answer with this GPU
        panels = {p["title"]: p for p in json.loads(DASHBOARD.read_text())["panels"] if p["title"] in GPU_PANELS}
        assert sorted(panels) == sorted(GPU_PANELS)
        by_title = {title: [t["expr"].replace("$host", ".*") for t in panel["targets"]] for title, panel in panels.items()}
        for expression in [e for expressions in by_title.values() for e in expressions] + readme_queries():
            prometheus_api(url, "query", query=expression)
        (state_query,), (table_query,) = by_title[GPU_PANELS[0]], by_title[GPU_PANELS[1]]
        by_state = prometheus_api(url, "query", query=state_query)
        assert isinstance(by_state, dict)
        assert {r["metric"]["state"]: r["value"][1] for r in by_state["result"]} == {
            "healthy": "1",
            "degraded": "0",
            "reset": "1",
            "rma": "0",
        }
        rows = prometheus_api(url, "query", query=table_query)
        assert isinstance(rows, dict)
        assert sorted((r["metric"]["gpu"], r["metric"]["state"], r["metric"]["code"], r["metric"]["action"]) for r in rows["result"]) == [
            ("1", "reset", "GPH011", "cooling"),
            ("1", "reset", "GPH020", "reset"),
            ("1", "reset", "GPH021", "none"),
            ("1", "reset", "GPH023", "reset"),
        ]
        # the next run: the GPU was reset and is healthy
        write_textfile(directory, HEALTHY)
        wait_until(lambda: not _alerts(url, "DecodeDoctorGpuNeedsReset"), 30, "the needs-reset alert to clear")
        assert _gpu_alerts(url) == []
