"""Reading values out of a config without trusting them: numbers, counts, the nested text config."""

from __future__ import annotations

import math
from typing import Any

from decode_doctor.models.safetensors import tensor_bytes

ROPE_TYPES = {"default", "linear", "dynamic", "yarn", "longrope", "su", "llama3", "mrope"}
FLOAT_DTYPES = ("BF16", "F16", "F32")
DEFAULT_ROPE_THETA = 10000.0  # transformers' default when config.json has no rope_theta
NUMBER_LIMIT = 1e300  # a config value beyond this is not a number any loader computes with


def text_config_of(config: dict[str, Any]) -> dict[str, Any]:
    for nested in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(nested), dict):
            return {**config, **config[nested]}
    return config


def as_number(value: Any) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    if isinstance(value, int) and abs(value) > NUMBER_LIMIT:  # float() of a 400-digit integer overflows
        return None
    return float(value) if math.isfinite(value) else None


def as_count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 1 << 40 else None


def context_limit(text: dict[str, Any]) -> tuple[int | None, int | None]:
    """(the trained context, what rope_scaling stretches it to)."""
    trained = as_count(text.get("max_position_embeddings"))
    scaling = text.get("rope_scaling")
    if trained is None or not isinstance(scaling, dict):
        return trained, trained
    kind = scaling.get("rope_type") or scaling.get("type")
    factor = as_number(scaling.get("factor"))
    if kind in ("linear", "dynamic", "yarn") and factor and factor > 1:
        original = as_count(scaling.get("original_max_position_embeddings")) or trained
        return trained, max(trained, int(original * min(factor, 1 << 20)))
    return trained, trained


def dominant(header: dict[str, Any]) -> str | None:
    weight: dict[str, int] = {}
    for key, entry in header.items():
        if key != "__metadata__" and entry["dtype"] in FLOAT_DTYPES:
            weight[entry["dtype"]] = weight.get(entry["dtype"], 0) + tensor_bytes(entry)
    return max(weight, key=weight.__getitem__) if weight else None
