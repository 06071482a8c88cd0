"""The decode budget of each --model on this host: memory fit with headroom and the tokens/s ceiling."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decode_doctor.engine import Chart, Check, Code, Context, Facts, Finding, HtmlBlock, Metric, Needs, Option, Sample, Series, Severity
from decode_doctor.engine.units import amount, parse_rate, whole

from .artifacts import ArtifactsFacts
from .budget import Budget, Device, compute_budget, human_binary, human_bytes, sequences
from .dtypes import KV_DTYPE_BYTES
from .modelfiles import ModelFormatError, ModelInfo, read_model
from .plan import sizing

KV_DTYPES = tuple(sorted(KV_DTYPE_BYTES))
DEFAULT_CONTEXT = 4096

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
    title="The model fits, but without the 10 % headroom",
    severity=Severity.WARNING,
    what="The memory needed is within the device's memory, but above the 90 % a serving engine takes by default "
    "(vLLM's --gpu-memory-utilization 0.9).",
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
    why="Without them neither the KV cache size nor the memory fit can be computed, and serving engines usually refuse the config too.",
    fix_by_hand="Restore the model's original config.json (num_hidden_layers, num_attention_heads, "
    "num_key_value_heads, hidden_size or head_dim).",
)


@dataclass(frozen=True)
class ModelBudget:
    """One model's budget on every device of the host; judged: the devices it would be served from."""

    model: ModelInfo
    budgets: list[Budget]
    judged: list[str]

    def line(self) -> str:
        model = self.model
        first = next(b for b in self.budgets if b.device == self.judged[0])
        parts = []
        for budget in self.budgets:
            if budget.device not in self.judged:
                continue
            if budget.tps_per_sequence:
                ceiling = (
                    f", ≤ {budget.tps_per_sequence:.1f} tok/s per sequence ({budget.bandwidth_gbps:.0f} GB/s {budget.bandwidth_source})"
                )
            else:
                ceiling = ", ceiling unknown (no bandwidth)"
            limits = ""
            if budget.max_concurrency is not None:
                limits = f", at most {sequences(budget.max_concurrency)} at {budget.context:,} tokens"
            parts.append(f"{budget.device}: {budget.fit} in {human_bytes(budget.capacity_bytes)}{ceiling}{limits}")
        weights = f"{human_bytes(first.weights_bytes)} of weights" if first.weights_bytes is not None else "weights unknown"
        if model.format == "config-only" and first.weights_bytes is not None:
            weights += " (from the config: no weight files)"
        return (
            f"{model.name} ({model.format}, {weights}, "
            f"reads {human_bytes(first.read_bytes_per_step - first.kv_bytes_total)} of weights per step): "
            f"KV {human_binary(first.kv_bytes_per_token)}/token "
            f"({first.kv_dtype}), {human_bytes(first.kv_bytes_total)} at {first.context:,} tokens × {first.concurrency}; "
            + "; ".join(parts)
        )


@dataclass(frozen=True)
class BudgetFacts(Facts):
    shown_by_default = True  # the user asked about these models
    models: list[ModelBudget] = field(default_factory=list)

    def summary(self) -> list[str]:
        return [entry.line() for entry in self.models]

    def metrics(self) -> list[Metric]:
        samples = tuple(
            Sample({"model": entry.model.path, "device": b.device, "context": str(b.context)}, b.tps_per_sequence)
            for entry in self.models
            for b in entry.budgets
            if b.tps_per_sequence
        )
        return [Metric("decode_doctor_decode_ceiling_tokens_per_second", "Decode tokens/s ceiling per sequence.", samples)]

    def html(self) -> list[HtmlBlock]:
        series = []
        rows = []
        for entry in self.models:
            for budget in entry.budgets:
                points = tuple((row["context"], row["tps_per_sequence"]) for row in budget.sweep if row.get("tps_per_sequence"))
                if points:
                    series.append(Series(f"{entry.model.name} on {budget.device}", points))
                ceiling = f"≤ {budget.tps_per_sequence:.1f} tok/s per sequence" if budget.tps_per_sequence else "ceiling unknown"
                rows.append((f"{entry.model.name} on {budget.device}", f"{budget.fit} ({human_bytes(budget.need_bytes)}), {ceiling}"))
        chart = Chart("context length (tokens)", "tokens/s per sequence", tuple(series), log_x=True) if series else None
        return [HtmlBlock("Decode budget", tuple(rows), chart)] if rows else []

    def compared(self) -> dict[str, str | float]:
        return {
            f"{entry.model.name} on {b.device}, tok/s at {b.context:,}": round(b.tps_per_sequence, 2)
            for entry in self.models
            for b in entry.budgets
            if b.tps_per_sequence
        }


