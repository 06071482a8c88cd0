"""Renders a Report as text (a rich table on a terminal, plain lines when piped), JSON or Markdown."""

from __future__ import annotations

import json
from typing import TextIO

from .model import CheckResult, Finding, Severity, State
from .report import Report

FORMATS = ("text", "json", "markdown", "html", "prometheus")


def render(report: Report, fmt: str, stream: TextIO, *, tty: bool, debug: bool = False) -> None:
    if fmt == "json":
        json.dump(report.to_dict(), stream, indent=2, sort_keys=False)
        stream.write("\n")
    elif fmt == "markdown":
        stream.write(markdown(report))
    elif fmt == "html":
        from .htmlreport import render_html

        stream.write(render_html(report))
    elif fmt == "prometheus":
        from .prometheus import render_prometheus

        stream.write(render_prometheus(report))
    elif tty:
        _rich_text(report, stream, debug)
    else:
        stream.write(plain_text(report, debug))


def _summary_line(report: Report) -> str:
    parts = [
        f"{report.count(Severity.ERROR)} error(s)",
        f"{report.count(Severity.WARNING)} warning(s)",
        f"{report.count(Severity.INFO)} info",
    ]
    if report.ignored:
        parts.append(f"{len(report.ignored)} ignored")
    checks = ", ".join(f"{n} {state}" for state, n in report.states().items() if n)
    return f"{'; '.join(parts)} — checks: {checks}"


def _result_notes(results: list[CheckResult], debug: bool) -> list[str]:
    lines = []
    for result in results:
        if result.state in (State.SKIPPED, State.TIMED_OUT, State.CRASHED):
            lines.append(f"{result.check}: {result.state.value} — {result.reason}")
            if debug and result.error:
                lines.extend("    " + line for line in result.error.rstrip().splitlines())
    return lines


def _footer(report: Report) -> list[str]:
    lines = []
    fixable = report.fixable()
    if fixable:
        lines.append(f"{len(fixable)} fixable: preview with `decode-doctor check --fix --dry-run`, apply with `--fix`.")
    if report.findings:
        lines.append(f"Details: decode-doctor explain {report.sorted_findings()[0].code}")
    lines.extend(f"could not load: {error}" for error in report.load_errors)
    return lines


def _finding_line(f: Finding) -> str:
    fix = " [fixable]" if f.fix else ""
    return f"{f.code:<9} {f.severity.value:<8} {f.check:<14} {f.message}{fix}"


def plain_text(report: Report, debug: bool = False) -> str:
    lines = [_finding_line(f) for f in report.sorted_findings()]
    if not report.findings:
        lines.append("No findings.")
    lines.extend(_result_notes(report.results, debug))
    for ignored in report.ignored:
        why = f" ({ignored.reason})" if ignored.reason else ""
        lines.append(f"ignored {ignored.finding.code} by {ignored.selector}{why}")
    lines.append(_summary_line(report))
    lines.extend(_footer(report))
    return "\n".join(lines) + "\n"


def _rich_text(report: Report, stream: TextIO, debug: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=stream, highlight=False)
    styles = {"error": "bold red", "warning": "yellow", "info": "cyan"}
    if report.findings:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        for column in ("Code", "Severity", "Check", "Finding", "Fix"):
            table.add_column(column, overflow="fold")
        for f in report.sorted_findings():
            table.add_row(f.code, f"[{styles[f.severity.value]}]{f.severity.value}[/]", f.check, f.message, "fixable" if f.fix else "")
        console.print(table)
    else:
        console.print("[green]No findings.[/]")
    for line in _result_notes(report.results, debug):
        console.print(line, markup=False)
    for ignored in report.ignored:
        why = f" ({ignored.reason})" if ignored.reason else ""
        console.print(f"ignored {ignored.finding.code} by {ignored.selector}{why}", markup=False, style="dim")
    console.print(_summary_line(report), markup=False, style="bold")
    for line in _footer(report):
        console.print(line, markup=False)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def markdown(report: Report) -> str:
    meta = report.meta
    out = [
        "# decode-doctor report",
        "",
        f"- host: `{meta.get('host', '?')}`, root: `{meta.get('root', '/')}`, started {meta.get('started', '?')}, decode-doctor {meta.get('version', '?')}",
        f"- {_summary_line(report)}",
        "",
        "## Findings",
        "",
    ]
    if report.findings:
        out += ["| Code | Severity | Check | Finding | Fix |", "|---|---|---|---|---|"]
        for f in report.sorted_findings():
            fix = _md_cell(f.fix.summary) if f.fix else ""
            out.append(f"| {f.code} | {f.severity.value} | {f.check} | {_md_cell(f.message)} | {fix} |")
        out.append("")
        for f in report.sorted_findings():
            out += [f"### {f.code}: {f.title}", "", f.message, ""]
            if f.evidence:
                out += ["```json", json.dumps(f.evidence, indent=2, default=str), "```", ""]
    else:
        out += ["No findings.", ""]
    out += ["## Checks", "", "| Check | State | Duration | Note |", "|---|---|---|---|"]
    for r in report.results:
        out.append(f"| {r.check} | {r.state.value} | {r.duration_s:.2f} s | {_md_cell(r.reason or '')} |")
    if report.ignored:
        out += ["", "## Ignored", ""]
        out += [f"- {i.finding.code} by `{i.selector}`" + (f": {i.reason}" if i.reason else "") for i in report.ignored]
    return "\n".join(out) + "\n"
