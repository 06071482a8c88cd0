"""decode-doctor in Kubernetes' own terms: node-problem-detector runs the exact command its shipped
plugin config names (deploy/npd/) on fixture hosts and reads NPD's contract back (exit 0 ok, 1 problem,
2 unknown; at most 80 bytes on stdout); the config holds to NPD's own validation; the kustomize base
builds with kubectl and validates; the PrometheusRule is what its generator makes of the one rules
file; the pod is sized and scoped as measured and written down."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import FIXTURES, REPO
from .support.nvml import build_double

DEPLOY = REPO / "deploy"
NPD_CONFIG = DEPLOY / "npd/decode-doctor-monitor.json"
GENERATOR = DEPLOY / "prometheus-operator/generate.py"
H200 = "NVIDIA H200|143771|{bus}|GPU-{index}|0"
DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")  # Go's time.ParseDuration, as NPD parses them


def seconds(text: str) -> float:
    unit = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * unit[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)(ns|us|µs|ms|s|m|h)", text))


def npd_config() -> dict[str, Any]:
    return json.loads(NPD_CONFIG.read_text())


def npd_command(root: Path) -> list[str]:
    """The one rule's command line as NPD runs it (path, then args), the node's /host being a fixture
    root and the image's /usr/local/bin/decode-doctor this environment's."""
    (rule,) = npd_config()["rules"]
    assert rule["path"] == "/usr/local/bin/decode-doctor"  # where deploy/Dockerfile links it
    args = [a.replace("=/host", f"={root}") if a == "--root=/host" else a for a in rule["args"]]
    return [str(Path(sys.executable).parent / "decode-doctor"), *args]


def run_plugin(root: Path, tmp_path: Path, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/sbin:/usr/bin:/sbin:/bin",  # no CUDA toolkit, as in the image
        "HOME": str(tmp_path),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "NO_COLOR": "1",
        **(extra or {}),
    }
    timeout = seconds(npd_config()["rules"][0]["timeout"])
    return subprocess.run(npd_command(root), capture_output=True, env=env, timeout=timeout)  # bytes: NPD cuts bytes


def message(proc: subprocess.CompletedProcess[bytes]) -> str:
    """What NPD keeps: stdout trimmed, at most max_output_length bytes (it would cut the rest)."""
    out = proc.stdout.strip()
    assert 0 < len(out) <= npd_config()["pluginConfig"]["max_output_length"], out
    assert b"\n" not in out
    return out.decode("utf-8")  # whole characters: never cut inside one


# --- node-problem-detector's plugin -----------------------------------------------------------------------


def test_the_npd_config_passes_npds_own_validation():
    """The checks of NPD's CustomPluginConfig.ApplyConfiguration and Validate, and only its known fields."""
    config = npd_config()
    assert set(config) <= {"plugin", "pluginConfig", "source", "conditions", "rules", "metricsReporting"}
    assert config["plugin"] == "custom" and config["source"]
    plugin = config["pluginConfig"]
    known = {
        "invoke_interval",
        "timeout",
        "max_output_length",
        "concurrency",
        "enable_message_change_based_condition_update",
        "skip_initial_status",
    }
    assert set(plugin) <= known
    assert DURATION.match(plugin["invoke_interval"]) and DURATION.match(plugin["timeout"])
    assert plugin["max_output_length"] == 80 and plugin["concurrency"] >= 1
    conditions = {c["type"] for c in config["conditions"]}
    for condition in config["conditions"]:
        assert set(condition) == {"type", "reason", "message"} and len(condition["message"]) <= 80
    for rule in config["rules"]:
        assert set(rule) <= {"type", "condition", "reason", "path", "args", "timeout", "invoke_interval"}
        assert rule["type"] in ("temporary", "permanent")
        assert DURATION.match(rule["timeout"]) and seconds(rule["timeout"]) <= seconds(plugin["timeout"])
        if rule["type"] == "permanent":
            assert rule["condition"] in conditions  # "Permanent problem … does not have preset default condition"
    # the agent's own per-check timeout fits inside NPD's, so a slow check is not judged rather than killed
    (rule,) = config["rules"]
    per_check = next(a for a in rule["args"] if a.startswith("--timeout="))
    assert float(per_check.split("=", 1)[1]) < seconds(rule["timeout"])
    assert rule["args"][0] == "npd" and "--same-host" in rule["args"]