def _cpu_device(ctx: Context, given: float | None) -> Device:
    bandwidth = ctx.facts.get("bandwidth")  # the bandwidth feature's facts: cpu.measured, cpu.spec_gbps
    total = ctx.meminfo_bytes("MemTotal")
    if given:
        return Device("cpu", "CPU", total, given, "given")
    if bandwidth is not None and bandwidth.cpu.measured.read_gbps:
        return Device("cpu", "CPU", total, bandwidth.cpu.measured.read_gbps, "measured")
    if bandwidth is not None and bandwidth.cpu.spec_gbps:
        return Device("cpu", "CPU", total, bandwidth.cpu.spec_gbps, "spec")
    return Device("cpu", "CPU", total, None, "unknown")


def devices(ctx: Context) -> list[Device]:
    """The devices a model could be served from, with the best bandwidth figure known for each."""
    bandwidth = ctx.facts.get("bandwidth")  # gpus: index, name, memory_bytes, copy_gbps, theoretical_gbps
    stack = ctx.facts.get("gpu")  # devices: index, name, memory_mib, theoretical_gbps; unified_memory
    given = ctx.options.get("bandwidth")
    found = []
    for gpu in bandwidth.gpus if bandwidth is not None else []:
        bw = given or gpu.copy_gbps or gpu.theoretical_gbps
        source = "given" if given else ("measured" if gpu.copy_gbps else "spec")
        found.append(Device(f"cuda:{gpu.index}", gpu.name, gpu.memory_bytes, bw, source))
    cpu = _cpu_device(ctx, given)
    if not found and stack is not None:  # nothing measured: the driver's inventory, with its theoretical bandwidth
        for gpu in stack.devices:
            bw = given or gpu.theoretical_gbps
            memory = gpu.memory_mib << 20 if gpu.memory_mib else None
            source = "given" if given else ("spec" if bw else "unknown")
            found.append(Device(f"cuda:{gpu.index}", gpu.name, memory, bw, source))
        if stack.unified_memory and not found:  # Jetson: the GPU allocates from system RAM
            found.append(Device("cuda:0", "unified memory (Jetson)", cpu.memory_bytes, given, "given" if given else "unknown"))
    found.append(cpu)
    return found


