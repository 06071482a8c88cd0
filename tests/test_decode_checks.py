"""The bandwidth and decode-budget checks, and `decode-doctor estimate`."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from decode_doctor.checks.bandwidth import membw
from decode_doctor.checks.bandwidth.check import BandwidthFacts, CpuMemory, memory_spec
from decode_doctor.engine import Context
from decode_doctor.engine.commands import CommandRunner

from .conftest import FIXTURES, run_dd
from .support.fakes import FAKES, fake_tool
from .support.harness import cli, run_app, run_check
from .support.modelgen import llama_gguf, qwen2_7b, write_hf_model

SUPERMICRO = FIXTURES / "host/dmidecode/supermicro-sys2049u-xeon-gold6126-ddr4-16of48-configured-clock-speed.full-dmidecode.txt"
RHEL_HOST = FIXTURES / "hosts/swap60-rhel7"


def steady(read: float = 20.0, other_load: float = 0.0):
    def measure_cpu(buffer_bytes, budget_s=1.0, threads=None):
        return membw.CpuBandwidth(read, read * 0.9, 0.02, 0.03, threads or 2, buffer_bytes, 3, 0.05, other_load)

    return measure_cpu


def bandwidth_facts(read: float) -> BandwidthFacts:
    measured = membw.CpuBandwidth(read, read, 0.0, 0.0, 2, 1 << 28, 3, 0.1, 0.0)
    return BandwidthFacts(CpuMemory(measured, None, 1, None, "this host"))


def with_memory_tables(tmp_path, source=RHEL_HOST):
    """A copy of a fixture host with SMBIOS tables for dmidecode to read (a bare-metal host's sysfs)."""
    root = tmp_path / "host"
    shutil.copytree(source, root, symlinks=True)
    (root / "sys/firmware/dmi/tables").mkdir(parents=True)
    return root


def test_measured_bandwidth_against_the_dimms_spec(tmp_path, monkeypatch):
    monkeypatch.setattr(membw, "measure_cpu", steady(20.0))
    env = fake_tool(tmp_path / "bin", "dmidecode", f"cat '{SUPERMICRO}'")
    run = run_check("bandwidth", with_memory_tables(tmp_path), env=env, same_host=True)
    cpu = run.facts.cpu
    assert cpu.spec_gbps == pytest.approx(341.2, abs=0.1)  # DDR4-2666 × 16 channels × 8 bytes
    assert cpu.measured_on == "this host"
    assert "16 of 48 DIMM slots populated" in run.codes()["BW002"].message
    assert "BW003" not in run.codes()
    assert run.facts.summary()[0].startswith("Memory read 20.0 GB/s, copy 18.0 GB/s")
    rebuilt = BandwidthFacts.from_dict(json.loads(json.dumps(run.facts.to_dict())))
    assert rebuilt == run.facts  # what a report holds rebuilds the same typed facts


def test_a_busy_host_is_said(monkeypatch):
    monkeypatch.setattr(membw, "measure_cpu", steady(20.0, other_load=0.4))
    run = run_check("bandwidth", RHEL_HOST, env={"PATH": "/nonexistent"}, same_host=True)
    assert "Other processes used 40%" in run.codes()["BW003"].message


def test_budget_reads_the_bandwidth_facts(tmp_path):
    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=2)
    run = run_check("decode-budget", RHEL_HOST, models=(model,), facts=[bandwidth_facts(21.5)])
    (entry,) = run.facts.models
    cpu = entry.budgets[-1]
    assert cpu.device == "cpu" and cpu.bandwidth_source == "measured" and cpu.bandwidth_gbps == 21.5
    assert run.codes()["DEC002"].severity.value == "error"  # the 15 GB model does not fit the 8 GB host
    assert "weights with their runtime overhead take all the usable memory" in run.codes()["DEC002"].message
    assert run.facts.summary()[0].startswith("Qwen2-7B (safetensors, 15.2 GB of weights")


