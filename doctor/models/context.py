"""The longest context an engine starts a model with, as the engine itself derives it from config.json,
and the length a YaRN scaling reaches."""

from __future__ import annotations

from typing import Any

from ..i18n import said
from .architecture import text_config

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
            return int(original * factor), said(
                "{kind} factor {factor:g} over {original:,}", kind=kind, factor=factor, original=int(original)
            )
    return None, ""


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < float("inf")
