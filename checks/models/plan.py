"""A serving plan: what a model needs on a device (or N of them, tensor parallel), the limits that
follow, and how fast a decode step can be.

Memory, per device:
  usable   = UTILIZATION × memory (vLLM's default --gpu-memory-utilization)
  need     = weights / N + KV at full context × concurrency / shards + 1 GiB + 5 % of the weights / N
  fits when need ≤ usable; "tight" when it only fits in all of the memory
KV per sequence: every full-attention layer's K and V for each token, a sliding-window layer's for at
most its window, an MLA layer's latent, and a hybrid model's fixed SSM state.
A decode step, per device (a roofline: the slower roof binds):
  time ≥ max(bytes read / bandwidth, FLOPs / peak throughput) + tensor-parallel all-reduces
  bytes read = the weights one step touches (MoE: the experts some sequence picks) + the KV cache
  FLOPs     = 2 × active parameters × sequences + attention over the cached tokens
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .architecture import Architecture, CacheLayer, UnknownArchitecture, from_config
from .contract import ModelInfo
from .dtypes import KV_DTYPE_BYTES
from .hardware import Hardware

GIB = 1 << 30
UTILIZATION = 0.90
RUNTIME_OVERHEAD_BYTES = 1 * GIB
RUNTIME_OVERHEAD_FRACTION = 0.05
ALLREDUCE_LATENCY_S = 10e-6  # one small NCCL all-reduce on NVLink, order of magnitude
ACTIVATION_BYTES = 2
STATE_BYTES = 2  # Mamba state, in the model's 16-bit dtype
SWEEP_CONTEXTS = (1024, 4096, 16384, 65536, 131072)
SWEEP_CONCURRENCY = (1, 4, 16, 64, 256)
HEADROOM_RULE = (
    f"usable = {UTILIZATION:.0%} of each device's memory (vLLM's default --gpu-memory-utilization); "
    "need = weights + KV cache at full context × concurrency + 1 GiB + 5 % of the weights for the runtime"
)
FILE_DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "Q8_0": 1.0625, "I8": 1, "Q4_0": 0.5625, "Q4_K": 0.5625}


@dataclass
class Sizing:
    """What a model needs, whatever the device."""

    name: str
    path: str
    format: str
    weights_bytes: float | None  # None: unknown (never 0)
    weights_source: str
    params_total: int | None
    params_active: float | None  # per token
    cache: list[CacheLayer]
    state_elements: int
    layers: int | None
    heads: int | None
    kv_heads: int | None
    head_dim: int | None
    hidden: int | None
    max_context: int | None
    compute_dtype: str  # which throughput roof applies: "bf16", "fp8", "int8"
    quantized: bool
    notes: list[str] = field(default_factory=list)
    _read: Callable[[int], float] = field(default=lambda sequences: 0.0, repr=False)

    @property
    def mla(self) -> bool:
        return any(layer.kind == "mla" for layer in self.cache)

    def read_bytes(self, sequences: int) -> float:
        """Weight bytes one decode step reads for `sequences` at once."""
        return self._read(sequences)

    def kv_bytes_per_token(self, kv_dtype: str) -> float:
        return sum(layer.elements_per_token for layer in self.cache) * KV_DTYPE_BYTES[kv_dtype]

    def kv_bytes(self, context: int, kv_dtype: str) -> float:
        """Cache bytes of one sequence at `context` tokens, the fixed state included."""
        per_element = KV_DTYPE_BYTES[kv_dtype]
        tokens = sum(layer.elements_per_token * min(context, layer.window or context) for layer in self.cache)
        return tokens * per_element + self.state_elements * STATE_BYTES


def _bytes_per_param(config: dict[str, Any], arch: Architecture) -> tuple[float, str, bool]:
    """(bytes per parameter as served, how that was decided, quantized?)."""
    quant = config.get("quantization_config") if isinstance(config.get("quantization_config"), dict) else None
    if quant:
        method = str(quant.get("quant_method") or quant.get("quant_type") or "").lower()
        if "fp8" in method:
            return 1.0, f"{method} quantization: 1 B per parameter", True
        bits = quant.get("bits") or quant.get("w_bit") or (4 if method in ("awq", "gptq", "bitsandbytes") else None)
        if bits:
            dense = arch.params_total - arch.params_embedding - arch.params_output
            # packed weights with 16-bit scales per group of 128; the embedding and head stay 16-bit
            average = (dense * bits / 8 * (1 + 16 / (128 * bits)) + 2 * (arch.params_embedding + arch.params_output)) / arch.params_total
            return average, f"{method} {bits}-bit quantization (embedding and head in 16 bit)", True
    dtype = (arch.dtype or "").lower()
    if dtype in ("float32", "fp32"):
        return 2.0, "float32 checkpoint, served in 16 bit (the engines' default dtype)", False
    if dtype in ("bfloat16", "float16", "bf16", "fp16"):
        return 2.0, dtype, False
    return 2.0, f"{dtype or 'no'} torch_dtype in the config: 16 bit assumed", False


def _fallback_cache(model: ModelInfo) -> list[CacheLayer]:
    """From the header figures alone (GGUF metadata, or a config this does not size)."""
    if not model.layers:
        return []
    if model.kv_latent_dim:
        return [CacheLayer("mla", model.kv_latent_dim)] * model.layers
    if not (model.kv_heads and model.head_dim):
        return []
    elements = 2 * model.kv_heads * model.head_dim
    window = model.sliding_window
    if not window:
        return [CacheLayer("full", elements)] * model.layers
    arch = (model.architecture or "").lower()
    if arch.startswith("gemma3"):
        return [CacheLayer("full", elements) if (i + 1) % 6 == 0 else CacheLayer("sliding", elements, window) for i in range(model.layers)]
    if arch.startswith("gemma2"):
        return [CacheLayer("sliding", elements, window) if i % 2 == 0 else CacheLayer("full", elements) for i in range(model.layers)]
    return [CacheLayer("sliding", elements, window)] * model.layers


def sizing(model: ModelInfo) -> Sizing:
    """A model's needs from its files when they are there, else from its config.json alone."""
    arch: Architecture | None = None
    why_not = "no config.json"
    if model.config is not None:
        try:
            arch = from_config(model.config)
        except UnknownArchitecture as exc:
            why_not = str(exc)
    notes = list(arch.notes) if arch else []
    quantized = bool(model.quantization)
    compute = "bf16"
    if model.weight_bytes > 0:
        weights: float | None = float(model.weight_bytes)
        source = f"the weight files ({model.format}, {model.tensor_count} tensors)"
        dominant = max(model.bytes_by_dtype, key=model.bytes_by_dtype.__getitem__) if model.bytes_by_dtype else "BF16"
        per_param = FILE_DTYPE_BYTES.get(dominant, 2.0)
        if dominant.startswith("F8"):
            compute = "fp8"

        def read(sequences: int) -> float:
            base: float = model.weight_bytes - model.not_decode_bytes - (0 if model.tied_embeddings else model.embedding_bytes)
            if model.experts and model.experts_per_token and model.expert_bytes:
                touched = 1 - (1 - model.experts_per_token / model.experts) ** max(sequences, 1)
                base -= model.expert_bytes * (1 - touched)
            return float(base)

        total = arch.params_total if arch else int(model.weight_bytes / per_param)
        active = arch.params_active if arch else read(1) / per_param
    elif arch is not None:
        per_param, how, quantized = _bytes_per_param(model.config or {}, arch)
        if "fp8" in how:
            compute = "fp8"
        weights = arch.params_total * per_param
        source = f"the config alone: {arch.params_total:,} parameters × {per_param:.3g} B ({how}); no weight files here"
        total, active = arch.params_total, arch.params_active

        def read(sequences: int) -> float:
            return arch.decode_read_params(sequences) * per_param

    else:
        weights, source, total, active = None, f"unknown: no weight files, and {why_not}", None, None

        def read(sequences: int) -> float:
            return 0.0

    cache = arch.cache if arch else _fallback_cache(model)
    return Sizing(
        name=model.name,
        path=model.path,
        format=model.format,
        weights_bytes=weights,
        weights_source=source,
        params_total=total,
        params_active=active,
        cache=cache,
        state_elements=arch.state_elements_per_sequence if arch else 0,
        layers=model.layers,
        heads=model.attention_heads,
        kv_heads=model.kv_heads,
        head_dim=model.head_dim,
        hidden=model.hidden_size,
        max_context=model.max_context,
        compute_dtype=compute,
        quantized=quantized,
        notes=notes,
        _read=read,
    )