def test_the_runner_passes_bandwidth_facts_to_the_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(membw, "measure_cpu", steady(30.0))
    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    env = {"PATH": "/nonexistent", "XDG_STATE_HOME": str(tmp_path / "state")}  # no quiet figure another test of this session stored
    outcome = run_app("bandwidth", "decode-budget", root=RHEL_HOST, models=(model,), env=env, same_host=True)
    facts = outcome.report.facts()
    assert facts["decode-budget"].models[0].budgets[-1].bandwidth_gbps == 30.0
    states = {r.check: r.state.value for r in outcome.report.results}
    assert states["bandwidth"] == "passed" and states["decode-budget"] == "findings"
    assert set(states) == {"bandwidth", "decode-budget", "gpu", "gpu-health", "model-artifacts"}  # what the budget needs is pulled in


def test_dmidecode_without_root_or_missing(tmp_path, monkeypatch):
    from decode_doctor.checks.bandwidth import check

    root = tmp_path / "host"
    (root / "sys/firmware/dmi/tables").mkdir(parents=True)  # a host with SMBIOS tables: the rating applies
    script = "echo '/sys/firmware/dmi/tables/smbios_entry_point: Permission denied' >&2; echo '/dev/mem: Permission denied' >&2; exit 1"
    env = fake_tool(tmp_path / "bin", "dmidecode", script)
    ctx = Context(root=root, same_host=True, runner=CommandRunner(env={**os.environ, **env}))
    monkeypatch.setattr(check.os, "geteuid", lambda: 1000)
    assert memory_spec(ctx) == (None, "dmidecode needs root to read the memory tables", True)  # True: not judged, not "no DIMMs"
    monkeypatch.setattr(check.os, "geteuid", lambda: 0)  # refused as root (a locked-down kernel): dmidecode's own words
    assert memory_spec(ctx) == (None, "dmidecode failed: /dev/mem: Permission denied", True)
    ctx = Context(root=root, same_host=True, runner=CommandRunner(env={"PATH": str(tmp_path / "empty")}))
    assert memory_spec(ctx) == (None, "dmidecode is not installed", True)


@pytest.mark.parametrize("euid", [0, 1000])
def test_a_vm_without_memory_tables_has_no_rating_to_judge_and_a_failing_dmidecode_says_its_own_words(tmp_path, monkeypatch, euid):
    """A cloud VM (no /dev/mem, no /sys/firmware/dmi/tables): BW002 does not apply, said as a fact, and
    dmidecode is not run; a host with tables whose dmidecode fails for another reason than permission
    is not judged with dmidecode's own error, never "needs root" (it ran as root)."""
    from decode_doctor.checks.bandwidth import check

    monkeypatch.setattr(check.os, "geteuid", lambda: euid)
    marker = tmp_path / "dmidecode-ran"
    env = fake_tool(tmp_path / "bin", "dmidecode", f"touch '{marker}'; echo '/dev/mem: No such file or directory' >&2; exit 1")
    vm = tmp_path / "vm"
    (vm / "sys/firmware").mkdir(parents=True)
    ctx = Context(root=vm, same_host=True, runner=CommandRunner(env={**os.environ, **env}))
    spec, why, unreadable = memory_spec(ctx)
    assert (spec, unreadable) == (None, False) and "no SMBIOS memory tables" in why and not marker.exists()
    (vm / "sys/firmware/dmi/tables").mkdir(parents=True)
    assert memory_spec(ctx) == (None, "dmidecode failed: /dev/mem: No such file or directory", True) and marker.exists()


def test_check_on_a_vm_exits_on_what_it_judged_not_on_the_rating_it_cannot_have(tmp_path, monkeypatch):
    """The CI gate on a cloud VM: the bandwidth is measured, BW002 does not apply (an info line in the
    facts, not "not judged"), and `check` exits 0 (1 with findings), never 3, also as root."""
    from decode_doctor.checks.bandwidth import check

    monkeypatch.setattr(check.os, "geteuid", lambda: 0)
    monkeypatch.setattr(membw, "measure_cpu", steady(20.0))
    env = fake_tool(tmp_path / "bin", "dmidecode", "echo '/dev/mem: No such file or directory' >&2; exit 1")
    proc = cli("check", "--root", str(RHEL_HOST), "--same-host", "--select", "bandwidth", "--format", "json", env=env)
    report = proc.json()
    assert proc.exit_code == 0 and report["not_judged"] == [] and report["summary"]["verdict"] == "complete", report["not_judged"]
    assert "no SMBIOS memory tables" in report["facts"]["bandwidth"]["cpu"]["spec_unavailable"]
    verbose = cli("check", "--root", str(RHEL_HOST), "--same-host", "--select", "bandwidth", "-v", env=env).stdout
    assert "spec unknown: no SMBIOS memory tables" in verbose and "not judged" not in verbose


