"""Every output format, rendered through the one registry (reports.formats): a run's report from the
one redacted view, the bundle's members, a diff and a fleet. The built-in renderers below are named
there by "module:function" and import their format's module only when they render."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TextIO, cast

from .formats import FORMATS, Format, UnknownFormat, Use, get
from .textsafe import escaped_tree
from .view import ReportView

if TYPE_CHECKING:
    from .compare import Difference
    from .fleet import Fleet
    from .prometheus import Schedule

__all__ = ["FORMATS", "Rendering", "UnknownFormat", "render", "render_diff", "render_fleet_as", "render_member", "rendered"]


@dataclass(frozen=True)
class Rendering:
    """How a report is rendered: to a terminal (rich text), with what the checks learned, and a
    scheduled run's timestamps (the Prometheus textfile)."""

    tty: bool = False
    verbose: bool = False
    schedule: Schedule | None = None


class ReportRenderer(Protocol):
    def __call__(self, view: ReportView, stream: TextIO, how: Rendering, /) -> None: ...


def _report_renderer(fmt: Format) -> ReportRenderer:
    return cast(ReportRenderer, fmt.renderer(Use.REPORT))


def render(view: ReportView, fmt: str, stream: TextIO, *, tty: bool, verbose: bool = False, schedule: Schedule | None = None) -> None:
    """The report in this format; UnknownFormat when no format of that name renders reports."""
    _report_renderer(get(fmt, Use.REPORT))(view, stream, Rendering(tty, verbose, schedule))


def rendered(view: ReportView, fmt: str) -> str:
    """The report in this format as a file holds it (no terminal, not verbose)."""
    buffer = io.StringIO()
    render(view, fmt, buffer, tty=False)
    return buffer.getvalue()


def render_member(view: ReportView, fmt: Format) -> str:
    """A bundle member's text: its own renderer where it has one, else the format's report."""
    if fmt.member is None or fmt.member.renderer is None:
        return rendered(view, fmt.name)
    from .formats import resolve

    buffer = io.StringIO()
    cast(ReportRenderer, resolve(fmt.member.renderer))(view, buffer, Rendering())
    return buffer.getvalue()


def render_diff(change: Difference, fmt: str) -> str:
    return cast(str, get(fmt, Use.DIFF).renderer(Use.DIFF)(change))


def render_fleet_as(fleet: Fleet, fmt: str) -> str:
    return cast(str, get(fmt, Use.FLEET).renderer(Use.FLEET)(fleet))


# --- the built-in renderers (reports.formats names them) -----------------------------------------


def report_text(view: ReportView, stream: TextIO, how: Rendering) -> None:
    if how.tty:
        from .text import rich_text

        rich_text(view, stream, how.verbose)
    else:
        from .text import plain_text

        stream.write(plain_text(view, how.verbose))


def json_member(view: ReportView, stream: TextIO, how: Rendering) -> None:
    json.dump(escaped_tree(view.to_json()), stream, indent=2, ensure_ascii=False)


def report_json(view: ReportView, stream: TextIO, how: Rendering) -> None:
    json_member(view, stream, how)
    stream.write("\n")


def report_markdown(view: ReportView, stream: TextIO, how: Rendering) -> None:
    from .markdown import markdown

    stream.write(markdown(view))


def report_html(view: ReportView, stream: TextIO, how: Rendering) -> None:
    from .html import render_html

    stream.write(render_html(view))


def report_prometheus(view: ReportView, stream: TextIO, how: Rendering) -> None:
    from .prometheus import render_prometheus

    stream.write(render_prometheus(view, how.schedule))


def diff_text(change: Difference) -> str:
    return "\n".join(change.lines()) + "\n"


def diff_json(change: Difference) -> str:
    return json.dumps(change.to_json(), indent=2, ensure_ascii=False) + "\n"


def _fleet(fleet: Fleet, name: str) -> str:
    from .fleet import render_fleet

    return render_fleet(fleet, name)


def fleet_text(fleet: Fleet) -> str:
    return _fleet(fleet, "text")


def fleet_json(fleet: Fleet) -> str:
    return _fleet(fleet, "json")


def fleet_markdown(fleet: Fleet) -> str:
    return _fleet(fleet, "markdown")


def fleet_html(fleet: Fleet) -> str:
    return _fleet(fleet, "html")
