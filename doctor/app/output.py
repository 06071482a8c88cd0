"""The one render path: every command's report (check, analyze, report --format, bench) is redacted
and rendered here, and every document a feature's command produces (estimate's plan) is written here.

Formats other than the terminal's text end up in CI logs and tickets, so they are redacted; the
command may name secret values it knows (an API key) to be removed everywhere as well.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TextIO

from ..engine.registry import Registry
from ..i18n import _
from ..reports.redact import Redactor
from ..reports.render import FORMATS, render
from ..reports.report import Report
from ..reports.textsafe import ESCAPE, shown
from ..reports.view import build_view

__all__ = ["FORMATS", "Document", "OutputRequest", "emit", "render_report", "say", "shown"]


@dataclass(frozen=True)
class OutputRequest:
    fmt: str = "text"
    output: Path | None = None  # a file; None: standard output
    verbose: bool = False
    debug: bool = False
    secrets: tuple[str, ...] = ()  # values the command knows to be secret (an API key)

    @property
    def redacted(self) -> bool:
        return self.fmt != "text"


class Document(Protocol):
    """What a feature's command produces that is not a report (estimate's plan): its text for a
    terminal and its JSON."""

    def text(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...


def _redactor(out: OutputRequest) -> Redactor:
    redactor = Redactor(enabled=out.redacted)
    redactor.secrets.update(s for s in out.secrets if s)
    return redactor


def _open(out: OutputRequest) -> tuple[TextIO, bool]:
    if out.output is not None:
        return open(out.output, "w", encoding="utf-8", errors=ESCAPE), True  # file names that are not UTF-8: \xNN
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors=ESCAPE)
    return sys.stdout, False


def say(text: str) -> None:
    """A line for the person on standard error (where the report went, what is being measured)."""
    print(shown(text), file=sys.stderr, flush=True)


def render_report(report: Report, registry: Registry, out: OutputRequest) -> None:
    """A report rendered in the asked format to -o FILE (saying so on stderr) or standard output."""
    codes = {code: spec for code, (spec, _) in registry.codes().items()}
    view = build_view(report, redactor=_redactor(out), codes=codes, debug=out.debug)
    stream, to_file = _open(out)
    try:
        render(view, out.fmt, stream, tty=not to_file and stream.isatty(), verbose=out.verbose)
    finally:
        if to_file:
            stream.close()
    if to_file:
        say(_("report written to {output}", output=out.output))


def emit(document: Document, out: OutputRequest) -> None:
    """A feature's document as text or JSON, redacted like a report in every format but text."""
    redactor = _redactor(out)
    text = json.dumps(document.to_json(), indent=2, default=str, ensure_ascii=False) + "\n" if out.fmt == "json" else document.text()
    text = redactor.text(text) if out.redacted else text
    stream, to_file = _open(out)
    try:
        stream.write(text)
    finally:
        if to_file:
            stream.close()
    if to_file:
        say(_("written to {output}", output=out.output))
