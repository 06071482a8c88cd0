"""`decode-doctor estimate`, the work behind the command (commands.py keeps --help light).

The plan is made in a child with a deadline (app.deadline): a model file whose header claims
millions of layers, or a probe that hangs, ends in a one-line error, not a hung command. The plan is
a document the application layer writes as text or JSON.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from decode_doctor.checks.bandwidth.contract import BandwidthFacts
from decode_doctor.checks.gpu.contract import GpuFacts
from decode_doctor.engine.facts import Facts
from decode_doctor.engine.units import human_binary, human_bytes
from decode_doctor.i18n import N_, _, localized, reason, said, width

from . import bwcache, calibration, hardware, serve
from .calibration import Calibration, Prediction
from .contract import ModelInfo, sequences
from .hardware import Hardware
from .modelfiles import ModelFormatError, read_model
from .plan import (
    GPUS_PER_NODE,
    HEADROOM_RULE_TEMPLATE,
    TIGHT_SHARE,
    UTILIZATION,
    DeploymentPlan,
    Sizing,
    expected_cpu_range,
    make_plan,
    sizing,
    valid_tensor_sizes,
)
from .storage import Storage, llama_storage, vllm_storage

F = TypeVar("F", bound=Facts)


DEADLINE_S = 300.0  # reading a model's headers takes milliseconds; measuring a GPU host, under a minute


class EstimateError(ValueError):
    """What the user asked cannot be planned (a device that is not there); the message says why."""


def _measured(kind: type[F], select: str, what: str, options: dict[str, Any] | None = None) -> F | None:
    """Runs a check through the application layer and returns the facts of that type it published."""
    from decode_doctor.app import service
    from decode_doctor.app.output import say
    from decode_doctor.app.requests import RunRequest

    say(_("measuring {what}…", what=what))
    outcome = service.run(RunRequest(select=(select,), options=options or {}))
    return outcome.report.fact(kind)


def _state_dir(given: Path | None) -> Path:
    from decode_doctor.engine.paths import default_state_dir

    return given or default_state_dir()


def _cpu(threads: int | None, bandwidth: float | None, memory: int | None, remeasure: bool, state_dir: Path) -> Hardware:
    import psutil

    from decode_doctor.engine.workers import usable_cpus

    threads = threads or usable_cpus()
    total = memory or psutil.virtual_memory().total
    peaks, how = hardware.cpu_peak(threads)
    cpu = Hardware("cpu", said("CPU, {threads} thread(s)", threads=threads), total, bandwidth, "given", peaks, how, kind="cpu")
    if bandwidth:
        return cpu
    host = bwcache.host_id()
    cached = None if remeasure else bwcache.best(bwcache.load(state_dir), host, threads)
    if cached is not None:
        cpu.bandwidth_gbps, cpu.bandwidth_source = cached.read_gbps, "cached"
        cpu.notes.append(
            said("bandwidth: this host's best recent figure, {reading} (--measure to measure again)", reading=cached.describe())
        )
        return cpu
    facts = _measured(
        BandwidthFacts, "bandwidth", _("memory bandwidth with {threads} thread(s) (about a second)", threads=threads), {"threads": threads}
    )
    if facts is None:
        cpu.bandwidth_source = "unknown"
        return cpu
    measured = facts.cpu.measured
    reading = bwcache.Measurement(
        host, measured.threads, measured.read_gbps, measured.other_load, measured.buffer_bytes, time.time(), measured.contended
    )
    try:
        bwcache.record(state_dir, reading)
    except OSError as exc:
        cpu.notes.append(said("the measurement was not kept ({strerror}): the next run measures again", strerror=exc.strerror))
    cpu.bandwidth_gbps, cpu.bandwidth_source = measured.read_gbps, "measured"
    if reading.busy:
        cpu.bandwidth_source = "measured on a busy host"
        cpu.notes.append(
            said(
                "bandwidth: {read_gbps:.1f} GB/s is a lower bound: other processes used {other_load:.0%} of the CPUs "
                "({foreign_cores:.2f} cores over the window, {steal:.0%} stolen by the hypervisor) meanwhile, so the ceiling "
                "below understates the host; kept as a lower bound, never reused as this host's figure; measure again when it "
                "is quiet (--measure)",
                read_gbps=measured.read_gbps,
                other_load=measured.other_load,
                foreign_cores=measured.foreign_cores,
                steal=measured.steal,
            )
        )
    else:
        cpu.notes.append(said("bandwidth: {reading}, kept in {path}", reading=reading.describe(), path=str(state_dir / bwcache.CACHE_NAME)))
    return cpu


def _local_gpu(spec: str, bandwidth: float | None, memory: int | None) -> Hardware:
    index = int(spec[5:])
    stack = _measured(GpuFacts, "gpu", _("the GPUs of this host for {spec}", spec=spec))
    listed = next((d for d in stack.devices if d.index == index), None) if stack is not None else None
    if listed is None:
        raise EstimateError(
            _(
                "{spec} is not on this host (no NVIDIA GPU {index} found); plan for one you do not have with --gpu NAME",
                spec=spec,
                index=index,
            )
        )
    facts = _measured(BandwidthFacts, "bandwidth", _("{spec}'s memory bandwidth", spec=spec))
    measured = facts.gpu(index) if facts is not None else None
    name = measured.name if measured else listed.name
    known = None
    try:
        known = hardware.lookup(name.replace("NVIDIA ", ""))
    except ValueError:
        pass
    found_memory = (measured.memory_bytes if measured else None) or (listed.memory_mib << 20 if listed and listed.memory_mib else None)
    device = Hardware(spec, name, memory or found_memory, None, "unknown")
    if known:
        device.peak_tflops, device.peak_source = known.peak_tflops, known.peak_source
        device.interconnect, device.interconnect_gbps = known.interconnect, known.interconnect_gbps
    if bandwidth:
        device.bandwidth_gbps, device.bandwidth_source = bandwidth, "given"
    elif measured is not None:
        device.bandwidth_gbps, device.bandwidth_source = measured.copy_gbps, "measured"
    elif listed is not None and listed.theoretical_gbps:
        device.bandwidth_gbps, device.bandwidth_source = listed.theoretical_gbps, "spec"
    elif known:
        device.bandwidth_gbps, device.bandwidth_source = known.bandwidth_gbps, "datasheet"
    return device


def validate(params: dict[str, Any]) -> None:
    """What can be refused before any work starts: usage errors, one line each."""
    gpu_name, device_spec = params["gpu_name"], params["device_spec"]
    if gpu_name and device_spec:
        raise click.UsageError("--gpu plans for a device from the table, --device for one of this host: give one")
    if gpu_name:
        try:
            hardware.lookup(gpu_name)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    elif params["gpus"] > 1 and (device_spec or "cpu") == "cpu":
        raise click.UsageError("--gpus is tensor parallelism across GPUs: give --gpu NAME or --device cuda:N")
    if device_spec and device_spec != "cpu" and not (device_spec.startswith("cuda:") and device_spec[5:].isdecimal()):
        raise click.BadParameter(_("{device_spec}: use cpu or cuda:N", device_spec=repr(device_spec)), param_hint="--device")


def _hardware(params: dict[str, Any]) -> Hardware:
    gpu_name, device_spec = params["gpu_name"], params["device_spec"]
    if gpu_name:
        device = hardware.lookup(gpu_name)
        if params["memory_bytes"]:
            device.memory_bytes = params["memory_bytes"]
        if params["bandwidth"]:
            device.bandwidth_gbps, device.bandwidth_source = params["bandwidth"], "given"
        return device
    if device_spec and device_spec != "cpu":
        return _local_gpu(device_spec, params["bandwidth"], params["memory_bytes"])
    return _cpu(params["threads"], params["bandwidth"], params["memory_bytes"], params["measure"], _state_dir(params["state_dir"]))


@dataclass(frozen=True)
class PlanDocument:
    """The plan as the application layer writes it (app.output.emit): text for a terminal, JSON."""

    rendered: str
    data: dict[str, Any]
    exit_code: int  # 1: it does not fit, its size is unknown, or it cannot reach --target-tps

    def text(self) -> str:
        return self.rendered

    def to_json(self) -> dict[str, Any]:
        return self.data


def run(**params: Any) -> None:
    from decode_doctor.app.guard import guarded

    validate(params)
    guarded(params.get("debug", False), lambda: _run(params))


def _run(params: dict[str, Any]) -> int:
    from decode_doctor.app.deadline import within
    from decode_doctor.app.output import OutputRequest, emit

    try:
        document = within(params.get("timeout") or DEADLINE_S, "estimate", plan_document, params)
    except ModelFormatError as exc:
        click.echo(_("decode-doctor estimate: {exc}", exc=exc), err=True)
        return 2
    except EstimateError as exc:
        raise click.UsageError(str(exc)) from None
    emit(document, OutputRequest(params["fmt"]))
    return document.exit_code


def plan_document(params: dict[str, Any]) -> PlanDocument:
    """Reads the model, finds the device and plans; raises ModelFormatError for a model it cannot size."""
    model = read_model(params["model_path"])
    size = sizing(model)
    if not size.cache:
        unknown = next((note for note in size.notes if note.startswith("the cache is unknown")), None)
        missing = ", ".join(model.missing_hyperparameters()) or _("layers, KV heads and head dim")
        why = localized(unknown) if unknown else _("cannot size the KV cache: no {missing} in its config", missing=missing)
        raise ModelFormatError(_("{model}: {why}", model=model.name, why=why), model.path)
    per_node = params.get("gpus_per_node") or GPUS_PER_NODE
    _check_parallel(size, params["gpus"], per_node, bool(params["gpu_name"] or (params["device_spec"] or "cpu") != "cpu"))
    device = _hardware(params)
    context = params["context"] or min(4096, model.max_context or 4096)
    kv_dtype = params["kv_dtype"]
    storage = storage_for(size, device, kv_dtype)
    plan = make_plan(size, device, context, params["concurrency"], kv_dtype, params["gpus"], per_node, storage)
    target = params["target_tps"]
    below = bool(target and plan.step.tps_per_sequence and plan.step.tps_per_sequence < target)
    model_path = str(params["model_path"])
    lines = serve.commands(plan, model_path, params["threads"])
    nearest = _nearest(plan, model_path, params["threads"]) if _cannot_start(plan, lines) else None
    predicted = _prediction(params, model, size, plan) if device.kind == "cpu" else None
    data = {
        "model": model.to_dict(),
        "sizing": _sizing_dict(size, kv_dtype, storage),
        "device": dict(device.__dict__),
        "plan": plan.to_dict(),
        "commands": [_command_dict(c) for c in lines],
        "nearest": None
        if nearest is None
        else {"gpus": nearest[0].gpus, "plan": nearest[0].to_dict(), "commands": [_command_dict(c) for c in nearest[1]]},
        "target_tps": target,
        "below_target": below,
    }
    if predicted is not None:
        data["prediction"] = predicted.to_dict()
    exit_code = 1 if plan.fit in ("does not fit", "unknown") or below else 0
    return PlanDocument(_text(model, size, plan, lines, target, below, predicted, nearest), data, exit_code)


def storage_for(size: Sizing, device: Hardware, kv_dtype: str) -> Storage:
    """How the engine a plan prints first stores the caches: vLLM on GPUs (safetensors), llama.cpp otherwise."""
    if device.is_gpu and size.format != "gguf":
        return vllm_storage(kv_dtype, size.family, size.config_ssm_dtype)
    return llama_storage(kv_dtype)


def _command_dict(command: serve.Command) -> dict[str, Any]:
    return {
        "engine": command.engine,
        "version": command.version,
        "argv": list(command.argv),
        "env": dict(command.env),
        "notes": list(command.notes),
        "node": command.node,
        "nodes": command.nodes,
    }


def _cannot_start(plan: DeploymentPlan, lines: list[serve.Command]) -> bool:
    """Sized, and not one sequence fits: no engine line was printed for it."""
    return plan.fit == "does not fit" and not lines and plan.sizing.weights_bytes is not None


def _nearest(plan: DeploymentPlan, model: str, threads: int | None) -> tuple[DeploymentPlan, list[serve.Command]] | None:
    """The nearest plan that starts, with its lines: more GPUs of the same kind (a node's worth first,
    then whole nodes), at the same context, concurrency and cache type."""
    if not plan.hardware.is_gpu:
        return None
    per_node = plan.gpus_per_node
    valid = valid_tensor_sizes(plan.sizing, per_node)
    counts = [n for n in valid if n > plan.gpus] + ([per_node * nodes for nodes in (2, 4)] if per_node in valid else [])
    for gpus in counts:
        if gpus <= plan.gpus:
            continue
        trial = make_plan(plan.sizing, plan.hardware, plan.context, plan.concurrency, plan.kv_dtype, gpus, per_node, plan.storage)
        lines = serve.commands(trial, model, threads)
        if lines:
            return trial, lines
    return None


@dataclass(frozen=True)
class Predicted:
    """llama.cpp's time per output token on this CPU at depth 0 and at the planned context, from this
    host's calibration (calibration.py), or why there is none."""

    calibration: Calibration | None
    at_start: Prediction | None
    at_context: Prediction | None
    why_not: str = ""
    ceilings_s: tuple[float, float] = (0.0, 0.0)  # the ceiling's step time at the start and at the context
    weight_bytes: float = 0.0  # read per token by the model predicted

    def rows(self) -> list[tuple[str, str]]:
        if self.calibration is None or self.at_start is None or self.at_context is None:
            return [("predicted", _("none: {why}", why=localized(self.why_not)))]
        start, end, cal = self.at_start, self.at_context, self.calibration

        def at(p: Prediction) -> str:
            bound = _(", at the ceiling") if p.bounded else ""
            return _("{ms:.2f} ms ±{spread:.0%} ({tps:.1f} tok/s{bound})", ms=p.tpot_s * 1e3, spread=p.spread, tps=p.tps, bound=bound)

        beside = ""
        if all(self.ceilings_s):
            beside = _("; ceiling {start:.1f} and {end:.1f} tok/s", start=1 / self.ceilings_s[0], end=1 / self.ceilings_s[1])
        predicted = _(
            "time per output token with llama.cpp {start} at the start of a sequence, {end} at {depth:,} tokens, "
            "the interval from {interval}{beside}",
            start=at(start), end=at(end), depth=end.depth, interval=localized(cal.interval_text()), beside=beside,
        )  # fmt: skip
        rows = [
            ("predicted", predicted),
            ("calibration", _("{calibration}; rerun with --calibrate", calibration=localized(cal.describe()))),
        ]
        if cal.crash:
            rows.append(
                (
                    "note",
                    _(
                        "{crash}: calibrated with the prompt fed one token at a time; a server on this host crashes on its first "
                        "prompt until it takes a workaround (decode-doctor check --select engine-failures names the verified "
                        "ones), and a workaround that changes the weights' kernel (--no-repack) changes this speed too",
                        crash=localized(cal.crash),
                    ),
                )
            )
        if self.weight_bytes and cal.points and self.weight_bytes > calibration.XL_FROM * cal.largest_bytes:
            rows.append(
                (
                    "note",
                    _(
                        "extrapolated: this model reads {model_gb:.2f} GB per token, the calibration's largest model {largest_gb:.2f} GB "
                        "(--calibrate measures one near this model's size)",
                        model_gb=self.weight_bytes / 1e9,
                        largest_gb=cal.largest_bytes / 1e9,
                    ),
                )
            )
        return rows

    def to_dict(self) -> dict[str, Any]:
        def tpot(p: Prediction | None) -> dict[str, Any] | None:
            return None if p is None else {"depth": p.depth, "tpot_s": p.tpot_s, "low_s": p.low_s, "high_s": p.high_s, "tps": p.tps}

        return {
            "engine": calibration.ENGINE,
            "calibrated": self.calibration is not None,
            "why_not": self.why_not or None,
            "calibration": asdict(self.calibration) if self.calibration else None,
            "at_start": tpot(self.at_start),
            "at_context": tpot(self.at_context),
            "ceiling_s": list(self.ceilings_s) if all(self.ceilings_s) else None,
        }