def test_npds_command_on_a_node_with_an_xid_79_is_a_problem(tmp_path):
    proc = run_plugin(FIXTURES / "hosts/gpu-node-xid", tmp_path)
    assert proc.returncode == 1, proc.stderr.decode()[-2000:]
    assert message(proc) == "errors: GPU014"


def test_npds_command_on_a_healthy_node_is_ok(tmp_path):
    proc = run_plugin(FIXTURES / "hosts/healthy-server", tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert message(proc) == "no error finding; no GPU needs a reset or RMA"


def test_npds_command_on_a_node_it_cannot_judge_is_unknown_never_ok(tmp_path):
    """gpu-node has the driver loaded and no NVML here: the GPUs are not judged, so NPD keeps Unknown."""
    proc = run_plugin(FIXTURES / "hosts/gpu-node", tmp_path)
    assert proc.returncode == 2, proc.stderr.decode()[-2000:]
    assert message(proc).startswith("no error seen; not judged: gpu")


def test_a_usage_error_is_unknown_and_says_nothing_npd_would_take_for_a_message(tmp_path):
    proc = subprocess.run([*npd_command(FIXTURES / "hosts/healthy-server"), "--select=no-such-check"], capture_output=True)
    assert proc.returncode == 2 and proc.stdout == b""


@pytest.fixture(scope="module")
def nvml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_double(tmp_path_factory.mktemp("nvml"))


def test_gpus_needing_a_reset_or_an_rma_are_named_within_80_bytes_in_both_languages(nvml, tmp_path):
    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "hosts/gpu-h200", root, symlinks=True)
    spec = ";".join(H200.format(bus=f"00000000:{0x10 + i:02X}:00.0", index=i) for i in range(4))
    health = ";".join(["", "remap_failure=1", "dbe_volatile=2,dbe_aggregate=2", "nvlink_down=0x4"])
    extra = {"LD_LIBRARY_PATH": str(nvml), "DD_NVML_GPUS": spec, "DD_NVML_HEALTH": health, "NVIDIA_VISIBLE_DEVICES": "all"}
    proc = run_plugin(root, tmp_path, extra)
    assert proc.returncode == 1, proc.stderr.decode()[-2000:]
    said = message(proc)
    assert said.startswith("GPU 1 needs an RMA; GPU 2,3 needs a reset; errors: GPH020"), said
    chinese = run_plugin(root, tmp_path, {**extra, "DECODE_DOCTOR_LANG": "zh-CN"})
    said = message(chinese)  # three bytes a character: cut on one, and marked
    assert chinese.returncode == 1 and said.startswith("GPU 1 需要 RMA；GPU 2,3 需要复位；错误级问题项：GPH020"), said


def test_the_npd_line_is_cut_on_a_character_boundary_and_marked():
    from decode_doctor.reports.npd import MAX_BYTES, fitted

    assert fitted("ok\n") == "ok"
    long = "错误: " + ",".join(f"GPU{n:03d}" for n in range(40))
    cut = fitted(long)
    assert len(cut.encode()) <= MAX_BYTES and cut.endswith("…") and long.startswith(cut[:-1])


# --- the kustomize base and the PrometheusRule ------------------------------------------------------------


