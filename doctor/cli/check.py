"""`decode-doctor check`: run the checks, report, and optionally fix."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

import click

from ..app.flags import click_options
from ..app.guard import guarded
from ..i18n import _
from .common import CONTEXT, Progress, RunCommand, TerminalDialogue, check_options, run_options, run_request
from .options import CheckOptions, RunOptions


@click.command(cls=RunCommand, context_settings=CONTEXT)
@run_options
@click_options(CheckOptions)
def check(**params: Any) -> None:
    """Run the checks and report what they find."""
    from ..app.requests import FixRequest
    from ..engine.paths import default_state_dir

    run, options = RunOptions.from_values(params), CheckOptions.from_values(params)
    checks = check_options(params)
    if (options.dry_run or options.yes or options.unsafe_fixes) and not options.fix:
        raise click.UsageError(_("--dry-run, --yes and --unsafe-fixes go with --fix"))
    request = run_request(run, checks)
    fix_request = None
    if options.fix:
        state_dir = options.state_dir or default_state_dir()
        fix_request = FixRequest(state_dir, options.dry_run, options.yes, options.unsafe_fixes)
    guarded(run.debug, lambda: _run(request, fix_request, options, run.debug))


def _run(request: Any, fix_request: Any, options: CheckOptions, debug: bool) -> int:
    from ..app import fixing, service
    from ..app.output import OutputRequest, render_report

    fmt, output = options.fmt, options.output
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
    rendering = OutputRequest(fmt=fmt, output=output, verbose=options.verbose, debug=debug, quiet=options.quiet)
    render_report(report, outcome.registry, rendering)  # JSON, Markdown and HTML are redacted there
    return report.exit_code
