"""What every model-file reader shares: the error a malformed file is, opening a file without blocking
on a FIFO or device, and counting a tensor's bytes by what it is for (embedding, output head, towers
that decode does not read, experts)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, BinaryIO

from decode_doctor.engine.files import NotRegular, open_regular
from decode_doctor.i18n import _

from ..i18n import json_failure, localized, os_reason
from .info import ModelInfo

JSON_LIMIT = 64 << 20  # config.json, tokenizer.json and friends: read whole only below this
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


def first_of(config: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return None


def open_model_file(path: Path) -> BinaryIO:
    """A model file opened for reading; ModelFormatError for a FIFO, device or socket (never blocks)."""
    try:
        return open_regular(path)
    except NotRegular as exc:
        raise ModelFormatError(_("{file} is {strerror}", file=path.name, strerror=exc.strerror), path) from None
    except FileNotFoundError:
        raise ModelFormatError(_("{file} is missing (a dangling link?)", file=path.name), path, "missing") from None
    except OSError as exc:  # permission denied, I/O error: a finding, never a crash of the check
        raise ModelFormatError(_("{file}: cannot read it ({value})", file=path.name, value=localized(os_reason(exc))), path) from None


def read_regular(path: Path, limit: int) -> bytes:
    """A regular file's bytes, at most limit of them (ModelFormatError beyond); FIFOs, devices and
    sockets are refused without being opened for a blocking read."""
    with open_model_file(path) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ModelFormatError(_("{file} is larger than {amount} MiB; not read", file=path.name, amount=limit >> 20), path)
    return data


# Sizes a loader multiplies with: each must be a whole number above 0 when present (not "64", [256], NaN).


def account(info: ModelInfo, name: str, dtype: str, nbytes: int) -> None:
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


def natural(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


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
        raise ModelFormatError(_("{file} is not valid JSON ({why})", file=path.name, why=json_failure(exc)), path) from None
    except RecursionError:
        raise ModelFormatError(_("{file} nests too deeply to be a model's JSON", file=path.name), path) from None
    if not isinstance(data, dict):
        raise ModelFormatError(_("{file} holds a JSON {name}, not an object", file=path.name, name=type(data).__name__), path)
    return data
