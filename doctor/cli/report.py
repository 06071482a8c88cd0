"""`decode-doctor report` (the support bundle), `diff` (two reports) and `merge` (a fleet matrix)."""

from __future__ import annotations

import html
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from .common import CONTEXT, Progress, guarded, run_options, run_request, validate_selectors

CPUINFO = "import json, cpuinfo; print(json.dumps(cpuinfo.get_cpu_info()))"
SINGLE = {"json": "report.json", "markdown": "report.md", "html": "report.html"}


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
    type=click.Choice(("bundle", "json", "markdown", "html", "prometheus")),
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
    from ..fixes.journal import default_state_dir

    if params["redact_hosts"] and params["no_redact"]:
        raise click.UsageError("--redact-hosts and --no-redact contradict each other")
    request = run_request(params)
    validate_selectors(request)
    state_dir = params["state_dir"] or default_state_dir()
    guarded(params["debug"], lambda: _report(request, params["output"] or Path.cwd(), params, state_dir))


def _cpu_unnamed() -> bool:
    """Whether /proc/cpuinfo lacks a model name (ARM boards): only then is py-cpuinfo, which samples
    the clock for about a second, worth its subprocess."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            return "model name" not in handle.read(1 << 20)
    except OSError:
        return True


def _report(request: Any, output: Path, params: dict[str, Any], state_dir: Path) -> int:
    from ..app import service
    from ..reports.bundle import LeakError, build_bundle, write_bundle
    from ..reports.environment import host_rows
    from ..reports.redact import Redactor
    from ..reports.textsafe import to_bytes

    fmt, redact_hosts, no_redact = params["fmt"], params["redact_hosts"], params["no_redact"]
    # py-cpuinfo samples the clock for about a second: let it run in its own process beside the checks
    cpu_probe = (
        subprocess.Popen([sys.executable, "-c", CPUINFO], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if _cpu_unnamed()
        else None
    )
    progress = Progress(sys.stderr.isatty())
    try:
        outcome = service.run(request, progress=progress)
    finally:
        progress.clear()
    cpu: dict[str, Any] = {"count": os.cpu_count(), "arch": platform.machine()}
    if cpu_probe is not None:
        try:
            cpu = json.loads(cpu_probe.communicate(timeout=10)[0] or "{}")
        except (subprocess.TimeoutExpired, ValueError):
            cpu_probe.kill()
    if no_redact:
        click.secho(
            "WARNING: --no-redact: the bundle holds tokens, passwords, keys and host names exactly as found. "
            "Do not attach it to a ticket or send it anywhere.",
            fg="red",
            bold=True,
            err=True,
        )
    redactor = Redactor(enabled=not no_redact, hosts=redact_hosts)
    codes = {code: spec for code, (spec, _) in outcome.registry.codes().items()}
    bundle, view = build_bundle(outcome.report, outcome.ctx, host_rows(outcome.ctx, cpu), redactor, codes)
    if fmt != "bundle":
        if fmt == "prometheus":
            from ..reports.prometheus import render_prometheus

            bundle.files = {"metrics.prom": to_bytes(redactor.text(render_prometheus(view)))}
        else:
            bundle.files = {SINGLE[fmt]: bundle.files[SINGLE[fmt]]}
        bundle.name = f"{bundle.name}-{next(iter(bundle.files))}"
    try:
        if fmt == "bundle":
            written = write_bundle(bundle, redactor, output)
        else:
            problems = redactor.leaks(bundle.files)
            if problems:
                raise LeakError(problems)
            written = output / bundle.name if output.is_dir() else output
            written.write_bytes(next(iter(bundle.files.values())))
    except LeakError as exc:
        click.echo("decode-doctor report: the bundle was NOT written: secrets would remain in it after redaction:", err=True)
        for problem in exc.problems[:20]:
            click.echo(f"    {problem}", err=True)
        click.echo("Report this as a bug, or remove the secret from its source; --no-redact writes it anyway (locally only).", err=True)
        return 2
    if redact_hosts and redactor.mapping:
        mapping = state_dir / "redaction" / f"{bundle.name}.json"
        mapping.parent.mkdir(parents=True, exist_ok=True)
        mapping.write_text(json.dumps({placeholder: real for real, placeholder in redactor.mapping.items()}, indent=2))
        mapping.chmod(0o600)
        click.echo(f"placeholder mapping kept on this machine only: {mapping}", err=True)
    kind = "bundle" if fmt == "bundle" else "report"
    result = outcome.report
    unjudged = len(result.incomplete())
    no_verdict = f", {unjudged} check(s) reached no verdict" if unjudged else ""
    click.echo(f"{kind} written to {written} ({len(bundle.files)} file(s)); {len(result.findings)} finding(s){no_verdict}", err=True)
    return 0  # the bundle is written: `decode-doctor report && upload` uploads it, whatever it holds


# --- reading reports back ------------------------------------------------------------------------


def _load(path: Path) -> dict[str, Any]:
    from ..reports.compare import ReportError, load_report

    try:
        return load_report(path)
    except ReportError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("diff", context_settings=CONTEXT)
@click.argument("before", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("after", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
def diff(before: Path, after: Path, fmt: str) -> None:
    """What differs between two reports (JSON or bundles): versions, findings, check states, measurements."""
    from ..engine.registry import load
    from ..reports.compare import difference

    change = difference(_load(before), _load(after), (before, after), load().checks)
    if fmt == "json":
        click.echo(json.dumps(change.to_json(), indent=2, ensure_ascii=False))
    else:
        click.echo("\n".join(change.lines()))


@click.command("merge", context_settings=CONTEXT)
@click.argument("reports", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(("text", "markdown", "html")), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None)
def merge(reports: tuple[Path, ...], fmt: str, output: Path | None) -> None:
    """A host × check matrix for a fleet, from many reports (JSON or bundles)."""
    from ..reports.compare import matrix

    loaded, seen = [], set()
    for path in reports:
        data = _load(path)
        name = str((data.get("run") or {}).get("host", path.name))
        if name in seen:
            name = f"{name} ({path.name})"
        seen.add(name)
        loaded.append((name, data))
    hosts, checks, cells = matrix(loaded)
    if fmt == "html":
        text = _merge_html(hosts, checks, cells)
    elif fmt == "markdown":
        lines = ["| host | " + " | ".join(checks) + " |", "|---" * (len(checks) + 1) + "|"]
        lines += ["| " + h + " | " + " | ".join(cells.get((h, c), "—") for c in checks) + " |" for h in hosts]
        text = "\n".join(lines) + "\n"
    else:
        width = max(len(h) for h in hosts)
        widths = [max(len(c), *(len(cells.get((h, c), "—")) for h in hosts)) for c in checks]
        lines = [" " * width + "  " + "  ".join(c.ljust(w) for c, w in zip(checks, widths, strict=True))]
        lines += [
            h.ljust(width) + "  " + "  ".join(cells.get((h, c), "—").ljust(w) for c, w in zip(checks, widths, strict=True)) for h in hosts
        ]
        text = "\n".join(line.rstrip() for line in lines) + "\n"
    if output:
        output.write_text(text)
        click.echo(f"fleet matrix written to {output}", err=True)
    else:
        click.echo(text, nl=False)


def _merge_html(hosts: list[str], checks: list[str], cells: dict[tuple[str, str], str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in checks)
    rows = "".join(
        "<tr><th>"
        + html.escape(h)
        + "</th>"
        + "".join(
            f'<td class="{html.escape(cells.get((h, c), "").split(":")[0])}">{html.escape(cells.get((h, c), "—"))}</td>' for c in checks
        )
        + "</tr>"
        for h in hosts
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>decode-doctor fleet</title><style>'
        "body{font:14px system-ui,sans-serif;margin:2rem}table{border-collapse:collapse}th,td{border:1px solid #ddd;padding:.3rem .5rem}"
        ".error{background:#fde7e9}.warning{background:#fff4d6}.info{background:#e8f0fe}.passed{background:#e6f4ea}</style></head>"
        f"<body><h1>decode-doctor fleet: {len(hosts)} hosts</h1><table><tr><th>host</th>{head}</tr>{rows}</table></body></html>\n"
    )
