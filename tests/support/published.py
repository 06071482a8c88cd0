"""Public models as their repositories publish them: config.json, generation_config.json and the
tokenizer's special tokens (the values of the Hugging Face repositories named), written with a
tokenizer of the real size and sparse safetensors whose embedding and output matrices have the real
shapes. `write_model(name, directory, edit=…)` makes the broken variants."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .modelgen import write_safetensors

CHAT_TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"

# name → (config.json, generation_config.json, tokenizer: size, special tokens, eos, chat template?)
PUBLISHED: dict[str, dict[str, Any]] = {
    "Meta-Llama-3-8B-Instruct": {  # meta-llama/Meta-Llama-3-8B-Instruct
        "config": {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "attention_bias": False,
            "bos_token_id": 128000,
            "eos_token_id": 128009,
            "hidden_act": "silu",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "max_position_embeddings": 8192,
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "num_key_value_heads": 8,
            "rms_norm_eps": 1e-05,
            "rope_scaling": None,
            "rope_theta": 500000.0,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "vocab_size": 128256,
        },
        "generation": {"bos_token_id": 128000, "eos_token_id": [128001, 128009], "do_sample": True, "temperature": 0.6, "top_p": 0.9},
        "tokenizer": {
            "size": 128256,
            "regular": 128000,
            "special": {
                "<|begin_of_text|>": 128000,
                "<|end_of_text|>": 128001,
                "<|start_header_id|>": 128006,
                "<|end_header_id|>": 128007,
                "<|eot_id|>": 128009,
            },
            "eos": "<|eot_id|>",
            "bos": "<|begin_of_text|>",
        },
        "chat_template": True,
    },
    "Qwen2-7B-Instruct": {  # Qwen/Qwen2-7B-Instruct
        "config": {
            "architectures": ["Qwen2ForCausalLM"],
            "model_type": "qwen2",
            "bos_token_id": 151643,
            "eos_token_id": 151645,
            "hidden_act": "silu",
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "max_position_embeddings": 32768,
            "max_window_layers": 28,
            "num_attention_heads": 28,
            "num_hidden_layers": 28,
            "num_key_value_heads": 4,
            "rms_norm_eps": 1e-06,
            "rope_theta": 1000000.0,
            "sliding_window": 131072,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "use_sliding_window": False,
            "vocab_size": 152064,
        },
        "generation": {"bos_token_id": 151643, "pad_token_id": 151643, "eos_token_id": [151645, 151643], "do_sample": True},
        "tokenizer": {
            "size": 151646,
            "regular": 151643,
            "special": {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645},
            "eos": "<|im_end|>",
            "pad": "<|endoftext|>",
        },
        "chat_template": True,
    },
    "Mistral-7B-Instruct-v0.3": {  # mistralai/Mistral-7B-Instruct-v0.3
        "config": {
            "architectures": ["MistralForCausalLM"],
            "model_type": "mistral",
            "bos_token_id": 1,
            "eos_token_id": 2,
            "head_dim": 128,
            "hidden_act": "silu",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "max_position_embeddings": 32768,
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "num_key_value_heads": 8,
            "rms_norm_eps": 1e-05,
            "rope_theta": 1000000.0,
            "sliding_window": None,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "vocab_size": 32768,
        },
        "generation": {"bos_token_id": 1, "eos_token_id": 2},
        "tokenizer": {
            "size": 32768,
            "regular": 32768,
            "special": {"<unk>": 0, "<s>": 1, "</s>": 2, "[INST]": 3, "[/INST]": 4},
            "eos": "</s>",
            "bos": "<s>",
        },
        "chat_template": True,
    },
    "gemma-2-9b-it": {  # google/gemma-2-9b-it
        "config": {
            "architectures": ["Gemma2ForCausalLM"],
            "model_type": "gemma2",
            "attn_logit_softcapping": 50.0,
            "bos_token_id": 2,
            "cache_implementation": "hybrid",
            "eos_token_id": 1,
            "final_logit_softcapping": 30.0,
            "head_dim": 256,
            "hidden_activation": "gelu_pytorch_tanh",
            "hidden_size": 3584,
            "intermediate_size": 14336,
            "max_position_embeddings": 8192,
            "num_attention_heads": 16,
            "num_hidden_layers": 42,
            "num_key_value_heads": 8,
            "pad_token_id": 0,
            "query_pre_attn_scalar": 256,
            "rms_norm_eps": 1e-06,
            "rope_theta": 10000.0,
            "sliding_window": 4096,
            "torch_dtype": "float32",
            "vocab_size": 256000,
        },
        "generation": {"bos_token_id": 2, "eos_token_id": [1, 107], "pad_token_id": 0, "cache_implementation": "hybrid"},
        "tokenizer": {
            "size": 256000,
            "regular": 256000,
            "special": {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<start_of_turn>": 106, "<end_of_turn>": 107},
            "eos": "<eos>",
            "bos": "<bos>",
            "pad": "<pad>",
        },
        "chat_template": True,
        "tied": True,
        "stored": "F32",
    },
    "DeepSeek-V2-Lite-Chat": {  # deepseek-ai/DeepSeek-V2-Lite-Chat
        "config": {
            "architectures": ["DeepseekV2ForCausalLM"],
            "model_type": "deepseek_v2",
            "bos_token_id": 100000,
            "eos_token_id": 100001,
            "first_k_dense_replace": 1,
            "hidden_act": "silu",
            "hidden_size": 2048,
            "intermediate_size": 10944,
            "kv_lora_rank": 512,
            "max_position_embeddings": 163840,
            "moe_intermediate_size": 1408,
            "n_routed_experts": 64,
            "n_shared_experts": 2,
            "num_attention_heads": 16,
            "num_experts_per_tok": 6,
            "num_hidden_layers": 27,
            "num_key_value_heads": 16,
            "q_lora_rank": None,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "rms_norm_eps": 1e-06,
            "rope_theta": 10000,
            "rope_scaling": {
                "beta_fast": 32,
                "beta_slow": 1,
                "factor": 40,
                "mscale": 0.707,
                "mscale_all_dim": 0.707,
                "original_max_position_embeddings": 4096,
                "type": "yarn",
            },
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "v_head_dim": 128,
            "vocab_size": 102400,
        },
        "generation": {"bos_token_id": 100000, "eos_token_id": 100001, "do_sample": True},
        "tokenizer": {
            "size": 100015,
            "regular": 100000,
            "special": {"<｜begin▁of▁sentence｜>": 100000, "<｜end▁of▁sentence｜>": 100001},
            "eos": "<｜end▁of▁sentence｜>",
            "bos": "<｜begin▁of▁sentence｜>",
        },
        "chat_template": True,
    },
    "DeepSeek-V3": {  # deepseek-ai/DeepSeek-V3
        "config": {
            "architectures": ["DeepseekV3ForCausalLM"],
            "model_type": "deepseek_v3",
            "bos_token_id": 0,
            "eos_token_id": 1,
            "first_k_dense_replace": 3,
            "hidden_act": "silu",
            "hidden_size": 7168,
            "intermediate_size": 18432,
            "kv_lora_rank": 512,
            "max_position_embeddings": 163840,
            "moe_intermediate_size": 2048,
            "n_group": 8,
            "n_routed_experts": 256,
            "n_shared_experts": 1,
            "num_attention_heads": 128,
            "num_experts_per_tok": 8,
            "num_hidden_layers": 61,
            "num_key_value_heads": 128,
            "q_lora_rank": 1536,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "rms_norm_eps": 1e-06,
            "rope_theta": 10000,
            "rope_scaling": {
                "beta_fast": 32,
                "beta_slow": 1,
                "factor": 40,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
                "original_max_position_embeddings": 4096,
                "type": "yarn",
            },
            "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]},
            "tie_word_embeddings": False,
            "topk_group": 4,
            "torch_dtype": "bfloat16",
            "v_head_dim": 128,
            "vocab_size": 129280,
        },
        "generation": {"bos_token_id": 0, "eos_token_id": 1, "do_sample": True, "temperature": 0.3, "top_p": 0.95},
        "tokenizer": {
            "size": 128815,
            "regular": 128000,
            "special": {"<｜begin▁of▁sentence｜>": 0, "<｜end▁of▁sentence｜>": 1},
            "eos": "<｜end▁of▁sentence｜>",
            "bos": "<｜begin▁of▁sentence｜>",
        },
        "chat_template": True,
        "fp8": True,
    },
    "Phi-3-mini-4k-instruct": {  # microsoft/Phi-3-mini-4k-instruct
        "config": {
            "architectures": ["Phi3ForCausalLM"],
            "model_type": "phi3",
            "bos_token_id": 1,
            "eos_token_id": 32000,
            "hidden_act": "silu",
            "hidden_size": 3072,
            "intermediate_size": 8192,
            "max_position_embeddings": 4096,
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "num_key_value_heads": 32,
            "original_max_position_embeddings": 4096,
            "pad_token_id": 32000,
            "rms_norm_eps": 1e-05,
            "rope_scaling": None,
            "rope_theta": 10000.0,
            "sliding_window": 2047,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "vocab_size": 32064,
        },
        "generation": {"bos_token_id": 1, "eos_token_id": [32000, 32001, 32007], "pad_token_id": 32000},
        "tokenizer": {
            "size": 32011,
            "regular": 32000,
            "special": {
                "<unk>": 0,
                "<s>": 1,
                "</s>": 2,
                "<|endoftext|>": 32000,
                "<|assistant|>": 32001,
                "<|end|>": 32007,
                "<|user|>": 32010,
            },
            "eos": "<|endoftext|>",
            "bos": "<s>",
        },
        "chat_template": True,
    },
}
NAMES = sorted(PUBLISHED)


def _tokenizer_json(spec: dict[str, Any]) -> dict[str, Any]:
    special = spec["special"]
    regular = spec["regular"]
    vocab = {f"t{i}": i for i in range(regular) if i not in special.values()}
    vocab.update({content: token for content, token in special.items() if token < regular})
    added = [{"id": token, "content": content, "special": True} for content, token in special.items()]
    taken = set(special.values())
    for token in range(regular, spec["size"]):
        if token not in taken:
            added.append({"id": token, "content": f"<|reserved_{token}|>", "special": True})
    return {"version": "1.0", "added_tokens": added, "model": {"type": "BPE", "vocab": vocab, "merges": []}}


def write_model(name: str, directory: Path, *, shards: int = 2, edit: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """The published model `name` in directory; edit(spec) may change any part first (a broken variant)."""
    spec = copy.deepcopy(PUBLISHED[name])
    if edit is not None:
        edit(spec)
    directory.mkdir(parents=True, exist_ok=True)
    config = spec["config"]
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    if spec.get("generation") is not None:
        (directory / "generation_config.json").write_text(json.dumps(spec["generation"], indent=2))
    tok = spec["tokenizer"]
    tokenizer_config: dict[str, Any] = {
        "added_tokens_decoder": {str(i): {"content": c, "special": True} for c, i in tok["special"].items()},
        "eos_token": tok.get("eos"),
        "bos_token": tok.get("bos"),
        "pad_token": tok.get("pad"),
    }
    if spec.get("chat_template"):
        tokenizer_config["chat_template"] = CHAT_TEMPLATE
    (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2, ensure_ascii=False))
    (directory / "tokenizer.json").write_text(json.dumps(_tokenizer_json(tok), ensure_ascii=False))
    _write_weights(spec, directory, shards)
    return directory


def _write_weights(spec: dict[str, Any], directory: Path, shards: int) -> None:
    config = spec["config"]
    dtype = spec.get("stored") or {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}[config["torch_dtype"]]
    hidden, vocab = config["hidden_size"], config["vocab_size"]
    parts: list[dict[str, tuple[str, list[int]]]] = [{} for _ in range(shards)]
    parts[0]["model.embed_tokens.weight"] = (dtype, [vocab, hidden])
    parts[0]["model.layers.0.input_layernorm.weight"] = (dtype, [hidden])
    if spec.get("fp8"):
        parts[0]["model.layers.0.mlp.down_proj.weight"] = ("F8_E4M3", [hidden, config["intermediate_size"]])
        parts[0]["model.layers.0.mlp.down_proj.weight_scale_inv"] = ("F32", [hidden // 128, config["intermediate_size"] // 128])
    else:
        parts[0]["model.layers.0.mlp.down_proj.weight"] = (dtype, [hidden, config["intermediate_size"]])
    parts[-1]["model.norm.weight"] = (dtype, [hidden])
    if not spec.get("tied"):
        parts[-1]["lm_head.weight"] = (dtype, [vocab, hidden])
    weight_map = {}
    for number, tensors in enumerate(parts, start=1):
        file = f"model-{number:05d}-of-{shards:05d}.safetensors" if shards > 1 else "model.safetensors"
        write_safetensors(directory / file, tensors)
        weight_map.update(dict.fromkeys(tensors, file))
    if shards > 1:
        index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
        (directory / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
