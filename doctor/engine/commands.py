"""The one way a check runs a command: a timeout that kills the whole process group, and a record."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence

from ..i18n import said
from .findings import CommandRecord
from .workers import kill_group

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MAX_OUTPUT = 1 << 20

GroupHook = Callable[[int, tuple[str, ...]], None]


def _decode(data: bytes, limit: int) -> tuple[str, bool]:
    truncated = len(data) > limit
    return data[:limit].decode("utf-8", errors="replace"), truncated


def _collect(proc: subprocess.Popen[bytes], input_bytes: bytes | None, timeout_s: float, limit: int) -> tuple[bytes, bytes, bool]:
    """stdout and stderr as they stream, each kept to limit + 1 bytes (the rest read and dropped, so
    a command that prints a gigabyte costs a megabyte), the input written, until the end or the
    deadline; at the deadline the process group is killed."""
    import selectors
    import threading

    if input_bytes is not None and proc.stdin is not None:
        stdin = proc.stdin

        def feed() -> None:
            try:
                stdin.write(input_bytes)
                stdin.close()
            except OSError:  # the command exited without reading it all
                pass

        threading.Thread(target=feed, daemon=True).start()
    kept: dict[int, bytearray] = {}
    selector = selectors.DefaultSelector()
    fds = [stream.fileno() if stream is not None else -1 for stream in (proc.stdout, proc.stderr)]
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            kept[stream.fileno()] = bytearray()
            selector.register(stream, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    timed_out = False
    try:
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in selector.select(timeout=min(left, 1.0)):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffer = kept[key.fd]
                if len(buffer) <= limit:
                    buffer += chunk[: limit + 1 - len(buffer)]
    finally:
        selector.close()
    if timed_out:
        kill_group(proc.pid)
    try:
        proc.wait(timeout=2 if timed_out else max(deadline - time.monotonic(), 0.1))
    except subprocess.TimeoutExpired:  # closed its pipes but lives on, or a grandchild holds them
        timed_out = True
        kill_group(proc.pid)
        proc.kill()
        proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    out, err = (bytes(kept.get(fd, b"")) for fd in fds)
    return out, err, timed_out


class CommandRunner:
    """Runs commands for checks and keeps a record of each one.

    Each command gets its own process group, so a timeout kills the command and everything it
    started. The engine registers hooks to learn about live groups: if the check itself is killed
    for running too long, the engine kills the groups that are still alive.
    """

    def __init__(self, env: Mapping[str, str] | None = None, default_timeout_s: float = DEFAULT_TIMEOUT_S):
        self.env = dict(os.environ if env is None else env)
        self.default_timeout_s = default_timeout_s
        self.records: list[CommandRecord] = []
        self.on_spawn: GroupHook | None = None
        self.on_reap: GroupHook | None = None

    def which(self, name: str) -> str | None:
        return shutil.which(name, path=self.env.get("PATH", os.defpath))

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float | None = None,
        input_bytes: bytes | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
        env: Mapping[str, str] | None = None,
    ) -> CommandRecord:
        argv = tuple(argv)
        timeout_s = self.default_timeout_s if timeout_s is None else timeout_s
        started = time.monotonic()
        executable = argv[0] if os.sep in argv[0] else self.which(argv[0])
        if executable is None:
            return self._keep(CommandRecord(argv, None, 0.0, "", "", error=said("{command}: not found on PATH", command=argv[0])))
        try:
            proc = subprocess.Popen(
                (executable, *argv[1:]),
                stdin=subprocess.PIPE if input_bytes is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**self.env, **(env or {})},
                start_new_session=True,
            )
        except OSError as exc:
            return self._keep(CommandRecord(argv, None, time.monotonic() - started, "", "", error=str(exc)))
        if self.on_spawn:
            self.on_spawn(proc.pid, argv)
        try:
            out, err, timed_out = _collect(proc, input_bytes, timeout_s, max_output)
        finally:
            if self.on_reap:
                self.on_reap(proc.pid, argv)
        stdout, cut_out = _decode(out or b"", max_output)
        stderr, cut_err = _decode(err or b"", max_output)
        return self._keep(
            CommandRecord(
                argv,
                None if timed_out else proc.returncode,
                time.monotonic() - started,
                stdout,
                stderr,
                timed_out=timed_out,
                error=said("timed out after {seconds:g} s", seconds=timeout_s) if timed_out else None,
                truncated=cut_out or cut_err,
            )
        )

    def _keep(self, record: CommandRecord) -> CommandRecord:
        self.records.append(record)
        return record


def signal_name(returncode: int) -> str | None:
    """SIGSEGV for a child a signal ended (returncode -11, or a shell's 139)."""
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    try:
        return signal.Signals(number).name if number else None
    except ValueError:
        return f"signal {number}"
