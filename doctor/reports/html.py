"""One self-contained HTML file: no scripts, no fonts, no network; charts are inline SVG drawn from
the data the features' facts give (engine.facts.Chart)."""

from __future__ import annotations

import html
import math
from typing import Any

from ..engine.facts import Chart, HtmlBlock
from ..engine.findings import Finding, Severity
from ..i18n import _, current, explanation, localized, typography
from .text import all_clear
from .view import ReportView

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,
"PingFang SC","Hiragino Sans GB","Microsoft YaHei","Noto Sans CJK SC","Source Han Sans SC","WenQuanYi Micro Hei",sans-serif;
margin:2rem auto;padding:0 1rem;max-width:1200px;
color:#1d1d1f;background:#fff}
h1{font-size:1.5rem;margin:0 0 .3rem}h2{font-size:1.15rem;margin:2rem 0 .6rem}
table{border-collapse:collapse;width:100%;margin:.4rem 0;table-layout:fixed}
th,td{border-bottom:1px solid #ddd;padding:.35rem .5rem;text-align:left;vertical-align:top;overflow-wrap:anywhere}
table.findings col.code{width:6rem}table.findings col.sev{width:5.5rem}table.findings col.check{width:8rem}table.findings col.fix{width:28%}
details summary{cursor:pointer}details ul{margin:.3rem 0 0;padding-left:1.2rem}svg{max-width:100%;height:auto}
th{background:#f5f5f7}.error{color:#b00020;font-weight:600}.warning{color:#9a6700;font-weight:600}.info{color:#0b57d0}
.summary{padding:.6rem .8rem;background:#f5f5f7;border-radius:6px}.muted{color:#6e6e73}code{font-size:.92em}
svg text{font:12px system-ui,sans-serif;fill:#1d1d1f}
"""
COLORS = ("#0b57d0", "#b00020", "#188038", "#9a6700", "#7b1fa2")


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def nice_ticks(top: float, most: int = 5) -> list[float]:
    """Axis ticks from 0 at a round step (1, 2, 2.5 or 5 × 10^k) whose last tick covers `top`."""
    if not top > 0 or not math.isfinite(top):
        return [0.0, 1.0]
    raw = top / (most - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    count = math.ceil(top / step - 1e-9)
    return [round(i * step, 12) for i in range(count + 1)]


def _tick(value: float, step: float) -> str:
    if value == 0:
        return "0"
    written = f"{step:.12f}".rstrip("0")  # the step's own decimals: 0.25 → 2, 2.5 → 1, 500 → 0
    decimals = len(written.split(".", 1)[1])
    return f"{value:,.{decimals}f}"


def _x_tick(value: float) -> str:
    return f"{value / 1024:g}k" if value >= 1024 else f"{value:g}"


LEGEND_ROW = 18  # px per legend line, below the axis label: the legend never covers the data


def _legend_width(label: str) -> int:
    return 30 + 7 * len(label)  # a 20 px swatch, a gap, about 7 px a character


def _legend_rows(labels: list[str], width: int) -> list[list[int]]:
    """Series indexes per legend line, laid out left to right at about 7 px a character."""
    rows: list[list[int]] = [[]]
    used = 0
    for index, label in enumerate(labels):
        size = _legend_width(label)
        if rows[-1] and used + size > width:
            rows.append([])
            used = 0
        rows[-1].append(index)
        used += size
    return rows


def svg_chart(chart: Chart, width: int = 720, height: int = 320) -> str:
    series = [s for s in chart.series if s.points]
    if not series:
        return ""
    left, right, top, bottom = 64, 20, 16, 44
    legend = _legend_rows([s.label for s in series], width - left - right)
    plot_height = height
    height += LEGEND_ROW * len(legend) + 6
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points]
    scale = math.log2 if chart.log_x else (lambda v: v)
    x0, x1 = scale(min(xs)), scale(max(xs))
    span = (x1 - x0) or 1
    ticks = nice_ticks(max(ys))
    y1 = ticks[-1]

    def px(x: float) -> float:
        return left + (scale(x) - x0) / span * (width - left - right)

    def py(y: float) -> float:
        return top + (1 - y / y1) * (plot_height - top - bottom)

    base = py(0)
    label = _("{y} against {x}", y=chart.y_label, x=chart.x_label)
    parts = [f'<svg width="{width}" height="{height}" role="img" aria-label="{_e(label)}">']
    parts.append(f'<line x1="{left}" y1="{base:.1f}" x2="{width - right}" y2="{base:.1f}" stroke="#888"/>')
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{base:.1f}" stroke="#888"/>')
    for x in sorted(set(xs)):
        parts.append(f'<text x="{px(x):.1f}" y="{plot_height - bottom + 16}" text-anchor="middle">{_x_tick(x)}</text>')
    step = ticks[1] - ticks[0]
    for value in ticks:
        parts.append(f'<text x="{left - 6}" y="{py(value) + 4:.1f}" text-anchor="end">{_tick(value, step)}</text>')
        parts.append(f'<line x1="{left}" y1="{py(value):.1f}" x2="{width - right}" y2="{py(value):.1f}" stroke="#eee"/>')
    middle = (top + plot_height - bottom) / 2
    parts.append(f'<text x="{(left + width) / 2}" y="{plot_height - 6}" text-anchor="middle">{_e(chart.x_label)}</text>')
    parts.append(f'<text x="14" y="{middle}" transform="rotate(-90 14 {middle})" text-anchor="middle">{_e(chart.y_label)}</text>')
    for i, item in enumerate(series):
        color = COLORS[i % len(COLORS)]
        path = " ".join(f"{'M' if j == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for j, (x, y) in enumerate(item.points))
        parts.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
    for row, indexes in enumerate(legend):
        y = plot_height + LEGEND_ROW * row + 12
        x = float(left)
        for i in indexes:
            color = COLORS[i % len(COLORS)]
            parts.append(f'<line x1="{x:.0f}" y1="{y - 4}" x2="{x + 20:.0f}" y2="{y - 4}" stroke="{color}" stroke-width="2"/>')
            parts.append(f'<text x="{x + 26:.0f}" y="{y}" class="legend" style="fill:{color}">{_e(series[i].label)}</text>')
            x += _legend_width(series[i].label)
    parts.append("</svg>")
    return "".join(parts)


def _block(block: HtmlBlock) -> str:
    out = [f"<h2>{_e(block.title)}</h2>"]
    if block.rows:
        out.append("<table><tbody>")
        out.extend(f"<tr><th>{_e(a)}</th><td>{_e(b)}</td></tr>" for a, b in block.rows)
        out.append("</tbody></table>")
    if block.chart is not None:
        out.append(svg_chart(block.chart))
    return "".join(out)


FOLDED_LIMIT = 500  # findings listed inside one folded group; the JSON report holds all


def _finding_cell(findings: list[Finding]) -> str:
    if len(findings) == 1:
        return _e(findings[0].message)
    items = "".join(f"<li>{_e(f.message)}</li>" for f in findings[:FOLDED_LIMIT])
    if len(findings) > FOLDED_LIMIT:
        items += "<li>" + _e(_("… and {count:,} more (report.json lists them)", count=len(findings) - FOLDED_LIMIT)) + "</li>"
    title = explanation(findings[0].code, "title", findings[0].title)
    summary = _e(_("{count:,} findings: {title}", count=len(findings), title=title))
    return f"<details><summary>{summary}</summary><ul>{items}</ul></details>"


def render_html(view: ReportView) -> str:
    meta = view.meta
    out = [
        "<!DOCTYPE html>",
        f'<html lang="{current()}"><head><meta charset="utf-8">',
        "<title>" + _e(_("decode-doctor report: {host}", host=meta.get("host", ""))) + "</title>",
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">",
        f"<style>{STYLE}</style></head><body>",
        "<h1>" + _e(_("decode-doctor report")) + "</h1>",
        '<p class="muted">'
        + _e(_("host"))
        + f" <code>{_e(meta.get('host'))}</code> · "
        + _e(_("root"))
        + f" <code>{_e(meta.get('root'))}</code> · "
        f"{_e(meta.get('started'))} · decode-doctor {_e(meta.get('version'))}</p>",
    ]
    counts = {s.value: view.count(s) for s in Severity}
    clear = all_clear(view)
    exit_code = view.command_exit_code()
    out.append(
        '<p class="summary"><span class="error">'
        + _e(_("{count} error(s)", count=counts["error"]))
        + '</span> · <span class="warning">'
        + _e(_("{count} warning(s)", count=counts["warning"]))
        + '</span> · <span class="info">'
        + _e(_("{count} info", count=counts["info"]))
        + "</span> · "
        + _e(_("{count} ignored", count=len(view.ignored)))
        + (" · " + _e(_("exit code {code}", code=exit_code)) if exit_code is not None else "")
        + (" · " + _e(clear) if clear else "")
        + "</p>"
    )
    out.extend('<p class="crashed">' + _e(_("could not load: {error}", error=localized(error))) + "</p>" for error in view.load_errors)
    out.append("<h2>" + _e(_("Findings")) + "</h2>")
    if view.findings:
        out.append(
            '<table class="findings"><colgroup><col class="code"><col class="sev"><col class="check"><col><col class="fix">'
            "</colgroup><thead><tr>"
            + "".join(f"<th>{_e(h)}</th>" for h in (_("Code"), _("Severity"), _("Check"), _("Finding"), _("Fix")))
            + "</tr></thead><tbody>"
        )
        for group in view.groups():
            f = group.first
            fix = _e(f.fix.summary) if f.fix else _e(view.explanations.get(f.code, ""))
            out.append(
                f'<tr><td><code>{_e(f.code)}</code></td><td class="{f.severity.value}">{_e(f.severity.label)}</td>'
                f"<td>{_e(f.check)}</td><td>{_finding_cell(group.findings)}</td><td>{fix}</td></tr>"
            )
        out.append("</tbody></table>")
    else:
        out.append("<p>" + _e(_("No findings.")) + "</p>")
    if view.unjudged():
        out.append(
            "<h2>"
            + _e(_("Not judged"))
            + '</h2><p class="muted">'
            + _e(_("What the checks were given and could not judge: no verdict on it."))
            + "</p><ul>"
        )
        out.extend(f"<li>{_e(check)}: {_e(item.what)} — {_e(item.why)}</li>" for check, item in view.unjudged()[:500])
        out.append("</ul>")
    if view.accepted_gaps():
        out.append("<h2>" + _e(_("Accepted by rule")) + "</h2><ul>")
        out.extend(f"<li>{_e(check)}: {_e(item.what)} — {_e(item.why)}</li>" for check, item in view.accepted_gaps())
        out.append("</ul>")
    out.extend(_block(block) for block in view.html_blocks)
    if view.environment:
        heads = "".join(f"<th>{_e(h)}</th>" for h in (_("Item"), _("Value"), _("Judged")))
        out.append("<h2>" + _e(_("Environment")) + f"</h2><table><thead><tr>{heads}</tr></thead><tbody>")
        for row in view.environment:
            css = "" if row.judged == "ok" else ' class="warning"'
            out.append(f"<tr><td>{_e(row.name)}</td><td>{_e(row.value)}</td><td{css}>{_e(row.judged_shown)}</td></tr>")
        out.append("</tbody></table>")
    heads = "".join(f"<th>{_e(h)}</th>" for h in (_("Check"), _("State"), _("Duration"), _("Note")))
    out.append("<h2>" + _e(_("Checks")) + f"</h2><table><thead><tr>{heads}</tr></thead><tbody>")
    for r in view.results:
        state = _e(r.outcome.label)
        out.append(f"<tr><td>{_e(r.check)}</td><td>{state}</td><td>{r.duration_s:.2f} s</td><td>{_e(r.reason or '')}</td></tr>")
    out.append("</tbody></table></body></html>")
    return typography.normalize_html("\n".join(out) + "\n")