def _prediction(params: dict[str, Any], model: ModelInfo, size: Sizing, plan: DeploymentPlan) -> Predicted:
    from decode_doctor.app.output import say
    from decode_doctor.engine.workers import usable_cpus

    weight_type = (model.dominant_dtype or "").upper()
    threads = params["threads"] or usable_cpus()
    state_dir = _state_dir(params["state_dir"])
    found, why = calibration.lookup(state_dir, weight_type, threads, in_estimate=True)
    if params.get("calibrate") and calibration.engine_version() and weight_type in calibration.WEIGHT_TYPES:
        try:
            found = calibration.calibrate(threads, weight_type, state_dir, say, target_bytes=size.read_bytes(1))
        except (calibration.CalibrationError, OSError) as exc:
            return Predicted(None, None, None, said("the calibration failed: {error}", error=reason(exc)))
    if found is None:
        return Predicted(None, None, None, why)
    bandwidth = plan.hardware.bandwidth_gbps
    start = calibration.for_model(size, weight_type, threads, plan.kv_dtype, 0, bandwidth, found)
    end = calibration.for_model(size, weight_type, threads, plan.kv_dtype, plan.context, bandwidth, found)
    return Predicted(
        found, start.prediction, end.prediction, ceilings_s=(start.ceiling_s, end.ceiling_s), weight_bytes=size.read_bytes(1) or 0.0
    )


