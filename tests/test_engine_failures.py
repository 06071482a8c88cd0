"""Known engine failures (issue 42): llama.cpp's AMX crash diagnosed by a probe in a child process,
recognised in pasted logs, and calibrated through; a stream cut by a length limit far below what was
asked.

The AMX host is a stand-in: tests/support/amx holds a llama_cpp package that segfaults, as
ggml_backend_amx_mul_mat does on the hosts of llama.cpp#20824, when more than one token is evaluated
at once over weights it repacked for AMX (quantized weights, loaded with use_extra_bufts on). It goes
on PYTHONPATH for the children only; this process keeps the real llama-cpp-python (or none)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from decode_doctor.checks.enginefailures import catalog as failures
from decode_doctor.models import calibration
from decode_doctor.models.calibration import measure
from decode_doctor.models.randomgguf import Shape, write

from .conftest import REPO
from .support.harness import cli

AMX = REPO / "tests" / "support" / "amx"
AMX_VM = REPO / "fixtures" / "hosts" / "amx-vm"
CRASHES = REPO / "fixtures" / "engines" / "crashes"
TINY_SMALL = Shape(hidden=128, layers=2, ffn=256, heads=2, kv_heads=2, vocab=512)
TINY_LARGE = Shape(hidden=256, layers=4, ffn=512, heads=4, kv_heads=1, vocab=1024)


def _amx_env() -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(AMX), str(REPO), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture
def amx(monkeypatch):
    pytest.importorskip("gguf")
    for key, value in _amx_env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(measure, "engine_version", lambda: "0.3.36")


def test_the_catalog_is_data_with_sources_and_a_probe_for_every_verifiable_workaround():
    (amx_crash,) = failures.catalog()
    assert amx_crash.id == "llamacpp-amx-repack-segfault" and amx_crash.engine == "llama.cpp"
    assert {"amx_tile", "amx_int8"} == set(amx_crash.cpu_flags) and amx_crash.weight_types == ("Q4_0", "Q8_0")
    assert all(source.startswith("https://github.com/") for source in amx_crash.sources)
    assert "https://github.com/ggml-org/llama.cpp/issues/20824" in amx_crash.sources
    modes = {w.id: w.probe.mode if w.probe else None for w in amx_crash.workarounds}
    assert modes == {"no-repack": "batched-no-repack", "f16-weights": "batched", "no-amx-build": None}
    assert amx_crash.marks_buffer("AMX") and not amx_crash.marks_buffer("CPU_REPACK")
    assert failures.matching_buffers(("CPU_Mapped", "AMX")) is amx_crash and failures.matching_buffers(("CPU",)) is None


def test_check_on_an_amx_host_gives_the_crash_with_the_workarounds_the_probe_verified(amx):
    result = cli("check", "--root", str(AMX_VM), "--same-host", "--select", "engine-failures", "--format", "json")
    report = result.json()
    (finding,) = [f for f in report["findings"] if f["code"] == "ENG001"]
    assert finding["severity"] == "error" and result.exit_code == 1
    message, evidence = finding["message"], finding["evidence"]
    assert "crashed (SIGSEGV)" in message and "Q4_0, Q8_0" in message and "AMX kernel" in message
    assert evidence["verified_workarounds"] == ["no-repack", "f16-weights"]  # each probed here, and each survived
    assert evidence["unverified_workarounds"] == ["no-amx-build"] and "no-amx-build" not in " ".join(evidence["verified_workarounds"])
    assert "--no-repack" in message and "use_extra_bufts = False" in message
    assert evidence["buffers_mib"].get("AMX")  # the probe saw its weights repacked for AMX before the crash
    assert "https://github.com/ggml-org/llama.cpp/issues/20824" in evidence["sources"]
    text = cli("check", "--root", str(AMX_VM), "--same-host", "--select", "engine-failures").stdout
    assert "ENG001" in text and "Verified here:" in text


def test_the_probe_is_not_run_on_a_cpu_without_amx_nor_on_a_cpu_under_root(amx):
    healthy = REPO / "fixtures" / "hosts" / "healthy-server"
    plain = cli("check", "--root", str(healthy), "--same-host", "--select", "engine-failures", "--format", "json").json()
    (result,) = plain["results"]
    assert not plain["findings"] and result["state"] == "skipped" and "no known engine failure applies to this CPU" in result["reason"]
    elsewhere = cli("check", "--root", str(AMX_VM), "--select", "engine-failures", "--format", "json").json()
    assert not elsewhere["findings"]
    assert any("--same-host" in json.dumps(item) for item in elsewhere["not_judged"]), elsewhere["not_judged"]


def test_a_batched_prompt_that_crashes_is_a_crash_with_its_signal_and_kernel(amx, tmp_path):
    model = write(tmp_path / "small-Q4_0.gguf", TINY_SMALL, "Q4_0")
    with pytest.raises(calibration.EngineCrash) as caught:
        calibration.time_decode(model, 1, 16, 4, timeout_s=60)
    crash = caught.value
    assert crash.signal == "SIGSEGV" and crash.phase == "prompt" and crash.in_batched_prompt and "AMX" in crash.buffers
    text = str(crash)
    assert text.startswith("llama.cpp crashed (SIGSEGV) evaluating the 17-token prompt of small-Q4_0.gguf in one batch")
    assert "repacked into AMX buffers" in text and "--select engine-failures" in text
    fed = calibration.time_decode(model, 1, 16, 4, timeout_s=60, prompt="one-token")  # the decode path survives
    assert fed.seconds > 0


def test_calibrate_takes_the_path_that_does_not_crash_and_says_so(amx, tmp_path, monkeypatch):
    """Q4_0 and Q8_0 calibrate on the crashing host: the first batched prompt dies by SIGSEGV, the
    crash is said as one, and every run at depth feeds its prompt one token at a time."""
    monkeypatch.setattr(measure, "SMALL", TINY_SMALL)
    monkeypatch.setattr(measure, "LARGE", TINY_LARGE)
    monkeypatch.setattr(measure, "DEPTH", 32)
    for weight_type in ("Q4_0", "Q8_0"):
        said: list[str] = []
        found = calibration.calibrate(1, weight_type, tmp_path / "state", said.append)
        assert found.prompt == "one-token" and found.crash.startswith("llama.cpp crashed (SIGSEGV) evaluating the 33-token prompt")
        assert found.s_per_byte > 0 and len(found.points) == 2 and found.passes >= calibration.PASSES_MIN
        assert any("calibrating with the prompt fed one token at a time" in line for line in said), said
        assert sum("crashed" in line for line in said) == 1  # said once, then the path that works is taken
    kept = calibration.load(tmp_path / "state")
    assert [c.weight_type for c in kept] == ["Q4_0", "Q8_0"] and all(c.crash for c in kept)


def test_estimate_calibrates_through_the_crash_and_says_what_a_server_needs(amx, tmp_path, monkeypatch):
    monkeypatch.setattr(measure, "SMALL", TINY_SMALL)
    monkeypatch.setattr(measure, "DEPTH", 64)
    model = write(tmp_path / "model-Q4_0.gguf", TINY_LARGE, "Q4_0")
    argv = (
        "estimate",
        "--model",
        str(model),
        "--threads",
        "1",
        "--bandwidth",
        "40",
        "--context",
        "512",
        "--state-dir",
        str(tmp_path / "s"),
    )
    result = cli(*argv, "--calibrate", "--format", "json")
    prediction = result.json()["prediction"]
    assert prediction["calibrated"] and prediction["calibration"]["prompt"] == "one-token", prediction
    assert "SIGSEGV" in prediction["calibration"]["crash"] and "AMX" in prediction["calibration"]["crash"]
    text = cli(*argv).stdout  # the record is reused: the note stays with it
    assert "calibrated with the prompt fed one token at a time" in text and "engine-failures" in text, text
    assert "--no-repack" in text


@pytest.mark.parametrize("name", ["ollama-issue17236-amx-segfault.log", "dspy-pr10079-amx-segfault.log"])
def test_analyze_recognises_the_crash_in_a_pasted_log(name):
    report = cli("analyze", str(CRASHES / name), "--format", "json").json()
    (finding,) = report["findings"]
    assert finding["code"] == "ENG001" and "llamacpp-amx-repack-segfault" in finding["message"]
    assert "AMX model buffer size" in finding["message"] and "--no-repack" in finding["message"]
    assert finding["evidence"]["line"] > finding["evidence"]["marker_line"]


def test_a_log_with_the_buffer_but_no_crash_is_no_finding(tmp_path):
    healthy = tmp_path / "healthy.log"
    healthy.write_text(
        (CRASHES / "dspy-pr10079-amx-segfault.log").read_text().splitlines()[1] + "\nsrv  update_slots: all slots are idle\n"
    )
    result = cli("analyze", str(healthy), "--format", "json")
    assert "ENG001" not in result.stdout


LENGTH = REPO / "fixtures" / "serving" / "sse" / "llamacpp-issue12137-length.sse"


def test_a_stream_cut_by_a_length_limit_far_below_what_was_asked_is_a_finding():
    """llama.cpp#12137: finish_reason "length" after 1 completion token of a request with max_tokens -1."""
    report = cli("analyze", str(LENGTH), "--format", "json").json()
    (finding,) = [f for f in report["findings"] if f["code"] == "LIV011"]
    message = finding["message"]
    assert "after 1 completion token(s)" in message and "set no limit (max_tokens -1 or null)" in message
    assert "44 tokens (43 prompt + 1 completion)" in message and "-c ÷ --parallel" in message and "-n/--n-predict" in message
    assert finding["evidence"]["completion_tokens"] == 1 and finding["evidence"]["prompt_tokens"] == 43
    assert "Ready" not in cli("analyze", str(LENGTH)).stdout


