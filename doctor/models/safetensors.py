"""safetensors headers, checked the way the safetensors library checks them, and the shards a
model.safetensors.index.json names."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from decode_doctor.i18n import _, json_failure

from .files import ModelFormatError, account, natural, open_model_file, read_config
from .info import ModelInfo

SAFETENSORS_MAX_HEADER = 100_000_000
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


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """The header of a safetensors file, checked the way the safetensors library checks it: every
    entry well formed, the tensors' byte ranges contiguous from 0, and the file exactly that long."""
    size = path.stat().st_size
    with open_model_file(path) as handle:
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
            _("{file}: the {length:,}-byte header is not valid JSON ({why})", file=path.name, length=length, why=json_failure(exc)), path
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
    malformed = ModelFormatError(
        _(
            "{file}: tensor {name} has a malformed entry or an unknown dtype: {entry}",
            file=path.name,
            name=repr(name),
            entry=str(entry)[:120],
        ),
        path,
    )
    try:
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        bits = SAFETENSORS_BITS[dtype]
    except (KeyError, TypeError):
        raise malformed from None
    ok = isinstance(shape, list) and all(natural(d) for d in shape) and len(shape) <= 16
    if not (ok and isinstance(offsets, list) and len(offsets) == 2 and all(natural(o) for o in offsets)):
        raise malformed
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
    return int(math.prod(entry["shape"]) * SAFETENSORS_BITS[entry["dtype"]] // 8)


def add_safetensors(info: ModelInfo, path: Path) -> None:
    info.files.append(path.name)
    for name, entry in read_safetensors_header(path).items():
        if name != "__metadata__":
            account(info, name, entry["dtype"], tensor_bytes(entry))


def safetensors_files(directory: Path) -> list[Path]:
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
