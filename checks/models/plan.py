"""A serving plan: what a model needs on a device (or N of them: tensor parallel within a node,
pipeline parallel across nodes), the limits that follow, and how fast a decode step can be.

Memory, per device:
  usable   = UTILIZATION × memory (vLLM's default --gpu-memory-utilization)
  need     = weights / N + KV at full context × concurrency / shards + 1 GiB + 5 % of the weights / N
  one rule for the verdict, the limits, the sweep and the knobs: need ≤ usable fits ("tight" when
  less than 5 % of usable is left), need > usable does not fit
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

from decode_doctor.engine.units import human_binary
from decode_doctor.i18n import N_, joined, reason, said

from .architecture import Architecture, CacheLayer, UnknownArchitecture, from_config, text_config
from .contract import ModelInfo
from .dtypes import KV_DTYPE_BYTES
from .hardware import Hardware
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
MXFP4_BYTES = 17 / 32  # 32 four-bit values and one shared 8-bit exponent


def element_bytes(dtype: str) -> float:
    """Bytes per weight of a stored type: a GGUF block type's block bytes over its elements, a
    safetensors dtype's bits over 8 (16-bit when the type is not known)."""
    from .modelfiles import GGML_TYPES, SAFETENSORS_BITS

    for name, block, size in GGML_TYPES.values():
        if name == dtype:
            return size / block
    return SAFETENSORS_BITS.get(dtype, 16) / 8


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
    conv_state_elements: int  # a recurrent layer's convolution window, per sequence
    ssm_state_elements: int  # its SSM (or delta-rule) state, per sequence
    layers: int | None
    heads: int | None
    kv_heads: int | None
    head_dim: int | None
    hidden: int | None
    max_context: int | None
    compute_dtype: str  # which throughput roof applies: "bf16", "fp8", "int8"
    quantized: bool
    bytes_per_param: float = 2.0  # on average, as stored (what a quantizing knob would shrink)
    engine_max_context: int | None = None  # the longest --max-model-len vLLM derives from the config (RoPE scaling included)
    engine_max_source: str = ""  # how: "max_position_embeddings 4,096", "original 4,096 × yarn factor 32"
    tp_units: dict[str, int] = field(default_factory=dict)  # beyond attention heads, what tensor parallel must divide
    notes: list[str] = field(default_factory=list)
    family: str = ""  # the model_type the architecture was sized as (engines decide some storage by it)
    config_ssm_dtype: str | None = None  # the SSM state type config.json names (mamba_ssm_cache_dtype, mamba_ssm_dtype)
    yarn_context: int | None = None  # the length a YaRN scaling in config.json reaches beyond max_position_embeddings
    rope_note: str = ""  # that scaling: "yarn factor 4 over 32,768"
    _read: Callable[[int], float | None] = field(default=lambda sequences: None, repr=False)

    @property
    def mla(self) -> bool:
        return any(layer.kind == "mla" for layer in self.cache)

    def read_bytes(self, sequences: int) -> float | None:
        """Weight bytes one decode step reads for `sequences` at once (None: the weights are unknown)."""
        return self._read(sequences) if self.weights_bytes is not None else None

    @property
    def state_elements(self) -> int:
        return self.conv_state_elements + self.ssm_state_elements

    def storage(self, kv: str | Storage) -> Storage:
        return kv if isinstance(kv, Storage) else Storage.asked(kv)

    def _slots(self, layer: CacheLayer) -> int:
        """K/V head slots one token of this layer fills (MLA's latent is one)."""
        if layer.kind == "mla":
            return 1
        return layer.elements_per_token // (2 * self.head_dim) if self.head_dim else 0

    def layer_bytes_per_token(self, layer: CacheLayer, kv: str | Storage) -> float:
        storage = self.storage(kv)
        return layer.elements_per_token * storage.kv_element_bytes + self._slots(layer) * storage.kv_slot_bytes

    def kv_bytes_by_kind(self, kv: str | Storage) -> dict[str, float]:
        """Cache bytes per token by layer kind (full, sliding, chunked, mla), before windows cap them."""
        kinds: dict[str, float] = {}
        for layer in self.cache:
            kinds[layer.kind] = kinds.get(layer.kind, 0.0) + self.layer_bytes_per_token(layer, kv)
        return kinds

    def kv_bytes_per_token(self, kv: str | Storage) -> float:
        """Every layer's bytes for one token, windows aside (what the first tokens of a sequence cost)."""
        return sum(self.layer_bytes_per_token(layer, kv) for layer in self.cache)

    def kv_growth_bytes_per_token(self, kv: str | Storage) -> float:
        """What each token adds once every window is full: the layers that keep every token."""
        return sum(self.layer_bytes_per_token(layer, kv) for layer in self.cache if not layer.window)

    def kv_window_bytes(self, kv: str | Storage) -> float:
        """The window-bounded layers' bytes per sequence once their windows are full (sliding, chunked)."""
        return sum(self.layer_bytes_per_token(layer, kv) * layer.window for layer in self.cache if layer.window)

    def state_bytes(self, kv: str | Storage) -> float:
        storage = self.storage(kv)
        return self.conv_state_elements * storage.conv_bytes + self.ssm_state_elements * storage.ssm_bytes

    def kv_bytes(self, context: int, kv: str | Storage) -> float:
        """Cache bytes of one sequence at `context` tokens, the fixed state included."""
        tokens = sum(self.layer_bytes_per_token(layer, kv) * min(context, layer.window or context) for layer in self.cache)
        return tokens + self.state_bytes(kv)


