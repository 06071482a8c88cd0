"""`decode-doctor estimate`: a serving plan for one model on one device (or N in tensor parallel),
this host's or one from the datasheet table.

This module is imported to list `decode-doctor --help`: only click, .dtypes and the engine's units at its top.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from decode_doctor.app.flags import SharedOptions, click_options, same_as
from decode_doctor.checks.bandwidth.contract import BandwidthOptions
from decode_doctor.checks.budget.contract import BudgetOptions
from decode_doctor.engine.options import Options, option
from decode_doctor.engine.units import parse_bytes

EXISTING = click.Path(exists=True, path_type=Path)
A_DIRECTORY = click.Path(file_okay=False, path_type=Path)


def _units(parse: Any, name: str) -> Any:
    def convert(value: Any) -> Any:
        return value if isinstance(value, (int, float)) else parse(value)

    convert.__name__ = name
    return convert


@dataclass(frozen=True)
class EstimateOptions(Options):
    """estimate's options, in --help's order; the decode budget's (--context, --concurrency, --kv-dtype,
    --bandwidth, --target-tps) and the bandwidth probe's --threads are those checks' own declarations."""

    model_path: Path = option(  # noqa: RUF009 (a field specifier, as dataclasses.field)
        "--model", "A model directory (config.json, with or without weights) or a .gguf file.", required=True, kind=EXISTING, default=Path()
    )
    context: int | None = same_as(BudgetOptions, "context")
    concurrency: int = same_as(BudgetOptions, "concurrency")
    kv_dtype: str = same_as(BudgetOptions, "kv_dtype")
    device_spec: str | None = option("--device", "cpu or cuda:N of this host [default: cpu, or --gpu's].")
    gpu_name: str | None = option("--gpu", "Plan for a GPU you do not own, from the datasheet table (H100-SXM, L4, Jetson AGX Orin 64GB…).")
    gpus: int = option(
        "--gpus",
        "GPUs to serve on: tensor parallel within a node, pipeline parallel across nodes.",
        kind=click.IntRange(min=1),
        default=1,
        show_default=True,
    )
    gpus_per_node: int = option(
        "--gpus-per-node", "GPUs one node holds (NVLink domain).", kind=click.IntRange(min=1), default=8, show_default=True
    )
    threads: int | None = same_as(BandwidthOptions, "threads")
    bandwidth: float | None = same_as(BudgetOptions, "bandwidth")
    memory_bytes: int | None = option(
        "--memory", "Device memory: 80GiB, 24GB, or GiB [default: the device's].", parse=_units(parse_bytes, "SIZE")
    )
    target_tps: float | None = same_as(BudgetOptions, "target_tps")
    measure: bool = option(
        "--measure", "Measure the CPU bandwidth again instead of reusing this host's best recent figure.", is_flag=True, default=False
    )
    calibrate: bool = option(
        "--calibrate",
        "Calibrate llama.cpp's decode step on this CPU for the model's weight type and thread count (about 10 s, "
        "llama-cpp-python needed; kept in the state directory) and predict the time per output token.",
        is_flag=True,
        default=False,
    )
    state_dir: Path | None = option(  # noqa: RUF009 (a field specifier, as dataclasses.field)
        "--state-dir", "Where bandwidth measurements are kept [default: $XDG_STATE_HOME/decode-doctor].", kind=A_DIRECTORY
    )
    fmt: str = option("--format", "The output format.", choices=("text", "json"), default="text", show_default=True)
    timeout: float = option(
        "--timeout", "Seconds the plan (and any measurement) may take.", kind=click.FloatRange(min=1), default=300, show_default=True
    )
    debug: bool = same_as(SharedOptions, "debug")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click_options(EstimateOptions)
def estimate(**params: Any) -> None:
    """Plan a model's serving: memory, limits, decode speed (a roofline) and the engine command lines.

    Exits 1 when it does not fit (or its size is unknown) or cannot reach --target-tps, 2 when the model
    cannot be read, the device is not there or the plan runs past --timeout.
    """
    from .estimate import run

    run(EstimateOptions.from_values(params))


COMMANDS = (estimate,)
