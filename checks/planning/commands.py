"""`decode-doctor estimate`: a serving plan for one model on one device (or N in tensor parallel),
this host's or one from the datasheet table.

This module is imported to list `decode-doctor --help`: only click, .dtypes and the engine's units at its top.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from decode_doctor.engine.units import parse_bytes, parse_rate
from decode_doctor.models.dtypes import KV_DTYPE_BYTES


def _units(parse: Any, name: str) -> Any:
    def convert(value: Any) -> Any:
        return value if isinstance(value, (int, float)) else parse(value)

    convert.__name__ = name
    return convert


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--model",
    "model_path",
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="A model directory (config.json, with or without weights) or a .gguf file.",
)
@click.option(
    "--context", type=click.IntRange(min=1), default=None, help="Context length [default: 4096, or the model's maximum if lower]."
)
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True, help="Sequences decoded at once.")
@click.option("--kv-dtype", type=click.Choice(sorted(KV_DTYPE_BYTES)), default="fp16", show_default=True)
@click.option("--device", "device_spec", default=None, help="cpu or cuda:N of this host [default: cpu, or --gpu's].")
@click.option(
    "--gpu", "gpu_name", default=None, help="Plan for a GPU you do not own, from the datasheet table (H100-SXM, L4, Jetson AGX Orin 64GB…)."
)
@click.option(
    "--gpus",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="GPUs to serve on: tensor parallel within a node, pipeline parallel across nodes.",
)
@click.option("--gpus-per-node", type=click.IntRange(min=1), default=8, show_default=True, help="GPUs one node holds (NVLink domain).")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="CPU threads the engine will use [default: one per usable CPU].")
@click.option(
    "--bandwidth",
    type=_units(parse_rate, "BANDWIDTH"),
    default=None,
    help="Memory bandwidth: 3.35TB/s, 900GB/s, or GB/s [default: measured].",
)
@click.option(
    "--memory",
    "memory_bytes",
    type=_units(parse_bytes, "SIZE"),
    default=None,
    help="Device memory: 80GiB, 24GB, or GiB [default: the device's].",
)
@click.option("--target-tps", type=click.FloatRange(min=0), default=None, help="Tokens/s per sequence the deployment needs.")
@click.option("--measure", is_flag=True, help="Measure the CPU bandwidth again instead of reusing this host's best recent figure.")
@click.option(
    "--calibrate",
    is_flag=True,
    help="Calibrate llama.cpp's decode step on this CPU for the model's weight type and thread count (about 10 s, "
    "llama-cpp-python needed; kept in the state directory) and predict the time per output token.",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where bandwidth measurements are kept [default: $XDG_STATE_HOME/decode-doctor].",
)
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
@click.option(
    "--timeout", type=click.FloatRange(min=1), default=300, show_default=True, help="Seconds the plan (and any measurement) may take."
)
@click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
def estimate(**params: Any) -> None:
    """Plan a model's serving: memory, limits, decode speed (a roofline) and the engine command lines.

    Exits 1 when it does not fit (or its size is unknown) or cannot reach --target-tps, 2 when the model
    cannot be read, the device is not there or the plan runs past --timeout.
    """
    from .estimate import run

    run(**params)


COMMANDS = (estimate,)
