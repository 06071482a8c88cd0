"""Model files without their tensor data: config.json, safetensors headers, GGUF headers.

Only headers are read, so a directory with tens of GB of weights is measured in milliseconds.
Byte counts come from the tensors really stored (shape × dtype, or GGUF blocks), so quantized
checkpoints (GPTQ/AWQ int32 packs with fp16 scales, GGUF K-quants) count what is there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from decode_doctor.engine.hfcache import locate
from decode_doctor.i18n import _, literal

from .files import JSON_LIMIT, ModelFormatError, first_of, open_model_file, read_config, read_regular
from .ggufheader import GGML_TYPES, read_gguf, read_gguf_header
from .info import ModelFormat, ModelInfo
from .safetensors import SAFETENSORS_BITS, add_safetensors, check_shard_name, read_safetensors_header, safetensors_files

__all__ = [
    "GGML_TYPES", "JSON_LIMIT", "SAFETENSORS_BITS", "ModelFormatError", "ModelInfo", "apply_config", "check_shard_name", "read_config",
    "read_gguf", "read_gguf_header", "read_hf_directory", "read_model", "read_model_config", "read_regular", "read_safetensors_header",
]  # fmt: skip

SIZE_KEYS = (
    "num_hidden_layers", "n_layer", "num_layers", "n_layers", "num_attention_heads", "n_head", "num_heads", "n_heads",
    "num_key_value_heads", "n_head_kv", "num_kv_heads", "multi_query_group_num", "hidden_size", "n_embd", "d_model",
    "head_dim", "intermediate_size", "ffn_hidden_size", "moe_intermediate_size", "vocab_size", "padded_vocab_size",
    "max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "kv_lora_rank", "q_lora_rank",
    "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "num_local_experts", "n_routed_experts", "num_experts",
    "num_experts_per_tok", "moe_top_k", "num_experts_per_token", "sliding_window",
)  # fmt: skip


# Counts that may be 0 (or "auto", mamba_dt_rank), each a whole number when it is one.
COUNT_KEYS = (
    "attn_layer_offset", "attn_layer_period", "decoder_sparse_step", "expert_layer_offset", "expert_layer_period",
    "first_k_dense_replace", "mamba_d_conv", "mamba_d_state", "mamba_dt_rank", "mamba_expand", "moe_layer_freq",
    "n_shared_experts", "num_nextn_predict_layers", "shared_expert_intermediate_size", "sliding_window_pattern",
)  # fmt: skip
# Bounds far above any published model, so that sizing loops and products stay small.
SIZE_LIMITS: dict[str, int] = {
    **dict.fromkeys(("num_hidden_layers", "n_layer", "num_layers", "n_layers"), 10_000),
    **dict.fromkeys(
        ("num_local_experts", "n_routed_experts", "num_experts", "num_experts_per_tok", "moe_top_k", "num_experts_per_token"), 1 << 16
    ),
}


def _items(value: Any) -> list[tuple[str, Any]]:
    return list(value.items()) if isinstance(value, dict) else []


def check_sizes(config: dict[str, Any], path: Path) -> None:
    """ModelFormatError for a size of the wrong type or sign, in the config or its nested text config."""
    nested = [n for n in ("text_config", "llm_config", "language_config") if isinstance(config.get(n), dict)]
    scopes = [("", config)] + [(f"{n}.", config[n]) for n in nested]
    for prefix, scope in scopes:
        for key, value in [*scope.items(), *((f"rope_scaling.{k}", v) for k, v in _items(scope.get("rope_scaling")))]:
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 1 << 63:
                digits = len(str(abs(value))) if abs(value) < 1 << 4096 else "over 1,000"
                raise ModelFormatError(
                    _(
                        "{file}: {prefix}{key} is a {digits}-digit integer: no loader computes with it",
                        file=path.name,
                        prefix=prefix,
                        key=key,
                        digits=digits,
                    ),
                    path,
                )
        for key in SIZE_KEYS:
            value = scope.get(key)
            if value is None or (key == "sliding_window" and value is False):
                continue
            limit = SIZE_LIMITS.get(key, 1 << 32)
            _whole(path, prefix, key, value, minimum=1, limit=limit)
        heads = next((scope[k] for k in ("num_attention_heads", "n_head", "num_heads", "n_heads") if isinstance(scope.get(k), int)), None)
        kv = next((scope[k] for k in ("num_key_value_heads", "n_head_kv", "num_kv_heads") if isinstance(scope.get(k), int)), None)
        if heads and kv and (kv > heads or heads % kv):
            message = _(
                "{file}: {prefix}num_key_value_heads {kv} does not divide the {heads} attention heads, as grouped queries need",
                file=path.name,
                prefix=prefix,
                kv=kv,
                heads=heads,
            )
            raise ModelFormatError(message, path)
        for key in COUNT_KEYS:
            value = scope.get(key)
            if value is None or (key == "mamba_dt_rank" and value == "auto"):
                continue
            _whole(path, prefix, key, value, minimum=0, limit=1 << 20)


def _whole(path: Path, prefix: str, key: str, value: object, *, minimum: int, limit: int) -> None:
    """A size (at least 1) or a count (at least 0) that is a whole number no model exceeds, else the reason."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        shown = literal(json.dumps(value)[:40])
        message = (
            _("{file}: {prefix}{key} is {value}, not a whole number above 0", file=path.name, prefix=prefix, key=key, value=shown)
            if minimum
            else _("{file}: {prefix}{key} is {value}, not a whole number", file=path.name, prefix=prefix, key=key, value=shown)
        )
        raise ModelFormatError(message, path)
    if value > limit:  # no model has that many: a typo or a hostile file, never sized
        raise _beyond_any_model(path, prefix + key, value, limit)