def test_budget_with_given_bandwidth_and_target(tmp_path):
    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    options = {"bandwidth": 51.2, "target_tps": 10, "context": 2048}
    run = run_check("decode-budget", models=(model,), options=options)
    cpu = run.facts.models[0].budgets[-1]
    assert cpu.bandwidth_source == "given" and cpu.context == 2048
    assert cpu.kv_bytes_per_token == 2 * 28 * 4 * 128 * 2
    assert "below the target 10" in run.codes()["DEC004"].message


@pytest.mark.parametrize(
    ("make", "code", "text"),
    [
        (lambda d: (d / "model.safetensors").write_bytes(b"\x01\x02"), "DEC010", "not even the 8-byte header length"),
        (lambda d: (d / "m.gguf").write_bytes(b"GGML" + b"\0" * 60), "DEC010", "bad magic"),
        (lambda d: write_hf_model(d, {"hidden_size": 64}, {"w": ("F16", [4])}), "DEC011", "no layers, kv_heads, head_dim"),
        (lambda d: (d / "config.json").write_text("{not json"), "DEC010", "config.json is not valid JSON"),
    ],
)
def test_malformed_models_are_findings_not_tracebacks(tmp_path, make, code, text):
    directory = tmp_path / "model"
    directory.mkdir()
    make(directory)
    target = directory if not list(directory.glob("*.gguf")) else next(directory.glob("*.gguf"))
    (finding,) = run_check("decode-budget", models=(target,), options={"bandwidth": 10}).findings
    assert finding.code == code and text in finding.message


def test_estimate_json_with_sweep(tmp_path):
    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    proc = cli(
        "estimate",
        "--model",
        str(model),
        "--context",
        "8192",
        "--concurrency",
        "4",
        "--bandwidth",
        "51.2",
        "--memory",
        "64",
        "--format",
        "json",
    )
    assert proc.exit_code == 0, proc.stderr
    plan = proc.json()["plan"]
    assert plan["fit"] == "fits" and plan["kv_per_device"] == 56 * 1024 * 8192 * 4
    assert plan["max_concurrency"] >= 4 and plan["max_context"] >= 8192
    sweep = plan["sweep"]
    assert {row["context"] for row in sweep} >= {1024, 4096, 8192, 16384} and {row["concurrency"] for row in sweep} >= {1, 4, 256}
    for concurrency in (1, 4):
        rates = [row["tps_per_sequence"] for row in sweep if row["concurrency"] == concurrency]
        assert rates == sorted(rates, reverse=True)


def test_estimate_measures_through_the_bandwidth_check(tmp_path, monkeypatch):
    monkeypatch.setattr(membw, "measure_cpu", steady(25.0))
    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    proc = cli("estimate", "--model", str(model), "--memory", "64", "--state-dir", str(tmp_path / "state"), "--format", "json")
    assert proc.json()["device"]["bandwidth_gbps"] == 25.0 and proc.json()["device"]["bandwidth_source"] == "measured"


