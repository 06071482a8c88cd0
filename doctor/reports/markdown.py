"""The report as Markdown, to paste into a ticket."""

from __future__ import annotations

import json
from typing import Any

from ..i18n import _, explanation, localized, typography
from .text import all_clear, shown_check, summary_line
from .view import ReportView

FOLDED_LIMIT = 500


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def _meta_values(meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "host": meta.get("host", "?"),
        "root": meta.get("root", "/"),
        "started": meta.get("started") or _("not recorded"),
        "version": meta.get("version") or _("not recorded"),
    }


def markdown(view: ReportView) -> str:
    meta = view.meta
    out = [
        "# " + _("decode-doctor report"),
        "",
        "- " + _("host: `{host}`, root: `{root}`, started {started}, decode-doctor {version}", **_meta_values(meta)),
        f"- {all_clear(view) or summary_line(view)}",
        *("- " + _("could not load: {error}", error=_cell(localized(error))) for error in view.load_errors),
        "",
        "## " + _("Findings"),
        "",
    ]
    if view.findings:
        groups = view.groups()
        out += ["| " + " | ".join((_("Code"), _("Severity"), _("Check"), _("Finding"), _("Fix"))) + " |", "|---|---|---|---|---|"]
        for group in groups:
            f = group.first
            fix = _cell(f.fix.summary) if f.fix else ""
            title = explanation(f.code, "title", f.title)
            text = (
                _cell(f.message)
                if len(group.findings) == 1
                else _("{count:,} findings: {title}", count=len(group.findings), title=_cell(title))
            )
            out.append(f"| {f.code} | {f.severity.label} | {f.check} | {text} | {fix} |")
        out.append("")
        for group in groups:
            f = group.first
            out += [
                "### "
                + _("{code}: {title}", code=f.code, title=explanation(f.code, "title", f.title))
                + (f" ({len(group.findings):,})" if len(group.findings) > 1 else ""),
                "",
            ]
            out += [f.message, ""]
            if f.evidence:
                out += ["```json", json.dumps(f.evidence, indent=2, default=str), "```", ""]
            if len(group.findings) > 1:  # GitHub and GitLab fold <details>; no script involved
                rest = group.findings[1:FOLDED_LIMIT]
                out += ["<details><summary>" + _("{count:,} more", count=len(group.findings) - 1) + "</summary>", ""]
                out += [f"- {_cell(other.message)}" for other in rest]
                if len(group.findings) > FOLDED_LIMIT:
                    out.append("- " + _("… and {count:,} more (the JSON report lists them)", count=len(group.findings) - FOLDED_LIMIT))
                out += ["", "</details>", ""]
    else:
        out += [_("No findings."), ""]
    if view.unjudged():
        out += [
            "## " + _("Not judged"),
            "",
            _("What the checks were given and could not judge: no verdict on it, in either direction."),
            "",
        ]
        out += [
            "- " + _("{check}: {what} — {why}", check=shown_check(check), what=_cell(item.what), why=_cell(item.why))
            for check, item in view.unjudged()[:FOLDED_LIMIT]
        ]
        if len(view.unjudged()) > FOLDED_LIMIT:
            out.append("- " + _("… and {count:,} more (the JSON report lists them)", count=len(view.unjudged()) - FOLDED_LIMIT))
        out.append("")
    if view.accepted_gaps():
        out += ["## " + _("Accepted by rule"), "", _("Judged only in part, by a rule the check documents; the verdict stays complete:"), ""]
        out += [
            "- " + _("{check}: {what} — {why}", check=shown_check(check), what=_cell(item.what), why=_cell(item.why))
            for check, item in view.accepted_gaps()
        ]
        out.append("")
    if view.fact_lines:
        out += ["## " + _("Facts"), ""]
        out += ["- " + _("{check}: {fact}", check=shown_check(line.check), fact=_cell(line.text)) for line in view.fact_lines]
        out.append("")
    if view.environment:
        out += ["## " + _("Environment"), "", "| " + " | ".join((_("Item"), _("Value"), _("Judged"))) + " |", "|---|---|---|"]
        out += [f"| {_cell(r.name)} | {_cell(r.value)} | {r.judged_shown} |" for r in view.environment]
        out.append("")
    out += ["## " + _("Checks"), "", "| " + " | ".join((_("Check"), _("State"), _("Duration"), _("Note"))) + " |", "|---|---|---|---|"]
    for r in view.results:
        out.append(f"| {r.check} | {r.outcome.label} | {r.duration_s:.2f} s | {_cell(r.reason or '')} |")
    if view.ignored:
        out += ["", "## " + _("Ignored"), ""]
        out += [
            "- "
            + (
                _("{code} (not selected)", code=i.code)
                if i.selector == "not selected"
                else _("{code} by `{selector}`", code=i.code, selector=i.selector)
            )
            + (f": {i.reason}" if i.reason else "")
            for i in view.ignored
        ]
    return typography.normalize("\n".join(out) + "\n")
