"""The host rows of a support bundle's environment table (like `python -m torch.utils.collect_env`):
OS, kernel, CPU, memory, Python and packages. The features add their own rows through their facts."""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from typing import Any

from ..engine.context import Context
from ..engine.facts import EnvRow
from ..i18n import _

# Python packages as this interpreter sees them; the serving interpreter's torch is the gpu feature's row.
PACKAGES = ("torch", "transformers", "vllm", "tokenizers", "safetensors", "flash-attn", "nvidia-ml-py")


def _os_name(ctx: Context) -> str:
    text = ctx.read_text("/etc/os-release") or ""
    for line in text.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return platform.platform() if ctx.live_host else _("not read")


def host_rows(ctx: Context, cpu: dict[str, Any]) -> list[EnvRow]:
    rows = [EnvRow(_("OS"), _os_name(ctx))]
    kernel = (ctx.read_text("/proc/sys/kernel/osrelease") or "").strip() or (platform.release() if ctx.live_host else _("not read"))
    rows.append(EnvRow(_("kernel"), kernel))
    cpuinfo = (ctx.read_text("/proc/cpuinfo") or "").splitlines()
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), _("not read"))
    cpu_name = cpu.get("brand_raw") or model
    # cpu is this machine's: empty for another host's files, whose /proc/cpuinfo alone describes them
    count = cpu.get("count") or sum(1 for line in cpuinfo if line.split(":")[0].strip() == "processor") or _("not read")
    arch = cpu.get("arch") or (platform.machine() if ctx.live_devices else _("not read"))
    described = _("{name} ({count} logical CPUs, {arch})", name=cpu_name, count=count, arch=arch)
    rows.append(EnvRow("CPU", described))
    try:
        total = ctx.meminfo_bytes("MemTotal")
    except ValueError:  # a garbled line: unknown, not a crash of the whole report
        total = None
    if total is None and ctx.live_host:
        import psutil

        total = psutil.virtual_memory().total
    rows.append(EnvRow(_("memory"), f"{total / 2**30:.1f} GiB" if total else _("not read")))
    rows.append(EnvRow("Python", sys.version.split()[0]))
    for package in PACKAGES:
        try:
            rows.append(EnvRow(_("{package} (this Python)", package=package), metadata.version(package)))
        except metadata.PackageNotFoundError:
            continue
    try:
        rows.append(EnvRow(_("{package} (this Python)", package="docker SDK"), metadata.version("docker")))
    except metadata.PackageNotFoundError:
        pass
    return rows
