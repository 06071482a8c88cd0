"""Measured memory bandwidth: the number every decode ceiling is divided out of."""

from __future__ import annotations

import os
import re
import time
from dataclasses import replace
from pathlib import Path

from decode_doctor.engine import Check, Context, Finding, Needs
from decode_doctor.engine.facts import values_dict
from decode_doctor.i18n import N_, Said, _, localized, said

from .codes import BW002, BW003, BW005, RETIRED
from .contract import BandwidthFacts, BandwidthOptions, CpuMemory, MemorySpec, of_peak
from .quiet import QuietFigure, QuietRead, Serving

LOW_RATIO = 0.5  # measured / spec below this: something leaves bandwidth on the table
GPU_LOW_RATIO = 0.6
BUSY = 0.15  # other processes used more than this share of the CPUs while we measured
PER_CORE_GBPS = 12.0  # roughly what one server core can pull; used only to explain a low ratio


def _governor(ctx: Context) -> str | None:
    text = ctx.read_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    return text.strip() if text else None


def _numa_nodes(ctx: Context) -> int:
    node_dir = ctx.host_path("/sys/devices/system/node")
    if not node_dir.is_dir():
        return 1
    return sum(1 for entry in node_dir.iterdir() if re.fullmatch(r"node\d+", entry.name)) or 1


MEMORY_TABLES = ("/sys/firmware/dmi/tables", "/dev/mem")  # where dmidecode reads SMBIOS: sysfs, else the memory device
PERMISSION_WORDS = ("Permission denied", "Operation not permitted")


def memory_tables(ctx: Context) -> bool:
    """Whether the judged host has SMBIOS tables for dmidecode to read (under --root: a node agent sees
    the host's /sys there): a cloud VM often has neither sysfs's tables nor /dev/mem, and then there is
    no rated bandwidth to compare with."""
    return any(os.path.lexists(ctx.host_path(path)) for path in MEMORY_TABLES)


def memory_spec(ctx: Context) -> tuple[MemorySpec | None, str | None, bool]:
    """(the DIMMs' description, or None with why it is unavailable, and whether that is a table that
    could not be read (not judged) rather than one a virtual machine does not have (does not apply))."""
    from .membw import parse_dmidecode_memory

    if not memory_tables(ctx):
        return None, said("no SMBIOS memory tables (no /sys/firmware/dmi/tables or /dev/mem), as on a virtual machine"), False
    record = ctx.run(["dmidecode", "-t", "17"], timeout_s=10)
    if record.error and "not found" in record.error:
        return None, said("dmidecode is not installed"), True
    if not record.ok:
        detail = [line.strip() for line in (record.stderr or "").splitlines() if line.strip()]
        refused = bool(record.exit_code) and any(word in line for line in detail for word in PERMISSION_WORDS)
        if refused and os.geteuid() != 0:
            return None, said("dmidecode needs root to read the memory tables"), True
        # dmidecode's own words (as root, or an error that is not a permission one), else why it did not answer
        why = record.error or (detail[-1][:200] if detail else None)
        return None, (said("dmidecode failed: {detail}", detail=why) if why else said("dmidecode failed: no output")), True
    spec = parse_dmidecode_memory(record.stdout)
    if spec is None or not spec.peak_gbps:
        return None, said("dmidecode lists no memory devices with a speed (a virtual machine?)"), False
    return spec, None, False


def _gpu_present(ctx: Context) -> bool:
    gpus = ctx.host_path("/proc/driver/nvidia/gpus")
    return (gpus.is_dir() and any(gpus.iterdir())) or ctx.host_path("/dev/nvidia0").exists()


