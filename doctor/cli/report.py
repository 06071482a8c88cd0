"""`decode-doctor report` (the support bundle), `diff` (two reports) and `merge` (a fleet matrix); the
work is the application layer's (app.bundle, app.compare)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..app.choices import BUNDLE_FORMATS
from ..app.guard import guarded
from ..i18n import _
from .common import CONTEXT, Progress, run_options, run_request


@click.command("report", context_settings=CONTEXT)
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
        raise click.UsageError("--redact-hosts and --no-redact contradict each other")
    request = run_request(params)
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


def _compared(action: Any) -> str:
    from ..app.requests import RequestError

    try:
        text: str = action()
    except RequestError as exc:
        raise click.BadParameter(str(exc)) from None
    return text


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
@click.option("--format", "fmt", type=click.Choice(("text", "markdown", "html")), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None)
def merge(reports: tuple[Path, ...], fmt: str, output: Path | None) -> None:
    """A host × check matrix for a fleet, from many reports (JSON or bundles)."""
    from ..app import compare

    text = _compared(lambda: compare.merge(reports, fmt))
    if output:
        output.write_text(text)
        click.echo(_("fleet matrix written to {output}", output=output), err=True)
    else:
        click.echo(text, nl=False)
