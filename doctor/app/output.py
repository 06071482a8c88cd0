"""The one render path: every command's report (check, analyze, report --format, bench) is redacted
and rendered here, and every document a feature's command produces (estimate's plan) is written here.

Formats other than the terminal's text end up in CI logs and tickets, so they are redacted; the
command may name secret values it knows (an API key) to be removed everywhere as well.
"""

from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TextIO

from ..engine.files import open_regular
from ..engine.registry import Registry
from ..engine.writes import replace_output
from ..i18n import _, typography
from ..reports.formats import Use, get
from ..reports.prometheus import Schedule, previous_success
from ..reports.redact import Redactor
from ..reports.render import FORMATS, UnknownFormat, render
from ..reports.report import Report
from ..reports.textsafe import ESCAPE, shown, terminal_safe
from ..reports.view import build_view, judging_codes

PREVIOUS_LIMIT = 4 << 20

__all__ = ["FORMATS", "Document", "OutputRequest", "UnknownFormat", "emit", "render_report", "say", "shown"]


@dataclass(frozen=True)
class OutputRequest:
    fmt: str = "text"
    output: Path | None = None  # a file; None: standard output
    verbose: bool = False
    debug: bool = False
    secrets: tuple[str, ...] = ()  # values the command knows to be secret (an API key)
    quiet: bool = False  # no "written to" line (cron, an agent)
    schedule: Schedule | None = None  # a scheduled run's timestamps and interval (the Prometheus textfile)

    @property
    def redacted(self) -> bool:
        """Whether its format is redacted (reports.formats; UnknownFormat for a name it does not hold)."""
        return get(self.fmt).redacted


class Document(Protocol):
    """What a feature's command produces that is not a report (estimate's plan): its text for a
    terminal and its JSON."""

    def text(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...


def _redactor(out: OutputRequest) -> Redactor:
    fmt = get(out.fmt)
    redactor = Redactor(enabled=fmt.redacted, terminal=fmt.terminal)
    redactor.secrets.update(s for s in out.secrets if s)
    return redactor


def _stdout() -> TextIO:
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors=ESCAPE)
    return sys.stdout


def write_output(path: Path, text: str) -> None:
    """A report or document written whole or not at all (engine.writes.replace_output: a temporary file
    beside it, renamed over it, so node_exporter's textfile collector never sees half a file and a run
    that dies leaves the last one). The new file is this user's, mode 0644; a symbolic link at the path
    is replaced, never written through; a FIFO, a device, a socket or a directory there is refused with
    the reason (RefusedTarget, an OSError), never opened. A file name that is not UTF-8 is written as \\xNN."""
    replace_output(path, text.encode("utf-8", errors=ESCAPE))


def _saved(out: OutputRequest, text: str) -> None:
    """text to -o FILE (saying so on stderr unless quiet) or standard output."""
    if out.output is None:
        _stdout().write(text)
        return
    write_output(out.output, text)
    if not out.quiet:
        say(_("written to {output}", output=out.output))


def say(text: str) -> None:
    """A line for the person on standard error (where the report went, what is being measured)."""
    print(terminal_safe(shown(typography.normalize(text))), file=sys.stderr, flush=True)


def render_report(report: Report, registry: Registry, out: OutputRequest) -> None:
    """A report rendered in the asked format to -o FILE (saying so on stderr) or standard output;
    UnknownFormat, before anything is rendered, for a format that renders no report."""
    get(out.fmt, Use.REPORT)
    codes = judging_codes(registry.codes(), report)
    view = build_view(report, redactor=_redactor(out), codes=codes, debug=out.debug)
    schedule = out.schedule
    if out.fmt == "prometheus" and schedule is None and out.output is not None:
        schedule = Schedule(last_success=textfile_success(out.output))
    if out.output is None:
        stream = _stdout()
        render(view, out.fmt, stream, tty=stream.isatty(), verbose=out.verbose, schedule=schedule)
        return
    buffer = io.StringIO()
    render(view, out.fmt, buffer, tty=False, verbose=out.verbose, schedule=schedule)
    write_output(out.output, buffer.getvalue())
    if not out.quiet:
        say(_("report written to {output}", output=out.output))


def textfile_success(path: Path) -> float | None:
    """The last-success stamp of the textfile this run replaces (a run that is not complete carries it on)."""
    try:
        with open_regular(path, follow=False) as handle:  # a link is replaced, never read through
            return previous_success(handle.read(PREVIOUS_LIMIT).decode("utf-8", errors="replace"))
    except (OSError, ValueError):
        return None


def emit(document: Document, out: OutputRequest) -> None:
    """A feature's document as text or JSON, redacted like a report in every format but text."""
    redactor = _redactor(out)
    text = (
        json.dumps(document.to_json(), indent=2, default=str, ensure_ascii=False) + "\n"
        if out.fmt == "json"
        else typography.normalize(document.text())
    )
    _saved(out, redactor.text(text))  # in text, only the secrets the command knows
