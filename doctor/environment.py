"""The environment section of a report (like `python -m torch.utils.collect_env`), judged by the checks."""

from __future__ import annotations

import platform
import sys
import threading
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from .context import Context
from .report import Report

PACKAGES = ("torch", "transformers", "vllm", "tokenizers", "safetensors", "flash-attn", "nvidia-ml-py", "docker")
# which finding codes speak about which row
RELATED = {
    "CPU": ("BW",), "memory": ("SWAP", "DEC", "BW"), "NVIDIA driver": ("GPU0", "GPU1", "CTK"), "CUDA (driver)": ("GPU02",),
    "torch": ("GPU021", "GPU022", "GPU023"), "Docker": ("DKR", "REF"), "memory bandwidth": ("BW",),
}


@dataclass
class EnvRow:
    name: str
    value: str
    judged: str  # "ok", or the codes of the findings about it

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "value": self.value, "judged": self.judged}


class CpuInfo:
    """py-cpuinfo's get_cpu_info() takes about a second (it samples the clock): run it beside the checks."""

    def __init__(self) -> None:
        self.result: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> CpuInfo:
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            import cpuinfo

            self.result = cpuinfo.get_cpu_info()
        except Exception:  # noqa: BLE001 - the report goes on without it
            self.result = {}

    def get(self, timeout: float = 5.0) -> dict[str, Any]:
        self.thread.join(timeout)
        return self.result


def _os_name(ctx: Context) -> str:
    text = ctx.read_text("/etc/os-release") or ""
    for line in text.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return platform.platform() if ctx.live_host else "unknown"


def collect_environment(ctx: Context, report: Report, cpu: dict[str, Any]) -> list[EnvRow]:
    facts: dict[str, Any] = {}
    for result in report.results:
        facts.update(result.facts)
    rows: list[tuple[str, str]] = [("OS", _os_name(ctx))]
    kernel = (ctx.read_text("/proc/sys/kernel/osrelease") or "").strip() or (platform.release() if ctx.live_host else "unknown")
    rows.append(("kernel", kernel))
    cpu_name = cpu.get("brand_raw") or next((l.split(":", 1)[1].strip() for l in (ctx.read_text("/proc/cpuinfo") or "").splitlines() if l.startswith("model name")), "unknown")
    rows.append(("CPU", f"{cpu_name} ({cpu.get('count', '?')} logical CPUs, {cpu.get('arch', platform.machine())})"))
    total = ctx.meminfo_bytes("MemTotal")
    if total is None and ctx.live_host:
        import psutil

        total = psutil.virtual_memory().total
    rows.append(("memory", f"{total / 2**30:.1f} GiB" if total else "unknown"))
    bandwidth = facts.get("bandwidth", {}).get("cpu") or {}
    if bandwidth:
        rows.append(("memory bandwidth", f"read {bandwidth.get('read_gbps')} GB/s, copy {bandwidth.get('copy_gbps')} GB/s (measured)"))
    rows.append(("Python", sys.version.split()[0]))
    gpu = facts.get("gpu") or {}
    if gpu:
        rows.append(("NVIDIA driver", str(gpu.get("driver") or "none")))
        rows.append(("CUDA (driver)", str(gpu.get("cuda") or "none")))
        for device in gpu.get("devices", []):
            rows.append((f"GPU {device.get('index')}", f"{device.get('name')} ({device.get('memory_mib')} MiB)"))
    for package in PACKAGES:
        try:
            rows.append((package, metadata.version(package)))
        except metadata.PackageNotFoundError:
            continue
    docker = facts.get("docker") or {}
    if docker.get("reachable"):
        rows.append(("Docker", f"{docker.get('version')} (API {docker.get('api_version')}, {docker.get('image_store')} store)"))
    judged = []
    for name, value in rows:
        prefixes = RELATED.get(name, ())
        codes = sorted({f.code for f in report.findings if prefixes and f.code.startswith(prefixes) and f.severity.value != "info"})
        judged.append(EnvRow(name, value, ", ".join(codes) if codes else "ok"))
    return judged
