"""A model's size as every plan needs it (Sizing): the weights one decode step reads, the KV cache
layer by layer (every full-attention layer's K and V for each token, a sliding-window layer's for at
most its window, an MLA layer's latent, and a hybrid model's fixed SSM state), from the files' headers
or, without weight files, from the architecture in config.json."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from decode_doctor.engine.units import human_binary
from decode_doctor.i18n import joined, reason, said

from .architecture import Architecture, CacheKind, CacheLayer, UnknownArchitecture, from_config, text_config
from .context import vllm_max_context, yarn_context
from .info import ModelFormat, ModelInfo
from .storage import Storage

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
    format: ModelFormat
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
        return any(layer.kind is CacheKind.MLA for layer in self.cache)

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
        if layer.kind is CacheKind.MLA:
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
        return [CacheLayer(CacheKind.MLA, model.kv_latent_dim)] * model.layers, []
    if not (model.kv_heads and model.head_dim):
        return [], []
    elements = 2 * model.kv_heads * model.head_dim
    types = text.get("layer_types")
    window = model.sliding_window or (text.get("sliding_window") if text.get("use_sliding_window") is not False else None)
    if isinstance(types, list) and len(types) == model.layers:
        if not set(types) <= {"full_attention", "sliding_attention"} or ("sliding_attention" in types and not window):
            return [], [said("its layer_types ({types}) name layers this cannot size", types=", ".join(sorted(map(str, set(types))))[:80])]
        return [
            CacheLayer(CacheKind.SLIDING, elements, window) if t == "sliding_attention" else CacheLayer(CacheKind.FULL, elements)
            for t in types
        ], [said("the cache per layer from its layer_types")]
    if not window:
        return [CacheLayer(CacheKind.FULL, elements)] * model.layers, [
            said("every one of the {layers} layers sized as full attention", layers=model.layers)
        ]
    arch = (model.architecture or "").lower()
    sliding = next((rule for name, rule in SWA_PATTERNS.items() if arch.startswith(name)), None)
    if sliding is not None:
        return [
            CacheLayer(CacheKind.SLIDING, elements, window) if sliding(i) else CacheLayer(CacheKind.FULL, elements)
            for i in range(model.layers)
        ], []
    note = said(
        "a {window:,}-token window is named, but not which layers use it: every layer sized as full attention (an upper bound)",
        window=window,
    )
    return [CacheLayer(CacheKind.FULL, elements)] * model.layers, [note]


@dataclass
class _Weights:
    """What a model's weights are known to be, and how a decode step reads them."""

    bytes: float | None
    source: str
    total: int | None
    active: float | None
    read: Callable[[int], float | None]
    per_param: float = 2.0
    compute: str = "bf16"
    quantized: bool = False


def _from_files(model: ModelInfo, arch: Architecture | None) -> _Weights:
    """The weights as the files hold them (their bytes by tensor: embedding, head, experts)."""
    dominant = model.dominant_dtype or "BF16"
    per_param = element_bytes(dominant)

    def read_files(sequences: int) -> float | None:
        base: float = model.weight_bytes - model.not_decode_bytes - (0 if model.tied_embeddings else model.embedding_bytes)
        if model.experts and model.experts_per_token and model.expert_bytes:
            touched = 1 - (1 - model.experts_per_token / model.experts) ** max(sequences, 1)
            base -= model.expert_bytes * (1 - touched)
        return float(base)

    total = arch.params_total if arch else int(model.weight_bytes / per_param)
    active = arch.params_active if arch else (read_files(1) or 0.0) / per_param
    return _Weights(
        float(model.weight_bytes),
        said(
            "the weight files ({format}, {tensor_count} tensors)", format=ModelFormat(model.format).label, tensor_count=model.tensor_count
        ),
        total,
        active,
        read_files,
        model.weight_bytes / max(arch.params_total, 1) if arch else per_param,
        "fp8" if dominant.startswith("F8") else "bf16",
        bool(model.quantization),
    )


def _from_config(model: ModelInfo, arch: Architecture) -> tuple[_Weights | None, str]:
    """The weights as config.json's architecture and quantization say (no weight files), or why not."""
    try:
        stored = config_weights(model.config or {}, arch)
    except UnknownWeights as exc:
        return None, reason(exc)
    weights = stored.total(arch)
    source = said(
        "the config alone: {params_total:,} parameters, {weights} ({how}); no weight files here",
        params_total=arch.params_total,
        weights=human_binary(weights),
        how=stored.how,
    )

    def read_config(sequences: int) -> float | None:
        experts_read = arch.expert_read_params(sequences)
        return (arch.decode_read_params(sequences) - experts_read) * stored.dense + experts_read * stored.experts

    found = _Weights(weights, source, arch.params_total, arch.params_active, read_config, weights / arch.params_total)
    found.compute, found.quantized = stored.compute, stored.quantized
    return found, ""


def _weights(model: ModelInfo, arch: Architecture | None, why_not: str) -> _Weights:
    if model.weight_bytes > 0:
        return _from_files(model, arch)
    if arch is not None:
        found, why = _from_config(model, arch)
        if found is not None:
            return found
        unknown = said("unknown: no weight files, and {why_not}", why_not=why or why_not)
        return _Weights(None, unknown, arch.params_total, arch.params_active, _unknown, quantized=bool(model.quantization))
    unknown = said("unknown: no weight files, and {why_not}", why_not=why_not)
    return _Weights(None, unknown, None, None, _unknown, quantized=bool(model.quantization))


def _cache(model: ModelInfo, arch: Architecture | None, why_not: str, notes: list[str]) -> list[CacheLayer]:
    if arch:
        return arch.cache
    cache, assumed = _fallback_cache(model)
    if cache and model.config is not None:
        how = joined("; ", assumed) if assumed else said("the cache from its attention figures")
        notes.append(said("{why_not}: {how}", why_not=why_not, how=how))
    elif not cache and assumed:
        notes.append(said("the cache is unknown: {why}", why=joined("; ", assumed)))
    return cache


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
    found = _weights(model, arch, why_not)
    cache = _cache(model, arch, why_not, notes)
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
        weights_bytes=found.bytes,
        weights_source=found.source,
        params_total=found.total,
        params_active=found.active,
        cache=cache,
        conv_state_elements=arch.conv_state_elements if arch else 0,
        ssm_state_elements=arch.ssm_state_elements if arch else 0,
        layers=model.layers,
        heads=model.attention_heads,
        kv_heads=model.kv_heads,
        head_dim=model.head_dim,
        hidden=model.hidden_size,
        max_context=longest,
        compute_dtype=found.compute,
        quantized=found.quantized,
        bytes_per_param=found.per_param,
        engine_max_context=derived,
        engine_max_source=derived_from,
        tp_units=dict(arch.tp_units) if arch else {},
        notes=notes,
        family=arch.family if arch else "",
        yarn_context=yarn if yarn and yarn > (model.max_context or 0) else None,
        rope_note=yarn_how,
        config_ssm_dtype=_ssm_dtype(model.config or {}),
        _read=found.read,
    )


def _ssm_dtype(config: dict[str, Any]) -> str | None:
    text = text_config(config) if config else {}
    for key in ("mamba_ssm_cache_dtype", "mamba_ssm_dtype"):
        if isinstance(text.get(key), str):
            return str(text[key])
    return None


def _unknown(sequences: int) -> float | None:
    return None
