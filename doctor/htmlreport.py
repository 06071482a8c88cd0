"""One self-contained HTML file: no scripts, no fonts, no network; the chart is inline SVG."""

from __future__ import annotations

import html
import math
from typing import Any

from .report import Report

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem;color:#1d1d1f;background:#fff}
h1{font-size:1.5rem;margin:0 0 .3rem}h2{font-size:1.15rem;margin:2rem 0 .6rem}
table{border-collapse:collapse;width:100%;margin:.4rem 0}th,td{border-bottom:1px solid #ddd;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#f5f5f7}.error{color:#b00020;font-weight:600}.warning{color:#9a6700;font-weight:600}.info{color:#0b57d0}
.summary{padding:.6rem .8rem;background:#f5f5f7;border-radius:6px}.muted{color:#6e6e73}code{font-size:.92em}
svg text{font:12px system-ui,sans-serif;fill:#1d1d1f}
"""
COLORS = ("#0b57d0", "#b00020", "#188038", "#9a6700", "#7b1fa2")


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def ceiling_chart(report: Report, width: int = 720, height: int = 320) -> str:
    """Decode tokens/s ceiling per sequence against context length, one line per model and device."""
    series = []
    for finding in report.findings:
        if finding.code != "DEC001":
            continue
        model = finding.evidence.get("model", {}).get("path", "model").rstrip("/").rsplit("/", 1)[-1]
        for device, budget in finding.evidence.get("budgets", {}).items():
            points = [(row["context"], row["tps_per_sequence"]) for row in budget.get("sweep", []) if row.get("tps_per_sequence")]
            if points:
                series.append((f"{model} on {device}", points))
    if not series:
        return ""
    left, right, top, bottom = 64, 20, 16, 44
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    x0, x1 = math.log2(min(xs)), math.log2(max(xs)) or 1
    y1 = max(ys) * 1.1
    span = (x1 - x0) or 1

    def px(x: float) -> float:
        return left + (math.log2(x) - x0) / span * (width - left - right)

    def py(y: float) -> float:
        return top + (1 - y / y1) * (height - top - bottom)

    parts = [f'<svg width="{width}" height="{height}" role="img" aria-label="decode ceiling against context">']
    parts.append(f'<line x1="{left}" y1="{py(0):.1f}" x2="{width - right}" y2="{py(0):.1f}" stroke="#888"/><line x1="{left}" y1="{top}" x2="{left}" y2="{py(0):.1f}" stroke="#888"/>')
    for x in sorted(set(xs)):
        parts.append(f'<text x="{px(x):.1f}" y="{height - bottom + 16}" text-anchor="middle">{x // 1024}k</text>' if x >= 1024 else f'<text x="{px(x):.1f}" y="{height - bottom + 16}" text-anchor="middle">{x}</text>')
    for i in range(5):
        value = y1 * i / 4
        parts.append(f'<text x="{left - 6}" y="{py(value) + 4:.1f}" text-anchor="end">{value:.0f}</text><line x1="{left}" y1="{py(value):.1f}" x2="{width - right}" y2="{py(value):.1f}" stroke="#eee"/>')
    parts.append(f'<text x="{(left + width) / 2}" y="{height - 6}" text-anchor="middle">context length (tokens)</text>')
    parts.append(f'<text x="14" y="{(top + height - bottom) / 2}" transform="rotate(-90 14 {(top + height - bottom) / 2})" text-anchor="middle">tokens/s per sequence</text>')
    for i, (label, points) in enumerate(series):
        color = COLORS[i % len(COLORS)]
        path = " ".join(f"{'M' if j == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for j, (x, y) in enumerate(points))
        parts.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        parts.append(f'<text x="{width - right - 4}" y="{top + 14 + 16 * i}" text-anchor="end" fill="{color}" style="fill:{color}">{_e(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(report: Report, environment: list[dict[str, str]] | None = None, explanations: dict[str, dict[str, str]] | None = None) -> str:
    meta = report.meta
    out = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>decode-doctor report: {_e(meta.get('host', ''))}</title>",
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; img-src data:">',
        f"<style>{STYLE}</style></head><body>",
        f"<h1>decode-doctor report</h1><p class=\"muted\">host <code>{_e(meta.get('host'))}</code> · root <code>{_e(meta.get('root'))}</code> · {_e(meta.get('started'))} · decode-doctor {_e(meta.get('version'))}</p>",
    ]
    counts = {s: sum(1 for f in report.findings if f.severity.value == s) for s in ("error", "warning", "info")}
    out.append(f'<p class="summary"><span class="error">{counts["error"]} error(s)</span> · <span class="warning">{counts["warning"]} warning(s)</span> · <span class="info">{counts["info"]} info</span> · {len(report.ignored)} ignored · exit code {report.exit_code}</p>')
    out.append("<h2>Findings</h2>")
    if report.findings:
        out.append("<table><thead><tr><th>Code</th><th>Severity</th><th>Check</th><th>Finding</th><th>Fix</th></tr></thead><tbody>")
        for f in report.sorted_findings():
            why = (explanations or {}).get(f.code, {}).get("fix_by_hand", "")
            fix = _e(f.fix.summary) if f.fix else _e(why)
            out.append(f'<tr><td><code>{_e(f.code)}</code></td><td class="{f.severity.value}">{f.severity.value}</td><td>{_e(f.check)}</td><td>{_e(f.message)}</td><td>{fix}</td></tr>')
        out.append("</tbody></table>")
    else:
        out.append("<p>No findings.</p>")
    chart = ceiling_chart(report)
    if chart:
        out.append("<h2>Decode ceiling against context</h2>" + chart)
    if environment:
        out.append("<h2>Environment</h2><table><thead><tr><th>Item</th><th>Value</th><th>Judged</th></tr></thead><tbody>")
        for row in environment:
            css = "" if row["judged"] == "ok" else ' class="warning"'
            out.append(f"<tr><td>{_e(row['name'])}</td><td>{_e(row['value'])}</td><td{css}>{_e(row['judged'])}</td></tr>")
        out.append("</tbody></table>")
    out.append("<h2>Checks</h2><table><thead><tr><th>Check</th><th>State</th><th>Duration</th><th>Note</th></tr></thead><tbody>")
    for r in report.results:
        out.append(f"<tr><td>{_e(r.check)}</td><td>{_e(r.state.value)}</td><td>{r.duration_s:.2f} s</td><td>{_e(r.reason or '')}</td></tr>")
    out.append("</tbody></table></body></html>")
    return "\n".join(out) + "\n"
