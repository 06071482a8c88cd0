"""`decode-doctor analyze FILE…`: the findings a live check would give, from texts a customer sent
(nvidia-smi output and errors, kernel logs…). Every check that reads such a text says what it found;
each finding cites the file and line. Files are read like every other input: regular files only,
size-limited, never followed into FIFOs or devices."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import Any

import click

from ..engine.findings import FAIL_ON_LEVELS
from ..reports.render import FORMATS
from .common import CONTEXT, guarded, write_report

MAX_INPUT = 16 << 20


@click.command(context_settings=CONTEXT)
@click.argument("files", nargs=-1, required=True, metavar="FILE…")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the report to this file.")
@click.option("--fail-on", type=click.Choice(FAIL_ON_LEVELS), default="error", show_default=True)
@click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
def analyze(files: tuple[str, ...], fmt: str, output: Path | None, fail_on: str, debug: bool) -> None:
    """Judge pasted texts: nvidia-smi output and errors, dmesg or journal excerpts, collect_env,
    amd-smi/rocm-smi/Jetson/RKNPU output, docker pull errors. Use - for standard input. The kind of
    text is recognised by its content."""
    guarded(debug, lambda: _analyze(files, fmt, output, fail_on))


def _read(name: str) -> str:
    from ..engine.files import open_regular

    if name == "-":
        data = sys.stdin.buffer.read(MAX_INPUT + 1)
    else:
        with open_regular(name) as handle:
            data = handle.read(MAX_INPUT + 1)
    if len(data) > MAX_INPUT:
        raise click.UsageError(f"{name}: larger than {MAX_INPUT >> 20} MiB; paste the relevant part")
    return data.decode("utf-8", errors="replace")


def _analyze(files: tuple[str, ...], fmt: str, output: Path | None, fail_on: str) -> int:
    from ..engine.findings import CheckResult, State
    from ..engine.registry import load
    from ..reports.redact import Redactor
    from ..reports.report import Report
    from ..reports.view import build_view

    registry = load()
    results: list[CheckResult] = []
    recognised: dict[str, list[str]] = {}
    for name in files:
        text = _read(name)
        source = "stdin" if name == "-" else Path(name).name
        for cls in registry.checks.values():
            analysis = cls.analyze(text, source)
            if analysis is None:
                continue
            recognised.setdefault(name, []).append(f"{cls.name}: {analysis.kind}")
            findings = [registry.resolve(f) for f in analysis.findings]
            state = State.FINDINGS if findings else State.PASSED
            results.append(CheckResult(f"{cls.name} ({source})", state, 0.0, findings, reason=analysis.kind, facts=analysis.facts))
    unknown = [name for name in files if name not in recognised]
    if unknown:
        known = "; ".join(f"{cls.name}: {cls.reads}" for cls in registry.checks.values() if cls.reads)
        raise click.UsageError(f"{', '.join(unknown)}: no check reads this kind of text (read: {known})")
    meta: dict[str, Any] = {
        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": "analyze: " + ", ".join("stdin" if n == "-" else Path(n).name for n in files),
        "root": "-",
        "argv": ["analyze", *files],
    }
    report = Report(results, [f for r in results for f in r.findings], [], meta, fail_on)
    codes = {code: spec for code, (spec, _) in registry.codes().items()}
    view = build_view(report, redactor=Redactor(enabled=fmt != "text"), codes=codes)
    write_report(view, fmt, output, verbose=True)
    return report.exit_code
