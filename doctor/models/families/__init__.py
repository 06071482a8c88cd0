"""The families architecture.from_config sizes, by model_type: a builder reads the text config (or the
whole config, for those in WHOLE_CONFIG) and counts the parameters and the cache."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..architecture import Architecture
from .blocks import llama_like, tied
from .dense import _falcon, _gemma2, _gemma3, _gpt_neox, _llama, _phi3, _qwen2, _qwen3
from .hybrid import _jamba, _nemotron_h, _qwen3_next
from .moe import _deepseek, _glm4_moe, _gpt_oss, _llama4, _mixtral, _qwen2_moe, _qwen3_moe

BUILDERS: dict[str, Callable[[dict[str, Any]], Architecture]] = {
    "llama": _llama,
    "mistral": _llama,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "gemma": lambda text: llama_like({**text, "tie_word_embeddings": tied(text, True)}),
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
WHOLE_CONFIG = {"llama4"}  # builders that read the vision tower beside the text config
