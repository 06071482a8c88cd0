"""Model files without their tensor data: config.json, safetensors headers, GGUF headers.

Only headers are read, so a directory with tens of GB of weights is measured in milliseconds.
Byte counts come from the tensors really stored (shape × dtype, or GGUF blocks), so quantized
checkpoints (GPTQ/AWQ int32 packs with fp16 scales, GGUF K-quants) count what is there.
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from decode_doctor.engine.files import NotRegular, open_regular
from decode_doctor.engine.hfcache import locate
from decode_doctor.i18n import _

from .contract import ModelInfo

SAFETENSORS_MAX_HEADER = 100_000_000
JSON_LIMIT = 64 << 20  # config.json, tokenizer.json and friends: read whole only below this
SAFETENSORS_BITS = {
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
}

# ggml type id → (name, elements per block, bytes per block), as gguf-py's GGML_QUANT_SIZES has them.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
}
GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
GGUF_STRING, GGUF_ARRAY = 8, 9
LENGTH = struct.Struct("<Q")

EMBEDDING = re.compile(r"(^|\.)(embed_tokens|wte|tok_embeddings|word_embeddings)\.weight$|^token_embd\.weight$")
OUTPUT_HEAD = re.compile(r"(^|\.)(lm_head|embed_out)\.weight$|^output\.weight$")
NOT_DECODE = re.compile(r"(vision_tower|vision_model|visual\.|multi_modal_projector|mm_projector|audio_tower|image_newline|^v\.|^mm\.)")
EXPERT = re.compile(r"\.experts\.\d+\.|_exps\.weight$|\.experts\.(gate_up_proj|down_proj)")


class ModelFormatError(Exception):
    """A model file that cannot be read as what it claims to be; the message says why, for a user.

    kind: "malformed" (not the format it claims), "truncated" (shorter than its header says),
    "missing" (a file the model needs is not there), "encoding" (JSON that is not UTF-8: the
    encodings check's to judge and convert).
    """

    def __init__(self, message: str, path: Path | str | None = None, kind: str = "malformed"):
        super().__init__(message)
        self.path = str(path) if path is not None else None
        self.kind = kind


def _first(config: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return None


def _open(path: Path) -> BinaryIO:
    """A model file opened for reading; ModelFormatError for a FIFO, device or socket (never blocks)."""
    try:
        return open_regular(path)
    except NotRegular as exc:
        raise ModelFormatError(_("{file} is {strerror}", file=path.name, strerror=exc.strerror), path) from None
    except FileNotFoundError:
        raise ModelFormatError(_("{file} is missing (a dangling link?)", file=path.name), path, "missing") from None
    except OSError as exc:  # permission denied, I/O error: a finding, never a crash of the check
        raise ModelFormatError(_("{file}: cannot read it ({value})", file=path.name, value=exc.strerror or exc), path) from None


def read_regular(path: Path, limit: int) -> bytes:
    """A regular file's bytes, at most limit of them (ModelFormatError beyond); FIFOs, devices and
    sockets are refused without being opened for a blocking read."""
    with _open(path) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ModelFormatError(_("{file} is larger than {amount} MiB; not read", file=path.name, amount=limit >> 20), path)
    return data


# Sizes a loader multiplies with: each must be a whole number above 0 when present (not "64", [256], NaN).
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
SIZE_LIMITS = dict.fromkeys(("num_hidden_layers", "n_layer", "num_layers", "n_layers"), 10_000) | dict.fromkeys(
    ("num_local_experts", "n_routed_experts", "num_experts", "num_experts_per_tok", "moe_top_k", "num_experts_per_token"), 1 << 16
)


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
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ModelFormatError(
                    _(
                        "{file}: {prefix}{key} is {value}, not a whole number above 0",
                        file=path.name,
                        prefix=prefix,
                        key=key,
                        value=json.dumps(value)[:40],
                    ),
                    path,
                )
            limit = SIZE_LIMITS.get(key, 1 << 32)
            if value > limit:  # no model has that many: a typo or a hostile file, never sized
                raise _beyond_any_model(path, prefix + key, value, limit)
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
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ModelFormatError(
                    _(
                        "{file}: {prefix}{key} is {value}, not a whole number",
                        file=path.name,
                        prefix=prefix,
                        key=key,
                        value=json.dumps(value)[:40],
                    ),
                    path,
                )
            limit = 1 << 20
            if value > limit:  # no model has that many: a typo or a hostile file, never sized
                raise _beyond_any_model(path, prefix + key, value, limit)


def _beyond_any_model(path: Path, key: str, value: int, limit: int) -> ModelFormatError:
    """A size or count no model has: a typo or a hostile file, never sized."""
    message = _("{file}: {key} is {value:,}, more than any model has (≤ {limit:,})", file=path.name, key=key, value=value, limit=limit)
    return ModelFormatError(message, path)


def read_config(path: Path, limit: int = JSON_LIMIT) -> dict[str, Any]:
    try:
        # NaN and Infinity as transformers reads them (Python's json does): real configs hold them
        # (Nemotron-H's time_step_limit); a size that is one is refused by check_sizes
        data = json.loads(read_regular(path, limit).decode("utf-8"))
    except UnicodeDecodeError as exc:
        message = _(
            "{file} is not UTF-8 ({reason} at byte {start}); loaders will fail on it too",
            file=path.name,
            reason=exc.reason,
            start=exc.start,
        )
        raise ModelFormatError(message, path, "encoding") from None
    except json.JSONDecodeError as exc:
        raise ModelFormatError(
            _("{file} is not valid JSON: {msg} at line {lineno}", file=path.name, msg=exc.msg, lineno=exc.lineno), path
        ) from None
    except ValueError as exc:  # a number of more than 4,300 digits
        raise ModelFormatError(_("{file} is not valid JSON: {exc}", file=path.name, exc=exc), path) from None
    except RecursionError:
        raise ModelFormatError(_("{file} nests too deeply to be a model's JSON", file=path.name), path) from None
    if not isinstance(data, dict):
        raise ModelFormatError(_("{file} holds a JSON {name}, not an object", file=path.name, name=type(data).__name__), path)
    return data


def read_model_config(path: Path) -> dict[str, Any]:
    """A model's config.json, its sizes checked (ModelFormatError otherwise)."""
    config = read_config(path)
    check_sizes(config, path)
    return config


def apply_config(info: ModelInfo, config: dict[str, Any]) -> None:
    info.__dict__["_config"] = config
    text = config
    for nested in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(nested), dict):
            text = {**config[nested]}
            break
    archs = config.get("architectures") or text.get("architectures")
    info.architecture = (archs[0] if isinstance(archs, list) and archs else None) or text.get("model_type") or config.get("model_type")
    info.layers = _first(text, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
    info.attention_heads = _first(text, "num_attention_heads", "n_head", "num_heads", "n_heads")
    kv = _first(text, "num_key_value_heads", "n_head_kv", "num_kv_heads", "multi_query_group_num")
    if kv is None and text.get("multi_query"):
        kv = 1
    info.kv_heads = kv if kv is not None else info.attention_heads
    info.hidden_size = _first(text, "hidden_size", "n_embd", "d_model", "dim")
    head_dim = text.get("head_dim")
    if head_dim is None and info.hidden_size and info.attention_heads:
        head_dim = info.hidden_size // info.attention_heads
    info.head_dim = head_dim
    if text.get("kv_lora_rank"):
        info.kv_latent_dim = int(text["kv_lora_rank"]) + int(text.get("qk_rope_head_dim") or 0)
    info.vocab_size = _first(text, "vocab_size", "padded_vocab_size")
    info.max_context = _first(text, "max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
    info.experts = _first(text, "num_local_experts", "n_routed_experts", "num_experts")
    info.experts_per_token = _first(text, "num_experts_per_tok", "moe_top_k", "num_experts_per_token")
    tied = _first(config, "tie_word_embeddings")
    info.tied_embeddings = bool(tied if tied is not None else text.get("tie_word_embeddings", False))
    quant = config.get("quantization_config")
    if isinstance(quant, dict):
        info.quantization = str(quant.get("quant_method") or quant.get("quant_type") or "quantized")


def _account(info: ModelInfo, name: str, dtype: str, nbytes: int) -> None:
    info.weight_bytes += nbytes
    info.bytes_by_dtype[dtype] = info.bytes_by_dtype.get(dtype, 0) + nbytes
    info.tensor_count += 1
    if NOT_DECODE.search(name):
        info.not_decode_bytes += nbytes
    elif EMBEDDING.search(name):
        info.embedding_bytes += nbytes
    elif OUTPUT_HEAD.search(name):
        info.output_head_bytes += nbytes
    elif EXPERT.search(name):
        info.expert_bytes += nbytes


def _natural(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """The header of a safetensors file, checked the way the safetensors library checks it: every
    entry well formed, the tensors' byte ranges contiguous from 0, and the file exactly that long."""
    size = path.stat().st_size
    with _open(path) as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise ModelFormatError(
                _("{file}: truncated: {size} bytes, not even the 8-byte header length", file=path.name, size=size), path, "truncated"
            )
        length = int.from_bytes(head, "little")
        if length > SAFETENSORS_MAX_HEADER:
            raise ModelFormatError(
                _(
                    "{file}: header length {length:,} exceeds the format's {limit:,}-byte limit (not safetensors, or corrupt)",
                    file=path.name,
                    length=length,
                    limit=SAFETENSORS_MAX_HEADER,
                ),
                path,
            )
        if 8 + length > size:
            message = _(
                "{file}: header length {length:,} is larger than the {amount:,} bytes after it: the file is truncated",
                file=path.name,
                length=length,
                amount=size - 8,
            )
            raise ModelFormatError(message, path, "truncated")
        raw = handle.read(length)
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, too deep, a number too long
        raise ModelFormatError(
            _("{file}: the {length:,}-byte header is not valid JSON ({exc})", file=path.name, length=length, exc=exc), path
        ) from None
    if not isinstance(header, dict):
        raise ModelFormatError(_("{file}: the header is not a JSON object", file=path.name), path)
    spans = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        spans.append((*_tensor_span(path, name, entry), name))
    spans.sort()
    end = 0
    for begin, stop, name in spans:
        if begin != end:
            where = _("overlaps the tensor before it") if begin < end else _("leaves a gap of {size:,} bytes before it", size=begin - end)
            raise ModelFormatError(
                _(
                    "{file}: tensor {name} starts at byte {begin:,} and {where}: corrupt header",
                    file=path.name,
                    name=repr(name),
                    begin=begin,
                    where=where,
                ),
                path,
            )
        end = stop
    expected = 8 + length + end
    if expected > size:
        raise ModelFormatError(
            _(
                "{file}: tensors end at byte {expected:,} but the file has {size:,}: truncated (an interrupted download?)",
                file=path.name,
                expected=expected,
                size=size,
            ),
            path,
            "truncated",
        )
    if expected < size:
        raise ModelFormatError(
            _("{file}: {amount:,} bytes follow the last tensor: not a safetensors file as written", file=path.name, amount=size - expected),
            path,
        )
    return header


def _tensor_span(path: Path, name: str, entry: Any) -> tuple[int, int]:
    try:
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        bits = SAFETENSORS_BITS[dtype]
        ok = isinstance(shape, list) and all(_natural(d) for d in shape) and len(shape) <= 16
        ok = ok and isinstance(offsets, list) and len(offsets) == 2 and all(_natural(o) for o in offsets)
    except (KeyError, TypeError):
        ok = False
    if not ok:
        raise ModelFormatError(
            _(
                "{file}: tensor {name} has a malformed entry or an unknown dtype: {entry}",
                file=path.name,
                name=repr(name),
                entry=str(entry)[:120],
            ),
            path,
        )
    begin, stop = offsets
    expected = math.prod(shape) * bits // 8
    if stop - begin != expected:
        raise ModelFormatError(
            _(
                "{file}: tensor {name} spans {amount:,} bytes but {dtype}{shape} needs {expected:,}",
                file=path.name,
                name=repr(name),
                amount=stop - begin,
                dtype=dtype,
                shape=shape,
                expected=expected,
            ),
            path,
        )
    return begin, stop


def tensor_bytes(entry: dict[str, Any]) -> int:
    return math.prod(entry["shape"]) * SAFETENSORS_BITS[entry["dtype"]] // 8


def _add_safetensors(info: ModelInfo, path: Path) -> None:
    info.files.append(path.name)
    for name, entry in read_safetensors_header(path).items():
        if name != "__metadata__":
            _account(info, name, entry["dtype"], tensor_bytes(entry))


def _safetensors_files(directory: Path) -> list[Path]:
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        data = read_config(index)
        weight_map = data.get("weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise ModelFormatError(_("{file} has no weight_map of tensor names to file names", file=index.name), index)
        for name in weight_map.values():
            check_shard_name(index, name)
        files = sorted({directory / name for name in weight_map.values()})
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            message = _(
                "{file} names {count} shard(s) that are missing: {missing}",
                file=index.name,
                count=len(missing),
                missing=", ".join(missing[:5]),
            )
            raise ModelFormatError(message, index, "missing")
        return files
    return sorted(p for p in directory.glob("*.safetensors") if p.is_file())


def check_shard_name(index: Path, name: str) -> None:
    """A weight_map names files beside the index: a plain name a filesystem can hold, never a path out."""
    if not name or "/" in name or "\\" in name or "\0" in name or name in (".", "..") or len(name.encode("utf-8", "surrogateescape")) > 255:
        shown = name[:60] + ("…" if len(name) > 60 else "")
        raise ModelFormatError(
            _("{file} names {shown} ({count} characters), not a file name beside it", file=index.name, shown=repr(shown), count=len(name)),
            index,
        )


def read_hf_directory(directory: Path) -> ModelInfo:
    info = ModelInfo(str(directory), "config-only")
    config_path = directory / "config.json"
    if config_path.is_symlink() and not config_path.exists():
        why = _("a link loop") if _loops(config_path) else _("a link to a missing file")
        raise ModelFormatError(_("{file}/config.json is {why}: nothing to read", file=directory.name, why=why), config_path, "missing")
    if config_path.is_file():
        apply_config(info, read_model_config(config_path))
    files = _safetensors_files(directory)
    if files:
        info.format = "safetensors"
        for file in files:
            _add_safetensors(info, file)
    else:
        bins = sorted(directory.glob("pytorch_model*.bin")) + sorted(directory.glob("*.pt"))
        if bins:
            info.format = "pytorch-bin"
            info.files = [b.name for b in bins]
            info.weight_bytes = sum(b.stat().st_size for b in bins)
            info.notes.append("pickle checkpoint: sizes from file sizes; the embedding table cannot be told apart")
    if info.format == "config-only" and not config_path.is_file():
        raise ModelFormatError(_("{directory} holds no config.json, safetensors or GGUF file", directory=directory), directory)
    if info.format == "safetensors" and info.output_head_bytes == 0 and info.embedding_bytes:
        info.tied_embeddings = True  # no separate head: the embedding matrix is the head
    if info.format == "config-only":
        info.notes.append("no weight files: weight bytes unknown")
    return info


def _loops(path: Path) -> bool:
    try:
        path.resolve(strict=True)
    except RuntimeError:  # Python < 3.13: "Symlink loop"
        return True
    except OSError as exc:
        return exc.errno == 40  # ELOOP
    return False


class _Reader:
    def __init__(self, handle: BinaryIO, path: Path, size: int):
        self.handle, self.path, self.size = handle, path, size
        self.position = handle.tell()  # kept here: a tell() per vocabulary entry costs a system call

    def take(self, count: int) -> bytes:
        if count > self.size:
            raise ModelFormatError(
                _(
                    "{file}: a field of {count:,} bytes in a {size:,}-byte file: corrupt header",
                    file=self.path.name,
                    count=count,
                    size=self.size,
                ),
                self.path,
            )
        data = self.handle.read(count)
        if len(data) < count:
            raise ModelFormatError(_("{file}: truncated inside the GGUF header", file=self.path.name), self.path, "truncated")
        self.position += count
        return data

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def skip(self, count: int) -> None:
        if self.position + count > self.size:
            raise ModelFormatError(_("{file}: truncated inside the GGUF header", file=self.path.name), self.path, "truncated")
        self.handle.seek(count, 1)
        self.position += count

    def string(self) -> str:
        return self.take(self.unpack("<Q")).decode("utf-8", errors="replace")

    def _skip_strings(self, count: int) -> None:
        """Seeks past count strings; the hot loop of a 150k-token vocabulary, so kept lean."""
        read, seek, unpack = self.handle.read, self.handle.seek, LENGTH.unpack
        position, size = self.position, self.size
        for _index in range(count):
            raw = read(8)
            if len(raw) < 8:
                raise ModelFormatError(_("{file}: truncated inside the GGUF header", file=self.path.name), self.path, "truncated")
            (length,) = unpack(raw)
            position += 8 + length
            if position > size:
                raise ModelFormatError(_("{file}: truncated inside the GGUF header", file=self.path.name), self.path, "truncated")
            seek(length, 1)
        self.position = position

    def value(self, vtype: int, keep_array: bool) -> Any:
        if vtype in GGUF_SCALARS:
            return self.unpack(GGUF_SCALARS[vtype])
        if vtype == GGUF_STRING:
            return self.string()
        if vtype == GGUF_ARRAY:
            item_type, count = self.unpack("<I"), self.unpack("<Q")
            if count > self.size:
                raise ModelFormatError(
                    _("{file}: an array of {count:,} items in a {size:,}-byte file", file=self.path.name, count=count, size=self.size),
                    self.path,
                )
            if item_type in GGUF_SCALARS and not keep_array:
                self.skip(count * struct.calcsize(GGUF_SCALARS[item_type]))
                return count
            if item_type == GGUF_STRING and not keep_array:  # a vocabulary: skip, keep the count
                self._skip_strings(count)
                return count
            if item_type == GGUF_ARRAY:
                raise ModelFormatError(_("{file}: nested GGUF arrays are not supported", file=self.path.name), self.path)
            items = [self.value(item_type, keep_array) for _index in range(count)]
            return items if keep_array else count
        raise ModelFormatError(_("{file}: unknown GGUF metadata value type {vtype}", file=self.path.name, vtype=vtype), self.path)


@dataclass
class GgufHeader:
    meta: dict[str, Any]  # scalars and strings; arrays as their length (per-layer head counts kept)
    tensors: list[tuple[str, str, int, list[int]]]  # (name, ggml type, bytes, dims: ne[0] first)
    data_end: int  # where the tensor data ends, from the file's start
    size: int


def read_gguf_header(path: Path) -> GgufHeader:
    """The metadata and tensor table of a GGUF file, checked against the file's size; vocabularies
    and other large arrays are skipped by seeking, so only the header is read."""
    size = path.stat().st_size
    with _open(path) as handle:
        magic = handle.read(4)
        reader = _Reader(handle, path, size)
        if magic != b"GGUF":
            raise ModelFormatError(
                _(
                    "{file}: bad magic {magic}, expected b'GGUF' (not a GGUF file, or a GGML/GGJT one from before August 2023)",
                    file=path.name,
                    magic=repr(magic),
                ),
                path,
            )
        version = reader.unpack("<I")
        if version not in (2, 3):
            raise ModelFormatError(
                _(
                    "{file}: GGUF version {version} is not supported (2 and 3 are); re-convert it with a current llama.cpp",
                    file=path.name,
                    version=version,
                ),
                path,
            )
        n_tensors, n_kv = reader.unpack("<Q"), reader.unpack("<Q")
        if n_tensors > 10_000_000 or n_kv > 1_000_000:
            raise ModelFormatError(
                _(
                    "{file}: implausible counts ({n_tensors:,} tensors, {n_kv:,} keys): corrupt header",
                    file=path.name,
                    n_tensors=n_tensors,
                    n_kv=n_kv,
                ),
                path,
            )
        meta: dict[str, Any] = {}
        for _index in range(n_kv):
            key = reader.string()
            vtype = reader.unpack("<I")
            small = key.endswith(("head_count", "head_count_kv"))  # per-layer arrays on some models
            meta[key] = reader.value(vtype, keep_array=small)
        tensors, end = [], 0
        for _index in range(n_tensors):
            name = reader.string()
            n_dims = reader.unpack("<I")
            if n_dims > 8:
                raise ModelFormatError(
                    _("{file}: tensor {name} claims {n_dims} dimensions: corrupt header", file=path.name, name=repr(name), n_dims=n_dims),
                    path,
                )
            dims = [reader.unpack("<Q") for _index in range(n_dims)]
            type_id, offset = reader.unpack("<I"), reader.unpack("<Q")
            if type_id not in GGML_TYPES:
                raise ModelFormatError(
                    _(
                        "{file}: tensor {name} has unknown ggml type {type_id} (a newer llama.cpp quantization?)",
                        file=path.name,
                        name=repr(name),
                        type_id=type_id,
                    ),
                    path,
                )
            type_name, block, type_size = GGML_TYPES[type_id]
            elements = math.prod(dims)
            if elements % block:
                raise ModelFormatError(
                    _(
                        "{file}: tensor {name} has {elements} elements, not a multiple of {type_name}'s block of {block}",
                        file=path.name,
                        name=repr(name),
                        elements=elements,
                        type_name=type_name,
                        block=block,
                    ),
                    path,
                )
            nbytes = elements // block * type_size
            tensors.append((name, type_name, nbytes, dims))
            end = max(end, offset + nbytes)
        alignment = meta.get("general.alignment", 32)
        if not _natural(alignment) or alignment == 0 or alignment & (alignment - 1) or alignment > 1 << 20:
            raise ModelFormatError(
                _(
                    "{file}: general.alignment is {alignment}, not a power of two: corrupt header",
                    file=path.name,
                    alignment=repr(alignment),
                ),
                path,
            )
        data_start = -(-reader.position // alignment) * alignment
    if data_start + end > size:
        message = _(
            "{file}: tensor data ends at byte {amount:,} but the file has {size:,}: truncated",
            file=path.name,
            amount=data_start + end,
            size=size,
        )
        raise ModelFormatError(message, path, "truncated")
    return GgufHeader(meta, tensors, data_start + end, size)


def read_gguf(path: Path) -> ModelInfo:
    header = read_gguf_header(path)
    check_gguf_sizes(header.meta, path)
    info = ModelInfo(str(path), "gguf", files=[path.name])
    for name, type_name, nbytes, _offset in header.tensors:
        _account(info, name, type_name, nbytes)
    _apply_gguf_meta(info, header.meta)
    return info


def _largest(value: Any) -> int | None:
    if isinstance(value, list):
        return max(value) if value else None
    return value


# GGUF header sizes a plan multiplies or loops over, with the same bounds as config.json's
GGUF_SIZES = {
    "block_count": 10_000, "embedding_length": 1 << 32, "context_length": 1 << 32, "attention.key_length": 1 << 20,
    "attention.sliding_window": 1 << 32, "expert_count": 1 << 16, "expert_used_count": 1 << 16,
    "attention.kv_lora_rank": 1 << 20, "rope.dimension_count": 1 << 20, "attention.head_count": 1 << 20,
    "attention.head_count_kv": 1 << 20,
}  # fmt: skip


def check_gguf_sizes(meta: dict[str, Any], path: Path) -> None:
    """ModelFormatError for a GGUF size that is not a whole number in range (a per-layer head count
    list is checked item by item, and must have one item per block)."""
    arch = meta.get("general.architecture")
    if not isinstance(arch, str):
        return
    blocks = meta.get(f"{arch}.block_count")
    for key, limit in GGUF_SIZES.items():
        value = meta.get(f"{arch}.{key}")
        if value is None:
            continue
        items = value if isinstance(value, list) else [value]
        zero_ok = isinstance(value, list)  # per-layer head counts are 0 on recurrent layers
        if isinstance(value, list) and isinstance(blocks, int) and len(value) != blocks:
            raise ModelFormatError(
                _(
                    "{file}: {arch}.{key} lists {count:,} layers, block_count says {blocks:,}",
                    file=path.name,
                    arch=arch,
                    key=key,
                    count=len(value),
                    blocks=blocks,
                ),
                path,
            )
        for item in items:
            if not _natural(item) or item > limit or (item == 0 and not zero_ok):
                shown = json.dumps(item)[:40] if not isinstance(item, str) else repr(item[:40])
                raise ModelFormatError(
                    _(
                        "{file}: {arch}.{key} is {shown}, not a whole number from 1 to {limit:,}",
                        file=path.name,
                        arch=arch,
                        key=key,
                        shown=shown,
                        limit=limit,
                    ),
                    path,
                )


def _apply_gguf_meta(info: ModelInfo, meta: dict[str, Any]) -> None:
    arch = meta.get("general.architecture")
    info.architecture = arch
    p = f"{arch}."
    info.layers = meta.get(p + "block_count")
    info.attention_heads = _largest(meta.get(p + "attention.head_count"))
    info.kv_heads = _largest(meta.get(p + "attention.head_count_kv")) or info.attention_heads
    info.hidden_size = meta.get(p + "embedding_length")
    info.head_dim = meta.get(p + "attention.key_length") or (
        info.hidden_size // info.attention_heads if info.hidden_size and info.attention_heads else None
    )
    info.max_context = meta.get(p + "context_length")
    if meta.get(p + "attention.kv_lora_rank"):
        info.kv_latent_dim = int(meta[p + "attention.kv_lora_rank"]) + int(meta.get(p + "rope.dimension_count") or 0)
    info.sliding_window = meta.get(p + "attention.sliding_window")
    info.recurrent = any(key.startswith((p + "ssm.", p + "shortconv.", p + "wkv.")) for key in meta)
    info.experts = meta.get(p + "expert_count")
    info.experts_per_token = meta.get(p + "expert_used_count")
    tokens = meta.get("tokenizer.ggml.tokens")
    info.vocab_size = tokens if isinstance(tokens, int) else None
    info.tied_embeddings = info.output_head_bytes == 0 and info.embedding_bytes > 0
    file_type = meta.get("general.file_type")
    if file_type is not None:
        info.quantization = f"llama.cpp file type {file_type}"


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
    with _open(path) as handle:
        magic = handle.read(4)
    if path.suffix == ".gguf" or magic == b"GGUF":
        return read_gguf(path)
    if path.suffix == ".safetensors":
        info = ModelInfo(str(path), "safetensors")
        _add_safetensors(info, path)
        config = path.parent / "config.json"
        if config.is_file():
            apply_config(info, read_model_config(config))
        return info
    raise ModelFormatError(_("{file}: not a model directory, .gguf or .safetensors file", file=path.name), path)
