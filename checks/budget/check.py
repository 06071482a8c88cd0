"""The decode budget of each --model on this host: memory fit with headroom and the tokens/s ceiling."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from decode_doctor.checks.artifacts.contract import ArtifactsFacts
from decode_doctor.checks.bandwidth.contract import BandwidthFacts, BandwidthOptions
from decode_doctor.checks.gpu.contract import GpuFacts
from decode_doctor.checks.gpuhealth.contract import MIG, GpuHealthFacts
from decode_doctor.engine import Check, Context, Finding, Needs, OptionRef, Reads
from decode_doctor.engine.units import human_bytes
from decode_doctor.i18n import N_, _, localized, os_reason, reason, said
from decode_doctor.models.dtypes import KV_DTYPE_BYTES
from decode_doctor.models.hardware import BandwidthSource
from decode_doctor.models.info import ModelInfo
from decode_doctor.models.modelfiles import ModelFormatError, read_model
from decode_doctor.models.plan import UTILIZATION, Fit
from decode_doctor.models.sizing import sizing

from .budget import Device, compute_budget
from .codes import BUDGET_CODES, BUDGET_RETIRED, DEC002, DEC003, DEC004, DEC010, DEC011
from .contract import Budget, BudgetAt, BudgetFacts, BudgetOptions, DecodePrediction, ModelBudget

KV_DTYPES = tuple(sorted(KV_DTYPE_BYTES))
DEFAULT_CONTEXT = 4096


def _cpu_device(ctx: Context, given: float | None) -> Device:
    bandwidth = ctx.facts.get(BandwidthFacts)
    total = ctx.meminfo_bytes("MemTotal")
    if given:
        return Device("cpu", "CPU", total, given, BandwidthSource.GIVEN)
    if bandwidth is not None and bandwidth.cpu.measured.read_gbps:
        best = bandwidth.best_quiet_gbps  # this host's best quiet figure of the week: a slow window now does not lower the ceiling
        if best is not None and not bandwidth.reused and best > bandwidth.cpu.measured.read_gbps:
            return Device("cpu", "CPU", total, best, BandwidthSource.CACHED)
        return Device("cpu", "CPU", total, bandwidth.cpu.measured.read_gbps, BandwidthSource.MEASURED)
    if bandwidth is not None and bandwidth.cpu.spec_gbps:
        return Device("cpu", "CPU", total, bandwidth.cpu.spec_gbps, BandwidthSource.SPEC)
    return Device("cpu", "CPU", total, None, BandwidthSource.UNKNOWN)


def devices(ctx: Context) -> list[Device]:
    """The devices a model could be served from, with the best bandwidth figure known for each."""
    bandwidth = ctx.facts.get(BandwidthFacts)
    stack = ctx.facts.get(GpuFacts)
    given = ctx.option(BudgetOptions).bandwidth
    found = []
    for gpu in bandwidth.gpus if bandwidth is not None else []:
        bw = given or gpu.copy_gbps or gpu.theoretical_gbps
        source = BandwidthSource.GIVEN if given else (BandwidthSource.MEASURED if gpu.copy_gbps else BandwidthSource.SPEC)
        found.append(Device(f"cuda:{gpu.index}", gpu.name, gpu.memory_bytes, bw, source))
    found = [usable for device in found if (usable := _left_for_an_engine(ctx, device)) is not None]
    cpu = _cpu_device(ctx, given)
    if not found and stack is not None:  # nothing measured: the driver's inventory, with its theoretical bandwidth
        for listed in stack.devices:
            bw = given or listed.theoretical_gbps
            memory = listed.memory_mib << 20 if listed.memory_mib else None
            source = BandwidthSource.GIVEN if given else (BandwidthSource.SPEC if bw else BandwidthSource.UNKNOWN)
            usable = _left_for_an_engine(ctx, Device(f"cuda:{listed.index}", listed.name, memory, bw, source))
            found.extend([usable] if usable is not None else [])
        if stack.unified_memory and not found:  # Jetson: the GPU allocates from system RAM
            found.append(
                Device(
                    "cuda:0",
                    "unified memory (Jetson)",
                    cpu.memory_bytes,
                    given,
                    BandwidthSource.GIVEN if given else BandwidthSource.UNKNOWN,
                )
            )
    found.append(cpu)
    return found


def _left_for_an_engine(ctx: Context, device: Device) -> Device | None:
    """The GPU as an engine started now would have it (the gpu-health check's facts): the memory other
    processes hold left out (the budget's line says how much); a GPU in MIG mode is not judged (an engine sees one
    slice, whose memory these facts do not give)."""
    health = ctx.facts.get(GpuHealthFacts)
    index = device.name.removeprefix("cuda:")
    state = next((g for g in health.gpus if str(g.index) == index), None) if health is not None else None
    if state is None:
        return device
    if state.mig:
        ctx.not_judged(
            _("the decode budget on {device}", device=device.name),
            _("MIG is enabled: an engine sees one slice, whose memory is not read here ({code})", code=MIG.code),
            cause=MIG.code,
        )
        return None
    if state.held_mib and device.memory_bytes:
        held = state.held_mib << 20
        return replace(device, memory_bytes=max(0, device.memory_bytes - held), held_bytes=held)
    return device


class DecodeBudget(Check):
    name = "decode-budget"
    looks_at = (
        "for each `--model` (HF directory with safetensors, sharded or not, a directory with config.json alone, or a `.gguf`): weights "
        "from the headers, or from the architecture in config.json when there are no weight files (never 0: a model that can be sized "
        'neither way is "unknown"); the KV cache layer by layer (GQA/MQA, sliding windows, MLA, hybrid Mamba layers); memory need at '
        "`--context` × `--concurrency` against each device (usable: 90 % of it), the limits (max context at that concurrency, max "
        "concurrency at that context) and the tokens/s ceiling from the bandwidth check's facts; which knob helps when it does not fit;"
        " malformed files are findings. Facts: each model's budget on each device, with a context sweep"
    )
    description = N_("memory fit and decode tokens/s ceiling of each --model on this host")
    codes = BUDGET_CODES
    # Without the GPU's facts the budget would be the CPU's; without the bandwidth, no ceiling (unless
    # --bandwidth gives it); without the artifacts check, a model with no weights could "fit".
    needs = Needs(
        inputs=("models",),
        reads=(
            Reads(GpuFacts),
            Reads(GpuHealthFacts),  # memory other processes hold, and MIG
            Reads(BandwidthFacts, unless_option=OptionRef(BudgetOptions, "bandwidth")),
            Reads(ArtifactsFacts),
        ),
    )

    options = BudgetOptions
    timeout_s = 30.0
    facts_type = BudgetFacts
    retired = BUDGET_RETIRED

    def run(self, ctx: Context) -> list[Finding]:
        findings: list[Finding] = []
        budgets: list[ModelBudget] = []
        artifacts = ctx.facts.get(ArtifactsFacts)  # its damaged models are its to report
        damaged = artifacts.damaged if artifacts is not None else {}
        for path in ctx.models:
            what = _("the decode budget of {model}", model=Path(path).name)
            for name in ("config.json", "model.safetensors.index.json"):
                if (Path(path) / name).is_file():
                    ctx.note_file(Path(path) / name)
            try:
                model = read_model(Path(path))
            except ModelFormatError as exc:
                problems = damaged.get(str(path))
                if problems:  # the artifacts check found why: say that it stopped the budget, even unselected
                    ctx.not_judged(what, _("model-artifacts found {problems}", problems=problems[0]), cause=problems[0].split(":", 1)[0])
                else:
                    where = exc.path or str(path)
                    findings.append(self.finding(DEC010, localized(reason(exc)), evidence={"file": where}, path=where))
                    ctx.not_judged(what, reason(exc), cause=DEC010.code)
                continue
            except OSError as exc:
                unreadable = said("{path}: {error}", path=path, error=os_reason(exc))
                findings.append(self.finding(DEC010, unreadable.text(), evidence={"file": str(path)}, path=str(path)))
                ctx.not_judged(what, unreadable, cause=DEC010.code)
                continue
            missing = model.missing_hyperparameters() or ["layers, kv_heads, head_dim"]
            if not sizing(model).cache:
                message = _("{model}: cannot size the KV cache: no {missing} in its config.", model=model.name, missing=", ".join(missing))
                evidence = {"missing": missing, "format": model.format}
                findings.append(self.finding(DEC011, message, evidence=evidence, path=str(path)))
                ctx.not_judged(what, _("no {missing} in its config", missing=", ".join(missing)), cause=DEC011.code)
                continue
            entry = self._budget(ctx, model)
            budgets.append(entry)
            findings.extend(self._judge(ctx, entry, str(path)))
        ctx.publish(BudgetFacts(tuple(budgets)))
        return findings

    @staticmethod
    def _budget(ctx: Context, model: ModelInfo) -> ModelBudget:
        asked = ctx.supplied.get(BudgetAt)
        context = (asked.context if asked else ctx.option(BudgetOptions).context) or min(
            DEFAULT_CONTEXT, model.max_context or DEFAULT_CONTEXT
        )
        concurrency = (asked.concurrency if asked else ctx.option(BudgetOptions).concurrency) or 1
        kv_dtype = ctx.option(BudgetOptions).kv_dtype
        all_devices = devices(ctx)
        judged = [d for d in all_devices if d.name != "cpu"] or all_devices  # a GPU host serves from GPUs
        budgets = [compute_budget(model, d, context, concurrency, kv_dtype) for d in all_devices]
        budgets = [_predict(ctx, model, b) if b.device == "cpu" and concurrency == 1 else b for b in budgets]
        return ModelBudget(model, tuple(budgets), tuple(d.name for d in judged))

    def _judge(self, ctx: Context, entry: ModelBudget, path: str) -> list[Finding]:
        target = ctx.option(BudgetOptions).target_tps
        name = entry.model.name
        findings = []
        for budget in entry.budgets:
            if budget.device not in entry.judged:
                continue
            evidence = {"model": name, **budget.to_dict()}
            knobs = _(" Knobs: {knobs}.", knobs="; ".join(budget.knobs)) if budget.knobs else ""
            where = _("{model} on {device}", model=name, device=budget.device)
            sizes = {
                "need": human_bytes(budget.need_bytes),
                "usable": human_bytes(_usable(budget)),
                "capacity": human_bytes(budget.capacity_bytes),
            }
            if budget.fit is Fit.DOES_NOT_FIT:
                message = _(
                    "{where}: needs {need} at {context:,} tokens × {concurrency}, has {usable} usable (90 % of {capacity}).{knobs}",
                    where=where, context=budget.context, concurrency=budget.concurrency, knobs=knobs, **sizes,
                )  # fmt: skip
                findings.append(self.finding(DEC002, message, evidence=evidence, path=path))
            elif budget.fit is Fit.TIGHT:
                message = _(
                    "{where}: needs {need} of the {usable} usable (90 % of {capacity}), less than 5 % of it left.{knobs}",
                    where=where, knobs=knobs, **sizes,
                )  # fmt: skip
                findings.append(self.finding(DEC003, message, evidence=evidence, path=path))
            if target and budget.tps_per_sequence and budget.tps_per_sequence < target:
                message = _(
                    "{where}: at most {tps:.1f} tok/s per sequence at {context:,} tokens, below the target {target:g}.",
                    where=where, tps=budget.tps_per_sequence, context=budget.context, target=target,
                )  # fmt: skip
                findings.append(self.finding(DEC004, message, evidence=evidence, path=path))
        return findings


def _predict(ctx: Context, model: ModelInfo, budget: Budget) -> Budget:
    """The budget with llama.cpp's time per token on this CPU at its context, from this host's
    calibration, at the thread count the bandwidth was measured with (one per usable CPU when it was
    given), or why there is none."""
    from decode_doctor.engine.paths import default_state_dir
    from decode_doctor.engine.workers import usable_cpus
    from decode_doctor.models import calibration

    if not ctx.live_devices:  # the calibration was measured on this machine's CPU: never that host's prediction
        return replace(budget, prediction_note=ctx.elsewhere)
    measured = ctx.facts.get(BandwidthFacts)
    if measured is not None and not ctx.option(BudgetOptions).bandwidth:
        threads = measured.cpu.measured.threads
    else:  # bandwidth given: the thread count bench was told, else one per usable CPU
        threads = ctx.option(BandwidthOptions).threads or usable_cpus()
    weight_type = (model.dominant_dtype or "").upper()
    state = default_state_dir(ctx.env)
    found, why = calibration.lookup(state, weight_type, threads)
    unused = calibration.ignored(state)  # records the state file holds but cannot use: named, never dropped unsaid
    if unused:
        more = said(" (and {count} more)", count=len(unused) - 1) if len(unused) > 1 else ""
        why = (
            said("{why}; {ignored}{more}", why=why, ignored=unused[0], more=more)
            if why
            else said("{ignored}{more}", ignored=unused[0], more=more)
        )
    if found is None:
        return replace(budget, prediction_note=why)
    at = calibration.for_model(sizing(model), weight_type, threads, budget.kv_dtype, budget.context, budget.bandwidth_gbps, found)
    if at.prediction is None:
        return replace(budget, prediction_note=at.why_not)
    prediction = DecodePrediction(
        engine=found.engine,
        engine_version=found.engine_version,
        threads=found.threads,
        weight_type=found.weight_type,
        depth=budget.context,
        tpot_s=at.prediction.tpot_s,
        low_s=at.prediction.low_s,
        high_s=at.prediction.high_s,
        calibrated_at=found.measured_at,
        source=found.source,
        bounded=at.prediction.bounded,
    )
    return replace(budget, prediction=prediction)


def _usable(budget: Budget) -> float | None:
    return budget.capacity_bytes * UTILIZATION if budget.capacity_bytes else None