class DecodeBudget(Check):
    name = "decode-budget"
    description = "memory fit and decode tokens/s ceiling of each --model on this host"
    codes = (DEC002, DEC003, DEC004, DEC010, DEC011)
    needs = Needs(inputs=("models",), after=("bandwidth", "gpu", "model-artifacts"))

    @classmethod
    def requires(cls, options: Mapping[str, Any]) -> tuple[str, ...]:
        # Without the GPU's facts the budget would be the CPU's; without the bandwidth, no ceiling; without
        # the artifacts check, a model with no weights could "fit".
        return ("gpu", "model-artifacts") + (() if options.get("bandwidth") else ("bandwidth",))

    options = (
        Option(
            "--context",
            "Context length to budget for [default: 4096, or the model's maximum if lower].",
            type=whole(1, 1 << 24, "a number of tokens"),
            metavar="TOKENS",
        ),
        Option(
            "--concurrency",
            "Sequences decoded at once [default: 1].",
            type=whole(1, 1 << 20, "a number of sequences"),
            default=1,
            metavar="N",
        ),
        Option("--kv-dtype", "KV cache element type [default: fp16].", choices=KV_DTYPES, default="fp16"),
        Option(
            "--target-tps",
            "Tokens/s per sequence the deployment needs; below it is a warning.",
            type=amount(0.0, 1e7, "tokens/s"),
            metavar="TOKENS/S",
        ),
        Option("--bandwidth", "Memory bandwidth to budget with instead of the measured one: 900GB/s, 3.35TB/s, or GB/s.", type=parse_rate),
    )
    timeout_s = 30.0
    facts_type = BudgetFacts
    retired = {"DEC001": "each model's budget is now a fact, shown under the findings (JSON facts.decode-budget)"}

    def run(self, ctx: Context) -> list[Finding]:
        findings: list[Finding] = []
        budgets: list[ModelBudget] = []
        artifacts = ctx.facts.get("model-artifacts")  # its damaged models are its to report
        damaged = set(artifacts.damaged) if isinstance(artifacts, ArtifactsFacts) else set()
        for path in ctx.models:
            for name in ("config.json", "model.safetensors.index.json"):
                if (Path(path) / name).is_file():
                    ctx.note_file(Path(path) / name)
            try:
                model = read_model(Path(path))
            except ModelFormatError as exc:
                if str(path) not in damaged:
                    where = exc.path or str(path)
                    findings.append(self.finding("DEC010", str(exc), evidence={"file": where}, path=where))
                continue
            except OSError as exc:
                findings.append(self.finding("DEC010", f"{path}: {exc.strerror}", evidence={"file": str(path)}, path=str(path)))
                continue
            missing = model.missing_hyperparameters() or ["layers, kv_heads, head_dim"]
            if not sizing(model).cache:
                message = f"{model.name}: cannot size the KV cache: no {', '.join(missing)} in its config."
                evidence = {"missing": missing, "format": model.format}
                findings.append(self.finding("DEC011", message, evidence=evidence, path=str(path)))
                continue
            entry = self._budget(ctx, model)
            budgets.append(entry)
            findings.extend(self._judge(ctx, entry, str(path)))
        ctx.publish(BudgetFacts(budgets))
        return findings

    @staticmethod
    def _budget(ctx: Context, model: ModelInfo) -> ModelBudget:
        context = ctx.options.get("context") or min(DEFAULT_CONTEXT, model.max_context or DEFAULT_CONTEXT)
        concurrency = ctx.options.get("concurrency") or 1
        kv_dtype = ctx.options.get("kv_dtype") or "fp16"
        all_devices = devices(ctx)
        judged = [d for d in all_devices if d.name != "cpu"] or all_devices  # a GPU host serves from GPUs
        budgets = [compute_budget(model, d, context, concurrency, kv_dtype) for d in all_devices]
        return ModelBudget(model, budgets, [d.name for d in judged])

    def _judge(self, ctx: Context, entry: ModelBudget, path: str) -> list[Finding]:
        target = ctx.options.get("target_tps")
        name = entry.model.name
        findings = []
        for budget in entry.budgets:
            if budget.device not in entry.judged:
                continue
            evidence = {"model": name, **budget.to_dict()}
            knobs = f" Knobs: {'; '.join(budget.knobs)}." if budget.knobs else ""
            where = f"{name} on {budget.device}"
            if budget.fit == "does not fit":
                message = (
                    f"{where}: needs {human_bytes(budget.need_bytes)} at {budget.context:,} tokens × {budget.concurrency}, "
                    f"has {human_bytes(budget.capacity_bytes)}.{knobs}"
                )
                findings.append(self.finding("DEC002", message, evidence=evidence, path=path))
            elif budget.fit == "tight":
                message = (
                    f"{where}: needs {human_bytes(budget.need_bytes)} of {human_bytes(budget.capacity_bytes)}, less than 10 % left.{knobs}"
                )
                findings.append(self.finding("DEC003", message, evidence=evidence, path=path))
            if target and budget.tps_per_sequence and budget.tps_per_sequence < target:
                message = (
                    f"{where}: at most {budget.tps_per_sequence:.1f} tok/s per sequence at {budget.context:,} tokens, "
                    f"below the target {target:g}."
                )
                findings.append(self.finding("DEC004", message, evidence=evidence, path=path))
        return findings
