"""`decode-doctor report` (the support bundle), `diff` (two reports) and `merge` (a fleet matrix); the
work is the application layer's (app.bundle, app.compare)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click

from ..app.flags import click_options
from ..app.guard import echo, guarded
from ..i18n import _, localized, reason
from .common import CONTEXT, Progress, RunCommand, check_options, run_options, run_request
from .options import DiffOptions, MergeOptions, ReportOptions, RunOptions

T = TypeVar("T")


@click.command("report", cls=RunCommand, context_settings=CONTEXT)
@run_options
@click_options(ReportOptions)
def report(**params: Any) -> None:
    """Run the checks and write a ticket-ready bundle: report.md, report.html, report.json and raw/."""
    from ..app.bundle import BundleRequest
    from ..engine.paths import default_state_dir

    run, options = RunOptions.from_values(params), ReportOptions.from_values(params)
    if options.redact_hosts and options.no_redact:
        raise click.UsageError(_("--redact-hosts and --no-redact contradict each other"))
    request = replace(run_request(run, check_options(params)), verdict_exits=False)  # the bundle is the result: 0 once it is written
    bundle = BundleRequest(
        run=request,
        output=options.output or Path.cwd(),
        state_dir=options.state_dir or default_state_dir(),
        fmt=options.fmt,
        redact=not options.no_redact,
        redact_hosts=options.redact_hosts,
    )
    guarded(run.debug, lambda: _report(bundle))


def _report(request: Any) -> int:
    from ..app.bundle import LeakError, write_report

    if not request.redact:
        click.secho(  # no name in it: a fixed warning, in red
            _(
                "WARNING: --no-redact: the bundle holds tokens, passwords, keys and host names exactly as found. "
                "Do not attach it to a ticket or send it anywhere."
            ),
            fg="red",
            bold=True,
            err=True,
        )
    progress = Progress(sys.stderr.isatty())
    try:
        result = write_report(request, progress=progress)
    except LeakError as exc:
        echo(_("decode-doctor report: the bundle was NOT written: secrets would remain in it after redaction:"), err=True)
        for problem in exc.problems[:20]:
            echo(f"    {problem}", err=True)
        echo(_("Report this as a bug, or remove the secret from its source; --no-redact writes it anyway (locally only)."), err=True)
        return 2
    finally:
        progress.clear()
    if result.mapping is not None:
        echo(_("placeholder mapping kept on this machine only: {mapping}", mapping=result.mapping), err=True)
    kind = _("bundle") if request.fmt == "bundle" else _("report")
    no_verdict = _(", {unjudged} check(s) reached no verdict", unjudged=result.unjudged) if result.unjudged else ""
    echo(
        _(
            "{kind} written to {written} ({files} file(s)); {findings} finding(s){no_verdict}",
            kind=kind,
            written=result.written,
            files=result.files,
            findings=result.findings,
            no_verdict=no_verdict,
        ),
        err=True,
    )
    return 0  # the bundle is written: `decode-doctor report && upload` uploads it, whatever it holds


# --- reading reports back ------------------------------------------------------------------------


def _compared(action: Callable[[], T], argument: str) -> T:
    """action's result; a file that is not a report is a usage error naming the argument it was given as."""
    from ..app.requests import RequestError

    try:
        return action()
    except RequestError as exc:
        raise click.BadParameter(localized(reason(exc)), param_hint=argument) from None


@click.command("diff", context_settings=CONTEXT)
@click.argument("before", metavar="BEFORE", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("after", metavar="AFTER", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click_options(DiffOptions)
def diff(before: Path, after: Path, **params: Any) -> None:
    """What differs between two reports (JSON or bundles): versions, findings, check states, measurements."""
    from ..app import compare

    fmt = DiffOptions.from_values(params).fmt
    echo(_compared(lambda: compare.diff(before, after, fmt), "BEFORE/AFTER"), nl=False)


@click.command("merge", context_settings=CONTEXT)
@click.argument("reports", metavar="REPORT…", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click_options(MergeOptions)
def merge(reports: tuple[Path, ...], **params: Any) -> None:
    """A host × check matrix for a fleet, from many reports (JSON or bundles): each host's newest report,
    its verdict, age and what went unjudged, and totals. Exits 3 when a host is incomplete or stale,
    1 when one has findings at or above --fail-on, else 0."""
    from ..app import compare
    from ..app.output import write_output
    from ..engine.units import duration

    options = MergeOptions.from_values(params)
    fmt, output, fail_on, max_age, quiet = options.fmt, options.output, options.fail_on, options.max_age, options.quiet
    try:
        max_age_s = duration(1.0, 3650 * 86400.0)(max_age) if max_age is not None else None
    except ValueError as exc:
        raise click.BadParameter(localized(reason(exc)), param_hint="--max-age") from None
    merged = _compared(lambda: compare.merge(reports, fail_on, max_age_s), "REPORT…")

    def body() -> int:
        text = compare.render(merged, fmt)
        if output:
            write_output(output, text)
            if not quiet:
                echo(_("fleet matrix written to {output}", output=output), err=True)
        else:
            echo(text, nl=False)
        return merged.exit_code

    guarded(False, body)
