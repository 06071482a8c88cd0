"""What the engines themselves check when a command line starts them, written down (in our words, not
their code) from the pinned sources, so that tests can refuse a line the engine would refuse without
the engine installed. benchmarks/bench_vllm_lines.py puts the same lines to vLLM itself.

vLLM 0.33.0 (the PyPI release):
- the arguments: the flag names, aliases and choices of fixtures/engines/vllm-serve-flags.txt (the parser
  make_arg_parser builds), integers where it parses them (type=int), the memory fraction a float, a
  flag without a value where it takes none, --hf-overrides JSON;
- vllm/config/model.py, ModelConfig.verify_with_parallel_config: the text config's num_attention_heads
  divisible by --tensor-parallel-size ("Total number of attention heads (32) must be divisible by
  tensor parallel size (3).");
- vllm/model_executor/layers/linear.py, QKVParallelLinear, at model load: KV heads split by `divide`
  when there are more of them than ranks, else each replicated ("8 is not divisible by 6"); the
  Mamba-2 and linear-attention mixers divide their heads (and groups) the same way;
- vllm/config/model.py, _get_and_verify_max_len with model_arch_config_convertor.py: --max-model-len
  at most the derived maximum (the smallest length key, model_max_length over them; a RoPE scaling of
  a type other than su, longrope, llama3, yarn, deepseek_yarn and deepseek_llama_scaling multiplies it
  by its factor; not for Gemma 3), unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set; --hf-overrides
  changes the config before that;
- vllm/config/parallel.py, ParallelConfig.__post_init__: a world size (tensor × pipeline) larger than
  the node's GPUs is refused ("World size (16) is larger than the number of available GPUs (8) in this
  node") unless --nnodes spreads it (multiprocessing: every node runs the line with its --node-rank and
  the same --master-addr, the others --headless);
- vllm/config/cache.py: gpu_memory_utilization in (0, 1].

llama.cpp (ggml-org/llama.cpp@00dc8057): the options of fixtures/engines/llama-server-flags.txt
(tools/server/README.md); -c divided among -np slots; a quantized V cache needs flash attention
(common/arg.cpp refuses -ctv q8_0 without -fa).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

ENGINES = Path(__file__).resolve().parent.parent.parent / "fixtures" / "engines"
LENGTH_KEYS = (
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length", "max_target_positions",
    "max_sequence_length", "max_seq_length", "seq_len",
)  # fmt: skip
ROPE_UNSCALED = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
GPUS_PER_NODE = 8


def flags(name: str) -> dict[str, dict[str, Any]]:
    """flag → {"choices": allowed values or None, "int": parses an integer, "flag": takes no value} from a fixtures/engines list."""
    allowed: dict[str, dict[str, Any]] = {}
    for line in (ENGINES / name).read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        words = line.split()
        choices = next((set(w.split("=", 1)[1].split(",")) for w in words if w.startswith("choices=")), None)
        spec = {"choices": choices, "int": "type=int" in words, "flag": "flag" in words, "name": words[0]}
        for word in words:
            if word.startswith("-"):
                allowed[word] = spec
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
    if isinstance(rope, dict) and "gemma3" not in str(text.get("model_type")):
        kind = rope.get("rope_type") or rope.get("type")
        if kind not in ROPE_UNSCALED:
            derived *= rope.get("factor", 1.0)
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
        spec = allowed[flag]
        value = "" if spec["flag"] else (rest.pop(0) if rest else "")
        if spec["choices"] is not None and value not in spec["choices"]:
            errors.append(f"argument {flag}: invalid choice: {value!r}")
        if (spec["int"] or spec["name"] == "--max-model-len") and not value.isdigit():
            errors.append(f"argument {flag}: invalid int value: {value!r}")
        if spec["name"] == "--hf-overrides":
            try:
                json.loads(value)
            except ValueError:
                errors.append(f"argument --hf-overrides: {value!r} is not JSON")
        args[spec["name"]] = value
    return env, args, errors


def vllm_refusals(line: str, config: dict[str, Any], gpus_per_node: int = GPUS_PER_NODE) -> list[str]:
    """Why vLLM would refuse to start with this line for this config.json (empty: it starts)."""
    env, args, errors = parse_vllm(line)
    if errors:
        return errors
    if "--hf-overrides" in args:
        config = {**config, **json.loads(args["--hf-overrides"])}
    text = _text(config)
    tensor = int(args.get("--tensor-parallel-size", "1"))
    pipeline = int(args.get("--pipeline-parallel-size", "1"))
    nodes = int(args.get("--nnodes", "1"))
    heads = text.get("num_attention_heads", 0)
    if heads % tensor:
        errors.append(f"Total number of attention heads ({heads}) must be divisible by tensor parallel size ({tensor}).")
    kv = next((text[k] for k in ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num") if text.get(k)), heads)
    if not text.get("kv_lora_rank") and kv and (tensor % kv if tensor >= kv else kv % tensor):
        errors.append(f"{kv if kv > tensor else tensor} is not divisible by {tensor if kv > tensor else kv} (QKVParallelLinear)")
    if pipeline > text.get("num_hidden_layers", pipeline):
        errors.append(f"{pipeline} pipeline stages for {text.get('num_hidden_layers')} layers")
    if tensor * pipeline > gpus_per_node and nodes == 1:
        errors.append(f"World size ({tensor * pipeline}) is larger than the number of available GPUs ({gpus_per_node}) in this node.")
    if nodes > 1:
        rank = int(args.get("--node-rank", "0"))
        if not 0 <= rank < nodes or "--master-addr" not in args:
            errors.append(f"--nnodes {nodes} needs each node's --node-rank below it and the head's --master-addr")
        if rank > 0 and "--headless" not in args:
            errors.append(f"node {rank} would start a second API server: it runs --headless")
        if tensor * pipeline != nodes * gpus_per_node:
            errors.append(f"{tensor * pipeline} ranks on {nodes} nodes of {gpus_per_node} GPUs")
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
        choices = allowed[flag]["choices"]
        if choices is not None and value not in choices:
            errors.append(f"{flag}: {value!r} is not one of {sorted(choices)}")
        args[flag] = value
    context, slots = int(args.get("-c", "0")), int(args.get("-np", "1"))
    if slots < 1 or context % slots:
        errors.append(f"-c {context} does not divide into {slots} slots")
    if args.get("-ctv", "f16") not in ("f16", "f32", "bf16") and args.get("-fa") != "on":
        errors.append("a quantized V cache needs flash attention (-fa on)")
    return errors
