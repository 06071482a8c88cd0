"""A serving plan: what a model needs on a device (or N of them: tensor parallel within a node,
pipeline parallel across nodes), the limits that follow, and how fast a decode step can be.

Memory, per device:
  usable   = UTILIZATION × memory (vLLM's default --gpu-memory-utilization)
  need     = weights / N + KV at full context × concurrency / shards + 1 GiB + 5 % of the weights / N
  one rule for the verdict, the limits, the sweep and the knobs: need ≤ usable fits ("tight" when
  less than 5 % of usable is left), need > usable does not fit
KV per sequence: see sizing.py.
A decode step, per device (a roofline: the slower roof binds):
  time ≥ max(bytes read / bandwidth, FLOPs / peak throughput) + tensor-parallel all-reduces
  bytes read = the weights one step touches (MoE: the experts some sequence picks) + the KV cache
  FLOPs     = 2 × active parameters × sequences + attention over the cached tokens

Over 500 lines on purpose: the memory rule, the limits, the roofline and the knobs each read the
others' figures (a knob is a limit solved again), and kept in one module they stay one rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from decode_doctor.i18n import N_, joined, said
from decode_doctor.i18n.labels import Labelled

from .dtypes import KV_DTYPE_BYTES
from .hardware import Hardware
from .info import ModelFormat
from .sizing import Sizing
from .storage import Storage, llama_storage, vllm_storage

GIB = 1 << 30
UTILIZATION = 0.90
RUNTIME_OVERHEAD_BYTES = 1 * GIB
RUNTIME_OVERHEAD_FRACTION = 0.05
ALLREDUCE_LATENCY_S = 10e-6  # one small NCCL all-reduce on NVLink, order of magnitude
P2P_LATENCY_S = 10e-6  # one pipeline-stage hand-over between nodes (InfiniBand send/receive), order of magnitude
INTERNODE_GBPS = 50.0  # InfiniBand NDR, 400 Gb/s per GPU: the usual link between 8-GPU nodes
GPUS_PER_NODE = 8
TIGHT_SHARE = 0.95  # "tight": the need takes more than this share of the usable memory
ACTIVATION_BYTES = 2
SWEEP_CONTEXTS = (1024, 4096, 16384, 65536, 131072)
SWEEP_CONCURRENCY = (1, 4, 16, 64, 256)
HEADROOM_RULE_TEMPLATE = N_(
    "usable = {utilization:.0%} of each device's memory (vLLM's default --gpu-memory-utilization); "
    "need = weights + KV cache at full context × concurrency + 1 GiB + 5 % of the weights for the runtime; "
    "need above usable does not fit, within it fits (tight above {tight:.0%} of it)"
)
HEADROOM_RULE = HEADROOM_RULE_TEMPLATE.format(utilization=UTILIZATION, tight=TIGHT_SHARE)  # the plan's JSON says it in English


# --- the plan -----------------------------------------------------------------------------------


class Fit(Labelled):
    """The one verdict on memory (Planner.fit)."""

    FITS = "fits", N_("fits")
    TIGHT = "tight", N_("tight")  # within usable memory, less than 5 % of it left
    DOES_NOT_FIT = "does not fit", N_("does not fit")
    UNKNOWN = "unknown", N_("fit not known")  # the weights or the device's memory are not known


class Binding(Labelled):
    """Which roof a decode step hits first."""

    BANDWIDTH = "bandwidth", N_("bandwidth")
    COMPUTE = "compute", N_("compute")
    UNKNOWN = "unknown", N_("neither roof known")


@dataclass
class Step:
    """One decode step at a context and concurrency, per device."""

    context: int
    concurrency: int
    need_bytes: float | None
    fit: Fit
    read_bytes: float | None  # None: the weights are unknown, so is the speed
    flops: float
    memory_s: float | None
    compute_s: float | None
    allreduce_s: float
    binding: Binding
    pipeline_s: float = 0.0  # hand-overs between pipeline stages on different nodes

    @property
    def step_s(self) -> float | None:
        roofs = [t for t in (self.memory_s, self.compute_s) if t is not None]
        return max(roofs) + self.allreduce_s + self.pipeline_s if roofs else None

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


@dataclass(frozen=True)
class Layout:
    """How N GPUs serve one model: tensor parallel within a node, pipeline parallel across nodes."""

    tensor: int = 1
    pipeline: int = 1

    @property
    def gpus(self) -> int:
        return self.tensor * self.pipeline


def layout_for(gpus: int, per_node: int = GPUS_PER_NODE) -> Layout:
    """N GPUs on nodes of per_node: tensor parallel across a node's GPUs, one pipeline stage per node."""
    if gpus <= per_node:
        return Layout(gpus, 1)
    if gpus % per_node:
        raise ValueError(
            said(
                "{gpus} GPUs do not fill whole nodes of {per_node}: give a multiple of {per_node} (or --gpus-per-node)",
                gpus=gpus,
                per_node=per_node,
            )
        )
    return Layout(per_node, gpus // per_node)


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
    fit: Fit
    max_context: int | None  # at this concurrency (None: unknown; 0: not even one token)
    max_concurrency: int | None  # at this context
    step: Step
    sweep: list[Step]
    allreduce: str | None
    knobs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rule: str = HEADROOM_RULE
    layout: Layout = field(default_factory=Layout)
    gpus_per_node: int = GPUS_PER_NODE
    storage: Storage = field(default_factory=lambda: Storage.asked("fp16"))
    max_context_alone: int | None = None  # one sequence at most this long fits (0: not even one token)

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k not in ("sizing", "hardware", "step", "sweep", "layout", "storage")}
        data["storage"] = dict(self.storage.__dict__)
        data["step"] = self.step.to_dict()
        data["sweep"] = [row.to_dict() for row in self.sweep]
        data["hardware"] = dict(self.hardware.__dict__)
        data["tensor_parallel"], data["pipeline_parallel"] = self.layout.tensor, self.layout.pipeline
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
    """The plan's arithmetic for one layout: per device, a pipeline stage holds its share of the
    layers (weights and cache split by the stages), a tensor-parallel rank its share of each layer."""

    def __init__(self, size: Sizing, hardware: Hardware, gpus: int | Layout, kv_dtype: str | Storage):
        layout = gpus if isinstance(gpus, Layout) else Layout(gpus, 1)
        if layout.gpus < 1:
            raise ValueError(said("--gpus must be at least 1"))
        self.size, self.hardware, self.layout, self.kv_dtype = size, hardware, layout, kv_dtype
        self.gpus = layout.gpus
        self.shard = kv_shard(size, layout.tensor) / layout.pipeline

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

    def fit(self, need: float | None) -> Fit:
        """The one verdict rule: above usable does not fit; within it fits, tight near its end."""
        usable = self.usable
        if need is None or usable is None or not self.hardware.memory_bytes:
            return Fit.UNKNOWN
        if need > usable:
            return Fit.DOES_NOT_FIT
        return Fit.TIGHT if need > TIGHT_SHARE * usable else Fit.FITS

    def room(self, share: float = 1.0) -> float | None:
        """What the caches may take per device: usable memory (share of it: TIGHT_SHARE for a plan that
        "fits" rather than "tight") less the weights and the runtime."""
        if self.usable is None or self.weights is None or self.overhead is None:
            return None
        return self.usable * share - self.weights - self.overhead

    def max_concurrency(self, context: int) -> int | None:
        room = self.room()
        if room is None:
            return None
        per_sequence = self.kv(context, 1)
        return max(int(room // per_sequence), 0) if per_sequence else None

    def max_context(self, concurrency: int, ceiling: int, share: float = 1.0) -> int | None:
        """The longest context whose cache for `concurrency` sequences still fits (KV grows with the
        context until the windows cap it: searched, not divided)."""
        room = self.room(share)
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
        """Two all-reduces per layer among a node's tensor-parallel ranks (every stage in turn)."""
        tensor = self.layout.tensor
        if tensor <= 1 or not self.size.layers or not self.size.hidden:
            return 0.0
        link = self.hardware.interconnect_gbps
        message = self.size.hidden * ACTIVATION_BYTES * concurrency
        traffic = 2 * (tensor - 1) / tensor * message
        per_call = (traffic / (link / 2 * 1e9) if link else 0.0) + ALLREDUCE_LATENCY_S
        return 2 * self.size.layers * per_call

    def pipeline_s(self, concurrency: int) -> float:
        """A token's activations handed from each node's stage to the next, over the inter-node link."""
        stages = self.layout.pipeline
        if stages <= 1 or not self.size.hidden:
            return 0.0
        message = self.size.hidden * ACTIVATION_BYTES * concurrency
        return (stages - 1) * (message / (INTERNODE_GBPS * 1e9) + P2P_LATENCY_S)

    def step(self, context: int, concurrency: int) -> Step:
        """Per-sequence latency: a token passes every pipeline stage in turn, so a stage's time counts
        once per stage (pipelining raises the aggregate, not a sequence's speed)."""
        stages = self.layout.pipeline
        weights_read = self.size.read_bytes(concurrency)
        kv = self.kv(context, concurrency)
        read = weights_read / self.gpus + kv if weights_read is not None else None
        flops = self.flops(context, concurrency)
        bandwidth = self.hardware.bandwidth_gbps
        memory_s = stages * read / (bandwidth * 1e9) if bandwidth and read else None
        peak = self.hardware.peak_tflops.get(self.size.compute_dtype) or self.hardware.peak_tflops.get("bf16")
        compute_s = stages * flops / (peak * 1e12) if peak and flops and read is not None else None
        if memory_s is None and compute_s is None:
            binding = Binding.UNKNOWN
        elif compute_s is None or (memory_s is not None and memory_s >= compute_s):
            binding = Binding.BANDWIDTH
        else:
            binding = Binding.COMPUTE
        need = self.need(context, concurrency)
        timed = binding is not Binding.UNKNOWN
        allreduce = self.allreduce_s(concurrency) if timed else 0.0
        pipeline = self.pipeline_s(concurrency) if timed else 0.0
        return Step(context, concurrency, need, self.fit(need), read, flops, memory_s, compute_s, allreduce, binding, pipeline)


def make_plan(
    size: Sizing,
    hardware: Hardware,
    context: int,
    concurrency: int,
    kv_dtype: str = "fp16",
    gpus: int = 1,
    gpus_per_node: int = GPUS_PER_NODE,
    storage: Storage | None = None,
) -> DeploymentPlan:
    """The plan for a --kv-dtype; storage: how an engine stores the caches (default: the --kv-dtype's
    bytes as asked, recurrent state in 16 bit)."""
    if context < 1 or concurrency < 1:
        raise ValueError(said("context and concurrency must be at least 1"))
    stored = storage or Storage.asked(kv_dtype)
    layout = layout_for(gpus, gpus_per_node) if hardware.is_gpu else Layout(gpus, 1)
    planner = Planner(size, hardware, layout, stored)
    ceiling = max(size.max_context or 0, context)
    step = planner.step(context, concurrency)
    contexts = sorted({c for c in SWEEP_CONTEXTS if c <= (size.max_context or max(SWEEP_CONTEXTS))} | {context})
    concurrencies = sorted(set(SWEEP_CONCURRENCY) | {concurrency})
    sweep = [planner.step(c, n) for c in contexts for n in concurrencies]
    allreduce = None
    if layout.tensor > 1 and step.binding is not Binding.UNKNOWN:
        per_step = planner.allreduce_s(concurrency)
        link = (
            said(
                "{interconnect} at {interconnect_gbps:g} GB/s",
                interconnect=hardware.interconnect,
                interconnect_gbps=hardware.interconnect_gbps,
            )
            if hardware.interconnect_gbps
            else said("an unknown link")
        )
        parts = [
            said(
                "over {tensor} devices: 2 all-reduces per layer ({reduces} per step) of {bytes:,} bytes each ({concurrency} × "
                "hidden_size {hidden} × 2 B) "
                "over {link}: about {ms:.2f} ms per step, latency-bound",
                tensor=layout.tensor,
                reduces=2 * (size.layers or 0),
                bytes=(size.hidden or 0) * ACTIVATION_BYTES * concurrency,
                concurrency=concurrency,
                hidden=size.hidden,
                link=link,
                ms=per_step * 1e3,
            )
        ]
        if layout.pipeline > 1:
            parts.append(
                said(
                    "{pipeline} pipeline stages, one per node of {gpus_per_node}: {handovers} hand-over(s) per token over InfiniBand "
                    "({gbps:g} GB/s per GPU assumed), about {ms:.3f} ms, and each sequence waits for every stage in turn",
                    pipeline=layout.pipeline,
                    gpus_per_node=gpus_per_node,
                    handovers=layout.pipeline - 1,
                    gbps=INTERNODE_GBPS,
                    ms=step.pipeline_s * 1e3,
                )
            )
        allreduce = joined("; ", parts)
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
        max_context_alone=planner.max_context(1, ceiling),
        step=step,
        sweep=sweep,
        allreduce=allreduce,
        layout=layout,
        gpus_per_node=gpus_per_node,
        storage=stored,
    )
    plan.knobs = _knobs(plan, planner)
    if size.max_context and context > size.max_context:
        if size.yarn_context:
            note = said(
                "{context:,} tokens is past the {max_context:,} tokens its RoPE scaling reaches ({how}): quality falls apart there",
                context=context,
                max_context=size.max_context,
                how=size.rope_note,
            )
        else:
            note = said(
                "{context:,} tokens is past the model's {max_context:,}-token maximum (max_position_embeddings): quality falls "
                "apart there unless RoPE scaling is configured",
                context=context,
                max_context=size.max_context,
            )
        plan.notes.append(note)
    if hardware.kind == "unified":
        plan.notes.append(said("the GPU shares this memory with the CPU and the operating system: leave room for both"))
    return plan


FOUR_BIT_BYTES = 4.5 / 8  # AWQ/GPTQ/Q4_K: about 4.5 bits per weight with their scales


Fits = Callable[..., bool]  # fits(trial_size=…, layout=…, stored=…): whether the plan fits with that one change


def _knobs(plan: DeploymentPlan, planner: Planner) -> list[str]:
    """Which single change makes the plan fit, when it does not (or only tightly): only changes that
    change something for this model (no smaller weights than it already has)."""
    if plan.fit not in (Fit.TIGHT, Fit.DOES_NOT_FIT) or planner.room() is None:
        return []
    size = plan.sizing

    def fits(trial_size: Sizing = size, layout: Layout = plan.layout, stored: Storage = plan.storage) -> bool:
        trial = Planner(trial_size, plan.hardware, layout, stored)
        return trial.fit(trial.need(plan.context, plan.concurrency)) is Fit.FITS

    knobs = [*_cache_knobs(plan, fits), *_limit_knobs(plan), *_device_knobs(plan, fits), *_weight_knobs(plan, planner, fits)]
    if not knobs:  # no one change is enough: two together (one sequence, a shorter context), or more than that
        alone = planner.max_context(1, max(size.max_context or 0, plan.context), TIGHT_SHARE)
        if alone:
            knobs.append(said("one sequence at a time, of at most {context:,} tokens, fits (no single change does)", context=alone))
        else:
            knobs.append(said("not one sequence fits beside the weights: more devices, or smaller weights and caches together"))
    return knobs


def _cache_knobs(plan: DeploymentPlan, fits: Fits) -> list[str]:
    """A smaller KV cache type, or the SSM state in bfloat16."""
    knobs: list[str] = []
    for kv_dtype in ("fp8", "q8_0", "q4_0"):
        if KV_DTYPE_BYTES[kv_dtype] < KV_DTYPE_BYTES[plan.kv_dtype] and fits(stored=same_engine(plan.storage, plan.sizing, kv_dtype)):
            if kv_dtype == "fp8":
                knobs.append(said("a {kv_dtype} KV cache (--kv-dtype {kv_dtype}) fits", kv_dtype=kv_dtype))
            else:  # llama.cpp's cache types: vLLM has no int8 or int4 KV cache
                knobs.append(said("a {kv_dtype} KV cache (--kv-dtype {kv_dtype}, llama.cpp only) fits", kv_dtype=kv_dtype))
            break
    half = replace(plan.storage, ssm_bytes=2, ssm_dtype="bfloat16")
    if plan.storage.engine == "vllm" and plan.storage.ssm_bytes > 2 and plan.sizing.ssm_state_elements and fits(stored=half):
        knobs.append(said("the SSM state in bfloat16 (vLLM's --mamba-ssm-cache-dtype bfloat16, at its accuracy risk) fits"))
    return knobs


def _limit_knobs(plan: DeploymentPlan) -> list[str]:
    """A shorter context, or fewer sequences at once."""
    knobs: list[str] = []
    if plan.max_context and plan.max_context < plan.context:
        knobs.append(said("cap the context at {max_context:,} tokens", max_context=plan.max_context))
    if plan.max_concurrency and plan.max_concurrency < plan.concurrency:
        knobs.append(said("serve at most {max_concurrency} at once at this context", max_concurrency=_sequences(plan.max_concurrency)))
    return knobs


def _device_knobs(plan: DeploymentPlan, fits: Fits) -> list[str]:
    """The fewest more GPUs that fit: within the node first, then whole nodes."""
    if not plan.hardware.is_gpu:
        return []
    size, per_node = plan.sizing, plan.gpus_per_node
    tensor = [Layout(count, 1) for count in valid_tensor_sizes(size, per_node)]
    nodes = [Layout(per_node, n) for n in (2, 4) if per_node in valid_tensor_sizes(size, per_node)]
    for layout in tensor + nodes:
        if layout.gpus > plan.gpus and fits(layout=layout):
            if layout.pipeline > 1:
                spread = said(
                    "{gpus} GPUs on {pipeline} nodes of {per_node} (--gpus {gpus}) fit",
                    gpus=layout.gpus,
                    pipeline=layout.pipeline,
                    per_node=per_node,
                )
                return [spread]
            return [said("{gpus} GPUs in tensor parallel (--gpus {gpus}) fit", gpus=layout.gpus)]
    return []


def _weight_knobs(plan: DeploymentPlan, planner: Planner, fits: Fits) -> list[str]:
    """Smaller weights (FP8 where the device computes in it, 4-bit), or that the weights alone do not fit."""
    size = plan.sizing
    weights = size.weights_bytes
    knobs: list[str] = []
    fp8 = bool(weights) and size.bytes_per_param > 1.2 and "fp8" in plan.hardware.peak_tflops and size.format is not ModelFormat.GGUF
    if weights and fp8 and fits(trial_size=replace(size, weights_bytes=weights / size.bytes_per_param)):
        knobs.append(said("FP8 weights (1 B per weight; {device} computes in FP8) fit", device=plan.hardware.name))
    four_bit = replace(size, weights_bytes=(weights or 0) * FOUR_BIT_BYTES / size.bytes_per_param)
    if weights and size.bytes_per_param > FOUR_BIT_BYTES * 1.1 and fits(trial_size=four_bit):
        knobs.append(said("4-bit weights (AWQ/GPTQ, Q4_K: about 4.5 bits per weight) fit"))
    if (planner.room() or 0) <= 0:
        if size.bytes_per_param > FOUR_BIT_BYTES * 1.1:
            knobs.append(
                said(
                    "the weights with their runtime overhead take all the usable memory before any KV cache: quantize them, or split "
                    "them across devices"
                )
            )
        else:
            knobs.append(
                said("the weights with their runtime overhead take all the usable memory before any KV cache: split them across devices")
            )
    return knobs


def same_engine(storage: Storage, size: Sizing, kv_dtype: str) -> Storage:
    """The storage the same engine would use for another --kv-dtype."""
    if storage.engine == "vllm":
        return vllm_storage(kv_dtype, size.family, size.config_ssm_dtype)
    if storage.engine == "llama.cpp":
        return llama_storage(kv_dtype)
    return Storage.asked(kv_dtype)


def valid_tensor_sizes(size: Sizing, limit: int = GPUS_PER_NODE) -> list[int]:
    """Tensor-parallel sizes up to limit that vLLM accepts for this model: the attention heads divide
    by the size, and the KV heads either divide by it or it by them (a head replicated)."""
    heads, kv_heads = size.heads, size.kv_heads
    found = []
    for count in range(1, limit + 1):
        if heads and heads % count:
            continue
        if kv_heads and not size.mla and kv_heads % count and count % kv_heads:
            continue
        if any(units % count for units in size.tp_units.values()):
            continue
        found.append(count)
    return found


def _sequences(count: int) -> str:
    return said("{count:,} sequence", count=count) if count == 1 else said("{count:,} sequences", count=count)


def expected_cpu_range(file_dtype: str | None) -> tuple[float, float, str]:
    """The share of the bandwidth ceiling llama.cpp reached on CPUs of this kind, by weight type (issue
    #14's runs of llama.cpp c392e50: 1 and 2 threads, depth 0 and 2048, AVX-512 with and without AMX)."""
    kind = (file_dtype or "").upper()
    if kind in ("F32", "F16", "BF16"):
        return 0.50, 0.96, N_("16-bit weights")
    if kind.startswith("Q8"):
        return 0.45, 0.90, N_("8-bit weights")
    if kind.startswith(("Q4", "Q5", "IQ4", "Q3", "Q2")):
        return 0.40, 0.85, N_("4-bit weights")
    return 0.40, 0.96, N_("these weights")


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'s' if count != 1 else ''}"
