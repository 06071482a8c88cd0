"""Mixture-of-experts families: Mixtral, Qwen2/3-MoE, DeepSeek-V2/V3 (MLA), gpt-oss, Llama 4, GLM-4.5."""

from __future__ import annotations

from typing import Any

from decode_doctor.i18n import said

from ..architecture import Architecture, CacheKind, CacheLayer, get, need, text_config
from .blocks import (
    attention_params,
    attention_shape,
    embeddings,
    gated_mlp,
    linear,
    mixtral_like,
    typed_cache,
)


def _mixtral(text: dict[str, Any]) -> Architecture:
    return mixtral_like(text)


def _qwen2_moe(text: dict[str, Any]) -> Architecture:
    return mixtral_like(text, qkv_bias=True, shared=True)


def _qwen3_moe(text: dict[str, Any]) -> Architecture:
    return mixtral_like(text, qk_norm=True)


def _deepseek(text: dict[str, Any]) -> Architecture:
    """Multi-head latent attention, dense first layers, then shared and routed experts."""
    hidden = need(text, "hidden_size")
    layers = need(text, "num_hidden_layers")
    heads = need(text, "num_attention_heads")
    kv_rank = need(text, "kv_lora_rank")
    nope, rope, value = need(text, "qk_nope_head_dim"), need(text, "qk_rope_head_dim"), need(text, "v_head_dim")
    q_rank = text.get("q_lora_rank")
    query = heads * (nope + rope)
    q = linear(q_rank, hidden) + q_rank + linear(query, q_rank) if q_rank else linear(query, hidden)
    kv = linear(kv_rank + rope, hidden) + kv_rank + linear(heads * (nope + value), kv_rank)
    attention = q + kv + linear(hidden, heads * value) + 2 * hidden
    experts = need(text, "n_routed_experts")
    per_token = need(text, "num_experts_per_tok")
    expert_intermediate = need(text, "moe_intermediate_size")
    shared = (text.get("n_shared_experts") or 0) * gated_mlp(hidden, expert_intermediate)
    routed = experts * gated_mlp(hidden, expert_intermediate)
    correction = experts if text.get("topk_method") == "noaux_tc" else 0  # V3's per-expert routing bias
    moe = routed + shared + hidden * experts + correction
    first_dense = text.get("first_k_dense_replace") or 0
    frequency = text.get("moe_layer_freq") or 1
    sparse = [i for i in range(layers) if i >= first_dense and i % frequency == 0]
    dense = layers - len(sparse)
    embedding, output = embeddings(text, hidden)
    total = (
        embedding + output + hidden + layers * attention + len(sparse) * moe + dense * gated_mlp(hidden, need(text, "intermediate_size"))
    )
    arch = Architecture("", total, embedding, output, len(sparse) * routed, experts, per_token, layers, hidden)
    arch.cache = [CacheLayer(CacheKind.MLA, kv_rank + rope)] * layers
    if text.get("num_nextn_predict_layers"):
        arch.notes.append(
            said("{count} multi-token-prediction layer(s) in the checkpoint are not counted", count=text["num_nextn_predict_layers"])
        )
    return arch


def _gpt_oss(text: dict[str, Any]) -> Architecture:
    """gpt-oss: biased attention with a learned sink per head, layers alternating a sliding window and
    full attention (layer_types), and biased experts whose matrices are stored as MXFP4."""
    hidden, layers, heads, kv_heads, head_dim = attention_shape(text)
    experts = need(text, "num_local_experts")
    per_token = need(text, "num_experts_per_tok", "experts_per_token")
    expert = need(text, "intermediate_size")
    bias = bool(text.get("attention_bias", True))
    attention = attention_params(hidden, heads, kv_heads, head_dim, bias, bias) + heads  # + the sinks
    matrices = experts * (hidden * 2 * expert + expert * hidden)
    expert_biases = experts * (2 * expert + hidden)
    router = experts * hidden + experts
    per_layer = attention + matrices + expert_biases + router + 2 * hidden
    embedding, output = embeddings(text, hidden)
    total = embedding + output + layers * per_layer + hidden
    arch = Architecture("", total, embedding, output, layers * (matrices + expert_biases), experts, per_token, layers, hidden)
    arch.params_expert_matrices = layers * matrices
    arch.cache = typed_cache(text, layers, 2 * kv_heads * head_dim)
    return arch


