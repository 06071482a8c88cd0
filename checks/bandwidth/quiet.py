"""A serving host's bandwidth, measured without disturbing it.

The CPU probe reads hundreds of MiB as fast as the memory allows: the very resource decode is bound
by. A node agent (--reuse-bandwidth AGE) therefore measures only while the host is idle and at most
once per AGE; otherwise it reuses the best figure measured on a quiet host at the same thread count,
saying when. Every quiet measurement on the judged host itself is kept in the state directory (the
newest KEEP, written atomically, read with a size limit and checked like any other input), and the
best of the last week is the ceiling's floor: a ceiling is an upper bound, so a slow window now does
not lower it below what this host has read (`estimate` and the decode budget read it as
BandwidthFacts.best_quiet_gbps).

A node that never idles (serving from the day it joined) has no quiet figure to reuse. Its steady
state, the rule the check documents and accepts as a named gap rather than an incomplete verdict for
ever: the probe runs once under load (about a second, at most once per REUSE_LIMIT_S while the host serves, never beside
serving GPUs' copies), and that figure, kept in its own store (UNDER_LOAD_STORE, never a quiet figure),
is a lower bound — it clears the DIMMs' rating (BW002 judged) or it does not (BW002 waits for a quiet
figure; a lower bound never says "slow"). Every run still looks for a quiet moment and measures there."""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decode_doctor.engine import Context
from decode_doctor.engine.hostload import Window
from decode_doctor.engine.paths import default_state_dir
from decode_doctor.engine.statefile import keep_aside, read_json
from decode_doctor.engine.writes import locked, replace_output
from decode_doctor.i18n import Said, said

from .contract import BandwidthFacts

STORE = "bandwidth-quiet.json"
UNDER_LOAD_STORE = "bandwidth-under-load.json"  # figures measured while the host served: lower bounds only
STORE_LIMIT = 1 << 20
GPU_BUSY_PERCENT = 5  # a GPU this busy over NVML's last sample period is serving
CPU_BUSY_CORES = 0.5  # other processes' CPU time over the sampling window, in cores, at least…
CPU_BUSY_SHARE = 0.05  # …or this share of the host's CPUs (a 128-core node's daemons use a core or two)
SAMPLE_S = 1.0
REUSE_LIMIT_S = 30 * 86400  # a quiet figure older than this stands in for nothing, busy host or not
BEST_AGE_S = 7 * 86400  # the best quiet figure of this long is the ceiling's floor
KEEP = 32
CPU_GBPS = (0.1, 100_000.0)  # what CPU memory can read: slower is no memory, faster no machine
GPU_GBPS = (0.1, 20_000.0)  # an HBM GPU's copy rate, with room for the next generation


@dataclass(frozen=True)
class QuietFigure:
    measured_at: float  # Unix time
    machine: str  # the CPU and memory it was measured on (a figure never crosses hardware)
    facts: BandwidthFacts


