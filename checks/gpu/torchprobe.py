"""PyTorch's version and CUDA build in the serving Python, read from torch/version.py without importing torch."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from decode_doctor.engine import Context
from decode_doctor.i18n import _

from .contract import TorchBuild
from .nvidia import parse_torch_version_py
from .options import GpuOptions

TORCH_VERSION = re.compile(r"\d{1,4}\.\d{1,4}(\.\d{1,4})?[0-9A-Za-z.+_-]{0,60}")
CUDA_BUILD = re.compile(r"\d{1,4}\.\d{1,4}(\.\d{1,6})?([.-][0-9A-Za-z]{1,20}){0,3}")

TORCH_PROBE = r"""
import importlib.util, json, sys
out = {"python": sys.executable, "torch_dir": None, "cudnn": None}
spec = importlib.util.find_spec("torch")
if spec and spec.submodule_search_locations:
    out["torch_dir"] = list(spec.submodule_search_locations)[0]
try:
    from importlib import metadata
    for name in ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu11"):
        try:
            out["cudnn"] = metadata.version(name)
            break
        except metadata.PackageNotFoundError:
            pass
except Exception:
    pass
print(json.dumps(out))
"""


def _last_json_object(output: str) -> dict[str, Any] | None:
    """The probe's JSON line: the last line that is a JSON object (a sitecustomize or a warning may
    print around it)."""
    for line in reversed(output.strip().splitlines()[-50:]):
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    return None


def probe_torch(ctx: Context) -> TorchBuild | str | None:
    """PyTorch's version and CUDA build from torch/version.py, without importing torch; a string says
    why the probe failed; None: no torch."""
    python = ctx.option(GpuOptions).python or sys.executable
    record = ctx.run([python, "-c", TORCH_PROBE], timeout_s=20)
    if not record.ok:
        return record.error or record.stderr.strip()[-200:] or _("the probe failed")
    data = _last_json_object(record.stdout)
    if data is None:
        return _("the probe printed no JSON object: {output}", output=repr(record.stdout.strip()[-120:]))
    if not isinstance(data.get("torch_dir"), str) or not data["torch_dir"]:
        return None
    torch_dir = Path(data["torch_dir"])
    version_py = f"{torch_dir}/version.py"
    try:
        with open(torch_dir / "version.py", "rb") as handle:
            version = parse_torch_version_py(handle.read(1 << 16).decode("utf-8", errors="replace"))
    except OSError:
        return _("{path} is unreadable", path=version_py)
    for key, shape in (("version", TORCH_VERSION), ("cuda", CUDA_BUILD), ("hip", CUDA_BUILD)):
        value = version[key]
        if value is not None and not shape.fullmatch(value):
            return _(
                "{path} says {key} = {value}, not a version: this torch install is damaged or not PyTorch",
                path=version_py,
                key=key,
                value=repr(value[:40]),
            )
    cudnn = data.get("cudnn")
    if not cudnn:
        libs = sorted((torch_dir / "lib").glob("libcudnn.so.*")) if (torch_dir / "lib").is_dir() else []
        cudnn = libs[0].name.split(".so.", 1)[1] if libs else None
    found_python = data.get("python")
    python_version = found_python if isinstance(found_python, str) else "?"
    cudnn = cudnn if isinstance(cudnn, str) or cudnn is None else str(cudnn)
    return TorchBuild(version["version"], version["cuda"], version["hip"], cudnn, python_version, str(torch_dir))