def _llama4(config: dict[str, Any]) -> Architecture:
    """Llama 4: MoE every interleave_moe_layer_step-th layer (one routed expert and a shared one per
    token), dense layers of intermediate_size_mlp; the layers with RoPE attend within chunks of
    attention_chunk_size, the NoPE layers (no_rope_layers 0, every fourth) to everything; the vision
    tower and projector are loaded but not read per decoded token."""
    text = text_config(config)
    hidden, layers, heads, kv_heads, head_dim = attention_shape(text)
    bias = bool(text.get("attention_bias"))
    attention = attention_params(hidden, heads, kv_heads, head_dim, bias, bias) + 2 * hidden
    experts, per_token = need(text, "num_local_experts"), need(text, "num_experts_per_tok")
    expert = need(text, "intermediate_size")
    routed = experts * 3 * hidden * expert
    moe = routed + gated_mlp(hidden, expert) + hidden * experts
    dense = gated_mlp(hidden, get(text, "intermediate_size_mlp") or expert)
    step = get(text, "interleave_moe_layer_step", default=1) or 1
    listed = text.get("moe_layers")
    sparse = set(listed) if isinstance(listed, list) else {i for i in range(layers) if (i + 1) % step == 0}
    moe_count = len(sparse & set(range(layers)))
    embedding, output = embeddings(
        {**text, "tie_word_embeddings": config.get("tie_word_embeddings", text.get("tie_word_embeddings"))}, hidden
    )
    vision = _llama4_vision(config, hidden)
    total = embedding + output + hidden + layers * attention + moe_count * moe + (layers - moe_count) * dense + vision
    arch = Architecture("", total, embedding, output, moe_count * routed, experts, per_token, layers, hidden)
    arch.params_vision = vision
    chunk = text.get("attention_chunk_size")
    rope = text.get("no_rope_layers")
    if not (isinstance(rope, list) and len(rope) == layers):
        interval = get(text, "no_rope_layer_interval", default=4)
        rope = [int((i + 1) % interval != 0) for i in range(layers)]
    elements = 2 * kv_heads * head_dim
    arch.cache = [
        CacheLayer(CacheKind.CHUNKED, elements, chunk) if uses and chunk else CacheLayer(CacheKind.FULL, elements) for uses in rope
    ]
    return arch


def _llama4_vision(config: dict[str, Any], text_hidden: int) -> int:
    vision = config.get("vision_config")
    if not isinstance(vision, dict):
        return 0
    width = need(vision, "hidden_size")
    inner = need(vision, "intermediate_size")
    patch = need(vision, "patch_size")
    patches = (need(vision, "image_size") // patch) ** 2 + 1
    layer = 4 * linear(width, width, True) + linear(inner, width, True) + linear(width, inner, True) + 2 * 2 * width
    params = get(vision, "num_channels", default=3) * patch * patch * width + width + patches * width + 2 * 2 * width
    params += need(vision, "num_hidden_layers") * layer
    projector_in, projector_out = need(vision, "projector_input_dim"), need(vision, "projector_output_dim")
    params += inner * projector_in + projector_out * projector_out  # the pixel-shuffle MLP
    return params + need(vision, "vision_output_dim") * text_hidden  # the multimodal projector


def _glm4_moe(text: dict[str, Any]) -> Architecture:
    """GLM-4.5: grouped-query attention (biased q, k, v), first_k_dense_replace dense layers, then MoE
    layers with shared experts and a router with a correction bias (as DeepSeek-V3 routes)."""
    hidden, layers, heads, kv_heads, head_dim = attention_shape(text)
    attention = attention_params(hidden, heads, kv_heads, head_dim, bool(text.get("attention_bias")), False)
    attention += 2 * hidden + (2 * head_dim if text.get("use_qk_norm") else 0)
    experts, per_token = need(text, "n_routed_experts"), need(text, "num_experts_per_tok")
    width = need(text, "moe_intermediate_size")
    routed = experts * gated_mlp(hidden, width)
    moe = routed + gated_mlp(hidden, width * (text.get("n_shared_experts") or 0)) + experts * hidden + experts
    first_dense = text.get("first_k_dense_replace") or 0
    dense = gated_mlp(hidden, need(text, "intermediate_size"))
    sparse = max(layers - first_dense, 0)
    embedding, output = embeddings(text, hidden)
    total = embedding + output + hidden + layers * attention + sparse * moe + (layers - sparse) * dense
    arch = Architecture("", total, embedding, output, sparse * routed, experts, per_token, layers, hidden)
    arch.cache = [CacheLayer(CacheKind.FULL, 2 * kv_heads * head_dim)] * layers
    mtp = text.get("num_nextn_predict_layers") or 0
    if mtp:  # each: a decoder layer, eh_proj, enorm, hnorm, and its own embedding, head and norm
        arch.params_mtp = mtp * (attention + moe + linear(hidden, 2 * hidden) + 3 * hidden + 2 * embedding)
        arch.notes.append(
            said(
                "{mtp} multi-token-prediction layer(s) in the checkpoint are not counted: vLLM loads them only for speculative decoding",
                mtp=mtp,
            )
        )
    return arch
