"""`analyze`: the findings a live check would give, from texts a customer sent (nvidia-smi output and
errors, kernel logs, collect_env…). Every check that reads such a text says what it found; each
finding cites the file and line. The texts are read like every other input (regular files only,
size-limited, never a FIFO or a device) and judged in a child with a deadline."""

from __future__ import annotations

import codecs
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..engine.files import open_regular
from ..engine.findings import CheckResult, State
from ..engine.registry import Registry, load
from ..i18n import _
from ..reports.report import Report
from ..reports.textsafe import shown, terminal_safe
from .deadline import within
from .requests import RequestError
from .service import run_meta

MAX_INPUT = 16 << 20
DEADLINE_S = 120.0


@dataclass(frozen=True)
class AnalyzeRequest:
    files: tuple[str, ...]  # paths, "-" for standard input
    fail_on: str = "error"
    timeout: float = DEADLINE_S
    incomplete_fails: bool = True


def read_input(name: str) -> str:
    if name == "-":
        data = sys.stdin.buffer.read(MAX_INPUT + 1)
    else:
        with open_regular(name) as handle:
            data = handle.read(MAX_INPUT + 1)
    if len(data) > MAX_INPUT:
        raise RequestError(_("{name}: larger than {mib} MiB; paste the relevant part", name=name, mib=MAX_INPUT >> 20))
    return decoded(data)


def decoded(data: bytes) -> str:
    """A pasted text as its bytes say: UTF-16 with a byte-order mark (PowerShell's `>` and Out-File
    write it), or UTF-16 without one when every other byte of its start is zero; else UTF-8 (a byte
    that is not, replaced)."""
    if data.startswith(codecs.BOM_UTF8):
        return data[3:].decode("utf-8", errors="replace")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", errors="replace")
    head = data[:512]
    if len(head) >= 8 and head[1::2].count(0) >= 0.9 * (len(head) // 2) and head[0::2].count(0) == 0:
        return data.decode("utf-16-le", errors="replace")
    if len(head) >= 8 and head[0::2].count(0) >= 0.9 * (len(head) // 2) and head[1::2].count(0) == 0:
        return data.decode("utf-16-be", errors="replace")
    return data.decode("utf-8", errors="replace")


def _source(name: str) -> str:
    """The file's name as every output shows it (the check's "serving (NAME)", the run's command): a
    control or bidirectional character in it is written \\x1b, \\u200f, never sent raw."""
    return "stdin" if name == "-" else terminal_safe(shown(Path(name).name))


def _judge(texts: list[tuple[str, str]]) -> list[tuple[str, CheckResult]]:
    """(file, result) for every check that reads one of the texts; runs in the deadline's child."""
    registry = load()
    found = []
    for name, text in texts:
        source = _source(name)
        for cls in registry.checks.values():
            analysis = cls.analyze(text, source)
            if analysis is None:
                continue
            findings = [registry.resolve(f) for f in analysis.findings]
            state = State.FINDINGS if findings else State.PASSED
            result = CheckResult(f"{cls.name} ({source})", state, 0.0, findings, reason=analysis.kind, facts=analysis.facts)
            result.not_judged = list(analysis.not_judged)
            found.append((name, result))
    return found


def analyze(request: AnalyzeRequest, registry: Registry | None = None) -> Report:
    registry = registry or load()
    started = time.time()
    texts = [(name, read_input(name)) for name in request.files]
    judged = within(request.timeout, _("reading the pasted texts"), _judge, texts)
    unknown = [name for name in request.files if name not in {name for name, _ in judged}]
    if unknown:
        known = _("; ").join(_("{check}: {reads}", check=cls.name, reads=_(cls.pasted)) for cls in registry.checks.values() if cls.pasted)
        raise RequestError(_("{files}: no check reads this kind of text (read: {known})", files=", ".join(unknown), known=known))
    results = [result for _, result in judged]
    meta = run_meta(started, "analyze: " + ", ".join(_source(name) for name in request.files), "-", ["analyze", *request.files])
    return Report(
        results,
        [f for r in results for f in r.findings],
        [],
        meta,
        request.fail_on,
        incomplete_fails=request.incomplete_fails,
        load_errors=list(registry.errors),
    )
