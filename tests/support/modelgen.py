"""Writes real model files for tests: config.json, safetensors and GGUF headers, data left sparse."""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path
from typing import Any

BITS = {"F32": 32, "F16": 16, "BF16": 16, "I32": 32, "I8": 8, "U8": 8, "F8_E4M3": 8}


def write_safetensors(
    path: Path, tensors: dict[str, tuple[str, list[int]]], *, sparse: bool = True, metadata: dict[str, str] | None = None
) -> int:
    """Writes a header and (sparse) data; returns the file size."""
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = metadata
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = math.prod(shape) * BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)))
        handle.write(raw)
        if sparse:
            handle.truncate(8 + len(raw) + offset)
        else:
            handle.write(b"\0" * offset)
    return 8 + len(raw) + offset


def llama_tensors(
    layers: int, hidden: int, heads: int, kv_heads: int, inter: int, vocab: int, dtype: str = "BF16", tied: bool = False
) -> dict[str, tuple[str, list[int]]]:
    head_dim = hidden // heads
    tensors = {"model.embed_tokens.weight": (dtype, [vocab, hidden]), "model.norm.weight": (dtype, [hidden])}
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors.update(
            {
                p + "self_attn.q_proj.weight": (dtype, [heads * head_dim, hidden]),
                p + "self_attn.k_proj.weight": (dtype, [kv_heads * head_dim, hidden]),
                p + "self_attn.v_proj.weight": (dtype, [kv_heads * head_dim, hidden]),
                p + "self_attn.o_proj.weight": (dtype, [hidden, heads * head_dim]),
                p + "mlp.gate_proj.weight": (dtype, [inter, hidden]),
                p + "mlp.up_proj.weight": (dtype, [inter, hidden]),
                p + "mlp.down_proj.weight": (dtype, [hidden, inter]),
                p + "input_layernorm.weight": (dtype, [hidden]),
                p + "post_attention_layernorm.weight": (dtype, [hidden]),
            }
        )
    if not tied:
        tensors["lm_head.weight"] = (dtype, [vocab, hidden])
    return tensors


def write_hf_model(directory: Path, config: dict[str, Any], tensors: dict[str, tuple[str, list[int]]], shards: int = 1) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    names = list(tensors)
    if shards == 1:
        write_safetensors(directory / "model.safetensors", tensors)
        return directory
    per = math.ceil(len(names) / shards)
    weight_map = {}
    for shard in range(shards):
        file = f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[shard * per : (shard + 1) * per]}
        write_safetensors(directory / file, part)
        weight_map.update(dict.fromkeys(part, file))
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return directory


def qwen2_7b(directory: Path, shards: int = 4) -> Path:
    """Qwen2-7B's real shapes (28 layers, 28 heads, 4 KV heads, hidden 3584), bf16, data sparse."""
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    return write_hf_model(directory, config, llama_tensors(28, 3584, 28, 4, 18944, 152064), shards)


# --- GGUF ---------------------------------------------------------------------------------------


def _gguf_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _gguf_value(value: Any) -> bytes:
    if isinstance(value, bool):
        return struct.pack("<I?", 7, value)
    if isinstance(value, int):
        return struct.pack("<II", 4, value)
    if isinstance(value, float):
        return struct.pack("<If", 6, value)
    if isinstance(value, str):
        return struct.pack("<I", 8) + _gguf_string(value)
    if isinstance(value, list):
        if all(isinstance(v, str) for v in value):
            return struct.pack("<IIQ", 9, 8, len(value)) + b"".join(_gguf_string(v) for v in value)
        return struct.pack("<IIQ", 9, 4, len(value)) + b"".join(struct.pack("<I", v) for v in value)
    raise TypeError(value)


GGML = {
    "F32": (0, 1, 4),
    "F16": (1, 1, 2),
    "Q4_0": (2, 32, 18),
    "Q8_0": (8, 32, 34),
    "Q4_K": (12, 256, 144),
    "Q6_K": (14, 256, 210),
    "BF16": (30, 1, 2),
}