def _check_parallel(size: Sizing, gpus: int, per_node: int, on_gpus: bool) -> None:
    """vLLM's own rules for the GPU count, refused before any work with the rule that fails: tensor
    parallel must divide the attention heads (ModelConfig.verify_with_parallel_config, at start-up),
    the KV heads must split across the ranks or replicate onto them, and the recurrent layers' heads
    divide too (QKVParallelLinear and the mixers, at model load); more GPUs than a node holds must fill
    whole nodes (one pipeline stage each)."""
    if gpus <= 1 or not on_gpus or size.format == "gguf":
        return
    tensor = min(gpus, per_node)
    if gpus > per_node and gpus % per_node:
        raise EstimateError(
            _(
                "--gpus {gpus}: more than one node of {per_node} must fill whole nodes; give a multiple of {per_node}",
                gpus=gpus,
                per_node=per_node,
            )
        )
    valid = valid_tensor_sizes(size, per_node)
    if tensor in valid:
        return
    rules = tensor_rules(size, tensor)
    raise EstimateError(
        _(
            "--gpus {gpus}: vLLM cannot split this model over {tensor} tensor-parallel GPUs: {rules}; "
            "valid sizes up to {per_node}: {valid}",
            gpus=gpus,
            tensor=tensor,
            rules=_("; ").join(rules),
            per_node=per_node,
            valid=", ".join(map(str, valid)),
        )
    )


