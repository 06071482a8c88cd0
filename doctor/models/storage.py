"""How each engine stores a model's caches, as the engine itself decides it: the KV element type it
uses for a --kv-dtype (with the bytes of its scales), and the element types of a recurrent layer's two
state parts (the convolution window and the SSM / delta-rule state).

vLLM 0.33 (vllm/config/cache.py, vllm/v1/attention/backends/triton_attn.py, vllm/model_executor/models/
config.py, vllm/model_executor/layers/mamba/mamba_utils.py):
- --kv-cache-dtype: auto (the model's 16-bit type), fp8 (1 byte), int8_per_token_head and
  int4_per_token_head (1 byte or 4 bits per element, plus one float32 scale for K and one for V of each
  head of each token: 8 bytes per head slot; MLA's latent is one slot);
- the convolution state in --mamba-cache-dtype (auto: the model's 16-bit type), the SSM state in
  --mamba-ssm-cache-dtype (auto: the convolution's), except where a model's config class decides:
  Nemotron-H keeps it in float32 unless its config.json names mamba_ssm_cache_dtype ("only float32 is
  known to have no accuracy issues"), Qwen3.5 in its config's mamba_ssm_dtype.
llama.cpp (src/llama-model.cpp, llama-memory-recurrent.cpp): -ctk/-ctv f16, bf16, f32, q8_0 or q4_0
(blocks of 32 with a 16-bit scale); the recurrent states in float32.
"""

from __future__ import annotations

from dataclasses import dataclass

from decode_doctor.i18n import said

from .dtypes import KV_DTYPE_BYTES

# --kv-dtype → the engine's own cache type
VLLM_KV = {
    "fp16": "auto", "bf16": "auto", "fp32": "auto", "fp8": "fp8",
    "int8": "int8_per_token_head", "q8_0": "int8_per_token_head", "int4": "int4_per_token_head", "q4_0": "int4_per_token_head",
}  # fmt: skip
LLAMA_KV = {"fp32": "f32", "fp16": "f16", "bf16": "bf16", "fp8": "q8_0", "int8": "q8_0", "q8_0": "q8_0", "int4": "q4_0", "q4_0": "q4_0"}
VLLM_ELEMENT = {"auto": 2.0, "fp8": 1.0, "int8_per_token_head": 1.0, "int4_per_token_head": 0.5}
LLAMA_ELEMENT = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": KV_DTYPE_BYTES["q8_0"], "q4_0": KV_DTYPE_BYTES["q4_0"]}
PER_TOKEN_HEAD_SCALE_BYTES = 8  # one float32 scale for K and one for V, per head slot and token
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
# vLLM's config classes that fix the SSM state's type (VerifyAndUpdateConfig), by model family
VLLM_SSM_DEFAULTS = {"nemotron_h": ("mamba_ssm_cache_dtype", "float32"), "qwen3_5": ("mamba_ssm_dtype", None)}


@dataclass(frozen=True)
class Storage:
    """The bytes a plan counts per cached element; asked() is the --kv-dtype as given, the engines' their own."""

    engine: str  # "vllm", "llama.cpp", or "" for the --kv-dtype as asked
    kv_cache: str  # the engine's name for its KV type ("auto", "int8_per_token_head", "q8_0"), or the --kv-dtype
    kv_element_bytes: float
    kv_slot_bytes: int = 0  # scale bytes per K/V head slot and token (vLLM's per-token-head types)
    conv_bytes: int = 2
    ssm_bytes: int = 2
    ssm_dtype: str = "bfloat16"
    ssm_reason: str = ""  # said(): why the SSM state has that type, when the engine decides it

    @classmethod
    def asked(cls, kv_dtype: str) -> Storage:
        return cls("", kv_dtype, KV_DTYPE_BYTES[kv_dtype])

    def same_bytes(self, other: Storage) -> bool:
        return (self.kv_element_bytes, self.kv_slot_bytes, self.conv_bytes, self.ssm_bytes) == (
            other.kv_element_bytes,
            other.kv_slot_bytes,
            other.conv_bytes,
            other.ssm_bytes,
        )


def vllm_storage(kv_dtype: str, family: str = "", config_ssm_dtype: str | None = None) -> Storage:
    """vLLM 0.33's storage for a --kv-dtype and a model family (config_ssm_dtype: what its config.json names)."""
    kv = VLLM_KV[kv_dtype]
    slot = PER_TOKEN_HEAD_SCALE_BYTES if kv.endswith("_per_token_head") else 0
    ssm_dtype, reason = "bfloat16", ""
    if family in VLLM_SSM_DEFAULTS:
        key, default = VLLM_SSM_DEFAULTS[family]
        chosen = config_ssm_dtype if config_ssm_dtype in DTYPE_BYTES else default
        if chosen is not None:
            ssm_dtype = chosen
            reason = (
                said("vLLM keeps this model's SSM state in {dtype}, as its config.json's {key} says", dtype=chosen, key=key)
                if chosen == config_ssm_dtype
                else said(
                    "vLLM keeps this model's SSM state in {dtype} by default (--mamba-ssm-cache-dtype bfloat16 halves it, "
                    "at the accuracy risk vLLM warns of)",
                    dtype=chosen,
                )
            )
    return Storage("vllm", kv, VLLM_ELEMENT[kv], slot, 2, DTYPE_BYTES[ssm_dtype], ssm_dtype, reason)


def llama_storage(kv_dtype: str) -> Storage:
    kv = LLAMA_KV[kv_dtype]
    return Storage("llama.cpp", kv, LLAMA_ELEMENT[kv], 0, 4, 4, "float32", said("llama.cpp keeps recurrent state in float32"))
