"""The decode step of llama.cpp on this CPU, calibrated: time per output token = fixed cost per step
+ weight bytes read × seconds per byte + attention: query work × seconds per unit + cached bytes
read × seconds per cache byte.

The ceiling (bytes ÷ bandwidth) is a bound no run beats; what a user gets is further from it for a
small model than a large one, because every step also pays a fixed cost (threads woken and joined,
graph built, the output sampled), and slower at depth than the cache's bytes alone say, because
attention computes over every cached token. The three constants differ by host, thread count,
kernel path (the weight type: llama.cpp repacks Q4_0 and Q8_0 for AVX-512 and AMX) and engine
version, so they are measured here: random-weight GGUFs of the weight type (randomgguf.py), two small
ones and, for a model more than twice the larger's size, a third of about the model's size (up to
XL_MAX_BYTES), decoded by llama-cpp-python at depth 0, the two small ones again at depth DEPTH, each
in a child process (llamatimer.py) with what the rest of the host did meanwhile. The weights' time is
the line through those points (between two of them, the line joining them; past the largest, the
last segment's slope), so a 3 GB model is not extrapolated from two under 0.5 GB.

Every run is repeated in passes until two passes agree within AGREE (at most PASSES_MAX), and each
point is the median of its runs. A cloud VM's few percent of steal is its normal state, so nothing is
thrown away for it: the calibration keeps the steal and the other processes' load it saw, and its
interval is as wide as its own measurements say: how far its passes lay apart (half the range of a
run's passes over their median, the largest of any run; the next run lands as the last ones did), at
least MIN_SPREAD, plus the fraction of the host the steal and the other work took.

A llama.cpp that dies by a signal is a crash, said as one (the signal, the phase, the buffer its
weights were repacked into, the catalog entry that names the kernel: failures.py). When the batched
prompt crashes (llama.cpp's AMX kernel on repacked Q4_0/Q8_0, ENG001), the calibration feeds the
prompt one token at a time instead, which reaches the same cache through the decode path it times,
and says so. Kept per host, engine version, thread count and weight type in the state directory, like
the bandwidth figures.

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
from dataclasses import dataclass, field, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from decode_doctor.checks.bandwidth.contract import CONTENDED_CORES, CONTENDED_STEAL
from decode_doctor.i18n import Said, _, said

from .architecture import CacheLayer

if TYPE_CHECKING:
    from .contract import DecodePrediction, LiveDecode
    from .plan import Sizing
from .bwcache import host_id
from .randomgguf import WEIGHT_TYPES, Shape, shape_for, write
from .statefile import age_text, append_record, read_records

CACHE_NAME = "calibration.json"
ENGINE = "llama.cpp"
KEEP = 64
MAX_AGE_S = 30 * 24 * 3600  # a kernel path does not drift like a busy host; an engine upgrade is a new key
SMALL = Shape(hidden=512, layers=4, ffn=1408, heads=8, kv_heads=8, vocab=8000)
LARGE = Shape(hidden=1024, layers=12, ffn=2816, heads=16, kv_heads=4, vocab=32000)
DEPTH = 2048  # the small models' second run: attention over this many cached tokens
TOKENS = 48  # timed steps per run
RUN_TIMEOUT_S = 300.0
MIN_SPREAD = 0.03  # the interval is never narrower than ±3 %: run-to-run drift on a quiet host
PASSES_MIN, PASSES_MAX = 2, 3
AGREE = 0.05  # two passes whose every run lies within 5 % of each other end the calibration
XL_FROM = 2.0  # a third point for a model more than twice the larger calibration model's bytes
XL_MAX_BYTES = 1.5e9  # … of the model's size, up to this (writing it takes a while; the line is straight out there)
PROMPTS = ("batched", "one-token")


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
        from .failures import matching_buffers

        if self.in_batched_prompt:
            where = said("evaluating the {tokens:,}-token prompt of {file} in one batch", tokens=self.depth + 1, file=self.file)
        elif self.phase == "steps":
            where = said("in a decode step of {file}", file=self.file)
        else:
            where = said("loading {file}", file=self.file)
        known = matching_buffers(self.buffers)
        kernel = ""
        if known is not None:
            kernel = said(
                " with its weights in an {buffer} buffer: {title} (decode-doctor explain ENG001)",
                buffer=next(b for b in self.buffers if known.marks_buffer(b)),
                title=known.title,
            )
        elif self.buffers:
            kernel = said(" (its weights in {buffers} buffers)", buffers=", ".join(self.buffers))
        return said("llama.cpp crashed ({signal}) {where}{kernel}", signal=self.signal, where=where, kernel=kernel)


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
    spread: float  # relative half-width of the interval predictions carry (see the module's docstring)
    measured_at: float
    foreign_cores: float = 0.0  # the most other processes used over any run's window, in cores
    steal: float = 0.0
    source: str = "calibrate"  # or "bench" (a live run updated it)
    basis: str = ""  # for a "bench" record: the run it learned from and the calibration it scaled
    # (weight bytes read per step, seconds per step at depth 0, how far its passes lay apart: half their
    # range ÷ median), by size: the line the weights' time follows; empty in a record from before there
    # were points (then fixed_s + bytes × s_per_byte, and spread for every prediction)
    points: tuple[tuple[float, float, float], ...] = ()
    depth_spread: float = 0.0  # how far the passes' slowdowns at DEPTH lay apart (half their range ÷ median), the larger
    scatter: float = 0.0  # the steps' own relative scatter (interquartile half-range ÷ median), the largest of any run
    # how far the passes of one run lay apart (half their range ÷ median), the largest: the interval's
    # width (a step's scatter says little about the median of hundreds; a run's repeat says how the next run lands)
    repeatability: float = 0.0
    widened: float = 0.0  # added to the interval for the host's steal and other work
    # half the largest gap to this host's previous calibration of the key (with_drift), and its time
    drift: float = 0.0
    drift_since: float = 0.0
    passes: int = 1
    cpus: int = 0  # the CPUs this process could use when it calibrated
    prompt: str = "batched"  # "one-token": the batched prompt crashed llama.cpp (crash says how)
    crash: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.points, tuple):  # a record read back from JSON: lists of lists
            try:
                points = tuple((float(w), float(t), float(h)) for w, t, h in self.points)
            except (TypeError, ValueError) as exc:  # a malformed record: read_records skips it on a TypeError
                raise TypeError(f"points: {exc}") from exc
            object.__setattr__(self, "points", points)

    @property
    def contended(self) -> bool:
        """Something else ran beside it (as the bandwidth figures say it): its interval is widened, never refused."""
        return self.foreign_cores >= CONTENDED_CORES or self.steal >= CONTENDED_STEAL

    def weight_seconds(self, weight_bytes: float) -> float:
        """Seconds per step at depth 0 for a model reading weight_bytes per step: on the line through the
        measured points (a record without points: fixed_s + bytes × s_per_byte)."""
        if len(self.points) < 2:
            return self.fixed_s + weight_bytes * self.s_per_byte
        (w0, t0, _h0), (w1, t1, _h1) = self._segment(weight_bytes)
        if w1 <= w0:
            return t1
        return max(0.0, t0 + (weight_bytes - w0) * (t1 - t0) / (w1 - w0))

    def weight_spread(self, weight_bytes: float) -> float:
        """How far the passes lay apart near weight_bytes: between two points, the line joining their
        spreads; outside them, the nearer end's."""
        if len(self.points) < 2:
            return self.spread
        (w0, _t0, h0), (w1, _t1, h1) = self._segment(weight_bytes)
        if w1 <= w0:
            return h1
        share = min(1.0, max(0.0, (weight_bytes - w0) / (w1 - w0)))
        return h0 + share * (h1 - h0)

    def _segment(self, weight_bytes: float) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        points = self.points
        index = next((i for i in range(1, len(points) - 1) if weight_bytes < points[i][0]), len(points) - 1)
        return points[index - 1], points[index]

    def relative_spread(self, weights_s: float, attention_s: float, weight_bytes: float) -> float:
        """The interval's relative half-width for a step of weights_s on the weights' line and
        attention_s at depth: each part as uncertain as its own measurements were, at least MIN_SPREAD,
        plus the widening for steal and other work. A record without points: its one spread."""
        total = weights_s + attention_s
        if not self.points or total <= 0:
            return self.spread
        half = max(self.weight_spread(weight_bytes), self.drift) * weights_s + max(self.depth_spread, self.drift) * attention_s
        return max(MIN_SPREAD, half / total) + self.widened

    @property
    def largest_bytes(self) -> float:
        return max((w for w, _t, _h in self.points), default=0.0)

    def age(self, now: float | None = None) -> float:
        return (now or time.time()) - self.measured_at

    def describe(self, now: float | None = None) -> Said:
        when = age_text(self.age(now))
        busy = ""
        if self.contended:
            busy = said(
                "; beside other work ({cores:.2f} cores, {steal:.1%} stolen): its interval widened by {widened:.1%}",
                cores=self.foreign_cores,
                steal=self.steal,
                widened=self.widened,
            )
        how = said("learned from a live bench") if self.source == "bench" else said("calibrated")
        sizes = ""
        if self.points:
            sizes = said(
                ", models of {sizes} GB",
                sizes=", ".join(f"{w / 1e9:.2f}" for w, _t, _h in self.points),
            )
        return said(
            "{engine} {version}, {threads} thread(s), {weight_type}, {how} {when} (fixed {fixed_ms:.2f} ms per step, "
            "{gbps:.1f} GB/s effective on the weights{sizes}){busy}",
            engine=self.engine,
            version=self.engine_version,
            threads=self.threads,
            weight_type=self.weight_type,
            how=how,
            when=when,
            fixed_ms=self.fixed_s * 1e3,
            gbps=1 / self.s_per_byte / 1e9,
            sizes=sizes,
            busy=busy,
        )

    def interval_text(self) -> Said:
        """What the interval is made of, in words."""
        if self.passes > 1:
            text = said(
                "how far the calibration's {passes} passes lay apart near this size and depth, at least {floor:.0%}",
                passes=self.passes,
                floor=MIN_SPREAD,
            )
        elif self.scatter:  # a record from before there were passes: the steps' own scatter
            text = said("the steps' scatter, {scatter:.1%}, at least {floor:.0%}", scatter=self.scatter, floor=MIN_SPREAD)
        else:
            text = said("at least {floor:.0%}", floor=MIN_SPREAD)
        if self.drift:
            text = said(
                "{text}, or half its gap to this host's calibration {hours:.1f} h before it, {drift:.1%}, when larger",
                text=text,
                hours=(self.measured_at - self.drift_since) / 3600,
                drift=self.drift,
            )
        if self.widened:
            text = said("{text}, plus {widened:.1%} for steal and other work", text=text, widened=self.widened)
        return text


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

    @property
    def spread(self) -> float:
        """The interval's relative half-width."""
        return self.high_s / self.tpot_s - 1 if self.tpot_s else 0.0


