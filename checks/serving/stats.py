"""Percentiles, per-level summaries, goodput under an SLO, and the knee of a concurrency sweep.

Times are milliseconds here; percentiles interpolate linearly between order statistics (numpy's
default), so p99 of 20 samples is not simply the maximum.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from decode_doctor.i18n import said

from .client import Record, TokenSource

PERCENTILES = (50, 90, 95, 99)
SLO_METRICS = ("ttft", "tpot", "itl", "e2e")


def percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        raise ValueError(said("no values"))
    position = (len(sorted_values) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


@dataclass(frozen=True)
class Dist:
    """A distribution in milliseconds."""

    n: int
    p50: float
    p90: float
    p95: float
    p99: float
    mean: float
    min: float
    max: float

    @classmethod
    def of(cls, values_ms: Sequence[float]) -> Dist | None:
        values = sorted(values_ms)
        if not values:
            return None
        p50, p90, p95, p99 = (percentile(values, q) for q in PERCENTILES)
        return cls(len(values), p50, p90, p95, p99, sum(values) / len(values), values[0], values[-1])

    def at(self, q: int) -> float:
        return {50: self.p50, 90: self.p90, 95: self.p95, 99: self.p99}[q]

    @property
    def spread(self) -> float | None:
        """p99 / p50: how far the slow tail is from the typical value."""
        return self.p99 / self.p50 if self.p50 > 0 else None


@dataclass(frozen=True)
class SloTerm:
    metric: str  # ttft, tpot, itl, e2e
    q: int  # percentile
    limit_ms: float

    def label(self) -> str:
        limit = f"{self.limit_ms / 1000:g}s" if self.limit_ms >= 1000 else f"{self.limit_ms:g}ms"
        return f"{self.metric}_p{self.q}={limit}"


def parse_slo(text: str) -> tuple[SloTerm, ...]:
    """ "ttft_p95=800ms,tpot_p95=60ms,e2e_p99=10s" → terms; raises ValueError with what is wrong."""
    terms = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        metric, _, q = name.strip().lower().partition("_p")
        if not sep or metric not in SLO_METRICS or not q.isdecimal() or int(q) not in PERCENTILES:
            raise ValueError(
                said(
                    "{part}: expected METRIC_pQ=TIME, METRIC one of {metrics}, Q one of 50, 90, 95, 99",
                    part=repr(part),
                    metrics=", ".join(SLO_METRICS),
                )
            )
        value = value.strip().lower()
        scale = 1000.0 if value.endswith("s") and not value.endswith("ms") else 1.0
        number = value.removesuffix("ms").removesuffix("s")
        try:
            limit = float(number) * scale
        except ValueError:
            raise ValueError(said("{part}: {value} is not a time such as 800ms or 2s", part=repr(part), value=repr(value))) from None
        if not math.isfinite(limit) or limit <= 0:
            raise ValueError(said("{part}: the limit must be a positive time", part=repr(part)))
        terms.append(SloTerm(metric, int(q), limit))
    if not terms:
        raise ValueError(said("an empty SLO"))
    return tuple(terms)


@dataclass(frozen=True)
class LevelStats:
    """One concurrency level of a sweep. Failed and cancelled requests are counted, never timed."""

    concurrency: int
    attempted: int  # finished or failed; cancelled ones are not
    ok: int
    errors: dict[str, int]  # kind → count
    error_examples: dict[str, str]  # kind → one message
    wall_s: float
    ttft: Dist | None
    tpot: Dist | None
    itl: Dist | None
    e2e: Dist | None
    output_tokens: int
    prompt_tokens_median: float | None  # as the server counted them (usage), when it says
    tokens_from: TokenSource
    stopped_early: int  # finished before max_tokens (end of sequence)
    over_max: int  # more output tokens than max_tokens
    engine_tpot: Dist | None  # the engine's own per-token decode time, where its answer carries it
    cancelled: int = 0
    stopped: str | None = None  # why the level ended early: "duration", "interrupted"
    slo_met: dict[str, bool] = field(default_factory=dict)  # SLO term label → met at this level
    good: int | None = None  # requests that met every SLO term on their own

    @property
    def requests_per_s(self) -> float:
        return self.ok / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def goodput_per_s(self) -> float | None:
        return self.good / self.wall_s if self.good is not None and self.wall_s > 0 else None

    @property
    def error_rate(self) -> float:
        return (self.attempted - self.ok) / self.attempted if self.attempted else 0.0

    @property
    def decode_tokens_per_s(self) -> float | None:
        """One sequence's decode speed at this level, from the median TPOT."""
        return 1000 / self.tpot.p50 if self.tpot and self.tpot.p50 > 0 else None


