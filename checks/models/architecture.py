"""A model's size and cache from its config.json alone: parameters per component, what one decode
step reads, and what each layer caches per token.

Counted the way the Hugging Face implementations build the modules (a weight is rows × columns, a
bias its rows, an RMSNorm its width, a LayerNorm twice that), for: Llama 2/3, Llama 4 (interleaved
MoE with a shared expert, chunked attention, its vision tower), Mistral, Mixtral, Qwen2/2.5,
Qwen2-MoE, Qwen3 (dense and MoE), Qwen3-Next (Gated DeltaNet and gated attention, 512 experts with a
shared one), Gemma 2/3, Phi-3, DeepSeek-V2/V3 (MLA, shared and routed experts), GLM-4.5 MoE,
gpt-oss (alternating sliding and full attention with sinks, biased experts), GPT-NeoX, Falcon,
Jamba and Nemotron-H (attention, Mamba-2, MLP and MoE layers from the hybrid pattern). A config
this does not know raises UnknownArchitecture, with the reason: a size is never guessed.

The cache: a full-attention layer keeps K and V for every token (2 × KV heads × head dim
elements); a sliding-window layer at most its window of tokens, a chunked-attention layer at most
its chunk; an MLA layer one latent of kv_lora_rank + qk_rope_head_dim; a Mamba or linear-attention
layer no per-token cache, but a fixed state per sequence (convolution window and recurrent state).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from decode_doctor.i18n import said

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8": 1}


class UnknownArchitecture(ValueError):
    """The config cannot be sized: the message says what is missing or unknown."""


@dataclass(frozen=True)
class CacheLayer:
    kind: str  # "full", "sliding", "chunked", "mla"
    elements_per_token: int  # cached elements per token (K and V together)
    window: int | None = None  # sliding and chunked layers: tokens kept at most


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
    # Mamba and linear-attention layers keep a fixed state per sequence in two parts the engines store
    # apart: the convolution window, and the recurrent (SSM or delta-rule) state
    conv_state_elements: int = 0
    ssm_state_elements: int = 0
    dtype: str | None = None  # torch_dtype of the checkpoint, as the config says
    notes: list[str] = field(default_factory=list)
    params_vision: int = 0  # a vision tower and its projector: loaded (in params_total), not read per decoded token
    params_expert_matrices: int = 0  # the routed experts' weight matrices (their biases aside): what MXFP4 packs
    params_mtp: int = 0  # multi-token-prediction layers in the checkpoint: loaded only for speculative decoding
    tp_units: dict[str, int] = field(default_factory=dict)  # beyond attention heads, what tensor parallel must divide

    @property
    def state_elements_per_sequence(self) -> int:
        return self.conv_state_elements + self.ssm_state_elements

    @property
    def params_active(self) -> int:
        """Parameters one token runs through: all but the unchosen routed experts (the embedding
        row gathered counts as its table, as model cards count "active parameters")."""
        if not self.experts:
            return self.params_total - self.params_vision
        return self.params_total - self.params_vision - round(self.params_experts * (1 - self.experts_per_token / self.experts))

    def decode_read_params(self, sequences: int = 1) -> float:
        """Parameters one decode step reads for `sequences` at once: every dense weight and the output
        head; of each MoE layer's routed experts, those some sequence picks — with k of E chosen per
        token, 1 − (1 − k/E)^sequences of them on average; an input table that is not also the output
        head only as the rows gathered."""
        read = float(self.params_total - self.params_vision)
        if self.params_output:
            read -= self.params_embedding
        if self.experts:
            touched = 1 - (1 - self.experts_per_token / self.experts) ** max(sequences, 1)
            read -= self.params_experts * (1 - touched)
        return read

    def expert_read_params(self, sequences: int = 1) -> float:
        """Of decode_read_params, the routed experts' share: those some of the sequences pick."""
        if not self.experts:
            return 0.0
        return self.params_experts * (1 - (1 - self.experts_per_token / self.experts) ** max(sequences, 1))

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
        raise UnknownArchitecture(said("no {keys} in the config", keys=keys[0]))
    return value


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    for nested in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(nested), dict):
            return {**config[nested], **{k: v for k, v in config.items() if k == "tie_word_embeddings" and k not in config[nested]}}
    return config


