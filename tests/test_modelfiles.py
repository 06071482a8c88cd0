"""Model headers: safetensors (single, sharded, quantized), GGUF, configs, and malformed inputs."""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path

import pytest

from decode_doctor.models.modelfiles import ModelFormatError, read_model

from .support.modelgen import llama_gguf, llama_tensors, qwen2_7b, write_gguf, write_hf_model, write_safetensors


def _bytes(tensors):
    bits = {"BF16": 16, "F16": 16, "F32": 32, "I32": 32}
    return sum(math.prod(shape) * bits[dtype] // 8 for dtype, shape in tensors.values())


def test_sharded_qwen2_7b_headers_give_the_real_sizes(tmp_path):
    directory = qwen2_7b(tmp_path / "Qwen2-7B", shards=4)
    info = read_model(directory)
    expected = _bytes(llama_tensors(28, 3584, 28, 4, 18944, 152064))
    assert info.weight_bytes == expected
    assert round(info.weight_bytes / 1e9, 1) == 15.2
    assert (info.layers, info.attention_heads, info.kv_heads, info.head_dim) == (28, 28, 4, 128)
    assert info.bytes_by_dtype == {"BF16": expected}
    assert not info.tied_embeddings
    assert info.decode_read_bytes == expected - 152064 * 3584 * 2
    assert len(info.files) == 4 and info.max_context == 131072


def test_tied_embeddings_are_found_from_the_tensors(tmp_path):
    cfg = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, "vocab_size": 100}
    info = read_model(write_hf_model(tmp_path / "m", cfg, llama_tensors(2, 64, 4, 4, 128, 100, tied=True)))
    assert info.tied_embeddings and info.decode_read_bytes == info.weight_bytes
    assert info.kv_heads == 4 and info.head_dim == 16  # MHA default; head_dim from hidden / heads


