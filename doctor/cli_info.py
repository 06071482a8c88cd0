"""`decode-doctor list` and `decode-doctor explain CODE`."""

from __future__ import annotations

import json
import textwrap

import click

from . import registry


@click.command("list", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
def list_checks(fmt: str) -> None:
    """List the checks, the codes each can emit, and which are fixable."""
    loaded = registry.checks()
    rows = []
    for name, cls in loaded.items.items():
        needs = cls.needs
        rows.append({
            "check": name,
            "origin": loaded.origins[name],
            "description": cls.description,
            "exclusive": needs.exclusive,
            "needs": [*needs.platforms, *(f"--{i.rstrip('s')}" for i in needs.inputs)],
            "timeout_s": cls.timeout_s,
            "codes": [{"code": c.code, "severity": c.severity.value, "title": c.title, "fixable": c.fixable} for c in cls.codes],
        })
    if fmt == "json":
        click.echo(json.dumps({"checks": rows, "load_errors": loaded.errors}, indent=2))
        return
    for row in rows:
        extra = ", ".join(row["needs"] + (["runs alone"] if row["exclusive"] else []))
        click.echo(f"{row['check']}: {row['description']}" + (f" ({extra})" if extra else "") + ("" if row["origin"] == "builtin" else f" [{row['origin']}]"))
        for code in row["codes"]:
            click.echo(f"    {code['code']:<9} {code['severity']:<8} {code['title']}{'  [fixable]' if code['fixable'] else ''}")
    for error in loaded.errors:
        click.echo(f"could not load: {error}", err=True)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("code")
def explain(code: str) -> None:
    """Explain a finding code: what it means, why it matters, how to fix it by hand."""
    codes = registry.all_codes()
    entry = codes.get(code.upper())
    if entry is None:
        close = [c for c in codes if c.startswith(code.upper()[:3])]
        hint = f" Did you mean {', '.join(sorted(close))}?" if close else " `decode-doctor list` shows every code."
        raise click.UsageError(f"unknown code {code!r}.{hint}")
    spec, cls = entry

    def section(title: str, body: str) -> None:
        click.echo(f"\n{title}")
        for paragraph in body.split("\n"):
            click.echo(textwrap.fill(paragraph, width=96, initial_indent="  ", subsequent_indent="  ") if paragraph else "")

    click.echo(f"{spec.code} ({spec.severity.value}, check: {cls.name}): {spec.title}")
    section("What it means", spec.what)
    section("Why it matters for LLM decode", spec.why)
    if spec.example:
        section("Example", spec.example)
    section("How to fix it by hand", spec.fix_by_hand)
    section("Automatic fix", spec.fix_safety or "None: decode-doctor does not change this for you.")
