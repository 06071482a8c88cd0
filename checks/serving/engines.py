"""What each serving engine's /metrics says, read into one shape: KV-cache use, running and waiting
requests, preemptions, token counters, and the TTFT, inter-token and queue-time histograms.

The metric names are the engines' own (vLLM 0.5–0.11 and V1, SGLang, TGI, llama.cpp's server);
where an engine renamed one, both names are listed, newest first. Series that differ only in labels
(model_name, engine="0"/"1" of a data-parallel vLLM) are added up; the KV-cache fraction takes the
fullest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from .promtext import Exposition, Sample


@dataclass(frozen=True)
class EngineSpec:
    name: str
    prefix: str
    kv_usage: tuple[str, ...] = ()
    running: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    preemptions: tuple[str, ...] = ()
    prompt_tokens: tuple[str, ...] = ()
    generation_tokens: tuple[str, ...] = ()
    max_running: tuple[str, ...] = ()
    ttft: tuple[str, ...] = ()
    itl: tuple[str, ...] = ()
    queue_time: tuple[str, ...] = ()
    # the most sequences it runs at once when its metrics do not say: the engine's default, and the flag
    default_max_running: int | None = None
    limit_flag: str = ""
    marks: tuple[str, ...] = ()  # metric names only this engine exposes (a prefix is not proof)

    def uses(self) -> tuple[str, ...]:
        """Every series the diagnosis reads from this engine (histograms by their family name)."""
        gauges = (*self.kv_usage, *self.running, *self.waiting, *self.preemptions, *self.max_running)
        return (*gauges, *self.prompt_tokens, *self.generation_tokens, *self.ttft, *self.itl, *self.queue_time)


ENGINES = (
    EngineSpec(
        "vLLM",
        "vllm:",
        kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        running=("vllm:num_requests_running",),
        waiting=("vllm:num_requests_waiting",),
        preemptions=("vllm:num_preemptions_total", "vllm:num_preemptions"),
        prompt_tokens=("vllm:prompt_tokens_total",),
        generation_tokens=("vllm:generation_tokens_total",),
        ttft=("vllm:time_to_first_token_seconds",),
        itl=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        queue_time=("vllm:request_queue_time_seconds",),
        default_max_running=256,  # --max-num-seqs; vLLM's /metrics do not carry it
        limit_flag="--max-num-seqs",
    ),
    EngineSpec(
        "SGLang",
        "sglang:",
        kv_usage=("sglang:token_usage",),
        running=("sglang:num_running_reqs", "sglang:num_requests_running"),  # the second: its first metrics (2024)
        waiting=("sglang:num_queue_reqs", "sglang:num_requests_waiting", "sglang:queue_req"),
        preemptions=("sglang:num_retracted_requests_total",),
        prompt_tokens=("sglang:prompt_tokens_total",),
        generation_tokens=("sglang:generation_tokens_total",),
        max_running=("sglang:max_running_requests",),
        ttft=("sglang:time_to_first_token_seconds",),
        itl=("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
        queue_time=("sglang:queue_time_seconds", "sglang:waiting_request_latency_seconds"),
        limit_flag="--max-running-requests",
    ),
    EngineSpec(
        "TGI",
        "tgi_",
        running=("tgi_batch_current_size",),
        waiting=("tgi_queue_size",),
        itl=("tgi_request_mean_time_per_token_duration",),
        queue_time=("tgi_request_queue_duration",),
        default_max_running=128,  # --max-concurrent-requests
        limit_flag="--max-concurrent-requests",
        marks=("tgi_request_count", "tgi_request_success", "tgi_batch_current_max_tokens", "tgi_request_mean_time_per_token_duration"),
    ),
    EngineSpec(  # IBM's TGIS, and vLLM behind its TGIS adapter (which also serves vllm: series: then vLLM)
        "TGIS",
        "tgi_",
        running=("tgi_batch_current_size",),
        waiting=("tgi_queue_size",),
        queue_time=("tgi_request_queue_duration",),
        marks=("tgi_tokenize_request_tokens", "tgi_tokenize_request_input_count", "tgi_request_input_count", "tgi_request_failure"),
    ),
    EngineSpec(
        "llama.cpp",
        "llamacpp:",
        kv_usage=("llamacpp:kv_cache_usage_ratio",),  # older builds; newer ones leave it to /slots
        running=("llamacpp:requests_processing",),
        waiting=("llamacpp:requests_deferred",),
        prompt_tokens=("llamacpp:prompt_tokens_total",),
        generation_tokens=("llamacpp:tokens_predicted_total",),
        limit_flag="-np/--parallel",  # its slots: /slots says how many
    ),
)


@dataclass(frozen=True)
class Histogram:
    """Cumulative buckets (upper bound in seconds, count), +Inf last, with the total count and sum."""

    buckets: tuple[tuple[float, float], ...]
    count: float
    total: float

    def quantile(self, q: float) -> float | None:
        """Seconds, interpolated inside the bucket as Prometheus's histogram_quantile does; None when
        empty, or when the quantile falls in the +Inf bucket (the bound is all that is known)."""
        if self.count <= 0 or not self.buckets:
            return None
        rank = q * self.count
        previous_bound, previous_count = 0.0, 0.0
        for bound, cumulative in self.buckets:
            if cumulative >= rank:
                if math.isinf(bound):
                    return None
                inside = cumulative - previous_count
                share = (rank - previous_count) / inside if inside > 0 else 0.0
                return previous_bound + (bound - previous_bound) * share
            previous_bound, previous_count = bound, cumulative
        return None

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count > 0 else None

    def since(self, earlier: Histogram | None) -> Histogram:
        """What was observed between two readings (same buckets); self when they differ."""
        if earlier is None or [b for b, _ in earlier.buckets] != [b for b, _ in self.buckets]:
            return self
        buckets = tuple((b, c - e) for (b, c), (_, e) in zip(self.buckets, earlier.buckets, strict=True))
        return Histogram(buckets, self.count - earlier.count, self.total - earlier.total)


@dataclass(frozen=True)
class Slots:
    """llama.cpp's /slots: its parallel sequences and the context each may hold."""

    total: int
    busy: int
    n_ctx: int | None  # per slot (the server's -c divided among --parallel slots)


