"""Runs a service so that it dies with whoever started it, however that one ends.

    python3 tests/support/supervise.py -- dockerd --data-root …

The supervisor asks the kernel for SIGTERM when its parent dies (PR_SET_PDEATHSIG) and becomes a
child subreaper (PR_SET_CHILD_SUBREAPER), so every process the service starts, even one that
detaches (containerd under dockerd), stays its descendant. On SIGTERM or SIGINT, on its parent's
death, or when the service exits, it stops the service (SIGTERM, then SIGKILL after a grace
period) and then every descendant left, and exits with the service's status.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
GRACE_S = 10.0


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(entry))
    return found


def _descendants(pid: int) -> list[int]:
    pending, found = [pid], []
    while pending:
        for child in _children(pending.pop()):
            found.append(child)
            pending.append(child)
    return found


def _reap_all() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _stop(service: subprocess.Popen[bytes]) -> None:
    if service.poll() is None:
        service.send_signal(signal.SIGTERM)
        try:
            service.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            service.kill()
    deadline = time.monotonic() + GRACE_S
    while True:
        left = _descendants(os.getpid())
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGTERM if time.monotonic() < deadline else signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
        _reap_all()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: supervise.py -- COMMAND [ARG…]", file=sys.stderr)
        return 2
    parent = os.getppid()
    if parent == 1:  # whoever started us is already gone
        return 1
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    stopping = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: stopping.append(signum))
    if os.getppid() != parent:  # the parent died before the death signal was armed
        return 1
    service = subprocess.Popen(argv)
    while not stopping and service.poll() is None:
        time.sleep(0.1)
    _stop(service)
    return service.returncode if service.returncode is not None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
