"""A host reading judged: per GPU, what decode would feel (a narrow or slow link, clocks held down,
memory faults, settings that keep engines out) and what the reading could not show.

Thresholds are named where they are set. Nothing here guesses a value the reading lacks: a finding
that needs to know whether the GPU was busy, and a reading that does not say, is "not judged".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from decode_doctor.engine import Code, Severity
from decode_doctor.i18n import Said, joined, said

from .codes import (
    GPH001,
    GPH002,
    GPH003,
    GPH010,
    GPH011,
    GPH012,
    GPH013,
    GPH014,
    GPH020,
    GPH021,
    GPH022,
    GPH023,
    GPH024,
    GPH030,
    GPH031,
    GPH032,
    GPH033,
    GPH040,
    GPH041,
    GPH042,
    HARDWARE_SLOWDOWN,
)
from .pasted import bus_key
from .reading import ClockEvent, ComputeMode, GpuReading, HostReading

BUSY_PCT = 50  # utilization at or above which a GPU counts as busy (its link and clocks at their working state)
IDLE_PCT = 10  # below: idle (Gen1 links and low clocks are power saving)
MEMORY_CLOCK_SHARE = 0.9  # a busy GPU's memory clock below this share of its max (GeForce cards run CUDA at P2, ~3-5 % lower)
POWER_LIMIT_SHARE = 0.98  # a power limit below this share of the default was lowered
REPLAYS = 1000  # PCIe replays since the last reset that make a link marginal
# Linux data-center GPUs, where persistence mode belongs (GeForce and workstation cards are left alone)
DATA_CENTER = re.compile(
    r"\b(?:Tesla|A2|A10G?|A16|A30|A40|A100|A800|H20|H100|H800|H200|GH200|B100|B200|B300|GB200|GB300|L4|L20|L40S?|T4|V100|P100|P40|"
    r"K80|M60|RTX PRO 6000 Blackwell Server)\b"
)
# boards whose NVLinks are all wired (an SXM module on its baseboard: hybrid cube-mesh or NVSwitch); a PCIe
# card's links depend on the bridges fitted (an H100 PCIe pair uses 12 of 18), and only a topology can tell
SXM_PART = re.compile(r"SXM|\bH100 80GB HBM3\b|\bH800\b|\bH20\b|\bH200\b(?! NVL)|\bGH200\b|\bB[123]00\b|\bGB[23]00\b")
KINDS = {"graphics": said("graphics clock"), "memory": said("memory clock")}  # application clock kinds, as a person reads them
FABRIC_READY = {"completed", "n/a", "not supported"}
FABRIC_OK = {"success", "n/a", "not supported"}


@dataclass(frozen=True)
class Verdict:
    """One finding before it is a Finding: the code, the GPU (None: the host), the message and its evidence."""

    code: Code
    gpu: GpuReading | None
    message: Said
    evidence: dict[str, Any]
    severity: Severity | None = None  # the code's own, unless the reading leaves the fault uncertain


@dataclass(frozen=True)
class Unjudged:
    what: Said
    why: Said


@dataclass
class Judgement:
    verdicts: list[Verdict] = field(default_factory=list)
    unjudged: list[Unjudged] = field(default_factory=list)

    def add(self, code: Code, gpu: GpuReading | None, message: Said, severity: Severity | None = None, **evidence: Any) -> None:
        where = {"gpu": gpu.index, "uuid": gpu.uuid, "bus_id": gpu.bus_id, "name": gpu.name} if gpu else {}
        values = {k: v for k, v in {**where, **evidence}.items() if v is not None}
        self.verdicts.append(Verdict(code, gpu, message, values, severity))


def busy(gpu: GpuReading) -> bool | None:
    """True busy, False idle, None: the reading shows no utilization or one in between."""
    if gpu.utilization_pct is None:
        return None
    if gpu.utilization_pct >= BUSY_PCT:
        return True
    return False if gpu.utilization_pct < IDLE_PCT else None


def label(gpu: GpuReading) -> Said:
    """GPU 0 (NVIDIA H100 80GB HBM3), with the user's parentheses."""
    return said("GPU {index} ({name})", index=gpu.index, name=gpu.name) if gpu.name else said("GPU {index}", index=gpu.index)


def judge(host: HostReading) -> Judgement:
    judgement = Judgement()
    for gpu in host.gpus:
        _pcie(judgement, gpu, host)
        _clocks(judgement, gpu)
        _memory(judgement, gpu)
        _settings(judgement, gpu, host)
        _links(judgement, gpu, host)
        _fabric(judgement, gpu)
    _host(judgement, host)
    return judgement