def test_estimate_reuses_the_best_quiet_bandwidth_and_says_when_a_figure_is_a_lower_bound(tmp_path, monkeypatch):
    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    state = tmp_path / "state"

    def device(*extra: str) -> dict:
        args = ("--model", str(model), "--memory", "64", "--threads", "2", "--state-dir", str(state), "--format", "json", *extra)
        return cli("estimate", *args).json()["device"]

    monkeypatch.setattr(membw, "measure_cpu", steady(25.0))
    assert (device()["bandwidth_gbps"], device()["bandwidth_source"]) == (25.0, "cached")  # the second call reuses the first
    monkeypatch.setattr(membw, "measure_cpu", steady(11.0, other_load=0.6))
    busy = device("--measure")
    assert busy["bandwidth_gbps"] == 11.0 and busy["bandwidth_source"] == "measured on a busy host"
    assert any("is a lower bound" in note for note in busy["notes"])
    assert device()["bandwidth_gbps"] == 25.0  # a busy figure is never the one reused
    assert device("--threads", "1")["bandwidth_source"] == "measured on a busy host"  # a thread count of its own
    assert not list(state.glob("*.dd-tmp"))


def test_a_figure_measured_beside_a_quarter_core_of_other_work_is_a_lower_bound_never_reused(tmp_path, monkeypatch):
    """Issue 26: one busy loop on a 2-vCPU host was 0.25 cores, 9 % of all CPUs, under the 15 % rule:
    the figure was kept as quiet. The window's own foreign CPU time (in cores) and the hypervisor's
    steal decide now; only a quiet figure is kept (the bandwidth check's store of quiet figures), and
    the one-figure file of the earlier release still reads."""
    import json as _json

    from decode_doctor.checks.bandwidth import quiet

    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    state = tmp_path / "state"

    def device(*extra: str) -> dict:
        args = ("--model", str(model), "--memory", "64", "--threads", "2", "--state-dir", str(state), "--format", "json", *extra)
        return cli("estimate", *args).json()["device"]

    def measured(read: float, foreign: float = 0.0, steal: float = 0.0):
        def measure_cpu(buffer_bytes, budget_s=1.0, threads=None):
            return membw.CpuBandwidth(read, read * 0.9, 0.02, 0.03, threads or 2, buffer_bytes, 3, 0.05, 0.09, foreign, steal)

        return measure_cpu

    monkeypatch.setattr(quiet, "serving", lambda ctx: None)  # the test host's own load must not decide
    monkeypatch.setattr(membw, "measure_cpu", measured(14.0, foreign=0.25))
    first = device()
    assert first["bandwidth_source"] == "measured on a busy host" and any("0.25 cores" in n for n in first["notes"])
    monkeypatch.setattr(membw, "measure_cpu", measured(13.0, steal=0.05))
    assert device()["bandwidth_source"] == "measured on a busy host"  # nothing quiet to reuse: measured again
    assert quiet.load_quiet(state).figures == ()
    monkeypatch.setattr(membw, "measure_cpu", measured(25.0))
    assert device()["bandwidth_source"] == "measured" and device()["bandwidth_gbps"] == 25.0
    (kept,) = quiet.load_quiet(state).figures
    assert kept.facts.cpu.measured.read_gbps == 25.0 and kept.facts.cpu.measured.threads == 2
    data = _json.loads((state / quiet.STORE).read_text())
    (state / quiet.STORE).write_text(_json.dumps(data["figures"][0]))  # one figure, as the earlier release wrote it
    assert [f.facts.cpu.measured.read_gbps for f in quiet.load_quiet(state).figures] == [25.0]


def test_estimate_text_gguf_and_exit_codes(tmp_path):
    gguf = llama_gguf(tmp_path / "tiny.gguf")
    proc = cli("estimate", "--model", str(gguf), "--bandwidth", "100", "--memory", "4", "--kv-dtype", "fp8")
    assert proc.exit_code == 0, proc.stderr
    assert "decode tok/s in all, by context" in proc.stdout and "KV cache" in proc.stdout and "(fp8 as llama.cpp's q8_0)" in proc.stdout
    big = qwen2_7b(tmp_path / "q", shards=1)
    assert cli("estimate", "--model", str(big), "--bandwidth", "50", "--memory", "8").exit_code == 1
    assert cli("estimate", "--model", str(big), "--bandwidth", "50", "--memory", "80", "--target-tps", "100").exit_code == 1
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"nope")
    proc = cli("estimate", "--model", str(broken), "--bandwidth", "50")
    assert proc.exit_code == 2 and "bad magic" in proc.stderr
    assert cli("estimate", "--model", str(big), "--device", "tpu:0", "--bandwidth", "1").exit_code == 2