def write_gguf(
    path: Path,
    metadata: dict[str, Any],
    tensors: dict[str, tuple[str | int, list[int]]],
    *,
    magic: bytes = b"GGUF",
    version: int = 3,
    sparse: bool = True,
) -> int:
    body = magic + struct.pack("<IQQ", version, len(tensors), len(metadata))
    for key, value in metadata.items():
        body += _gguf_string(key) + _gguf_value(value)
    offset = 0
    for name, (ggml_type, dims) in tensors.items():
        type_id, block, size = GGML[ggml_type] if isinstance(ggml_type, str) else (ggml_type, 1, 1)
        nbytes = math.prod(dims) // block * size
        body += (
            _gguf_string(name)
            + struct.pack("<I", len(dims))
            + b"".join(struct.pack("<Q", d) for d in dims)
            + struct.pack("<IQ", type_id, offset)
        )
        offset += nbytes + (-nbytes % 32)
    body += b"\0" * (-len(body) % 32)
    with open(path, "wb") as handle:
        handle.write(body)
        if sparse:
            handle.truncate(len(body) + offset)
        else:
            handle.write(b"\0" * offset)
    return len(body) + offset


def llama_gguf(
    path: Path, layers: int = 4, hidden: int = 256, heads: int = 8, kv_heads: int = 2, vocab: int = 1024, qtype: str = "Q4_K"
) -> Path:
    meta = {
        "general.architecture": "llama",
        "general.alignment": 32,
        "llama.block_count": layers,
        "llama.context_length": 8192,
        "llama.embedding_length": hidden,
        "llama.feed_forward_length": hidden * 4,
        "llama.attention.head_count": heads,
        "llama.attention.head_count_kv": kv_heads,
        "tokenizer.ggml.tokens": [f"t{i}" for i in range(vocab)],
    }
    head_dim = hidden // heads
    tensors: dict[str, tuple[str | int, list[int]]] = {
        "token_embd.weight": ("Q8_0", [hidden, vocab]),
        "output_norm.weight": ("F32", [hidden]),
        "output.weight": ("Q6_K", [hidden, vocab]),
    }
    for i in range(layers):
        tensors.update(
            {
                f"blk.{i}.attn_q.weight": (qtype, [hidden, heads * head_dim]),
                f"blk.{i}.attn_k.weight": (qtype, [hidden, kv_heads * head_dim]),
                f"blk.{i}.attn_v.weight": (qtype, [hidden, kv_heads * head_dim]),
                f"blk.{i}.attn_output.weight": (qtype, [heads * head_dim, hidden]),
                f"blk.{i}.ffn_up.weight": (qtype, [hidden, hidden * 4]),
                f"blk.{i}.ffn_down.weight": (qtype, [hidden * 4, hidden]),
                f"blk.{i}.attn_norm.weight": ("F32", [hidden]),
            }
        )
    write_gguf(path, meta, tensors)
    return path


def sparse_file(path: Path, size: int) -> None:
    with open(path, "wb") as handle:
        handle.truncate(size)
    os.utime(path)


def hf_cache(hub: Path, repo_id: str, source: Path, revision: str = "0123456789abcdef0123456789abcdef01234567") -> tuple[Path, Path]:
    """A Hugging Face cache repository (models--org--name) holding source's files as the hub leaves
    them: blobs named by content hash, links in snapshots/<revision>, refs/main. Returns (repository,
    snapshot); source's files are moved into the blobs."""
    import hashlib
    import shutil

    repo = hub / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    for file in sorted(source.iterdir()):
        content = file.read_bytes() if file.suffix == ".json" else file.name.encode()  # shards: a made-up name
        blob = hashlib.sha256(content).hexdigest()
        shutil.move(file, repo / "blobs" / blob)
        os.symlink(f"../../blobs/{blob}", snapshot / file.name)
    return repo, snapshot
