"""GGUF headers: the key-value metadata and the tensor table, read with every length and count bounded
(a hostile header claims gigabytes), without reading tensor data."""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from decode_doctor.i18n import _

from .files import ModelFormatError, account, natural, open_model_file
from .info import ModelFormat, ModelInfo

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
    with open_model_file(path) as handle:
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
        if not natural(alignment) or alignment == 0 or alignment & (alignment - 1) or alignment > 1 << 20:
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
    info = ModelInfo(str(path), ModelFormat.GGUF, files=[path.name])
    for name, type_name, nbytes, _offset in header.tensors:
        account(info, name, type_name, nbytes)
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
            if not natural(item) or item > limit or (item == 0 and not zero_ok):
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
