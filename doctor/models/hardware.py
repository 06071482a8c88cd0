"""Devices a plan is for: one in this machine (measured), or one from the table of datasheet figures
(data/gpus.json) for hardware you do not own."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from decode_doctor.i18n import N_, Said, said
from decode_doctor.i18n.labels import Labelled


class BandwidthSource(Labelled):
    """Where a bandwidth figure came from (its value is what reports and JSON keep)."""

    MEASURED = "measured", N_("measured")
    CACHED = "cached", N_("cached")  # this host's best quiet figure, kept from an earlier measurement
    BUSY = "measured on a busy host", N_("measured on a busy host")  # a lower bound
    GIVEN = "given", N_("given")
    SPEC = "spec", N_("spec")  # the driver's or the DIMMs' theoretical figure
    DATASHEET = "datasheet", N_("datasheet")
    UNKNOWN = "unknown", N_("source not known")


@dataclass
class Hardware:
    name: str  # "H100-SXM", "cuda:0", "cpu"
    label: str  # what to show: "NVIDIA H100 SXM (datasheet)"
    memory_bytes: int | None
    bandwidth_gbps: float | None
    bandwidth_source: BandwidthSource
    peak_tflops: dict[str, float] = field(default_factory=dict)  # "bf16", "fp8", "int8" → dense TFLOPS
    peak_source: str = ""
    interconnect: str | None = None
    interconnect_gbps: float | None = None
    kind: str = "gpu"  # "gpu", "cpu", "unified" (CPU and GPU share the memory)
    notes: list[str] = field(default_factory=list)

    @property
    def is_gpu(self) -> bool:
        return self.kind in ("gpu", "unified")


@functools.cache
def table() -> list[dict[str, Any]]:
    text = resources.files("decode_doctor.models").joinpath("data/gpus.json").read_text()
    return json.loads(text)["devices"]


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def names() -> list[str]:
    return [row["name"] for row in table()]


def lookup(name: str) -> Hardware:
    """The table's device by its name or an alias, spaces, dashes and case aside; ValueError names the choices."""
    wanted = _key(name)
    for row in table():
        if wanted in {_key(row["name"]), *(_key(alias) for alias in row.get("aliases", ()))}:
            peaks = {kind: row[f"{kind}_{unit}"] for kind, unit in (("bf16", "tflops"), ("fp8", "tflops"), ("int8", "tops"))}
            return Hardware(
                name=row["name"],
                label=said("{row} (datasheet)", row=row["name"]),
                memory_bytes=row["memory_bytes"],
                bandwidth_gbps=row["bandwidth_gbps"],
                bandwidth_source=BandwidthSource.DATASHEET,
                peak_tflops={kind: value for kind, value in peaks.items() if value},
                peak_source=row["datasheet"],
                interconnect=row.get("interconnect"),
                interconnect_gbps=row.get("interconnect_gbps"),
                kind="unified" if row.get("unified_memory") else "gpu",
                notes=[Said(row["memory_note"])] if row.get("memory_note") else [],  # its words are in the catalog (extract.gpu_table)
            )
    raise ValueError(said("no device {name!r} in the table; known: {known}", name=name, known=", ".join(names())))


# --- the CPU's compute roof, from what py-cpuinfo reports --------------------------------------

FMA_UNITS = 2  # FMA ports per core on current server cores (one on many client and older ones)


def cpu_peak(cores: int, info: dict[str, Any] | None = None) -> tuple[dict[str, float], str]:
    """Dense FP32/BF16 and INT8 TFLOPS of `cores` cores, an estimate from the vector width the flags
    report, the advertised clock and two FMA units per core; and how it was worked out."""
    if info is None:
        info = cpu_info()
    flags = set(info.get("flags") or ())
    hz = (info.get("hz_advertised") or info.get("hz_actual") or [0])[0] or 0
    if not hz:
        return {}, "unknown: py-cpuinfo reports no clock"
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags else 4
    fp32 = cores * hz * FMA_UNITS * lanes * 2 / 1e12
    bf16 = fp32 * (2 if "avx512_bf16" in flags else 1)
    if "amx_bf16" in flags:
        bf16 = max(bf16, cores * hz * 1024 / 1e12)  # AMX: 1,024 BF16 FLOPs per cycle per core
    int8 = fp32 * (4 if {"avx512_vnni", "avx_vnni"} & flags else 2)
    if "amx_int8" in flags:
        int8 = max(int8, cores * hz * 2048 / 1e12)
    how = (
        f"estimate: {cores} cores × {hz / 1e9:.2f} GHz × {FMA_UNITS} FMA units × {lanes} FP32 lanes × 2"
        + (", AMX" if "amx_bf16" in flags else "")
        + (", VNNI" if {"avx512_vnni", "avx_vnni"} & flags else "")
    )
    return {"bf16": round(bf16, 3), "fp32": round(fp32, 3), "int8": round(int8, 3)}, how


def cpu_info() -> dict[str, Any]:
    """Flags and clock: from /proc/cpuinfo where there is one (instant), else py-cpuinfo (which takes
    about a second: it starts a process of its own)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            text = handle.read(1 << 20)
    except OSError:
        text = ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the first processor is enough
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    if "flags" in fields:
        advertised = re.search(r"@\s*([0-9.]+)\s*GHz", fields.get("model name", ""))
        hz = float(advertised.group(1)) * 1e9 if advertised else float(fields.get("cpu MHz") or 0) * 1e6
        return {"flags": fields["flags"].split(), "hz_advertised": [int(hz), 0], "brand_raw": fields.get("model name")}
    try:
        import cpuinfo

        return cpuinfo.get_cpu_info()
    except Exception:
        return {}
