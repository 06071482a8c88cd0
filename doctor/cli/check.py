"""`decode-doctor check`: run the checks, report, and optionally fix."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, TextIO

import click

from ..app.choices import FORMATS
from ..app.guard import guarded
from ..i18n import _
from .common import CONTEXT, Progress, RunCommand, TerminalDialogue, output_request, run_options, run_request


@click.command(cls=RunCommand, context_settings=CONTEXT)
@run_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="Every format but text (this terminal's) has secrets redacted, as `report` does; host names stay (report --redact-hosts).",
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the report to this file instead of standard output."
)
@click.option("-v", "--verbose", is_flag=True, help="Also show what the checks learned about the host (drivers, bandwidth, versions).")
@click.option("-q", "--quiet", is_flag=True, help="With -o: no line on stderr saying where the report went (cron mails nothing).")
@click.option("--fix", is_flag=True, help="Preview the fixes for the findings, then apply them after confirmation.")
@click.option("--dry-run", is_flag=True, help="With --fix: only preview, change nothing.")
@click.option("--yes", "-y", is_flag=True, help="With --fix: apply without asking (for scripts).")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix: also apply fixes marked unsafe.")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where fix journals and backups live [default: $XDG_STATE_HOME/decode-doctor].",
)
def check(**params: Any) -> None:
    """Run the checks and report what they find."""
    from ..app.requests import FixRequest
    from ..engine.paths import default_state_dir

    if (params["dry_run"] or params["yes"] or params["unsafe_fixes"]) and not params["fix"]:
        raise click.UsageError(_("--dry-run, --yes and --unsafe-fixes go with --fix"))
    request = run_request(params)
    fix_request = None
    if params["fix"]:
        state_dir = params["state_dir"] or default_state_dir()
        fix_request = FixRequest(state_dir, params["dry_run"], params["yes"], params["unsafe_fixes"])
    guarded(params["debug"], lambda: _run(request, fix_request, params))


def _run(request: Any, fix_request: Any, params: dict[str, Any]) -> int:
    from ..app import fixing, service
    from ..app.output import render_report

    fmt, output = params["fmt"], params["output"]
    started = time.time()
    progress = Progress(sys.stderr.isatty() and fmt == "text")
    try:
        outcome = service.run(request, progress=progress)
    finally:
        progress.clear()
    chat: TextIO = sys.stdout if (fmt == "text" and output is None) else sys.stderr
    if fix_request is not None:
        outcome = fixing.fix(outcome, fix_request, TerminalDialogue(chat, interactive=sys.stdin.isatty()))
    report = outcome.report
    report.meta["duration_s"] = round(time.time() - started, 3)
    render_report(report, outcome.registry, output_request(params))  # JSON, Markdown and HTML are redacted there
    return report.exit_code