def machine_key(ctx: Context) -> str:
    """The judged host's name, CPU model and memory size: a figure is reused only on the same host and hardware."""
    host = ((ctx.read_text("/etc/hostname", limit=256) or "").split() or ["unknown host"])[0]
    model = ""
    for line in (ctx.read_text("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            model = line.partition(":")[2].strip()
            break
    memory = ctx.meminfo_bytes("MemTotal") or 0
    return f"{host}/{model or 'unknown CPU'}/{memory >> 30} GiB"


def _busy_gpus() -> list[tuple[int, int]]:
    """(index, utilisation %) of each GPU NVML finds busy; [] without NVML."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:
        return []
    busy = []
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            try:
                rates = pynvml.nvmlDeviceGetUtilizationRates(pynvml.nvmlDeviceGetHandleByIndex(index))
            except Exception:
                continue
            if max(int(rates.gpu), int(rates.memory)) >= GPU_BUSY_PERCENT:
                busy.append((index, max(int(rates.gpu), int(rates.memory))))
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return busy


@dataclass(frozen=True)
class Serving:
    why: Said  # "GPU 1 (87%) busy", "other processes used 1.9 of 2 cores"
    gpus_busy: bool  # a GPU copy now would take bandwidth from decode


def serving(ctx: Context) -> Serving | None:
    """Why the host counts as serving now (a busy GPU, other processes' CPU load), or None when idle."""
    if ctx.live_devices:
        busy = _busy_gpus()
        if busy:
            return Serving(said("GPU {gpus} busy", gpus=", ".join(f"{index} ({percent}%)" for index, percent in busy)), True)
    window = Window()
    own = time.process_time()
    time.sleep(SAMPLE_S)
    load = window.close(time.process_time() - own)
    cpus = os.cpu_count() or 1
    if load.foreign_cores >= max(CPU_BUSY_CORES, CPU_BUSY_SHARE * cpus):
        return Serving(said("other processes used {cores:.1f} of {cpus} cores", cores=load.foreign_cores, cpus=cpus), False)
    return None


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class QuietRead:
    """The stored figures, each entry that could not be used with the reason, and whether the file as a
    whole could not be read."""

    figures: tuple[QuietFigure, ...] = ()
    ignored: tuple[Said, ...] = ()
    unusable: bool = False


def load_quiet(state_dir: Path | None = None, store: str = STORE) -> QuietRead:
    """The stored figures (a FIFO, device, directory or link is never opened; size-limited; every
    figure checked: positive finite numbers, a time not in the future); store: STORE or UNDER_LOAD_STORE."""
    path = (state_dir or default_state_dir()) / store
    data = read_json(path, STORE_LIMIT)
    if data is None:
        return QuietRead()
    if isinstance(data, Said):
        return QuietRead(ignored=(data,), unusable=True)
    entries = data["figures"] if isinstance(data, dict) and "figures" in data else [data]  # one figure: the file of 0.x
    if not isinstance(entries, list):
        return QuietRead(ignored=(said("{path} does not hold bandwidth figures (figures is not a list)", path=path),), unusable=True)
    figures: list[QuietFigure] = []
    ignored: list[Said] = []
    for number, entry in enumerate(entries, start=1):
        try:
            figures.append(_figure(entry))
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            ignored.append(said("{path}, figure {number}: ignored: {error}", path=path, number=number, error=str(exc)[:120]))
    return QuietRead(tuple(figures), tuple(ignored))


def _implausible(facts: BandwidthFacts) -> Said | None:
    """The first bandwidth figure outside what memory can do (a store edited or corrupted), or None."""
    cpu = facts.cpu
    named: list[tuple[str, float | None, tuple[float, float]]] = [
        ("read_gbps", cpu.measured.read_gbps, CPU_GBPS),
        ("copy_gbps", cpu.measured.copy_gbps, CPU_GBPS),
        ("spec_gbps", cpu.spec_gbps, CPU_GBPS),
        ("best_quiet_gbps", facts.best_quiet_gbps, CPU_GBPS),
    ]
    for gpu in facts.gpus:
        named += [
            (f"GPU {gpu.index} copy_gbps", gpu.copy_gbps, GPU_GBPS),
            (f"GPU {gpu.index} theoretical_gbps", gpu.theoretical_gbps, GPU_GBPS),
        ]
    for name, value, (low, high) in named:
        if value is None:
            continue
        if not _finite(value) or not low <= value <= high:
            return said(
                "{name} is {value} GB/s, outside {low:g}–{high:g} GB/s: not a plausible bandwidth",
                name=name,
                value=repr(value)[:40],
                low=low,
                high=high,
            )
    return None


def _figure(data: Any) -> QuietFigure:
    facts = BandwidthFacts.from_dict(data["facts"])
    measured = facts.cpu.measured
    numbers = (data["measured_at"], measured.read_gbps, measured.copy_gbps)
    if not all(_finite(n) and 0 < n < 1e15 for n in numbers) or data["measured_at"] > time.time() + 300:
        raise ValueError(said("a figure or its time is not a positive finite number, or its time is in the future"))
    implausible = _implausible(facts)
    if implausible is not None:
        raise ValueError(implausible)
    if not isinstance(data["machine"], str):
        raise ValueError(said("machine is not a string"))
    return QuietFigure(float(data["measured_at"]), data["machine"], facts)


def store_quiet(figure: QuietFigure, state_dir: Path | None = None, store: str = STORE) -> None:
    """figure kept beside the others (the oldest dropped past KEEP); a file with anything that could
    not be read is kept aside first (NAME.kept-UTC), never silently overwritten. Under the store's lock
    (two agents' runs never lose each other's figure); StoreBusy, an OSError, past its bounded wait."""
    directory = state_dir or default_state_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with locked(directory / store):
        kept = load_quiet(directory, store)
        if kept.ignored or kept.unusable:
            keep_aside(directory / store)
        figures = [*kept.figures, figure][-KEEP:]
        data = {"figures": [{"measured_at": f.measured_at, "machine": f.machine, "facts": f.facts.to_dict()} for f in figures]}
        replace_output(directory / store, json.dumps(data, indent=1).encode())


def fitting(figures: list[QuietFigure], machine: str, threads: int, within_s: float, now: float | None = None) -> list[QuietFigure]:
    """The figures of this machine at this thread count, measured within the last within_s."""
    now = now or time.time()
    return [f for f in figures if f.machine == machine and f.facts.cpu.measured.threads == threads and 0 <= now - f.measured_at <= within_s]


def best_of(figures: list[QuietFigure]) -> QuietFigure | None:
    return max(figures, key=lambda f: f.facts.cpu.measured.read_gbps, default=None)


def age_words(seconds: float) -> Said:
    if seconds < 120:
        return said("{count} s ago", count=max(0, int(seconds)))
    if seconds < 7200:
        return said("{count} min ago", count=int(seconds // 60))
    if seconds < 172800:
        return said("{count} h ago", count=int(seconds // 3600))
    return said("{count} days ago", count=int(seconds // 86400))
