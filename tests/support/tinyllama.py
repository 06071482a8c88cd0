"""Writes a small, loadable Llama GGUF with random weights (the `gguf` package's writer), for a real
inference server in tests.

Random weights pick random tokens, and end-of-sequence among them would end a request early at
random. A constant component in every token embedding survives the (small) layers, so after the
final norm one hidden dimension is always positive; the output rows give end-of-sequence a large
negative weight on it (and the byte pieces too, so no half character is ever streamed), and the
ordinary pieces none, so generation runs to max_tokens.
"""

from __future__ import annotations

import string
from pathlib import Path

import numpy as np

WORDS = "the of and to in is that for it on with as was at by an be this are from or have not "
SPECIALS = ["<unk>", "<s>", "</s>"]
BYTES = [f"<0x{b:02X}>" for b in range(256)]  # byte fallback: any text can be tokenized (the template's newline)
NEVER = len(SPECIALS) + len(BYTES)  # ids below this are never generated
CHAT_TEMPLATE = (
    "{% for message in messages %}<s>{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant:{% endif %}"
)


def vocabulary() -> list[str]:
    """Specials, then pieces a sentencepiece tokenizer can spell any lowercase prompt with."""
    letters = list(string.ascii_lowercase)
    words = WORDS.split()
    pieces = ["▁", *letters, *("▁" + c for c in letters), *("▁" + w for w in words), *string.digits, ".", ",", "!", "?"]
    return [*SPECIALS, *BYTES, *pieces]


def write_tiny_llama(
    path: Path, *, layers: int = 2, hidden: int = 256, heads: int = 4, kv_heads: int = 2, ffn: int = 512, context: int = 2048, seed: int = 0
) -> Path:
    import gguf

    rng = np.random.default_rng(seed)
    tokens = vocabulary()
    vocab = len(tokens)
    head_dim = hidden // heads
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("decode-doctor tiny random llama")
    writer.add_context_length(context)
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * NEVER + [-float(i) for i in range(vocab - NEVER)])
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * len(BYTES)
    types += [gguf.TokenType.NORMAL] * (vocab - NEVER)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_chat_template(CHAT_TEMPLATE)

    def random(*shape: int, scale: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    embeddings = random(vocab, hidden, scale=0.1)
    embeddings[:, 0] = 20.0  # the constant component (see the module's docstring)
    writer.add_tensor("token_embd.weight", embeddings)
    for layer in range(layers):
        prefix = f"blk.{layer}."
        writer.add_tensor(prefix + "attn_norm.weight", np.ones(hidden, dtype=np.float32))
        writer.add_tensor(prefix + "attn_q.weight", random(hidden, hidden))
        writer.add_tensor(prefix + "attn_k.weight", random(kv_heads * head_dim, hidden))
        writer.add_tensor(prefix + "attn_v.weight", random(kv_heads * head_dim, hidden))
        writer.add_tensor(prefix + "attn_output.weight", random(hidden, hidden))
        writer.add_tensor(prefix + "ffn_norm.weight", np.ones(hidden, dtype=np.float32))
        writer.add_tensor(prefix + "ffn_gate.weight", random(ffn, hidden))
        writer.add_tensor(prefix + "ffn_up.weight", random(ffn, hidden))
        writer.add_tensor(prefix + "ffn_down.weight", random(hidden, ffn))
    writer.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    output = random(vocab, hidden, scale=1.0)
    output[:, 0] = 0.0
    output[:NEVER, 0] = -50.0  # specials and bytes never win: no </s>, no half characters
    writer.add_tensor("output.weight", output)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