def kustomize(path: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (Debian: kubernetes-client)")
    proc = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def validate(tmp_path: Path, docs: list[dict[str, Any]]) -> None:
    validator = Path(sys.executable).parent / "kubernetes-validate"
    if not validator.exists():
        pytest.skip("kubernetes-validate is not installed (the test extra)")
    built = tmp_path / "built.yaml"
    built.write_text(yaml.safe_dump_all(docs))
    proc = subprocess.run([str(validator), "--strict", "--quiet", str(built)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_kustomize_base_builds_validates_and_brings_its_privileged_namespace(tmp_path):
    docs = kustomize(DEPLOY)
    validate(tmp_path, docs)
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {"Namespace", "PriorityClass", "DaemonSet"}
    labels = kinds["Namespace"]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"  # hostPath volumes are beyond baseline
    assert kinds["DaemonSet"]["metadata"]["namespace"] == kinds["Namespace"]["metadata"]["name"] == "decode-doctor"
    priority = kinds["PriorityClass"]
    assert priority["value"] <= 0 and priority["preemptionPolicy"] == "Never"  # never above, never preempting, a serving pod


def test_the_prometheusrule_is_generated_from_the_one_rules_file():
    spec = importlib.util.spec_from_file_location("generate", GENERATOR)
    assert spec is not None and spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    assert (DEPLOY / "prometheus-operator/prometheusrule.yaml").read_text() == generate.render(), (
        "run deploy/prometheus-operator/generate.py"
    )
    (rule,) = kustomize(DEPLOY / "prometheus-operator")
    source = yaml.safe_load((DEPLOY / "prometheus/decode-doctor.rules.yml").read_text())
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["kind"] == "PrometheusRule"
    assert rule["spec"]["groups"] == source["groups"] and rule["metadata"]["namespace"] == "decode-doctor"


# --- the pod, sized and scoped ---------------------------------------------------------------------------


def _mebibytes(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1.0, "Gi": 1024.0}
    return float(quantity[:-2]) * units[quantity[-2:]]


def test_the_pod_is_sized_from_measurement_and_asks_only_for_what_it_says_it_needs():
    (daemonset,) = [d for d in yaml.safe_load_all((DEPLOY / "daemonset.yaml").read_text()) if d and d["kind"] == "DaemonSet"]
    spec = daemonset["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    resources = container["resources"]
    # 37 MB idle; 334 MiB (256 MiB buffer) to 588 MiB (512 MiB buffer) at the bandwidth probe's peak
    assert 37 <= _mebibytes(resources["requests"]["memory"]) <= 128
    assert _mebibytes(resources["limits"]["memory"]) > 588
    # no host log directory: the journal alone, read-only; the shared textfile directory is not mounted
    paths = {v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert "/var/log" not in paths and "/var/lib/node_exporter/textfile" not in paths and "/var/log/journal" in paths
    (init,) = spec["initContainers"]
    assert "chgrp" not in " ".join(init["args"]) and all(m["mountPath"] == "/data" for m in init["volumeMounts"])
    assert init["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]}
    # liveness means a fresh textfile; the agent takes its textfile away when it stops
    probe = container["livenessProbe"]["exec"]["command"]
    assert "/textfile/decode_doctor.prom" in probe[-1] and "-mmin -45" in probe[-1]
    assert "lifecycle" not in container and "--remove-on-stop" in container["args"]  # the agent removes it, after its last write
    assert "--textfile-directory=/textfile" in container["args"]
    # every hostPath is said with its reason in the manifest's header
    header = (DEPLOY / "daemonset.yaml").read_text().split("apiVersion:", 1)[0]
    for path in paths:
        assert re.search(rf"{re.escape(path)}\b", header) or path.startswith("/var/lib/decode-doctor/"), path


def test_the_liveness_probe_passes_on_a_fresh_textfile_and_fails_on_a_stale_or_missing_one(tmp_path):
    (daemonset,) = [d for d in yaml.safe_load_all((DEPLOY / "daemonset.yaml").read_text()) if d and d["kind"] == "DaemonSet"]
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    command = [part.replace("/textfile/", f"{tmp_path}/") for part in container["livenessProbe"]["exec"]["command"]]
    textfile = tmp_path / "decode_doctor.prom"
    assert subprocess.run(command).returncode != 0  # none written yet
    textfile.write_text("decode_doctor_exit_code 0\n")
    assert subprocess.run(command).returncode == 0
    old = time.time() - 46 * 60
    os.utime(textfile, (old, old))
    assert subprocess.run(command).returncode != 0
