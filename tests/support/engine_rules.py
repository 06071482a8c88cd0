"""What the engines themselves check when a command line starts them, written down (in our words, not
their code) from the pinned sources, so that tests can refuse a line the engine would refuse.

vLLM (vllm-project/vllm@0052a5b818980ce8a0477706aaf9f75bd5af72cd):
- the arguments: the flag names, aliases and choices of fixtures/engines/vllm-serve-flags.txt
  (vllm/engine/arg_utils.py), integers where EngineArgs types them int, the memory fraction a float;
- vllm/config/model.py, ModelConfig.verify_with_parallel_config: the text config's
  num_attention_heads divisible by --tensor-parallel-size ("Total number of attention heads (32)
  must be divisible by tensor parallel size (3).");
- vllm/model_executor/layers/linear.py, QKVParallelLinear: KV heads split by `divide` when there are
  more of them than ranks, else each replicated: tensor parallel size divisible by them;
- vllm/config/model.py, _get_and_verify_max_len: --max-model-len at most the derived maximum (the
  smallest of the length keys, model_max_length over them; a rope scaling of a type other than su,
  longrope and llama3 multiplies it by its factor, yarn from original_max_position_embeddings; not
  for Gemma 3), unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set;
- vllm/config/cache.py: gpu_memory_utilization in (0, 1].

llama.cpp (ggml-org/llama.cpp@00dc8057): the options of fixtures/engines/llama-server-flags.txt
(tools/server/README.md); -c divided among -np slots; a quantized V cache needs flash attention
(common/arg.cpp refuses -ctv q8_0 without -fa).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

ENGINES = Path(__file__).resolve().parent.parent.parent / "fixtures" / "engines"
LENGTH_KEYS = (
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length", "max_target_positions",
    "max_sequence_length", "max_seq_length", "seq_len",
)  # fmt: skip
VLLM_INTEGERS = {"--max-model-len", "--max-num-seqs", "--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "-pp"}


def flags(name: str) -> dict[str, set[str] | None]:
    """flag → allowed values (None: any) from a fixtures/engines list."""
    allowed: dict[str, set[str] | None] = {}
    for line in (ENGINES / name).read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        words = line.split()
        choices = next((set(w.split("=", 1)[1].split(",")) for w in words if w.startswith("choices=")), None)
        for word in words:
            if word.startswith("-"):
                allowed[word] = choices
    return allowed


def _text(config: dict[str, Any]) -> dict[str, Any]:
    for key in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(key), dict):
            return config[key]
    return config


def derived_max_model_len(config: dict[str, Any]) -> float:
    text = _text(config)
    present = [text[key] for key in LENGTH_KEYS if text.get(key) is not None]
    derived = float(min(present)) if present else 2048.0
    if text.get("model_max_length"):
        derived = text["model_max_length"]
    rope = text.get("rope_parameters") or text.get("rope_scaling")
    if rope and "gemma3" not in str(text.get("model_type")):
        kind = rope.get("rope_type") or rope.get("type")
        factor = 1.0
        if kind not in ("su", "longrope", "llama3"):
            factor = rope.get("factor", 1.0)
            if kind == "yarn":
                derived = rope["original_max_position_embeddings"]
        derived *= factor
    return derived


def parse_vllm(line: str) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(environment, flag → value, errors) of a `vllm serve MODEL …` line, parsed the way argparse
    would refuse it: unknown flags, values outside the choices, values that are not numbers."""
    words = shlex.split(line)
    env: dict[str, str] = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    errors: list[str] = []
    if words[:2] != ["vllm", "serve"] or len(words) < 3 or words[2].startswith("-"):
        return env, {}, [f"not `vllm serve MODEL …`: {line}"]
    allowed = flags("vllm-serve-flags.txt")
    args: dict[str, str] = {}
    rest = words[3:]
    while rest:
        flag = rest.pop(0)
        if flag not in allowed:
            errors.append(f"unrecognized arguments: {flag}")
            continue
        value = rest.pop(0) if rest and not rest[0].startswith("--") else ""
        choices = allowed[flag]
        if choices is not None and value not in choices:
            errors.append(f"argument {flag}: invalid choice: {value!r}")
        if flag in VLLM_INTEGERS and not value.isdigit():
            errors.append(f"argument {flag}: invalid int value: {value!r}")
        args[{"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size"}.get(flag, flag)] = value
    return env, args, errors


def vllm_refusals(line: str, config: dict[str, Any]) -> list[str]:
    """Why vLLM would refuse to start with this line for this config.json (empty: it starts)."""
    env, args, errors = parse_vllm(line)
    if errors:
        return errors
    text = _text(config)
    tensor = int(args.get("--tensor-parallel-size", "1"))
    pipeline = int(args.get("--pipeline-parallel-size", "1"))
    heads = text.get("num_attention_heads", 0)
    if heads % tensor:
        errors.append(f"Total number of attention heads ({heads}) must be divisible by tensor parallel size ({tensor}).")
    kv = next((text[k] for k in ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num") if text.get(k)), heads)
    if not text.get("kv_lora_rank") and kv and (tensor % kv if tensor >= kv else kv % tensor):
        errors.append(f"{kv} KV heads cannot be split across (or replicated on) {tensor} ranks")
    if pipeline > text.get("num_hidden_layers", pipeline):
        errors.append(f"{pipeline} pipeline stages for {text.get('num_hidden_layers')} layers")
    fraction = float(args.get("--gpu-memory-utilization", "0.9"))
    if not 0 < fraction <= 1:
        errors.append(f"gpu_memory_utilization {fraction} is not in (0, 1]")
    length = args.get("--max-model-len")
    derived = derived_max_model_len(config)
    if length is not None and int(length) > derived and not env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN"):
        errors.append(f"User-specified max_model_len ({length}) is greater than the derived max_model_len ({derived:g})")
    for name in ("--max-num-seqs", "--max-model-len"):
        if name in args and int(args[name]) < 1:
            errors.append(f"{name} {args[name]} is below 1")
    return errors


def llama_server_refusals(line: str) -> list[str]:
    words = shlex.split(line)
    if words[:1] != ["llama-server"]:
        return [f"not a llama-server line: {line}"]
    allowed = flags("llama-server-flags.txt")
    errors, args, rest = [], {}, words[1:]
    while rest:
        flag = rest.pop(0)
        if flag not in allowed:
            errors.append(f"error: invalid argument: {flag}")
            continue
        value = rest.pop(0) if rest else ""
        if allowed[flag] is not None and value not in allowed[flag]:
            errors.append(f"{flag}: {value!r} is not one of {sorted(allowed[flag] or ())}")
        args[flag] = value
    context, slots = int(args.get("-c", "0")), int(args.get("-np", "1"))
    if slots < 1 or context % slots:
        errors.append(f"-c {context} does not divide into {slots} slots")
    if args.get("-ctv", "f16") not in ("f16", "f32", "bf16") and args.get("-fa") != "on":
        errors.append("a quantized V cache needs flash attention (-fa on)")
    return errors
