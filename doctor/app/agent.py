"""`decode-doctor agent`: the checks on a schedule, for node_exporter's textfile collector.

One process per node (a DaemonSet's pod, or a systemd service): every interval it runs the checks
and replaces one textfile atomically, so Prometheus always reads a whole run. It holds a lock in
the directory (a second agent there is refused), counts other decode-doctor textfiles beside its
own (node_exporter silently drops series two files share), handles SIGTERM between and during runs
(the checks' processes are taken down with it), and keeps the last complete run's time across runs
and restarts (read back from its own textfile).

SIGTERM and SIGINT only set a flag and write a byte to a pipe: a handler that raised would raise
inside whatever library code the signal interrupted (logging's after-fork hook swallows it, and the
agent ran on). Each run is a forked child the loop waits on together with that pipe, so a stop
during a run takes the run's whole process tree down, and a stop during the sleep ends it at once.
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from types import FrameType

from ..engine.findings import Verdict
from ..engine.workers import Child, kill_group, process_table
from ..i18n import _, localized, os_reason, reason, said
from ..reports.prometheus import FAILED_EXIT, Schedule
from . import service
from .output import OutputRequest, render_report, textfile_success
from .requests import RequestError, RunRequest

TEXTFILE = "decode_doctor.prom"
LOCK = ".decode_doctor.lock"
WRITE_GRACE_S = 1.0  # a stop while the run writes its files lets the atomic rename finish


class Stopped(BaseException):
    """SIGTERM or SIGINT arrived: raised by the loop itself (never by a signal handler), between steps."""


class AgentError(Exception):
    """The agent cannot start (its directory is taken or unusable); the message is for the user."""


@dataclass(frozen=True)
class AgentRequest:
    run: RunRequest
    directory: Path  # node_exporter's --collector.textfile.directory
    interval_s: float
    once: bool = False
    json_report: Path | None = None  # the redacted JSON report too, for `decode-doctor merge`
    quiet: bool = False
    # a stop by SIGTERM/SIGINT takes the textfile (and the JSON report) with it, after any write in flight
    # landed: an uninstalled agent's series go, rather than an old finding firing for ever (a preStop hook
    # that removes the file can race a run that ends after it)
    remove_on_stop: bool = False

    @property
    def textfile(self) -> Path:
        return self.directory / TEXTFILE


@dataclass(frozen=True)
class RunSummary:
    started: float
    exit_code: int
    verdict: Verdict
    findings: int
    not_judged: int
    duration_s: float


@contextmanager
def directory_lock(directory: Path) -> Iterator[None]:
    """An exclusive lock on the textfile directory for the agent's life: two agents there would each
    replace the other's file, or (with different names) have node_exporter drop their shared series."""
    flags = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT | flags, 0o644)
    except PermissionError:  # left by another user (root's cron line): a read-only handle locks as well
        try:
            fd = os.open(directory / LOCK, os.O_RDONLY | flags)
        except OSError as exc:
            raise AgentError(_("{path}: {error}", path=directory / LOCK, error=localized(os_reason(exc)))) from None
    except OSError as exc:
        raise AgentError(_("{path}: {error}", path=directory / LOCK, error=localized(os_reason(exc)))) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
                raise AgentError(
                    _("another decode-doctor agent (pid {pid}) writes to {directory}", pid=holder, directory=directory)
                    if holder
                    else _("another decode-doctor agent writes to {directory}", directory=directory)
                ) from None
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # a read-only handle: the lock holds, the pid is not written
        yield
    finally:
        os.close(fd)


def other_textfiles(directory: Path) -> list[str]:
    """decode-doctor textfiles beside the agent's own (a cron job's, another agent's under a second name)."""
    try:
        names = sorted(entry.name for entry in os.scandir(directory) if entry.name.endswith(".prom"))
    except OSError:
        return []
    return [name for name in names if name.startswith("decode_doctor") and name != TEXTFILE]


