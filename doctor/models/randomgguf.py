"""Random-weight Llama GGUFs of a chosen shape and weight type (F32, F16, Q8_0, Q4_0), written with the
`gguf` package: what the calibration decodes with llama.cpp to learn this host's step time. Their
tokens are meaningless; only the bytes each step reads, and the work, are real."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

WEIGHT_TYPES = ("F32", "F16", "Q8_0", "Q4_0")
BYTES_PER_PARAM = {"F32": 4.0, "F16": 2.0, "Q8_0": 34 / 32, "Q4_0": 18 / 32}
HIDDEN = (512, 768, 1024, 1536, 2048, 2560, 3072, 4096)


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def shape_for(size_gb: float, weight_type: str) -> Shape:
    """A Llama shape whose file is about size_gb: the widest hidden size that still gets 4 layers
    (grouped-query attention, four query heads per key head, vocabulary 32,000)."""
    params = size_gb * 1e9 / BYTES_PER_PARAM[weight_type]
    vocab = 32_000
    for hidden in reversed(HIDDEN):
        per_layer = 10.75 * hidden * hidden  # q, o; k, v at a quarter; three FFN matrices at 2.75×
        layers = round((params - 2 * vocab * hidden) / per_layer)
        if layers >= 4:
            return Shape(hidden, layers, int(2.75 * hidden) // 64 * 64, hidden // 64, hidden // 256, vocab)
    return Shape(512, 2, 1408, 8, 2, 8000)


def write(path: Path, shape: Shape, weight_type: str, seed: int = 0) -> Path:
    import gguf
    import numpy as np
    from gguf import GGMLQuantizationType, LlamaFileType, quants

    quant = {
        "F32": GGMLQuantizationType.F32,
        "F16": GGMLQuantizationType.F16,
        "Q8_0": GGMLQuantizationType.Q8_0,
        "Q4_0": GGMLQuantizationType.Q4_0,
    }[weight_type]
    file_type = {
        "F32": LlamaFileType.ALL_F32,
        "F16": LlamaFileType.MOSTLY_F16,
        "Q8_0": LlamaFileType.MOSTLY_Q8_0,
        "Q4_0": LlamaFileType.MOSTLY_Q4_0,
    }[weight_type]
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(f"decode-doctor calibration {weight_type}")
    writer.add_context_length(8192)
    writer.add_embedding_length(shape.hidden)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_dimension_count(shape.head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(file_type)
    tokens = ["<unk>", "<s>", "</s>", *(f"t{i}" for i in range(shape.vocab - 3))]
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * shape.vocab)
    writer.add_token_types([gguf.TokenType.NORMAL] * shape.vocab)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)

    def matrix(name: str, rows: int, columns: int) -> None:
        values = rng.standard_normal((rows, columns), dtype=np.float32) * 0.02
        if quant == GGMLQuantizationType.F32:
            writer.add_tensor(name, values)
        elif quant == GGMLQuantizationType.F16:
            writer.add_tensor(name, values.astype(np.float16))
        else:
            writer.add_tensor(name, quants.quantize(values, quant), raw_dtype=quant)

    def norm(name: str) -> None:
        writer.add_tensor(name, np.ones(shape.hidden, dtype=np.float32))

    kv = shape.kv_heads * shape.head_dim
    matrix("token_embd.weight", shape.vocab, shape.hidden)
    for layer in range(shape.layers):
        block = f"blk.{layer}."
        norm(block + "attn_norm.weight")
        matrix(block + "attn_q.weight", shape.hidden, shape.hidden)
        matrix(block + "attn_k.weight", kv, shape.hidden)
        matrix(block + "attn_v.weight", kv, shape.hidden)
        matrix(block + "attn_output.weight", shape.hidden, shape.hidden)
        norm(block + "ffn_norm.weight")
        matrix(block + "ffn_gate.weight", shape.ffn, shape.hidden)
        matrix(block + "ffn_up.weight", shape.ffn, shape.hidden)
        matrix(block + "ffn_down.weight", shape.hidden, shape.ffn)
    norm("output_norm.weight")
    matrix("output.weight", shape.vocab, shape.hidden)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