@dataclass(frozen=True)
class Snapshot:
    engine: str  # vLLM, SGLang, TGI, llama.cpp, or "unknown"
    kv_usage: float | None = None  # 0–1
    running: float | None = None
    waiting: float | None = None
    preemptions: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    max_running: float | None = None
    ttft: Histogram | None = None
    itl: Histogram | None = None
    queue_time: Histogram | None = None
    slots: Slots | None = None
    names: tuple[str, ...] = ()  # the metric names read, for the evidence
    series: int = 0  # samples in the answer
    skipped: int = 0  # lines that were not samples
    truncated: bool = False
    lost: tuple[str, ...] = ()  # series the diagnosis uses whose lines were dropped (too long, cut)
    not_numbers: tuple[str, ...] = ()  # series the diagnosis uses present with NaN or ±Inf values only
    limit_source: str | None = None  # where max_running comes from: "metrics", "default", "slots"
    adapter: str | None = None  # another engine's series beside these (vLLM's TGIS adapter)

    @property
    def spec(self) -> EngineSpec | None:
        return spec_named(self.engine)

    def with_slots(self, slots: Slots | None) -> Snapshot:
        if slots is None:
            return replace(self, slots=None)
        return replace(self, slots=slots, max_running=float(slots.total), limit_source="slots")

    @property
    def limit_flag(self) -> str:
        spec = self.spec
        return spec.limit_flag if spec else ""


