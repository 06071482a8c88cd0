"""The device a plan is for, found on this host (its CPU with the bandwidth check's figure, a local GPU
from the gpu check) through the application layer, or given."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from decode_doctor.checks.bandwidth.contract import BandwidthFacts, BandwidthOptions
from decode_doctor.checks.gpu.contract import GpuFacts
from decode_doctor.engine.facts import Facts
from decode_doctor.engine.options import Options
from decode_doctor.i18n import _, localized, said
from decode_doctor.models import hardware
from decode_doctor.models.hardware import BandwidthSource, Hardware

from .rules import EstimateError

if TYPE_CHECKING:
    from .commands import EstimateOptions

F = TypeVar("F", bound=Facts)

BUSY_SHARE = 0.15  # other processes' share of the CPUs above which a figure is a lower bound

BEST_RECENT_S = 7 * 86400.0  # estimate reuses this host's best quiet figure of the last week (--measure: a new one)


def measured_facts(kind: type[F], what: str, options: tuple[Options, ...] = (), state_dir: Path | None = None) -> F | None:
    """Runs a check through the application layer and returns the facts of that type it published."""
    import os

    from decode_doctor.app import service
    from decode_doctor.app.output import say
    from decode_doctor.app.requests import RunRequest
    from decode_doctor.engine.paths import STATE_DIR_ENV

    say(_("measuring {what}…", what=what))
    env = {**os.environ, STATE_DIR_ENV: str(state_dir)} if state_dir else None
    outcome = service.run(RunRequest(select_facts=(kind,), options=options, env=env))
    return outcome.report.fact(kind)


def state_dir_of(given: Path | None) -> Path:
    from decode_doctor.engine.paths import default_state_dir

    return given or default_state_dir()


def this_cpu(threads: int | None, bandwidth: float | None, memory: int | None, remeasure: bool, state_dir: Path) -> Hardware:
    import psutil

    from decode_doctor.engine.workers import usable_cpus

    threads = threads or usable_cpus()
    total = memory or psutil.virtual_memory().total
    peaks, how = hardware.cpu_peak(threads)
    cpu = Hardware(
        "cpu", said("CPU, {threads} thread(s)", threads=threads), total, bandwidth, BandwidthSource.GIVEN, peaks, how, kind="cpu"
    )
    if bandwidth:
        return cpu
    what = _("memory bandwidth with {threads} thread(s) (about a second)", threads=threads)
    facts = None
    if not remeasure:  # the best quiet figure of the week, or a new one while the host is quiet
        facts = measured_facts(BandwidthFacts, what, (BandwidthOptions(threads=threads, reuse_bandwidth=BEST_RECENT_S),), state_dir)
    if facts is None:  # --measure, or the host is busy and nothing quiet is kept: measured now, busy or not
        facts = measured_facts(BandwidthFacts, what, (BandwidthOptions(threads=threads),), state_dir)
    if facts is None:
        cpu.bandwidth_source = BandwidthSource.UNKNOWN
        return cpu
    measured = facts.cpu.measured
    cpu.bandwidth_gbps = measured.read_gbps
    cpu.notes.extend(said("bandwidth: {why}", why=why) for why in facts.ignored_state)  # a stored figure it could not use
    if facts.reused and not measured.contended:  # a figure kept from under load is a lower bound, said below
        cpu.bandwidth_source = BandwidthSource.CACHED
        cpu.notes.append(
            said(
                "bandwidth: this host's best quiet figure of the week ({reused}; --measure to measure again)",
                reused=localized(facts.reused),
            )
        )
    elif measured.contended or measured.other_load > BUSY_SHARE:
        cpu.bandwidth_source = BandwidthSource.BUSY
        best = facts.best_quiet_gbps
        cpu.notes.append(
            said(
                "bandwidth: {read_gbps:.1f} GB/s is a lower bound: other processes used {other_load:.0%} of the CPUs "
                "({foreign_cores:.2f} cores over the window, {steal:.0%} stolen by the hypervisor) meanwhile, so the ceiling "
                "below understates the host; never kept as this host's figure; measure again when it is quiet (--measure)",
                read_gbps=measured.read_gbps,
                other_load=measured.other_load,
                foreign_cores=measured.foreign_cores,
                steal=measured.steal,
            )
        )
        if best is not None and best > measured.read_gbps and not remeasure:
            cpu.bandwidth_gbps, cpu.bandwidth_source = best, BandwidthSource.CACHED
            cpu.notes.append(said("bandwidth: this host's best quiet figure of the week, {gbps:.1f} GB/s, stands instead", gbps=best))
    else:
        cpu.bandwidth_source = BandwidthSource.MEASURED
        cpu.notes.append(
            said(
                "bandwidth: measured now with {threads} thread(s), kept as this host's quiet figure in {path}",
                threads=measured.threads,
                path=str(state_dir),
            )
        )
    return cpu


def local_gpu(spec: str, bandwidth: float | None, memory: int | None) -> Hardware:
    index = int(spec[5:])
    stack = measured_facts(GpuFacts, _("the GPUs of this host for {spec}", spec=spec))
    listed = next((d for d in stack.devices if d.index == index), None) if stack is not None else None
    if listed is None:
        raise EstimateError(
            _(
                "{spec} is not on this host (no NVIDIA GPU {index} found); plan for one you do not have with --gpu NAME",
                spec=spec,
                index=index,
            )
        )
    facts = measured_facts(BandwidthFacts, _("{spec}'s memory bandwidth", spec=spec))
    measured = facts.gpu(index) if facts is not None else None
    name = measured.name if measured else listed.name
    known = None
    try:
        known = hardware.lookup(name.replace("NVIDIA ", ""))
    except ValueError:
        pass
    found_memory = (measured.memory_bytes if measured else None) or (listed.memory_mib << 20 if listed and listed.memory_mib else None)
    device = Hardware(spec, name, memory or found_memory, None, BandwidthSource.UNKNOWN)
    if known:
        device.peak_tflops, device.peak_source = known.peak_tflops, known.peak_source
        device.interconnect, device.interconnect_gbps = known.interconnect, known.interconnect_gbps
    if bandwidth:
        device.bandwidth_gbps, device.bandwidth_source = bandwidth, BandwidthSource.GIVEN
    elif measured is not None:
        device.bandwidth_gbps, device.bandwidth_source = measured.copy_gbps, BandwidthSource.MEASURED
    elif listed is not None and listed.theoretical_gbps:
        device.bandwidth_gbps, device.bandwidth_source = listed.theoretical_gbps, BandwidthSource.SPEC
    elif known:
        device.bandwidth_gbps, device.bandwidth_source = known.bandwidth_gbps, BandwidthSource.DATASHEET
    return device


def hardware_for(options: EstimateOptions) -> Hardware:
    gpu_name, device_spec = options.gpu_name, options.device_spec
    if gpu_name:
        device = hardware.lookup(gpu_name)
        if options.memory_bytes:
            device.memory_bytes = options.memory_bytes
        if options.bandwidth:
            device.bandwidth_gbps, device.bandwidth_source = options.bandwidth, BandwidthSource.GIVEN
        return device
    if device_spec and device_spec != "cpu":
        return local_gpu(device_spec, options.bandwidth, options.memory_bytes)
    return this_cpu(options.threads, options.bandwidth, options.memory_bytes, options.measure, state_dir_of(options.state_dir))
