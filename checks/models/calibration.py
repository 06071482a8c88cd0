"""The decode step of llama.cpp on this CPU, calibrated: time per output token = fixed cost per step
+ weight bytes read × seconds per byte + attention: query work × seconds per unit + cached bytes
read × seconds per cache byte.

The ceiling (bytes ÷ bandwidth) is a bound no run beats; what a user gets is further from it for a
small model than a large one, because every step also pays a fixed cost (threads woken and joined,
graph built, the output sampled), and slower at depth than the cache's bytes alone say, because
attention computes over every cached token. The three constants differ by host, thread count,
kernel path (the weight type: llama.cpp repacks Q4_0 and Q8_0 for AVX-512 and AMX) and engine
version, so they are measured here: two random-weight GGUFs of the weight type (randomgguf.py)
decoded by llama-cpp-python at depth 0 and again at depth DEPTH, each in a child process
(llamatimer.py) with what the rest of the host did meanwhile. A run beside other work is kept,
flagged contended, and never reused. Kept per host, engine version, thread count and weight type in
the state directory, like the bandwidth figures.

Attention at depth d has two parts, told apart by the two models' different head layouts (the small
one gives every query head its own key head, the large one shares each among four): query work,
Σ over cached layers of min(d, window) × heads × head dim, and the cache's bytes at d.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from decode_doctor.checks.bandwidth.contract import CONTENDED_CORES, CONTENDED_STEAL
from decode_doctor.i18n import Said, _, said

from .architecture import CacheLayer

if TYPE_CHECKING:
    from .contract import DecodePrediction, LiveDecode
    from .plan import Sizing
from .bwcache import host_id
from .randomgguf import WEIGHT_TYPES, Shape, write
from .statefile import age_text, append_record, read_records

CACHE_NAME = "calibration.json"
ENGINE = "llama.cpp"
KEEP = 64
MAX_AGE_S = 30 * 24 * 3600  # a kernel path does not drift like a busy host; an engine upgrade is a new key
SMALL = Shape(hidden=512, layers=4, ffn=1408, heads=8, kv_heads=8, vocab=8000)
LARGE = Shape(hidden=1024, layers=12, ffn=2816, heads=16, kv_heads=4, vocab=32000)
DEPTH = 1024  # the larger model's second run: attention over this many cached tokens
TOKENS = 48  # timed steps per run
RUN_TIMEOUT_S = 120.0
MIN_SPREAD = 0.03  # the interval is never narrower than ±3 %: run-to-run drift on a quiet host


class CalibrationError(RuntimeError):
    """The calibration could not run (no engine, a crash, a timeout); the message says why."""


def engine_version() -> str | None:
    """llama-cpp-python's version, None when it is not installed (read without importing it)."""
    try:
        return version("llama_cpp_python")
    except PackageNotFoundError:
        return None


@dataclass(frozen=True)
class Calibration:
    host: str
    engine: str
    engine_version: str
    threads: int
    weight_type: str
    fixed_s: float  # per step, whatever the model
    s_per_byte: float  # per weight byte read
    s_per_unit: float  # per unit of attention query work (see the module's docstring)
    s_per_kv_byte: float  # per byte of the cache read at depth
    spread: float  # relative half-width of the interval: the steps' own scatter, at least MIN_SPREAD
    measured_at: float
    foreign_cores: float = 0.0  # the most other processes used over any run's window, in cores
    steal: float = 0.0
    source: str = "calibrate"  # or "bench" (a live run updated it)
    basis: str = ""  # for a "bench" record: the run it learned from and the calibration it scaled

    @property
    def contended(self) -> bool:
        return self.foreign_cores >= CONTENDED_CORES or self.steal >= CONTENDED_STEAL

    def age(self, now: float | None = None) -> float:
        return (now or time.time()) - self.measured_at

    def describe(self, now: float | None = None) -> Said:
        when = age_text(self.age(now))
        busy = said("; CONTENDED ({cores:.2f} cores of other work, {steal:.0%} stolen)", cores=self.foreign_cores, steal=self.steal)
        how = said("learned from a live bench") if self.source == "bench" else said("calibrated")
        return said(
            "{engine} {version}, {threads} thread(s), {weight_type}, {how} {when} (fixed {fixed_ms:.2f} ms per step, "
            "{gbps:.1f} GB/s effective on the weights){busy}",
            engine=self.engine,
            version=self.engine_version,
            threads=self.threads,
            weight_type=self.weight_type,
            how=how,
            when=when,
            fixed_ms=self.fixed_s * 1e3,
            gbps=1 / self.s_per_byte / 1e9,
            busy=busy if self.contended else "",
        )


