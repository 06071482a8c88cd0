"""A model's size and cache from its config.json alone: parameters per component, what one decode
step reads, and what each layer caches per token.

Counted the way the Hugging Face implementations build the modules (a weight is rows × columns, a
bias its rows, an RMSNorm its width, a LayerNorm twice that), for: Llama 2/3, Mistral, Mixtral,
Qwen2/2.5, Qwen2-MoE, Qwen3 (dense and MoE), Gemma 2/3, Phi-3, DeepSeek-V2/V3 (MLA, shared and
routed experts), GPT-NeoX, Falcon and Jamba (attention, Mamba and MoE layers). A config this does
not know raises UnknownArchitecture, with the reason: a size is never guessed.

The cache: a full-attention layer keeps K and V for every token (2 × KV heads × head dim
elements); a sliding-window layer at most its window of tokens; an MLA layer one latent of
kv_lora_rank + qk_rope_head_dim; a Mamba layer no per-token cache, but a fixed state per sequence
(convolution window and SSM state).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8": 1}


class UnknownArchitecture(ValueError):
    """The config cannot be sized: the message says what is missing or unknown."""


@dataclass(frozen=True)
class CacheLayer:
    kind: str  # "full", "sliding", "mla"
    elements_per_token: int  # cached elements per token (K and V together)
    window: int | None = None  # sliding layers: tokens kept at most


@dataclass
class Architecture:
    family: str
    params_total: int
    params_embedding: int  # the input table (a row gathered per token, not read whole)
    params_output: int  # the output head when it is its own matrix (0 when tied)
    params_experts: int  # routed experts, all of them
    experts: int = 0
    experts_per_token: int = 0
    layers: int = 0
    hidden_size: int = 0
    cache: list[CacheLayer] = field(default_factory=list)
    state_elements_per_sequence: int = 0  # Mamba layers: convolution and SSM state
    dtype: str | None = None  # torch_dtype of the checkpoint, as the config says
    notes: list[str] = field(default_factory=list)

    @property
    def params_active(self) -> int:
        """Parameters one token runs through: all but the unchosen routed experts (the embedding
        row gathered counts as its table, as model cards count "active parameters")."""
        if not self.experts:
            return self.params_total
        return self.params_total - round(self.params_experts * (1 - self.experts_per_token / self.experts))

    def decode_read_params(self, sequences: int = 1) -> float:
        """Parameters one decode step reads for `sequences` at once: every dense weight and the output
        head; of each MoE layer's routed experts, those some sequence picks — with k of E chosen per
        token, 1 − (1 − k/E)^sequences of them on average; an input table that is not also the output
        head only as the rows gathered."""
        read = float(self.params_total)
        if self.params_output:
            read -= self.params_embedding
        if self.experts:
            touched = 1 - (1 - self.experts_per_token / self.experts) ** max(sequences, 1)
            read -= self.params_experts * (1 - touched)
        return read

    def kv_elements(self, context: int) -> int:
        """Cached elements per sequence at `context` tokens."""
        return sum(layer.elements_per_token * min(context, layer.window or context) for layer in self.cache)

    def kv_elements_per_token(self) -> int:
        """Per token, counting every cache layer (the figure before windows cap it)."""
        return sum(layer.elements_per_token for layer in self.cache)


def _get(config: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return default


def _need(config: dict[str, Any], *keys: str) -> int:
    value = _get(config, *keys)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise UnknownArchitecture(f"no {keys[0]} in the config")
    return value


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    for nested in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(nested), dict):
            return {**config[nested], **{k: v for k, v in config.items() if k == "tie_word_embeddings" and k not in config[nested]}}
    return config


def family_of(config: dict[str, Any]) -> str:
    text = text_config(config)
    model_type = str(text.get("model_type") or config.get("model_type") or "").lower()
    aliases = {"refinedweb": "falcon", "refinedwebmodel": "falcon", "gemma3_text": "gemma3", "mistral3": "mistral"}
    return aliases.get(model_type, model_type)


def from_config(config: dict[str, Any]) -> Architecture:
    text = text_config(config)
    family = family_of(config)
    builder = _BUILDERS.get(family)
    if builder is None:
        known = ", ".join(sorted(_BUILDERS))
        raise UnknownArchitecture(f"model_type {family or '(none)'!r} is not one this sizes from its config ({known})")
    try:
        arch = builder(text)
    except (TypeError, ValueError, ArithmeticError, KeyError, IndexError, AttributeError) as exc:
        # a value of the wrong type where the builder multiplies: unknown, never a wrong size
        raise UnknownArchitecture(f"the config holds a value that cannot size {family}: {type(exc).__name__}: {exc}") from None
    arch.family = family
    arch.dtype = str(_get(text, "torch_dtype", "dtype") or _get(config, "torch_dtype", "dtype") or "") or None
    if family in ("gemma3",) and text is not config:
        arch.notes.append("the vision tower is not counted: it is not read per decoded token")
    return arch


# --- building blocks ------------------------------------------------------------------------


def _linear(rows: int, columns: int, bias: bool = False) -> int:
    return rows * columns + (rows if bias else 0)


def _tied(text: dict[str, Any], default: bool = False) -> bool:
    value = text.get("tie_word_embeddings")
    return default if value is None else bool(value)


def _embeddings(text: dict[str, Any], hidden: int, tied_default: bool = False) -> tuple[int, int]:
    vocab = _need(text, "vocab_size", "padded_vocab_size")
    table = vocab * hidden
    return table, 0 if _tied(text, tied_default) else table


def _attention(hidden: int, heads: int, kv_heads: int, head_dim: int, qkv_bias: bool = False, o_bias: bool = False) -> int:
    q = _linear(heads * head_dim, hidden, qkv_bias)
    kv = 2 * _linear(kv_heads * head_dim, hidden, qkv_bias)
    o = _linear(hidden, heads * head_dim, o_bias)
    return q + kv + o


def _gated_mlp(hidden: int, intermediate: int, bias: bool = False) -> int:
    return 2 * _linear(intermediate, hidden, bias) + _linear(hidden, intermediate, bias)


def _window_layers(text: dict[str, Any], layers: int) -> list[int | None]:
    """Each layer's sliding window (None: full attention), from layer_types or the older keys."""
    window = text.get("sliding_window")
    types = text.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        return [window if kind == "sliding_attention" else None for kind in types]
    if not window:
        return [None] * layers
    pattern = text.get("sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 0:  # Gemma 3: every pattern-th layer is global
        return [None if (i + 1) % pattern == 0 else window for i in range(layers)]
    return [window] * layers


# --- families -------------------------------------------------------------------------------


def _llama_like(text: dict[str, Any], *, qkv_bias: bool = False, qk_norm: bool = False, norms: int = 2) -> Architecture:
    hidden = _need(text, "hidden_size")
    layers = _need(text, "num_hidden_layers")
    heads = _need(text, "num_attention_heads")
    kv_heads = _get(text, "num_key_value_heads", default=heads)
    head_dim = _get(text, "head_dim") or hidden // heads
    intermediate = _need(text, "intermediate_size")
    attention_bias = bool(text.get("attention_bias"))
    per_layer = _attention(hidden, heads, kv_heads, head_dim, qkv_bias or attention_bias, attention_bias)
    per_layer += _gated_mlp(hidden, intermediate, bool(text.get("mlp_bias"))) + norms * hidden + (2 * head_dim if qk_norm else 0)
    embedding, output = _embeddings(text, hidden)
    arch = Architecture("", embedding + output + layers * per_layer + hidden, embedding, output, 0, layers=layers, hidden_size=hidden)
    arch.cache = _attention_cache(text, layers, kv_heads, head_dim)
    return arch


def _attention_cache(text: dict[str, Any], layers: int, kv_heads: int, head_dim: int) -> list[CacheLayer]:
    windows = _window_layers(text, layers)
    if text.get("use_sliding_window") is False:  # Qwen2: the window exists in the config but is off
        windows = [None] * layers
    return [CacheLayer("sliding" if w else "full", 2 * kv_heads * head_dim, w) for w in windows]


def _llama(text: dict[str, Any]) -> Architecture:
    return _llama_like(text)


def _qwen2(text: dict[str, Any]) -> Architecture:
    return _llama_like(text, qkv_bias=True)


def _qwen3(text: dict[str, Any]) -> Architecture:
    return _llama_like(text, qk_norm=True)


def _gemma2(text: dict[str, Any]) -> Architecture:
    text = {**text, "tie_word_embeddings": _tied(text, True)}
    arch = _llama_like(text, norms=4)
    if text.get("sliding_window") and not text.get("layer_types"):  # Gemma 2 alternates, local first
        window = text["sliding_window"]
        arch.cache = [CacheLayer("sliding" if i % 2 == 0 else "full", layer.elements_per_token, window if i % 2 == 0 else None)
                      for i, layer in enumerate(arch.cache)]  # fmt: skip
    return arch


def _gemma3(text: dict[str, Any]) -> Architecture:
    return _llama_like({**text, "tie_word_embeddings": _tied(text, True)}, norms=4, qk_norm=True)


def _phi3(text: dict[str, Any]) -> Architecture:
    return _llama_like(text)  # fused qkv and gate_up hold the same weights


def _moe(text: dict[str, Any], hidden: int, *, shared_intermediate: int = 0, shared_gate: bool = False) -> tuple[int, int, int, int]:
    """(parameters of one MoE block, of its routed experts, experts, experts per token)."""
    experts = _need(text, "num_local_experts", "num_experts", "n_routed_experts")
    per_token = _need(text, "num_experts_per_tok", "moe_top_k")
    expert_intermediate = _get(text, "moe_intermediate_size") or _need(text, "intermediate_size")
    routed = experts * _gated_mlp(hidden, expert_intermediate)
    router = hidden * experts
    shared = _gated_mlp(hidden, shared_intermediate) if shared_intermediate else 0
    return routed + router + shared + (hidden if shared_gate else 0), routed, experts, per_token


def _mixtral_like(text: dict[str, Any], *, qkv_bias: bool = False, qk_norm: bool = False, shared: bool = False) -> Architecture:
    hidden = _need(text, "hidden_size")
    layers = _need(text, "num_hidden_layers")
    heads = _need(text, "num_attention_heads")
    kv_heads = _get(text, "num_key_value_heads", default=heads)
    head_dim = _get(text, "head_dim") or hidden // heads
    attention = _attention(hidden, heads, kv_heads, head_dim, qkv_bias or bool(text.get("attention_bias")), False)
    attention += 2 * hidden + (2 * head_dim if qk_norm else 0)
    shared_intermediate = _get(text, "shared_expert_intermediate_size", default=0) if shared else 0
    moe, routed, experts, per_token = _moe(text, hidden, shared_intermediate=shared_intermediate, shared_gate=bool(shared_intermediate))
    step = _get(text, "decoder_sparse_step", default=1) or 1
    dense_only = set(text.get("mlp_only_layers") or [])
    sparse = [i for i in range(layers) if i not in dense_only and (i + 1) % step == 0]
    dense = layers - len(sparse)
    dense_mlp = _gated_mlp(hidden, _need(text, "intermediate_size")) if dense else 0
    embedding, output = _embeddings(text, hidden)
    total = embedding + output + hidden + layers * attention + len(sparse) * moe + dense * dense_mlp
    arch = Architecture("", total, embedding, output, len(sparse) * routed, experts, per_token, layers, hidden)
    arch.cache = _attention_cache(text, layers, kv_heads, head_dim)
    return arch


def _mixtral(text: dict[str, Any]) -> Architecture:
    return _mixtral_like(text)


def _qwen2_moe(text: dict[str, Any]) -> Architecture:
    return _mixtral_like(text, qkv_bias=True, shared=True)


def _qwen3_moe(text: dict[str, Any]) -> Architecture:
    return _mixtral_like(text, qk_norm=True)


def _deepseek(text: dict[str, Any]) -> Architecture:
    """Multi-head latent attention, dense first layers, then shared and routed experts."""
    hidden = _need(text, "hidden_size")
    layers = _need(text, "num_hidden_layers")
    heads = _need(text, "num_attention_heads")
    kv_rank = _need(text, "kv_lora_rank")
    nope, rope, value = _need(text, "qk_nope_head_dim"), _need(text, "qk_rope_head_dim"), _need(text, "v_head_dim")
    q_rank = text.get("q_lora_rank")
    query = heads * (nope + rope)
    q = _linear(q_rank, hidden) + q_rank + _linear(query, q_rank) if q_rank else _linear(query, hidden)
    kv = _linear(kv_rank + rope, hidden) + kv_rank + _linear(heads * (nope + value), kv_rank)
    attention = q + kv + _linear(hidden, heads * value) + 2 * hidden
    experts = _need(text, "n_routed_experts")
    per_token = _need(text, "num_experts_per_tok")
    expert_intermediate = _need(text, "moe_intermediate_size")
    shared = (text.get("n_shared_experts") or 0) * _gated_mlp(hidden, expert_intermediate)
    routed = experts * _gated_mlp(hidden, expert_intermediate)
    correction = experts if text.get("topk_method") == "noaux_tc" else 0  # V3's per-expert routing bias
    moe = routed + shared + hidden * experts + correction
    first_dense = text.get("first_k_dense_replace") or 0
    frequency = text.get("moe_layer_freq") or 1
    sparse = [i for i in range(layers) if i >= first_dense and i % frequency == 0]
    dense = layers - len(sparse)
    embedding, output = _embeddings(text, hidden)
    total = (
        embedding + output + hidden + layers * attention + len(sparse) * moe + dense * _gated_mlp(hidden, _need(text, "intermediate_size"))
    )
    arch = Architecture("", total, embedding, output, len(sparse) * routed, experts, per_token, layers, hidden)
    arch.cache = [CacheLayer("mla", kv_rank + rope)] * layers
    if text.get("num_nextn_predict_layers"):
        arch.notes.append(f"{text['num_nextn_predict_layers']} multi-token-prediction layer(s) in the checkpoint are not counted")
    return arch


def _gpt_neox(text: dict[str, Any]) -> Architecture:
    hidden = _need(text, "hidden_size")
    layers = _need(text, "num_hidden_layers")
    heads = _need(text, "num_attention_heads")
    intermediate = _need(text, "intermediate_size")
    head_dim = hidden // heads
    per_layer = _linear(3 * hidden, hidden, True) + _linear(hidden, hidden, True)
    per_layer += _linear(intermediate, hidden, True) + _linear(hidden, intermediate, True) + 2 * 2 * hidden
    embedding, output = _embeddings(text, hidden)
    arch = Architecture("", embedding + output + layers * per_layer + 2 * hidden, embedding, output, 0, layers=layers, hidden_size=hidden)
    arch.cache = [CacheLayer("full", 2 * heads * head_dim)] * layers
    return arch


def _falcon(text: dict[str, Any]) -> Architecture:
    hidden = _need(text, "hidden_size")
    layers = _need(text, "num_hidden_layers", "n_layer")
    heads = _need(text, "num_attention_heads", "n_head")
    head_dim = hidden // heads
    bias = bool(text.get("bias"))
    if text.get("new_decoder_architecture"):
        kv_heads = _get(text, "num_kv_heads", "n_head_kv", default=heads)
        norms = 2 * 2 * hidden  # ln_attn and ln_mlp
    else:
        kv_heads = 1 if text.get("multi_query", True) else heads
        norms = 2 * hidden  # one input LayerNorm for the parallel attention and MLP
    intermediate = _get(text, "ffn_hidden_size") or 4 * hidden
    qkv = _linear((heads + 2 * kv_heads) * head_dim, hidden, bias)
    per_layer = qkv + _linear(hidden, hidden, bias) + _linear(intermediate, hidden, bias) + _linear(hidden, intermediate, bias) + norms
    embedding, output = _embeddings(text, hidden, tied_default=True)
    arch = Architecture("", embedding + output + layers * per_layer + 2 * hidden, embedding, output, 0, layers=layers, hidden_size=hidden)
    arch.cache = [CacheLayer("full", 2 * kv_heads * head_dim)] * layers
    return arch


def _jamba(text: dict[str, Any]) -> Architecture:
    """Attention every attn_layer_period layers, Mamba otherwise; MoE every expert_layer_period."""
    hidden = _need(text, "hidden_size")
    layers = _need(text, "num_hidden_layers")
    heads = _need(text, "num_attention_heads")
    kv_heads = _get(text, "num_key_value_heads", default=heads)
    head_dim = hidden // heads
    attn_period, attn_offset = _need(text, "attn_layer_period"), _get(text, "attn_layer_offset", default=0)
    expert_period, expert_offset = _need(text, "expert_layer_period"), _get(text, "expert_layer_offset", default=0)
    inner = _get(text, "mamba_expand", default=2) * hidden
    state, conv = _get(text, "mamba_d_state", default=16), _get(text, "mamba_d_conv", default=4)
    rank = text.get("mamba_dt_rank")
    rank = math.ceil(hidden / 16) if rank in (None, "auto") else rank
    proj_bias, conv_bias = bool(text.get("mamba_proj_bias")), text.get("mamba_conv_bias", True)
    mamba = _linear(2 * inner, hidden, proj_bias) + inner * conv + (inner if conv_bias else 0)
    mamba += _linear(rank + 2 * state, inner) + _linear(inner, rank, True) + inner * state + inner + _linear(hidden, inner, proj_bias)
    mamba += rank + 2 * state  # the dt, B and C RMSNorms inside the mixer
    attention = _attention(hidden, heads, kv_heads, head_dim)
    moe, routed, experts, per_token = _moe(text, hidden)
    dense = _gated_mlp(hidden, _need(text, "intermediate_size"))
    total, routed_total, cache = 0, 0, []
    attention_layers = 0
    for index in range(layers):
        is_attention = index % attn_period == attn_offset
        attention_layers += is_attention
        total += attention if is_attention else mamba
        if index % expert_period == expert_offset:
            total += moe
            routed_total += routed
        else:
            total += dense
        total += 2 * hidden
        if is_attention:
            cache.append(CacheLayer("full", 2 * kv_heads * head_dim))
    embedding, output = _embeddings(text, hidden)
    arch = Architecture("", total + embedding + output + hidden, embedding, output, routed_total, experts, per_token, layers, hidden)
    arch.cache = cache
    arch.state_elements_per_sequence = (layers - attention_layers) * (inner * (conv - 1) + inner * state)
    arch.notes.append(
        f"{attention_layers} of {layers} layers are attention and cache K and V per token; the {layers - attention_layers} Mamba "
        "layers keep a fixed state per sequence instead"
    )
    return arch


_BUILDERS = {
    "llama": _llama,
    "mistral": _llama,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "gemma": lambda text: _llama_like({**text, "tie_word_embeddings": _tied(text, True)}),
    "gemma2": _gemma2,
    "gemma3": _gemma3,
    "phi3": _phi3,
    "mixtral": _mixtral,
    "qwen2_moe": _qwen2_moe,
    "qwen3_moe": _qwen3_moe,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "gpt_neox": _gpt_neox,
    "falcon": _falcon,
    "jamba": _jamba,
}
