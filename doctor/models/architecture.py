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

from dataclasses import dataclass, field
from typing import Any

from decode_doctor.i18n import N_, said
from decode_doctor.i18n.labels import Labelled


class UnknownArchitecture(ValueError):
    """The config cannot be sized: the message says what is missing or unknown."""


class CacheKind(Labelled):
    """What a layer caches per token."""

    FULL = "full", N_("full")  # K and V for every token
    SLIDING = "sliding", N_("sliding")  # K and V for at most its window
    CHUNKED = "chunked", N_("chunked")  # K and V for at most its chunk
    MLA = "mla", N_("mla")  # one compressed latent per token


@dataclass(frozen=True)
class CacheLayer:
    kind: CacheKind
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


def get(config: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return default


def need(config: dict[str, Any], *keys: str) -> int:
    value = get(config, *keys)
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
    from .families import BUILDERS, WHOLE_CONFIG

    text = text_config(config)
    family = family_of(config)
    builder = BUILDERS.get(family)
    if builder is None:
        known = ", ".join(sorted(BUILDERS))
        raise UnknownArchitecture(
            said("model_type {value} is not one this sizes from its config ({known})", value=repr(family or "(none)"), known=known)
        )
    try:
        arch = builder(config) if family in WHOLE_CONFIG else builder(text)
    except (TypeError, ValueError, ArithmeticError, KeyError, IndexError, AttributeError) as exc:
        # a value of the wrong type where the builder multiplies: unknown, never a wrong size
        raise UnknownArchitecture(
            said("the config holds a value that cannot size {family}: {name}: {exc}", family=family, name=type(exc).__name__, exc=str(exc))
        ) from None
    arch.family = family
    arch.dtype = str(get(text, "torch_dtype", "dtype") or get(config, "torch_dtype", "dtype") or "") or None
    if family in ("gemma3",) and text is not config:
        arch.notes.append(said("the vision tower is not counted: it is not read per decoded token"))
    return arch
