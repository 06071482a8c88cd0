"""The plan as text: its rows (model, weights, device, KV cache, limits, ceiling, prediction, knobs) and
the engine command lines; and the sizing as JSON."""

from __future__ import annotations

from typing import Any

from decode_doctor.engine.units import human_binary, human_bytes, large_count
from decode_doctor.i18n import N_, _, localized, ngettext, pgettext, width
from decode_doctor.models.architecture import CacheKind
from decode_doctor.models.hardware import BandwidthSource
from decode_doctor.models.info import ModelInfo, sequences
from decode_doctor.models.plan import (
    HEADROOM_RULE_TEMPLATE,
    TIGHT_SHARE,
    UTILIZATION,
    Binding,
    DeploymentPlan,
    Fit,
    expected_cpu_range,
)
from decode_doctor.models.sizing import Sizing
from decode_doctor.models.storage import Storage

from . import serve
from .predicted import Predicted


def sizing_dict(size: Sizing, kv_dtype: str, storage: Storage) -> dict[str, Any]:
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


def plan_rows(model: ModelInfo, size: Sizing, plan: DeploymentPlan) -> list[tuple[str, str]]:
    device = plan.hardware
    windows = sorted({layer.window for layer in size.cache if layer.window})
    cache = pgettext("between the kinds of layers", ", ").join(cache_kinds(size))
    # one way of writing large counts in a line: digits in English, 亿 in Chinese (beside "134.2 亿个 active")
    params = _("{count} parameters", count=large_count(size.params_total, exact=True)) if size.params_total else _("parameters unknown")
    if size.params_active and size.params_total and size.params_active < size.params_total:
        params += _(", {active} active per token", active=large_count(size.params_active))
    bandwidth = (
        _("bandwidth unknown")
        if not device.bandwidth_gbps
        else f"{device.bandwidth_gbps:g} GB/s"  # the device's label already says "(datasheet)"
        if device.bandwidth_source is BandwidthSource.DATASHEET
        else _("{gbps:g} GB/s ({source})", gbps=device.bandwidth_gbps, source=device.bandwidth_source.label)
    )
    count = f"{plan.gpus} × " if plan.gpus > 1 else ""
    if plan.layout.pipeline > 1:
        count = _("{nodes} nodes × {tensor} × ", nodes=plan.layout.pipeline, tensor=plan.layout.tensor)
    weights = localized(size.weights_source)
    if size.weights_bytes is not None:
        weights = _("{size} from {source}", size=human_bytes(size.weights_bytes), source=localized(size.weights_source))
    kv_values = {
        "per_token": human_binary(size.kv_bytes_per_token(plan.storage)), "dtype": cache_name(plan), "kinds": by_kind(size, plan.storage),
        "state": state_text(size, plan.storage), "per_device": human_bytes(plan.kv_per_device), "context": plan.context,
        "concurrency": plan.concurrency,
    }  # fmt: skip
    kv = (
        _(
            "{per_token} per token before windows ({dtype}{kinds}){state}; {per_device} per device at {context:,} tokens × {concurrency}",
            **kv_values,
        )
        if windows
        else _("{per_token} per token ({dtype}{kinds}){state}; {per_device} per device at {context:,} tokens × {concurrency}", **kv_values)
    )
    memory = _(
        "{need} needed of {usable} usable: {fit}",
        need=human_bytes(plan.need_per_device), usable=human_bytes(plan.usable_per_device), fit=plan.fit.label,
    )  # fmt: skip
    architecture = _(
        "{architecture}: {layers} layers; KV cache in {cache}; {params}",
        architecture=model.architecture or _("an architecture not named"), layers=model.layers, cache=cache or _("none"), params=params,
    )  # fmt: skip
    rows = [
        (
            "model",
            _(
                "{path} ({format})",
                path=model.path,
                format=_(", ").join([model.format.label, *([model.quantization] if model.quantization else [])]),
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
    if plan.max_concurrency == 0 and not plan.max_context:  # "at most 0 sequences, at most 0 tokens" says it backwards
        rows.append(("limits", _("not one sequence fits at {context:,} tokens, nor at any shorter context", context=plan.context)))
    elif plan.max_concurrency is not None:
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
            tflop = f"{step.flops / 1e12:.2f}" if step.flops >= 0.005e12 else _("under 0.01")  # "0.00 TFLOP" reads as a missing value
            roofs.append(_("compute {ms:.2f} ms ({tflop} TFLOP)", ms=step.compute_s * 1e3, tflop=tflop))
        if step.allreduce_s:
            roofs.append(_("all-reduce {ms:.2f} ms", ms=step.allreduce_s * 1e3))
        ceiling = _(
            "{per_sequence:.1f} tok/s per sequence, {total:.1f} tok/s in all; {binding} binds ({roofs})",
            per_sequence=step.tps_per_sequence, total=step.tps_total, binding=step.binding.label, roofs=_("; ").join(roofs),
        )  # fmt: skip
        if plan.fit is Fit.DOES_NOT_FIT:  # the figure of a plan that cannot start is a what-if, said so
            ceiling = _("if it fitted at {concurrency} at once: {ceiling}", concurrency=plan.concurrency, ceiling=ceiling)
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


def cache_kinds(size: Sizing) -> list[str]:
    """Each kind of cached layer with its count, and its own windows beside it: Llama 4's 8,192-token
    chunk belongs to its 36 chunked layers, never to the 12 full ones that keep every token."""
    counted = []
    for kind in sorted({layer.kind for layer in size.cache}):
        layers = [layer for layer in size.cache if layer.kind == kind]
        windows = sorted({layer.window for layer in layers if layer.window})
        shown = _(", ").join(f"{w:,}" for w in windows)
        if windows and kind is CacheKind.CHUNKED:
            counted.append(_("{count} {kind} (chunks of {windows} tokens)", count=len(layers), kind=kind.label, windows=shown))
        elif windows:
            counted.append(_("{count} {kind} (window {windows} tokens)", count=len(layers), kind=kind.label, windows=shown))
        else:
            counted.append(_("{count} {kind}", count=len(layers), kind=kind.label))
    return counted


def cache_name(plan: DeploymentPlan) -> str:
    """The --kv-dtype, and the engine's own type for it where it differs ("int8 as int8_per_token_head")."""
    storage = plan.storage
    if storage.engine and storage.kv_cache not in ("auto", plan.kv_dtype):
        return _("{kv_dtype} as {engine}'s {cache}", kv_dtype=plan.kv_dtype, engine=storage.engine, cache=storage.kv_cache)
    return plan.kv_dtype


def by_kind(size: Sizing, kv_dtype: str | Storage) -> str:
    kinds = size.kv_bytes_by_kind(kv_dtype)
    if len(kinds) < 2:
        return ""
    sizes = [_("{kind} {size}", kind=CacheKind(kind).label, size=human_binary(value)) for kind, value in sorted(kinds.items())]
    return _(": {kinds}", kinds=_(", ").join(sizes))


def state_text(size: Sizing, storage: Storage) -> str:
    if not size.state_elements:
        return ""
    return _(
        ", and a fixed {size} of recurrent state per sequence (SSM state in {dtype})",
        size=human_binary(size.state_bytes(storage)),
        dtype=storage.ssm_dtype,
    )


def plan_text(
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
    rows = plan_rows(model, size, plan)
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
        "\n"
        + _(
            "decode tok/s in all, by context (rows) and sequences at once (columns); bandwidth binds unless marked *: compute binds; "
            "-: does not fit; ?: not known"
        )
    )
    out.append(width.rjust(_("context"), 9) + "  " + "  ".join(f"{n:>10,}" for n in concurrencies))
    for length in sorted({row.context for row in plan.sweep}):
        cells = []
        for n in concurrencies:
            row = next(r for r in plan.sweep if r.context == length and r.concurrency == n)
            if row.fit is Fit.DOES_NOT_FIT:
                cells.append(f"{'-':>10}")
            elif row.tps_total:
                # a bare suffix "B" read as billions beside "13.42B active": the rarer roof is the one marked
                cells.append(f"{row.tps_total:>9.1f}{'*' if row.binding is Binding.COMPUTE else ' '}")
            else:
                cells.append(f"{'?':>10}")
        out.append((f"{length:>9,}  " + "  ".join(cells)).rstrip())
    if not lines and cannot_start(plan, lines) and nearest is not None and nearest[1]:
        # the lines printed below are the nearest plan's: the text says so, with the figures its lines set
        out.append(
            "\n"
            + ngettext(
                "no command lines: not one sequence fits on {count} GPU, so no engine would start on it",
                "no command lines: not one sequence fits on {count} GPUs, so no engine would start on them",
                plan.gpus,
            )
        )
        out.append(nearest_text(nearest[0], nearest[1]))
        lines = nearest[1]
    elif not lines and cannot_start(plan, lines):
        out.append("\n" + _("no command lines: not one sequence fits, so no engine would start"))
        if plan.hardware.is_gpu:
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


def nearest_text(plan: DeploymentPlan, lines: list[serve.Command]) -> str:
    """The nearest plan that starts, with the context and sequences its command lines set (one source:
    the figures each line was built with), not the ones asked for that do not fit."""
    served: dict[tuple[int, int], list[str]] = {}
    for command in lines:
        engines = served.setdefault((command.context, command.concurrency), [])
        if command.engine not in engines:
            engines.append(command.engine)
    if len(served) == 1:
        [(context, concurrency)] = served
        return _(
            "the nearest plan that starts: {gpus} GPUs, at {context:,} tokens × {sequences}; its command lines follow",
            gpus=plan.gpus,
            context=context,
            sequences=sequences(concurrency),
        )
    each = [
        _("{engines} at {context:,} tokens × {sequences}", engines=_(", ").join(engines), context=context, sequences=sequences(concurrency))
        for (context, concurrency), engines in served.items()
    ]
    return _("the nearest plan that starts: {gpus} GPUs, {served}; its command lines follow", gpus=plan.gpus, served=_("; ").join(each))


def cannot_start(plan: DeploymentPlan, lines: list[serve.Command]) -> bool:
    """Sized, and not one sequence fits: no engine line was printed for it."""
    return plan.fit is Fit.DOES_NOT_FIT and not lines and plan.sizing.weights_bytes is not None