def run_once(
    request: AgentRequest, last_success: float | None, failed_runs: int = 0, writing: Callable[[], None] | None = None
) -> tuple[RunSummary, float | None]:
    """One run: the checks, the JSON report when asked, then the textfile, replaced atomically. A
    JSON report that cannot be written fails the run, and the textfile says so (the exit code --once
    exits with, the run failed, counted), then the error is raised."""
    started = time.time()
    outcome = service.run(request.run)
    report = outcome.report
    report.meta["duration_s"] = round(time.time() - started, 3)
    if writing is not None:
        writing()
    failure: Exception | None = None
    if request.json_report is not None:
        try:
            render_report(report, outcome.registry, OutputRequest(fmt="json", output=request.json_report, quiet=True))
        except Exception as exc:  # a full disk, a missing directory: the textfile still comes, saying so
            failure = exc
    schedule = Schedule(
        last_success=last_success,
        interval_s=None if request.once else request.interval_s,
        textfiles_beside=len(other_textfiles(request.directory)),
        failed_runs=failed_runs + (failure is not None),
        run_failed=failure is not None,
    )
    render_report(report, outcome.registry, OutputRequest(fmt="prometheus", output=request.textfile, quiet=True, schedule=schedule))
    if failure is not None:
        raise failure
    complete = report.complete
    summary = RunSummary(
        started=started,
        exit_code=report.exit_code,
        verdict=Verdict.of(complete, bool(report.findings)),
        findings=len(report.findings),
        not_judged=sum(len(r.not_judged) for r in report.results),
        duration_s=report.meta["duration_s"],
    )
    return summary, (round(started + summary.duration_s, 3) if complete else last_success)


@dataclass(frozen=True)
class RunDone:
    summary: RunSummary
    last_success: float | None


@dataclass(frozen=True)
class RunFailed:
    reason: str  # what failed, in the reader's language: a full disk is a sentence, never "OSError: [Errno 28] …"


def failure_reason(exc: BaseException) -> str:
    """Why a run failed, as a reader reads it: a system error as its words and the file it names; any
    other exception is an internal error, named as one."""
    if isinstance(exc, OSError):
        words = localized(os_reason(exc))
        return _("{path}: {error}", path=exc.filename, error=words) if exc.filename else words
    return _("an internal error ({name}): {error}", name=type(exc).__name__, error=localized(reason(exc)))


@dataclass(frozen=True)
class RunRefused:
    message: str  # the request cannot run at all (RequestError): the agent stops


@dataclass(frozen=True)
class Writing:
    """The run's checks are done and its files are being written."""


RunMessage = RunDone | RunFailed | RunRefused | Writing


class StopSignal:
    """SIGTERM and SIGINT, as a flag and a byte in a pipe (the loop waits on its read end). The handler
    acts only in the agent's own process: a forked child that has not yet reset it does nothing."""

    def __init__(self) -> None:
        self.read_fd, self._write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.owner = os.getpid()
        self.name: str | None = None

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if os.getpid() != self.owner:
            return
        self.name = self.name or signal.Signals(signum).name
        try:
            os.write(self._write_fd, b"x")
        except OSError:  # the pipe is full: a byte is already waiting
            pass

    def check(self) -> None:
        if self.name is not None:
            raise Stopped(self.name)

    def sleep(self, seconds: float) -> None:
        """Waits seconds, or until a stop; raises Stopped on a stop."""
        self.check()
        wait([self.read_fd], timeout=max(0.0, seconds))
        self.check()

    def close(self) -> None:
        for fd in (self.read_fd, self._write_fd):
            os.close(fd)


def _run_child(conn: Connection[RunMessage, object], request: AgentRequest, last_success: float | None, failed_runs: int) -> None:
    """The run, in its forked process: it answers one message (Writing first, when it gets that far)."""
    for signum in (signal.SIGTERM, signal.SIGINT):  # the agent's handler must not act here
        signal.signal(signum, signal.SIG_DFL)
    try:
        summary, success = run_once(request, last_success, failed_runs, writing=lambda: conn.send(Writing()))
    except RequestError as exc:
        conn.send(RunRefused(localized(reason(exc))))
    except Exception as exc:
        conn.send(RunFailed(failure_reason(exc)))
    else:
        conn.send(RunDone(summary, success))
    conn.close()


def end_tree(child: Child) -> None:
    """SIGKILL the run's process and everything under it (its checks, in process groups of their own,
    and the commands they started, in theirs): each is frozen first, so it starts nothing more and what
    it started stays its child while the tree is walked, as the runner does to a check past its deadline."""
    child.freeze()
    frozen = {child.pid: child.pid}
    for _round in range(16):
        found = {pid: pgid for pid, (ppid, pgid) in process_table().items() if ppid in frozen and pid not in frozen}
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        frozen.update(found)
    for pgid in set(frozen.values()) - {os.getpgrp()}:
        kill_group(pgid)
    for pid in frozen:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    child.reap()


