"""The gpu check's options: which Python's PyTorch to inspect, and how long nvidia-smi may take."""

from __future__ import annotations

from dataclasses import dataclass

from decode_doctor.engine import Options, option
from decode_doctor.engine.units import amount
from decode_doctor.i18n import N_


@dataclass(frozen=True)
class GpuOptions(Options):
    python: str | None = option("--python", "The Python interpreter whose PyTorch to inspect (default: decode-doctor's own).")
    nvidia_smi_timeout: float | None = option(
        "--nvidia-smi-timeout",
        "Seconds nvidia-smi may take before it counts as hung [default: 15].",
        parse=amount(0.0, 3600.0, N_("seconds")),
        metavar="SECONDS",
    )