def family_of(config: dict[str, Any]) -> str:
    text = text_config(config)
    model_type = str(text.get("model_type") or config.get("model_type") or "").lower()
    aliases = {
        "refinedweb": "falcon", "refinedwebmodel": "falcon", "gemma3_text": "gemma3", "mistral3": "mistral", "llama4_text": "llama4",
    }  # fmt: skip
    return aliases.get(model_type, model_type)


def from_config(config: dict[str, Any]) -> Architecture:
    text = text_config(config)
    family = family_of(config)
    builder = _BUILDERS.get(family)
    if builder is None:
        known = ", ".join(sorted(_BUILDERS))
        raise UnknownArchitecture(
            said("model_type {value} is not one this sizes from its config ({known})", value=repr(family or "(none)"), known=known)
        )
    try:
        arch = builder(config) if family in _WHOLE_CONFIG else builder(text)
    except (TypeError, ValueError, ArithmeticError, KeyError, IndexError, AttributeError) as exc:
        # a value of the wrong type where the builder multiplies: unknown, never a wrong size
        raise UnknownArchitecture(
            said("the config holds a value that cannot size {family}: {name}: {exc}", family=family, name=type(exc).__name__, exc=exc)
        ) from None
    arch.family = family
    arch.dtype = str(_get(text, "torch_dtype", "dtype") or _get(config, "torch_dtype", "dtype") or "") or None
    if family in ("gemma3",) and text is not config:
        arch.notes.append(said("the vision tower is not counted: it is not read per decoded token"))
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


def _attention_shape(text: dict[str, Any]) -> tuple[int, int, int, int, int]:
    """(hidden size, layers, attention heads, KV heads, head dim) of a grouped-query attention model."""
    hidden = _need(text, "hidden_size")
    heads = _need(text, "num_attention_heads")
    kv_heads = _get(text, "num_key_value_heads", default=heads)
    return hidden, _need(text, "num_hidden_layers"), heads, kv_heads, _get(text, "head_dim") or hidden // heads


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
    hidden, layers, heads, kv_heads, head_dim = _attention_shape(text)
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
    hidden, layers, heads, kv_heads, head_dim = _attention_shape(text)
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
        arch.notes.append(
            said("{count} multi-token-prediction layer(s) in the checkpoint are not counted", count=text["num_nextn_predict_layers"])
        )
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


def _gpt_oss(text: dict[str, Any]) -> Architecture:
    """gpt-oss: biased attention with a learned sink per head, layers alternating a sliding window and
    full attention (layer_types), and biased experts whose matrices are stored as MXFP4."""
    hidden, layers, heads, kv_heads, head_dim = _attention_shape(text)
    experts = _need(text, "num_local_experts")
    per_token = _need(text, "num_experts_per_tok", "experts_per_token")
    expert = _need(text, "intermediate_size")
    bias = bool(text.get("attention_bias", True))
    attention = _attention(hidden, heads, kv_heads, head_dim, bias, bias) + heads  # + the sinks
    matrices = experts * (hidden * 2 * expert + expert * hidden)
    expert_biases = experts * (2 * expert + hidden)
    router = experts * hidden + experts
    per_layer = attention + matrices + expert_biases + router + 2 * hidden
    embedding, output = _embeddings(text, hidden)
    total = embedding + output + layers * per_layer + hidden
    arch = Architecture("", total, embedding, output, layers * (matrices + expert_biases), experts, per_token, layers, hidden)
    arch.params_expert_matrices = layers * matrices
    arch.cache = _typed_cache(text, layers, 2 * kv_heads * head_dim)
    return arch


def _typed_cache(text: dict[str, Any], layers: int, elements: int) -> list[CacheLayer]:
    """Attention layers from layer_types: "sliding_attention" keeps its window, "full_attention" every
    token; any other kind (or no list of the right length) is not sized here."""
    types = text.get("layer_types")
    window = text.get("sliding_window")
    if not isinstance(types, list) or len(types) != layers:
        raise UnknownArchitecture(said("no layer_types list of its {layers} layers", layers=layers))
    cache = []
    for kind in types:
        if kind == "full_attention":
            cache.append(CacheLayer("full", elements))
        elif kind == "sliding_attention" and isinstance(window, int) and window > 0:
            cache.append(CacheLayer("sliding", elements, window))
        else:
            raise UnknownArchitecture(said("layer type {kind} is not one this sizes", kind=repr(str(kind)[:40])))
    return cache


