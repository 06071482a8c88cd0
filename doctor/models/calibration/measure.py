"""Measuring this host's calibration: random-weight GGUFs decoded by llama.cpp in child processes
(llamatimer.py), in passes, through a crash of the batched prompt (see the package's docstring)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decode_doctor.engine.statefile import host_id
from decode_doctor.i18n import _, said

from ..llamacpp import engine_version
from ..randomgguf import WEIGHT_TYPES, Shape, shape_for, write
from .model import ENGINE, MIN_SPREAD, Calibration, attention_units
from .records import load, record, with_drift

SMALL = Shape(hidden=512, layers=4, ffn=1408, heads=8, kv_heads=8, vocab=8000)
LARGE = Shape(hidden=1024, layers=12, ffn=2816, heads=16, kv_heads=4, vocab=32000)
DEPTH = 2048  # the small models' second run: attention over this many cached tokens
TOKENS = 48  # timed steps per run
RUN_TIMEOUT_S = 300.0
PASSES_MIN, PASSES_MAX = 2, 3
AGREE = 0.05  # two passes whose every run lies within 5 % of each other end the calibration
XL_FROM = 2.0  # a third point for a model more than twice the larger calibration model's bytes
XL_MAX_BYTES = 1.5e9  # … of the model's size, up to this (writing it takes a while; the line is straight out there)
PROMPTS = ("batched", "one-token")
PLAIN_BUFFERS = ("CPU", "CPU_Mapped")  # llama.cpp's buffers of weights as the file holds them; others are repacked copies


class CalibrationError(RuntimeError):
    """The calibration could not run (no engine, a crash, a timeout); the message says why."""


class EngineCrash(CalibrationError):
    """llama.cpp died by a signal: which, in what phase of which run, and what its weights were loaded into."""

    def __init__(self, signal: str, file: str, phase: str, depth: int, buffers: tuple[str, ...]) -> None:
        self.signal, self.file, self.phase, self.depth, self.buffers = signal, file, phase, depth, buffers
        super().__init__(self.describe())

    @property
    def in_batched_prompt(self) -> bool:
        return self.phase == "prompt" and self.depth > 0

    def describe(self) -> str:
        if self.in_batched_prompt:
            where = said("evaluating the {tokens:,}-token prompt of {file} in one batch", tokens=self.depth + 1, file=self.file)
        elif self.phase == "steps":
            where = said("in a decode step of {file}", file=self.file)
        else:
            where = said("loading {file}", file=self.file)
        repacked = [name for name in self.buffers if name not in PLAIN_BUFFERS]
        kernel = ""
        if repacked:
            kernel = said(
                " with its weights repacked into {buffers} buffers (known engine crashes on this CPU: decode-doctor check "
                "--select engine-failures)",
                buffers=", ".join(repacked),
            )
        return said("llama.cpp crashed ({signal}) {where}{kernel}", signal=self.signal, where=where, kernel=kernel)


@dataclass(frozen=True)
class Run:
    """One timed decode: median seconds per step, the steps' relative scatter, and the host's load."""

    seconds: float
    scatter: float
    foreign_cores: float
    steal: float


def _json_lines(text: str) -> list[dict[str, Any]]:
    found = []
    for line in text.splitlines()[-64:]:
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def time_decode(
    model: Path, threads: int, depth: int, tokens: int = TOKENS, timeout_s: float = RUN_TIMEOUT_S, prompt: str = "batched"
) -> Run:
    """llama.cpp's decode of model at depth, timed in a child process (llamatimer.py); EngineCrash when
    a signal ended it, CalibrationError for any other failure."""
    from decode_doctor.engine.commands import signal_name

    argv = [sys.executable, "-m", "decode_doctor.models.llamatimer", str(model), str(threads), str(depth), str(tokens), prompt]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise CalibrationError(
            _("llama.cpp did not finish decoding {file} within {timeout_s:.0f} s", file=model.name, timeout_s=timeout_s)
        ) from exc
    lines = _json_lines(done.stdout or "")
    phases = [line for line in lines if "phase" in line]
    signal = signal_name(done.returncode) if done.returncode else None
    if signal is not None:
        loaded: dict[str, Any] = next((line["buffers"] for line in phases if isinstance(line.get("buffers"), dict)), {})
        phase = str(phases[-1]["phase"]) if phases else "load"
        raise EngineCrash(signal, model.name, phase, depth, tuple(str(name) for name in loaded))
    result = next((line for line in reversed(lines) if "times" in line), None)
    if done.returncode != 0 or result is None:
        tail = (done.stderr or "").strip().splitlines()[-1:] or [_("exit status {code}", code=done.returncode)]
        raise CalibrationError(_("llama.cpp failed decoding {file}: {tail}", file=model.name, tail=tail[0][:200]))
    try:
        times = [float(t) for t in result["times"]]
        foreign, steal = float(result.get("foreign_cores", 0.0)), float(result.get("steal", 0.0))
    except (ValueError, KeyError, TypeError) as exc:
        raise CalibrationError(_("llama.cpp's timer printed no timings for {file}", file=model.name)) from exc
    if not times:
        raise CalibrationError(_("llama.cpp's timer printed no timings for {file}", file=model.name))
    median = statistics.median(times)
    quartiles = statistics.quantiles(times, n=4) if len(times) >= 4 else [median, median, median]
    scatter = (quartiles[2] - quartiles[0]) / (2 * median) if median else 0.0
    return Run(median, scatter, foreign, steal)


def features(path: Path, depth: int) -> tuple[float, float, float]:
    """(weight bytes read per step, attention units, cache bytes) of a GGUF at depth, as estimate sizes them."""
    from decode_doctor.models.modelfiles import read_model
    from decode_doctor.models.sizing import sizing

    size = sizing(read_model(path))
    weights = size.read_bytes(1)
    if weights is None:
        raise CalibrationError(_("{file}: cannot size its weights", file=path.name))
    return weights, attention_units(size.cache, size.heads, size.head_dim, depth), size.kv_bytes(depth, "fp16")


@dataclass
class _Passes:
    """The runs of one calibration, pass by pass, and the prompt path that does not crash."""

    threads: int
    say: Callable[[str], None]
    prompt: str = "batched"
    crash: str = ""
    runs: dict[tuple[str, int], list[Run]] = field(default_factory=dict)

    def run(self, name: str, path: Path, depth: int) -> None:
        try:
            run = time_decode(path, self.threads, depth, prompt=self.prompt if depth else "batched")
        except EngineCrash as crash:
            if not crash.in_batched_prompt or self.prompt != "batched":
                raise
            self.prompt, self.crash = "one-token", crash.describe()
            self.say(
                _(
                    "{crash}; calibrating with the prompt fed one token at a time, as decode steps (llama.cpp's batched "
                    "prompt path crashes on this host: decode-doctor check --select engine-failures)",
                    crash=self.crash,
                )
            )
            run = time_decode(path, self.threads, depth, prompt=self.prompt)
        self.runs.setdefault((name, depth), []).append(run)

    def agree(self) -> bool:
        """Every run's last two passes within AGREE of each other."""
        return all(abs(runs[-1].seconds / runs[-2].seconds - 1) <= AGREE for runs in self.runs.values() if len(runs) >= 2)

    def seconds(self, name: str, depth: int) -> float:
        return statistics.median(run.seconds for run in self.runs[(name, depth)])

    def spread(self, name: str, depth: int) -> float:
        """Half the range of a run's passes over their median."""
        return _half_range([run.seconds for run in self.runs[(name, depth)]])

    def depth_spread(self, name: str, depth: int) -> float:
        """Half the range of the passes' slowdowns at depth (each pass's run at depth less its run at 0)."""
        deltas = [d.seconds - z.seconds for d, z in zip(self.runs[(name, depth)], self.runs[(name, 0)], strict=False)]
        return _half_range(deltas)

    @property
    def repeatability(self) -> float:
        return max((_half_range([r.seconds for r in runs]) for runs in self.runs.values()), default=0.0)

    @property
    def everything(self) -> list[Run]:
        return [run for runs in self.runs.values() for run in runs]