class Bandwidth(Check):
    name = "bandwidth"
    looks_at = (
        "measured memory bandwidth (read and copy, one numpy thread per core, a buffer of 8× the LLC where memory allows, at most "
        "512 MiB and an eighth of the memory available unless `--thorough` (4 GiB), said when it is under 4× the LLC; best of several "
        "passes, spread); the DIMMs' rated figure from `dmidecode -t 17` and the likely causes when far below it; GPU "
        "device-to-device copies (torch or "
        "cupy) against NVML's theoretical peak. Runs alone (`exclusive`); `--thorough` measures longer. Facts: every figure measured"
    )
    description = N_("measured CPU (and GPU) memory bandwidth against the memory's specification")
    codes = (BW002, BW003, BW005)
    needs = Needs(exclusive=True)
    options = BandwidthOptions
    timeout_s = 60.0
    facts_type = BandwidthFacts
    retired = RETIRED

    def run(self, ctx: Context) -> list[Finding]:
        if not ctx.live_devices:  # the probe measures this machine: another host's files have no bandwidth to measure here
            ctx.not_judged(_("the memory bandwidth"), ctx.elsewhere)
            return []
        from decode_doctor.engine.paths import default_state_dir
        from decode_doctor.engine.workers import usable_cpus

        from .quiet import REUSE_LIMIT_S, UNDER_LOAD_STORE, age_words, best_of, fitting, load_quiet, machine_key, serving, store_quiet

        machine = machine_key(ctx)
        threads = ctx.option(BandwidthOptions).threads or usable_cpus()
        state = default_state_dir(ctx.env)
        stored = load_quiet(state)
        figures = list(stored.figures)
        reuse_s = ctx.option(BandwidthOptions).reuse_bandwidth
        if not reuse_s:
            return self._measured(ctx, machine, state, stored)
        young = best_of(fitting(figures, machine, threads, reuse_s))
        if young is not None:
            return self._reuse(ctx, young, None, stored.ignored)
        busy = serving(ctx)
        if busy is not None:
            older = best_of(fitting(figures, machine, threads, REUSE_LIMIT_S))
            if older is not None:
                return self._reuse(ctx, older, busy.why, stored.ignored)
        # no quiet figure to reuse: the steady-state rule (quiet.py) — a figure kept from under load stands
        # while the host serves; a host that looks quiet is measured (its first quiet moment)
        under_load = list(load_quiet(state, UNDER_LOAD_STORE).figures) if busy is not None else []
        kept = best_of(fitting(under_load, machine, threads, REUSE_LIMIT_S))
        if kept is not None:
            reused = said("measured under load {when}, reused", when=age_words(time.time() - kept.measured_at))
            return self._lower_bound(ctx, replace(kept.facts, reused=reused), busy, stored.ignored)
        findings = self._measured(ctx, machine, state, stored, gpus=not (busy and busy.gpus_busy))
        facts = ctx.published
        if not isinstance(facts, BandwidthFacts) or facts.measured_at is None or not facts.cpu.measured.contended:
            self._gpu_gap(ctx, busy)
            return findings  # quiet after all (busy GPUs, quiet CPUs): stored as a quiet figure, judged as measured
        try:
            store_quiet(QuietFigure(facts.measured_at, machine, facts), state, UNDER_LOAD_STORE)
        except OSError:
            pass  # measured again next run: the gap is said either way
        return self._lower_bound(ctx, facts, busy, stored.ignored)

    def _measured(self, ctx: Context, machine: str, state: Path, stored: QuietRead, gpus: bool = True) -> list[Finding]:
        """A measurement now: kept as a quiet figure when nothing contended it, published with this host's
        best quiet figure of the week (the ceiling's floor)."""
        from .quiet import BEST_AGE_S, best_of, fitting, store_quiet

        findings = self._measure(ctx, gpus=gpus)
        facts = ctx.published
        if isinstance(facts, BandwidthFacts) and facts.measured_at is not None:
            figures = list(stored.figures)
            if not facts.cpu.measured.contended:
                figure = QuietFigure(facts.measured_at, machine, facts)
                try:
                    store_quiet(figure, state)
                except OSError:
                    pass  # the figure is this run's still; only the next run's floor is lost
                figures.append(figure)
            best = best_of(fitting(figures, machine, facts.cpu.measured.threads, BEST_AGE_S))
            if best is not None:
                facts = replace(facts, best_quiet_gbps=best.facts.cpu.measured.read_gbps)
            ctx.publish(replace(facts, ignored_state=tuple(stored.ignored)))
        return findings

    def _lower_bound(self, ctx: Context, facts: BandwidthFacts, busy: Serving | None, ignored: tuple[Said, ...]) -> list[Finding]:
        """A figure measured under load, judged as the lower bound it is, its gap accepted by name (BW003's
        contention is that gap: not a finding every run)."""
        ctx.publish(replace(facts, ignored_state=tuple(ignored)))
        self._accept_lower_bound(ctx, facts, busy)
        self._gpu_gap(ctx, busy)
        return self._judged(facts, lower_bound=True)

    def _gpu_gap(self, ctx: Context, busy: Serving | None) -> None:
        if busy is not None and busy.gpus_busy and _gpu_present(ctx) and not ctx.option(BandwidthOptions).cpu_bandwidth_only:
            ctx.accept_gap(
                _("the GPUs' memory bandwidth"),
                _("not measured while they serve ({busy}): a copy would take bandwidth from decode; measured at the first quiet moment",
                  busy=localized(busy.why)),
                "gpu_bandwidth_while_serving",
            )  # fmt: skip

    def _accept_lower_bound(self, ctx: Context, facts: BandwidthFacts, busy: Serving | None) -> None:
        from .quiet import age_words

        measured, cpu = facts.cpu.measured, facts.cpu
        load = busy.why if busy is not None else said("other processes ran beside the measurement")
        when = age_words(time.time() - (facts.measured_at or time.time()))
        if cpu.spec_gbps and cpu.reached is not None and cpu.reached >= LOW_RATIO:
            rating = _("; it already clears half of the rated {spec:.0f} GB/s (BW002 judged)", spec=cpu.spec_gbps)
        elif cpu.spec_gbps:
            rating = _("; whether it reaches half of the rated {spec:.0f} GB/s (BW002) waits for that quiet figure", spec=cpu.spec_gbps)
        else:
            rating = ""
        ctx.accept_gap(
            _("the memory bandwidth"),
            _(
                "no quiet moment since it was first judged ({load}): read {read:.1f} GB/s, measured {when} beside {cores:.1f} other "
                "cores, is a lower bound and the decode ceiling from it a conservative one; measured again at the first "
                "quiet moment{rating}",
                load=localized(load), read=measured.read_gbps, when=localized(when), cores=measured.foreign_cores, rating=rating,
            ),
            "bandwidth_under_load",
        )  # fmt: skip

    def _reuse(self, ctx: Context, figure: QuietFigure, busy: str | None, ignored: tuple[Said, ...] = ()) -> list[Finding]:
        """The stored figure stands in for a measurement, and is judged as one (not for contention: it was quiet)."""
        from .quiet import age_words

        when = age_words(time.time() - figure.measured_at)
        if busy is not None:
            reused = said("measured {when} on the quiet host, reused: the host is serving now ({busy})", when=when, busy=busy)
        else:
            reused = said("measured {when} on the quiet host, reused (--reuse-bandwidth)", when=when)
        facts = replace(figure.facts, reused=reused, ignored_state=tuple(ignored))
        ctx.publish(facts)
        self._spec_coverage(ctx, facts.cpu, facts.spec_unreadable)
        return self._judged(facts)

    def _measure(self, ctx: Context, gpus: bool = True) -> list[Finding]:
        from .membw import buffer_size, cache_caveat, llc_bytes, measure_cpu, measure_gpus, nvml_theoretical

        measured_at = time.time()
        thorough = ctx.option(BandwidthOptions).thorough
        llc = llc_bytes(ctx.read_text)
        buffer = buffer_size(llc, ctx.meminfo_bytes("MemAvailable"), thorough)
        threads = ctx.option(BandwidthOptions).threads
        if threads is not None and threads < 1:
            raise ValueError(said("--threads {threads}: give at least 1", threads=threads))
        measured = measure_cpu(buffer, budget_s=4.0 if thorough else 1.0, threads=threads)
        spec, spec_missing, unreadable = (
            (None, said("not asked (--no-memory-spec)"), False) if ctx.option(BandwidthOptions).no_memory_spec else memory_spec(ctx)
        )
        cpu = CpuMemory(
            measured=measured,
            llc_bytes=llc,
            numa_nodes=_numa_nodes(ctx),
            governor=_governor(ctx),
            measured_on="this host",  # never another host's files (run)
            spec=spec,
            spec_gbps=round(spec.peak_gbps, 1) if spec and spec.peak_gbps else None,
            spec_unavailable=spec_missing,
            caveat=cache_caveat(measured.buffer_bytes, llc, thorough),
        )
        copies = []
        if gpus and _gpu_present(ctx) and not ctx.option(BandwidthOptions).cpu_bandwidth_only:
            peaks = nvml_theoretical()
            for gpu in measure_gpus(budget_s=2.0 if thorough else 0.5):
                peak = peaks.get(gpu.index)
                copies.append(replace(gpu, theoretical_gbps=round(peak, 1) if peak else None))
            if not copies:
                ctx.not_judged(_("the GPUs' memory bandwidth"), _("neither torch nor cupy can run CUDA copies in this Python"))
        facts = BandwidthFacts(cpu, copies, measured_at=round(measured_at, 3), spec_unreadable=unreadable)
        ctx.publish(facts)
        self._spec_coverage(ctx, cpu, unreadable)
        findings = self._judged(facts)
        if measured.other_load > BUSY or measured.contended:
            message = _(
                "Other processes used {load:.0%} of the CPUs ({cores:.2f} cores over the window, {steal:.0%} stolen by the "
                "hypervisor) during the measurement; the figures understate the memory.",
                load=measured.other_load, cores=measured.foreign_cores, steal=measured.steal,
            )  # fmt: skip
            evidence = {"other_load": measured.other_load, "foreign_cores": measured.foreign_cores, "steal": measured.steal}
            findings.append(self.finding(BW003, message, evidence=evidence))
        return findings

    def _spec_coverage(self, ctx: Context, cpu: CpuMemory, unreadable: bool) -> None:
        """The DIMMs' rating that could not be read leaves BW002 not judged (a virtual machine has none: it does not apply)."""
        if unreadable and not ctx.option(BandwidthOptions).no_memory_spec and not cpu.spec_gbps:
            ctx.not_judged(_("the memory's rated bandwidth (BW002)"), localized(cpu.spec_unavailable or ""))

    def _judged(self, facts: BandwidthFacts, lower_bound: bool = False) -> list[Finding]:
        """BW002 and BW005 from the figures, whether measured now or reused; a lower bound (measured under
        load) never says the memory is slow."""
        cpu = facts.cpu
        findings = []
        if cpu.reached is not None and cpu.reached < LOW_RATIO and not lower_bound:
            findings.append(self.finding(BW002, self._low_ratio_message(cpu), evidence=values_dict(facts.cpu)))
        for gpu in facts.gpus:
            if gpu.theoretical_gbps and gpu.copy_gbps / gpu.theoretical_gbps < GPU_LOW_RATIO:
                message = _(
                    "GPU {index} ({name}): copy {gbps:.0f} GB/s{peak}.",
                    index=gpu.index,
                    name=gpu.name,
                    gbps=gpu.copy_gbps,
                    peak=of_peak(gpu),
                )
                findings.append(self.finding(BW005, message, evidence=vars(gpu)))
        return findings

    @staticmethod
    def _low_ratio_message(cpu: CpuMemory) -> str:
        spec, measured = cpu.spec, cpu.measured
        assert spec is not None and cpu.spec_gbps is not None
        causes = []
        if spec.populated < spec.slots:
            causes.append(_("{populated} of {slots} DIMM slots populated", populated=spec.populated, slots=spec.slots))
        if cpu.numa_nodes > 1:
            causes.append(_("{count} NUMA nodes", count=cpu.numa_nodes))
        if cpu.governor and cpu.governor != "performance":
            causes.append(_("CPU governor '{governor}'", governor=cpu.governor))
        if measured.threads * PER_CORE_GBPS < cpu.spec_gbps * LOW_RATIO:
            causes.append(_("only {threads} cores to drive {channels} channels", threads=measured.threads, channels=spec.channels))
        why = _("; likely: {causes}", causes=_(", ").join(causes)) if causes else ""
        return _(
            "Read {read:.1f} GB/s is {reached:.0%} of the {spec:.0f} GB/s the memory is rated for{why}.",
            read=measured.read_gbps, reached=cpu.reached, spec=cpu.spec_gbps, why=why,
        )  # fmt: skip
