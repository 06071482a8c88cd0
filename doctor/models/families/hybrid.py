"""Hybrid families: attention beside Mamba or linear-attention layers (Jamba, Nemotron-H, Qwen3-Next)."""

from __future__ import annotations

import math
from typing import Any

from decode_doctor.i18n import said

from ..architecture import Architecture, CacheKind, CacheLayer, UnknownArchitecture, get, need
from .blocks import (
    PATTERN,
    attention_params,
    attention_shape,
    embeddings,
    gated_mlp,
    linear,
    mamba2,
    moe_params,
)


def _jamba(text: dict[str, Any]) -> Architecture:
    """Attention every attn_layer_period layers, Mamba otherwise; MoE every expert_layer_period."""
    hidden = need(text, "hidden_size")
    layers = need(text, "num_hidden_layers")
    heads = need(text, "num_attention_heads")
    kv_heads = get(text, "num_key_value_heads", default=heads)
    head_dim = hidden // heads
    attn_period, attn_offset = need(text, "attn_layer_period"), get(text, "attn_layer_offset", default=0)
    expert_period, expert_offset = need(text, "expert_layer_period"), get(text, "expert_layer_offset", default=0)
    inner = get(text, "mamba_expand", default=2) * hidden
    state, conv = get(text, "mamba_d_state", default=16), get(text, "mamba_d_conv", default=4)
    rank = text.get("mamba_dt_rank")
    rank = math.ceil(hidden / 16) if rank in (None, "auto") else rank
    proj_bias, conv_bias = bool(text.get("mamba_proj_bias")), text.get("mamba_conv_bias", True)
    mamba = linear(2 * inner, hidden, proj_bias) + inner * conv + (inner if conv_bias else 0)
    mamba += linear(rank + 2 * state, inner) + linear(inner, rank, True) + inner * state + inner + linear(hidden, inner, proj_bias)
    mamba += rank + 2 * state  # the dt, B and C RMSNorms inside the mixer
    attention = attention_params(hidden, heads, kv_heads, head_dim)
    moe, routed, experts, per_token = moe_params(text, hidden)
    dense = gated_mlp(hidden, need(text, "intermediate_size"))
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
            cache.append(CacheLayer(CacheKind.FULL, 2 * kv_heads * head_dim))
    embedding, output = embeddings(text, hidden)
    arch = Architecture("", total + embedding + output + hidden, embedding, output, routed_total, experts, per_token, layers, hidden)
    arch.cache = cache
    arch.conv_state_elements = (layers - attention_layers) * inner * (conv - 1)
    arch.ssm_state_elements = (layers - attention_layers) * inner * state
    arch.notes.append(
        said(
            "{attention_layers} of {layers} layers are attention and cache K and V per token; the {mamba} Mamba layers keep a "
            "fixed state per sequence instead",
            attention_layers=attention_layers,
            layers=layers,
            mamba=layers - attention_layers,
        )
    )
    return arch


def _nemotron_h(text: dict[str, Any]) -> Architecture:
    """Nemotron-H: one block per character of hybrid_override_pattern (or layers_block_type): M a
    Mamba-2 mixer, * attention, - a squared-ReLU MLP (up and down), E a MoE of such experts with a
    shared one; each block has one RMSNorm."""
    hidden = need(text, "hidden_size")
    pattern = text.get("hybrid_override_pattern")
    kinds = text.get("layers_block_type")
    if isinstance(pattern, str) and pattern and set(pattern) <= set(PATTERN):
        blocks = [PATTERN[ch] for ch in pattern]
    elif isinstance(kinds, list) and kinds and set(kinds) <= set(PATTERN.values()):
        blocks = list(kinds)
    else:
        raise UnknownArchitecture(said("no hybrid_override_pattern (or layers_block_type) of M, *, - and E"))
    if len(blocks) != get(text, "num_hidden_layers", default=len(blocks)):
        raise UnknownArchitecture(
            said("the hybrid pattern has {count} layers, num_hidden_layers {value}", count=len(blocks), value=text.get("num_hidden_layers"))
        )
    heads = need(text, "num_attention_heads")
    kv_heads = get(text, "num_key_value_heads", default=heads)
    head_dim = get(text, "head_dim", "attention_head_dim") or hidden // heads
    bias = bool(text.get("attention_bias"))
    attention = attention_params(hidden, heads, kv_heads, head_dim, bias, bias)
    mlp_bias = bool(text.get("mlp_bias"))
    mamba, conv_state, ssm_state = mamba2(text, hidden) if "mamba" in blocks else (0, 0, 0)
    mlp = 2 * linear(need(text, "intermediate_size"), hidden, mlp_bias) if "mlp" in blocks else 0
    moe = routed = experts = per_token = 0
    if "moe" in blocks:
        experts, per_token = need(text, "n_routed_experts"), need(text, "num_experts_per_tok")
        width = need(text, "moe_intermediate_size")
        latent = text.get("moe_latent_size") or hidden
        routed = experts * 2 * width * latent
        shared = 2 * linear(get(text, "moe_shared_expert_intermediate_size", default=0) or 0, hidden, mlp_bias)
        projections = 2 * linear(latent, hidden, mlp_bias) if text.get("moe_latent_size") else 0
        moe = routed + shared + projections + experts * hidden + experts  # router and its correction bias
    size = {"mamba": mamba, "attention": attention, "mlp": mlp, "moe": moe}
    total = sum(size[block] + hidden for block in blocks)
    embedding, output = embeddings(text, hidden)
    count = blocks.count
    arch = Architecture(
        "", total + embedding + output + hidden, embedding, output, count("moe") * routed, experts, per_token, len(blocks), hidden
    )
    arch.cache = [CacheLayer(CacheKind.FULL, 2 * kv_heads * head_dim)] * count("attention")
    arch.conv_state_elements, arch.ssm_state_elements = count("mamba") * conv_state, count("mamba") * ssm_state
    if "mamba" in blocks:  # vLLM's MambaMixer2 splits heads over the ranks; groups too, unless there is one
        groups = get(text, "n_groups", default=1)
        arch.tp_units = {"Mamba-2 heads": need(text, "mamba_num_heads"), **({"Mamba-2 groups": groups} if groups > 1 else {})}
    arch.notes.append(
        said(
            "{attention} of {layers} layers are attention and cache K and V per token; {mamba} are Mamba-2 layers and keep a fixed "
            "state per sequence instead; the other {rest} are MLP or MoE layers and keep nothing from one token to the next",
            attention=count("attention"),
            layers=len(blocks),
            mamba=count("mamba"),
            rest=len(blocks) - count("attention") - count("mamba"),
        )
    )
    return arch