def _beyond_any_model(path: Path, key: str, value: int, limit: int) -> ModelFormatError:
    """A size or count no model has: a typo or a hostile file, never sized."""
    message = _("{file}: {key} is {value:,}, more than any model has (≤ {limit:,})", file=path.name, key=key, value=value, limit=limit)
    return ModelFormatError(message, path)


def read_model_config(path: Path) -> dict[str, Any]:
    """A model's config.json, its sizes checked (ModelFormatError otherwise)."""
    config = read_config(path)
    check_sizes(config, path)
    return config


def apply_config(info: ModelInfo, config: dict[str, Any]) -> None:
    info.config = config
    text = config
    for nested in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(nested), dict):
            text = {**config[nested]}
            break
    archs = config.get("architectures") or text.get("architectures")
    named = [arch for arch in (archs if isinstance(archs, list) else []) if isinstance(arch, str) and arch]  # [[0]]: none
    model_type = next((t for t in (text.get("model_type"), config.get("model_type")) if isinstance(t, str) and t), None)
    info.architecture = (named[0] if named else None) or model_type
    info.layers = first_of(text, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
    info.attention_heads = first_of(text, "num_attention_heads", "n_head", "num_heads", "n_heads")
    kv = first_of(text, "num_key_value_heads", "n_head_kv", "num_kv_heads", "multi_query_group_num")
    if kv is None and text.get("multi_query"):
        kv = 1
    info.kv_heads = kv if kv is not None else info.attention_heads
    info.hidden_size = first_of(text, "hidden_size", "n_embd", "d_model", "dim")
    head_dim = text.get("head_dim")
    if head_dim is None and info.hidden_size and info.attention_heads:
        head_dim = info.hidden_size // info.attention_heads
    info.head_dim = head_dim
    if text.get("kv_lora_rank"):
        info.kv_latent_dim = int(text["kv_lora_rank"]) + int(text.get("qk_rope_head_dim") or 0)
    info.vocab_size = first_of(text, "vocab_size", "padded_vocab_size")
    info.max_context = first_of(text, "max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
    info.experts = first_of(text, "num_local_experts", "n_routed_experts", "num_experts")
    info.experts_per_token = first_of(text, "num_experts_per_tok", "moe_top_k", "num_experts_per_token")
    tied = first_of(config, "tie_word_embeddings")
    info.tied_embeddings = bool(tied if tied is not None else text.get("tie_word_embeddings", False))
    quant = config.get("quantization_config")
    if isinstance(quant, dict):
        info.quantization = str(quant.get("quant_method") or quant.get("quant_type") or "quantized")


def read_hf_directory(directory: Path) -> ModelInfo:
    info = ModelInfo(str(directory), ModelFormat.CONFIG_ONLY)
    config_path = directory / "config.json"
    if config_path.is_symlink() and not config_path.exists():
        why = _("a link loop") if loops(config_path) else _("a link to a missing file")
        raise ModelFormatError(_("{file}/config.json is {why}: nothing to read", file=directory.name, why=why), config_path, "missing")
    if config_path.is_file():
        apply_config(info, read_model_config(config_path))
    files = safetensors_files(directory)
    if files:
        info.format = ModelFormat.SAFETENSORS
        for file in files:
            add_safetensors(info, file)
    else:
        bins = sorted(directory.glob("pytorch_model*.bin")) + sorted(directory.glob("*.pt"))
        if bins:
            info.format = ModelFormat.PYTORCH_BIN
            info.files = [b.name for b in bins]
            info.weight_bytes = sum(b.stat().st_size for b in bins)
            info.notes.append("pickle checkpoint: sizes from file sizes; the embedding table cannot be told apart")
    if info.format is ModelFormat.CONFIG_ONLY and not config_path.is_file():
        if str(directory) == ".":  # "./ holds no config.json" reads as a typo
            raise ModelFormatError(_("the current directory holds no config.json, safetensors or GGUF file; give --model"), directory)
        raise ModelFormatError(_("{directory} holds no config.json, safetensors or GGUF file", directory=directory), directory)
    if info.format is ModelFormat.SAFETENSORS and info.output_head_bytes == 0 and info.embedding_bytes:
        info.tied_embeddings = True  # no separate head: the embedding matrix is the head
    if info.format is ModelFormat.CONFIG_ONLY:
        info.notes.append("no weight files: weight bytes unknown")
    return info


def loops(path: Path) -> bool:
    try:
        path.resolve(strict=True)
    except RuntimeError:  # Python < 3.13: "Symlink loop"
        return True
    except OSError as exc:
        return exc.errno == 40  # ELOOP
    return False


def read_model(path: Path) -> ModelInfo:
    """A model directory (Hugging Face layout, or a repository in the Hugging Face cache), or a single
    .gguf / .safetensors file."""
    place = locate(path)
    if place.layout == "hf-cache":
        info = _read_files(place.root)
        info.label = (place.repo or "").rsplit("/", 1)[-1] or None
        return info
    return _read_files(path)


def _read_files(path: Path) -> ModelInfo:
    if path.is_dir():
        ggufs = sorted(path.glob("*.gguf"))
        if ggufs and not (path / "config.json").exists():
            return read_gguf(ggufs[0])
        return read_hf_directory(path)
    with open_model_file(path) as handle:
        magic = handle.read(4)
    if path.suffix == ".gguf" or magic == b"GGUF":
        return read_gguf(path)
    if path.suffix == ".safetensors":
        info = ModelInfo(str(path), ModelFormat.SAFETENSORS)
        add_safetensors(info, path)
        config = path.parent / "config.json"
        if config.is_file():
            apply_config(info, read_model_config(config))
        return info
    raise ModelFormatError(_("{file}: not a model directory, .gguf or .safetensors file", file=path.name), path)
