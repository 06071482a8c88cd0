"""Runs checks, each in a forked child process that can really be killed.

Threads cannot be killed, so a hung probe would hang the run: every check runs in its own process
(a process group of its own), talks back over a pipe, and is SIGKILLed with every command it
started when its time is up. A check that raises, or dies, becomes a "crashed" result; the others
go on. Checks that declare `exclusive` (timing probes) run alone; checks that declare `after` run
once those have finished, and see the facts they published in ctx.facts.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing import Pipe
from multiprocessing.connection import Connection, wait

from .check import Check, SkipCheck
from .commands import kill_group
from .context import Context
from .model import CheckResult, CommandRecord, State

MAX_PARALLEL = 8
Progress = Callable[[str, str], None]  # (event, check name): "start" / "done"


def unmet_need(cls: type[Check], ctx: Context) -> str | None:
    needs = cls.needs
    if needs.platforms and not any(sys.platform.startswith(p) for p in needs.platforms):
        return f"needs {' or '.join(needs.platforms)} (this is {sys.platform})"
    for name in needs.inputs:
        value = getattr(ctx, name, None) or ctx.options.get(name)
        if not value:
            flag = {"models": "--model DIR", "images": "--images DIR"}.get(name, f"--{name.replace('_', '-')}")
            return f"needs {flag}"
    return None


@dataclass
class _Job:
    cls: type[Check]
    pid: int
    conn: Connection
    started: float
    deadline: float
    timeout_s: float
    groups: dict[int, list[str]] = field(default_factory=dict)  # live command groups → argv


def _child_main(cls: type[Check], ctx: Context, conn: Connection) -> None:
    faulthandler.disable()  # a crashing probe is reported through the pipe, not dumped on screen
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    ctx.runner.records = []
    ctx.files_read = []
    ctx.published = {}
    ctx.runner.on_spawn = lambda pgid, argv: conn.send(("spawn", pgid, list(argv)))
    ctx.runner.on_reap = lambda pgid, argv: conn.send(("reap", pgid, None))
    ctx.progress = lambda text: conn.send(("progress", text, None))
    try:
        findings = cls().run(ctx) or []
        payload: tuple = ("ok", list(findings), ctx.runner.records, ctx.files_read, ctx.published)
    except SkipCheck as skip:
        payload = ("skip", str(skip), ctx.runner.records, ctx.files_read, ctx.published)
    except BaseException as exc:  # noqa: BLE001 - anything a check does wrong is its crash, not ours
        payload = ("crash", f"{type(exc).__name__}: {exc}", traceback.format_exc(), ctx.runner.records)
    try:
        conn.send(payload)
    except Exception as exc:  # unpicklable findings
        conn.send(("crash", f"result could not be sent back: {exc}", traceback.format_exc(), []))
    conn.close()


def _spawn(cls: type[Check], ctx: Context, timeout_s: float) -> _Job:
    parent_conn, child_conn = Pipe(duplex=False)
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.setpgid(0, 0)
            parent_conn.close()
            _child_main(cls, ctx, child_conn)
        except BaseException:  # noqa: BLE001
            code = 70
        finally:
            os._exit(code)
    try:
        os.setpgid(pid, pid)  # set from both sides: no window where a kill misses the group
    except (PermissionError, ProcessLookupError):
        pass
    child_conn.close()
    now = time.monotonic()
    return _Job(cls, pid, parent_conn, now, now + timeout_s, timeout_s)


def _exit_reason(pid: int) -> str:
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return "the check's process vanished"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"the check's process was killed by {signal.Signals(sig).name}"
    return f"the check's process exited with status {os.WEXITSTATUS(status)} without a result"


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _finish(job: _Job, message: tuple) -> CheckResult:
    duration = time.monotonic() - job.started
    name = job.cls.name
    _reap(job.pid)
    if message[0] == "ok":
        _, findings, records, files, facts = message
        state = State.FINDINGS if findings else State.PASSED
        return CheckResult(name, state, duration, findings=findings, commands=records, files=files, facts=facts)
    if message[0] == "skip":
        _, reason, records, files, facts = message
        return CheckResult(name, State.SKIPPED, duration, reason=reason, commands=records, files=files, facts=facts)
    _, reason, error, records = message
    return CheckResult(name, State.CRASHED, duration, reason=reason, error=error, commands=records)


def _kill(job: _Job) -> CheckResult:
    kill_group(job.pid)
    for pgid in job.groups:
        kill_group(pgid)
    _reap(job.pid)
    hung = [" ".join(argv) for argv in job.groups.values() if argv]
    reason = f"timed out after {job.timeout_s:g} s"
    if hung:
        reason += f" while running: {'; '.join(hung)}"
    records = [CommandRecord(tuple(argv), None, job.timeout_s, "", "", timed_out=True, error="killed with its check") for argv in job.groups.values() if argv]
    return CheckResult(job.cls.name, State.TIMED_OUT, time.monotonic() - job.started, reason=reason, commands=records)


def _drive(jobs: list[_Job], results: dict[str, CheckResult], progress: Progress | None) -> None:
    by_conn = {job.conn: job for job in jobs}
    try:
        _drive_until_done(by_conn, results, progress)
    except BaseException:  # Ctrl-C: the checks live in their own process groups, so take them down too
        for job in by_conn.values():
            _kill(job)
        raise


def _drive_until_done(by_conn: dict[Connection, _Job], results: dict[str, CheckResult], progress: Progress | None) -> None:
    while by_conn:
        now = time.monotonic()
        wait_s = max(0.0, min(job.deadline for job in by_conn.values()) - now)
        for conn in wait(list(by_conn), timeout=wait_s):
            job = by_conn[conn]
            try:
                message = conn.recv()
            except (EOFError, OSError):
                reason = _exit_reason(job.pid)
                results[job.cls.name] = CheckResult(job.cls.name, State.CRASHED, time.monotonic() - job.started, reason=reason)
            else:
                if message[0] == "spawn":
                    job.groups[message[1]] = message[2]
                    continue
                if message[0] == "reap":
                    job.groups.pop(message[1], None)
                    continue
                if message[0] == "progress":
                    if progress:
                        progress("progress", f"{job.cls.name}: {message[1]}")
                    continue
                results[job.cls.name] = _finish(job, message)
            conn.close()
            del by_conn[conn]
            if progress:
                progress("done", job.cls.name)
        now = time.monotonic()
        for conn, job in list(by_conn.items()):
            if now >= job.deadline:
                results[job.cls.name] = _kill(job)
                conn.close()
                del by_conn[conn]
                if progress:
                    progress("done", job.cls.name)


def run_checks(
    classes: Sequence[type[Check]],
    ctx: Context,
    *,
    timeout_s: float | None = None,
    progress: Progress | None = None,
) -> list[CheckResult]:
    """Runs every check and returns one result per check, in the order given."""
    results: dict[str, CheckResult] = {}
    runnable: list[type[Check]] = []
    for cls in classes:
        reason = unmet_need(cls, ctx)
        if reason:
            results[cls.name] = CheckResult(cls.name, State.SKIPPED, 0.0, reason=reason)
        else:
            runnable.append(cls)

    def limit(cls: type[Check]) -> float:
        return timeout_s if timeout_s is not None else cls.timeout_s

    def run_wave(batch: list[type[Check]]) -> None:
        for start in range(0, len(batch), MAX_PARALLEL):
            jobs = []
            for cls in batch[start : start + MAX_PARALLEL]:
                if progress:
                    progress("start", cls.name)
                jobs.append(_spawn(cls, ctx, limit(cls)))
            _drive(jobs, results, progress)
        for cls in batch:  # later checks see what these published
            ctx.facts.update(results[cls.name].facts)

    pending = list(runnable)
    selected = {cls.name for cls in runnable}
    while pending:
        ready = [cls for cls in pending if not (set(cls.needs.after) & selected) - set(results)]
        if not ready:
            for cls in pending:
                results[cls.name] = CheckResult(cls.name, State.SKIPPED, 0.0, reason=f"waits on {', '.join(cls.needs.after)}, which never ran (a cycle?)")
            break
        run_wave([cls for cls in ready if not cls.needs.exclusive])
        for cls in ready:
            if cls.needs.exclusive:
                run_wave([cls])
        pending = [cls for cls in pending if cls.name not in results]
    return [results[cls.name] for cls in classes]