def _mamba2(text: dict[str, Any], hidden: int) -> tuple[int, int, int]:
    """(parameters of one Mamba-2 mixer, its convolution and SSM state elements per sequence), as transformers builds
    NemotronHMamba2Mixer: in_proj to x, z, B, C and dt; a depthwise convolution over x, B and C;
    dt_bias, A_log and D per head; a gated RMSNorm; out_proj."""
    heads = _need(text, "mamba_num_heads")
    head_dim = _need(text, "mamba_head_dim")
    groups = _get(text, "n_groups", default=1)
    state = _need(text, "ssm_state_size")
    kernel = _get(text, "conv_kernel", default=4)
    inner = heads * head_dim
    conv_dim = inner + 2 * groups * state
    bias = bool(text.get("use_bias"))
    params = _linear(inner + conv_dim + heads, hidden, bias) + conv_dim * kernel + (conv_dim if text.get("use_conv_bias", True) else 0)
    params += 3 * heads + inner + _linear(hidden, inner, bias)
    return params, conv_dim * (kernel - 1), heads * head_dim * state


_PATTERN = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}


def _nemotron_h(text: dict[str, Any]) -> Architecture:
    """Nemotron-H: one block per character of hybrid_override_pattern (or layers_block_type): M a
    Mamba-2 mixer, * attention, - a squared-ReLU MLP (up and down), E a MoE of such experts with a
    shared one; each block has one RMSNorm."""
    hidden = _need(text, "hidden_size")
    pattern = text.get("hybrid_override_pattern")
    kinds = text.get("layers_block_type")
    if isinstance(pattern, str) and pattern and set(pattern) <= set(_PATTERN):
        blocks = [_PATTERN[ch] for ch in pattern]
    elif isinstance(kinds, list) and kinds and set(kinds) <= set(_PATTERN.values()):
        blocks = list(kinds)
    else:
        raise UnknownArchitecture(said("no hybrid_override_pattern (or layers_block_type) of M, *, - and E"))
    if len(blocks) != _get(text, "num_hidden_layers", default=len(blocks)):
        raise UnknownArchitecture(
            said("the hybrid pattern has {count} layers, num_hidden_layers {value}", count=len(blocks), value=text.get("num_hidden_layers"))
        )
    heads = _need(text, "num_attention_heads")
    kv_heads = _get(text, "num_key_value_heads", default=heads)
    head_dim = _get(text, "head_dim", "attention_head_dim") or hidden // heads
    bias = bool(text.get("attention_bias"))
    attention = _attention(hidden, heads, kv_heads, head_dim, bias, bias)
    mlp_bias = bool(text.get("mlp_bias"))
    mamba, conv_state, ssm_state = _mamba2(text, hidden) if "mamba" in blocks else (0, 0, 0)
    mlp = 2 * _linear(_need(text, "intermediate_size"), hidden, mlp_bias) if "mlp" in blocks else 0
    moe = routed = experts = per_token = 0
    if "moe" in blocks:
        experts, per_token = _need(text, "n_routed_experts"), _need(text, "num_experts_per_tok")
        width = _need(text, "moe_intermediate_size")
        latent = text.get("moe_latent_size") or hidden
        routed = experts * 2 * width * latent
        shared = 2 * _linear(_get(text, "moe_shared_expert_intermediate_size", default=0) or 0, hidden, mlp_bias)
        projections = 2 * _linear(latent, hidden, mlp_bias) if text.get("moe_latent_size") else 0
        moe = routed + shared + projections + experts * hidden + experts  # router and its correction bias
    size = {"mamba": mamba, "attention": attention, "mlp": mlp, "moe": moe}
    total = sum(size[block] + hidden for block in blocks)
    embedding, output = _embeddings(text, hidden)
    count = blocks.count
    arch = Architecture(
        "", total + embedding + output + hidden, embedding, output, count("moe") * routed, experts, per_token, len(blocks), hidden
    )
    arch.cache = [CacheLayer("full", 2 * kv_heads * head_dim)] * count("attention")
    arch.conv_state_elements, arch.ssm_state_elements = count("mamba") * conv_state, count("mamba") * ssm_state
    if "mamba" in blocks:  # vLLM's MambaMixer2 splits heads over the ranks; groups too, unless there is one
        groups = _get(text, "n_groups", default=1)
        arch.tp_units = {"Mamba-2 heads": _need(text, "mamba_num_heads"), **({"Mamba-2 groups": groups} if groups > 1 else {})}
    arch.notes.append(
        said(
            "{attention} of {layers} layers are attention and cache K and V per token; the {mamba} Mamba-2 layers keep a fixed "
            "state per sequence instead",
            attention=count("attention"),
            layers=len(blocks),
            mamba=count("mamba"),
        )
    )
    return arch