def test_gpu_probe_and_budget_on_the_gpu_through_fake_torch_and_nvml(tmp_path):
    """The GPU path with stand-ins for torch and pynvml (no GPU here): event timing, NVML peak, and
    a budget judged on cuda:0 rather than the CPU. A subprocess, so the fakes are what it imports."""
    env = {"PYTHONPATH": str(FAKES), "DD_FAKE_GPU_GBPS": "2400", **fake_tool(tmp_path / "bin", "dmidecode", "exit 1")}
    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    proc = run_dd(
        "check",
        "--root",
        str(FIXTURES / "hosts/gpu-h200"),
        "--same-host",
        "--select",
        "bandwidth,decode-budget",
        "--model",
        str(model),
        "--format",
        "json",
        env=env,
    )
    report = json.loads(proc.stdout)
    (gpu,) = report["facts"]["bandwidth"]["gpus"]
    assert gpu["name"] == "NVIDIA H200 (fake)" and gpu["copy_gbps"] == pytest.approx(2400, rel=0.01)
    assert gpu["theoretical_gbps"] == pytest.approx(2 * 2619e6 * 5120 / 8 / 1e9, abs=0.1)  # 3352.3
    assert "BW005" not in {f["code"] for f in report["findings"]}  # 72 % of the peak
    budgets = {b["device"]: b for b in report["facts"]["decode-budget"]["models"][0]["budgets"]}
    assert budgets["cuda:0"]["fit"] == "fits" and budgets["cuda:0"]["bandwidth_gbps"] == gpu["copy_gbps"]
    assert report["facts"]["decode-budget"]["models"][0]["judged"] == ["cuda:0"]
    assert "DEC002" not in {f["code"] for f in report["findings"]}  # the 8 GB CPU is not judged on a GPU host


def test_busy_host_is_measured_as_busy():
    """The probe's own busy-host detection (the check's verdict from it is tested above, injected)."""
    import subprocess
    import sys

    code = "import time\nend = time.time() + 4\nwhile time.time() < end: pass"
    burners = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]
    try:
        result = membw.measure_cpu(64 << 20, budget_s=1.0)
    finally:
        for burner in burners:
            burner.kill()
    assert result.other_load > 0.15


def test_a_gpu_copying_far_below_its_peak_is_said(tmp_path, monkeypatch):
    """BW005: device-to-device copies at a third of NVML's theoretical peak (a throttled card)."""
    monkeypatch.setattr(membw, "measure_cpu", steady(20.0))
    monkeypatch.setattr(membw, "measure_gpus", lambda budget_s=0.5: [membw.GpuBandwidth(0, "NVIDIA A10", 24 << 30, 201.0, 0.01)])
    monkeypatch.setattr(membw, "nvml_theoretical", lambda: {0: 600.2})
    root = tmp_path / "host"
    (root / "proc/driver/nvidia/gpus/0000:01:00.0").mkdir(parents=True)
    run = run_check("bandwidth", root, env={"PATH": "/nonexistent"}, same_host=True)
    finding = run.codes()["BW005"]
    assert finding.message == "GPU 0 (NVIDIA A10): copy 201 GB/s of 600 GB/s theoretical (33%)."
    assert run.facts.gpus[0].theoretical_gbps == 600.2


