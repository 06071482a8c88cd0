"""`decode-doctor agent`: the checks on a schedule, for node_exporter's textfile collector.

One process per node (a DaemonSet's pod, or a systemd service): every interval it runs the checks
and replaces one textfile atomically, so Prometheus always reads a whole run. It holds a lock in
the directory (a second agent there is refused), counts other decode-doctor textfiles beside its
own (node_exporter silently drops series two files share), handles SIGTERM between and during runs
(the checks' processes are taken down with it), and keeps the last complete run's time across runs
and restarts (read back from its own textfile).
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
from pathlib import Path
from types import FrameType

from ..i18n import _, localized, os_reason, reason, said
from ..reports.prometheus import Schedule
from ..reports.text import state_word
from . import service
from .output import OutputRequest, render_report, textfile_success
from .requests import RequestError, RunRequest

TEXTFILE = "decode_doctor.prom"
LOCK = ".decode_doctor.lock"


class Stopped(BaseException):
    """SIGTERM or SIGINT: stop now, between or during a run (a BaseException, so nothing swallows it)."""


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

    @property
    def textfile(self) -> Path:
        return self.directory / TEXTFILE


@dataclass(frozen=True)
class RunSummary:
    started: float
    exit_code: int
    verdict: str
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
                    _("another decode-doctor agent (pid {pid}) writes to {directory}", pid=holder or "?", directory=directory)
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


def run_once(request: AgentRequest, last_success: float | None, failed_runs: int = 0) -> tuple[RunSummary, float | None]:
    """One run: the checks, the textfile (and the JSON report), replaced atomically."""
    started = time.time()
    outcome = service.run(request.run)
    report = outcome.report
    report.meta["duration_s"] = round(time.time() - started, 3)
    interval = None if request.once else request.interval_s
    schedule = Schedule(
        last_success=last_success,
        interval_s=interval,
        textfiles_beside=len(other_textfiles(request.directory)),
        failed_runs=None if request.once else failed_runs,
    )
    render_report(report, outcome.registry, OutputRequest(fmt="prometheus", output=request.textfile, quiet=True, schedule=schedule))
    if request.json_report is not None:
        render_report(report, outcome.registry, OutputRequest(fmt="json", output=request.json_report, quiet=True))
    complete = report.complete
    summary = RunSummary(
        started=started,
        exit_code=report.exit_code,
        verdict="incomplete" if not complete else ("findings" if report.findings else "ready"),
        findings=len(report.findings),
        not_judged=sum(len(r.not_judged) for r in report.results),
        duration_s=report.meta["duration_s"],
    )
    return summary, (round(started + summary.duration_s, 3) if complete else last_success)


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signal.Signals(signum).name)


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
    previous = {signum: signal.signal(signum, _stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        with directory_lock(request.directory):
            return _loop(request, say)
    except Stopped as stop:
        say(_("decode-doctor agent: stopped ({signal})", signal=stop))
        return 0
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _loop(request: AgentRequest, say: Callable[[str], None]) -> int:
    last_success = textfile_success(request.textfile)
    others_said: list[str] = []
    failed_runs = 0
    while True:
        began = time.monotonic()
        try:
            summary, last_success = run_once(request, last_success, failed_runs)
        except RequestError as exc:
            raise AgentError(localized(reason(exc))) from None
        except (Stopped, KeyboardInterrupt):
            raise
        except Exception as exc:  # a full disk, an unwritable report: said, counted, and the next run tries again
            failed_runs += 1
            say(_("decode-doctor agent: the run failed: {name}: {error}", name=type(exc).__name__, error=exc))
            if request.once:
                return 2
            time.sleep(max(0.0, request.interval_s - (time.monotonic() - began)))
            continue
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
                    verdict=state_word(summary.verdict),
                    findings=summary.findings,
                    unjudged=summary.not_judged,
                    code=summary.exit_code,
                    seconds=summary.duration_s,
                    path=request.textfile,
                )
            )
        if request.once:
            return summary.exit_code
        _reap_orphans()
        time.sleep(max(0.0, request.interval_s - (time.monotonic() - began)))


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