@dataclass(frozen=True)
class Prediction:
    tpot_s: float
    low_s: float
    high_s: float
    depth: int
    bounded: bool = False  # raised to the ceiling's step time

    @property
    def tps(self) -> float:
        return 1 / self.tpot_s


def attention_units(cache: list[CacheLayer], heads: int | None, head_dim: int | None, depth: int) -> float:
    if not heads or not head_dim:
        return 0.0
    return float(sum(min(depth, layer.window or depth) for layer in cache) * heads * head_dim)


def predict(calibration: Calibration, weight_bytes: float, units: float, kv_bytes: float, depth: int) -> Prediction:
    c = calibration
    tpot = c.fixed_s + weight_bytes * c.s_per_byte + units * c.s_per_unit + kv_bytes * c.s_per_kv_byte
    return Prediction(tpot, tpot * (1 - calibration.spread), tpot * (1 + calibration.spread), depth)


def bounded(prediction: Prediction, ceiling_s: float) -> Prediction:
    """The prediction, never faster than the ceiling's step time (its interval moved with it)."""
    if prediction.tpot_s >= ceiling_s:
        return prediction
    scale = ceiling_s / prediction.tpot_s
    return replace(prediction, tpot_s=ceiling_s, low_s=prediction.low_s * scale, high_s=prediction.high_s * scale, bounded=True)


@dataclass(frozen=True)
class ForModel:
    """A model's prediction at a depth on this host, or why there is none."""

    calibration: Calibration | None
    prediction: Prediction | None
    ceiling_s: float
    why_not: str = ""


def for_model(
    size: Sizing, weight_type: str, threads: int, kv_dtype: str, depth: int, bandwidth_gbps: float | None, found: Calibration | None
) -> ForModel:
    """The prediction for a sized model at depth from a calibration (never faster than the ceiling)."""
    weights = size.read_bytes(1) or 0.0
    kv = size.kv_bytes(depth, kv_dtype)
    ceiling = (weights + kv) / (bandwidth_gbps * 1e9) if bandwidth_gbps else 0.0
    if found is None:
        return ForModel(None, None, ceiling, said("no calibration"))
    predicted = predict(found, weights, attention_units(size.cache, size.heads, size.head_dim, depth), kv, depth)
    return ForModel(found, bounded(predicted, ceiling), ceiling)


def lookup(state_dir: Path, weight_type: str, threads: int, in_estimate: bool = False) -> tuple[Calibration | None, str]:
    """This host's reusable calibration for weight_type at threads, or why there is none (in_estimate:
    said to a user of estimate, who calibrates with its --calibrate)."""
    engine = engine_version()
    if engine is None:
        return None, said("llama-cpp-python is not installed, so llama.cpp cannot be calibrated on this host")
    if weight_type not in WEIGHT_TYPES:
        calibrated = ", ".join(WEIGHT_TYPES)
        if weight_type:
            return None, said(
                "llama.cpp is calibrated for {types} weights; these are {weight_type}", types=calibrated, weight_type=weight_type
            )
        return None, said("llama.cpp is calibrated for {types} weights; these are of no known type", types=calibrated)
    found = best(load(state_dir), host_id(), engine, threads, weight_type)
    if found is None:
        why = said(
            "no calibration of llama.cpp {engine} at {threads} thread(s) for {weight_type} weights on this host",
            engine=engine,
            threads=threads,
            weight_type=weight_type,
        )
        if in_estimate:
            return None, said("{why}: run with --calibrate", why=why)
        return None, said("{why}: run estimate --calibrate", why=why)
    return found, ""