@dataclass(frozen=True)
class ConfigWeights:
    """How a checkpoint stores its weights, from config.json: bytes per parameter outside and inside
    the routed experts (MXFP4 packs only the experts), whether it is quantized, and how that was decided."""

    dense: float
    experts: float
    how: str
    quantized: bool
    compute: str  # the throughput roof: "bf16", "fp8"

    def total(self, arch: Architecture) -> float:
        return (arch.params_total - arch.params_experts) * self.dense + arch.params_experts * self.experts


class UnknownWeights(ValueError):
    """The config names a quantization whose bytes per weight this does not know."""


def config_weights(config: dict[str, Any], arch: Architecture) -> ConfigWeights:
    """Bytes per parameter as served; UnknownWeights for a quantization method this cannot size."""
    quant = config.get("quantization_config") if isinstance(config.get("quantization_config"), dict) else None
    if quant:
        method = str(quant.get("quant_method") or quant.get("quant_type") or "").lower()
        if method == "mxfp4":
            matrices = arch.params_expert_matrices or arch.params_experts
            expert_bytes = (
                (matrices * MXFP4_BYTES + (arch.params_experts - matrices) * 2) / arch.params_experts if arch.params_experts else 2.0
            )
            how = said("mxfp4: the routed experts' matrices {amount:.2f} bits per weight, everything else 16-bit", amount=MXFP4_BYTES * 8)
            return ConfigWeights(2.0, expert_bytes, how, True, "bf16")
        bits = _quant_bits(method, quant)
        if method in ("fp8", "fbgemm_fp8") or (method == "compressed-tensors" and bits == "float8"):
            return ConfigWeights(1.0, 1.0, said("{method} quantization: 1 B per parameter", method=method), True, "fp8")
        if isinstance(bits, int) and bits in (2, 3, 4, 8):
            dense = arch.params_total - arch.params_embedding - arch.params_output
            # packed weights with 16-bit scales per group of 128; the embedding and head stay 16-bit
            average = (dense * bits / 8 * (1 + 16 / (128 * bits)) + 2 * (arch.params_embedding + arch.params_output)) / arch.params_total
            return ConfigWeights(
                average,
                average,
                said("{method} {bits}-bit quantization (embedding and head in 16 bit)", method=method, bits=bits),
                True,
                "bf16",
            )
        raise UnknownWeights(
            said("quantization_config names {value}, whose bytes per weight this does not know", value=repr(method or "no method"))
        )
    dtype = (arch.dtype or "").lower()
    if dtype in ("float32", "fp32"):
        return ConfigWeights(2.0, 2.0, said("float32 checkpoint, served in 16 bit (the engines' default dtype)"), False, "bf16")
    if dtype in ("bfloat16", "float16", "bf16", "fp16"):
        return ConfigWeights(2.0, 2.0, dtype, False, "bf16")
    return ConfigWeights(2.0, 2.0, said("{value} torch_dtype in the config: 16 bit assumed", value=dtype or "no"), False, "bf16")