def _lowest(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def _pcie(judgement: Judgement, gpu: GpuReading, host: HostReading) -> None:
    link = gpu.pcie
    width = _lowest(link.width_max, link.slot_width_max)
    if link.width_current is not None and width is not None and link.width_current < width:
        if link.slot_width_max is not None:
            message = said(
                "{gpu}: PCIe link x{current}, though the GPU and its slot both do x{both}: the link trained narrow.",
                gpu=label(gpu),
                current=link.width_current,
                both=width,
            )
        else:
            message = said(
                "{gpu}: PCIe link x{current} of the GPU's x{gpu_max}; the slot's width is not in this reading (if the slot is x{current} "
                "by design, this is expected: compare LnkCap of the port above it).",
                gpu=label(gpu),
                current=link.width_current,
                gpu_max=link.width_max,
            )
        # without the slot's width the link may be x8 by design (two GPUs sharing x16 lanes, some cloud
        # instances): said, at info, rather than called downtrained
        uncertain = Severity.INFO if link.slot_width_max is None else None
        judgement.add(
            GPH001,
            gpu,
            message,
            uncertain,
            width_current=link.width_current,
            width_max=link.width_max,
            slot_width_max=link.slot_width_max,
        )
    generation = _lowest(link.gen_max, link.slot_gen_max)
    if link.gen_current is not None and generation is not None and link.gen_current < generation:
        state = busy(gpu)
        if state:
            message = said(
                "{gpu}: PCIe Gen{current} while busy ({utilization} %), though the GPU and slot do Gen{both}.",
                gpu=label(gpu),
                current=link.gen_current,
                utilization=gpu.utilization_pct,
                both=generation,
            )
            judgement.add(
                GPH002,
                gpu,
                message,
                gen_current=link.gen_current,
                gen_max=link.gen_max,
                slot_gen_max=link.slot_gen_max,
                utilization_pct=gpu.utilization_pct,
            )
        elif state is None:
            judgement.unjudged.append(
                Unjudged(
                    said("{gpu}'s PCIe generation under load", gpu=label(gpu)),
                    said(
                        "Gen{current} of Gen{both}, and the reading does not show the GPU busy (an idle GPU's link drops to save power)",
                        current=link.gen_current,
                        both=generation,
                    ),
                )
            )
    if (link.replay_rollovers or 0) > 0 or (link.replays or 0) >= REPLAYS:
        message = said(
            "{gpu}: {replays} PCIe replays since the last reset ({rollovers} rollovers of the counter).",
            gpu=label(gpu),
            replays=link.replays if link.replays is not None else "?",
            rollovers=link.replay_rollovers or 0,
        )
        judgement.add(GPH003, gpu, message, replays=link.replays, replay_rollovers=link.replay_rollovers)


def _clocks(judgement: Judgement, gpu: GpuReading) -> None:
    clocks = gpu.clocks
    events = clocks.events or frozenset()
    hardware = sorted(event.value for event in events & HARDWARE_SLOWDOWN)
    if hardware:
        message = said(
            "{gpu}: hardware holds the clocks down ({events}){temperature}.",
            gpu=label(gpu),
            events=joined(", ", hardware),
            temperature=said(", {celsius} C", celsius=clocks.temperature_c) if clocks.temperature_c is not None else "",
        )
        judgement.add(GPH010, gpu, message, events=hardware, temperature_c=clocks.temperature_c, utilization_pct=gpu.utilization_pct)
    if ClockEvent.SW_THERMAL in events:
        message = said(
            "{gpu}: the driver slows it for heat (SW thermal slowdown){temperature}.",
            gpu=label(gpu),
            temperature=said(", {celsius} C", celsius=clocks.temperature_c) if clocks.temperature_c is not None else "",
        )
        judgement.add(GPH011, gpu, message, temperature_c=clocks.temperature_c, utilization_pct=gpu.utilization_pct)
    limit, default = clocks.power_limit_w, clocks.default_power_limit_w
    if limit is not None and default and limit < POWER_LIMIT_SHARE * default:
        capping = ClockEvent.SW_POWER_CAP in events
        message = said(
            "{gpu}: power limit {limit:.0f} W of a default {default:.0f} W{capping}.",
            gpu=label(gpu),
            limit=limit,
            default=default,
            capping=said(", and the power cap is holding the clocks down now") if capping else "",
        )
        judgement.add(GPH012, gpu, message, power_limit_w=limit, default_power_limit_w=default, sw_power_cap_active=capping)
    memory, top = clocks.memory_mhz, clocks.max_memory_mhz
    if memory is not None and top and memory < MEMORY_CLOCK_SHARE * top and busy(gpu):
        message = said(
            "{gpu}: memory clock {memory} MHz of {top} MHz while busy ({utilization} %): decode's ceiling falls with it.",
            gpu=label(gpu),
            memory=memory,
            top=top,
            utilization=gpu.utilization_pct,
        )
        judgement.add(GPH013, gpu, message, memory_mhz=memory, max_memory_mhz=top, utilization_pct=gpu.utilization_pct)
    pairs = (
        ("graphics", clocks.applications_graphics_mhz, clocks.default_applications_graphics_mhz),
        ("memory", clocks.applications_memory_mhz, clocks.default_applications_memory_mhz),
    )
    locked = [(kind, set_to, default_to) for kind, set_to, default_to in pairs if set_to and default_to and set_to < default_to]
    if locked:
        each = [locked_clock(kind, set_to, default_to) for kind, set_to, default_to in locked]
        message = said("{gpu}: application clocks locked below their defaults ({clocks}).", gpu=label(gpu), clocks=joined("; ", each))
        judgement.add(GPH014, gpu, message, locked={kind: [set_to, default_to] for kind, set_to, default_to in locked})


def locked_clock(kind: str, set_to: int, default_to: int) -> Said:
    return said("{kind} {set_to} MHz, default {default_to} MHz", kind=KINDS[kind], set_to=set_to, default_to=default_to)


def _memory(judgement: Judgement, gpu: GpuReading) -> None:
    faults = gpu.memory
    if (faults.uncorrected_volatile or 0) > 0:
        message = said(
            "{gpu}: {count} uncorrectable ECC errors since the driver loaded.", gpu=label(gpu), count=faults.uncorrected_volatile
        )
        judgement.add(
            GPH020, gpu, message, uncorrected_volatile=faults.uncorrected_volatile, uncorrected_aggregate=faults.uncorrected_aggregate
        )
    elif (faults.uncorrected_aggregate or 0) > 0:
        message = said(
            "{gpu}: {count} uncorrectable ECC errors in its lifetime, none since the driver loaded.",
            gpu=label(gpu),
            count=faults.uncorrected_aggregate,
        )
        judgement.add(
            GPH021, gpu, message, uncorrected_volatile=faults.uncorrected_volatile, uncorrected_aggregate=faults.uncorrected_aggregate
        )
    if faults.retired_pages_pending:
        message = said("{gpu}: retired memory pages wait for a GPU reset (pending page blacklist).", gpu=label(gpu))
        judgement.add(GPH022, gpu, message, retired_pages_sbe=faults.retired_pages_sbe, retired_pages_dbe=faults.retired_pages_dbe)
    if faults.remap_pending:
        message = said("{gpu}: a memory row waits for a GPU reset to be remapped.", gpu=label(gpu))
        judgement.add(
            GPH023,
            gpu,
            message,
            remapped_correctable=faults.remapped_correctable,
            remapped_uncorrectable=faults.remapped_uncorrectable,
        )
    if faults.remap_failure:
        message = said("{gpu}: row remapping failed: the memory has no spare rows left.", gpu=label(gpu))
        judgement.add(GPH024, gpu, message, remapped_uncorrectable=faults.remapped_uncorrectable)


def _settings(judgement: Judgement, gpu: GpuReading, host: HostReading) -> None:
    if gpu.persistence is False and not host.windows and gpu.name and DATA_CENTER.search(gpu.name):
        judgement.add(GPH030, gpu, said("{gpu}: persistence mode is off.", gpu=label(gpu)), persistence=False)
    if gpu.compute_mode in (ComputeMode.PROHIBITED, ComputeMode.EXCLUSIVE_PROCESS, ComputeMode.EXCLUSIVE_THREAD):
        message = said("{gpu}: compute mode {mode}.", gpu=label(gpu), mode=gpu.compute_mode.value)
        judgement.add(GPH031, gpu, message, compute_mode=gpu.compute_mode.value)
    if gpu.mig_enabled or gpu.mig_pending:
        state = said("enabled") if gpu.mig_enabled else said("pending a reset")
        judgement.add(
            GPH032, gpu, said("{gpu}: MIG {state}.", gpu=label(gpu), state=state), mig_enabled=gpu.mig_enabled, mig_pending=gpu.mig_pending
        )
    held = [p for p in gpu.processes or () if p.used_mib]
    if held:
        total = sum(p.used_mib or 0 for p in held)
        names = joined(", ", sorted({p.name for p in held}))
        message = said("{gpu}: {mib} MiB held by {count} process(es) ({names}).", gpu=label(gpu), mib=total, count=len(held), names=names)
        judgement.add(
            GPH033, gpu, message, held_mib=total, processes=[{"pid": p.pid, "name": p.name, "used_mib": p.used_mib} for p in held]
        )


def expected_links(gpu: GpuReading, host: HostReading) -> int | None:
    """How many NVLinks should be up: what the topology accounts for (the sum of NV# over the GPU's
    peers, or, where that is more links than the GPU has, since an NVSwitch fabric lists every peer over
    all of them, the most to one peer); on an NVSwitch board without a topology, all of them; else unknown."""
    total = len(gpu.nvlinks or ())
    if host.topology is not None:
        counts = host.topology.nvlink_counts(gpu.index)
        if not counts:
            return 0
        return max(counts) if total and sum(counts) > total else sum(counts)
    if host.nvswitches or (gpu.name and SXM_PART.search(gpu.name)):
        return total or (1 if gpu.nvlinks_all_inactive else None)  # all of them: at least one
    return None


def _links(judgement: Judgement, gpu: GpuReading, host: HostReading) -> None:
    links = gpu.nvlinks or ()
    active = sum(1 for link in links if link.active)
    down = [link.link for link in links if link.active is False]
    if not down and not gpu.nvlinks_all_inactive:
        return
    expected = expected_links(gpu, host)
    if expected is None:
        judgement.unjudged.append(
            Unjudged(
                said("whether {gpu}'s inactive NVLinks should be up", gpu=label(gpu)),
                said("the reading has no topology (nvidia-smi topo -m) to say which links the board uses"),
            )
        )
    elif gpu.nvlinks_all_inactive and expected:
        message = said("{gpu}: every NVLink inactive, though the topology links it to other GPUs.", gpu=label(gpu))
        judgement.add(GPH040, gpu, message, active=0, expected=expected)
    elif active < expected:
        message = said(
            "{gpu}: {active} of {expected} NVLinks the topology uses are active (inactive: {links}).",
            gpu=label(gpu),
            active=active,
            expected=expected,
            links=joined(", ", map(str, down)),
        )
        judgement.add(GPH040, gpu, message, inactive=down, active=active, expected=expected, total=len(links))


def _fabric(judgement: Judgement, gpu: GpuReading) -> None:
    state, status = (gpu.fabric_state or "").strip().lower(), (gpu.fabric_status or "").strip().lower()
    if (state and state not in FABRIC_READY) or (status and status not in FABRIC_OK):
        if gpu.fabric_status:
            message = said(
                "{gpu}: fabric state {state}, status {status}.", gpu=label(gpu), state=gpu.fabric_state or "—", status=gpu.fabric_status
            )
        else:  # no status read: named as such, never a "?"
            message = said("{gpu}: fabric state {state}.", gpu=label(gpu), state=gpu.fabric_state)
        judgement.add(GPH041, gpu, message, fabric_state=gpu.fabric_state, fabric_status=gpu.fabric_status)


def _host(judgement: Judgement, host: HostReading) -> None:
    if host.nvswitches and host.fabric_manager_running is False:
        message = said("{count} NVSwitches on the bus, and nvidia-fabricmanager is not running.", count=host.nvswitches)
        judgement.add(GPH041, None, message, nvswitches=host.nvswitches, fabric_manager_running=False)
    if host.pci_gpus is not None and host.gpus and len(host.pci_gpus) > len(host.gpus):
        listed = {bus_key(g.bus_id) for g in host.gpus}
        missing = [address for address in host.pci_gpus if bus_key(address) not in listed]
        if host.visible_devices is not None:
            judgement.unjudged.append(
                Unjudged(
                    said("GPUs on the PCI bus against those the driver shows"),
                    said("{variable} hides some from this process", variable="NVIDIA_VISIBLE_DEVICES=" + host.visible_devices),
                )
            )
            return
        message = said(
            "{bus} NVIDIA GPUs on the PCI bus, {shown} shown by the driver{missing}.",
            bus=len(host.pci_gpus),
            shown=len(host.gpus),
            missing=said(": missing {addresses}", addresses=joined(", ", missing)) if missing else "",
        )
        judgement.add(GPH042, None, message, pci_gpus=list(host.pci_gpus), shown=len(host.gpus), missing=missing)