def tensor_rules(size: Sizing, tensor: int) -> list[str]:
    """Each of vLLM's rules a tensor-parallel size breaks for this model, in the engine's own words."""
    rules = []
    if size.heads and size.heads % tensor:
        rules.append(
            _(
                'it refuses to start ("Total number of attention heads ({heads}) must be divisible by tensor parallel size ({tensor}).")',
                heads=size.heads,
                tensor=tensor,
            )
        )
    kv = size.kv_heads
    if kv and not size.mla and (kv % tensor if kv > tensor else tensor % kv):
        larger, smaller = (kv, tensor) if kv > tensor else (tensor, kv)
        rules.append(
            _(
                "its {kv} KV heads neither split evenly across {tensor} ranks nor replicate onto them: QKVParallelLinear stops the "
                'model load ("{larger} is not divisible by {smaller}")',
                kv=kv,
                tensor=tensor,
                larger=larger,
                smaller=smaller,
            )
        )
    for what, units in size.tp_units.items():
        if units % tensor:
            rules.append(
                _(
                    'its {units} {what} split across the ranks at model load ("{units} is not divisible by {tensor}")',
                    units=units,
                    what=what,
                    tensor=tensor,
                )
            )
    return rules


def _sizing_dict(size: Sizing, kv_dtype: str, storage: Storage) -> dict[str, Any]:
    """The sizing as a script reads it: the headline kv_bytes_per_token is what each token adds once every
    window is full; the window-bounded layers' bytes and the recurrent state are fixed per sequence beside it."""
    data = {k: v for k, v in size.__dict__.items() if not k.startswith("_") and k != "cache"}
    data["cache_layers"] = [layer.__dict__ for layer in size.cache]
    data["read_bytes_one_sequence"] = size.read_bytes(1)
    data["kv_dtype"] = kv_dtype
    data["storage"] = dict(storage.__dict__)
    data["kv_bytes_per_token"] = size.kv_growth_bytes_per_token(storage)
    data["kv_bytes_per_token_before_windows"] = size.kv_bytes_per_token(storage)
    data["kv_bytes_per_token_by_kind"] = size.kv_bytes_by_kind(storage)
    data["kv_window_bytes_per_sequence"] = size.kv_window_bytes(storage)
    data["state_bytes_per_sequence"] = size.state_bytes(storage)
    return data