def _quant_bits(method: str, quant: dict[str, Any]) -> int | str | None:
    if method in ("awq", "gptq", "bitsandbytes", "bnb"):
        bits = quant.get("bits") or quant.get("w_bit") or (4 if quant.get("load_in_4bit") or method != "bitsandbytes" else 8)
        return bits if isinstance(bits, int) else None
    if method == "compressed-tensors":
        groups = quant.get("config_groups")
        weights = [g.get("weights") for g in groups.values() if isinstance(g, dict)] if isinstance(groups, dict) else []
        first = next((w for w in weights if isinstance(w, dict)), None)
        if first is None:
            return None
        if first.get("type") == "float" and first.get("num_bits") == 8:
            return "float8"
        return first.get("num_bits") if isinstance(first.get("num_bits"), int) else None
    return None


RECURRENT_KEYS = ("hybrid_override_pattern", "layers_block_type", "linear_num_value_heads", "mamba_d_state", "ssm_state_size")
# GGUF architectures whose sliding-window layers follow a fixed pattern (llama.cpp's per-model
# swa pattern): index → is that layer sliding
SWA_PATTERNS = {
    "gemma2": lambda i: i % 2 == 0,
    "gemma3": lambda i: (i + 1) % 6 != 0,
    "gpt-oss": lambda i: i % 2 == 0,
    "cohere2": lambda i: (i + 1) % 4 != 0,
}


def _fallback_cache(model: ModelInfo) -> tuple[list[CacheLayer], list[str]]:
    """From the header figures alone (GGUF metadata, or a config this does not size), and what it
    assumed; empty when the layers' kinds cannot be known (a hybrid or linear-attention model)."""
    if not model.layers:
        return [], []
    config = model.config or {}
    text = text_config(config) if config else {}
    if model.recurrent or any(key in text for key in RECURRENT_KEYS):
        return [], [said("its layers mix attention with state-space or linear-attention layers this cannot size")]
    if model.kv_latent_dim:
        return [CacheLayer("mla", model.kv_latent_dim)] * model.layers, []
    if not (model.kv_heads and model.head_dim):
        return [], []
    elements = 2 * model.kv_heads * model.head_dim
    types = text.get("layer_types")
    window = model.sliding_window or (text.get("sliding_window") if text.get("use_sliding_window") is not False else None)
    if isinstance(types, list) and len(types) == model.layers:
        if not set(types) <= {"full_attention", "sliding_attention"} or ("sliding_attention" in types and not window):
            return [], [said("its layer_types ({types}) name layers this cannot size", types=", ".join(sorted(map(str, set(types))))[:80])]
        return [CacheLayer("sliding", elements, window) if t == "sliding_attention" else CacheLayer("full", elements) for t in types], [
            said("the cache per layer from its layer_types")
        ]
    if not window:
        return [CacheLayer("full", elements)] * model.layers, [
            said("every one of the {layers} layers sized as full attention", layers=model.layers)
        ]
    arch = (model.architecture or "").lower()
    sliding = next((rule for name, rule in SWA_PATTERNS.items() if arch.startswith(name)), None)
    if sliding is not None:
        return [CacheLayer("sliding", elements, window) if sliding(i) else CacheLayer("full", elements) for i in range(model.layers)], []
    note = said(
        "a {window:,}-token window is named, but not which layers use it: every layer sized as full attention (an upper bound)",
        window=window,
    )
    return [CacheLayer("full", elements)] * model.layers, [note]


