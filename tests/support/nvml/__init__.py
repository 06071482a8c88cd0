"""The NVML test double: libnvidia-ml.c, a fake libnvidia-ml.so.1 that the real nvidia-ml-py loads,
driven by environment variables (DD_NVML_GPUS, DD_NVML_HEALTH, DD_NVML_TRACE: see the source)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parent / "libnvidia-ml.c"


def build_double(directory: Path, *flags: str) -> Path:
    """libnvidia-ml.so.1 compiled into directory (which then goes on LD_LIBRARY_PATH); flags such as
    -DOLD_DRIVER build a driver before 535. Skips where no C compiler or no nvidia-ml-py is installed."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the NVML test double")
    if importlib.util.find_spec("pynvml") is None:  # found, not imported: tests/fakes' pynvml stands in elsewhere in this process
        pytest.skip("nvidia-ml-py (the gpu extra) is the binding under test")
    argv = [compiler, *flags, "-shared", "-fPIC", "-O1", "-o", str(directory / "libnvidia-ml.so.1"), str(SOURCE)]
    subprocess.run(argv, check=True)
    return directory