def _run(request: AgentRequest, last_success: float | None, failed_runs: int, stop: StopSignal) -> RunDone | RunFailed | RunRefused:
    """One run in a forked child, waited on beside the stop pipe; a stop ends the run and raises Stopped."""
    stop.check()
    child = Child.start(_run_child, request, last_success, failed_runs, own_group=True)
    writing = False
    try:
        while True:
            ready = wait([child.conn, stop.read_fd])
            if child.conn in ready:
                try:
                    message = child.conn.recv()
                except (EOFError, OSError):
                    ended = child.reap()
                    return RunFailed(_("the run's process ended without a result: {how}", how=ended))
                if isinstance(message, Writing):
                    writing = True
                    continue
                ended = child.reap()
                if isinstance(message, RunDone | RunFailed | RunRefused):
                    return message
                return RunFailed(_("the run's process ended without a result: {how}", how=ended))
            if stop.name is not None:
                if writing:  # let the rename land: a killed writer would leave its temporary file
                    wait([child.conn], timeout=WRITE_GRACE_S)
                raise Stopped(stop.name)
    finally:
        if not child.reaped:
            end_tree(child)


def _reap_orphans() -> None:
    """As PID 1 of a container, the agent inherits every orphaned process: collect the ones that ended."""
    if os.getpid() != 1:
        return
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def run(request: AgentRequest, say: Callable[[str], None]) -> int:
    """The loop (or one run with once): the exit code of the last run, 0 when stopped by a signal."""
    if not request.directory.is_dir():
        raise AgentError(_("{directory} is not a directory", directory=request.directory))
    if not os.access(request.directory, os.W_OK):
        raise AgentError(_("{directory} is not writable by this user (uid {uid})", directory=request.directory, uid=os.geteuid()))
    stop = StopSignal()
    previous = {signum: signal.signal(signum, stop.handle) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        with directory_lock(request.directory):
            return _loop(request, say, stop)
    except Stopped as stopped:
        if request.remove_on_stop:
            _remove_outputs(request)
        say(_("decode-doctor agent: stopped ({signal})", signal=stopped.args[0] if stopped.args else "SIGTERM"))
        return 0
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        stop.close()


def _remove_outputs(request: AgentRequest) -> None:
    """The textfile and the JSON report, gone (a link among them is removed, never followed)."""
    for path in (request.textfile, request.json_report):
        if path is None:
            continue
        try:
            if path.is_symlink() or path.is_file():
                path.unlink()
        except OSError:
            pass  # already gone, or a directory not ours to empty: nothing of ours to remove


def _loop(request: AgentRequest, say: Callable[[str], None], stop: StopSignal) -> int:
    last_success = textfile_success(request.textfile)
    others_said: list[str] = []
    failed_runs = 0
    while True:
        began = time.monotonic()
        message = _run(request, last_success, failed_runs, stop)
        _reap_orphans()
        if isinstance(message, RunRefused):
            raise AgentError(message.message)
        if isinstance(message, RunFailed):  # a full disk, an unwritable report: said, counted, tried again
            failed_runs += 1
            say(_("decode-doctor agent: the run failed: {reason}", reason=message.reason))
            if request.once:
                return FAILED_EXIT
            stop.sleep(request.interval_s - (time.monotonic() - began))
            continue
        summary, last_success = message.summary, message.last_success
        others = other_textfiles(request.directory)
        if others and others != others_said:
            say(
                _(
                    "decode-doctor agent: warning: {directory} also holds {files}; node_exporter drops the series two files share",
                    directory=request.directory,
                    files=", ".join(others),
                )
            )
        others_said = others
        if not request.quiet:
            say(
                _(
                    "{time} {verdict}: {findings} finding(s), {unjudged} not judged, exit code {code}, {seconds:.1f} s → {path}",
                    time=dt.datetime.fromtimestamp(summary.started, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    verdict=summary.verdict.label,
                    findings=summary.findings,
                    unjudged=summary.not_judged,
                    code=summary.exit_code,
                    seconds=summary.duration_s,
                    path=request.textfile,
                )
            )
        if request.once:
            return summary.exit_code
        stop.sleep(request.interval_s - (time.monotonic() - began))


def with_defaults(request: RunRequest, **values: object) -> RunRequest:
    """The run request with check options the agent sets unless given (a node agent on a serving
    host), each named by its field and found in the options type of the check that declares it (a
    name no check declares is an error, not an option silently dropped)."""
    from ..engine.options import OptionValues
    from ..engine.registry import load

    owners = {name: cls.options for cls in load().checks.values() if cls.options for name in cls.options.names()}
    unknown = [name for name in values if name not in owners]
    if unknown:
        raise ValueError(said("no check declares the option(s) {options}", options=", ".join(unknown)))
    defaults = []
    for kind in {owners[name] for name in values}:
        assert kind is not None
        defaults.append(kind(**{name: value for name, value in values.items() if owners[name] is kind}))
    return replace(request, options=tuple(OptionValues(request.options).merged(*defaults)))