def attention_units(cache: list[CacheLayer], heads: int | None, head_dim: int | None, depth: int) -> float:
    if not heads or not head_dim:
        return 0.0
    return float(sum(min(depth, layer.window or depth) for layer in cache) * heads * head_dim)


def predict(calibration: Calibration, weight_bytes: float, units: float, kv_bytes: float, depth: int) -> Prediction:
    c = calibration
    weights_s = c.weight_seconds(weight_bytes)
    attention_s = units * c.s_per_unit + kv_bytes * c.s_per_kv_byte
    tpot = weights_s + attention_s
    spread = c.relative_spread(weights_s, attention_s, weight_bytes)
    return Prediction(tpot, tpot * (1 - spread), tpot * (1 + spread), depth)


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


WIDER = 2.0  # a newer calibration wins unless its interval is more than twice the narrowest one's


def best(
    records: list[Calibration], host: str, engine: str, threads: int, weight_type: str, now: float | None = None
) -> Calibration | None:
    """For exactly this host, engine version, thread count and weight type: the newest calibration
    whose interval is at most WIDER × the narrowest one's (a busy hour's calibration does not displace
    a quiet one, and is used, widened, when it is all there is)."""
    fitting = [
        c
        for c in records
        if (c.host, c.engine_version, c.threads, c.weight_type) == (host, engine, threads, weight_type) and 0 <= c.age(now) <= MAX_AGE_S
    ]
    if not fitting:
        return None
    narrowest = min(c.spread for c in fitting)
    return max((c for c in fitting if c.spread <= narrowest * WIDER), key=lambda c: c.measured_at)


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
        points=tuple((w, t * scale, h) for w, t, h in used.points),
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
    from .failures import signal_name

    argv = [sys.executable, "-m", "decode_doctor.checks.models.llamatimer", str(model), str(threads), str(depth), str(tokens), prompt]
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
        tail = (done.stderr or "").strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
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
    from .modelfiles import read_model
    from .plan import sizing

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


def with_drift(result: Calibration, records: list[Calibration]) -> Calibration:
    """The calibration with how far it lies from this host's previous calibration of the same key (the
    same small models: the same weight bytes), half the largest gap at a shared point: a host whose
    calibrations an hour apart differ by 30 % cannot promise better than ±15 %, however well one
    calibration's passes agreed. Its interval takes the larger of that and its own passes' spread."""
    key = (result.host, result.engine_version, result.threads, result.weight_type)
    earlier = [c for c in records if (c.host, c.engine_version, c.threads, c.weight_type) == key and c.source == "calibrate" and c.points]
    previous = max((c for c in earlier if 0 <= result.measured_at - c.measured_at <= MAX_AGE_S), key=lambda c: c.measured_at, default=None)
    if previous is None:
        return result
    gaps = [
        abs(seconds / old - 1)
        for weight_bytes, seconds, _spread in result.points
        for old_bytes, old, _old_spread in previous.points
        if old > 0 and abs(old_bytes / weight_bytes - 1) < 0.01
    ]
    if not gaps:
        return result
    drift = max(gaps) / 2
    return replace(
        result,
        drift=drift,
        drift_since=previous.measured_at,
        spread=max(result.spread, max(MIN_SPREAD, drift) + result.widened),
    )


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
