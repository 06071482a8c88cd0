"""The models feature's contract: the decode budget it publishes (BudgetFacts) and its value types
(ModelInfo, Budget, ModelBudget).

Other features read a model's budget on this host's devices through this module alone
(ctx.facts.get(BudgetFacts)), and teach this host's calibration what a live run measured through
DecodePrediction.learn (the feature supplies the learner); it imports nothing of the feature but its
codes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decode_doctor.engine import Chart, Facts, HtmlBlock, Metric, Sample, Series
from decode_doctor.engine.facts import values_dict
from decode_doctor.engine.units import human_binary, human_bytes
from decode_doctor.i18n import _, ngettext


@dataclass
class ModelInfo:
    path: str
    format: str  # "safetensors", "gguf", "pytorch-bin", "config-only"
    architecture: str | None = None
    layers: int | None = None
    attention_heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    hidden_size: int | None = None
    vocab_size: int | None = None
    max_context: int | None = None
    kv_latent_dim: int | None = None  # MLA (DeepSeek): one compressed vector per token and layer
    experts: int | None = None
    experts_per_token: int | None = None
    tied_embeddings: bool = False
    weight_bytes: int = 0
    bytes_by_dtype: dict[str, int] = field(default_factory=dict)
    embedding_bytes: int = 0
    output_head_bytes: int = 0
    not_decode_bytes: int = 0  # vision/audio towers: in memory, not read per token
    expert_bytes: int = 0
    tensor_count: int = 0
    files: list[str] = field(default_factory=list)
    quantization: str | None = None
    notes: list[str] = field(default_factory=list)
    sliding_window: int | None = None  # GGUF: the attention window of the sliding layers
    label: str | None = None  # the repository's name, for a snapshot in the Hugging Face cache
    recurrent: bool = False  # GGUF: state-space (ssm.*) or linear-attention layers, whose state is not sized from the header

    @property
    def dominant_dtype(self) -> str | None:
        """The stored type holding most of the weight bytes (F16, Q4_0, BF16…), None when none is known."""
        return max(self.bytes_by_dtype, key=self.bytes_by_dtype.__getitem__) if self.bytes_by_dtype else None

    @property
    def config(self) -> dict[str, Any] | None:
        """config.json as read, for sizing from it (kept out of the fields: facts and reports stay small)."""
        return self.__dict__.get("_config")

    @property
    def name(self) -> str:
        return self.label or Path(self.path).name

    @property
    def decode_read_bytes(self) -> int:
        """Weight bytes one decode step reads: the embedding table is gathered (a row per token),
        except when it doubles as the output head; towers are skipped; MoE reads its active experts."""
        read: float = self.weight_bytes - self.not_decode_bytes
        if not self.tied_embeddings:
            read -= self.embedding_bytes
        if self.experts and self.experts_per_token and self.expert_bytes:
            read -= self.expert_bytes * (1 - self.experts_per_token / self.experts)
        return int(read)

    def missing_hyperparameters(self) -> list[str]:
        missing = [n for n in ("layers", "kv_heads", "head_dim") if getattr(self, n) is None]
        return [] if self.kv_latent_dim and self.layers else missing

    def to_dict(self) -> dict[str, Any]:
        data = {key: value for key, value in self.__dict__.items() if key != "_config"}
        data["decode_read_bytes"] = self.decode_read_bytes
        return data


@dataclass(frozen=True)
class DecodePrediction:
    """llama.cpp's time per output token on this CPU at one depth, from this host's calibration
    (calibration.py): what `bench` compares its measurement with."""

    engine: str
    engine_version: str
    threads: int
    weight_type: str
    depth: int
    tpot_s: float
    low_s: float
    high_s: float
    calibrated_at: float
    source: str  # "calibrate", or "bench" when a live run updated it
    bounded: bool = False  # raised to the ceiling's step time: the calibration's own figure was faster
    # The models feature's learner (the calibration it came from, scaled to a live measurement and
    # kept); None where nothing can be learned. Not part of the value: left out of reports.
    learn_with: Learner | None = field(default=None, compare=False, repr=False)

    def learn(self, run: LiveDecode) -> str:
        """What run teaches this host's calibration, in words ("learned: …" or "not learned: …").
        The caller decides that the run is fit to learn from (quiet host, the calibrated threads)."""
        if self.learn_with is None:
            return "not learned: this prediction has no calibration record to learn into"
        return self.learn_with(self, run)


@dataclass(frozen=True)
class LiveDecode:
    """A live run's decode at concurrency 1, measured against a DecodePrediction."""

    measured_s: float  # TPOT p50
    foreign_cores: float  # other processes' CPU during the run
    steal: float
    basis: str  # where and how it was measured, kept with what it teaches


Learner = Callable[[DecodePrediction, LiveDecode], str]


