"""`decode-doctor analyze FILE…`: the findings a live check would give, from texts a customer sent
(nvidia-smi output and errors, kernel logs…); the work is the application layer's (app.analyze)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..app.choices import FAIL_ON_LEVELS, FORMATS, INCOMPLETE_HELP, INCOMPLETE_POLICIES
from ..app.guard import guarded
from ..i18n import localized, reason
from .common import CONTEXT, output_request


@click.command(context_settings=CONTEXT)
@click.argument("files", nargs=-1, required=True, metavar="FILE…")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the report to this file.")
@click.option("--fail-on", type=click.Choice(FAIL_ON_LEVELS), default="error", show_default=True)
@click.option("--incomplete", type=click.Choice(INCOMPLETE_POLICIES), default="fail", show_default=True, help=INCOMPLETE_HELP)
@click.option("--timeout", type=click.FloatRange(min=1), default=120, show_default=True, help="Seconds the analysis may take.")
@click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
def analyze(**params: Any) -> None:
    """Judge pasted texts: nvidia-smi output and errors, dmesg or journal excerpts, collect_env,
    amd-smi/rocm-smi/Jetson/RKNPU output, docker pull errors, vLLM/SGLang/llama-server logs and
    captured SSE streams. Use - for standard input. The kind of text is recognised by its content.
    Exits 3 when a text cannot show part of what it is judged on (--incomplete)."""
    guarded(params["debug"], lambda: _analyze(params))


def _analyze(params: dict[str, Any]) -> int:
    from ..app.analyze import AnalyzeRequest, analyze
    from ..app.output import render_report
    from ..app.requests import RequestError
    from ..engine.registry import load

    registry = load()
    try:
        report = analyze(
            AnalyzeRequest(tuple(params["files"]), params["fail_on"], params["timeout"], params["incomplete"] == "fail"), registry
        )
    except RequestError as exc:
        raise click.UsageError(localized(reason(exc))) from None
    render_report(report, registry, output_request(params, verbose=True))
    return report.exit_code
