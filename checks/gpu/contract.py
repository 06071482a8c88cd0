"""The gpu feature's contract: the facts it publishes (GpuFacts) and their value types.

Other features read the driver, the GPUs and the CUDA software through this module alone
(ctx.facts.get(GpuFacts)); it imports nothing of the feature but its codes.
"""

from __future__ import annotations

from dataclasses import dataclass

from decode_doctor.engine import EnvRow, Facts, Metric, Sample, device_with_memory
from decode_doctor.i18n import _

from .codes import GPU020, GPU021, GPU022, GPU023, GPU030


@dataclass(frozen=True)
class GpuDevice:
    index: int
    name: str
    memory_mib: int | None = None
    architecture: str | None = None
    mig_mode: str | None = None
    bus_id: str | None = None
    uuid: str | None = None
    max_mem_clock_mhz: int | None = None
    bus_width_bits: int | None = None
    theoretical_gbps: float | None = None  # NVML's figure: 2 transfers per clock × clock × bus width / 8

    def __post_init__(self) -> None:
        if self.theoretical_gbps is None and self.max_mem_clock_mhz and self.bus_width_bits:
            object.__setattr__(self, "theoretical_gbps", round(2 * self.max_mem_clock_mhz * 1e6 * self.bus_width_bits / 8 / 1e9, 1))


@dataclass(frozen=True)
class DriverInfo:
    driver_version: str | None
    cuda_version: str | None  # the highest CUDA the driver supports
    devices: tuple[GpuDevice, ...] = ()
    attached: int | None = None
    source: str = ""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Toolkit:
    version: str
    judged: str  # the X.Y the compatibility table is read with
    source: str


@dataclass(frozen=True)
class TorchBuild:
    version: str | None
    cuda: str | None
    hip: str | None
    cudnn: str | None
    python: str
    torch_dir: str


@dataclass(frozen=True)
class GpuFacts(Facts):
    driver: str | None = None
    cuda: str | None = None  # the highest CUDA the driver supports
    source: str | None = None  # NVML, nvidia-smi -q -x, nvidia-smi -q
    attached: int | None = None
    devices: tuple[GpuDevice, ...] = ()
    notes: tuple[str, ...] = ()
    unified_memory: bool = False  # Jetson: the GPU allocates from system RAM
    board: str | None = None
    toolkits: tuple[Toolkit, ...] = ()
    torch: TorchBuild | None = None

    def summary(self) -> list[str]:
        lines = []
        if self.driver or self.devices:
            parts = _devices_text(self.devices) or [_("no GPU listed")]
            if not self.driver:
                head = _("Driver of a version not reported (via {source})", source=self.source)
            elif self.cuda:
                head = _("Driver {driver} (CUDA ≤ {cuda}, via {source})", driver=self.driver, cuda=self.cuda, source=self.source)
            else:
                head = _("Driver {driver} (via {source})", driver=self.driver, source=self.source)
            notes = _(" ({notes})", notes="; ".join(self.notes)) if self.notes else ""
            lines.append(_("{driver}: {devices}{notes}", driver=head, devices=_("; ").join(parts), notes=notes))
        if self.board:
            lines.append(self.board)
        lines += [_("CUDA toolkit {version} ({source})", version=t.version, source=t.source) for t in self.toolkits]
        if self.torch:
            build = f"CUDA {self.torch.cuda}" if self.torch.cuda else f"ROCm {self.torch.hip}" if self.torch.hip else _("CPU-only")
            lines.append(
                _(
                    "PyTorch {version} ({build}, cuDNN {cudnn}), Python: {python}",
                    version=self.torch.version,
                    build=build,
                    cudnn=self.torch.cudnn or _("not reported"),
                    python=self.torch.python,
                )
            )
        return lines

    def environment(self) -> list[EnvRow]:
        rows = []
        if self.driver or self.devices:
            rows.append(EnvRow(_("NVIDIA driver"), self.driver or _("not reported"), ("GPU01", GPU020, GPU021), known=bool(self.driver)))
            rows.append(EnvRow(_("CUDA (driver)"), self.cuda or _("not reported"), ("GPU02",), known=bool(self.cuda)))
        if self.board:
            rows.append(EnvRow(_("board"), self.board, (GPU030,)))
        rows += [EnvRow(f"GPU {d.index}", device_with_memory(d.name, d.memory_mib)) for d in self.devices]
        if self.toolkits:
            rows.append(EnvRow("CUDA Toolkit", ", ".join(f"{t.version} ({t.source})" for t in self.toolkits), (GPU020, GPU023)))
        if self.torch:
            none = _("none")
            value = f"{self.torch.version}, CUDA {self.torch.cuda or none}"
            rows.append(EnvRow(_("PyTorch (serving)"), value, (GPU021, GPU022, GPU023)))
        return rows

    def metrics(self) -> list[Metric]:
        # the UUID beside the index joins dcgm-exporter's series (its UUID label) without label_replace
        samples = tuple(
            Sample({"gpu": str(d.index), "uuid": d.uuid or "", "name": d.name}, float(d.memory_mib << 20))
            for d in self.devices
            if d.memory_mib
        )
        return [Metric("decode_doctor_gpu_memory_bytes", "Memory of each NVIDIA GPU, in bytes.", samples)] if samples else []

    def compared(self) -> dict[str, str | float]:
        values: dict[str, str | float] = {}
        if self.driver:
            values["NVIDIA driver"] = self.driver
        if self.cuda:
            values["CUDA (driver)"] = self.cuda
        if self.torch and self.torch.version:
            values["PyTorch"] = self.torch.version
        for toolkit in self.toolkits:
            values[f"CUDA toolkit ({toolkit.source})"] = toolkit.version
        return values


def _devices_text(devices: tuple[GpuDevice, ...]) -> list[str]:
    """Each GPU's line; eight alike (a collect_env of an HGX node) as one: "GPU 0–7: 8 × NAME (…)"."""
    described = [(d.name, _details(d)) for d in devices]
    indexes = [d.index for d in devices]
    if len(devices) > 1 and len(set(described)) == 1 and indexes == list(range(indexes[0], indexes[0] + len(devices))):
        name, details = described[0]
        values = {"first": indexes[0], "last": indexes[-1], "count": len(devices), "name": name, "details": details}
        return [_("GPU {first}–{last}: {count} × {name} ({details})", **values)]
    return [
        _("GPU {index}: {name} ({details})", index=device.index, name=name, details=details)
        for device, (name, details) in zip(devices, described, strict=True)
    ]


def _details(device: GpuDevice) -> str:
    memory = f"{device.memory_mib / 1024:.0f} GiB" if device.memory_mib else _("memory unknown")
    if device.theoretical_gbps:
        bandwidth = _("{gbps:.0f} GB/s theoretical", gbps=device.theoretical_gbps)
    else:
        bandwidth = _("bandwidth unknown (no bus width)")
    details = [memory] + ([device.architecture] if device.architecture else [])
    details += [_("MIG enabled")] if (device.mig_mode or "").lower() == "enabled" else []
    return _(", ").join([*details, bandwidth])