def test_gptq_checkpoint_counts_the_packed_bytes_that_are_there(tmp_path):
    cfg = {
        "num_hidden_layers": 1,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "quantization_config": {"quant_method": "gptq", "bits": 4},
    }
    tensors = {
        "model.layers.0.mlp.down_proj.qweight": ("I32", [14336 // 8, 4096]),
        "model.layers.0.mlp.down_proj.scales": ("F16", [14336 // 128, 4096]),
        "model.layers.0.mlp.down_proj.qzeros": ("I32", [14336 // 128, 4096 // 8]),
    }
    info = read_model(write_hf_model(tmp_path / "gptq", cfg, tensors))
    assert info.quantization == "gptq"
    assert info.weight_bytes == _bytes(tensors)
    assert info.bytes_by_dtype["I32"] == (14336 // 8) * 4096 * 4 + (14336 // 128) * (4096 // 8) * 4


def test_multimodal_config_uses_the_text_model_and_skips_the_vision_tower(tmp_path):
    cfg = {
        "architectures": ["LlavaForConditionalGeneration"],
        "text_config": {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 64},
    }
    tensors = {**llama_tensors(2, 64, 4, 2, 128, 100), "vision_tower.encoder.weight": ("F16", [1000, 100])}
    info = read_model(write_hf_model(tmp_path / "llava", cfg, tensors))
    assert (info.layers, info.kv_heads, info.head_dim) == (2, 2, 16)
    assert info.not_decode_bytes == 200_000
    assert info.architecture == "LlavaForConditionalGeneration"


def test_gguf_q4_k_model(tmp_path):
    info = read_model(llama_gguf(tmp_path / "tiny.Q4_K_M.gguf"))
    assert info.format == "gguf" and info.architecture == "llama"
    assert (info.layers, info.attention_heads, info.kv_heads, info.head_dim, info.max_context) == (4, 8, 2, 32, 8192)
    assert info.vocab_size == 1024
    # Q4_K: 256 weights in 144 bytes; Q6_K: 256 in 210; Q8_0: 32 in 34
    layer_q4k = (256 * 256 * 2 + 256 * 64 * 2 + 256 * 1024 * 2) // 256 * 144
    assert info.bytes_by_dtype["Q4_K"] == 4 * layer_q4k
    assert info.bytes_by_dtype["Q6_K"] == 256 * 1024 // 256 * 210
    assert info.bytes_by_dtype["Q8_0"] == 256 * 1024 // 32 * 34
    assert info.embedding_bytes == info.bytes_by_dtype["Q8_0"] and not info.tied_embeddings


def test_gguf_per_layer_head_counts_take_the_largest(tmp_path):
    meta = {
        "general.architecture": "openelm",
        "openelm.block_count": 2,
        "openelm.embedding_length": 64,
        "openelm.attention.head_count": [4, 8],
        "openelm.attention.head_count_kv": [2, 4],
        "openelm.attention.key_length": 16,
    }
    write_gguf(tmp_path / "e.gguf", meta, {"token_embd.weight": ("F16", [64, 10])})
    info = read_model(tmp_path / "e.gguf")
    assert (info.attention_heads, info.kv_heads, info.head_dim) == (8, 4, 16)
    assert info.tied_embeddings


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda p: p.write_bytes(b"\x10\x00"), "truncated: 2 bytes, not even the 8-byte header length"),
        (lambda p: p.write_bytes(struct.pack("<Q", 5000) + b"{}"), "header length 5,000 is larger than the 2 bytes after it"),
        (lambda p: p.write_bytes(struct.pack("<Q", 2**40)), "exceeds the format's 100,000,000-byte limit"),
        (lambda p: p.write_bytes(struct.pack("<Q", 4) + b"{oops"), "header is not valid JSON"),
        (lambda p: p.write_bytes(struct.pack("<Q", 2) + b"[]"), "not a JSON object"),
    ],
)
def test_malformed_safetensors(tmp_path, build, message):
    path = tmp_path / "model.safetensors"
    build(path)
    with pytest.raises(ModelFormatError, match=message):
        read_model(path)


def test_truncated_safetensors_data(tmp_path):
    path = tmp_path / "model.safetensors"
    size = write_safetensors(path, {"w": ("F16", [1000, 1000])})
    with open(path, "r+b") as handle:
        handle.truncate(size - 10)
    with pytest.raises(ModelFormatError, match="truncated \\(an interrupted download\\?\\)"):
        read_model(path)


def test_wrong_span_and_unknown_dtype(tmp_path):
    path = tmp_path / "model.safetensors"
    header = json.dumps({"w": {"dtype": "F16", "shape": [10], "data_offsets": [0, 10]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 10)
    with pytest.raises(ModelFormatError, match="spans 10 bytes but F16\\[10\\] needs 20"):
        read_model(path)
    header = json.dumps({"w": {"dtype": "Q9", "shape": [10], "data_offsets": [0, 10]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 10)
    with pytest.raises(ModelFormatError, match="unknown dtype"):
        read_model(path)


def test_missing_shard_is_named(tmp_path):
    directory = qwen2_7b(tmp_path / "q", shards=3)
    (directory / "model-00002-of-00003.safetensors").unlink()
    with pytest.raises(ModelFormatError, match=re.escape("names 1 shard(s) that are missing: model-00002-of-00003.safetensors")):
        read_model(directory)


def test_gguf_bad_magic_version_and_unknown_type(tmp_path):
    bad = tmp_path / "bad.gguf"
    write_gguf(bad, {"general.architecture": "llama"}, {}, magic=b"GGJT")
    with pytest.raises(ModelFormatError, match="bad magic b'GGJT'"):
        read_model(bad)
    old = tmp_path / "old.gguf"
    write_gguf(old, {"general.architecture": "llama"}, {}, version=1)
    with pytest.raises(ModelFormatError, match="GGUF version 1 is not supported"):
        read_model(old)
    unknown = tmp_path / "unknown.gguf"
    write_gguf(unknown, {"general.architecture": "llama"}, {"blk.0.w": (99, [32, 32])})
    with pytest.raises(ModelFormatError, match="unknown ggml type 99"):
        read_model(unknown)


def test_gguf_truncated(tmp_path):
    path = llama_gguf(tmp_path / "t.gguf")
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)
    with pytest.raises(ModelFormatError, match="truncated"):
        read_model(path)
    with open(path, "r+b") as handle:
        handle.truncate(40)
    with pytest.raises(ModelFormatError, match="truncated inside the GGUF header"):
        read_model(path)


def test_scanning_reads_headers_only_not_20_gb_of_weights(tmp_path):
    """The reader's I/O does not depend on weight size: count the bytes it reads (rchar)."""
    directory = qwen2_7b(tmp_path / "q", shards=2)
    big = {f"blob.{i}": ("BF16", [1024, 1024, 1024]) for i in range(10)}  # 10 × 2 GiB, sparse
    write_safetensors(directory / "extra.safetensors", big)
    index = json.loads((directory / "model.safetensors.index.json").read_text())
    index["weight_map"].update(dict.fromkeys(big, "extra.safetensors"))
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))

    def rchar() -> int:
        return int(next(line for line in Path("/proc/self/io").read_text().splitlines() if line.startswith("rchar")).split()[1])

    before = rchar()
    info = read_model(directory)
    read = rchar() - before
    assert info.weight_bytes > 20 * 1024**3
    assert read < 2 * 1024 * 1024  # headers and configs: well under 2 MB for over 20 GB of tensors
