"""`decode-doctor list` and `decode-doctor explain CODE`."""

from __future__ import annotations

import json
from typing import Any

import click

from ..app.flags import click_options
from ..app.guard import echo
from ..engine.findings import Applicability, Severity
from ..i18n import _, localized
from .common import CONTEXT
from .options import ListOptions


@click.command("list", context_settings=CONTEXT)
@click_options(ListOptions)
def list_checks(**params: Any) -> None:
    """List the checks, the codes each can emit, and which are fixable (markdown: the README's table)."""
    fmt = ListOptions.from_values(params).fmt
    from ..engine.check import INPUTS
    from ..engine.options import OptionRef
    from ..engine.registry import load

    registry = load()
    if fmt == "markdown":
        echo(checks_table(registry), nl=False)
        return
    rows: list[dict[str, Any]] = []
    for name, cls in registry.checks.items():
        needs = cls.needs
        codes = []
        for c in cls.codes:
            fix = registry.fixable(c.code)
            codes.append({"code": c.code, "severity": c.severity.value, "title": c.title, "fix": fix.value if fix else None})
        rows.append(
            {
                "check": name,
                "origin": registry.origins["check:" + name],
                "description": cls.description,
                "exclusive": needs.exclusive,
                "needs": [*needs.platforms, *(i.flag if isinstance(i, OptionRef) else INPUTS[i] for i in needs.inputs)],
                "reads": sorted({registry.publishers[r.facts] for r in needs.reads if r.facts in registry.publishers}),
                "options": [flag.flag for _name, flag, _default in cls.options.flags()] if cls.options else [],
                "timeout_s": cls.timeout_s,
                "codes": codes,
            }
        )
    if fmt == "json":
        echo(json.dumps({"checks": rows, "load_errors": registry.errors}, indent=2))
        return
    from ..i18n import explanation
    from ..i18n.width import ljust

    for row in rows:
        shown_needs = [_("Linux only") if need == "linux" else need for need in row["needs"]]
        extra = _(", ").join(shown_needs + ([_("runs alone")] if row["exclusive"] else []))
        origin = "" if row["origin"] == "builtin" else f" [{row['origin']}]"
        described = _("{check}: {description}", check=row["check"], description=_(row["description"]))
        echo(described + (_(" ({needs})", needs=extra) if extra else "") + origin)
        for code in row["codes"]:
            label = ""
            if code["fix"]:
                label = "  " + _("[{label}]", label=Applicability(code["fix"]).fixable)
            severity = ljust(Severity(code["severity"]).label, 8)
            echo(f"    {code['code']:<9} {severity} {explanation(code['code'], 'title', code['title'])}{label}")
    for error in registry.errors:
        echo(_("could not load: {error}", error=localized(error)), err=True)


@click.command(context_settings=CONTEXT)
@click.argument("code")
def explain(code: str) -> None:
    """Explain a finding code: what it means, why it matters, how to fix it by hand."""
    from ..engine.registry import load

    registry = load()
    wanted = code.upper()
    owner = registry.checks.get(registry.owner(wanted) or "")  # the registry's index names it: only that check is imported
    if owner is None:
        for info in registry.catalog():
            if wanted in info.retired:
                echo(_("{code} (check: {check}) is no longer a finding: {why}.", code=wanted, check=info.name, why=info.retired[wanted]))
                return
        close = [c for info in registry.catalog() for c in info.codes if c.startswith(wanted[:3])]
        hint = _(" Did you mean {codes}?", codes=", ".join(sorted(close))) if close else _(" `decode-doctor list` shows every code.")
        raise click.UsageError(_('unknown code "{code}".', code=code) + hint)
    spec, cls = owner.code(wanted), owner
    for line in explanation_lines(spec, cls.name, registry.fixable(spec.code)):
        echo(line)


def explanation_lines(spec: Any, check: str, fix: Any) -> list[str]:
    """`explain CODE` in the current language: every section of the code's explanation, wrapped by
    display width (Chinese text wraps between characters)."""
    from ..i18n import explanation, translated
    from ..i18n.extract import sections
    from ..i18n.width import wrap

    def text(section: str) -> str:
        return explanation(spec.code, section, getattr(spec, section, "") or "")

    def section(title: str, body: str) -> list[str]:
        lines = ["", title]
        for paragraph in body.split("\n"):
            lines.extend(wrap(paragraph, 96, "  ") if paragraph else [""])
        return lines

    severity = spec.severity.label
    lines = [_("{code} ({severity}, check: {check}): {title}", code=spec.code, severity=severity, check=check, title=text("title"))]
    if not all(translated(spec.code, name, english) for name, english in sections(spec)):
        lines.append(_("(This explanation has no translation yet: the sections without one are shown in English.)"))
    lines += section(_("What it means"), text("what"))
    lines += section(_("Why it matters for LLM decode"), text("why"))
    if spec.example:
        lines += section(_("Example"), text("example"))
    lines += section(_("How to fix it by hand"), text("fix_by_hand"))
    automatic = (
        _("{text} [{label}]", text=text("fix_safety"), label=fix.fixable) if fix else _("None: decode-doctor does not change this for you.")
    )
    lines += section(_("Automatic fix"), automatic)
    return lines


def code_ranges(codes: list[str]) -> str:
    """ABC001, ABC003, ABC004; XYZ010–XYZ018: runs of three or more consecutive codes as a range."""
    parsed = sorted((code.rstrip("0123456789"), int(code[len(code.rstrip("0123456789")) :]), code) for code in codes)
    parts: list[str] = []
    run: list[tuple[str, int, str]] = []

    def flush() -> None:
        if len(run) >= 3:
            parts.append(f"{run[0][2]}–{run[-1][2]}")
        else:
            parts.extend(item[2] for item in run)

    for item in parsed:
        if run and (item[0] != run[-1][0] or item[1] != run[-1][1] + 1):
            flush()
            run = []
        run.append(item)
    if run:
        flush()
    return ", ".join(parts)


def checks_table(registry: Any) -> str:
    """The Markdown table of every check: its name, its codes and what it looks at."""
    lines = ["| Check | Codes | What it looks at |", "|---|---|---|"]
    for name, cls in registry.checks.items():
        text = (cls.looks_at or cls.description).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{name}` | {code_ranges([c.code for c in cls.codes])} | {text} |")
    return "\n".join(lines) + "\n"
