"""The command runner: timeouts kill the whole process group; every run is recorded."""

from __future__ import annotations

import os
import time

from decode_doctor.engine.commands import CommandRunner


def test_records_output_and_exit_code():
    runner = CommandRunner()
    record = runner.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (record.exit_code, record.stdout, record.stderr) == (3, "out\n", "err\n")
    assert runner.records == [record]
    assert not record.ok


def test_missing_binary_is_a_record_not_an_exception():
    record = CommandRunner(env={"PATH": "/nonexistent"}).run(["nvidia-smi", "-q"])
    assert record.exit_code is None
    assert record.error == "nvidia-smi: not found on PATH"


def test_timeout_kills_the_command_and_its_children():
    marker = f"1000.{os.getpid()}{time.time_ns() % 10**9}"
    started = time.monotonic()
    record = CommandRunner().run(["sh", "-c", f"sleep {marker} & sleep {marker}; wait"], timeout_s=0.5)
    assert record.timed_out and record.exit_code is None
    assert time.monotonic() - started < 5  # the 0.5 s limit, with room for a busy machine
    time.sleep(0.1)
    leftovers = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).find(marker) >= 0]
    assert leftovers == []


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def test_output_is_capped():
    record = CommandRunner().run(["sh", "-c", "head -c 5000 /dev/zero | tr '\\0' x"], max_output=100)
    assert len(record.stdout) == 100 and record.truncated


def test_input_and_environment():
    record = CommandRunner(env={"PATH": os.environ["PATH"], "A": "1"}).run(
        ["sh", "-c", "cat; echo $A$B"], input_bytes=b"in:", env={"B": "2"}
    )
    assert record.stdout == "in:12\n"
