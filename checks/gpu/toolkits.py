"""The CUDA toolkits installed: nvcc on PATH and /usr/local/cuda*/version.json (links followed inside --root)."""

from __future__ import annotations

from decode_doctor.engine import Context

from .contract import Toolkit
from .cudapaths import resolve
from .nvidia import parse_nvcc, parse_version_json


def toolkits(ctx: Context) -> list[Toolkit]:
    found = []
    nvcc = None if ctx.same_host else ctx.which("nvcc")  # a node agent's PATH is its container's, not the node's
    if nvcc:
        record = ctx.run([nvcc, "--version"], timeout_s=10)
        version = parse_nvcc(record.stdout)
        if version:
            # nvcc's third number is its own build (12.8.61), not the toolkit update (12.8.1): judge X.Y
            found.append(Toolkit(version, ".".join(version.split(".")[:2]), nvcc))
    local = ctx.host_path("/usr/local")
    if local.is_dir():
        for directory in sorted(local.glob("cuda*")):
            # /usr/local/cuda is a link: followed inside --root, never to this machine's files
            real = resolve(ctx, f"/usr/local/{directory.name}")
            text = ctx.read_text(f"{real}/version.json") if ctx.host_path(real).is_dir() else None
            version = parse_version_json(text) if text else None
            if version and not any(t.version == version for t in found):
                found.append(Toolkit(version, version, f"/usr/local/{directory.name}/version.json"))
    return found
