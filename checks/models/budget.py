"""The decode budget: memory a model needs at a context and concurrency, and its tokens/s ceiling.

Decode is memory-bound: each step reads the weights once (for the whole batch) plus every
sequence's KV cache, so  step time ≥ bytes read per step / memory bandwidth.

  KV bytes per token  = 2 (K and V) × layers × kv_heads × head_dim × bytes per KV element
                        (MLA models cache one latent of kv_lora_rank + rope dims per layer instead)
  bytes per step      = weights read per step + KV per token × context × concurrency
  ceiling             = bandwidth / bytes per step  (per sequence; × concurrency in aggregate)
  memory need         = weights + KV per token × full context × concurrency + runtime overhead
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .dtypes import KV_DTYPE_BYTES
from .modelfiles import ModelInfo

GB = 1e9
GIB = 1 << 30
HEADROOM = 0.20  # keep a fifth of device memory free: fragmentation, activations, allocator slack
RUNTIME_OVERHEAD_BYTES = 1 * GIB  # CUDA context / runtime buffers, a conservative floor
RUNTIME_OVERHEAD_FRACTION = 0.05  # activations and workspace, grow with the model
SWEEP_CONTEXTS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)


def kv_bytes_per_token(model: ModelInfo, kv_dtype: str = "fp16") -> float:
    per_element = KV_DTYPE_BYTES[kv_dtype]
    if model.kv_latent_dim and model.layers:
        return model.layers * model.kv_latent_dim * per_element
    if model.layers is None or model.kv_heads is None or model.head_dim is None:
        raise ValueError("needs layers, KV heads and head_dim")
    return 2 * model.layers * model.kv_heads * model.head_dim * per_element


def tokens_per_second(bandwidth_gbps: float, bytes_per_step: float) -> float:
    return bandwidth_gbps * GB / bytes_per_step


@dataclass
class Device:
    name: str  # "cpu", "cuda:0"
    label: str  # "CPU (AMD EPYC)", "NVIDIA H200"
    memory_bytes: int | None
    bandwidth_gbps: float | None
    bandwidth_source: str  # "measured", "spec", "given", "unknown"


@dataclass
class Budget:
    model: str
    device: str
    context: int
    concurrency: int
    kv_dtype: str
    weights_bytes: int
    read_bytes_per_step: float
    kv_bytes_per_token: float
    kv_bytes_total: float
    overhead_bytes: float
    need_bytes: float
    capacity_bytes: int | None
    fit: str  # "fits", "tight", "does not fit", "unknown"
    bandwidth_gbps: float | None
    bandwidth_source: str
    ms_per_token: float | None
    tps_per_sequence: float | None
    tps_aggregate: float | None
    knobs: list[str] = field(default_factory=list)
    sweep: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


def _need(weights: float, kv_per_token: float, context: int, concurrency: int) -> tuple[float, float, float]:
    kv_total = kv_per_token * context * concurrency
    overhead = RUNTIME_OVERHEAD_BYTES + RUNTIME_OVERHEAD_FRACTION * weights
    return kv_total, overhead, weights + kv_total + overhead


def _fit(need: float, capacity: int | None) -> str:
    if not capacity:
        return "unknown"
    if need <= capacity * (1 - HEADROOM):
        return "fits"
    return "tight" if need <= capacity else "does not fit"


def _knobs(model: ModelInfo, device: Device, context: int, concurrency: int, kv_dtype: str, kv_per_token: float) -> list[str]:
    """Which single change brings the need under the device's memory with headroom."""
    if not device.memory_bytes:
        return []
    usable = device.memory_bytes * (1 - HEADROOM)
    weights = model.weight_bytes
    fixed = weights + RUNTIME_OVERHEAD_BYTES + RUNTIME_OVERHEAD_FRACTION * weights
    advice = []
    for smaller in ("fp8", "int4"):
        if KV_DTYPE_BYTES[smaller] < KV_DTYPE_BYTES[kv_dtype]:
            scaled = kv_per_token * KV_DTYPE_BYTES[smaller] / KV_DTYPE_BYTES[kv_dtype]
            if fixed + scaled * context * concurrency <= usable:
                advice.append(f"KV cache in {smaller} (--kv-dtype {smaller}) fits")
                break
    room = usable - fixed
    if room > 0 and kv_per_token:
        max_context = int(room / (kv_per_token * concurrency))
        if 0 < max_context < context:
            advice.append(f"cap the context at {max_context:,} tokens")
        max_concurrency = int(room / (kv_per_token * context))
        if 0 < max_concurrency < concurrency:
            advice.append(f"serve at most {max_concurrency} sequences at once at this context")
    dominant = max(model.bytes_by_dtype, key=model.bytes_by_dtype.__getitem__) if model.bytes_by_dtype else None
    width = {"F32": 32, "F16": 16, "BF16": 16}.get(dominant or "")
    if width and not model.quantization:
        quantized = weights * 4.5 / width
        if quantized * (1 + RUNTIME_OVERHEAD_FRACTION) + RUNTIME_OVERHEAD_BYTES + kv_per_token * context * concurrency <= usable:
            advice.append("4-bit weights (GPTQ/AWQ/Q4_K, about 4.5 bits per weight) fit")
    if room <= 0:
        advice.append("the weights alone exceed the memory: quantize, or shard across devices (tensor parallel)")
    return advice