@dataclass
class Budget:
    model: str
    device: str
    context: int
    concurrency: int
    kv_dtype: str
    weights_bytes: float | None
    weights_source: str
    read_bytes_per_step: float | None
    kv_bytes_per_token: float
    kv_bytes_total: float
    overhead_bytes: float | None
    need_bytes: float | None
    capacity_bytes: int | None
    fit: str  # "fits", "tight", "does not fit", "unknown"
    bandwidth_gbps: float | None
    bandwidth_source: str
    ms_per_token: float | None
    tps_per_sequence: float | None
    tps_aggregate: float | None
    max_context: int | None = None  # at this concurrency
    max_concurrency: int | None = None  # at this context
    knobs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sweep: list[dict[str, Any]] = field(default_factory=list)
    prediction: DecodePrediction | None = None  # CPU budgets with a calibration of this host
    prediction_note: str = ""  # why there is none

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in values_dict(self).items()}


def sequences(count: int) -> str:
    return ngettext("{count:,} sequence", "{count:,} sequences", count)


@dataclass(frozen=True)
class ModelBudget:
    """One model's budget on every device of the host; judged: the devices it would be served from."""

    model: ModelInfo
    budgets: list[Budget]
    judged: list[str]

    def line(self) -> str:
        model = self.model
        first = next(b for b in self.budgets if b.device == self.judged[0])
        parts = []
        for budget in self.budgets:
            if budget.device not in self.judged:
                continue
            if budget.tps_per_sequence:
                ceiling = _(
                    ", ≤ {tps:.1f} tok/s per sequence ({gbps:.0f} GB/s {source})",
                    tps=budget.tps_per_sequence,
                    gbps=budget.bandwidth_gbps,
                    source=_(budget.bandwidth_source),
                )
            else:
                ceiling = _(", ceiling unknown (no bandwidth)")
            limits = ""
            if budget.max_concurrency is not None:
                most = sequences(budget.max_concurrency)
                limits = _(", at most {sequences} at {context:,} tokens", sequences=most, context=budget.context)
            parts.append(
                _(
                    "{device}: {fit} in {capacity}{ceiling}{limits}",
                    device=budget.device,
                    fit=_(budget.fit),
                    capacity=human_bytes(budget.capacity_bytes),
                    ceiling=ceiling,
                    limits=limits,
                )
            )
        weights = _("{size} of weights", size=human_bytes(first.weights_bytes)) if first.weights_bytes is not None else _("weights unknown")
        if model.format == "config-only" and first.weights_bytes is not None:
            weights += _(" (from the config: no weight files)")
        read = first.read_bytes_per_step
        if read is not None:
            per_step = _("reads {size} of weights per step", size=human_bytes(read - first.kv_bytes_total))
        else:
            per_step = _("reads unknown")
        head = _(
            "{model} ({format}, {weights}, {per_step}): KV {per_token}/token ({dtype}), {total} at {context:,} tokens × {concurrency}",
            model=model.name,
            format=_(model.format),
            weights=weights,
            per_step=per_step,
            per_token=human_binary(first.kv_bytes_per_token),
            dtype=first.kv_dtype,
            total=human_bytes(first.kv_bytes_total),
            context=first.context,
            concurrency=first.concurrency,
        )
        return head + _("; ") + _("; ").join(parts)


@dataclass(frozen=True)
class BudgetFacts(Facts):
    shown_by_default = True  # the user asked about these models
    models: list[ModelBudget] = field(default_factory=list)

    def summary(self) -> list[str]:
        return [entry.line() for entry in self.models]

    def metrics(self) -> list[Metric]:
        samples = tuple(
            Sample({"model": entry.model.name, "device": b.device, "context": str(b.context)}, b.tps_per_sequence)
            for entry in self.models
            for b in entry.budgets
            if b.tps_per_sequence
        )
        return [Metric("decode_doctor_decode_ceiling_tokens_per_second", "Decode tokens/s ceiling per sequence.", samples)]

    def html(self) -> list[HtmlBlock]:
        series = []
        rows = []
        for entry in self.models:
            for budget in entry.budgets:
                points = tuple((row["context"], row["tps_per_sequence"]) for row in budget.sweep if row.get("tps_per_sequence"))
                where = _("{model} on {device}", model=entry.model.name, device=budget.device)
                if points:
                    series.append(Series(where, points))
                if budget.tps_per_sequence:
                    ceiling = _("≤ {tps:.1f} tok/s per sequence", tps=budget.tps_per_sequence)
                else:
                    ceiling = _("ceiling unknown")
                need = human_bytes(budget.need_bytes)
                rows.append((where, _("{fit} ({need}), {ceiling}", fit=_(budget.fit), need=need, ceiling=ceiling)))
        chart = Chart(_("context length (tokens)"), _("tokens/s per sequence"), tuple(series), log_x=True) if series else None
        return [HtmlBlock(_("Decode budget"), tuple(rows), chart)] if rows else []

    def compared(self) -> dict[str, str | float]:
        return {
            f"{entry.model.name} on {b.device}, tok/s at {b.context:,}": round(b.tps_per_sequence, 2)
            for entry in self.models
            for b in entry.budgets
            if b.tps_per_sequence
        }


@dataclass(frozen=True)
class BudgetAt:
    """Where another feature asks for the decode budget (ctx.supplied): `bench` wants the ceiling at the
    mean context of its requests, for one sequence. The check's --context and --concurrency otherwise."""

    context: int
    concurrency: int = 1
