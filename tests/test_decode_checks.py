"""The bandwidth and decode-budget checks end to end, and `decode-doctor estimate`."""

from __future__ import annotations

import json
import os

import pytest

from decode_doctor.checks.bandwidth import memory_spec
from decode_doctor.commands import CommandRunner
from decode_doctor.context import Context

from .conftest import FIXTURES, run_dd
from .support.fakes import FAKES, fake_tool
from .support.modelgen import llama_gguf, qwen2_7b, write_hf_model

SUPERMICRO = FIXTURES / "host/dmidecode/supermicro-sys2049u-xeon-gold6126-ddr4-16of48-configured-clock-speed.full-dmidecode.txt"
RHEL_HOST = FIXTURES / "hosts/swap60-rhel7"


def test_measured_bandwidth_spec_ratio_and_budget_from_the_measurement(tmp_path):
    env = fake_tool(tmp_path / "bin", "dmidecode", f"cat '{SUPERMICRO}'")
    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=2)
    proc = run_dd("check", "--root", str(RHEL_HOST), "--select", "bandwidth,decode-budget", "--model", str(model), "--format", "json", env=env)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1, proc.stderr  # the 15 GB model does not fit the 8 GB host
    codes = {f["code"]: f for f in report["findings"]}
    bw = codes["BW001"]["evidence"]
    for key in ("read_gbps", "copy_gbps", "read_spread", "copy_spread", "threads", "buffer_bytes"):
        assert key in bw
    assert bw["read_gbps"] > 0.5 and bw["copy_gbps"] > 0.5
    assert bw["spec_gbps"] == pytest.approx(341.2, abs=0.1)  # DDR4-2666 × 16 channels × 8 bytes
    assert bw["measured_on"].startswith("the machine running decode-doctor")
    assert "16 of 48 DIMM slots populated" in codes["BW002"]["message"]
    budget = codes["DEC001"]["evidence"]["budgets"]["cpu"]
    assert budget["bandwidth_source"] == "measured" and budget["bandwidth_gbps"] == bw["read_gbps"]
    assert codes["DEC002"]["severity"] == "error"
    assert "weights alone exceed the memory" in codes["DEC002"]["message"]
    states = {r["check"]: r["state"] for r in report["results"]}
    assert states == {"bandwidth": "findings", "decode-budget": "findings"}
    assert report["results"][0]["facts"]["bandwidth"]["cpu"]["read_gbps"] == bw["read_gbps"]


def test_dmidecode_without_root_or_missing(tmp_path):
    env = fake_tool(tmp_path / "bin", "dmidecode", "echo '/sys/firmware/dmi/tables/smbios_entry_point: Permission denied' >&2; echo '/dev/mem: Permission denied' >&2; exit 1")
    ctx = Context(runner=CommandRunner(env={**os.environ, **env}))
    assert memory_spec(ctx) == (None, "dmidecode needs root to read the memory tables")
    ctx = Context(runner=CommandRunner(env={"PATH": str(tmp_path / "empty")}))
    assert memory_spec(ctx) == (None, "dmidecode is not installed")


def test_budget_with_given_bandwidth_and_target(tmp_path):
    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    proc = run_dd("check", "--select", "decode-budget", "--model", str(model), "--bandwidth", "51.2", "--target-tps", "10", "--context", "2048", "--format", "json")
    findings = {f["code"]: f for f in json.loads(proc.stdout)["findings"]}
    cpu = findings["DEC001"]["evidence"]["budgets"]["cpu"]
    assert cpu["bandwidth_source"] == "given" and cpu["context"] == 2048
    assert cpu["kv_bytes_per_token"] == 2 * 28 * 4 * 128 * 2
    assert "DEC004" in findings and "below the target 10" in findings["DEC004"]["message"]


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
    proc = run_dd("check", "--select", "decode-budget", "--model", str(target), "--bandwidth", "10", "--format", "json")
    report = json.loads(proc.stdout)
    (finding,) = report["findings"]
    assert finding["code"] == code and text in finding["message"]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_estimate_json_with_sweep(tmp_path):
    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    proc = run_dd("estimate", "--model", str(model), "--context", "8192", "--concurrency", "4", "--bandwidth", "51.2", "--memory", "64", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    budget = data["budget"]
    assert budget["fit"] == "fits" and budget["kv_bytes_total"] == 56 * 1024 * 8192 * 4
    contexts = [row["context"] for row in budget["sweep"]]
    assert contexts[:5] == [512, 1024, 2048, 4096, 8192] and contexts[-1] == 131072
    rates = [row["tps_per_sequence"] for row in budget["sweep"]]
    assert rates == sorted(rates, reverse=True)


def test_estimate_text_gguf_and_exit_codes(tmp_path):
    gguf = llama_gguf(tmp_path / "tiny.gguf")
    proc = run_dd("estimate", "--model", str(gguf), "--bandwidth", "100", "--memory", "4", "--kv-dtype", "fp8")
    assert proc.returncode == 0, proc.stderr
    assert "context sweep" in proc.stdout and "KV cache" in proc.stdout and "(fp8)" in proc.stdout
    big = qwen2_7b(tmp_path / "q", shards=1)
    assert run_dd("estimate", "--model", str(big), "--bandwidth", "50", "--memory", "8").returncode == 1
    assert run_dd("estimate", "--model", str(big), "--bandwidth", "50", "--memory", "80", "--target-tps", "100").returncode == 1
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"nope")
    proc = run_dd("estimate", "--model", str(broken), "--bandwidth", "50")
    assert proc.returncode == 2 and "bad magic" in proc.stderr
    assert run_dd("estimate", "--model", str(big), "--device", "tpu:0", "--bandwidth", "1").returncode == 2


def test_gpu_probe_and_budget_on_the_gpu_through_fake_torch_and_nvml(tmp_path):
    """The GPU path with stand-ins for torch and pynvml (no GPU here): event timing, NVML peak, and
    a budget judged on cuda:0 rather than the CPU."""
    env = {"PYTHONPATH": str(FAKES), "DD_FAKE_GPU_GBPS": "2400", **fake_tool(tmp_path / "bin", "dmidecode", "exit 1")}
    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    proc = run_dd("check", "--root", str(FIXTURES / "hosts/gpu-h200"), "--select", "bandwidth,decode-budget", "--model", str(model), "--format", "json", env=env)
    findings = {}
    for f in json.loads(proc.stdout)["findings"]:
        findings.setdefault(f["code"], f)
    gpu = findings["BW004"]["evidence"]
    assert gpu["name"] == "NVIDIA H200 (fake)" and gpu["copy_gbps"] == pytest.approx(2400, rel=0.01)
    assert gpu["theoretical_gbps"] == pytest.approx(2 * 2619e6 * 5120 / 8 / 1e9, abs=0.1)  # 3352.3
    assert "BW005" not in findings  # 72 % of the peak
    budgets = findings["DEC001"]["evidence"]["budgets"]
    assert budgets["cuda:0"]["fit"] == "fits" and budgets["cuda:0"]["bandwidth_gbps"] == gpu["copy_gbps"]
    assert "cuda:0: fits" in findings["DEC001"]["message"]
    assert "DEC002" not in findings  # the 8 GB CPU is not judged on a GPU host


def test_busy_host_is_reported():
    import subprocess
    import sys

    from decode_doctor.membw import measure_cpu

    burners = [subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 4\nwhile time.time() < end: pass"]) for _ in range(2)]
    try:
        result = measure_cpu(64 << 20, budget_s=1.0)
    finally:
        for burner in burners:
            burner.kill()
    assert result.other_load > 0.15