def _request_value(record: Record, metric: str) -> list[float]:
    if metric == "ttft":
        return [record.ttft * 1000] if record.ttft is not None else []
    if metric == "tpot":
        return [record.tpot * 1000] if record.tpot is not None else []
    if metric == "e2e":
        return [record.e2e * 1000] if record.e2e is not None else []
    return [gap * 1000 for gap in record.gaps]


def _meets(record: Record, terms: Sequence[SloTerm]) -> bool:
    for term in terms:
        values = _request_value(record, term.metric)
        if term.metric == "itl":
            if values and percentile(sorted(values), term.q) > term.limit_ms:
                return False
        elif not values or values[0] > term.limit_ms:
            return False
    return True


def _engine_tpot_ms(record: Record) -> float | None:
    timings = record.engine_timings
    per_token = timings.get("predicted_per_token_ms")
    if per_token and per_token > 0:
        return per_token
    predicted_ms, predicted_n = timings.get("predicted_ms"), timings.get("predicted_n")
    return predicted_ms / predicted_n if predicted_ms and predicted_n else None


def summarise(
    concurrency: int,
    records: Sequence[Record],
    wall_s: float,
    max_tokens: int,
    slo: Sequence[SloTerm] = (),
    stopped: str | None = None,
) -> LevelStats:
    cancelled = [r for r in records if r.kind == "cancelled"]
    finished = [r for r in records if r.kind != "cancelled"]
    ok = [r for r in finished if r.error is None]
    kinds = Counter(r.kind or "error" for r in finished if r.error is not None)
    examples: dict[str, str] = {}
    for record in finished:
        if record.error is not None:
            examples.setdefault(record.kind or "error", record.error)
    sources = {r.tokens_from for r in ok}
    prompt = sorted(r.usage_prompt for r in ok if r.usage_prompt is not None)
    engine = [v for v in (_engine_tpot_ms(r) for r in ok) if v is not None]
    itl = [gap * 1000 for r in ok for gap in r.gaps]
    stats = LevelStats(
        concurrency=concurrency,
        attempted=len(finished),
        ok=len(ok),
        errors=dict(kinds),
        error_examples=examples,
        wall_s=wall_s,
        ttft=Dist.of([r.ttft * 1000 for r in ok if r.ttft is not None]),
        tpot=Dist.of([r.tpot * 1000 for r in ok if r.tpot is not None]),
        itl=Dist.of(itl),
        e2e=Dist.of([r.e2e * 1000 for r in ok if r.e2e is not None]),
        output_tokens=sum(r.output_tokens for r in ok),
        prompt_tokens_median=percentile(prompt, 50) if prompt else None,
        tokens_from=sources.pop() if len(sources) == 1 else (TokenSource.MIXED if sources else TokenSource.NONE),
        stopped_early=sum(1 for r in ok if r.output_tokens < max_tokens),
        over_max=sum(1 for r in ok if r.output_tokens > max_tokens),
        engine_tpot=Dist.of(engine),
        cancelled=len(cancelled),
        stopped=stopped,
    )
    if not slo:
        return stats
    met = {}
    for term in slo:
        dist = getattr(stats, term.metric)
        met[term.label()] = dist is not None and dist.at(term.q) <= term.limit_ms and stats.error_rate == 0
    good = sum(1 for r in ok if _meets(r, slo))
    return LevelStats(**{**stats.__dict__, "slo_met": met, "good": good})


@dataclass(frozen=True)
class Knee:
    concurrency: int  # the last level before TPOT p95 grows faster than throughput
    next_concurrency: int
    tpot_growth: float
    throughput_growth: float


def knee(levels: Sequence[LevelStats]) -> Knee | None:
    """The first step of the sweep where TPOT p95 grows by a larger factor than output tokens/s:
    past it, more concurrency buys less throughput than it costs every user in latency."""
    usable = [(lv, lv.tpot) for lv in levels if lv.tpot is not None and lv.output_tokens_per_s > 0]
    for (before, tpot_before), (after, tpot_after) in itertools.pairwise(usable):
        tpot_growth = tpot_after.p95 / tpot_before.p95 if tpot_before.p95 > 0 else math.inf
        throughput_growth = after.output_tokens_per_s / before.output_tokens_per_s
        if tpot_growth > throughput_growth:
            return Knee(before.concurrency, after.concurrency, tpot_growth, throughput_growth)
    return None