def compute_budget(
    model: ModelInfo,
    device: Device,
    context: int,
    concurrency: int = 1,
    kv_dtype: str = "fp16",
    sweep_contexts: tuple[int, ...] = SWEEP_CONTEXTS,
) -> Budget:
    if context < 1 or concurrency < 1:
        raise ValueError("context and concurrency must be at least 1")
    kv_per_token = kv_bytes_per_token(model, kv_dtype)
    weights = model.weight_bytes
    read_weights = model.decode_read_bytes
    kv_total, overhead, need = _need(weights, kv_per_token, context, concurrency)
    step_bytes = read_weights + kv_total
    bw = device.bandwidth_gbps
    ms = step_bytes / (bw * GB) * 1000 if bw else None
    fit = _fit(need, device.memory_bytes)
    limit = model.max_context or max(sweep_contexts)
    sweep = []
    for ctx_len in sorted({c for c in sweep_contexts if c <= limit} | {context}):
        kv_c, _, need_c = _need(weights, kv_per_token, ctx_len, concurrency)
        step = read_weights + kv_c
        sweep.append(
            {
                "context": ctx_len,
                "need_bytes": int(need_c),
                "fit": _fit(need_c, device.memory_bytes),
                "tps_per_sequence": round(tokens_per_second(bw, step), 3) if bw else None,
                "tps_aggregate": round(concurrency * tokens_per_second(bw, step), 3) if bw else None,
            }
        )
    return Budget(
        model=model.name,
        device=device.name,
        context=context,
        concurrency=concurrency,
        kv_dtype=kv_dtype,
        weights_bytes=weights,
        read_bytes_per_step=step_bytes,
        kv_bytes_per_token=kv_per_token,
        kv_bytes_total=kv_total,
        overhead_bytes=overhead,
        need_bytes=need,
        capacity_bytes=device.memory_bytes,
        fit=fit,
        bandwidth_gbps=bw,
        bandwidth_source=device.bandwidth_source,
        ms_per_token=ms,
        tps_per_sequence=1000 / ms if ms else None,
        tps_aggregate=concurrency * 1000 / ms if ms else None,
        knobs=_knobs(model, device, context, concurrency, kv_dtype, kv_per_token) if fit in ("tight", "does not fit") else [],
        sweep=sweep,
    )


def human_bytes(value: float | None) -> str:
    if value is None:
        return "?"
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def human_binary(value: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= size:
            return f"{value / size:g} {unit}" if (value / size).is_integer() else f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"
