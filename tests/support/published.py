"""Public models as their repositories publish them: config.json, generation_config.json and the
tokenizer's special tokens (the values of the Hugging Face repositories named), written with a
tokenizer of the real size and sparse safetensors whose embedding and output matrices have the real
shapes. `write_model(name, directory, edit=…)` makes the broken variants."""

from __future__ import annotations

import copy
import functools
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
            "topk_method": "noaux_tc",
            "num_nextn_predict_layers": 1,
            "moe_layer_freq": 1,
            "routed_scaling_factor": 2.5,
            "scoring_func": "sigmoid",
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

# config.json of more public models (the values of the repositories named), for sizing from the config alone
CONFIGS: dict[str, dict[str, Any]] = {
    "Llama-2-7b-hf": {  # meta-llama/Llama-2-7b-hf
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": 4096,
        "intermediate_size": 11008, "max_position_embeddings": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 32, "rms_norm_eps": 1e-05, "tie_word_embeddings": False, "torch_dtype": "float16", "vocab_size": 32000,
    },
    "Meta-Llama-3-70B-Instruct": {  # meta-llama/Meta-Llama-3-70B-Instruct
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False, "hidden_act": "silu",
        "hidden_size": 8192, "intermediate_size": 28672, "max_position_embeddings": 8192, "num_attention_heads": 64,
        "num_hidden_layers": 80, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 128256,
    },
    "Mistral-7B-v0.1": {  # mistralai/Mistral-7B-v0.1: a 4,096-token sliding window on every layer
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_act": "silu", "hidden_size": 4096,
        "intermediate_size": 14336, "max_position_embeddings": 32768, "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 32000,
    },
    "Mixtral-8x7B-v0.1": {  # mistralai/Mixtral-8x7B-v0.1
        "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_act": "silu", "hidden_size": 4096,
        "intermediate_size": 14336, "max_position_embeddings": 32768, "num_attention_heads": 32, "num_experts_per_tok": 2,
        "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "rms_norm_eps": 1e-05,
        "rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 32000,
    },
    "Qwen2.5-7B-Instruct": {  # Qwen/Qwen2.5-7B-Instruct
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu", "hidden_size": 3584,
        "intermediate_size": 18944, "max_position_embeddings": 32768, "max_window_layers": 28, "num_attention_heads": 28,
        "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "sliding_window": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_sliding_window": False,
        "vocab_size": 152064,
    },
    "Qwen3-8B": {  # Qwen/Qwen3-8B
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": False, "head_dim": 128,
        "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 12288, "max_position_embeddings": 40960,
        "max_window_layers": 36, "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-06, "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_sliding_window": False, "vocab_size": 151936,
    },
    "Qwen3-30B-A3B": {  # Qwen/Qwen3-30B-A3B
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "attention_bias": False, "decoder_sparse_step": 1,
        "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 6144,
        "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [], "moe_intermediate_size": 768,
        "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
        "num_hidden_layers": 48, "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_sliding_window": False,
        "vocab_size": 151936,
    },
    "Qwen1.5-MoE-A2.7B": {  # Qwen/Qwen1.5-MoE-A2.7B
        "architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "decoder_sparse_step": 1, "hidden_act": "silu",
        "hidden_size": 2048, "intermediate_size": 5632, "max_position_embeddings": 8192, "max_window_layers": 21,
        "moe_intermediate_size": 1408, "norm_topk_prob": False, "num_attention_heads": 16, "num_experts": 60,
        "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 16, "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0, "shared_expert_intermediate_size": 5632, "sliding_window": 32768,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_sliding_window": False, "vocab_size": 151936,
    },
    "gemma-3-1b-it": {  # google/gemma-3-1b-it: 5 local (512-token window) layers to 1 global
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "attention_bias": False, "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, "intermediate_size": 6912,
        "max_position_embeddings": 32768, "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
        "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000, "rope_theta": 1000000,
        "sliding_window": 512, "sliding_window_pattern": 6, "torch_dtype": "bfloat16", "vocab_size": 262144,
    },
    "gpt-neox-20b": {  # EleutherAI/gpt-neox-20b
        "architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", "hidden_act": "gelu_fast", "hidden_size": 6144,
        "intermediate_size": 24576, "layer_norm_eps": 1e-05, "max_position_embeddings": 2048, "num_attention_heads": 64,
        "num_hidden_layers": 44, "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": False,
        "torch_dtype": "float16", "use_parallel_residual": True, "vocab_size": 50432,
    },
    "falcon-7b": {  # tiiuae/falcon-7b
        "architectures": ["FalconForCausalLM"], "model_type": "falcon", "alibi": False, "bias": False, "hidden_size": 4544,
        "layer_norm_epsilon": 1e-05, "multi_query": True, "new_decoder_architecture": False, "num_attention_heads": 71,
        "num_hidden_layers": 32, "parallel_attn": True, "torch_dtype": "bfloat16", "vocab_size": 65024,
    },
    "Jamba-v0.1": {  # ai21labs/Jamba-v0.1: one attention layer in eight, MoE every other layer
        "architectures": ["JambaForCausalLM"], "model_type": "jamba", "attn_layer_offset": 4, "attn_layer_period": 8,
        "expert_layer_offset": 1, "expert_layer_period": 2, "hidden_act": "silu", "hidden_size": 4096,
        "intermediate_size": 14336, "mamba_conv_bias": True, "mamba_d_conv": 4, "mamba_d_state": 16, "mamba_dt_rank": 256,
        "mamba_expand": 2, "mamba_proj_bias": False, "max_position_embeddings": 262144, "num_attention_heads": 32,
        "num_experts": 16, "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-06, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 65536,
    },
}  # fmt: skip
CONFIGS.update({name: spec["config"] for name, spec in PUBLISHED.items()})

