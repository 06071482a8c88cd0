"""The decode budget of each --model on this host: memory fit with headroom and the tokens/s ceiling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from decode_doctor.check import Check, Needs, Option
from decode_doctor.context import Context
from decode_doctor.model import Code, Finding, Severity

KV_DTYPES = ("fp16", "bf16", "fp8", "int8", "int4", "fp32")
DEFAULT_CONTEXT = 4096

DEC001 = Code(
    code="DEC001",
    title="Decode budget",
    severity=Severity.INFO,
    what="For a model at the chosen context and concurrency: weights, KV cache per token and in total, "
    "the memory needed against each device's memory, and the tokens/s ceiling that memory bandwidth allows.",
    why="Decode reads all weights plus every sequence's KV cache for each token: bytes per step ÷ "
    "bandwidth is a hard floor on the time per token, whatever the compute.",
    fix_by_hand="Explore other settings with `decode-doctor estimate --model DIR --context N --concurrency N --kv-dtype fp8`.",
    example="Qwen2-7B in bf16 at 4096 tokens × 8 sequences: 15.2 GB of weights + 1.9 GB of KV.",
)
DEC002 = Code(
    code="DEC002",
    title="The model does not fit in device memory at this context and concurrency",
    severity=Severity.ERROR,
    what="Weights + KV cache at full context × concurrency + runtime overhead exceed the device's memory.",
    why="The server will fail to start (CUDA out of memory), or the KV cache allocator will cap the "
    "context or the batch far below what was planned; on CPU the host swaps or the OOM killer acts.",
    fix_by_hand="Apply one of the knobs named in the finding: a smaller KV dtype (fp8), a lower "
    "context cap, fewer concurrent sequences, 4-bit weights, or more devices (tensor parallel).",
)
DEC003 = Code(
    code="DEC003",
    title="The model fits, but without the 20 % headroom",
    severity=Severity.WARNING,
    what="The memory needed is within the device's memory, but leaves less than a fifth of it free.",
    why="Fragmentation, activation peaks, CUDA graphs and other processes need room; running this close "
    "to the limit fails under load rather than at start.",
    fix_by_hand="Take one of the knobs named in the finding, or lower the serving engine's memory "
    "fraction (vLLM --gpu-memory-utilization) and accept a smaller KV pool.",
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
)
DEC011 = Code(
    code="DEC011",
    title="The model config lacks the numbers a KV budget needs",
    severity=Severity.ERROR,
    what="config.json (or the GGUF metadata) has no layer count, KV head count or head size.",
    why="Without them neither the KV cache size nor the memory fit can be computed, and serving engines "
    "usually refuse the config too.",
    fix_by_hand="Restore the model's original config.json (num_hidden_layers, num_attention_heads, "
    "num_key_value_heads, hidden_size or head_dim).",
)


def _cpu_device(ctx: Context, bandwidth: dict[str, Any] | None, given: float | None) -> Any:
    from decode_doctor.budget import Device

    total = ctx.meminfo_bytes("MemTotal")
    if given:
        bw, source = given, "given"
    elif bandwidth and bandwidth.get("cpu", {}).get("read_gbps"):
        bw, source = bandwidth["cpu"]["read_gbps"], "measured"
    elif bandwidth and bandwidth.get("cpu", {}).get("spec_gbps"):
        bw, source = bandwidth["cpu"]["spec_gbps"], "spec"
    else:
        bw, source = None, "unknown"
    return Device("cpu", "CPU", total, bw, source)


def devices(ctx: Context) -> list[Any]:
    from decode_doctor.budget import Device

    facts = ctx.facts.get("bandwidth")
    given = ctx.options.get("bandwidth")
    found = []
    for gpu in (facts or {}).get("gpus", []):
        bw = given or gpu.get("copy_gbps") or gpu.get("theoretical_gbps")
        source = "given" if given else ("measured" if gpu.get("copy_gbps") else "spec")
        found.append(Device(f"cuda:{gpu['index']}", gpu["name"], gpu.get("memory_bytes"), bw, source))
    cpu = _cpu_device(ctx, facts, given)
    stack = ctx.facts.get("gpu") or {}
    if not found:  # nothing measured: the driver's inventory, with NVML's theoretical bandwidth if any
        for gpu in stack.get("devices", []):
            bw = given or gpu.get("theoretical_gbps")
            memory = gpu["memory_mib"] << 20 if gpu.get("memory_mib") else None
            found.append(Device(f"cuda:{gpu['index']}", gpu["name"], memory, bw, "given" if given else ("spec" if bw else "unknown")))
    if stack.get("unified_memory") and not found:  # Jetson: the GPU allocates from system RAM
        found.append(Device("cuda:0", "unified memory (Jetson)", cpu.memory_bytes, given, "given" if given else "unknown"))
    found.append(cpu)
    return found


class DecodeBudget(Check):
    name = "decode-budget"
    description = "memory fit and decode tokens/s ceiling of each --model on this host"
    codes = (DEC001, DEC002, DEC003, DEC004, DEC010, DEC011)
    needs = Needs(inputs=("models",), after=("bandwidth", "gpu"), files=("/proc/meminfo",))
    options = (
        Option("--context", "Context length to budget for [default: 4096, or the model's maximum if lower].", type=int),
        Option("--concurrency", "Sequences decoded at once [default: 1].", type=int, default=1),
        Option("--kv-dtype", "KV cache element type [default: fp16].", choices=KV_DTYPES, default="fp16"),
        Option("--target-tps", "Tokens/s per sequence the deployment needs; below it is a warning.", type=float),
        Option("--bandwidth", "Memory bandwidth in GB/s to budget with instead of the measured one.", type=float),
    )
    timeout_s = 30.0

    def run(self, ctx: Context) -> list[Finding]:
        from decode_doctor.modelfiles import ModelFormatError, read_model

        findings: list[Finding] = []
        for path in ctx.models:
            for name in ("config.json", "model.safetensors.index.json"):
                if (Path(path) / name).is_file():
                    ctx.note_file(Path(path) / name)
            try:
                model = read_model(Path(path))
            except ModelFormatError as exc:
                findings.append(self.finding("DEC010", str(exc), evidence={"file": exc.path or str(path)}, path=exc.path or str(path)))
                continue
            except OSError as exc:
                findings.append(self.finding("DEC010", f"{path}: {exc.strerror}", evidence={"file": str(path)}, path=str(path)))
                continue
            missing = model.missing_hyperparameters()
            if missing:
                findings.append(self.finding("DEC011", f"{model.name}: cannot size the KV cache: no {', '.join(missing)} in its config.", evidence={"missing": missing, "format": model.format}, path=str(path)))
                continue
            findings.extend(self._judge(ctx, model, str(path)))
        return findings

    def _judge(self, ctx: Context, model: Any, path: str) -> list[Finding]:
        from decode_doctor.budget import compute_budget, human_binary, human_bytes

        context = ctx.options.get("context") or min(DEFAULT_CONTEXT, model.max_context or DEFAULT_CONTEXT)
        concurrency = ctx.options.get("concurrency") or 1
        kv_dtype = ctx.options.get("kv_dtype") or "fp16"
        target = ctx.options.get("target_tps")
        all_devices = devices(ctx)
        judged = [d for d in all_devices if d.name != "cpu"] or all_devices  # a GPU host serves from GPUs
        findings = []
        budgets = {d.name: compute_budget(model, d, context, concurrency, kv_dtype) for d in all_devices}
        summary_parts = []
        for device in judged:
            budget = budgets[device.name]
            ceiling = f", ≤ {budget.tps_per_sequence:.1f} tok/s per sequence ({budget.bandwidth_gbps:.0f} GB/s {budget.bandwidth_source})" if budget.tps_per_sequence else ", ceiling unknown (no bandwidth)"
            summary_parts.append(f"{device.name}: {budget.fit} in {human_bytes(device.memory_bytes)}{ceiling}")
            evidence = {"model": model.name, "device": device.name, "device_label": device.label, **budget.to_dict()}
            knobs = "; ".join(budget.knobs)
            if budget.fit == "does not fit":
                findings.append(self.finding("DEC002", f"{model.name} on {device.name}: needs {human_bytes(budget.need_bytes)} at {context:,} tokens × {concurrency}, has {human_bytes(device.memory_bytes)}." + (f" Knobs: {knobs}." if knobs else ""), evidence=evidence, path=path))
            elif budget.fit == "tight":
                findings.append(self.finding("DEC003", f"{model.name} on {device.name}: needs {human_bytes(budget.need_bytes)} of {human_bytes(device.memory_bytes)}, less than 20 % left." + (f" Knobs: {knobs}." if knobs else ""), evidence=evidence, path=path))
            if target and budget.tps_per_sequence and budget.tps_per_sequence < target:
                findings.append(self.finding("DEC004", f"{model.name} on {device.name}: at most {budget.tps_per_sequence:.1f} tok/s per sequence at {context:,} tokens, below the target {target:g}.", evidence=evidence, path=path))
        first = budgets[judged[0].name]
        message = (
            f"{model.name} ({model.format}, {human_bytes(model.weight_bytes)} of weights, reads {human_bytes(model.decode_read_bytes)} per token): "
            f"KV {human_binary(first.kv_bytes_per_token)}/token ({kv_dtype}), {human_bytes(first.kv_bytes_total)} at {context:,} tokens × {concurrency}; "
            + "; ".join(summary_parts)
        )
        evidence = {
            "model": {k: v for k, v in model.to_dict().items() if k not in ("notes",)},
            "notes": model.notes,
            "budgets": {name: b.to_dict() for name, b in budgets.items()},
        }
        findings.insert(0, self.finding("DEC001", message, evidence=evidence, path=path))
        return findings
