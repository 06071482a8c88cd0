"""Bytes per KV-cache element for each --kv-dtype (here alone, so `--help` imports nothing else)."""

KV_DTYPE_BYTES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
