"""Dense transformer families: Llama, Mistral, Qwen2/3, Gemma 2/3, Phi-3, GPT-NeoX, Falcon."""

from __future__ import annotations

from typing import Any

from ..architecture import Architecture, CacheKind, CacheLayer, get, need
from .blocks import (
    embeddings,
    linear,
    llama_like,
    tied,
)


def _llama(text: dict[str, Any]) -> Architecture:
    return llama_like(text)


def _qwen2(text: dict[str, Any]) -> Architecture:
    return llama_like(text, qkv_bias=True)


def _qwen3(text: dict[str, Any]) -> Architecture:
    return llama_like(text, qk_norm=True)


def _gemma2(text: dict[str, Any]) -> Architecture:
    text = {**text, "tie_word_embeddings": tied(text, True)}
    arch = llama_like(text, norms=4)
    if text.get("sliding_window") and not text.get("layer_types"):  # Gemma 2 alternates, local first
        window = text["sliding_window"]
        arch.cache = [
            CacheLayer(CacheKind.SLIDING, layer.elements_per_token, window)
            if i % 2 == 0
            else CacheLayer(CacheKind.FULL, layer.elements_per_token)
            for i, layer in enumerate(arch.cache)
        ]
    return arch


def _gemma3(text: dict[str, Any]) -> Architecture:
    return llama_like({**text, "tie_word_embeddings": tied(text, True)}, norms=4, qk_norm=True)


def _phi3(text: dict[str, Any]) -> Architecture:
    return llama_like(text)  # fused qkv and gate_up hold the same weights


def _gpt_neox(text: dict[str, Any]) -> Architecture:
    hidden = need(text, "hidden_size")
    layers = need(text, "num_hidden_layers")
    heads = need(text, "num_attention_heads")
    intermediate = need(text, "intermediate_size")
    head_dim = hidden // heads
    per_layer = linear(3 * hidden, hidden, True) + linear(hidden, hidden, True)
    per_layer += linear(intermediate, hidden, True) + linear(hidden, intermediate, True) + 2 * 2 * hidden
    embedding, output = embeddings(text, hidden)
    arch = Architecture("", embedding + output + layers * per_layer + 2 * hidden, embedding, output, 0, layers=layers, hidden_size=hidden)
    arch.cache = [CacheLayer(CacheKind.FULL, 2 * heads * head_dim)] * layers
    return arch


def _falcon(text: dict[str, Any]) -> Architecture:
    hidden = need(text, "hidden_size")
    layers = need(text, "num_hidden_layers", "n_layer")
    heads = need(text, "num_attention_heads", "n_head")
    head_dim = hidden // heads
    bias = bool(text.get("bias"))
    if text.get("new_decoder_architecture"):
        kv_heads = get(text, "num_kv_heads", "n_head_kv", default=heads)
        norms = 2 * 2 * hidden  # ln_attn and ln_mlp
    else:
        kv_heads = 1 if text.get("multi_query", True) else heads
        norms = 2 * hidden  # one input LayerNorm for the parallel attention and MLP
    intermediate = get(text, "ffn_hidden_size") or 4 * hidden
    qkv = linear((heads + 2 * kv_heads) * head_dim, hidden, bias)
    per_layer = qkv + linear(hidden, hidden, bias) + linear(intermediate, hidden, bias) + linear(hidden, intermediate, bias) + norms
    embedding, output = embeddings(text, hidden, tied_default=True)
    arch = Architecture("", embedding + output + layers * per_layer + 2 * hidden, embedding, output, 0, layers=layers, hidden_size=hidden)
    arch.cache = [CacheLayer(CacheKind.FULL, 2 * kv_heads * head_dim)] * layers
    return arch
