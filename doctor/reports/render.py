"""Every output format, rendered from the one redacted view."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TextIO

from .formats import FORMATS
from .textsafe import escaped_tree
from .view import ReportView

if TYPE_CHECKING:
    from .prometheus import Schedule

__all__ = ["FORMATS", "render"]


def render(view: ReportView, fmt: str, stream: TextIO, *, tty: bool, verbose: bool = False, schedule: Schedule | None = None) -> None:
    if fmt == "json":
        json.dump(escaped_tree(view.to_json()), stream, indent=2, ensure_ascii=False)
        stream.write("\n")
    elif fmt == "markdown":
        from .markdown import markdown

        stream.write(markdown(view))
    elif fmt == "html":
        from .html import render_html

        stream.write(render_html(view))
    elif fmt == "prometheus":
        from .prometheus import render_prometheus

        stream.write(render_prometheus(view, schedule))
    elif tty:
        from .text import rich_text

        rich_text(view, stream, verbose)
    else:
        from .text import plain_text

        stream.write(plain_text(view, verbose))
