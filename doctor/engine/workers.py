"""Forked worker processes with deadlines: the one way decode-doctor runs work it must be able to kill.

Threads cannot be killed, so anything that may hang (a check, a C decoder stuck on a crafted
image) runs in a forked child that talks back over a pipe. The parent waits on every child's pipe
at once, up to the earliest deadline, and kills (SIGKILL, the whole process group when the child
has its own) what overruns. Used by the check runner and by the images feature's decoder pool.
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing import Pipe
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING

from ..i18n import _

if TYPE_CHECKING:
    from typing_extensions import TypeVarTuple, Unpack

    Ts = TypeVarTuple("Ts")

CRASH_STATUS = 70  # a child whose target raised exits with this status


def usable_cpus() -> int:
    """The CPUs this process may run on, and no more than its cgroup's CPU quota allows (a container
    limited to 2 CPUs on a 128-core node: 2; threads beyond it are throttled, not parallel)."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        count = os.cpu_count() or 1
    quota = cpu_quota()
    return max(1, min(count, math.ceil(quota))) if quota else count


def cpu_quota() -> float | None:
    """This cgroup's CPU limit in CPUs (cgroup v2 cpu.max, v1 cfs_quota_us / cfs_period_us); None: unlimited or unknown."""
    for path, split in (("/sys/fs/cgroup/cpu.max", True), ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", False)):
        try:
            with open(path) as handle:
                text = handle.read(256).split()
            if split:
                quota, period = text[0], text[1]
            else:
                with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as handle:
                    quota, period = text[0], handle.read(64).strip()
        except (OSError, IndexError):
            continue
        if quota in ("max", "-1") or not period.isdecimal() or not quota.isdecimal() or int(period) == 0:
            return None
        return int(quota) / int(period)
    return None


def process_table() -> dict[int, tuple[int, int]]:
    """pid → (parent pid, process group), from /proc (empty where there is no /proc)."""
    table: dict[int, tuple[int, int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdecimal():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp …
        if len(fields) > 2 and fields[1].isdecimal() and fields[2].isdecimal():
            table[int(entry)] = (int(fields[1]), int(fields[2]))
    return table


def child_groups(pid: int) -> set[int]:
    """The process groups of pid's children, from /proc (empty where there is no /proc)."""
    return {group for parent, group in process_table().values() if parent == pid}


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _die_with_parent(parent: int) -> None:
    """In a forked child: SIGKILL when the parent dies (Linux's PR_SET_PDEATHSIG), so a parent killed
    by a signal it cannot clean up after (SIGKILL; SIGTERM without a handler) leaves no worker running
    in its own process group under PID 1."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent's own cleanup is all there is
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(CRASH_STATUS)


PR_SET_PDEATHSIG = 1


@dataclass(eq=False)
class Child:
    """A forked process running target(conn, *args); conn is the parent's end of the pipe."""

    pid: int
    conn: Connection[object, object]  # what crosses it is the caller's protocol (runner.py: typed messages)
    own_group: bool
    deadline: float = math.inf
    reaped: bool = False

    @classmethod
    def start(
        cls,
        target: Callable[[Connection[object, object], Unpack[Ts]], object],
        *args: Unpack[Ts],
        own_group: bool = False,
        duplex: bool = False,
    ) -> Child:
        if duplex:
            mine, theirs = Pipe(duplex=True)
        else:
            mine, theirs = Pipe(duplex=False)  # (reader, writer)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            status = 0
            try:
                _die_with_parent(parent)
                if own_group:
                    os.setpgid(0, 0)
                mine.close()
                target(theirs, *args)
            except BaseException:
                status = CRASH_STATUS
            finally:
                os._exit(status)
        if own_group:
            try:
                os.setpgid(pid, pid)  # from both sides: no window where a kill misses the group
            except (PermissionError, ProcessLookupError):
                pass
        theirs.close()
        return cls(pid, mine, own_group)

    def set_deadline(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def freeze(self) -> None:
        """SIGSTOP: it starts nothing more, and what it started is still its children."""
        try:
            os.kill(self.pid, signal.SIGSTOP)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        """SIGKILL (the group too, when the child leads one); what it sent before stays readable."""
        if self.own_group:
            kill_group(self.pid)
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """stop(), then reap."""
        self.stop()
        self.reap()

    def reap(self) -> str:
        """Waits for the child; says how it ended."""
        if self.reaped:
            return _("the process had ended")
        self.reaped = True
        try:
            _pid, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return _("the process vanished")
        finally:
            self.conn.close()
        if os.WIFSIGNALED(status):
            return _("the process was killed by {signal}", signal=signal.Signals(os.WTERMSIG(status)).name)
        return _("the process exited with status {status}", status=os.WEXITSTATUS(status))


def wait_ready(children: Iterable[Child]) -> tuple[list[Child], list[Child]]:
    """Blocks until a child's pipe is readable or the earliest deadline passes.

    Returns (readable, overdue); a child is in at most one of them.
    """
    pending = list(children)
    if not pending:
        return [], []
    timeout = min(child.deadline for child in pending) - time.monotonic()
    ready = set(wait([child.conn for child in pending], timeout=None if math.isinf(timeout) else max(0.0, timeout)))
    now = time.monotonic()
    readable = [child for child in pending if child.conn in ready]
    overdue = [child for child in pending if child.conn not in ready and now >= child.deadline]
    return readable, overdue
