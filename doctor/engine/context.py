"""Everything a check may learn about the host goes through a Context."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TypeVar

from ..i18n import Said, _, said
from .commands import DEFAULT_MAX_OUTPUT, CommandRunner
from .facts import Board, Facts
from .files import NotRegular, open_regular
from .findings import AcceptedGap, CommandRecord, NotJudged
from .options import Options, OptionValues

DEFAULT_READ_LIMIT = 1 << 20
# where a tool is looked for in another host's files (ctx.installed): its PATH is not known
HOST_BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
OptionsT = TypeVar("OptionsT", bound=Options)


@dataclass
class Context:
    root: Path = Path("/")
    # root is this machine's own filesystem mounted elsewhere (a node agent in a container reading the
    # host under /host): files are read under root, and live devices (NVML) and probes (the bandwidth
    # probe) judge that same host. --same-host; see live_devices.
    same_host: bool = False
    runner: CommandRunner = field(default_factory=CommandRunner)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    models: tuple[Path, ...] = ()
    images: tuple[Path, ...] = ()
    options: OptionValues = field(default_factory=OptionValues)  # read by type: ctx.option(BandwidthOptions)
    files_read: list[str] = field(default_factory=list)
    # Facts published by checks that ran earlier, by type (ctx.facts.get(GpuFacts)); see Needs.reads.
    facts: Board = field(default_factory=Board)
    # Typed values a command hands the checks (what `bench` measured): ctx.supplied.get(Type).
    supplied: Board = field(default_factory=Board)
    published: Facts | None = None
    # What the check could not judge (ctx.not_judged): the verdict is incomplete, never "Ready".
    unjudged: list[NotJudged] = field(default_factory=list)
    # What the check judged only in part by a documented rule (ctx.accept_gap): said, not incomplete.
    accepted: list[AcceptedGap] = field(default_factory=list)
    # The re-check after a fix: only these paths are judged again by checks that are scoped (Check.scoped).
    scope: frozenset[Path] | None = None
    # Long checks report progress ("1,234 files, 850/s"); the engine shows it on a terminal.
    progress: Callable[[str], None] = field(default=lambda text: None, repr=False)

    def option(self, kind: type[OptionsT]) -> OptionsT:
        """The options of that type this run was given (their defaults when none were)."""
        return self.options.get(kind)

    def publish(self, facts: Facts) -> None:
        """The check's facts: for the report, and for the checks that run after this one."""
        self.published = facts

    def not_judged(self, what: str, why: str, cause: str | None = None) -> None:
        """Says that something given could not be judged (unreadable, absent, stopped by another check's
        finding): the report lists it, and the verdict is incomplete. A Said is said in the user's language."""
        what, why = (text.text() if isinstance(text, Said) else text for text in (what, why))
        self.unjudged.append(NotJudged(what, why, cause))

    def accept_gap(self, what: str, why: str, gap: str) -> None:
        """Says that something was judged only in part, by the check's documented rule that accepts it (gap:
        the rule's stable snake_case name, a metric label): the report and the metrics name it; the verdict
        stays complete. Only for a rule written down in the check's docstring, never for a failure to read."""
        what, why = (text.text() if isinstance(text, Said) else text for text in (what, why))
        self.accepted.append(AcceptedGap(what, why, gap))

    def host_path(self, path: str | os.PathLike[str]) -> Path:
        """Maps an absolute host path such as /proc/sys/vm/swappiness under --root."""
        relative = PurePosixPath(os.fspath(path)).relative_to("/")
        return self.root.joinpath(relative)

    def read_text(self, path: str, limit: int = DEFAULT_READ_LIMIT) -> str | None:
        """Reads a host file (under root); None when it does not exist, or when it is a FIFO, device or
        socket: never opened for a blocking read, it is named at once as not judged. Other errors
        propagate."""
        return self._read(path, limit, tail=False)

    def read_tail(self, path: str, limit: int = DEFAULT_READ_LIMIT) -> str | None:
        """The last limit bytes of a host file (a log: its newest lines), from a line's start; None, or
        not judged, as read_text. PermissionError propagates: the caller says what it could not read."""
        return self._read(path, limit, tail=True)

    def _read(self, path: str, limit: int, tail: bool) -> str | None:
        target = self.host_path(path)
        cut = False
        try:
            with open_regular(target) as handle:
                if tail:
                    size = os.fstat(handle.fileno()).st_size
                    cut = size > limit
                    if cut:
                        handle.seek(size - limit)
                data = handle.read(limit)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except NotRegular as exc:
            self.not_judged(path, _("{file} is {strerror}", file=target, strerror=exc.strerror))
            return None
        self.files_read.append(path)
        if cut:
            data = data[data.find(b"\n") + 1 :]
        return data.decode("utf-8", errors="replace")

    def meminfo_bytes(self, field: str) -> int | None:
        """A /proc/meminfo field (MemTotal, MemAvailable, SwapTotal…) in bytes; None when absent."""
        for line in (self.read_text("/proc/meminfo") or "").splitlines():
            name, _, rest = line.partition(":")
            if name == field and rest.split():
                number = rest.split()[0]
                if not number.isdecimal():
                    raise ValueError(said("/proc/meminfo {field} is {value!r}, not a number of kB", field=field, value=rest.strip()[:40]))
                return int(number) * (1024 if rest.strip().endswith("kB") else 1)
        return None

    def note_file(self, path: str | os.PathLike[str]) -> None:
        """Records a file read outside the host tree (a model file) for the support bundle."""
        self.files_read.append("file://" + os.path.abspath(path))

    def which(self, name: str) -> str | None:
        """The executable ctx.run would start for name; None for another host's files (--root without
        --same-host): this machine's tool would answer for this machine. Whether the judged host has
        the tool at all is ctx.installed."""
        return self.runner.which(name) if self.live_devices else None

    def installed(self, name: str) -> str | None:
        """Where the judged host has the tool name: on PATH here (the live host, or --same-host as
        before), else the first of the usual bin directories under --root that holds it (a host path,
        to name, never to run)."""
        if self.live_devices:
            return self.runner.which(name)
        for directory in HOST_BIN_DIRS:  # a link counts as it stands: its absolute target would be this machine's path
            if os.path.lexists(self.host_path(f"{directory}/{name}")):
                return f"{directory}/{name}"
        return None

    def run(
        self,
        argv: list[str] | tuple[str, ...],
        *,
        timeout_s: float | None = None,
        input_bytes: bytes | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
        env: Mapping[str, str] | None = None,
    ) -> CommandRecord:
        """Runs a command on this machine; for another host's files (--root without --same-host) it
        runs nothing: a refused record (not ok, its error says why), kept out of the report's commands,
        so no check can put this machine's answer under that host's name."""
        if not self.live_devices:
            return CommandRecord(tuple(argv), None, 0.0, "", "", error=said("not run: {why}", why=self.elsewhere))
        return self.runner.run(argv, timeout_s=timeout_s, input_bytes=input_bytes, max_output=max_output, env=env)

    @property
    def live_host(self) -> bool:
        """The files and commands are this machine's own (--root /)."""
        return self.root.resolve() == Path("/")

    @property
    def live_devices(self) -> bool:
        """This machine is the judged host: the devices this process can query (NVML), the memory it
        can measure, the tools on its PATH, its Docker socket and environment are the host's: on the
        host itself, or in a container on it (--same-host). False for another host's files (--root
        without --same-host): only what they hold is judged (ctx.run and ctx.which refuse)."""
        return self.same_host or self.live_host

    @property
    def elsewhere(self) -> Said:
        """Why something only the live host can answer is not judged for another host's files."""
        return said("another host's files (--root without --same-host): this machine is not asked in its place")
