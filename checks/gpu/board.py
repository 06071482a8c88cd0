"""The board and bus: NVIDIA PCI display controllers, and a Jetson (Tegra) board with unified memory."""

from __future__ import annotations

from dataclasses import dataclass

from decode_doctor.engine import Context
from decode_doctor.i18n import _


def nvidia_pci_devices(ctx: Context) -> list[str]:
    base = ctx.host_path("/sys/bus/pci/devices")
    found = []
    if base.is_dir():
        for device in sorted(base.iterdir()):
            try:
                vendor = (device / "vendor").read_text().strip()
                klass = (device / "class").read_text().strip()
            except OSError:
                continue
            if vendor == "0x10de" and klass.startswith("0x03"):
                found.append(device.name)
    return found


@dataclass(frozen=True)
class Board:
    model: str
    release: str

    @property
    def text(self) -> str:
        return _('{model} (/etc/nv_tegra_release: "{release}")', model=self.model, release=self.release)


def tegra_board(ctx: Context) -> Board | None:
    """A Jetson: /etc/nv_tegra_release names the L4T release, the device tree the board."""
    tegra = ctx.read_text("/etc/nv_tegra_release")
    if not tegra or not tegra.strip():
        return None
    model = (ctx.read_text("/proc/device-tree/model") or "NVIDIA Jetson").strip("\x00\n ")
    return Board(model, tegra.strip().splitlines()[0])