# --- the plan -----------------------------------------------------------------------------------


@dataclass
class Step:
    """One decode step at a context and concurrency, per device."""

    context: int
    concurrency: int
    need_bytes: float | None
    fit: str
    read_bytes: float
    flops: float
    memory_s: float | None
    compute_s: float | None
    allreduce_s: float
    binding: str  # "bandwidth", "compute", "unknown"

    @property
    def step_s(self) -> float | None:
        roofs = [t for t in (self.memory_s, self.compute_s) if t is not None]
        return max(roofs) + self.allreduce_s if roofs else None

    @property
    def tps_per_sequence(self) -> float | None:
        return 1 / self.step_s if self.step_s else None

    @property
    def tps_total(self) -> float | None:
        return self.concurrency / self.step_s if self.step_s else None

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data.update(step_s=self.step_s, tps_per_sequence=self.tps_per_sequence, tps_total=self.tps_total)
        return data


@dataclass
class DeploymentPlan:
    sizing: Sizing
    hardware: Hardware
    gpus: int
    context: int
    concurrency: int
    kv_dtype: str
    weights_per_device: float | None
    kv_per_device: float
    overhead_per_device: float | None
    need_per_device: float | None
    usable_per_device: float | None
    fit: str  # "fits", "tight", "does not fit", "unknown"
    max_context: int | None  # at this concurrency (None: unknown; 0: not even one token)
    max_concurrency: int | None  # at this context
    step: Step
    sweep: list[Step]
    allreduce: str | None
    knobs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rule: str = HEADROOM_RULE

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k not in ("sizing", "hardware", "step", "sweep")}
        data["step"] = self.step.to_dict()
        data["sweep"] = [row.to_dict() for row in self.sweep]
        data["hardware"] = dict(self.hardware.__dict__)
        return data


