"""`decode-doctor estimate`, the work behind the command (commands.py keeps --help light).

The plan is made in a child with a deadline (app.deadline): a model file whose header claims
millions of layers, or a probe that hangs, ends in a one-line error, not a hung command. The plan is
a document the application layer writes as text or JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from decode_doctor.i18n import _, localized, reason
from decode_doctor.models import hardware
from decode_doctor.models.hardware import Hardware
from decode_doctor.models.info import ModelFormat
from decode_doctor.models.modelfiles import ModelFormatError, read_model
from decode_doctor.models.plan import (
    GPUS_PER_NODE,
    DeploymentPlan,
    Fit,
    make_plan,
    valid_tensor_sizes,
)
from decode_doctor.models.sizing import Sizing, sizing
from decode_doctor.models.storage import Storage, llama_storage, vllm_storage

from . import serve
from .commands import EstimateOptions
from .devices import hardware_for
from .predicted import prediction_for
from .render import cannot_start, plan_text, sizing_dict
from .rules import EstimateError, check_parallel

DEADLINE_S = 300.0  # reading a model's headers takes milliseconds; measuring a GPU host, under a minute


def validate(options: EstimateOptions) -> None:
    """What can be refused before any work starts: usage errors, one line each."""
    gpu_name, device_spec = options.gpu_name, options.device_spec
    if gpu_name and device_spec:
        raise click.UsageError(_("--gpu plans for a device from the table, --device for one of this host: give one"))
    if gpu_name:
        try:
            hardware.lookup(gpu_name)
        except ValueError as exc:
            raise click.UsageError(localized(reason(exc))) from None
    elif options.gpus > 1 and (device_spec or "cpu") == "cpu":
        raise click.UsageError(_("--gpus is tensor parallelism across GPUs: give --gpu NAME or --device cuda:N"))
    if device_spec and device_spec != "cpu" and not (device_spec.startswith("cuda:") and device_spec[5:].isdecimal()):
        raise click.BadParameter(_("{device_spec}: use cpu or cuda:N", device_spec=repr(device_spec)), param_hint="--device")


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


def run(options: EstimateOptions) -> None:
    from decode_doctor.app.guard import guarded

    validate(options)
    guarded(options.debug, lambda: _run(options))


def _run(options: EstimateOptions) -> int:
    from decode_doctor.app.deadline import within
    from decode_doctor.app.output import OutputRequest, emit, say

    try:
        document = within(options.timeout or DEADLINE_S, "estimate", plan_document, options)
    except ModelFormatError as exc:
        say(_("decode-doctor estimate: {exc}", exc=localized(reason(exc))))  # say(): a name's control and bidirectional characters escaped
        return 2
    except EstimateError as exc:
        raise click.UsageError(localized(reason(exc))) from None
    emit(document, OutputRequest(options.fmt))
    return document.exit_code


def plan_document(options: EstimateOptions) -> PlanDocument:
    """Reads the model, finds the device and plans; raises ModelFormatError for a model it cannot size."""
    model = read_model(options.model_path)
    size = sizing(model)
    if not size.cache:
        unknown = next((note for note in size.notes if note.startswith("the cache is unknown")), None)
        missing = ", ".join(model.missing_hyperparameters()) or _("layers, KV heads and head dim")
        why = localized(unknown) if unknown else _("cannot size the KV cache: no {missing} in its config", missing=missing)
        raise ModelFormatError(_("{model}: {why}", model=model.name, why=why), model.path)
    per_node = options.gpus_per_node or GPUS_PER_NODE
    check_parallel(size, options.gpus, per_node, bool(options.gpu_name or (options.device_spec or "cpu") != "cpu"))
    device = hardware_for(options)
    context = options.context or min(4096, model.max_context or 4096)
    kv_dtype = options.kv_dtype
    storage = storage_for(size, device, kv_dtype)
    plan = make_plan(size, device, context, options.concurrency, kv_dtype, options.gpus, per_node, storage)
    target = options.target_tps
    below = bool(target and plan.step.tps_per_sequence and plan.step.tps_per_sequence < target)
    model_path = str(options.model_path)
    lines = serve.commands(plan, model_path, options.threads)
    nearest = _nearest(plan, model_path, options.threads) if cannot_start(plan, lines) else None
    predicted = prediction_for(options, model, size, plan) if device.kind == "cpu" else None
    data = {
        "model": model.to_dict(),
        "sizing": sizing_dict(size, kv_dtype, storage),
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
    exit_code = 1 if plan.fit in (Fit.DOES_NOT_FIT, Fit.UNKNOWN) or below else 0
    return PlanDocument(plan_text(model, size, plan, lines, target, below, predicted, nearest), data, exit_code)


def storage_for(size: Sizing, device: Hardware, kv_dtype: str) -> Storage:
    """How the engine a plan prints first stores the caches: vLLM on GPUs (safetensors), llama.cpp otherwise."""
    if device.is_gpu and size.format is not ModelFormat.GGUF:
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
        # what the line's own flags serve, which may be lower than the plan asked for (its notes say why)
        "context": command.context,
        "concurrency": command.concurrency,
    }


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
