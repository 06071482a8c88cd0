"""The doctor on a GPU fleet: the node agent under Kubernetes sees the GPUs (NVML through a test double
of libnvidia-ml.so.1, under the real nvidia-ml-py), its textfile is scraped by Debian's node_exporter
and Prometheus, and the shipped alert rules fire and clear there; the manifests validate offline, and
the image's build context holds what the install needs."""

from __future__ import annotations

import grp
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest
import yaml

from .conftest import FIXTURES, REPO, python_for, run_dd
from .support.harness import cli
from .support.nvml import build_double
from .support.services import node_exporter, prometheus, prometheus_api, wait_until

DEPLOY = REPO / "deploy"
RULES = DEPLOY / "prometheus/decode-doctor.rules.yml"
DASHBOARD = DEPLOY / "grafana/decode-doctor-fleet.json"
TWO_H200 = "NVIDIA H200|143771|00000000:19:00.0|GPU-0|0;NVIDIA H200|143771|00000000:3B:00.0|GPU-1|0"


@pytest.fixture(scope="session")
def nvml_double(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libnvidia-ml.so.1 built from the test double's source; its directory goes on LD_LIBRARY_PATH."""
    return build_double(tmp_path_factory.mktemp("nvml"))


def node_env(nvml: Path | None, tmp_path: Path, gpus: str = TWO_H200, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A node agent's environment: the NVIDIA runtime's library (or none), no CUDA toolkit of this
    machine on PATH (the image has none), its own state directory."""
    python_bin = str(Path(sys.executable).parent)
    env = {"PATH": f"{python_bin}:/usr/sbin:/usr/bin:/sbin:/bin", "XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path)}
    if nvml is not None:
        env.update({"LD_LIBRARY_PATH": str(nvml), "DD_NVML_GPUS": gpus, "NVIDIA_VISIBLE_DEVICES": "all"})
    return {**env, **(extra or {})}


def daemonset() -> dict:
    docs = [d for d in yaml.safe_load_all((DEPLOY / "daemonset.yaml").read_text()) if d]
    return next(d for d in docs if d["kind"] == "DaemonSet")


def daemonset_args(root: Path, textfile: Path, state: Path) -> list[str]:
    """The DaemonSet's own command line, its paths pointed at a fixture host and temporary directories."""
    (container,) = daemonset()["spec"]["template"]["spec"]["containers"]
    moved = {"--root=/host": f"--root={root}", "--textfile-directory=/textfile": f"--textfile-directory={textfile}"}
    args = [moved.get(a, a) for a in container["args"]]
    return [a.replace("=/state/", f"={state}/") for a in args]


def quiet_figure(state: Path, root: Path, age_s: float = 3600) -> None:
    """A bandwidth figure measured on the quiet node an hour ago, as the agent stores it: the agent
    reuses it (--reuse-bandwidth 1d) instead of measuring beside whatever else this machine runs."""
    from decode_doctor.checks.bandwidth.contract import BandwidthFacts, CpuBandwidth, CpuMemory
    from decode_doctor.checks.bandwidth.quiet import STORE, machine_key
    from decode_doctor.engine.context import Context
    from decode_doctor.engine.workers import usable_cpus

    measured = CpuBandwidth(200.0, 150.0, 0.01, 0.01, usable_cpus(), 512 << 20, 12, 1.0, 0.0)  # the agent's thread count
    facts = BandwidthFacts(CpuMemory(measured, None, 2, "performance", "this host"), measured_at=time.time() - age_s)
    record = {"measured_at": facts.measured_at, "machine": machine_key(Context(root=root)), "facts": facts.to_dict()}
    (state / "decode-doctor").mkdir(parents=True, exist_ok=True)
    (state / "decode-doctor" / STORE).write_text(json.dumps(record))


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    from prometheus_client.parser import text_string_to_metric_families

    return {f.name: [(s.labels, s.value) for s in f.samples] for f in text_string_to_metric_families(text)}


def value(text: str, name: str, **labels: str) -> float:
    found = [v for got, v in samples(text)[name] if all(got.get(k) == w for k, w in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return found[0]


# --- the GPUs, seen from a container on the node --------------------------------------------------------


def test_fleet_mode_reports_the_gpus_through_nvml_not_gpu015(nvml_double, tmp_path):
    """A host root with /proc/driver/nvidia and NVIDIA PCI devices but no nvidia-smi: NVML in the container answers."""
    root = FIXTURES / "hosts/gpu-node"
    proc = run_dd("check", "--root", str(root), "--same-host", "--select", "gpu", "--format", "json", env=node_env(nvml_double, tmp_path))
    report = json.loads(proc.stdout)
    assert "GPU015" not in {f["code"] for f in report["findings"]}
    assert "GPU014" not in {f["code"] for f in report["findings"]}  # the Xid 79 in kern.log is an earlier boot's
    gpu = report["facts"]["gpu"]
    assert gpu["source"] == "NVML" and gpu["driver"] == "550.54.15" and gpu["cuda"] == "12.4"
    assert [(d["name"], d["memory_mib"]) for d in gpu["devices"]] == [("NVIDIA H200", 143771)] * 2
    assert report["results"][0]["outcome"] == "passed" and proc.returncode == 0, proc.stdout
    assert report["run"]["host"] == "gpu-node-1"  # the node's /etc/hostname, not the path of --root


def test_without_the_nvidia_runtime_the_loaded_driver_is_named_and_the_rest_not_judged(tmp_path):
    root = FIXTURES / "hosts/gpu-node"
    proc = run_dd("check", "--root", str(root), "--same-host", "--select", "gpu", "--format", "json", env=node_env(None, tmp_path))
    report = json.loads(proc.stdout)
    assert "GPU015" not in {f["code"] for f in report["findings"]}  # the driver is loaded: never "not installed"
    gpu = report["facts"]["gpu"]
    assert gpu["source"] == "/proc/driver/nvidia" and gpu["driver"] == "550.54.15" and len(gpu["devices"]) == 2
    (item,) = report["not_judged"]
    assert item["what"] == "the GPUs' memory and the CUDA version the driver supports"
    assert "runtimeClassName: nvidia" in item["why"] and proc.returncode == 3


def test_the_node_name_comes_from_the_downward_api_and_a_path_never_names_a_host(tmp_path):
    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "hosts/gpu-h200", root)
    env = {"DECODE_DOCTOR_HOST_NAME": "gpu-node-17"}
    named = cli("check", "--root", str(root), "--same-host", "--select", "swappiness", "--format", "prometheus", env=env)
    assert value(named.stdout, "decode_doctor_build_info")  # parses
    assert {labels["host"] for labels, _ in samples(named.stdout)["decode_doctor_verdict"]} == {"gpu-node-17"}
    unnamed = cli("check", "--root", str(root), "--same-host", "--select", "swappiness", "--format", "json")
    assert unnamed.json()["run"]["host"] == "unknown"  # not the container's (a pod's) name, not "/host"
    assert cli("check", "--host-name", "a/b", "--select", "swappiness").exit_code == 2


def test_xid_lines_in_the_hosts_kernel_log_are_read_and_an_unreadable_log_is_not_judged(nvml_double, tmp_path):
    env = node_env(nvml_double, tmp_path)
    root = FIXTURES / "hosts/gpu-node-xid"
    report = json.loads(run_dd("check", "--root", str(root), "--same-host", "--select", "gpu", "--format", "json", env=env).stdout)
    assert [f["code"] for f in report["findings"] if f["severity"] == "error"] == ["GPU014"]
    if python_for("nobody") is None:
        pytest.skip("no interpreter the user nobody can run: the permission half needs another user")
    with tempfile.TemporaryDirectory(prefix="dd-kernlog-") as top:
        os.chmod(top, 0o755)
        host = Path(top) / "host"
        shutil.copytree(root, host)
        shutil.copytree(nvml_double, Path(top) / "nvml")
        os.chmod(Path(top) / "nvml", 0o755)
        (host / "var/log/kern.log").chmod(0o640)  # root:adm 0640, as Debian keeps it; nobody is not in adm
        env = node_env(Path(top) / "nvml", Path(top))
        proc = run_dd("check", "--root", str(host), "--same-host", "--select", "gpu", "--format", "json", env=env, user="nobody")
    report = json.loads(proc.stdout)
    assert {(i["what"], i["why"]) for i in report["not_judged"]} == {
        ("Xid errors and driver events in the kernel log", "/var/log/kern.log: permission denied")
    }
    assert proc.returncode == 3


# --- the agent and its textfile -------------------------------------------------------------------------


def test_the_documented_deployment_exits_1_on_an_error_finding_and_3_on_an_incomplete_node(nvml_double, tmp_path):
    """The DaemonSet's own arguments, with --once: decode_doctor_exit_code is the run's, whatever --fail-on
    the documented cron line once forced (never), and the textfile is written either way."""
    for host, expected, verdict in (("gpu-node-xid", 1, "findings"), ("gpu-h200", 3, "incomplete"), ("gpu-node", 0, "ready")):
        textfile, state = tmp_path / host / "textfile", tmp_path / host / "state"
        textfile.mkdir(parents=True)
        root = FIXTURES / "hosts" / host
        quiet_figure(state, root)
        env = node_env(nvml_double, tmp_path, extra={"XDG_STATE_HOME": str(state), "DECODE_DOCTOR_HOST_NAME": f"{host}-node"})
        proc = run_dd(*daemonset_args(root, textfile, state), "--once", env=env)
        assert proc.returncode == expected, proc.stderr
        text = (textfile / "decode_doctor.prom").read_text()
        assert value(text, "decode_doctor_exit_code") == expected
        assert value(text, "decode_doctor_verdict", verdict=verdict) == 1
        assert re.search(rf"^\S+Z [a-z ]+: .* exit code {expected}, ", proc.stderr, re.M), proc.stderr  # one line per run in the pod's log
        report = json.loads((state / "report.json").read_text())
        assert report["summary"]["outcome"] == verdict and report["run"]["host"] == f"{host}-node"
        reused = value(text, "decode_doctor_memory_bandwidth_bytes_per_second", device="cpu", kind="read")
        assert reused == 200_000_000_000  # the quiet figure, not a measurement beside this test's neighbours
    incomplete = (tmp_path / "gpu-h200/textfile/decode_doctor.prom").read_text()
    assert value(incomplete, "decode_doctor_check_state", check="swappiness", state="not_judged") == 1
    assert value(incomplete, "decode_doctor_check_not_judged", check="swappiness") == 1
    assert "decode_doctor_last_success_timestamp_seconds" not in incomplete  # never complete, so never a success


def need_promtool() -> str:
    """promtool, or a skip; under CI (which installs it) a missing promtool fails: a gate never skips there."""
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is not installed, and CI installs it (.ci/run)")
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    return promtool


def test_every_value_is_exact_and_promtool_accepts_the_textfile(tmp_path):
    root = FIXTURES / "hosts/swap60-rhel7"
    text = cli("check", "--root", str(root), "--select", "swappiness,gpu", "--format", "prometheus").stdout
    assert 'decode_doctor_swap_bytes{host="rhel7-node"} 3221221376\n' in text  # not %g's 3.22122e+09
    assert not re.search(r"\d\.\d+e[+-]\d", text)
    assert value(text, "decode_doctor_build_info", version=__import__("decode_doctor").__version__) == 1
    for name, series in samples(text).items():
        assert name.startswith("decode_doctor_"), name
        for labels, _value in series:
            assert all("/" not in v and "\n" not in v for v in labels.values()), (name, labels)  # no paths, no free text
    promtool = need_promtool()
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_ignored_and_unselected_findings_are_counted_and_states_agree_with_them(tmp_path):
    from .support.modelgen import qwen2_7b

    root = FIXTURES / "hosts/swap60-rhel7"
    ignored = cli("check", "--root", str(root), "--select", "swappiness", "--ignore", "SWAP001", "--format", "prometheus").stdout
    assert value(ignored, "decode_doctor_check_state", check="swappiness", state="passed") == 1
    assert value(ignored, "decode_doctor_findings_left_out", code="SWAP001", check="swappiness", why="ignored") == 1
    assert "decode_doctor_findings{" not in ignored
    # decode-budget pulls in gpu and model-artifacts for their facts: their own verdicts are not the run's
    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    args = ("--select", "decode-budget", "--model", str(model), "--bandwidth", "51.2", "--format", "prometheus")
    pulled = cli("check", "--root", str(root), *args).stdout
    states = {labels["check"]: labels["state"] for labels, v in samples(pulled)["decode_doctor_check_state"] if v == 1}
    assert states["gpu"] in ("not_selected", "skipped") and states["model-artifacts"] == "not_selected", states
    kept = {labels["check"] for labels, _ in samples(pulled).get("decode_doctor_findings", [])}
    assert kept <= {"decode-budget"}
    assert all(labels["why"] == "not_selected" for labels, _ in samples(pulled).get("decode_doctor_findings_left_out", []))
    ceilings = samples(pulled)["decode_doctor_decode_ceiling_tokens_per_second"]
    assert {labels["model"] for labels, _ in ceilings} == {"Qwen2-7B"}  # the model's name, never its path


def test_the_agent_stops_on_sigterm_holds_its_directory_and_keeps_the_last_success(tmp_path):
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    root = FIXTURES / "hosts/healthy-server"
    argv = [sys.executable, "-m", "decode_doctor", "agent", "--root", str(root), "--select", "swappiness"]
    argv += ["--textfile-directory", str(textfile), "--interval", "1h"]
    env = {**os.environ, "NO_COLOR": "1"}
    agent = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        wait_until(lambda: (textfile / "decode_doctor.prom").exists(), 60, "the first textfile")
        second = run_dd("agent", "--root", str(root), "--select", "swappiness", "--textfile-directory", str(textfile), "--once")
        assert second.returncode == 2 and "another decode-doctor agent" in second.stderr and second.stderr.count("\n") == 1
        began = time.monotonic()
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=15) == 0
        assert time.monotonic() - began < 10  # not a grace period waited out
        assert "stopped (SIGTERM)" in agent.stderr.read()
    finally:
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
    text = (textfile / "decode_doctor.prom").read_text()
    success = value(text, "decode_doctor_last_success_timestamp_seconds")
    assert value(text, "decode_doctor_interval_seconds") == 3600
    assert sorted(p.name for p in textfile.iterdir()) == [".decode_doctor.lock", "decode_doctor.prom"]  # no temporary left
    # an incomplete run afterwards keeps the last success (read back from its own textfile) and says it ran
    broken = tmp_path / "host"
    shutil.copytree(FIXTURES / "hosts/gpu-h200", broken)
    run_dd(
        "agent",
        "--root",
        str(broken),
        "--host-name",
        "healthy-node",
        "--select",
        "swappiness",
        "--textfile-directory",
        str(textfile),
        "--once",
    )
    after = (textfile / "decode_doctor.prom").read_text()
    assert value(after, "decode_doctor_last_success_timestamp_seconds") == success
    assert value(after, "decode_doctor_last_run_timestamp_seconds") >= value(text, "decode_doctor_last_run_timestamp_seconds")


def test_the_agent_as_nobody_refuses_an_unwritable_directory_and_writes_a_group_writable_one():
    """kubelet creates the hostPath root-owned: the init container makes it group-writable for 65534."""
    if python_for("nobody") is None:
        pytest.skip("no interpreter the user nobody can run")
    with tempfile.TemporaryDirectory(prefix="dd-textfile-") as top:
        os.chmod(top, 0o755)
        textfile = Path(top) / "textfile"
        textfile.mkdir(mode=0o755)
        root = FIXTURES / "hosts/healthy-server"
        args = ("agent", "--root", str(root), "--select", "swappiness", "--textfile-directory", str(textfile), "--once")
        env = {"XDG_STATE_HOME": f"{top}/state"}
        refused = run_dd(*args, user="nobody", env=env)
        assert refused.returncode == 2 and "not writable by this user" in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        os.chown(textfile, 0, grp.getgrnam("nogroup").gr_gid if _has_group("nogroup") else 65534)
        textfile.chmod(0o775)  # what the DaemonSet's init container does: chgrp 65534, chmod g+rwx
        written = run_dd(*args, user="nobody", env=env)
        assert written.returncode == 0, written.stderr
        assert (textfile / "decode_doctor.prom").stat().st_mode & 0o004  # node_exporter (another user) can read it


def _has_group(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def test_a_node_serving_from_its_first_run_reaches_a_steady_verdict_named_in_its_metrics(nvml_double, tmp_path, busy_loops):
    """The DaemonSet's own arguments on a node whose GPU and CPUs are busy from the first run on: no quiet
    figure will ever come, so the rule (checks/bandwidth/quiet.py) measures once under load, keeps that
    figure as a lower bound and accepts the gap by name: the verdict is ready, the textfile names the gap,
    the next run measures nothing (the kept figure stands), and a quiet figure, once there, ends the gap."""
    root = FIXTURES / "hosts/gpu-node"
    textfile, state = tmp_path / "textfile", tmp_path / "state"
    textfile.mkdir()
    busy = TWO_H200.replace("|GPU-1|0", "|GPU-1|87")
    env = node_env(nvml_double, tmp_path, gpus=busy, extra={"XDG_STATE_HOME": str(state), "DECODE_DOCTOR_HOST_NAME": "busy-node"})
    runs = []
    for _run in range(2):
        proc = run_dd(*daemonset_args(root, textfile, state), "--once", env=env)
        assert proc.returncode == 0, proc.stderr
        runs.append(((textfile / "decode_doctor.prom").read_text(), json.loads((state / "report.json").read_text())))
    for text, report in runs:
        assert value(text, "decode_doctor_verdict", verdict="ready") == 1 and value(text, "decode_doctor_exit_code") == 0
        assert value(text, "decode_doctor_accepted_gap", check="bandwidth", gap="bandwidth_under_load") == 1
        assert value(text, "decode_doctor_check_state", check="bandwidth", state="accepted_gap") == 1
        assert value(text, "decode_doctor_check_not_judged", check="bandwidth") == 0
        assert value(text, "decode_doctor_last_success_timestamp_seconds") > 0  # complete: DecodeDoctorIncomplete stays silent
        (gap,) = report["accepted_gaps"]
        assert gap["check"] == "bandwidth" and gap["gap"] == "bandwidth_under_load" and report["not_judged"] == []
        assert "GPU 1 (87%) busy" in gap["why"] and "is a lower bound" in gap["why"]
        assert report["summary"]["outcome"] == "ready" and report["summary"]["accepted_gaps"] == 1
        assert "BW003" not in {f["code"] for f in report["findings"]}  # the contention is the accepted gap, not a finding per run
    (first, second) = (r["facts"]["bandwidth"] for _t, r in runs)
    assert second["measured_at"] == first["measured_at"] and "measured under load" in second["reused"]  # measured once
    stored = json.loads((state / "decode-doctor/bandwidth-under-load.json").read_text())["figures"]
    assert len(stored) == 1 and not (state / "decode-doctor/bandwidth-quiet.json").exists()  # never taken for a quiet figure
    text = run_dd("check", "--root", str(root), "--same-host", "--select", "bandwidth", "--reuse-bandwidth", "1d", env=env).stdout
    assert "bandwidth: accepted — the memory bandwidth (no quiet moment since it was first judged (GPU 1 (87%) busy)" in text
    assert "Ready: no problems found (1 check ran). Accepted by rule: bandwidth: the memory bandwidth" in text
    # the first quiet moment (seeded here: this machine is busy on purpose) ends the gap
    quiet_figure(state, root, age_s=3 * 86400)  # older than a day: reused only because the node is serving
    proc = run_dd(*daemonset_args(root, textfile, state), "--once", env=env)
    text = (textfile / "decode_doctor.prom").read_text()
    assert proc.returncode == 0 and "decode_doctor_accepted_gap" not in text, proc.stderr
    assert value(text, "decode_doctor_check_state", check="bandwidth", state="passed") == 1
    assert value(text, "decode_doctor_memory_bandwidth_bytes_per_second", device="cpu", kind="read") == 200_000_000_000


def test_a_serving_gpu_is_not_copied_on_and_its_gap_is_named(nvml_double, tmp_path, busy_loops):
    """Without --cpu-bandwidth-only, a GPU copy on a serving node would take bandwidth from decode: not run, named."""
    root = FIXTURES / "hosts/gpu-node"
    busy = TWO_H200.replace("|GPU-1|0", "|GPU-1|87")
    env = node_env(nvml_double, tmp_path, gpus=busy)
    args = ("check", "--root", str(root), "--same-host", "--select", "bandwidth", "--reuse-bandwidth", "1d", "--format", "json")
    report = json.loads(run_dd(*args, env=env).stdout)
    gaps = {g["gap"]: g for g in report["accepted_gaps"]}
    assert set(gaps) == {"bandwidth_under_load", "gpu_bandwidth_while_serving"}, report["accepted_gaps"]
    assert "GPU 1 (87%) busy" in gaps["gpu_bandwidth_while_serving"]["why"] and report["facts"]["bandwidth"]["gpus"] == []
    assert report["summary"]["outcome"] == "ready"
    quiet_figure(tmp_path / "state", root, age_s=3 * 86400)  # older than a day: only the busy GPU keeps the probe from running
    second = json.loads(run_dd(*args, env=env).stdout)
    facts = second["facts"]["bandwidth"]
    assert facts["cpu"]["measured"]["read_gbps"] == 200.0 and "the host is serving now (GPU 1 (87%) busy)" in facts["reused"]
    assert second["summary"]["outcome"] == "ready" and second["accepted_gaps"] == []
    text = run_dd(*args[:-2], "--format", "text", "-v", env=env).stdout
    assert "measured 3 days ago on the quiet host, reused: the host is serving now (GPU 1 (87%) busy)" in text, text


# --- Prometheus: the shipped rules, fired and cleared by a real one ------------------------------------


def test_promtool_passes_the_shipped_rule_tests():
    promtool = need_promtool()
    checked = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run([promtool, "test", "rules", "decode-doctor.rules.test.yml"], capture_output=True, text=True, cwd=RULES.parent)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def _alerts(url: str, name: str) -> dict[str, str]:
    """host → state of the named alert."""
    data = prometheus_api(url, "alerts")
    assert isinstance(data, dict)
    return {
        a["labels"].get("host", a["labels"].get("instance", "")): a["state"] for a in data["alerts"] if a["labels"]["alertname"] == name
    }


def _agent_once(root: Path, textfile: Path, nvml: Path, tmp_path: Path, node: str) -> subprocess.CompletedProcess[str]:
    state = tmp_path / "state"
    quiet_figure(state, root)
    env = node_env(nvml, tmp_path, extra={"XDG_STATE_HOME": str(state), "DECODE_DOCTOR_HOST_NAME": node})
    return run_dd(*daemonset_args(root, textfile, state), "--once", env=env)


def readme_queries() -> list[str]:
    from .test_readme import README, fenced_blocks

    return [" ".join(lines) for language, lines in fenced_blocks(README.read_text()) if language == "promql"]


def test_a_real_prometheus_fires_and_clears_the_shipped_alerts(nvml_double, tmp_path):
    """Three nodes, each with its own node_exporter: one with an error finding, one incomplete, one whose
    agent runs every second and is then killed. Prometheus scrapes them every second with the shipped rules."""
    dirs = {name: tmp_path / name for name in ("xid", "incomplete", "healthy")}
    for directory in dirs.values():
        directory.mkdir()
    assert _agent_once(FIXTURES / "hosts/gpu-node-xid", dirs["xid"], nvml_double, tmp_path, "gpu-7").returncode == 1
    assert _agent_once(FIXTURES / "hosts/gpu-h200", dirs["incomplete"], nvml_double, tmp_path, "gpu-8").returncode == 3
    argv = [sys.executable, "-m", "decode_doctor", "agent", "--root", str(FIXTURES / "hosts/healthy-server"), "--select", "swappiness"]
    argv += ["--textfile-directory", str(dirs["healthy"]), "--interval", "1s", "--quiet"]
    agent = subprocess.Popen(argv, env={**os.environ, "NO_COLOR": "1"}, start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: (dirs["healthy"] / "decode_doctor.prom").exists(), 60, "the healthy node's first textfile")
        with (
            node_exporter(dirs["xid"]) as xid,
            node_exporter(dirs["incomplete"]) as incomplete,
            node_exporter(dirs["healthy"]) as healthy,
            prometheus([xid, incomplete, healthy], [RULES], tmp_path) as url,
        ):
            up = lambda: prometheus_api(url, "query", query="count(decode_doctor_build_info)")["result"]  # noqa: E731
            wait_until(lambda: up() and up()[0]["value"][1] == "3", 60, "three nodes scraped")
            fired = wait_until(lambda: _alerts(url, "DecodeDoctorErrorFinding"), 30, "the error-finding alert")
            assert fired == {"gpu-7": "firing"}
            assert wait_until(lambda: _alerts(url, "DecodeDoctorIncomplete"), 30, "the incomplete alert") == {"gpu-8": "firing"}
            assert _alerts(url, "DecodeDoctorStale") == {}
            # exact integers through the whole chain: textfile → node_exporter → Prometheus's API
            swap = prometheus_api(url, "query", query='decode_doctor_swap_bytes{host="healthy-node"}')["result"]
            assert swap[0]["value"][1] == "3221221376"
            reused = prometheus_api(url, "query", query='decode_doctor_memory_bandwidth_bytes_per_second{kind="read"}')["result"]
            assert {r["value"][1] for r in reused} == {"200000000000"}
            # every query the dashboard and the README show runs without an error
            panels = json.loads(DASHBOARD.read_text())["panels"]
            expressions = [t["expr"].replace("$host", ".*") for p in panels for t in p["targets"]] + readme_queries()
            assert len(expressions) >= 12
            for expression in expressions:
                prometheus_api(url, "query", query=expression)
            # the doctor on the healthy node stops: stale after three of its one-second intervals
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait()
            stale = wait_until(lambda: _alerts(url, "DecodeDoctorStale"), 30, "the stale alert")
            assert stale == {"healthy-node": "firing"}
            # the Xid node's finding is gone (a clean node's run, under the same node name): the alert clears
            cleared = _agent_once(FIXTURES / "hosts/gpu-node", dirs["xid"], nvml_double, tmp_path, "gpu-7")
            assert cleared.returncode == 0, cleared.stderr
            wait_until(lambda: not _alerts(url, "DecodeDoctorErrorFinding"), 30, "the error-finding alert to clear")
            assert _alerts(url, "DecodeDoctorIncomplete") == {"gpu-8": "firing"}
    finally:
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait()


# --- the manifests and the image ------------------------------------------------------------------------


def test_the_manifests_validate_offline_and_run_the_agent_with_the_nvidia_runtime():
    validate = Path(sys.executable).parent / "kubernetes-validate"
    if not validate.exists():
        pytest.skip("kubernetes-validate is not installed (the test extra)")
    for manifest in ("daemonset.yaml", "job.yaml"):
        proc = subprocess.run([str(validate), "--strict", "--quiet", str(DEPLOY / manifest)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    spec = daemonset()["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert spec["runtimeClassName"] == "nvidia" and spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert spec["priorityClassName"] == "decode-doctor-node"
    env = {e["name"]: e for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility"
    assert env["DECODE_DOCTOR_HOST_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert container["args"][0] == "agent" and "--same-host" in container["args"] and "command" not in container  # PID 1 is the agent
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] and security["capabilities"]["drop"] == ["ALL"] and not security["allowPrivilegeEscalation"]
    assert spec["securityContext"]["runAsUser"] == 10001 and spec["securityContext"]["runAsNonRoot"]
    assert "cpu" not in container["resources"]["limits"]  # a CPU quota would make the bandwidth probe measure the quota
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    for host_path in ("/proc", "/sys", "/etc", "/usr", "/var/log/journal"):  # the journal, not all of /var/log
        mount = mounts[f"/host{host_path}"]
        assert mount["readOnly"] is True and volumes[mount["name"]]["hostPath"]["path"] == host_path
    # the request is near the measured idle figure, the limit above the probe's peak (the README's fleet section)
    assert container["resources"]["requests"]["memory"] == "64Mi" and container["resources"]["limits"]["memory"] == "1Gi"


def test_the_image_build_context_holds_what_the_install_needs(tmp_path):
    """The Dockerfile's COPY lines, copied as Docker would, make a wheel with the compiled zh-CN catalog."""
    context = tmp_path / "context"
    context.mkdir()
    copies = [line.split()[1:] for line in (DEPLOY / "Dockerfile").read_text().splitlines() if line.startswith("COPY ")]
    for *sources, _target in copies:
        for source in sources:
            path = REPO / source
            if path.is_dir():
                shutil.copytree(path, context / source, ignore=shutil.ignore_patterns("__pycache__", "*.mo"))
            else:
                shutil.copy(path, context / source)
    out = tmp_path / "wheel"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(context)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = out.glob("decode_doctor-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "decode_doctor/locale/zh_CN/LC_MESSAGES/decode_doctor.mo" in names
    assert "decode_doctor/cli/agent.py" in names and "decode_doctor/checks/gpu/procdriver.py" in names
    assert "decode_doctor/schema/report-v2.schema.json" in names and "decode_doctor/checks/gpu/data/xid-catalog.json" in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "decode-doctor = decode_doctor.cli.main:main" in zipfile.ZipFile(wheel).read(entry).decode()


# --- merge at fleet scale -------------------------------------------------------------------------------


def _report(root: Path, path: Path, *extra: str) -> Path:
    result = cli("check", "--root", str(root), "--select", "swappiness,gpu", "--format", "json", *extra)
    path.write_text(result.stdout)
    return path


def test_merge_judges_the_fleet_with_verdicts_ages_totals_and_an_exit_code(tmp_path):
    healthy = _report(FIXTURES / "hosts/healthy-server", tmp_path / "healthy.json", "--ignore", "GPU024")
    warned = _report(FIXTURES / "hosts/swap60-rhel7", tmp_path / "warned.json", "--ignore", "GPU024")
    incomplete = _report(FIXTURES / "hosts/gpu-h200", tmp_path / "incomplete.json")
    merged = cli("merge", str(healthy), str(warned), "--format", "json")
    assert merged.exit_code == 0  # a warning is below --fail-on error
    data = merged.json()
    assert {h["host"]: h["verdict"] for h in data["hosts"]} == {"healthy-node": "ready", "rhel7-node": "findings"}
    assert data["totals"]["ready"] == 1 and data["totals"]["warnings"] == 1 and data["totals"]["hosts_by_code"] == {"SWAP001": 1}
    assert all(0 <= h["age_s"] < 600 for h in data["hosts"])
    assert cli("merge", str(healthy), str(warned), "--fail-on", "warning").exit_code == 1
    with_incomplete = cli("merge", str(healthy), str(incomplete), "--format", "json")
    assert with_incomplete.exit_code == 3
    (row,) = [h for h in with_incomplete.json()["hosts"] if h["host"] == "gpu-h200"]
    assert row["verdict"] == "incomplete" and row["not_judged"] == 2 and row["checks"]["swappiness"] == "not_judged"
    text = cli("merge", str(healthy), str(incomplete)).stdout
    assert "not judged" in text and "1 incomplete" in text
    # the same host twice: the newer report stands, the older is named as left out
    older = json.loads(warned.read_text())
    older["run"]["started"] = "2020-01-01T00:00:00+00:00"
    older["findings"] = []
    (tmp_path / "older.json").write_text(json.dumps(older))
    twice = cli("merge", str(warned), str(tmp_path / "older.json"), "--format", "json").json()
    assert [h["file"] for h in twice["hosts"]] == [str(warned)] and twice["left_out"][0]["file"] == str(tmp_path / "older.json")
    # a report older than --max-age is stale: the fleet is not judged now
    stale = cli("merge", str(tmp_path / "older.json"), "--max-age", "1d", "--format", "json")
    assert stale.exit_code == 3 and stale.json()["totals"]["stale"] == 1


def test_root_leftovers_and_a_planted_link_in_the_textfile_directory_are_taken_over_not_followed():
    """A root cron run left its lock and a root-owned textfile; someone planted a link at the textfile's
    name. The agent (as nobody, in the group-writable directory) replaces the file and never writes through the link."""
    if python_for("nobody") is None:
        pytest.skip("no interpreter the user nobody can run")
    root = FIXTURES / "hosts/healthy-server"
    with tempfile.TemporaryDirectory(prefix="dd-leftovers-") as top:
        os.chmod(top, 0o755)
        textfile = Path(top) / "textfile"
        textfile.mkdir()
        args = ("agent", "--root", str(root), "--select", "swappiness", "--textfile-directory", str(textfile), "--once", "--quiet")
        assert run_dd(*args, env={"XDG_STATE_HOME": f"{top}/state"}).returncode == 0  # root's run: its lock and file
        victim = Path(top) / "victim"
        victim.write_text("keep me\n")
        victim.chmod(0o666)
        os.chown(textfile, 0, grp.getgrnam("nogroup").gr_gid if _has_group("nogroup") else 65534)
        textfile.chmod(0o775)
        written = run_dd(*args, user="nobody", env={"XDG_STATE_HOME": f"{top}/state-nobody"})
        assert written.returncode == 0, written.stderr
        assert (textfile / "decode_doctor.prom").stat().st_uid != 0  # taken over, not refused
        (textfile / "decode_doctor.prom").unlink()
        (textfile / "decode_doctor.prom").symlink_to(victim)
        again = run_dd(*args, user="nobody", env={"XDG_STATE_HOME": f"{top}/state-nobody"})
        assert again.returncode == 0, again.stderr
        assert victim.read_text() == "keep me\n" and not (textfile / "decode_doctor.prom").is_symlink()


def test_a_run_that_cannot_write_is_said_counted_and_retried():
    with tempfile.TemporaryDirectory(prefix="dd-failing-") as top:
        textfile = Path(top) / "textfile"
        textfile.mkdir()
        args = ("agent", "--root", str(FIXTURES / "hosts/healthy-server"), "--select", "swappiness", "--textfile-directory", str(textfile))
        once = run_dd(*args, "--once", "--json-report", f"{top}/missing/report.json")
        assert (
            once.returncode == 2 and "decode-doctor agent: the run failed: " in once.stderr and "No such file or directory" in once.stderr
        )
        assert len(once.stderr.strip().splitlines()) == 1
        assert (textfile / "decode_doctor.prom").exists()  # the textfile comes first and was written
        argv = [sys.executable, "-m", "decode_doctor", *args, "--interval", "1s", "--json-report", f"{top}/missing/report.json"]
        looping = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:

            def counted() -> bool:  # in the loop's textfile (it has an interval), not --once's (which counts its own failure)
                text = (textfile / "decode_doctor.prom").read_text()
                found = samples(text).get("decode_doctor_agent_failed_runs", [])  # the counter's family; its sample is _total
                return "decode_doctor_interval_seconds" in text and bool(found) and found[0][1] >= 1

            wait_until(counted, 60, "a failed run counted in the next textfile")
        finally:
            os.killpg(looping.pid, signal.SIGTERM)
            looping.wait(timeout=30)
        assert looping.returncode == 0 and looping.stderr.read().count("the run failed") >= 1


def test_merge_lists_a_file_it_cannot_read_and_distrusts_a_report_from_the_future(tmp_path):
    good = _report(FIXTURES / "hosts/healthy-server", tmp_path / "good.json", "--ignore", "GPU024")
    bad = tmp_path / "bad.json"
    bad.write_text('{"findings": [], "schema_version": 1}')
    merged = cli("merge", str(good), str(bad), "--format", "json")
    assert merged.exit_code == 3 and merged.json()["unreadable"][0]["file"] == str(bad)
    assert "not judged:" in cli("merge", str(good), str(bad)).stdout
    future = json.loads(good.read_text())
    future["run"]["started"] = "2999-01-01T00:00:00+00:00"
    (tmp_path / "future.json").write_text(json.dumps(future))
    data = cli("merge", str(good), str(tmp_path / "future.json"), "--format", "json").json()
    assert [h["file"] for h in data["hosts"]] == [str(good)]  # the future one never wins
    stale = cli("merge", str(tmp_path / "future.json"), "--max-age", "1h", "--format", "json")
    assert stale.exit_code == 3 and stale.json()["hosts"][0]["stale"]


def test_a_reused_figure_is_judged_as_a_measured_one_and_an_unreadable_rating_is_not_judged(nvml_double, tmp_path):
    """BW002 from a stored quiet figure far below the DIMMs' rating (it flapped to Ready between measurements),
    and a rating that could not be read is not judged (unless --no-memory-spec), where a VM's absent one is not."""
    from decode_doctor.checks.bandwidth.contract import MemorySpec

    root = FIXTURES / "hosts/gpu-node"
    quiet_figure(tmp_path / "state", root)
    store = tmp_path / "state/decode-doctor/bandwidth-quiet.json"
    record = json.loads(store.read_text())
    record["facts"]["cpu"]["spec"] = MemorySpec(8, 24, 12, 4800, "DDR5", 256.0).__dict__
    record["facts"]["cpu"]["spec_gbps"] = 460.8
    store.write_text(json.dumps(record))
    args = ("check", "--root", str(root), "--same-host", "--select", "bandwidth", "--reuse-bandwidth", "1d", "--format", "json")
    report = json.loads(run_dd(*args, env=node_env(nvml_double, tmp_path)).stdout)
    assert [f["code"] for f in report["findings"]] == ["BW002"]  # 200 of 460.8 GB/s, reused
    tables = tmp_path / "with-tables"  # the node's SMBIOS tables are there to read, and its dmidecode cannot
    shutil.copytree(root, tables, symlinks=True)
    (tables / "sys/firmware/dmi/tables").mkdir(parents=True)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin/dmidecode").write_text("#!/bin/sh\necho '/sys/firmware/dmi/tables/DMI: Permission denied' >&2\nexit 1\n")
    (tmp_path / "bin/dmidecode").chmod(0o755)
    env = node_env(None, tmp_path)
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    measured = run_dd(
        "check", "--root", str(tables), "--same-host", "--select", "bandwidth", "--cpu-bandwidth-only", "--format", "json", env=env
    )
    what = {item["what"] for item in json.loads(measured.stdout)["not_judged"]}
    assert "the memory's rated bandwidth (BW002)" in what
    asked = run_dd(*args[:-2], "--no-memory-spec", "--format", "json", env=node_env(None, tmp_path))
    assert "the memory's rated bandwidth (BW002)" not in {item["what"] for item in json.loads(asked.stdout)["not_judged"]}