# --- the records ---------------------------------------------------------------------------------


def load(state_dir: Path) -> list[Calibration]:
    return read_records(state_dir / CACHE_NAME, Calibration)


def record(state_dir: Path, calibration: Calibration) -> None:
    append_record(state_dir / CACHE_NAME, calibration, Calibration, KEEP)


def best(
    records: list[Calibration], host: str, engine: str, threads: int, weight_type: str, now: float | None = None
) -> Calibration | None:
    """The newest quiet calibration for exactly this host, engine version, thread count and weight type."""
    fitting = [
        c
        for c in records
        if (c.host, c.engine_version, c.threads, c.weight_type) == (host, engine, threads, weight_type)
        and not c.contended
        and c.age(now) <= MAX_AGE_S
    ]
    return max(fitting, key=lambda c: c.measured_at, default=None)


def learn(
    state_dir: Path,
    engine_version: str,
    threads: int,
    weight_type: str,
    calibrated_at: float,
    scale: float,
    foreign_cores: float,
    steal: float,
    basis: str,
) -> Calibration | None:
    """A live run's lesson kept: the calibration the prediction came from (found by its key and time),
    every step term scaled by measured ÷ predicted, recorded as a new "bench" record with its basis
    and the run's conditions. None when that calibration is no longer recorded."""
    key = (host_id(), engine_version, threads, weight_type)
    records = load(state_dir)
    used = next((c for c in records if (c.host, c.engine_version, c.threads, c.weight_type, c.measured_at) == (*key, calibrated_at)), None)
    if used is None:
        return None
    result = replace(
        used,
        fixed_s=used.fixed_s * scale,
        s_per_byte=used.s_per_byte * scale,
        s_per_unit=used.s_per_unit * scale,
        s_per_kv_byte=used.s_per_kv_byte * scale,
        measured_at=time.time(),
        foreign_cores=foreign_cores,
        steal=steal,
        source="bench",
        basis=basis,
    )
    record(state_dir, result)
    return result


def learn_live(state_dir: Path, prediction: DecodePrediction, run: LiveDecode) -> str:
    """The learner the decode budget gives its DecodePrediction (DecodePrediction.learn): the
    calibration the prediction came from, its step terms scaled by measured ÷ predicted, kept."""
    scale = run.measured_s / prediction.tpot_s
    kept = learn(
        state_dir, prediction.engine_version, prediction.threads, prediction.weight_type, prediction.calibrated_at, scale,
        run.foreign_cores, run.steal, run.basis,
    )  # fmt: skip
    if kept is None:
        return said("not learned: the calibration this prediction came from is no longer recorded")
    return said(
        "learned: this host's calibration ({engine} {engine_version}, {threads} thread(s), {weight_type}) now predicts "
        "{ms:.2f} ms here (its step terms ×{scale:.2f}), kept with its source (bench)",
        engine=prediction.engine,
        engine_version=prediction.engine_version,
        threads=prediction.threads,
        weight_type=prediction.weight_type,
        ms=run.measured_s * 1e3,
        scale=scale,
    )


# --- measuring ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One timed decode: median seconds per step, the steps' relative scatter, and the host's load."""

    seconds: float
    scatter: float
    foreign_cores: float
    steal: float