def test_a_model_within_usable_memory_but_near_its_end_is_a_warning(tmp_path):
    """DEC003: the need lies within the usable 90 %, above 95 % of it; past the usable 90 % is DEC002."""
    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    options = {"bandwidth": 50.0, "context": 2048}
    probe = run_check("decode-budget", RHEL_HOST, models=(model,), options=options)
    need = probe.facts.models[0].budgets[-1].need_bytes
    root = tmp_path / "host"
    (root / "proc").mkdir(parents=True)
    (root / "proc/meminfo").write_text(f"MemTotal:       {int(need / 0.9 / 0.97) // 1024} kB\nMemAvailable:   {int(need) // 1024} kB\n")
    run = run_check("decode-budget", root, models=(model,), options=options)
    budget = run.facts.models[0].budgets[-1]
    assert budget.fit == "tight" and "DEC002" not in run.codes()
    assert "less than 5 % of it left" in run.codes()["DEC003"].message
    (root / "proc/meminfo").write_text(f"MemTotal:       {int(need / 0.95) // 1024} kB\nMemAvailable:   {int(need) // 1024} kB\n")
    over = run_check("decode-budget", root, models=(model,), options=options)
    assert over.facts.models[0].budgets[-1].fit == "does not fit" and "DEC003" not in over.codes()
    assert "usable (90 % of" in over.codes()["DEC002"].message


def test_the_budget_and_estimate_read_a_hugging_face_cache_repository(tmp_path):
    """The README's `check --model ~/.cache/huggingface/hub/models--Qwen--Qwen2-7B-Instruct`: the
    repository directory as the hub cache keeps it, read through its snapshot (one layout, engine.hfcache)."""
    from .support.modelgen import hf_cache

    repo, _ = hf_cache(tmp_path / "hub", "Qwen/Qwen2-7B-Instruct", qwen2_7b(tmp_path / "source", shards=2))
    run = run_check("decode-budget", RHEL_HOST, models=(repo,), options={"bandwidth": 50.0})
    assert "DEC010" not in run.codes()
    (entry,) = run.facts.models
    assert entry.model.name == "Qwen2-7B-Instruct" and entry.model.layers == 28
    plan = cli("estimate", "--model", str(repo), "--bandwidth", "50", "--memory", "80", "--format", "json")
    assert plan.exit_code == 0, plan.stderr
    assert plan.json()["model"]["layers"] == 28 and plan.json()["model"]["label"] == "Qwen2-7B-Instruct"
    report = cli("check", "--select", "model-artifacts,decode-budget", "--model", str(repo), "--root", str(RHEL_HOST), "--bandwidth", "50")
    assert "DEC010" not in report.stdout and "holds no config.json" not in report.stdout, report.stdout


def test_the_probe_takes_no_gigabytes_unasked_and_says_when_its_buffer_is_near_the_cache(tmp_path, monkeypatch):
    """A VM reporting a 480 MiB last-level cache made the default check read a 2 GiB buffer (2.09 GB
    RSS): the default is now at most 512 MiB and an eighth of the memory available, --thorough up to
    4 GiB, and a buffer under 4× the cache is said to possibly overstate the memory."""
    from decode_doctor.checks.bandwidth.membw import buffer_size, cache_caveat

    mib, gib = 1 << 20, 1 << 30
    assert buffer_size(480 * mib, 24 * gib) == 512 * mib
    assert buffer_size(480 * mib, 24 * gib, thorough=True) == 3 * gib  # 8× the cache is 3.75 GiB; an eighth of 24 GiB binds
    assert buffer_size(480 * mib, 64 * gib, thorough=True) == 3840 * mib
    assert buffer_size(32 * mib, 24 * gib) == 256 * mib and buffer_size(None, 1 * gib) == 128 * mib
    assert "may overstate the memory" in (cache_caveat(512 * mib, 480 * mib, False) or "")
    assert cache_caveat(3 * gib, 480 * mib, True) is None and cache_caveat(256 * mib, 32 * mib, False) is None
    root = tmp_path / "host"
    shutil.copytree(RHEL_HOST, root, symlinks=True)
    for index, size in enumerate(("48K", "32K", "2048K", "491520K")):  # L1d, L1i, L2, and the L3 a VM reports
        cache = root / f"sys/devices/system/cpu/cpu0/cache/index{index}"
        cache.mkdir(parents=True, exist_ok=True)
        (cache / "size").write_text(size + "\n")
    monkeypatch.setattr(membw, "measure_cpu", steady(20.0))
    run = run_check("bandwidth", root, same_host=True)
    assert run.facts.cpu.measured.buffer_bytes <= 512 * mib
    assert "under 4× the 480 MiB last-level cache" in run.facts.summary()[0]