def calibrate(
    threads: int,
    weight_type: str,
    state_dir: Path,
    say: Callable[[str], None] = lambda _: None,
    scratch: Path | None = None,
    target_bytes: float | None = None,
) -> Calibration:
    """Measures this host's constants for llama.cpp at threads and weight_type (with a third point
    near target_bytes, a model's weight bytes, when it is much larger than the calibration's own
    models), records them, and returns them."""
    from decode_doctor.engine.workers import usable_cpus

    if weight_type not in WEIGHT_TYPES:
        raise CalibrationError(
            _(
                "no calibration for {weight_type} weights (it writes {types})",
                weight_type=weight_type,
                types=", ".join(WEIGHT_TYPES),
            )
        )
    engine = engine_version()
    if engine is None:
        raise CalibrationError(_("llama-cpp-python is not installed (pip install 'decode-doctor[calibrate]')"))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dd-calibrate-", dir=scratch) as folder:
        paths = {name: Path(folder) / f"{name}-{weight_type}.gguf" for name in ("small", "large", "xl")}
        say(
            _(
                "calibrating {name} {engine} at {threads} thread(s) for {weight_type} weights: writing its random-weight models…",
                name=ENGINE,
                engine=engine,
                threads=threads,
                weight_type=weight_type,
            )
        )
        write(paths["small"], SMALL, weight_type)
        write(paths["large"], LARGE, weight_type)
        w_small, _units, _kv = features(paths["small"], 0)
        w_large, _units, _kv = features(paths["large"], 0)
        sizes = [("small", w_small), ("large", w_large)]
        if target_bytes and target_bytes > XL_FROM * w_large:
            xl_bytes = min(target_bytes, XL_MAX_BYTES)
            say(_("calibrating: writing a third model of {gb:.2f} GB, near the model's size…", gb=xl_bytes / 1e9))
            write(paths["xl"], shape_for(xl_bytes / 1e9, weight_type), weight_type)
            sizes.append(("xl", features(paths["xl"], 0)[0]))
        plan = [(name, 0) for name, _bytes in sizes] + [("small", DEPTH), ("large", DEPTH)]
        passes = _Passes(threads, say)
        for number in range(1, PASSES_MAX + 1):
            say(
                _(
                    "calibrating: pass {number} (of {least} to {most}): {runs} decodes, at depth 0 and {depth:,}…",
                    number=number,
                    least=PASSES_MIN,
                    most=PASSES_MAX,
                    runs=len(plan),
                    depth=DEPTH,
                )
            )
            for name, depth in plan:
                passes.run(name, paths[name], depth)
            if number >= PASSES_MIN and passes.agree():
                break
        _weights, u_small, k_small = features(paths["small"], DEPTH)
        _weights, u_large, k_large = features(paths["large"], DEPTH)
    points = _line([(weight_bytes, passes.seconds(name, 0), passes.spread(name, 0)) for name, weight_bytes in sizes])
    (w0, t0, _h0), (w1, t1, _h1) = points[0], points[1]
    fixed = max(0.0, t0 - w0 * (t1 - t0) / (w1 - w0))
    (wa, ta, _ha), (wb, tb, _hb) = points[-2], points[-1]
    s_per_unit, s_per_kv_byte = _attention(
        passes.seconds("small", DEPTH) - passes.seconds("small", 0), u_small, k_small,
        passes.seconds("large", DEPTH) - passes.seconds("large", 0), u_large, k_large,
    )  # fmt: skip
    runs = passes.everything
    cpus = usable_cpus()
    foreign, steal = max(run.foreign_cores for run in runs), max(run.steal for run in runs)
    scatter = max(run.scatter for run in runs)
    widened = steal + min(1.0, foreign / max(1, cpus))
    result = Calibration(
        host=host_id(),
        engine=ENGINE,
        engine_version=engine,
        threads=threads,
        weight_type=weight_type,
        fixed_s=fixed,
        s_per_byte=(tb - ta) / (wb - wa),
        s_per_unit=s_per_unit,
        s_per_kv_byte=s_per_kv_byte,
        spread=max(MIN_SPREAD, passes.repeatability) + widened,
        measured_at=time.time(),
        foreign_cores=foreign,
        steal=steal,
        points=tuple(points),
        depth_spread=max(passes.depth_spread("small", DEPTH), passes.depth_spread("large", DEPTH)),
        scatter=scatter,
        repeatability=passes.repeatability,
        widened=widened,
        passes=len(runs) // len(plan),
        cpus=cpus,
        prompt=passes.prompt,
        crash=passes.crash,
    )
    result = with_drift(result, load(state_dir))
    record(state_dir, result)
    say(_("calibrated in {seconds:.0f} s: {calibration}", seconds=time.perf_counter() - started, calibration=result.describe().text()))
    return result