# the plan's row labels (the JSON and the code use the English ones)
ROW_LABELS = {
    label: label
    for label in (
        N_("model"), N_("architecture"), N_("weights"), N_("device"), N_("KV cache"), N_("memory per device"), N_("rule"),
        N_("limits"), N_("decode ceiling"), N_("expected"), N_("tensor parallel"), N_("knob"), N_("note"), N_("predicted"),
        N_("calibration"), N_("target"),
    )
}  # fmt: skip
# words the plan takes from its values: a fit, what binds, where a bandwidth came from, a weight class
VALUE_WORDS = (
    N_("fits"), N_("tight"), N_("does not fit"), N_("unknown"), N_("bandwidth"), N_("compute"), N_("measured"), N_("given"),
    N_("spec"), N_("datasheet"), N_("cached"), N_("measured on a busy host"), N_("16-bit weights"), N_("8-bit weights"),
    N_("4-bit weights"), N_("these weights"), N_("none"),
    # the cache's layer kinds (architecture.CacheLayer) and the model's formats (contract.ModelInfo)
    N_("full"), N_("sliding"), N_("chunked"), N_("mla"), N_("config-only"),
)  # fmt: skip


def _rows(model: ModelInfo, size: Sizing, plan: DeploymentPlan) -> list[tuple[str, str]]:
    device = plan.hardware
    kinds = sorted({layer.kind for layer in size.cache})
    windows = sorted({layer.window for layer in size.cache if layer.window})
    counted = [_("{count} {kind}", count=sum(layer.kind == kind for layer in size.cache), kind=_(kind)) for kind in kinds]
    cache = ", ".join(counted) + (_(" (window {windows} tokens)", windows=", ".join(f"{w:,}" for w in windows)) if windows else "")
    params = _("{count:,} parameters", count=size.params_total) if size.params_total else _("parameters unknown")
    if size.params_active and size.params_total and size.params_active < size.params_total:
        params += _(", {active:.2f}B active per token", active=size.params_active / 1e9)
    bandwidth = f"{device.bandwidth_gbps:g} GB/s {_(device.bandwidth_source)}" if device.bandwidth_gbps else _("bandwidth unknown")
    count = f"{plan.gpus} × " if plan.gpus > 1 else ""
    if plan.layout.pipeline > 1:
        count = _("{nodes} nodes × {tensor} × ", nodes=plan.layout.pipeline, tensor=plan.layout.tensor)
    weights = localized(size.weights_source)
    if size.weights_bytes is not None:
        weights = _("{size} from {source}", size=human_bytes(size.weights_bytes), source=localized(size.weights_source))
    kv = _(
        "{per_token} per token before windows ({dtype}{kinds}){state}; {per_device} per device at {context:,} tokens × {concurrency}",
        per_token=human_binary(size.kv_bytes_per_token(plan.storage)), dtype=_cache_name(plan), kinds=_by_kind(size, plan.storage),
        state=_state(size, plan.storage), per_device=human_bytes(plan.kv_per_device), context=plan.context, concurrency=plan.concurrency,
    )  # fmt: skip
    memory = _(
        "{need} needed of {usable} usable: {fit}",
        need=human_bytes(plan.need_per_device), usable=human_bytes(plan.usable_per_device), fit=_(plan.fit),
    )  # fmt: skip
    architecture = _(
        "{architecture}: {layers} layers; KV cache in {cache}; {params}",
        architecture=model.architecture or "?", layers=model.layers, cache=cache or _("none"), params=params,
    )  # fmt: skip
    rows = [
        (
            "model",
            _(
                "{path} ({format})",
                path=model.path,
                format=", ".join([_(model.format), *([model.quantization] if model.quantization else [])]),
            ),
        ),
        ("architecture", architecture),
        ("weights", weights),
        (
            "device",
            _(
                "{count}{device}: {memory}, {bandwidth}",
                count=count,
                device=localized(device.label),
                memory=human_bytes(device.memory_bytes),
                bandwidth=bandwidth,
            ),
        ),
        ("KV cache", kv),
        ("memory per device", memory),
        ("rule", _(HEADROOM_RULE_TEMPLATE, utilization=UTILIZATION, tight=TIGHT_SHARE)),
    ]
    if plan.max_concurrency is not None:
        limits = _(
            "at {context:,} tokens, at most {sequences}; at {concurrency} at once, at most {max_context:,} tokens of context",
            context=plan.context, sequences=sequences(plan.max_concurrency), concurrency=plan.concurrency,
            max_context=plan.max_context or 0,
        )  # fmt: skip
        rows.append(("limits", limits))
    step = plan.step
    if step.step_s:
        roofs = []
        if step.memory_s:
            roofs.append(_("bandwidth {ms:.2f} ms ({read} read)", ms=step.memory_s * 1e3, read=human_bytes(step.read_bytes)))
        if step.compute_s:
            roofs.append(_("compute {ms:.2f} ms ({tflop:.2f} TFLOP)", ms=step.compute_s * 1e3, tflop=step.flops / 1e12))
        if step.allreduce_s:
            roofs.append(_("all-reduce {ms:.2f} ms", ms=step.allreduce_s * 1e3))
        ceiling = _(
            "{per_sequence:.1f} tok/s per sequence, {total:.1f} tok/s in all; {binding} binds ({roofs})",
            per_sequence=step.tps_per_sequence, total=step.tps_total, binding=_(step.binding), roofs=_("; ").join(roofs),
        )  # fmt: skip
        rows.append(("decode ceiling", ceiling))
        if device.kind == "cpu" and step.tps_per_sequence:
            low, high, what = expected_cpu_range(model.dominant_dtype)
            expected = _(
                "{low_tps:.1f}–{high_tps:.1f} tok/s per sequence with llama.cpp: {low:.2f}–{high:.2f} of the ceiling for {what} on CPUs "
                "of this kind; the kernel path (AMX, AVX-512 VNNI, AVX2), the thread count and attention at depth move a run within it",
                low_tps=low * step.tps_per_sequence, high_tps=high * step.tps_per_sequence, low=low, high=high, what=_(what),
            )  # fmt: skip
            rows.append(("expected", expected))
    if plan.allreduce:
        rows.append(("tensor parallel", localized(plan.allreduce)))
    rows += [("knob", localized(knob)) for knob in plan.knobs]
    rows += [("note", localized(note)) for note in [*size.notes, *device.notes, *plan.notes]]
    return rows


