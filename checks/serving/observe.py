"""What the host did while `bench` measured concurrency 1 against a server on this host: the CPU the
server's process used (its llama.cpp threads at work), how many of its threads were busy (each
at least half the busiest one's CPU and BUSY_THREAD of a core: llama.cpp's compute threads share a
step's work evenly; idle pool threads fall below), and what every other process used beside it and
the bench itself. The busy threads, not the total, are what a calibrated thread count is compared
with: 4 threads starved on 2 cores still show 4, and steal does not make a thread disappear. A gap
between the calibrated prediction and the measurement is explained from these, never guessed."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from decode_doctor.engine.hostload import Window

BUSY_THREAD = 0.1  # of a core, over the window: at least this, and half the busiest thread's, is a thread at work


def busy_threads(cores: list[float]) -> int:
    """How many of the threads (each one's cores over the window) were at work."""
    busiest = max(cores, default=0.0)
    return sum(c >= BUSY_THREAD and c >= busiest / 2 for c in cores)


@dataclass(frozen=True)
class ServerLoad:
    server_cores: float | None  # the server process's CPU over the window, in cores (None: not found)
    foreign_cores: float  # everything else but this process and the server, in cores
    steal: float
    busy_threads: int | None = None  # the server's threads busy over the window (None: its threads unreadable)


class Observer:
    """Opened before the level runs, closed after it."""

    def __init__(self, port: int) -> None:
        self.process = _listening(port)
        self.window = Window()
        self.own = time.process_time()
        self.started = time.perf_counter()
        self.server_cpu = _cpu(self.process)
        self.server_threads = _thread_cpu(self.process)

    def close(self) -> ServerLoad:
        wall = time.perf_counter() - self.started
        server = _cpu(self.process)
        threads = _thread_cpu(self.process)
        used = server - self.server_cpu if server is not None and self.server_cpu is not None else None
        load = self.window.close(time.process_time() - self.own + (used or 0.0))
        busy = None
        if threads is not None and self.server_threads is not None and wall:
            busy = busy_threads([(seconds - self.server_threads.get(tid, 0.0)) / wall for tid, seconds in threads.items()])
        return ServerLoad(round(used / wall, 3) if used is not None and wall else None, load.foreign_cores, load.steal, busy)


def _listening(port: int) -> Any:
    """The local process listening on port (psutil.Process), or None."""
    try:
        import psutil

        for conn in psutil.net_connections(kind="inet"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid and conn.pid != os.getpid():
                return psutil.Process(conn.pid)
    except Exception:  # no psutil, psutil.AccessDenied or NoSuchProcess: not ours to watch
        return None
    return None


def _cpu(process: Any) -> float | None:
    if process is None:
        return None
    try:
        times = process.cpu_times()
        return float(times.user + times.system)
    except Exception:  # the server exited meanwhile
        return None


def _thread_cpu(process: Any) -> dict[int, float] | None:
    """Each of the process's threads' CPU seconds so far, by thread id (None: not readable)."""
    if process is None:
        return None
    try:
        return {thread.id: float(thread.user_time + thread.system_time) for thread in process.threads()}
    except Exception:  # exited, or not ours to read
        return None
