"""`decode-doctor estimate`, the work behind the command (commands.py keeps --help light)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .budget import SWEEP_CONTEXTS, Device, compute_budget, human_binary, human_bytes
from .modelfiles import ModelFormatError, ModelInfo, read_model


def _measured(select: tuple[str, ...], what: str) -> dict[str, Any]:
    """Runs the named checks through the application layer; returns their facts by check name."""
    from decode_doctor.app import service
    from decode_doctor.app.requests import RunRequest

    click.echo(f"measuring {what}…", err=True)
    outcome = service.run(RunRequest(select=select))
    return outcome.report.facts()


def _device(spec: str, bandwidth: float | None, memory_gb: float | None) -> Device:
    if spec == "cpu":
        import psutil

        total = psutil.virtual_memory().total
        if bandwidth:
            bw, source = bandwidth, "given"
        else:
            facts = _measured(("bandwidth",), "memory bandwidth (about a second)").get("bandwidth")
            bw, source = (facts.cpu.measured.read_gbps, "measured") if facts is not None else (None, "unknown")
        return Device("cpu", "CPU", int(memory_gb * 1e9) if memory_gb else total, bw, source)
    if not spec.startswith("cuda:") or not spec[5:].isdigit():
        raise click.BadParameter(f"{spec!r}: use cpu or cuda:N", param_hint="--device")
    index = int(spec[5:])
    memory = int(memory_gb * 1e9) if memory_gb else None
    if bandwidth and memory:
        return Device(spec, spec, memory, bandwidth, "given")
    facts = _measured(("gpu", "bandwidth"), f"{spec}")
    measured = facts["bandwidth"].gpu(index) if "bandwidth" in facts else None
    listed = next((d for d in facts["gpu"].devices if d.index == index), None) if "gpu" in facts else None
    name = measured.name if measured else listed.name if listed else spec
    memory = memory or (measured.memory_bytes if measured else None) or (listed.memory_mib << 20 if listed and listed.memory_mib else None)
    if bandwidth:
        return Device(spec, name, memory, bandwidth, "given")
    if measured is not None:
        return Device(spec, name, memory, measured.copy_gbps, "measured")
    if listed is not None and listed.theoretical_gbps:
        return Device(spec, name, memory, listed.theoretical_gbps, "spec")
    click.echo(f"no way to measure {spec} here (no torch or cupy with CUDA); pass --bandwidth GB/s", err=True)
    return Device(spec, name, memory, None, "unknown")


def _model_lines(model: ModelInfo) -> list[tuple[str, str]]:
    dtypes = ", ".join(f"{d} {human_bytes(b)}" for d, b in sorted(model.bytes_by_dtype.items(), key=lambda i: -i[1]))
    rows = [
        ("model", f"{model.path} ({model.format}{', ' + model.quantization if model.quantization else ''})"),
        ("architecture", str(model.architecture or "?")),
        (
            "layers / heads / KV heads / head dim",
            f"{model.layers} / {model.attention_heads} / {model.kv_heads} / {model.head_dim}"
            + (f" (MLA latent {model.kv_latent_dim})" if model.kv_latent_dim else ""),
        ),
        ("weights", f"{human_bytes(model.weight_bytes)} in {model.tensor_count} tensors ({dtypes or 'no tensors'})"),
        (
            "read per decode step",
            f"{human_bytes(model.decode_read_bytes)} (embedding table "
            + ("tied to the head, read" if model.tied_embeddings else "gathered, not read")
            + (f"; {model.experts_per_token} of {model.experts} experts" if model.experts else "")
            + ")",
        ),
    ]
    rows += [("note", note) for note in model.notes]
    return rows


def run(
    model_path: Path,
    context: int | None,
    concurrency: int,
    kv_dtype: str,
    device_spec: str,
    bandwidth: float | None,
    memory_gb: float | None,
    target_tps: float | None,
    fmt: str,
) -> None:
    try:
        model = read_model(model_path)
    except ModelFormatError as exc:
        click.echo(f"decode-doctor estimate: {exc}", err=True)
        sys.exit(2)
    missing = model.missing_hyperparameters()
    if missing:
        click.echo(f"decode-doctor estimate: {model.name}: cannot size the KV cache: no {', '.join(missing)} in its config", err=True)
        sys.exit(2)
    context = context or min(4096, model.max_context or 4096)
    device = _device(device_spec, bandwidth, memory_gb)
    budget = compute_budget(model, device, context, concurrency, kv_dtype, SWEEP_CONTEXTS)
    below_target = bool(target_tps and budget.tps_per_sequence and budget.tps_per_sequence < target_tps)
    if fmt == "json":
        data: dict[str, Any] = {
            "model": model.to_dict(),
            "device": device.__dict__,
            "budget": budget.to_dict(),
            "target_tps": target_tps,
            "below_target": below_target,
        }
        click.echo(json.dumps(data, indent=2))
    else:
        _print_text(model, device, budget, target_tps, below_target)
    sys.exit(1 if budget.fit == "does not fit" or below_target else 0)


def _print_text(model: ModelInfo, device: Device, budget: Any, target_tps: float | None, below_target: bool) -> None:
    bandwidth = f"{device.bandwidth_gbps:.1f} GB/s {device.bandwidth_source}" if device.bandwidth_gbps else "bandwidth unknown"
    kv_total = f"{human_bytes(budget.kv_bytes_total)} at {budget.context:,} tokens × {budget.concurrency}"
    overhead = human_bytes(budget.overhead_bytes)
    rows = [
        *_model_lines(model),
        ("device", f"{device.name} ({device.label}): {human_bytes(device.memory_bytes)}, {bandwidth}"),
        ("KV cache", f"{human_binary(budget.kv_bytes_per_token)} per token ({budget.kv_dtype}); {kv_total}"),
        (
            "memory needed",
            f"{human_bytes(budget.need_bytes)} (weights + KV + {overhead} runtime) of {human_bytes(budget.capacity_bytes)}: {budget.fit}",
        ),
    ]
    if budget.ms_per_token:
        rows.append(
            (
                "decode ceiling",
                f"{budget.tps_per_sequence:.1f} tok/s per sequence, {budget.tps_aggregate:.1f} tok/s in aggregate "
                f"({budget.ms_per_token:.1f} ms per step, {human_bytes(budget.read_bytes_per_step)} read)",
            )
        )
    if target_tps:
        rows.append(("target", f"{target_tps:g} tok/s per sequence: {'NOT reachable' if below_target else 'reachable'}"))
    rows += [("knob", knob) for knob in budget.knobs]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        click.echo(f"{label:<{width}}  {value}")
    click.echo(f"\ncontext sweep (concurrency {budget.concurrency}):")
    click.echo(f"{'context':>9}  {'memory':>9}  {'fit':<13} {'tok/s/seq':>9}  {'tok/s total':>11}")
    for row in budget.sweep:
        per_seq = f"{row['tps_per_sequence']:.1f}" if row["tps_per_sequence"] else "?"
        total = f"{row['tps_aggregate']:.1f}" if row["tps_aggregate"] else "?"
        click.echo(f"{row['context']:>9,}  {human_bytes(row['need_bytes']):>9}  {row['fit']:<13} {per_seq:>9}  {total:>11}")