def _qwen3_next(text: dict[str, Any]) -> Architecture:
    """Qwen3-Next: every full_attention_interval-th layer gated attention (q_proj also yields the
    gate), the others Gated DeltaNet (a constant state per sequence); a MoE of num_experts with a
    gated shared expert on every layer."""
    hidden, layers, heads, kv_heads, head_dim = attention_shape(text)
    types = text.get("layer_types")
    if not (isinstance(types, list) and len(types) == layers):
        interval = need(text, "full_attention_interval")
        types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]
    if not set(types) <= {"full_attention", "linear_attention"}:
        raise UnknownArchitecture(said("layer_types holds kinds other than full_attention and linear_attention"))
    bias = bool(text.get("attention_bias"))
    attention = linear(2 * heads * head_dim, hidden, bias) + 2 * linear(kv_heads * head_dim, hidden, bias)
    attention += linear(hidden, heads * head_dim, bias) + 2 * head_dim
    key_heads, value_heads = need(text, "linear_num_key_heads"), need(text, "linear_num_value_heads")
    key_dim = key_heads * need(text, "linear_key_head_dim")
    value_head = need(text, "linear_value_head_dim")
    value_dim = value_heads * value_head
    kernel = need(text, "linear_conv_kernel_dim")
    conv_dim = 2 * key_dim + value_dim
    linear_params = linear(2 * key_dim + 2 * value_dim, hidden) + linear(2 * value_heads, hidden) + conv_dim * kernel
    linear_params += 2 * value_heads + value_head + linear(hidden, value_dim)
    moe, routed, experts, per_token = moe_params(text, hidden, shared_intermediate=get(text, "shared_expert_intermediate_size", default=0))
    moe += hidden if get(text, "shared_expert_intermediate_size") else 0  # the shared expert's gate
    dense_only = set(text.get("mlp_only_layers") or [])
    step = get(text, "decoder_sparse_step", default=1) or 1
    sparse = [i for i in range(layers) if i not in dense_only and (i + 1) % step == 0]
    dense_mlp = gated_mlp(hidden, need(text, "intermediate_size")) if len(sparse) < layers else 0
    full = types.count("full_attention")
    total = (
        full * attention + (layers - full) * linear_params + len(sparse) * moe + (layers - len(sparse)) * dense_mlp + layers * 2 * hidden
    )
    embedding, output = embeddings(text, hidden)
    arch = Architecture(
        "", total + embedding + output + hidden, embedding, output, len(sparse) * routed, experts, per_token, layers, hidden
    )
    arch.cache = [CacheLayer(CacheKind.FULL, 2 * kv_heads * head_dim)] * full
    arch.conv_state_elements = (layers - full) * conv_dim * (kernel - 1)
    arch.ssm_state_elements = (layers - full) * value_heads * (key_dim // key_heads) * value_head
    arch.params_mtp = attention + moe + 2 * hidden + linear(hidden, 2 * hidden) + 3 * hidden  # mtp.*: fc, its norms, one layer
    arch.tp_units = {"linear_params-attention key heads": key_heads, "linear_params-attention value heads": value_heads}
    arch.notes.append(
        said(
            "{full} of {layers} layers are attention and cache K and V per token; the {linear_params} Gated DeltaNet layers keep a "
            "fixed state per sequence instead",
            full=full,
            layers=layers,
            linear_params=layers - full,
        )
    )
    return arch
