"""The report as Markdown, to paste into a ticket."""

from __future__ import annotations

import json

from .text import all_clear, summary_line
from .view import ReportView

FOLDED_LIMIT = 500


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def markdown(view: ReportView) -> str:
    meta = view.meta
    out = [
        "# decode-doctor report",
        "",
        f"- host: `{meta.get('host', '?')}`, root: `{meta.get('root', '/')}`, started {meta.get('started', '?')}, "
        f"decode-doctor {meta.get('version', '?')}",
        f"- {all_clear(view) or summary_line(view)}",
        "",
        "## Findings",
        "",
    ]
    if view.findings:
        groups = view.groups()
        out += ["| Code | Severity | Check | Finding | Fix |", "|---|---|---|---|---|"]
        for group in groups:
            f = group.first
            fix = _cell(f.fix.summary) if f.fix else ""
            text = _cell(f.message) if len(group.findings) == 1 else f"{len(group.findings):,} findings: {_cell(f.title)}"
            out.append(f"| {f.code} | {f.severity.value} | {f.check} | {text} | {fix} |")
        out.append("")
        for group in groups:
            f = group.first
            out += [f"### {f.code}: {f.title}" + (f" ({len(group.findings):,})" if len(group.findings) > 1 else ""), ""]
            out += [f.message, ""]
            if f.evidence:
                out += ["```json", json.dumps(f.evidence, indent=2, default=str), "```", ""]
            if len(group.findings) > 1:  # GitHub and GitLab fold <details>; no script involved
                rest = group.findings[1:FOLDED_LIMIT]
                out += [f"<details><summary>{len(group.findings) - 1:,} more</summary>", ""]
                out += [f"- {_cell(other.message)}" for other in rest]
                if len(group.findings) > FOLDED_LIMIT:
                    out.append(f"- … and {len(group.findings) - FOLDED_LIMIT:,} more (the JSON report lists them)")
                out += ["", "</details>", ""]
    else:
        out += ["No findings.", ""]
    if view.unjudged():
        out += ["## Not judged", "", "What the checks were given and could not judge: no verdict on it, in either direction.", ""]
        out += [f"- {check}: {_cell(item.what)} — {_cell(item.why)}" for check, item in view.unjudged()[:FOLDED_LIMIT]]
        if len(view.unjudged()) > FOLDED_LIMIT:
            out.append(f"- … and {len(view.unjudged()) - FOLDED_LIMIT:,} more (the JSON report lists them)")
        out.append("")
    if view.fact_lines:
        out += ["## Facts", ""]
        out += [f"- {line.check}: {_cell(line.text)}" for line in view.fact_lines]
        out.append("")
    if view.environment:
        out += ["## Environment", "", "| Item | Value | Judged |", "|---|---|---|"]
        out += [f"| {_cell(r.name)} | {_cell(r.value)} | {r.judged} |" for r in view.environment]
        out.append("")
    out += ["## Checks", "", "| Check | State | Duration | Note |", "|---|---|---|---|"]
    for r in view.results:
        out.append(f"| {r.check} | {r.state.value} | {r.duration_s:.2f} s | {_cell(r.reason or '')} |")
    if view.ignored:
        out += ["", "## Ignored", ""]
        out += [f"- {i.code} by `{i.selector}`" + (f": {i.reason}" if i.reason else "") for i in view.ignored]
    return "\n".join(out) + "\n"