def time_decode(model: Path, threads: int, depth: int, tokens: int = TOKENS, timeout_s: float = RUN_TIMEOUT_S) -> Run:
    argv = [sys.executable, "-m", "decode_doctor.checks.models.llamatimer", str(model), str(threads), str(depth), str(tokens)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise CalibrationError(
            _("llama.cpp did not finish decoding {file} within {timeout_s:.0f} s", file=model.name, timeout_s=timeout_s)
        ) from exc
    line = done.stdout.strip().splitlines()[-1:] if done.stdout else []
    if done.returncode != 0 or not line:
        tail = (done.stderr or "").strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        raise CalibrationError(_("llama.cpp failed decoding {file}: {tail}", file=model.name, tail=tail[0][:200]))
    try:
        data = json.loads(line[0])
        times = [float(t) for t in data["times"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise CalibrationError(_("llama.cpp's timer printed no timings for {file}", file=model.name)) from exc
    median = statistics.median(times)
    quartiles = statistics.quantiles(times, n=4) if len(times) >= 4 else [median, median, median]
    scatter = (quartiles[2] - quartiles[0]) / (2 * median) if median else 0.0
    return Run(median, scatter, float(data.get("foreign_cores", 0.0)), float(data.get("steal", 0.0)))


def features(path: Path, depth: int) -> tuple[float, float, float]:
    """(weight bytes read per step, attention units, cache bytes) of a GGUF at depth, as estimate sizes them."""
    from .modelfiles import read_model
    from .plan import sizing

    size = sizing(read_model(path))
    weights = size.read_bytes(1)
    if weights is None:
        raise CalibrationError(_("{file}: cannot size its weights", file=path.name))
    return weights, attention_units(size.cache, size.heads, size.head_dim, depth), size.kv_bytes(depth, "fp16")


def calibrate(
    threads: int, weight_type: str, state_dir: Path, say: Callable[[str], None] = lambda _: None, scratch: Path | None = None
) -> Calibration:
    """Measures this host's constants for llama.cpp at threads and weight_type, records them, and
    returns them (contended or not: the caller says so)."""
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
        small, large = Path(folder) / f"small-{weight_type}.gguf", Path(folder) / f"large-{weight_type}.gguf"
        say(
            _(
                "calibrating {name} {engine} at {threads} thread(s) for {weight_type} weights: writing two random-weight models…",
                name=ENGINE,
                engine=engine,
                threads=threads,
                weight_type=weight_type,
            )
        )
        write(small, SMALL, weight_type)
        write(large, LARGE, weight_type)
        say(_("calibrating: decoding them at depth 0 and at depth {depth:,}…", depth=DEPTH))
        models = (("small", small), ("large", large))
        runs = {(name, depth): time_decode(path, threads, depth) for name, path in models for depth in (0, DEPTH)}
        w_small, _units, _kv = features(small, 0)
        w_large, _units, _kv = features(large, 0)
        _weights, u_small, k_small = features(small, DEPTH)
        _weights, u_large, k_large = features(large, DEPTH)
    s_per_byte = (runs[("large", 0)].seconds - runs[("small", 0)].seconds) / (w_large - w_small)
    if s_per_byte <= 0:
        raise CalibrationError(_("the larger model decoded no slower than the smaller: the host is too noisy to calibrate"))
    fixed = max(0.0, runs[("small", 0)].seconds - w_small * s_per_byte)
    s_per_unit, s_per_kv_byte = _attention(
        runs[("small", DEPTH)].seconds - runs[("small", 0)].seconds, u_small, k_small,
        runs[("large", DEPTH)].seconds - runs[("large", 0)].seconds, u_large, k_large,
    )  # fmt: skip
    result = Calibration(
        host=host_id(),
        engine=ENGINE,
        engine_version=engine,
        threads=threads,
        weight_type=weight_type,
        fixed_s=fixed,
        s_per_byte=s_per_byte,
        s_per_unit=s_per_unit,
        s_per_kv_byte=s_per_kv_byte,
        spread=max(MIN_SPREAD, *(run.scatter for run in runs.values())),
        measured_at=time.time(),
        foreign_cores=max(run.foreign_cores for run in runs.values()),
        steal=max(run.steal for run in runs.values()),
    )
    record(state_dir, result)
    say(_("calibrated in {seconds:.0f} s: {calibration}", seconds=time.perf_counter() - started, calibration=result.describe().text()))
    return result


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
