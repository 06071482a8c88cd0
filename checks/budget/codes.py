"""The decode-budget check's codes, each with its explanation in fixed sections."""

from __future__ import annotations

from decode_doctor.engine import Code, Severity

DEC002 = Code(
    code="DEC002",
    title="The model does not fit in device memory at this context and concurrency",
    severity=Severity.ERROR,
    what="Weights + KV cache at full context × concurrency + runtime overhead exceed the device's memory.",
    why="The server will fail to start (CUDA out of memory), or the KV cache allocator will cap the "
    "context or the batch far below what was planned; on CPU the host swaps or the OOM killer acts.",
    fix_by_hand="Apply one of the knobs named in the finding: a smaller KV dtype (fp8), a lower "
    "context cap, fewer concurrent sequences, 4-bit weights, or more devices (tensor parallel).",
    example="Llama-3.1-70B in bf16 on 2 × 80 GB at 32,768 tokens × 16 sequences needs about 321 GB (141 GB of weights, "
    "172 GB of KV cache, 8 GB of runtime overhead) where 144 GB are usable (90 % of 160 GB).",
)

DEC003 = Code(
    code="DEC003",
    title="The model fits, with little of the usable memory to spare",
    severity=Severity.WARNING,
    what="The memory needed is within the 90 % a serving engine takes by default (vLLM's --gpu-memory-utilization 0.9), "
    "but above 95 % of it. (Above the 90 % is DEC002: it does not fit.)",
    why="The estimate's own margin (activation peaks, CUDA graphs, allocator rounding) is a few per cent: this close to "
    "the end of the usable memory, a server that starts can still refuse the last sequences or fail under load.",
    fix_by_hand="Take one of the knobs named in the finding (an fp8 KV cache, a lower context cap, fewer sequences), or "
    "leave the plan as it is and watch the engine's KV-cache usage under real load.",
    example="Qwen2-7B at 8,192 tokens × 8 sequences needs 20.9 GB of the 21.6 GB usable on a 24 GB RTX 4090: 97 % of it.",
)

DEC004 = Code(
    code="DEC004",
    title="The decode ceiling is below the target tokens/s",
    severity=Severity.WARNING,
    what="Even at full bandwidth, one sequence cannot decode as fast as --target-tps asks.",
    why="No software setting beats the memory system: the bytes per step must shrink (quantized "
    "weights, a smaller KV dtype, a shorter context) or the bandwidth must grow (another device).",
    fix_by_hand="Quantize the weights (4-bit cuts bytes per step about 3.5× from fp16), use a smaller "
    "model, or a device with more bandwidth; speculative decoding raises tokens per step instead.",
    example="--target-tps 60 for a 13 GB fp16 model on a 100 GB/s host: the ceiling is 7.6 tok/s per sequence.",
)

DEC010 = Code(
    code="DEC010",
    title="The model files cannot be read",
    severity=Severity.ERROR,
    what="A model file is malformed: a truncated safetensors header, a header length beyond the file, "
    "a GGUF file with a bad magic or an unknown tensor type, missing shards, or invalid config JSON.",
    why="Loaders fail on the same files, usually with a far less helpful error, after minutes of loading.",
    fix_by_hand="Download the named file again and compare its size and sha256 with the hub's; for GGUF, "
    "use a llama.cpp recent enough for its quantization types.",
    example="model.safetensors's header says it is 8 bytes long and then holds no JSON.",
)

DEC011 = Code(
    code="DEC011",
    title="The model config lacks the numbers a KV budget needs",
    severity=Severity.ERROR,
    what="config.json (or the GGUF metadata) has no layer count, KV head count or head size.",
    why="Without them neither the KV cache size nor the memory fit can be computed, and serving engines usually refuse the config too.",
    fix_by_hand="Restore the model's original config.json (num_hidden_layers, num_attention_heads, "
    "num_key_value_heads, hidden_size or head_dim).",
    example="A config.json with hidden_size but neither num_hidden_layers nor num_key_value_heads.",
)

BUDGET_CODES = (DEC002, DEC003, DEC004, DEC010, DEC011)
BUDGET_RETIRED = {"DEC001": "each model's budget is now a fact, shown under the findings (JSON facts.decode-budget)"}