@pytest.mark.parametrize(
    ("request_line", "completion", "expected"),
    [
        ('{"max_tokens": 256}', 3, True),  # far below what was asked
        ('{"max_tokens": 4}', 3, False),  # the request's own limit, nearly reached
        ('{"max_completion_tokens": null}', 90, True),  # no limit asked: another limit ended it
        (None, 1, True),  # no request pasted, and one word: no answer is asked to be that short
        (None, 4, False),  # without the request, 4 tokens may be what was asked (a probe, a test)
    ],
)
def test_the_length_finding_compares_with_what_the_request_asked(tmp_path, request_line, completion, expected):
    usage = {"prompt_tokens": 10, "completion_tokens": completion, "total_tokens": 10 + completion}
    event = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}], "usage": usage}
    lines = ([request_line] if request_line else []) + [f"data: {json.dumps(event)}", "data: [DONE]"]
    paste = tmp_path / "stream.sse"
    paste.write_text("\n".join(lines) + "\n")
    codes = [f["code"] for f in cli("analyze", str(paste), "--format", "json").json()["findings"]]
    assert ("LIV011" in codes) is expected, codes


def test_the_stand_in_child_is_the_only_one_that_crashes(tmp_path):
    """The stand-in is on the children's PYTHONPATH only: this process's llama_cpp (if any) is not it."""
    try:
        import llama_cpp
    except ImportError:
        return
    assert Path(llama_cpp.__file__).resolve().parent != (AMX / "llama_cpp").resolve()