def _llama4(config: dict[str, Any]) -> Architecture:
    """Llama 4: MoE every interleave_moe_layer_step-th layer (one routed expert and a shared one per
    token), dense layers of intermediate_size_mlp; the layers with RoPE attend within chunks of
    attention_chunk_size, the NoPE layers (no_rope_layers 0, every fourth) to everything; the vision
    tower and projector are loaded but not read per decoded token."""
    text = text_config(config)
    hidden, layers, heads, kv_heads, head_dim = _attention_shape(text)
    bias = bool(text.get("attention_bias"))
    attention = _attention(hidden, heads, kv_heads, head_dim, bias, bias) + 2 * hidden
    experts, per_token = _need(text, "num_local_experts"), _need(text, "num_experts_per_tok")
    expert = _need(text, "intermediate_size")
    routed = experts * 3 * hidden * expert
    moe = routed + _gated_mlp(hidden, expert) + hidden * experts
    dense = _gated_mlp(hidden, _get(text, "intermediate_size_mlp") or expert)
    step = _get(text, "interleave_moe_layer_step", default=1) or 1
    listed = text.get("moe_layers")
    sparse = set(listed) if isinstance(listed, list) else {i for i in range(layers) if (i + 1) % step == 0}
    moe_count = len(sparse & set(range(layers)))
    embedding, output = _embeddings(
        {**text, "tie_word_embeddings": config.get("tie_word_embeddings", text.get("tie_word_embeddings"))}, hidden
    )
    vision = _llama4_vision(config, hidden)
    total = embedding + output + hidden + layers * attention + moe_count * moe + (layers - moe_count) * dense + vision
    arch = Architecture("", total, embedding, output, moe_count * routed, experts, per_token, layers, hidden)
    arch.params_vision = vision
    chunk = text.get("attention_chunk_size")
    rope = text.get("no_rope_layers")
    if not (isinstance(rope, list) and len(rope) == layers):
        interval = _get(text, "no_rope_layer_interval", default=4)
        rope = [int((i + 1) % interval != 0) for i in range(layers)]
    elements = 2 * kv_heads * head_dim
    arch.cache = [CacheLayer("chunked", elements, chunk) if uses and chunk else CacheLayer("full", elements) for uses in rope]
    return arch