def kv_shard(size: Sizing, gpus: int) -> float:
    """The share of the KV cache one of `gpus` tensor-parallel devices holds: KV heads split across
    devices, but never below one head each; MLA's latent is replicated on every device."""
    if gpus <= 1:
        return 1.0
    if size.mla:
        return 1.0
    if size.kv_heads:
        return max(1 / gpus, 1 / size.kv_heads)
    return 1 / gpus


class Planner:
    def __init__(self, size: Sizing, hardware: Hardware, gpus: int, kv_dtype: str):
        if gpus < 1:
            raise ValueError("gpus must be at least 1")
        self.size, self.hardware, self.gpus, self.kv_dtype = size, hardware, gpus, kv_dtype
        self.shard = kv_shard(size, gpus)

    @property
    def weights(self) -> float | None:
        return self.size.weights_bytes / self.gpus if self.size.weights_bytes is not None else None

    @property
    def overhead(self) -> float | None:
        weights = self.weights
        return RUNTIME_OVERHEAD_BYTES + RUNTIME_OVERHEAD_FRACTION * weights if weights is not None else None

    @property
    def usable(self) -> float | None:
        return self.hardware.memory_bytes * UTILIZATION if self.hardware.memory_bytes else None

    def kv(self, context: int, concurrency: int) -> float:
        return self.size.kv_bytes(context, self.kv_dtype) * concurrency * self.shard

    def need(self, context: int, concurrency: int) -> float | None:
        if self.weights is None or self.overhead is None:
            return None
        return self.weights + self.overhead + self.kv(context, concurrency)

    def fit(self, need: float | None) -> str:
        usable = self.usable
        if need is None or usable is None or not self.hardware.memory_bytes:
            return "unknown"
        if need <= usable:
            return "fits"
        return "tight" if need <= self.hardware.memory_bytes else "does not fit"

    def room(self) -> float | None:
        if self.usable is None or self.weights is None or self.overhead is None:
            return None
        return self.usable - self.weights - self.overhead

    def max_concurrency(self, context: int) -> int | None:
        room = self.room()
        if room is None:
            return None
        per_sequence = self.kv(context, 1)
        return max(int(room // per_sequence), 0) if per_sequence else None

    def max_context(self, concurrency: int, ceiling: int) -> int | None:
        """The longest context whose cache for `concurrency` sequences still fits (KV grows with the
        context until the windows cap it: searched, not divided)."""
        room = self.room()
        if room is None:
            return None
        if self.kv(1, concurrency) > room:
            return 0
        if self.kv(ceiling, concurrency) <= room:
            return ceiling
        low, high = 1, ceiling
        while low < high:
            middle = (low + high + 1) // 2
            if self.kv(middle, concurrency) <= room:
                low = middle
            else:
                high = middle - 1
        return low

    def flops(self, context: int, concurrency: int) -> float:
        size = self.size
        dense = 2 * (size.params_active or 0) * concurrency
        attention = 0.0
        if size.heads and size.head_dim:
            width = size.heads * size.head_dim
            for layer in size.cache:
                attention += 4 * width * min(context, layer.window or context)
        return (dense + attention * concurrency) / self.gpus

    def allreduce_s(self, concurrency: int) -> float:
        if self.gpus <= 1 or not self.size.layers or not self.size.hidden:
            return 0.0
        link = self.hardware.interconnect_gbps
        message = self.size.hidden * ACTIVATION_BYTES * concurrency
        traffic = 2 * (self.gpus - 1) / self.gpus * message
        per_call = (traffic / (link / 2 * 1e9) if link else 0.0) + ALLREDUCE_LATENCY_S
        return 2 * self.size.layers * per_call

    def step(self, context: int, concurrency: int) -> Step:
        read = self.size.read_bytes(concurrency) / self.gpus + self.kv(context, concurrency)
        flops = self.flops(context, concurrency)
        bandwidth = self.hardware.bandwidth_gbps
        memory_s = read / (bandwidth * 1e9) if bandwidth and read else None
        peak = self.hardware.peak_tflops.get(self.size.compute_dtype) or self.hardware.peak_tflops.get("bf16")
        compute_s = flops / (peak * 1e12) if peak and flops else None
        if memory_s is None and compute_s is None:
            binding = "unknown"
        elif compute_s is None or (memory_s is not None and memory_s >= compute_s):
            binding = "bandwidth"
        else:
            binding = "compute"
        need = self.need(context, concurrency)
        return Step(context, concurrency, need, self.fit(need), read, flops, memory_s, compute_s, self.allreduce_s(concurrency), binding)


def make_plan(size: Sizing, hardware: Hardware, context: int, concurrency: int, kv_dtype: str = "fp16", gpus: int = 1) -> DeploymentPlan:
    if context < 1 or concurrency < 1:
        raise ValueError("context and concurrency must be at least 1")
    planner = Planner(size, hardware, gpus, kv_dtype)
    ceiling = max(size.max_context or 0, context)
    step = planner.step(context, concurrency)
    contexts = sorted({c for c in SWEEP_CONTEXTS if c <= (size.max_context or max(SWEEP_CONTEXTS))} | {context})
    concurrencies = sorted(set(SWEEP_CONCURRENCY) | {concurrency})
    sweep = [planner.step(c, n) for c in contexts for n in concurrencies]
    allreduce = None
    if gpus > 1:
        per_step = planner.allreduce_s(concurrency)
        link = f"{hardware.interconnect} at {hardware.interconnect_gbps:g} GB/s" if hardware.interconnect_gbps else "an unknown link"
        allreduce = (
            f"over {gpus} devices: 2 all-reduces per layer ({2 * (size.layers or 0)} per step) of "
            f"{(size.hidden or 0) * ACTIVATION_BYTES * concurrency:,} bytes each ({concurrency} × hidden {size.hidden} × 2 B) over {link}: "
            f"about {per_step * 1e3:.2f} ms per step, latency-bound"
        )
    plan = DeploymentPlan(
        sizing=size,
        hardware=hardware,
        gpus=gpus,
        context=context,
        concurrency=concurrency,
        kv_dtype=kv_dtype,
        weights_per_device=planner.weights,
        kv_per_device=planner.kv(context, concurrency),
        overhead_per_device=planner.overhead,
        need_per_device=step.need_bytes,
        usable_per_device=planner.usable,
        fit=step.fit,
        max_context=planner.max_context(concurrency, ceiling),
        max_concurrency=planner.max_concurrency(context),
        step=step,
        sweep=sweep,
        allreduce=allreduce,
    )
    plan.knobs = _knobs(plan, planner)
    if size.max_context and context > size.max_context:
        plan.notes.append(
            f"{context:,} tokens is past the model's {size.max_context:,}-token maximum (max_position_embeddings): "
            "quality falls apart there unless RoPE scaling is configured"
        )
    if hardware.kind == "unified":
        plan.notes.append("the GPU shares this memory with the CPU and the operating system: leave room for both")
    return plan


def _knobs(plan: DeploymentPlan, planner: Planner) -> list[str]:
    """Which single change makes the plan fit, when it does not."""
    if plan.fit not in ("tight", "does not fit") or planner.room() is None:
        return []
    knobs = []
    for kv_dtype in ("fp8", "q8_0", "q4_0"):
        if KV_DTYPE_BYTES[kv_dtype] < KV_DTYPE_BYTES[plan.kv_dtype]:
            trial = Planner(plan.sizing, plan.hardware, plan.gpus, kv_dtype)
            if trial.fit(trial.need(plan.context, plan.concurrency)) == "fits":
                knobs.append(f"a {kv_dtype} KV cache (--kv-dtype {kv_dtype}) fits")
                break
    if plan.max_context and plan.max_context < plan.context:
        knobs.append(f"cap the context at {plan.max_context:,} tokens")
    if plan.max_concurrency and plan.max_concurrency < plan.concurrency:
        knobs.append(f"serve at most {_sequences(plan.max_concurrency)} at once at this context")
    if plan.hardware.is_gpu:
        for count in (2, 4, 8):
            if count > plan.gpus:
                trial = Planner(plan.sizing, plan.hardware, count, plan.kv_dtype)
                if trial.fit(trial.need(plan.context, plan.concurrency)) == "fits":
                    knobs.append(f"{count} devices in tensor parallel (--gpus {count}) fit")
                    break
    if not plan.sizing.quantized and plan.sizing.weights_bytes:
        smaller = replace(plan.sizing, weights_bytes=plan.sizing.weights_bytes * 4.5 / 16)
        trial = Planner(smaller, plan.hardware, plan.gpus, plan.kv_dtype)
        if trial.fit(trial.need(plan.context, plan.concurrency)) == "fits":
            knobs.append("4-bit weights (AWQ/GPTQ, Q4_K: about 4.5 bits per weight) fit")
    if (planner.room() or 0) <= 0:
        knobs.append("the weights alone take all the usable memory: quantize them, or split them across devices")
    return knobs


def _sequences(count: int) -> str:
    return f"{count:,} sequence{'s' if count != 1 else ''}"


def expected_cpu_range(file_dtype: str | None) -> tuple[float, float, str]:
    """The share of the bandwidth ceiling llama.cpp reached on CPUs of this kind, by weight type (issue
    #14's runs of llama.cpp c392e50: 1 and 2 threads, depth 0 and 2048, AVX-512 with and without AMX)."""
    kind = (file_dtype or "").upper()
    if kind in ("F32", "F16", "BF16"):
        return 0.50, 0.96, "16-bit weights"
    if kind.startswith("Q8"):
        return 0.45, 0.90, "8-bit weights"
    if kind.startswith(("Q4", "Q5", "IQ4", "Q3", "Q2")):
        return 0.40, 0.85, "4-bit weights"
    return 0.40, 0.96, "these weights"


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'s' if count != 1 else ''}"