def _half_range(values: list[float]) -> float:
    """Half the range of values over their median's size (0 for fewer than two)."""
    if len(values) < 2:
        return 0.0
    middle = abs(statistics.median(values))
    return (max(values) - min(values)) / 2 / middle if middle else 0.0


def _line(points: list[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
    """The measured points by size, each slower than the one before (a point that is not, noise beside
    a larger model, is dropped); at least two, or the host is too noisy to calibrate."""
    kept: list[tuple[float, float, float]] = []
    for point in sorted(points):
        if not kept or (point[1] > kept[-1][1] and point[0] > kept[-1][0]):
            kept.append(point)
    if len(kept) < 2:
        raise CalibrationError(_("the larger model decoded no slower than the smaller: the host is too noisy to calibrate"))
    return kept


def _attention(delta_a: float, units_a: float, bytes_a: float, delta_b: float, units_b: float, bytes_b: float) -> tuple[float, float]:
    """Seconds per query unit and per cache byte from two models' slowdowns at depth (two equations);
    when noise makes either negative, one coefficient (per cache byte) fitted to both instead."""
    determinant = units_a * bytes_b - units_b * bytes_a
    if determinant:
        per_unit = (delta_a * bytes_b - delta_b * bytes_a) / determinant
        per_byte = (units_a * delta_b - units_b * delta_a) / determinant
        if per_unit >= 0 and per_byte >= 0:
            return per_unit, per_byte
    total_bytes = bytes_a + bytes_b
    return 0.0, max(0.0, (delta_a + delta_b) / total_bytes) if total_bytes else 0.0