def sizing(model: ModelInfo) -> Sizing:
    """A model's needs from its files when they are there, else from its config.json alone. What
    cannot be known stays unknown (weights None, cache empty), with the reason in the notes."""
    arch: Architecture | None = None
    why_not: str = said("no config.json")
    if model.config is not None:
        try:
            arch = from_config(model.config)
        except UnknownArchitecture as exc:
            why_not = reason(exc)
    notes = list(arch.notes) if arch else []
    quantized = bool(model.quantization)
    compute = "bf16"
    per_param = 2.0
    read: Callable[[int], float | None]
    if model.weight_bytes > 0:
        weights: float | None = float(model.weight_bytes)
        source = said("the weight files ({format}, {tensor_count} tensors)", format=model.format, tensor_count=model.tensor_count)
        dominant = model.dominant_dtype or "BF16"
        per_param = element_bytes(dominant)
        if dominant.startswith("F8"):
            compute = "fp8"

        def read_files(sequences: int) -> float | None:
            base: float = model.weight_bytes - model.not_decode_bytes - (0 if model.tied_embeddings else model.embedding_bytes)
            if model.experts and model.experts_per_token and model.expert_bytes:
                touched = 1 - (1 - model.experts_per_token / model.experts) ** max(sequences, 1)
                base -= model.expert_bytes * (1 - touched)
            return float(base)

        read = read_files
        total = arch.params_total if arch else int(model.weight_bytes / per_param)
        active = arch.params_active if arch else (read_files(1) or 0.0) / per_param
        if arch:
            per_param = model.weight_bytes / max(arch.params_total, 1)
    elif arch is not None:
        try:
            stored = config_weights(model.config or {}, arch)
        except UnknownWeights as exc:
            stored = None
            why_not = reason(exc)
        if stored is not None:
            compute, quantized = stored.compute, stored.quantized
            weights = stored.total(arch)
            per_param = weights / arch.params_total
            source = said(
                "the config alone: {params_total:,} parameters, {weights} ({how}); no weight files here",
                params_total=arch.params_total,
                weights=human_binary(weights),
                how=stored.how,
            )
            total, active = arch.params_total, arch.params_active
            layout = stored

            def read_config(sequences: int) -> float | None:
                experts_read = arch.expert_read_params(sequences)
                return (arch.decode_read_params(sequences) - experts_read) * layout.dense + experts_read * layout.experts

            read = read_config
        else:
            weights, source, total, active = (
                None,
                said("unknown: no weight files, and {why_not}", why_not=why_not),
                arch.params_total,
                arch.params_active,
            )
            read = _unknown
    else:
        weights, source, total, active = None, said("unknown: no weight files, and {why_not}", why_not=why_not), None, None
        read = _unknown

    if arch:
        cache = arch.cache
    else:
        cache, assumed = _fallback_cache(model)
        if cache and model.config is not None:
            how = joined("; ", assumed) if assumed else said("the cache from its attention figures")
            notes.append(said("{why_not}: {how}", why_not=why_not, how=how))
        elif not cache and assumed:
            notes.append(said("the cache is unknown: {why}", why=joined("; ", assumed)))
    derived, derived_from = vllm_max_context(model.config or {})
    yarn, yarn_how = yarn_context(model.config or {})
    longest = max(model.max_context or 0, yarn or 0) or None
    if arch and arch.params_mtp:
        notes.append(
            said(
                "the checkpoint also holds {params_mtp:,} multi-token-prediction parameters (not served unless speculative)",
                params_mtp=arch.params_mtp,
            )
        )
    return Sizing(
        name=model.name,
        path=model.path,
        format=model.format,
        weights_bytes=weights,
        weights_source=source,
        params_total=total,
        params_active=active,
        cache=cache,
        conv_state_elements=arch.conv_state_elements if arch else 0,
        ssm_state_elements=arch.ssm_state_elements if arch else 0,
        layers=model.layers,
        heads=model.attention_heads,
        kv_heads=model.kv_heads,
        head_dim=model.head_dim,
        hidden=model.hidden_size,
        max_context=longest,
        compute_dtype=compute,
        quantized=quantized,
        bytes_per_param=per_param,
        engine_max_context=derived,
        engine_max_source=derived_from,
        tp_units=dict(arch.tp_units) if arch else {},
        notes=notes,
        family=arch.family if arch else "",
        yarn_context=yarn if yarn and yarn > (model.max_context or 0) else None,
        rope_note=yarn_how,
        config_ssm_dtype=_ssm_dtype(model.config or {}),
        _read=read,
    )


def _ssm_dtype(config: dict[str, Any]) -> str | None:
    text = text_config(config) if config else {}
    for key in ("mamba_ssm_cache_dtype", "mamba_ssm_dtype"):
        if isinstance(text.get(key), str):
            return str(text[key])
    return None


MAX_LENGTH_KEYS = (
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length", "max_target_positions",
    "max_sequence_length", "max_seq_length", "seq_len",
)  # fmt: skip


# RoPE types whose factor vLLM does not apply to the length key (vllm/config/model.py, _get_and_verify_max_len, 0.33):
# su, longrope and llama3 state the stretched length already; YaRN's length key is taken as already scaled
ROPE_UNSCALED = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
YARN_TYPES = ("yarn", "deepseek_yarn")


def _rope_parameters(text: dict[str, Any]) -> list[dict[str, Any]]:
    """The config's RoPE parameters (rope_parameters, or the older rope_scaling), one per layer type when nested."""
    found = text.get("rope_parameters") or text.get("rope_scaling")
    if not isinstance(found, dict):
        return []
    nested = [value for value in found.values() if isinstance(value, dict)]
    return nested if nested and len(nested) == len(found) else [found]