# parameters as published: the safetensors' total_size over the bytes per parameter, as the
# repository page shows it, or the model card's or paper's figure where that is all there is
PARAMETERS: dict[str, tuple[int, str]] = {
    "Llama-2-7b-hf": (6_738_415_616, "safetensors"),
    "Meta-Llama-3-8B-Instruct": (8_030_261_248, "safetensors"),
    "Meta-Llama-3-70B-Instruct": (70_553_706_496, "safetensors"),
    "Mistral-7B-v0.1": (7_241_732_096, "safetensors"),
    "Mistral-7B-Instruct-v0.3": (7_248_023_552, "safetensors"),
    "Mixtral-8x7B-v0.1": (46_702_792_704, "safetensors"),
    "Qwen2-7B-Instruct": (7_615_616_512, "safetensors"),
    "Qwen2.5-7B-Instruct": (7_615_616_512, "safetensors"),
    "Qwen3-8B": (8_190_735_360, "safetensors"),
    "Qwen3-30B-A3B": (30_532_122_624, "safetensors"),
    "Qwen1.5-MoE-A2.7B": (14_315_784_192, "safetensors"),
    "gemma-2-9b-it": (9_241_705_984, "safetensors"),
    "gemma-3-1b-it": (999_885_952, "safetensors"),
    "Phi-3-mini-4k-instruct": (3_821_079_552, "safetensors"),
    "DeepSeek-V2-Lite-Chat": (15_706_484_224, "safetensors"),
    "DeepSeek-V3": (671_000_000_000, "paper: 671B total, 37B activated, without its 14B multi-token-prediction module"),
    "gpt-neox-20b": (20_554_567_680, "safetensors"),
    "falcon-7b": (6_921_720_704, "the model's parameters with its output head tied to the embedding"),
    "Jamba-v0.1": (51_570_323_456, "safetensors"),
}
ACTIVE: dict[str, tuple[int, str]] = {  # model cards: "N active parameters"
    "Mixtral-8x7B-v0.1": (12_900_000_000, "12.9B active"),
    "Qwen3-30B-A3B": (3_300_000_000, "3.3B activated"),
    "Qwen1.5-MoE-A2.7B": (2_700_000_000, "2.7B activated"),
    "DeepSeek-V3": (37_000_000_000, "37B activated"),
    "Jamba-v0.1": (12_000_000_000, "12B active"),
}


@functools.lru_cache(maxsize=16)
def _tokenizer_text(spec_json: str) -> str:
    """tokenizer.json's text for a tokenizer spec, built once per spec (a 152k vocabulary takes a while)."""
    return json.dumps(_tokenizer_json(json.loads(spec_json)), ensure_ascii=False)


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
    (directory / "tokenizer.json").write_text(_tokenizer_text(json.dumps(tok, sort_keys=True)))
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
