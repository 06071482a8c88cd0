"""`decode-doctor analyze FILE…`: the findings a live check would give, from texts a customer sent
(nvidia-smi output and errors, kernel logs…); the work is the application layer's (app.analyze)."""

from __future__ import annotations

from typing import Any

import click

from ..app.flags import click_options
from ..app.guard import guarded
from ..i18n import localized, reason
from .common import CONTEXT
from .options import AnalyzeOptions


@click.command(context_settings=CONTEXT)
@click.argument("files", nargs=-1, required=True, metavar="FILE…")
@click_options(AnalyzeOptions)
def analyze(files: tuple[str, ...], **params: Any) -> None:
    """Judge pasted texts: nvidia-smi output and errors, dmesg or journal excerpts, collect_env,
    amd-smi/rocm-smi/Jetson/RKNPU output, docker pull errors, vLLM/SGLang/llama-server logs and
    captured SSE streams. Use - for standard input. The kind of text is recognised by its content.
    Exits 3 when a text cannot show part of what it is judged on (--incomplete)."""
    options = AnalyzeOptions.from_values(params)
    guarded(options.debug, lambda: _analyze(files, options))


def _analyze(files: tuple[str, ...], options: AnalyzeOptions) -> int:
    from ..app.analyze import AnalyzeRequest, analyze
    from ..app.output import OutputRequest, render_report
    from ..app.requests import RequestError
    from ..engine.registry import load

    registry = load()
    try:
        report = analyze(AnalyzeRequest(tuple(files), options.fail_on, options.timeout, options.incomplete == "fail"), registry)
    except RequestError as exc:
        raise click.UsageError(localized(reason(exc))) from None
    render_report(report, registry, OutputRequest(fmt=options.fmt, output=options.output, verbose=True, debug=options.debug))
    return report.exit_code
