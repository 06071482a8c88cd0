"""Bytes per KV-cache element for each --kv-dtype (here alone, so `--help` imports nothing else).
q8_0 and q4_0 are llama.cpp's cache types: blocks of 32 with one 16-bit scale (34 and 18 bytes)."""

KV_DTYPE_BYTES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5, "q8_0": 1.0625, "q4_0": 0.5625}
