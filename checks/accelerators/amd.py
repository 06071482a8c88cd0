"""AMD GPUs from amd-smi (JSON or its indented text), rocm-smi --json, or amdgpu's sysfs files, and
the ROCm release from /opt/rocm. Values that say N/A are absent, never versions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from decode_doctor.i18n import _, said

MAX_TEXT = 4 << 20
MAX_GPUS = 64
ABSENT = frozenset({"", "n/a", "na", "none", "unknown", "not supported"})
# gfx targets whose memory is HBM (Instinct, Vega) or the system's own RAM (APUs); other discrete
# gfx10/11/12 boards carry GDDR
HBM = frozenset({"gfx900", "gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950"})
UNIFIED = frozenset({"gfx90c", "gfx1035", "gfx1036", "gfx1103", "gfx1150", "gfx1151", "gfx1152"})


@dataclass(frozen=True)
class AmdGpu:
    index: int
    name: str
    memory_mib: int | None = None
    gfx: str | None = None
    driver: str | None = None
    bus: str | None = None
    vram_type: str | None = None

    @property
    def bandwidth_class(self) -> str | None:
        """What its memory type says of its bandwidth, in the reader's language; None when the capture
        names no memory type and the architecture does not tell."""
        kind = (self.vram_type or "").upper()
        if kind.startswith("HBM") or self.gfx in HBM:
            return _("HBM memory, bandwidth in TB/s")
        if self.gfx in UNIFIED or kind.startswith(("DDR", "LPDDR")):
            return _("system memory shared with the CPU, bandwidth from tens to a few hundred GB/s")
        if kind.startswith("GDDR") or (self.gfx or "").startswith("gfx1"):
            return _("GDDR memory, bandwidth in the hundreds of GB/s")
        return None


def _value(raw: Any) -> str | None:
    text = " ".join(str(raw).split()) if raw is not None and not isinstance(raw, (dict, list)) else ""
    return None if text.lower() in ABSENT else text


def _mib(value: Any, unit: str = "B") -> int | None:
    number = _value(value)
    if number is None or not number.replace(".", "", 1).isdecimal() or len(number) > 20:  # 20 digits: 100 EB
        return None
    scale = {"B": 1 / 1048576, "KB": 1 / 1024, "MB": 1, "MIB": 1, "GB": 1024, "GIB": 1024}.get(unit.upper())
    return int(float(number) * scale) if scale else None


def looks_like_amd(text: str) -> bool:
    head = text[:8192]
    return (
        "VRAM Total Memory (B)" in head
        or "Card Series" in head
        or "Card series" in head
        or "MARKET_NAME" in head
        or '"market_name"' in head
        or "GFX Version" in head
    )


def parse(text: str) -> list[AmdGpu]:
    """The GPUs in rocm-smi --json, amd-smi static --json, or amd-smi static's text; ValueError when
    the text is none of them."""
    text = text[:MAX_TEXT]
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            data = json.loads(stripped)
        except (ValueError, RecursionError) as exc:
            raise ValueError(said("not JSON: {error}", error=str(exc))) from None
        return _from_json(data)
    return _from_text(text)


def _from_json(data: Any) -> list[AmdGpu]:
    if isinstance(data, dict) and isinstance(data.get("gpu_data"), list):
        data = data["gpu_data"]  # newer amd-smi wraps the list
    if isinstance(data, list):  # amd-smi static --json
        found = [gpu for i, item in enumerate(data[:MAX_GPUS]) if isinstance(item, dict) and (gpu := _amd_smi_item(i, item))]
        if not found:
            raise ValueError(said("amd-smi JSON without a GPU that has a market_name"))
        return found
    if not isinstance(data, dict):
        raise ValueError(said("JSON that is neither rocm-smi's nor amd-smi's"))
    found_system = data.get("system")
    system: dict[str, Any] = found_system if isinstance(found_system, dict) else {}
    gpus = []
    cards = sorted((k for k in data if k.startswith("card") and k[4:].isdecimal()), key=lambda k: int(k[4:]))
    for key in cards[:MAX_GPUS]:
        card = data[key]
        if not isinstance(card, dict):
            continue
        name = next((_value(card.get(k)) for k in ("Card Series", "Card series", "Device Name", "Card model") if _value(card.get(k))), None)
        driver = _value(card.get("Driver version")) or _value(system.get("Driver version"))
        gpus.append(
            AmdGpu(
                int(key[4:]),
                name or key,
                _mib(card.get("VRAM Total Memory (B)")),
                _value(card.get("GFX Version")),
                driver,
                _value(card.get("PCI Bus")),
            )
        )
    if not gpus:
        raise ValueError(said("JSON without cardN entries"))
    return gpus


def _object(value: Any) -> dict[str, Any]:
    """A JSON object, or an empty one for anything else (a field the tool left out or mangled)."""
    return value if isinstance(value, dict) else {}


def _amd_smi_item(index: int, item: dict[str, Any]) -> AmdGpu | None:
    asic, vram = _object(item.get("asic")), _object(item.get("vram"))
    driver, bus = _object(item.get("driver")), _object(item.get("bus"))
    size = _object(vram.get("size"))
    name = _value(asic.get("market_name"))
    if name is None:
        return None
    gpu = item.get("gpu")
    return AmdGpu(
        gpu if isinstance(gpu, int) and 0 <= gpu < 4096 else index,
        name,
        _mib(size.get("value"), str(size.get("unit") or "MB")),
        _value(asic.get("target_graphics_version")),
        _value(driver.get("version")) or _value(driver.get("driver_version")),
        _value(bus.get("bdf")),
        _value(vram.get("type")),
    )


def _from_text(text: str) -> list[AmdGpu]:
    """amd-smi static's text: "GPU: N", then "    SECTION:" and "        KEY: value" lines."""
    blocks: list[dict[str, str]] = []
    section = ""
    for line in text.splitlines()[:200_000]:
        line = line[:4096]
        body = line.strip()
        key, colon, value = body.partition(":")
        if not colon:
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0 and key == "GPU" and value.strip().isdecimal():
            if len(blocks) >= MAX_GPUS:
                break
            blocks.append({"GPU": value.strip()})
            section = ""
        elif blocks and not value.strip():
            section = key.strip()
        elif blocks:
            blocks[-1].setdefault(f"{section}.{key.strip()}", value.strip())
    gpus = []
    for block in blocks:
        name = _value(block.get("ASIC.MARKET_NAME")) or _value(block.get("BOARD.PRODUCT_NAME"))
        if name is None:
            continue
        size = (block.get("VRAM.SIZE") or "").split()
        memory = _mib(size[0], size[1]) if len(size) == 2 else None
        gpus.append(
            AmdGpu(
                int(block["GPU"]),
                name,
                memory,
                _value(block.get("ASIC.TARGET_GRAPHICS_VERSION")),
                _value(block.get("DRIVER.VERSION")),
                _value(block.get("BUS.BDF")),
                _value(block.get("VRAM.TYPE")),
            )
        )
    if not gpus:
        raise ValueError(said("no GPU with a MARKET_NAME"))
    return gpus


def rocm_version(text: str | None) -> str | None:
    """/opt/rocm/.info/version: "6.2.4-120"."""
    first = (text or "").strip().split("\n", 1)[0].split("-", 1)[0]
    parts = first.split(".")
    return first if 2 <= len(parts) <= 4 and all(p.isdecimal() and len(p) <= 5 for p in parts) else None
