"""The parts every family is built from, counted as the Hugging Face modules build them: linear
layers, embeddings, attention, gated MLPs, routed experts, sliding windows, Mamba-2 mixers."""

from __future__ import annotations

from typing import Any

from decode_doctor.i18n import said

from ..architecture import Architecture, CacheKind, CacheLayer, UnknownArchitecture, get, need


def linear(rows: int, columns: int, bias: bool = False) -> int:
    return rows * columns + (rows if bias else 0)


def tied(text: dict[str, Any], default: bool = False) -> bool:
    value = text.get("tie_word_embeddings")
    return default if value is None else bool(value)


def embeddings(text: dict[str, Any], hidden: int, tied_default: bool = False) -> tuple[int, int]:
    vocab = need(text, "vocab_size", "padded_vocab_size")
    table = vocab * hidden
    return table, 0 if tied(text, tied_default) else table


def attention_shape(text: dict[str, Any]) -> tuple[int, int, int, int, int]:
    """(hidden size, layers, attention heads, KV heads, head dim) of a grouped-query attention model."""
    hidden = need(text, "hidden_size")
    heads = need(text, "num_attention_heads")
    kv_heads = get(text, "num_key_value_heads", default=heads)
    return hidden, need(text, "num_hidden_layers"), heads, kv_heads, get(text, "head_dim") or hidden // heads


def attention_params(hidden: int, heads: int, kv_heads: int, head_dim: int, qkv_bias: bool = False, o_bias: bool = False) -> int:
    q = linear(heads * head_dim, hidden, qkv_bias)
    kv = 2 * linear(kv_heads * head_dim, hidden, qkv_bias)
    o = linear(hidden, heads * head_dim, o_bias)
    return q + kv + o


def gated_mlp(hidden: int, intermediate: int, bias: bool = False) -> int:
    return 2 * linear(intermediate, hidden, bias) + linear(hidden, intermediate, bias)


def window_layers(text: dict[str, Any], layers: int) -> list[int | None]:
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


def llama_like(text: dict[str, Any], *, qkv_bias: bool = False, qk_norm: bool = False, norms: int = 2) -> Architecture:
    hidden, layers, heads, kv_heads, head_dim = attention_shape(text)
    intermediate = need(text, "intermediate_size")
    attention_bias = bool(text.get("attention_bias"))
    per_layer = attention_params(hidden, heads, kv_heads, head_dim, qkv_bias or attention_bias, attention_bias)
    per_layer += gated_mlp(hidden, intermediate, bool(text.get("mlp_bias"))) + norms * hidden + (2 * head_dim if qk_norm else 0)
    embedding, output = embeddings(text, hidden)
    arch = Architecture("", embedding + output + layers * per_layer + hidden, embedding, output, 0, layers=layers, hidden_size=hidden)
    arch.cache = attention_cache(text, layers, kv_heads, head_dim)
    return arch


def attention_cache(text: dict[str, Any], layers: int, kv_heads: int, head_dim: int) -> list[CacheLayer]:
    windows = window_layers(text, layers)
    if text.get("use_sliding_window") is False:  # Qwen2: the window exists in the config but is off
        windows = [None] * layers
    return [CacheLayer(CacheKind.SLIDING if w else CacheKind.FULL, 2 * kv_heads * head_dim, w) for w in windows]


def moe_params(text: dict[str, Any], hidden: int, *, shared_intermediate: int = 0, shared_gate: bool = False) -> tuple[int, int, int, int]:
    """(parameters of one MoE block, of its routed experts, experts, experts per token)."""
    experts = need(text, "num_local_experts", "num_experts", "n_routed_experts")
    per_token = need(text, "num_experts_per_tok", "moe_top_k")
    expert_intermediate = get(text, "moe_intermediate_size") or need(text, "intermediate_size")
    routed = experts * gated_mlp(hidden, expert_intermediate)
    router = hidden * experts
    shared = gated_mlp(hidden, shared_intermediate) if shared_intermediate else 0
    return routed + router + shared + (hidden if shared_gate else 0), routed, experts, per_token


def mixtral_like(text: dict[str, Any], *, qkv_bias: bool = False, qk_norm: bool = False, shared: bool = False) -> Architecture:
    hidden, layers, heads, kv_heads, head_dim = attention_shape(text)
    attention = attention_params(hidden, heads, kv_heads, head_dim, qkv_bias or bool(text.get("attention_bias")), False)
    attention += 2 * hidden + (2 * head_dim if qk_norm else 0)
    shared_intermediate = get(text, "shared_expert_intermediate_size", default=0) if shared else 0
    moe, routed, experts, per_token = moe_params(
        text, hidden, shared_intermediate=shared_intermediate, shared_gate=bool(shared_intermediate)
    )
    step = get(text, "decoder_sparse_step", default=1) or 1
    dense_only = set(text.get("mlp_only_layers") or [])
    sparse = [i for i in range(layers) if i not in dense_only and (i + 1) % step == 0]
    dense = layers - len(sparse)
    dense_mlp = gated_mlp(hidden, need(text, "intermediate_size")) if dense else 0
    embedding, output = embeddings(text, hidden)
    total = embedding + output + hidden + layers * attention + len(sparse) * moe + dense * dense_mlp
    arch = Architecture("", total, embedding, output, len(sparse) * routed, experts, per_token, layers, hidden)
    arch.cache = attention_cache(text, layers, kv_heads, head_dim)
    return arch


def typed_cache(text: dict[str, Any], layers: int, elements: int) -> list[CacheLayer]:
    """Attention layers from layer_types: "sliding_attention" keeps its window, "full_attention" every
    token; any other kind (or no list of the right length) is not sized here."""
    types = text.get("layer_types")
    window = text.get("sliding_window")
    if not isinstance(types, list) or len(types) != layers:
        raise UnknownArchitecture(said("no layer_types list of its {layers} layers", layers=layers))
    cache = []
    for kind in types:
        if kind == "full_attention":
            cache.append(CacheLayer(CacheKind.FULL, elements))
        elif kind == "sliding_attention" and isinstance(window, int) and window > 0:
            cache.append(CacheLayer(CacheKind.SLIDING, elements, window))
        else:
            raise UnknownArchitecture(said("layer type {kind} is not one this sizes", kind=repr(str(kind)[:40])))
    return cache


def mamba2(text: dict[str, Any], hidden: int) -> tuple[int, int, int]:
    """(parameters of one Mamba-2 mixer, its convolution and SSM state elements per sequence), as transformers builds
    NemotronHMamba2Mixer: in_proj to x, z, B, C and dt; a depthwise convolution over x, B and C;
    dt_bias, A_log and D per head; a gated RMSNorm; out_proj."""
    heads = need(text, "mamba_num_heads")
    head_dim = need(text, "mamba_head_dim")
    groups = get(text, "n_groups", default=1)
    state = need(text, "ssm_state_size")
    kernel = get(text, "conv_kernel", default=4)
    inner = heads * head_dim
    conv_dim = inner + 2 * groups * state
    bias = bool(text.get("use_bias"))
    params = linear(inner + conv_dim + heads, hidden, bias) + conv_dim * kernel + (conv_dim if text.get("use_conv_bias", True) else 0)
    params += 3 * heads + inner + linear(hidden, inner, bias)
    return params, conv_dim * (kernel - 1), heads * head_dim * state


PATTERN = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
