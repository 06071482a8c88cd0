"""The catalog of known engine failures (data/engine-failures.json) and its probes: a tiny random-weight
GGUF evaluated by the installed llama.cpp in a child process (llamaprobe.py), whose death by a signal is
the crash itself, named as such. A new known crash is a catalog row and, at most, a probe mode."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from decode_doctor.engine import EnvRow, Facts
from decode_doctor.engine.commands import signal_name
from decode_doctor.i18n import Said, _, said
from decode_doctor.models.randomgguf import Shape, write

PROBE_SHAPE = Shape(hidden=512, layers=2, ffn=1408, heads=8, kv_heads=8, vocab=256)  # 3.5 MB at Q4_0
PROBE_TIMEOUT_S = 60.0
LOG_TAIL = 2000


@dataclass(frozen=True)
class Probe:
    mode: str  # llamaprobe's: batched, batched-no-repack, one-token
    weight_type: str | None = None  # None: each of the failure's weight types


@dataclass(frozen=True)
class Workaround:
    id: str
    text: str
    probe: Probe | None  # None: cannot be verified on this host (named as reported, never suggested as verified)


@dataclass(frozen=True)
class KnownFailure:
    id: str
    engine: str
    title: str
    affects: str
    cpu_flags: tuple[str, ...]
    weight_types: tuple[str, ...]
    probe: Probe
    log_markers: tuple[str, ...]
    crash_markers: tuple[str, ...]
    workarounds: tuple[Workaround, ...]
    sources: tuple[str, ...]

    def marks_buffer(self, buffer: str) -> bool:
        """Whether llama.cpp's "<buffer> model buffer size" line is one of this failure's log markers."""
        return f"{buffer} model buffer size" in self.log_markers


def _probe(data: Any) -> Probe | None:
    return Probe(str(data["mode"]), data.get("weight_type")) if isinstance(data, dict) else None


@cache
def catalog() -> tuple[KnownFailure, ...]:
    data = json.loads(resources.files(__package__ or __name__).joinpath("data/engine-failures.json").read_text(encoding="utf-8"))
    found = []
    for row in data["failures"]:
        probe = _probe(row["probe"])
        assert probe is not None, row["id"]
        found.append(
            KnownFailure(
                id=row["id"],
                engine=row["engine"],
                title=row["title"],
                affects=row["affects"],
                cpu_flags=tuple(row["cpu_flags"]),
                weight_types=tuple(row["weight_types"]),
                probe=probe,
                log_markers=tuple(row["log_markers"]),
                crash_markers=tuple(row["crash_markers"]),
                workarounds=tuple(Workaround(w["id"], w["text"], _probe(w["probe"])) for w in row["workarounds"]),
                sources=tuple(row["sources"]),
            )
        )
    return tuple(found)


def matching_buffers(buffers: tuple[str, ...] | list[str]) -> KnownFailure | None:
    """The known failure whose log markers name one of the buffers llama.cpp loaded weights into."""
    return next((f for f in catalog() if any(f.marks_buffer(b) for b in buffers)), None)


@dataclass(frozen=True)
class ProbeResult:
    mode: str
    weight_type: str
    crashed: bool
    signal: str | None  # "SIGSEGV" when a signal ended it
    detail: str  # the child's error line, or its log's last line before the crash
    buffers: dict[str, float] = field(default_factory=dict)  # MiB llama.cpp loaded the weights into, by buffer
    ok: bool = False  # evaluated to the end

    def said(self) -> Said:
        if self.ok:
            return said("{mode} evaluation of {weight_type} weights: ok", mode=self.mode, weight_type=self.weight_type)
        how = self.signal or said("no result")
        return said("{mode} evaluation of {weight_type} weights: {how}", mode=self.mode, weight_type=self.weight_type, how=how)


def run_probe(model: Path, mode: str, weight_type: str, threads: int = 2, timeout_s: float = PROBE_TIMEOUT_S) -> ProbeResult:
    argv = [sys.executable, "-m", "decode_doctor.checks.enginefailures.llamaprobe", str(model), mode, str(threads)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return ProbeResult(mode, weight_type, False, None, said("no answer within {seconds:.0f} s", seconds=timeout_s))
    tail = (done.stderr or "")[-LOG_TAIL:].strip().splitlines()
    last = tail[-1] if tail else ""
    lines: list[dict[str, Any]] = []
    for text in (done.stdout or "").strip().splitlines()[-16:]:
        try:
            parsed = json.loads(text)
        except ValueError:
            continue
        if isinstance(parsed, dict):
            lines.append(parsed)
    data = lines[-1] if lines else {}
    reported: dict[str, Any] = next((line["buffers"] for line in reversed(lines) if isinstance(line.get("buffers"), dict)), {})
    buffers = {str(k): float(v) for k, v in reported.items() if isinstance(v, int | float)}
    if done.returncode == 0 and data.get("ok"):
        return ProbeResult(mode, weight_type, False, None, "", buffers, ok=True)
    name = signal_name(done.returncode)
    crashed = name is not None and done.returncode != 0
    return ProbeResult(mode, weight_type, crashed, name, str(data.get("error") or last)[:300], buffers)


def probe_model(folder: Path, weight_type: str) -> Path:
    path = folder / f"probe-{weight_type}.gguf"
    if not path.exists():
        write(path, PROBE_SHAPE, weight_type)
    return path


@dataclass(frozen=True)
class Outcome:
    """A known failure probed on this host: whether it crashed, and which workarounds the same probe verified."""

    failure: KnownFailure
    results: tuple[ProbeResult, ...]
    verified: tuple[Workaround, ...]
    refuted: tuple[Workaround, ...]  # probed here and crashed too: not suggested

    @property
    def crashed(self) -> tuple[ProbeResult, ...]:
        return tuple(r for r in self.results if r.crashed)


def probe(failure: KnownFailure, threads: int = 2) -> Outcome:
    """The failure's probe for each weight type it affects; on a crash, each workaround's probe."""
    with tempfile.TemporaryDirectory(prefix="dd-probe-") as scratch:
        folder = Path(scratch)
        results = tuple(run_probe(probe_model(folder, kind), failure.probe.mode, kind, threads) for kind in failure.weight_types)
        crashed = [r for r in results if r.crashed]
        verified: list[Workaround] = []
        refuted: list[Workaround] = []
        if crashed:
            for workaround in failure.workarounds:
                if workaround.probe is None:
                    continue
                kinds = [workaround.probe.weight_type] if workaround.probe.weight_type else [r.weight_type for r in crashed]
                tried = [run_probe(probe_model(folder, kind), workaround.probe.mode, kind, threads) for kind in kinds]
                (verified if all(t.ok for t in tried) else refuted).append(workaround)
    return Outcome(failure, results, tuple(verified), tuple(refuted))


@dataclass(frozen=True)
class EngineFailureFacts(Facts):
    """What the known-failure probes found on this host."""

    engine: str | None = None  # "llama-cpp-python 0.3.36"
    probed: list[dict[str, Any]] = field(default_factory=list)  # failure id, results, verified workarounds

    def summary(self) -> list[str]:
        lines = []
        for entry in self.probed:
            results = "; ".join(str(r) for r in entry.get("results", []))
            lines.append(_("{failure}: {results}", failure=entry.get("id"), results=results))
        return lines

    def environment(self) -> list[EnvRow]:
        return [EnvRow(_("inference engine"), self.engine)] if self.engine else []
