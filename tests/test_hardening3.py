"""Hardening, third pass (issue 40): state files read as hostile input, workers that die with their
parent, a config.json whose architectures is not a list of names. Each reproduction fails on the
code before the fix."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from decode_doctor.checks.bandwidth import membw
from decode_doctor.engine.statefile import append_record, read_state
from decode_doctor.models.calibration import CACHE_NAME, Calibration

from .support.harness import cli, run_check
from .test_cli_contract import tiny_config
from .test_decode_checks import steady


def _calibration(**changed: object) -> dict[str, object]:
    good = {
        "host": "h/cpu", "engine": "llama.cpp", "engine_version": "0.3.36", "threads": 2, "weight_type": "F16",
        "fixed_s": 0.0001, "s_per_byte": 3e-11, "s_per_unit": 1e-12, "s_per_kv_byte": 1e-11, "spread": 0.05,
        "measured_at": time.time() - 60,
    }  # fmt: skip
    return {**good, **changed}


HOSTILE = [
    ("a string for a number", {"s_per_byte": "fast"}),
    ("null", {"fixed_s": None}),
    ("400 digits", {"threads": int("9" * 400)}),
    ("NaN", {"spread": math.nan}),
    ("Infinity", {"s_per_byte": math.inf}),
    ("negative", {"fixed_s": -1.0}),
    ("a time in the future", {"measured_at": time.time() + 86400 * 365}),
    ("Infinity as a time", {"measured_at": math.inf}),
    ("no threads", {"threads": 0}),
]


@pytest.mark.parametrize(("label", "changed"), HOSTILE, ids=[label for label, _ in HOSTILE])
def test_a_calibration_record_with_a_hostile_field_is_ignored_with_the_reason(tmp_path, label, changed):
    path = tmp_path / CACHE_NAME
    path.write_text(json.dumps([_calibration(), _calibration(**changed)]))  # Python's json writes NaN and Infinity
    read = read_state(path, Calibration)
    assert len(read.records) == 1 and len(read.ignored) == 1, label
    assert "record 2: ignored" in read.ignored[0]


@pytest.mark.parametrize(
    "content",
    [b'[{"threads": 2', b"\x00\xff garbage", b"{}", b"[" * 100_000, b"[]" + b" " * (2 << 20)],
    ids=["truncated", "garbage", "object", "deep", "large"],
)
def test_an_unusable_state_file_is_said_and_kept_aside_before_the_next_write(tmp_path, content):
    path = tmp_path / CACHE_NAME
    path.write_bytes(content)
    read = read_state(path, Calibration)
    assert read.unusable and read.records == [] and len(read.ignored) == 1
    append_record(path, Calibration(**_calibration()), Calibration, 64)  # type: ignore[arg-type]
    kept = [p for p in tmp_path.iterdir() if p.name.startswith(f"{CACHE_NAME}.kept-")]
    assert len(kept) == 1 and kept[0].read_bytes() == content  # nothing lost
    assert len(read_state(path, Calibration).records) == 1


def test_a_file_with_one_bad_record_keeps_the_good_ones_and_the_original_aside(tmp_path):
    path = tmp_path / CACHE_NAME
    original = json.dumps([_calibration(), _calibration(threads="two")])
    path.write_text(original)
    append_record(path, Calibration(**_calibration(weight_type="Q8_0")), Calibration, 64)  # type: ignore[arg-type]
    assert [c.weight_type for c in read_state(path, Calibration).records] == ["F16", "Q8_0"]
    (kept,) = [p for p in tmp_path.iterdir() if ".kept-" in p.name]
    assert kept.read_text() == original


@pytest.mark.parametrize("name", [CACHE_NAME, "bandwidth-quiet.json"])
def test_a_fifo_as_a_state_file_is_named_and_never_blocks_estimate(tmp_path, monkeypatch, name):
    monkeypatch.setattr(membw, "measure_cpu", steady(25.0))
    state = tmp_path / "state"
    state.mkdir()
    os.mkfifo(state / name)
    model = tiny_config(tmp_path / "m")
    started = time.monotonic()
    result = cli("estimate", "--model", str(model), "--memory", "64", "--threads", "2", "--state-dir", str(state), "--format", "json")
    assert time.monotonic() - started < 60
    assert result.exit_code == 0, result.stderr
    data = result.json()
    said = json.dumps(data, ensure_ascii=False)
    assert str(state / name) in said and "FIFO" in said, said[:2000]


def test_a_hostile_bandwidth_figure_is_never_a_ceiling(tmp_path, monkeypatch):
    monkeypatch.setattr(membw, "measure_cpu", steady(25.0))
    state = tmp_path / "state"
    state.mkdir()
    measured = {
        "read_gbps": math.inf, "copy_gbps": 1.0, "read_spread": 0.0, "copy_spread": 0.0, "threads": 2,
        "buffer_bytes": 1 << 28, "passes": 3, "wall_s": 1.0, "other_load": 0.0,
    }  # fmt: skip
    figure = {"measured_at": time.time(), "machine": "x", "facts": {"cpu": {"measured": measured}}}
    (state / "bandwidth-quiet.json").write_text(json.dumps({"figures": [figure]}))
    model = tiny_config(tmp_path / "m")
    device = cli("estimate", "--model", str(model), "--memory", "64", "--threads", "2", "--state-dir", str(state), "--format", "json")
    assert device.exit_code == 0, device.stderr
    assert device.json()["device"]["bandwidth_gbps"] == 25.0  # measured, not "inf GB/s cached"
    assert [p.name for p in state.iterdir() if ".kept-" in p.name]  # the file it could not use, kept aside


WORKER = textwrap.dedent(
    """
    import sys, time
    from decode_doctor.engine.workers import Child

    def sleeper(conn):
        time.sleep(120)

    child = Child.start(sleeper, own_group=True)
    print(child.pid, flush=True)
    time.sleep(120)
    """
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_worker_dies_with_its_parent_on_every_signal(signum):
    parent = subprocess.Popen([sys.executable, "-c", WORKER], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        assert _alive(worker)
        parent.send_signal(signum)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 20
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(worker), "the worker outlived its parent"
    finally:
        parent.kill()
        parent.wait()


def test_architectures_that_are_not_names_are_sized_from_the_model_type(tmp_path):
    model = tiny_config(tmp_path / "m")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "architectures": [[0]]}))
    run = run_check("decode-budget", models=(model,), options={"bandwidth": 40.0})
    assert run.facts is not None
    result = cli("estimate", "--model", str(model), "--bandwidth", "40", "--memory", "16", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["model"]["architecture"] == "llama"


KEY = "sk-test-7f3a9c1e5b2d4f6a8c0e"


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "html"])
def test_bench_never_prints_the_api_key_a_server_echoes_in_any_format(tmp_path, fmt):
    from .support.faultserver import FaultServer

    with FaultServer(answers="echo-401") as server:
        args = ("bench", "--endpoint", server.url, "--concurrency", "1", "--requests", "2", "--format", fmt)
        shown = cli(*args, env={"OPENAI_API_KEY": KEY})
        saved = cli(*args, "-o", str(tmp_path / f"out.{fmt}"), env={"OPENAI_API_KEY": KEY})
        assert any(KEY in a for a in server.authorizations)  # it was sent, and echoed back
    assert KEY not in shown.stdout + shown.stderr
    assert KEY not in saved.stdout + saved.stderr + (tmp_path / f"out.{fmt}").read_text()


def test_a_model_list_that_is_not_answered_is_the_endpoint_error_not_a_missing_model():
    from .support.faultserver import FaultServer

    with FaultServer(answers="redirect") as server:
        result = cli("bench", "--endpoint", server.url, "--concurrency", "1", "--requests", "2")
    assert result.exit_code == 2
    assert "/v1/models answered HTTP 307, not a model list" in result.stderr and "give --model" not in result.stderr


HOSTILE_NAME = "m\x1b]0;pwned\x07\r\u202etxt"


def _raw_controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0 or 0x202A <= ord(c) <= 0x202E]


def test_names_with_terminal_escapes_reach_no_terminal_raw(tmp_path):
    model = tiny_config(tmp_path / HOSTILE_NAME)
    (model / f"x{HOSTILE_NAME}.json").write_bytes('{"a": "这是一个大型语言模型的配置文件"}'.encode("gbk"))
    log = tmp_path / f"vllm{HOSTILE_NAME}.log"
    log.write_text("INFO 01-01 00:00:00 engine.py:1] Avg prompt throughput: 1.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs\n")
    outputs = {
        "check": cli("check", "--select", "encodings,model-artifacts", "--model", str(model), "--root", str(tmp_path)),
        "estimate": cli("estimate", "--model", str(model), "--bandwidth", "40", "--memory", "16"),
        "analyze": cli("analyze", str(log)),
    }
    for command, result in outputs.items():
        assert HOSTILE_NAME not in result.stdout + result.stderr, command
        assert _raw_controls(result.stdout + result.stderr) == [], command
    assert "\\x1b]0;pwned\\x07" in outputs["check"].stdout and "\\u202e" in outputs["check"].stdout


def test_a_stream_of_sse_pings_ends_as_a_stall_within_its_idle_bound_under_load():
    """ ": ping" comments and nothing else: comments keep the connection, not the stream. Beside two busy
    loops (the load the hangs were seen under), every run ends as a stall, well inside the whole bound."""
    import asyncio

    from decode_doctor.checks.serving.client import Endpoint, StreamLimits, stream

    from .support.faultserver import FaultServer

    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        with FaultServer() as server:
            for _ in range(5):
                body = {"model": "pings", "max_tokens": 4, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
                started = time.monotonic()
                record = asyncio.run(stream(Endpoint.parse(server.url), "/v1/chat/completions", body, StreamLimits(2.0, 0.5, 30.0)))
                assert record.kind == "stall" and record.chunks == 0, (record.kind, record.error)
                assert time.monotonic() - started < 15
    finally:
        for loop in busy:
            loop.kill()
            loop.wait()


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf"])
def test_a_gauge_that_is_not_a_number_is_said_so_not_called_absent(value):
    from decode_doctor.checks.serving import diagnosis, engines, promtext

    from .conftest import FIXTURES

    text = (FIXTURES / "serving" / "vllm-v0-qwen25-coder-1.5b-idle.prom").read_text()
    text = text.replace(
        'vllm:gpu_cache_usage_perc{model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 0.0',
        f'vllm:gpu_cache_usage_perc{{model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"}} {value}',
    )
    snap = engines.snapshot(promtext.parse(text))
    why = dict(diagnosis.unjudged(snap))["KV-cache pressure"]
    assert "vllm:gpu_cache_usage_perc is not a number (NaN or Inf)" in why


def test_a_utf16_log_as_powershell_writes_it_is_read(tmp_path):
    from .conftest import FIXTURES

    logs = sorted((FIXTURES / "serving" / "logs").glob("*vllm*"))
    assert logs
    original = logs[0].read_text(encoding="utf-8")
    english = cli("analyze", str(logs[0]), "--format", "json").json()
    assert english["findings"] or english["facts"], "the UTF-8 log itself is read"
    for name, data in (("bom.log", original.encode("utf-16")), ("le.log", original.encode("utf-16-le"))):
        (tmp_path / name).write_bytes(data)
        found = cli("analyze", str(tmp_path / name), "--format", "json").json()
        assert [f["code"] for f in found["findings"]] == [f["code"] for f in english["findings"]], name


@pytest.mark.parametrize("left", ["an empty directory", "a manifest with no line"])
def test_undo_after_a_kill_inside_the_first_quarantine_move_leaves_no_quarantine(tmp_path, left):
    from decode_doctor.fixes.actions import MoveFile

    dataset = tmp_path / "photos"
    dataset.mkdir()
    image = dataset / "broken.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n broken")
    quarantine = tmp_path / "photos.quarantine"
    move = MoveFile(image, quarantine / "broken.png", "damaged", manifest=quarantine / "manifest.jsonl", within=dataset)
    record = move.intent()
    quarantine.mkdir()  # the kill came after the directory, before (or inside) the manifest's first line
    if left == "a manifest with no line":
        (quarantine / "manifest.jsonl").write_bytes(b"")
    assert MoveFile.undo(record, tmp_path / "run").startswith("original")
    assert not quarantine.exists() and image.read_bytes() == b"\x89PNG\r\n\x1a\n broken"


def test_a_server_log_with_a_number_of_400_digits_is_read_not_crashed(tmp_path):
    """Found by benchmarks/fuzz.py's pasted-server-logs target: int(float("9" * 400)) raised."""
    log = tmp_path / "llama.log"
    log.write_text(
        "main: server is listening on http://0.0.0.0:8080 - starting the main loop\n"
        f"slot launch_slot_: id  0 | task 0 | n_ctx_slot = {'9' * 400}\n"
    )
    result = cli("analyze", str(log), "--format", "json")
    assert result.exit_code in (0, 1, 3), result.stderr
    assert result.json()["summary"]["checks"]["crashed"] == 0
