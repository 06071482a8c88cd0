"""The decode budget's contract: what it publishes (BudgetFacts) and its value types (Budget,
ModelBudget, DecodePrediction, BudgetAt); ModelInfo is the model base's (decode_doctor.models).

Other features read a model's budget on this host's devices through this module alone
(ctx.facts.get(BudgetFacts)); it imports nothing of the feature but its codes. A prediction is plain
data: a live run that should teach the calibration does so through the calibration's own records
(decode_doctor.models.calibration.learn), keyed by the prediction's engine, threads, weight type and
calibrated_at.
"""

from __future__ import annotations

from dataclasses import dataclass

from decode_doctor.engine import Chart, Facts, HtmlBlock, JSONValue, Metric, Options, Sample, Series, option
from decode_doctor.engine.facts import values_dict
from decode_doctor.engine.units import amount, human_binary, human_bytes, parse_rate, whole
from decode_doctor.i18n import N_, _
from decode_doctor.models.dtypes import KV_DTYPE_BYTES
from decode_doctor.models.hardware import BandwidthSource
from decode_doctor.models.info import ModelFormat, ModelInfo, sequences
from decode_doctor.models.plan import Binding, Fit


@dataclass(frozen=True)
class BudgetOptions(Options):
    """The decode budget's options; the artifacts check reads context and kv_dtype (a --context beyond
    the trained one, a KV type the engine lacks), bench gives bandwidth for a server elsewhere."""

    context: int | None = option(
        "--context",
        "Context length to budget for [default: 4096, or the model's maximum if lower].",
        parse=whole(1, 1 << 24, N_("a number of tokens")),
        metavar="TOKENS",
    )
    concurrency: int = option(
        "--concurrency",
        "Sequences decoded at once [default: 1].",
        parse=whole(1, 1 << 20, N_("a number of sequences")),
        default=1,
        metavar="N",
    )
    kv_dtype: str = option("--kv-dtype", "KV cache element type [default: fp16].", choices=tuple(sorted(KV_DTYPE_BYTES)), default="fp16")
    target_tps: float | None = option(
        "--target-tps",
        "Tokens/s per sequence the deployment needs; below it is a warning.",
        parse=amount(0.0, 1e7, N_("tokens/s")),
        metavar="TOKENS/S",
    )
    bandwidth: float | None = option(
        "--bandwidth", "Memory bandwidth to budget with instead of the measured one: 900GB/s, 3.35TB/s, or GB/s.", parse=parse_rate
    )


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


@dataclass(frozen=True)
class SweepRow:
    """One context of a budget's sweep, at the budget's concurrency."""

    context: int
    need_bytes: int | None
    fit: Fit
    tps_per_sequence: float | None
    tps_aggregate: float | None
    binding: Binding


@dataclass(frozen=True)
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
    fit: Fit
    bandwidth_gbps: float | None
    bandwidth_source: BandwidthSource
    ms_per_token: float | None
    tps_per_sequence: float | None
    tps_aggregate: float | None
    max_context: int | None = None  # at this concurrency
    max_concurrency: int | None = None  # at this context
    knobs: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    sweep: tuple[SweepRow, ...] = ()
    prediction: DecodePrediction | None = None  # CPU budgets with a calibration of this host
    prediction_note: str = ""  # why there is none
    held_bytes: int | None = None  # GPU memory other processes held (gpu-health), left out of capacity_bytes

    def to_dict(self) -> dict[str, JSONValue]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in values_dict(self).items()}


def _capacity(budget: Budget) -> str:
    if not budget.held_bytes:
        return human_bytes(budget.capacity_bytes)
    return _("{capacity} (other processes hold {held})", capacity=human_bytes(budget.capacity_bytes), held=human_bytes(budget.held_bytes))


@dataclass(frozen=True)
class ModelBudget:
    """One model's budget on every device of the host; judged: the devices it would be served from."""

    model: ModelInfo
    budgets: tuple[Budget, ...]
    judged: tuple[str, ...]

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
                    source=budget.bandwidth_source.label,
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
                    fit=budget.fit.label,
                    capacity=_capacity(budget),
                    ceiling=ceiling,
                    limits=limits,
                )
            )
        weights = _("{size} of weights", size=human_bytes(first.weights_bytes)) if first.weights_bytes is not None else _("weights unknown")
        if model.format is ModelFormat.CONFIG_ONLY and first.weights_bytes is not None:
            weights += _(" (from the config: no weight files)")
        read = first.read_bytes_per_step
        if read is not None:
            per_step = _("reads {size} of weights per step", size=human_bytes(read - first.kv_bytes_total))
        else:
            per_step = _("reads unknown")
        head = _(
            "{model} ({format}, {weights}, {per_step}): KV {per_token}/token ({dtype}), {total} at {context:,} tokens × {concurrency}",
            model=model.name,
            format=ModelFormat(model.format).label,
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
    models: tuple[ModelBudget, ...] = ()

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
                points = tuple((float(row.context), row.tps_per_sequence) for row in budget.sweep if row.tps_per_sequence)
                where = _("{model} on {device}", model=entry.model.name, device=budget.device)
                if points:
                    series.append(Series(where, points))
                if budget.tps_per_sequence:
                    ceiling = _("≤ {tps:.1f} tok/s per sequence", tps=budget.tps_per_sequence)
                else:
                    ceiling = _("ceiling unknown")
                need = human_bytes(budget.need_bytes)
                rows.append((where, _("{fit} ({need}), {ceiling}", fit=budget.fit.label, need=need, ceiling=ceiling)))
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