def family(name: str) -> str:
    """A histogram's family name from one of its series (…_bucket, …_count, …_sum); other names as they are."""
    for suffix in ("_bucket", "_count", "_sum"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def spec_named(name: str) -> EngineSpec | None:
    return next((spec for spec in ENGINES if spec.name == name), None)


def detect(exposition: Exposition) -> EngineSpec | None:
    """The engine the metrics prove: vLLM when any vllm: series is there (its TGIS adapter adds tgi_
    ones); among tgi_ servers, TGIS by the series only it has, else TGI; otherwise the prefix with the
    most series."""
    names = {family(sample.name) for sample in exposition.samples}
    by_name = {spec.name: spec for spec in ENGINES}
    if any(name.startswith("vllm:") for name in names):
        return by_name["vLLM"]
    if any(name.startswith("tgi_") for name in names):
        return by_name["TGIS"] if names & set(by_name["TGIS"].marks) else by_name["TGI"]
    counts = {spec.name: sum(1 for name in names if name.startswith(spec.prefix)) for spec in ENGINES}
    best = max(counts, key=lambda name: counts[name])
    return by_name[best] if counts[best] else None


def _by_name(exposition: Exposition) -> dict[str, list[Sample]]:
    found: dict[str, list[Sample]] = {}
    for sample in exposition.samples:
        found.setdefault(sample.name, []).append(sample)
    return found


def _first(names: Sequence[str], index: dict[str, list[Sample]], read: list[str], fullest: bool = False) -> float | None:
    for name in names:
        values = [s.value for s in index.get(name, ()) if math.isfinite(s.value)]
        if values:
            read.append(name)
            return max(values) if fullest else sum(values)
    return None


def _histogram(names: Sequence[str], index: dict[str, list[Sample]], read: list[str]) -> Histogram | None:
    for name in names:
        buckets: dict[float, float] = {}
        for sample in index.get(name + "_bucket", ()):
            bound = sample.label("le")
            try:
                upper = float(bound) if bound is not None else None
            except ValueError:
                continue
            if upper is None or not math.isfinite(sample.value):
                continue
            buckets[upper] = buckets.get(upper, 0.0) + sample.value
        if not buckets:
            continue
        count = sum(s.value for s in index.get(name + "_count", ()) if math.isfinite(s.value))
        total = sum(s.value for s in index.get(name + "_sum", ()) if math.isfinite(s.value))
        ordered = tuple(sorted(buckets.items()))
        read.append(name)
        return Histogram(ordered, count or ordered[-1][1], total)
    return None


def snapshot(exposition: Exposition) -> Snapshot:
    spec = detect(exposition)
    series, skipped, truncated = len(exposition.samples), exposition.skipped, exposition.truncated
    if spec is None:
        return Snapshot("unknown", series=series, skipped=skipped, truncated=truncated)
    index = _by_name(exposition)
    read: list[str] = []
    used = spec.uses()
    lost = tuple(name for name in exposition.dropped if family(name) in used)
    not_numbers = tuple(
        name for name in used if index.get(name) and not any(math.isfinite(s.value) for s in index[name])
    )  # fmt: skip
    adapter = "the TGIS adapter's tgi_ series" if spec.name == "vLLM" and any(n.startswith("tgi_") for n in index) else None
    max_running = _first(spec.max_running, index, read)
    limit_source = "metrics" if max_running is not None else None
    if max_running is None and spec.default_max_running:
        max_running, limit_source = float(spec.default_max_running), "default"
    return Snapshot(
        engine=spec.name,
        kv_usage=_first(spec.kv_usage, index, read, fullest=True),
        running=_first(spec.running, index, read),
        waiting=_first(spec.waiting, index, read),
        preemptions=_first(spec.preemptions, index, read),
        prompt_tokens=_first(spec.prompt_tokens, index, read),
        generation_tokens=_first(spec.generation_tokens, index, read),
        max_running=max_running,
        ttft=_histogram(spec.ttft, index, read),
        itl=_histogram(spec.itl, index, read),
        queue_time=_histogram(spec.queue_time, index, read),
        names=tuple(read),
        series=series,
        skipped=skipped,
        truncated=truncated,
        lost=lost,
        not_numbers=not_numbers,
        limit_source=limit_source,
        adapter=adapter,
    )


def slots_from(body: object) -> Slots | None:
    """llama.cpp's GET /slots answer: a list of {"id", "n_ctx", "is_processing", …}."""
    if not isinstance(body, list) or not body or len(body) > 4096:
        return None
    slots = [s for s in body if isinstance(s, dict)]
    if not slots:
        return None
    contexts = [s["n_ctx"] for s in slots if isinstance(s.get("n_ctx"), int) and s["n_ctx"] > 0]
    busy = sum(1 for s in slots if s.get("is_processing") is True)
    return Slots(len(slots), busy, min(contexts) if contexts else None)


@dataclass
class Watch:
    """Readings of /metrics taken during a run: the peaks that a reading at the end would miss."""

    readings: int = 0
    peak_kv_usage: float | None = None
    peak_waiting: float | None = None
    peak_running: float | None = None
    errors: list[str] = field(default_factory=list)

    def add(self, snap: Snapshot) -> None:
        self.readings += 1
        for attribute in ("kv_usage", "waiting", "running"):
            value = getattr(snap, attribute)
            peak = getattr(self, "peak_" + attribute)
            if value is not None and (peak is None or value > peak):
                setattr(self, "peak_" + attribute, value)