def vllm_max_context(config: dict[str, Any]) -> tuple[int | None, str]:
    """The longest max_model_len vLLM 0.33 starts with (without VLLM_ALLOW_LONG_MAX_MODEL_LEN), as its
    ModelConfig derives it (vllm/config/model.py, _get_and_verify_max_len; model_arch_config_convertor.py,
    derive_max_model_len_and_key): the smallest length key of the text config, model_max_length when
    there is one; then, unless the model is a Gemma 3, a RoPE scaling of a type other than su, longrope,
    llama3 and the YaRN types multiplies it by its factor. (A tokenizer_config.json model_max_length
    below it lowers it further; that file is not read here.)"""
    text = text_config(config) if config else {}
    lengths = [(text[key], key) for key in MAX_LENGTH_KEYS if _number(text.get(key))]
    if not lengths:
        return (2048, "no length key in config.json: vLLM assumes 2,048") if text else (None, "")
    length, key = min(lengths)
    if _number(text.get("model_max_length")):
        length, key = text["model_max_length"], "model_max_length"
    how = f"{key} {length:,}"
    if "gemma3" not in str(text.get("model_type", "")):
        for rope in _rope_parameters(text)[:1]:  # vLLM assumes every layer type scales alike
            kind = rope.get("rope_type") or rope.get("type")
            factor = rope.get("factor")
            if kind not in ROPE_UNSCALED and _number(factor):
                length = length * factor
                how += f" × {kind} factor {factor:g}"
    return int(length), how


def yarn_context(config: dict[str, Any]) -> tuple[int | None, str]:
    """(the length a YaRN scaling in config.json reaches, how): original_max_position_embeddings × factor
    (the model cards' recipe: add the rope_scaling block, serve 4 × 32,768); None without one."""
    text = text_config(config) if config else {}
    for rope in _rope_parameters(text)[:1]:
        kind = rope.get("rope_type") or rope.get("type")
        original, factor = rope.get("original_max_position_embeddings"), rope.get("factor")
        if (
            kind in YARN_TYPES
            and isinstance(original, int | float)
            and isinstance(factor, int | float)
            and _number(original)
            and _number(factor)
        ):
            return int(original * factor), f"{kind} factor {factor:g} over {int(original):,}"
    return None, ""


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < float("inf")


def _unknown(sequences: int) -> float | None:
    return None


# --- the plan -----------------------------------------------------------------------------------


@dataclass
class Step:
    """One decode step at a context and concurrency, per device."""

    context: int
    concurrency: int
    need_bytes: float | None
    fit: str
    read_bytes: float | None  # None: the weights are unknown, so is the speed
    flops: float
    memory_s: float | None
    compute_s: float | None
    allreduce_s: float
    binding: str  # "bandwidth", "compute", "unknown"
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
        raise ValueError(f"{gpus} GPUs do not fill whole nodes of {per_node}: give a multiple of {per_node} (or --gpus-per-node)")
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
    fit: str  # "fits", "tight", "does not fit", "unknown"
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
            raise ValueError("gpus must be at least 1")
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

    def fit(self, need: float | None) -> str:
        """The one verdict rule: above usable does not fit; within it fits, tight near its end."""
        usable = self.usable
        if need is None or usable is None or not self.hardware.memory_bytes:
            return "unknown"
        if need > usable:
            return "does not fit"
        return "tight" if need > TIGHT_SHARE * usable else "fits"

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
            binding = "unknown"
        elif compute_s is None or (memory_s is not None and memory_s >= compute_s):
            binding = "bandwidth"
        else:
            binding = "compute"
        need = self.need(context, concurrency)
        timed = binding != "unknown"
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
        raise ValueError("context and concurrency must be at least 1")
    stored = storage or Storage.asked(kv_dtype)
    layout = layout_for(gpus, gpus_per_node) if hardware.is_gpu else Layout(gpus, 1)
    planner = Planner(size, hardware, layout, stored)
    ceiling = max(size.max_context or 0, context)
    step = planner.step(context, concurrency)
    contexts = sorted({c for c in SWEEP_CONTEXTS if c <= (size.max_context or max(SWEEP_CONTEXTS))} | {context})
    concurrencies = sorted(set(SWEEP_CONCURRENCY) | {concurrency})
    sweep = [planner.step(c, n) for c in contexts for n in concurrencies]
    allreduce = None
    if layout.tensor > 1 and step.binding != "unknown":
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
                "hidden {hidden} × 2 B) "
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


