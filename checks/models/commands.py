"""`decode-doctor estimate`: the decode budget of one model on one device, with a context sweep.

This module is imported to list `decode-doctor --help`: only click and .dtypes at its top.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .dtypes import KV_DTYPE_BYTES


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--model",
    "model_path",
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="A model directory (config.json + safetensors) or a .gguf file.",
)
@click.option(
    "--context", type=click.IntRange(min=1), default=None, help="Context length [default: 4096, or the model's maximum if lower]."
)
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True, help="Sequences decoded at once.")
@click.option("--kv-dtype", type=click.Choice(sorted(KV_DTYPE_BYTES)), default="fp16", show_default=True)
@click.option("--device", "device_spec", default="cpu", show_default=True, help="cpu or cuda:N.")
@click.option("--bandwidth", type=click.FloatRange(min=0.001), default=None, help="Memory bandwidth in GB/s (default: measured).")
@click.option(
    "--memory", "memory_gb", type=click.FloatRange(min=0.001), default=None, help="Device memory in GB (default: read from the device)."
)
@click.option("--target-tps", type=click.FloatRange(min=0), default=None, help="Tokens/s per sequence the deployment needs.")
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
def estimate(**params: Any) -> None:
    """Budget a model: memory at a context and concurrency, and its decode tokens/s ceiling.

    Exits 1 when it does not fit or cannot reach --target-tps, 2 when the model cannot be read.
    """
    from .estimate import run

    run(**params)


COMMANDS = (estimate,)
