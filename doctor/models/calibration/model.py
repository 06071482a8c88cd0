"""The calibrated step model of llama.cpp on this CPU (see the package's docstring): a calibration's
values, the prediction they make for a sized model at a depth, and its interval."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from decode_doctor.engine.hostload import CONTENDED_CORES, CONTENDED_STEAL
from decode_doctor.engine.statefile import age_text
from decode_doctor.i18n import Said, said

from ..architecture import CacheLayer

if TYPE_CHECKING:
    from ..plan import Sizing

ENGINE = "llama.cpp"
MIN_SPREAD = 0.03  # the interval is never narrower than ±3 %: run-to-run drift on a quiet host


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
        read: Any = self.points
        if not isinstance(read, tuple):  # a record read back from JSON: lists of lists
            try:
                points = tuple((float(w), float(t), float(h)) for w, t, h in read)
            except (TypeError, ValueError) as exc:  # a malformed record: read_records skips it on a TypeError
                raise TypeError(
                    f"points: {exc}"
                ) from exc  # untranslated: caught by the state file's reader, which names the record in its own words
            object.__setattr__(self, "points", points)

    def problem(self) -> Said | None:
        """What makes a record read back from the state directory unusable (statefile.read_state)."""
        if self.threads < 1 or self.spread > 10:
            return said("threads or spread out of range")
        if any(not math.isfinite(v) or v < 0 or v > 1e15 for point in self.points for v in point):
            return said("points holds a figure that is not finite and positive")
        return None

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
            gbps=1 / self.s_per_byte / 1e9 if self.s_per_byte > 0 else float("inf"),  # a flat line: beside heavy load
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
