"""What the host did while `bench` measured concurrency 1 against a server on this host: the CPU the
server's process used (its llama.cpp threads at work), and what every other process used beside it
and the bench itself. A gap between the calibrated prediction and the measurement is explained
from these, never guessed."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from decode_doctor.engine.hostload import Window


@dataclass(frozen=True)
class ServerLoad:
    server_cores: float | None  # the server process's CPU over the window, in cores (None: not found)
    foreign_cores: float  # everything else but this process and the server, in cores
    steal: float


class Observer:
    """Opened before the level runs, closed after it."""

    def __init__(self, port: int) -> None:
        self.process = _listening(port)
        self.window = Window()
        self.own = time.process_time()
        self.started = time.perf_counter()
        self.server_cpu = _cpu(self.process)

    def close(self) -> ServerLoad:
        wall = time.perf_counter() - self.started
        server = _cpu(self.process)
        used = server - self.server_cpu if server is not None and self.server_cpu is not None else None
        load = self.window.close(time.process_time() - self.own + (used or 0.0))
        return ServerLoad(round(used / wall, 3) if used is not None and wall else None, load.foreign_cores, load.steal)


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
