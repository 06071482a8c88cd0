"""`decode-doctor report` (the support bundle), `diff` (two reports) and `merge` (a fleet matrix); the
work is the application layer's (app.bundle, app.compare)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click

from ..app.choices import BUNDLE_FORMATS, FAIL_ON_LEVELS
from ..app.guard import guarded
from ..i18n import _, localized, reason
from .common import CONTEXT, Progress, RunCommand, run_options, run_request

T = TypeVar("T")


@click.command("report", cls=RunCommand, context_settings=CONTEXT)
@run_options
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=None,
    help="A directory (the bundle gets its own name there) or a file path [default: the current directory].",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(BUNDLE_FORMATS),
    default="bundle",
    show_default=True,
    help="A whole bundle, or one redacted file.",
)
@click.option(
    "--redact-hosts",
    is_flag=True,
    help="Also replace host names, IP addresses, user names and home paths with stable placeholders (the mapping stays on this machine).",
)
@click.option("--no-redact", is_flag=True, help="Write secrets as they are. Only for bundles that never leave this machine.")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where --redact-hosts keeps its mapping [default: $XDG_STATE_HOME/decode-doctor].",
)
def report(**params: Any) -> None:
    """Run the checks and write a ticket-ready bundle: report.md, report.html, report.json and raw/."""
    from ..app.bundle import BundleRequest
    from ..engine.paths import default_state_dir

    if params["redact_hosts"] and params["no_redact"]:
        raise click.UsageError(_("--redact-hosts and --no-redact contradict each other"))
    request = replace(run_request(params), verdict_exits=False)  # the bundle is the result: 0 once it is written
    bundle = BundleRequest(
        run=request,
        output=params["output"] or Path.cwd(),
        state_dir=params["state_dir"] or default_state_dir(),
        fmt=params["fmt"],
        redact=not params["no_redact"],
        redact_hosts=params["redact_hosts"],
    )
    guarded(params["debug"], lambda: _report(bundle))


def _report(request: Any) -> int:
    from ..app.bundle import LeakError, write_report

    if not request.redact:
        click.secho(
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
        click.echo(_("decode-doctor report: the bundle was NOT written: secrets would remain in it after redaction:"), err=True)
        for problem in exc.problems[:20]:
            click.echo(f"    {problem}", err=True)
        click.echo(_("Report this as a bug, or remove the secret from its source; --no-redact writes it anyway (locally only)."), err=True)
        return 2
    finally:
        progress.clear()
    if result.mapping is not None:
        click.echo(_("placeholder mapping kept on this machine only: {mapping}", mapping=result.mapping), err=True)
    kind = _("bundle") if request.fmt == "bundle" else _("report")
    no_verdict = _(", {unjudged} check(s) reached no verdict", unjudged=result.unjudged) if result.unjudged else ""
    click.echo(
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


def _compared(action: Callable[[], T]) -> T:
    from ..app.requests import RequestError

    try:
        return action()
    except RequestError as exc:
        raise click.BadParameter(localized(reason(exc))) from None


@click.command("diff", context_settings=CONTEXT)
@click.argument("before", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("after", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
def diff(before: Path, after: Path, fmt: str) -> None:
    """What differs between two reports (JSON or bundles): versions, findings, check states, measurements."""
    from ..app import compare

    click.echo(_compared(lambda: compare.diff(before, after, fmt)), nl=False)


@click.command("merge", context_settings=CONTEXT)
@click.argument("reports", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(("text", "markdown", "html", "json")), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option(
    "--fail-on",
    type=click.Choice(FAIL_ON_LEVELS),
    default="error",
    show_default=True,
    help="Exit 1 when a host has a finding at or above this severity (3: a host incomplete or stale wins).",
)
@click.option(
    "--max-age", metavar="TIME", default=None, help="A report older than this (15m, 1h, 1d) is stale: its host counts as not judged."
)
@click.option("-q", "--quiet", is_flag=True, help="With -o: no line on stderr saying where the matrix went.")
def merge(reports: tuple[Path, ...], fmt: str, output: Path | None, fail_on: str, max_age: str | None, quiet: bool) -> None:
    """A host × check matrix for a fleet, from many reports (JSON or bundles): each host's newest report,
    its verdict, age and what went unjudged, and totals. Exits 3 when a host is incomplete or stale,
    1 when one has findings at or above --fail-on, else 0."""
    from ..app import compare
    from ..app.output import write_output
    from ..engine.units import duration

    try:
        max_age_s = duration(1.0, 3650 * 86400.0)(max_age) if max_age is not None else None
    except ValueError as exc:
        raise click.BadParameter(localized(reason(exc)), param_hint="--max-age") from None
    merged = _compared(lambda: compare.merge(reports, fail_on, max_age_s))

    def body() -> int:
        text = compare.render(merged, fmt)
        if output:
            write_output(output, text)
            if not quiet:
                click.echo(_("fleet matrix written to {output}", output=output), err=True)
        else:
            click.echo(text, nl=False)
        return merged.exit_code

    guarded(False, body)