def _knobs(plan: DeploymentPlan, planner: Planner) -> list[str]:
    """Which single change makes the plan fit, when it does not (or only tightly): only changes that
    change something for this model (no smaller weights than it already has)."""
    if plan.fit not in ("tight", "does not fit") or planner.room() is None:
        return []
    knobs: list[str] = []
    size = plan.sizing

    def fits(trial_size: Sizing = size, layout: Layout = plan.layout, stored: Storage = plan.storage) -> bool:
        trial = Planner(trial_size, plan.hardware, layout, stored)
        return trial.fit(trial.need(plan.context, plan.concurrency)) == "fits"

    for kv_dtype in ("fp8", "q8_0", "q4_0"):
        if KV_DTYPE_BYTES[kv_dtype] < KV_DTYPE_BYTES[plan.kv_dtype] and fits(stored=same_engine(plan.storage, size, kv_dtype)):
            knobs.append(said("a {kv_dtype} KV cache (--kv-dtype {kv_dtype}) fits", kv_dtype=kv_dtype))
            break
    half = replace(plan.storage, ssm_bytes=2, ssm_dtype="bfloat16")
    if plan.storage.engine == "vllm" and plan.storage.ssm_bytes > 2 and size.ssm_state_elements and fits(stored=half):
        knobs.append(said("the SSM state in bfloat16 (vLLM's --mamba-ssm-cache-dtype bfloat16, at its accuracy risk) fits"))
    if plan.max_context and plan.max_context < plan.context:
        knobs.append(said("cap the context at {max_context:,} tokens", max_context=plan.max_context))
    if plan.max_concurrency and plan.max_concurrency < plan.concurrency:
        knobs.append(said("serve at most {max_concurrency} at once at this context", max_concurrency=_sequences(plan.max_concurrency)))
    if plan.hardware.is_gpu:
        per_node = plan.gpus_per_node
        tensor = [Layout(count, 1) for count in valid_tensor_sizes(size, per_node)]
        nodes = [Layout(per_node, n) for n in (2, 4) if per_node in valid_tensor_sizes(size, per_node)]
        for layout in tensor + nodes:
            if layout.gpus > plan.gpus and fits(layout=layout):
                where = (
                    said("on {pipeline} nodes of {per_node}", pipeline=layout.pipeline, per_node=per_node)
                    if layout.pipeline > 1
                    else said("in tensor parallel")
                )
                knobs.append(said("{gpus} devices {where} (--gpus {gpus}) fit", gpus=layout.gpus, where=where))
                break
    weights = size.weights_bytes
    fp8 = bool(weights) and size.bytes_per_param > 1.2 and "fp8" in plan.hardware.peak_tflops and size.format != "gguf"
    if weights and fp8 and fits(trial_size=replace(size, weights_bytes=weights / size.bytes_per_param)):
        knobs.append(said("FP8 weights (1 B per weight; {device} computes in FP8) fit", device=plan.hardware.name))
    four_bit = replace(size, weights_bytes=(weights or 0) * FOUR_BIT_BYTES / size.bytes_per_param)
    if weights and size.bytes_per_param > FOUR_BIT_BYTES * 1.1 and fits(trial_size=four_bit):
        knobs.append(said("4-bit weights (AWQ/GPTQ, Q4_K: about 4.5 bits per weight) fit"))
    if (planner.room() or 0) <= 0:
        if size.bytes_per_param > FOUR_BIT_BYTES * 1.1:
            knobs.append(said("the weights alone take all the usable memory: quantize them, or split them across devices"))
        else:
            knobs.append(said("the weights alone take all the usable memory: split them across devices"))
    if not knobs:  # no one change is enough: two together (one sequence, a shorter context), or more than that
        alone = planner.max_context(1, max(size.max_context or 0, plan.context), TIGHT_SHARE)
        if alone:
            knobs.append(said("one sequence at a time, of at most {context:,} tokens, fits (no single change does)", context=alone))
        else:
            knobs.append(said("not one sequence fits beside the weights: more devices, or smaller weights and caches together"))
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
        return 0.50, 0.96, "16-bit weights"
    if kind.startswith("Q8"):
        return 0.45, 0.90, "8-bit weights"
    if kind.startswith(("Q4", "Q5", "IQ4", "Q3", "Q2")):
        return 0.40, 0.85, "4-bit weights"
    return 0.40, 0.96, "these weights"


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'s' if count != 1 else ''}"