def _llama4_vision(config: dict[str, Any], text_hidden: int) -> int:
    vision = config.get("vision_config")
    if not isinstance(vision, dict):
        return 0
    width = _need(vision, "hidden_size")
    inner = _need(vision, "intermediate_size")
    patch = _need(vision, "patch_size")
    patches = (_need(vision, "image_size") // patch) ** 2 + 1
    layer = 4 * _linear(width, width, True) + _linear(inner, width, True) + _linear(width, inner, True) + 2 * 2 * width
    params = _get(vision, "num_channels", default=3) * patch * patch * width + width + patches * width + 2 * 2 * width
    params += _need(vision, "num_hidden_layers") * layer
    projector_in, projector_out = _need(vision, "projector_input_dim"), _need(vision, "projector_output_dim")
    params += inner * projector_in + projector_out * projector_out  # the pixel-shuffle MLP
    return params + _need(vision, "vision_output_dim") * text_hidden  # the multimodal projector


def _qwen3_next(text: dict[str, Any]) -> Architecture:
    """Qwen3-Next: every full_attention_interval-th layer gated attention (q_proj also yields the
    gate), the others Gated DeltaNet (a constant state per sequence); a MoE of num_experts with a
    gated shared expert on every layer."""
    hidden, layers, heads, kv_heads, head_dim = _attention_shape(text)
    types = text.get("layer_types")
    if not (isinstance(types, list) and len(types) == layers):
        interval = _need(text, "full_attention_interval")
        types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]
    if not set(types) <= {"full_attention", "linear_attention"}:
        raise UnknownArchitecture(said("layer_types holds kinds other than full_attention and linear_attention"))
    bias = bool(text.get("attention_bias"))
    attention = _linear(2 * heads * head_dim, hidden, bias) + 2 * _linear(kv_heads * head_dim, hidden, bias)
    attention += _linear(hidden, heads * head_dim, bias) + 2 * head_dim
    key_heads, value_heads = _need(text, "linear_num_key_heads"), _need(text, "linear_num_value_heads")
    key_dim = key_heads * _need(text, "linear_key_head_dim")
    value_head = _need(text, "linear_value_head_dim")
    value_dim = value_heads * value_head
    kernel = _need(text, "linear_conv_kernel_dim")
    conv_dim = 2 * key_dim + value_dim
    linear = _linear(2 * key_dim + 2 * value_dim, hidden) + _linear(2 * value_heads, hidden) + conv_dim * kernel
    linear += 2 * value_heads + value_head + _linear(hidden, value_dim)
    moe, routed, experts, per_token = _moe(text, hidden, shared_intermediate=_get(text, "shared_expert_intermediate_size", default=0))
    moe += hidden if _get(text, "shared_expert_intermediate_size") else 0  # the shared expert's gate
    dense_only = set(text.get("mlp_only_layers") or [])
    step = _get(text, "decoder_sparse_step", default=1) or 1
    sparse = [i for i in range(layers) if i not in dense_only and (i + 1) % step == 0]
    dense_mlp = _gated_mlp(hidden, _need(text, "intermediate_size")) if len(sparse) < layers else 0
    full = types.count("full_attention")
    total = full * attention + (layers - full) * linear + len(sparse) * moe + (layers - len(sparse)) * dense_mlp + layers * 2 * hidden
    embedding, output = _embeddings(text, hidden)
    arch = Architecture(
        "", total + embedding + output + hidden, embedding, output, len(sparse) * routed, experts, per_token, layers, hidden
    )
    arch.cache = [CacheLayer("full", 2 * kv_heads * head_dim)] * full
    arch.conv_state_elements = (layers - full) * conv_dim * (kernel - 1)
    arch.ssm_state_elements = (layers - full) * value_heads * (key_dim // key_heads) * value_head
    arch.params_mtp = attention + moe + 2 * hidden + _linear(hidden, 2 * hidden) + 3 * hidden  # mtp.*: fc, its norms, one layer
    arch.tp_units = {"linear-attention key heads": key_heads, "linear-attention value heads": value_heads}
    arch.notes.append(
        said(
            "{full} of {layers} layers are attention and cache K and V per token; the {linear} Gated DeltaNet layers keep a "
            "fixed state per sequence instead",
            full=full,
            layers=layers,
            linear=layers - full,
        )
    )
    return arch


def _glm4_moe(text: dict[str, Any]) -> Architecture:
    """GLM-4.5: grouped-query attention (biased q, k, v), first_k_dense_replace dense layers, then MoE
    layers with shared experts and a router with a correction bias (as DeepSeek-V3 routes)."""
    hidden, layers, heads, kv_heads, head_dim = _attention_shape(text)
    attention = _attention(hidden, heads, kv_heads, head_dim, bool(text.get("attention_bias")), False)
    attention += 2 * hidden + (2 * head_dim if text.get("use_qk_norm") else 0)
    experts, per_token = _need(text, "n_routed_experts"), _need(text, "num_experts_per_tok")
    width = _need(text, "moe_intermediate_size")
    routed = experts * _gated_mlp(hidden, width)
    moe = routed + _gated_mlp(hidden, width * (text.get("n_shared_experts") or 0)) + experts * hidden + experts
    first_dense = text.get("first_k_dense_replace") or 0
    dense = _gated_mlp(hidden, _need(text, "intermediate_size"))
    sparse = max(layers - first_dense, 0)
    embedding, output = _embeddings(text, hidden)
    total = embedding + output + hidden + layers * attention + sparse * moe + (layers - sparse) * dense
    arch = Architecture("", total, embedding, output, sparse * routed, experts, per_token, layers, hidden)
    arch.cache = [CacheLayer("full", 2 * kv_heads * head_dim)] * layers
    mtp = text.get("num_nextn_predict_layers") or 0
    if mtp:  # each: a decoder layer, eh_proj, enorm, hnorm, and its own embedding, head and norm
        arch.params_mtp = mtp * (attention + moe + _linear(hidden, 2 * hidden) + 3 * hidden + 2 * embedding)
        arch.notes.append(
            said(
                "{mtp} multi-token-prediction layer(s) in the checkpoint are not counted: vLLM loads them only for speculative decoding",
                mtp=mtp,
            )
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
    "gpt_oss": _gpt_oss,
    "nemotron_h": _nemotron_h,
    "qwen3_next": _qwen3_next,
    "glm4_moe": _glm4_moe,
    "llama4": _llama4,
}
_WHOLE_CONFIG = {"llama4"}  # builders that read the vision tower beside the text config
