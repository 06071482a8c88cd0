"""The decode budget of a model on one device of this host: plan.py's plan at one point, with a
context sweep at the given concurrency, in the shape the decode-budget check reports."""

from __future__ import annotations

from dataclasses import dataclass

from decode_doctor.i18n import said
from decode_doctor.models.dtypes import KV_DTYPE_BYTES
from decode_doctor.models.hardware import BandwidthSource, Hardware
from decode_doctor.models.info import ModelInfo
from decode_doctor.models.plan import GIB, make_plan
from decode_doctor.models.sizing import sizing

from .contract import Budget, SweepRow

__all__ = ["GB", "GIB", "Budget", "Device", "compute_budget", "kv_bytes_per_token"]

GB = 1e9
BUDGET_CONTEXTS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)


def kv_bytes_per_token(model: ModelInfo, kv_dtype: str = "fp16") -> float:
    """Per token over every layer, before any sliding window caps it (ValueError: not sizable)."""
    size = sizing(model)
    if not size.cache:
        raise ValueError(said("needs layers, KV heads and head_dim"))
    return size.kv_bytes_per_token(kv_dtype)


def tokens_per_second(bandwidth_gbps: float, bytes_per_step: float) -> float:
    return bandwidth_gbps * GB / bytes_per_step


@dataclass
class Device:
    name: str  # "cpu", "cuda:0"
    label: str  # "CPU (AMD EPYC)", "NVIDIA H200"
    memory_bytes: int | None
    bandwidth_gbps: float | None
    bandwidth_source: BandwidthSource
    held_bytes: int | None = None  # memory other processes hold, already left out of memory_bytes

    def hardware(self) -> Hardware:
        kind = "cpu" if self.name == "cpu" else "gpu"
        return Hardware(self.name, self.label, self.memory_bytes, self.bandwidth_gbps, self.bandwidth_source, kind=kind)


def compute_budget(
    model: ModelInfo,
    device: Device,
    context: int,
    concurrency: int = 1,
    kv_dtype: str = "fp16",
    sweep_contexts: tuple[int, ...] = BUDGET_CONTEXTS,
) -> Budget:
    if kv_dtype not in KV_DTYPE_BYTES:
        raise ValueError(said("unknown KV dtype {kv_dtype!r}", kv_dtype=kv_dtype))
    size = sizing(model)
    plan = make_plan(size, device.hardware(), context, concurrency, kv_dtype)
    limit = model.max_context or max(sweep_contexts)
    sweep: list[SweepRow] = []
    for length in sorted({c for c in sweep_contexts if c <= limit} | {context}):
        step = make_plan(size, device.hardware(), length, concurrency, kv_dtype).step
        sweep.append(
            SweepRow(
                context=length,
                need_bytes=int(step.need_bytes) if step.need_bytes is not None else None,
                fit=step.fit,
                tps_per_sequence=round(step.tps_per_sequence, 3) if step.tps_per_sequence else None,
                tps_aggregate=round(step.tps_total, 3) if step.tps_total else None,
                binding=step.binding,
            )
        )
    step = plan.step
    return Budget(
        model=model.name,
        device=device.name,
        context=context,
        concurrency=concurrency,
        kv_dtype=kv_dtype,
        weights_bytes=size.weights_bytes,
        weights_source=size.weights_source,
        read_bytes_per_step=step.read_bytes,
        kv_bytes_per_token=size.kv_bytes_per_token(kv_dtype),
        kv_bytes_total=plan.kv_per_device,
        overhead_bytes=plan.overhead_per_device,
        need_bytes=plan.need_per_device,
        capacity_bytes=device.memory_bytes,
        held_bytes=device.held_bytes,
        fit=plan.fit,
        bandwidth_gbps=device.bandwidth_gbps,
        bandwidth_source=device.bandwidth_source,
        ms_per_token=step.step_s * 1000 if step.step_s else None,
        tps_per_sequence=step.tps_per_sequence,
        tps_aggregate=step.tps_total,
        max_context=plan.max_context,
        max_concurrency=plan.max_concurrency,
        knobs=tuple(plan.knobs),
        notes=(*size.notes, *plan.notes),
        sweep=tuple(sweep),
    )