def _cache_name(plan: DeploymentPlan) -> str:
    """The --kv-dtype, and the engine's own type for it where it differs ("int8 as int8_per_token_head")."""
    storage = plan.storage
    if storage.engine and storage.kv_cache not in ("auto", plan.kv_dtype):
        return _("{kv_dtype} as {engine}'s {cache}", kv_dtype=plan.kv_dtype, engine=storage.engine, cache=storage.kv_cache)
    return plan.kv_dtype


def _by_kind(size: Sizing, kv_dtype: str | Storage) -> str:
    kinds = size.kv_bytes_by_kind(kv_dtype)
    if len(kinds) < 2:
        return ""
    return ": " + ", ".join(f"{kind} {human_binary(value)}" for kind, value in sorted(kinds.items()))


def _state(size: Sizing, storage: Storage) -> str:
    if not size.state_elements:
        return ""
    return _(
        ", and a fixed {size} of recurrent state per sequence (SSM state in {dtype})",
        size=human_binary(size.state_bytes(storage)),
        dtype=storage.ssm_dtype,
    )


def _text(
    model: ModelInfo,
    size: Sizing,
    plan: DeploymentPlan,
    lines: list[serve.Command],
    target: float | None,
    below: bool,
    predicted: Predicted | None = None,
    nearest: tuple[DeploymentPlan, list[serve.Command]] | None = None,
) -> str:
    out: list[str] = []
    rows = _rows(model, size, plan)
    if predicted is not None:
        at = next((i for i, (label, _) in enumerate(rows) if label == "expected"), len(rows) - 1) + 1
        rows[at:at] = predicted.rows()
    if target:
        reach = _("NOT reachable") if below else _("reachable")
        rows.append(("target", _("{target:g} tok/s per sequence: {reach}", target=target, reach=reach)))
    labelled = [(_(ROW_LABELS.get(label, label)), value) for label, value in rows]
    columns = max(width.width(label) for label, _value in labelled)
    for label, value in labelled:
        out.append(f"{width.ljust(label, columns)}  {value}")
    concurrencies = sorted({row.concurrency for row in plan.sweep})
    out.append(
        "\n" + _("decode tok/s in all, by context (rows) and sequences at once (columns); B: bandwidth binds, C: compute, -: does not fit")
    )
    out.append(width.rjust(_("context"), 9) + "  " + "  ".join(f"{n:>10,}" for n in concurrencies))
    for length in sorted({row.context for row in plan.sweep}):
        cells = []
        for n in concurrencies:
            row = next(r for r in plan.sweep if r.context == length and r.concurrency == n)
            if row.fit == "does not fit":
                cells.append(f"{'-':>10}")
            elif row.tps_total:
                cells.append(f"{row.tps_total:>9.1f}{row.binding[0].upper()}")
            else:
                cells.append(f"{'?':>10}")
        out.append(f"{length:>9,}  " + "  ".join(cells))
    if not lines and _cannot_start(plan, lines):
        out.append("\n" + _("no command lines: not one sequence fits, so no engine would start"))
        if nearest is not None:
            out.append(
                _(
                    "the nearest plan that starts: {gpus} GPUs, at {context:,} tokens × {concurrency}",
                    gpus=nearest[0].gpus,
                    context=plan.context,
                    concurrency=plan.concurrency,
                )
            )
            lines = nearest[1]
        elif plan.hardware.is_gpu:
            out.append(_("no plan of up to four nodes of these GPUs starts: see the knobs"))
    elif not lines:
        why = _("the weights are unknown") if size.weights_bytes is None else _("the device's memory is unknown")
        out.append("\n" + _("no command lines: {why}, so the limits they would set are too", why=why))
    for command in lines:
        heading = _("{engine} ({version}):", engine=command.engine, version=localized(command.version))
        if command.nodes > 1:
            heading = _(
                "{engine} on node {node} of {nodes} ({version}):",
                engine=command.engine,
                node=command.node,
                nodes=command.nodes,
                version=localized(command.version),
            )
        out.append("\n" + heading + f"\n  {command.line}")
        out.extend("  " + _("note: {note}", note=localized(note)) for note in command.notes)
    return "\n".join(out) + "\n"
