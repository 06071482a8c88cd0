"""Runs checks, each in a forked child process that can really be killed.

Every check runs in its own process (a process group of its own, see workers.Child), talks back
over a pipe, and is SIGKILLed with every command it started when its time is up. A check that
raises, or dies, becomes a "crashed" result; the others go on. Checks that declare `exclusive`
(timing probes) run alone; a check that reads another's facts (Needs.reads) runs once the check
that publishes them has finished, and finds them in ctx.facts by type.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

from decode_doctor.i18n import _

from ..i18n import said
from .check import INPUTS, Check, SkipCheck
from .context import Context
from .facts import Facts
from .findings import AcceptedGap, CheckResult, CommandRecord, Finding, NotJudged, State
from .options import OptionRef
from .workers import Child, child_groups, kill_group, wait_ready

MAX_PARALLEL = 8
Progress = Callable[[str, str], None]  # (event, text): "start" / "progress" / "done"


def unmet_need(cls: type[Check], ctx: Context) -> str | None:
    needs = cls.needs
    if needs.platforms and not any(sys.platform.startswith(p) for p in needs.platforms):
        return _("needs {platforms} (this is {platform})", platforms=" or ".join(needs.platforms), platform=sys.platform)
    for needed in needs.inputs:
        if isinstance(needed, OptionRef):
            if not ctx.options.value(needed):
                return _("needs {flag}", flag=needed.flag)
        elif not getattr(ctx, needed, None):
            return _("needs {flag}", flag=INPUTS[needed])
    return None


@dataclass(eq=False)
class _Job:
    cls: type[Check]
    child: Child
    started: float
    timeout_s: float
    groups: dict[int, list[str]] = field(default_factory=dict)  # live command groups → argv


@dataclass(frozen=True)
class Spawned:
    """The check started a command in a process group of its own (killed with the check on a timeout)."""

    pgid: int
    argv: list[str]


@dataclass(frozen=True)
class Reaped:
    pgid: int


@dataclass(frozen=True)
class Progressed:
    text: str


@dataclass(frozen=True)
class Done:
    findings: list[Finding]
    records: list[CommandRecord]
    files: list[str]
    facts: Facts | None
    unjudged: list[NotJudged]
    accepted: list[AcceptedGap]


@dataclass(frozen=True)
class Skipped:
    reason: str
    records: list[CommandRecord]
    files: list[str]
    facts: Facts | None


@dataclass(frozen=True)
class Crashed:
    reason: str
    error: str
    records: list[CommandRecord]


Message = Spawned | Reaped | Progressed | Done | Skipped | Crashed


def _child_main(conn: Connection[Message, object], cls: type[Check], ctx: Context) -> None:
    faulthandler.disable()  # a crashing probe is reported through the pipe, not dumped on screen
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    ctx.runner.records = []
    ctx.files_read = []
    ctx.published = None
    ctx.unjudged = []
    ctx.accepted = []
    ctx.runner.on_spawn = lambda pgid, argv: conn.send(Spawned(pgid, list(argv)))
    ctx.runner.on_reap = lambda pgid, argv: conn.send(Reaped(pgid))
    ctx.progress = lambda text: conn.send(Progressed(text))
    payload: Message
    try:
        findings = cls().run(ctx) or []
        payload = Done(list(findings), ctx.runner.records, ctx.files_read, ctx.published, ctx.unjudged, ctx.accepted)
    except SkipCheck as skip:
        payload = Skipped(str(skip), ctx.runner.records, ctx.files_read, ctx.published)
    except BaseException as exc:
        payload = Crashed(f"{type(exc).__name__}: {exc}", traceback.format_exc(), ctx.runner.records)
    try:
        conn.send(payload)
    except Exception as exc:  # unpicklable findings or facts
        conn.send(Crashed(_("result could not be sent back: {error}", error=str(exc)), traceback.format_exc(), []))
    conn.close()


def _finish(job: _Job, message: object) -> CheckResult:
    job.child.reap()
    duration = time.monotonic() - job.started
    name = job.cls.name
    if isinstance(message, Done):
        state = State.FINDINGS if message.findings else State.PASSED
        return CheckResult(
            name, state, duration, findings=message.findings, commands=message.records, files=message.files, facts=message.facts,
            not_judged=message.unjudged, accepted=message.accepted,
        )  # fmt: skip
    if isinstance(message, Skipped):
        return CheckResult(
            name, State.SKIPPED, duration, reason=message.reason, commands=message.records, files=message.files, facts=message.facts
        )
    if isinstance(message, Crashed):
        return CheckResult(name, State.CRASHED, duration, reason=message.reason, error=message.error, commands=message.records)
    return CheckResult(name, State.CRASHED, duration, reason=said("the check's process answered {kind}", kind=type(message).__name__))


def _kill(job: _Job) -> CheckResult:
    # Commands run in process groups of their own, announced over the pipe. On a busy host an
    # announcement can still be unread, or unsent: freeze the check, so its commands are still its
    # children, and take their groups from /proc as well as from the pipe.
    job.child.freeze()
    stray = child_groups(job.child.pid)
    job.child.stop()
    try:
        while job.child.conn.poll(0):
            _relay(job, job.child.conn.recv(), None)
    except (EOFError, OSError):
        pass
    for pgid in set(job.groups) | stray:
        kill_group(pgid)
    job.child.reap()
    hung = [" ".join(argv) for argv in job.groups.values() if argv]
    reason = _("timed out after {seconds} s", seconds=format(job.timeout_s, "g"))
    if hung:
        reason += _(" while running: {commands}", commands="; ".join(hung))
    records = [
        CommandRecord(tuple(argv), None, job.timeout_s, "", "", timed_out=True, error="killed with its check")
        for argv in job.groups.values()
        if argv
    ]
    return CheckResult(job.cls.name, State.TIMED_OUT, time.monotonic() - job.started, reason=reason, commands=records)


def _drive(jobs: list[_Job], results: dict[str, CheckResult], progress: Progress | None) -> None:
    by_child = {job.child: job for job in jobs}
    try:
        while by_child:
            readable, overdue = wait_ready(by_child)
            for child in readable:
                job = by_child[child]
                try:
                    message = child.conn.recv()
                except (EOFError, OSError):
                    reason = child.reap()
                    duration = time.monotonic() - job.started
                    results[job.cls.name] = CheckResult(job.cls.name, State.CRASHED, duration, reason=reason + _(" without a result"))
                else:
                    if _relay(job, message, progress):
                        continue
                    results[job.cls.name] = _finish(job, message)
                del by_child[child]
                if progress:
                    progress("done", job.cls.name)
            for child in overdue:
                job = by_child.pop(child)
                results[job.cls.name] = _kill(job)
                if progress:
                    progress("done", job.cls.name)
    except BaseException:  # Ctrl-C: the checks live in their own process groups, so take them down too
        for job in by_child.values():
            _kill(job)
        raise


def _relay(job: _Job, message: object, progress: Progress | None) -> bool:
    """Handles a message that is not the result; True when it was one of those."""
    if isinstance(message, Spawned):
        job.groups[message.pgid] = message.argv
    elif isinstance(message, Reaped):
        job.groups.pop(message.pgid, None)
    elif isinstance(message, Progressed):
        if progress:
            progress("progress", f"{job.cls.name}: {message.text}")
    else:
        return False
    return True


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

    def run_wave(batch: list[type[Check]]) -> None:
        for start in range(0, len(batch), MAX_PARALLEL):
            jobs = []
            for cls in batch[start : start + MAX_PARALLEL]:
                if progress:
                    progress("start", cls.name)
                limit = timeout_s if timeout_s is not None else cls.timeout_s
                child = Child.start(_child_main, cls, ctx, own_group=True)
                child.set_deadline(limit)
                jobs.append(_Job(cls, child, time.monotonic(), limit))
            _drive(jobs, results, progress)
        for cls in batch:  # later checks see what these published
            facts = results[cls.name].facts
            if facts is not None:
                ctx.facts.put(facts)

    publishers = {cls.facts_type: cls.name for cls in runnable if cls.facts_type is not None}
    waits = {cls.name: {publishers[r.facts] for r in cls.needs.reads if r.facts in publishers} - {cls.name} for cls in runnable}
    pending = list(runnable)
    while pending:
        ready = [cls for cls in pending if not waits[cls.name] - set(results)]
        if not ready:
            for cls in pending:
                reason = _("waits on {checks}, which never ran (a cycle?)", checks=", ".join(sorted(waits[cls.name])))
                results[cls.name] = CheckResult(cls.name, State.SKIPPED, 0.0, reason=reason)
            break
        run_wave([cls for cls in ready if not cls.needs.exclusive])
        for cls in ready:
            if cls.needs.exclusive:
                run_wave([cls])
        pending = [cls for cls in pending if cls.name not in results]
    return [results[cls.name] for cls in classes]
