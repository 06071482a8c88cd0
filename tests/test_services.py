"""Services a test run starts die with it, however it ends: the supervisor that .ci/run and the
Docker fixtures start them under (tests/support/supervise.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from .support.services import SUPERVISE


def _alive(marker: str) -> list[int]:
    """The service's processes: the two sleeps and the supervisor (whose command line holds the marker too)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    argv = handle.read().split(b"\0")
            except OSError:
                continue
            is_sleep = argv[0] == b"sleep" and argv[1:2] == [marker.encode()]
            is_supervisor = any(arg.endswith(b"supervise.py") for arg in argv) and marker.encode() in b" ".join(argv)
            if is_sleep or is_supervisor:
                found.append(int(entry))
    return found


def _gone(marker: str, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(marker)


def _service(marker: str) -> str:
    # a service that starts a grandchild which leaves its process group and session, as daemons do
    return f"setsid sleep {marker} & sleep {marker}; wait"


def test_a_killed_test_run_takes_its_services_down():
    marker = f"1000.{os.getpid()}{time.time_ns() % 10**9}"
    runner = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, {str(SUPERVISE)!r}, '--', 'sh', '-c', {_service(marker)!r}], start_new_session=True)\n"
        "time.sleep(1000)\n"
    )
    test_run = subprocess.Popen([sys.executable, "-c", runner])
    deadline = time.monotonic() + 30
    while len(_alive(marker)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_alive(marker)) == 3, "the service never started"
    test_run.send_signal(signal.SIGKILL)  # no cleanup of its own runs
    test_run.wait()
    assert _gone(marker), f"left behind: {_alive(marker)}"


def test_stopping_the_supervisor_stops_the_service_and_what_it_started():
    marker = f"1000.{os.getpid()}{time.time_ns() % 10**9}"
    proc = subprocess.Popen([sys.executable, str(SUPERVISE), "--", "sh", "-c", _service(marker)], start_new_session=True)
    deadline = time.monotonic() + 30
    while len(_alive(marker)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert _gone(marker), f"left behind: {_alive(marker)}"
