"""The GPU health feature's codes: what slows decode down or fails it later without a crash to say so,
each with the next step a person takes (reset, reseat, BIOS, cooling, configure, RMA), as DCGM's
deployment diagnostics and GPUd name them."""

from __future__ import annotations

import enum

from decode_doctor.engine import Code, CommandsParams, FixableCode, Severity

from .reading import ClockEvent


class Action(str, enum.Enum):
    """What a person does about a GPU's condition: the fleet's low-cardinality label
    (decode_doctor_gpu_condition{action=…}) and the order findings are read in."""

    RMA = "rma"  # the board is faulty: return it
    RESET = "reset"  # a GPU reset (or a reboot) makes it whole again
    RESEAT = "reseat"  # the board or its riser/cable, in the chassis
    BIOS = "bios"  # firmware or platform settings
    COOLING = "cooling"  # airflow, fans, inlet temperature, power delivery
    CONFIGURE = "configure"  # a setting of the driver or the node
    NONE = "none"  # informational: the plan takes it into account


DISPLAY_ONLY = (
    "Display-only: decode-doctor prints the commands (they change the driver's state for every process on the GPUs, "
    "which it never does for you); run them yourself."
)

GPH001 = Code(
    code="GPH001",
    title="A GPU's PCIe link trained narrower than both ends allow",
    severity=Severity.WARNING,
    what="The GPU's PCIe link runs at fewer lanes than both the GPU and the slot it sits in support (x8 where x16 is "
    "possible on both sides). A board or slot wired x8 by design is not this: the link is judged against the narrower end. "
    "Where the reading does not show the slot's width (nvidia-smi's own reports do not), the narrow link is said at info "
    "severity: it may be the slot's design.",
    why="Loading weights, paging the KV cache to host memory and tensor-parallel traffic without NVLink cross PCIe: half the "
    "lanes halve that bandwidth, so model loads and TTFT grow and multi-GPU decode slows. Nothing logs a downtrained link; "
    "it stays that way until the board is reseated or the machine rebooted.",
    fix_by_hand="Reboot and check again (a link can retrain at full width). If it stays narrow, reseat the GPU (and the "
    "riser or cable), clean the contacts, try another slot, and check the BIOS's lane bifurcation for that slot. "
    "`nvidia-smi -q -d PCI` or `lspci -vv` (LnkCap against LnkSta) shows the widths.",
    example="GPU 3: Link Width Current 8x, Max 16x, and the root port above it is x16: the link downtrained.",
)
GPH002 = Code(
    code="GPH002",
    title="A busy GPU's PCIe link runs below its generation",
    severity=Severity.WARNING,
    what="While the GPU was busy, its PCIe link ran at a lower generation than both the GPU and the slot support. An idle "
    "GPU drops to Gen1 to save power: that is never this finding.",
    why="Each generation halves or doubles the bandwidth per lane: a Gen5 GPU held at Gen3 moves a quarter of the data, "
    "so weight loads, KV-cache offload and PCIe tensor parallelism slow down. A link that trains low is commonly a riser, "
    "a retimer or a BIOS setting that caps the generation.",
    fix_by_hand="Check the BIOS's PCIe speed setting for the slot (Auto, not Gen3), reseat the GPU and its riser, and reboot. "
    "Compare under load: `nvidia-smi -q -d PCI` (Current against Max) or `lspci -vv` (LnkSta against LnkCap).",
    example="GPU 0 at 100 % utilization: PCIe Generation Current 3, Max 5, and the slot supports Gen5.",
)
GPH003 = Code(
    code="GPH003",
    title="PCIe replays on a GPU's link",
    severity=Severity.WARNING,
    what="The GPU's PCIe link retransmitted many packets (the replay counter is high, or it wrapped around).",
    why="A replay is a packet resent after a link error: many of them mean a marginal link (a riser, a retimer, signal "
    "integrity) that costs bandwidth and can end in the GPU falling off the bus (Xid 79).",
    fix_by_hand="Watch the counter over time (`nvidia-smi -q -d PCI`, Replays Since Reset; dcgm-exporter's "
    "DCGM_FI_PROF_PCIE_REPLAY_COUNTER). If it keeps rising, reseat the GPU and its riser or cable and check the slot.",
    example="GPU 5: Replays Since Reset 412345, Replay Number Rollovers 2.",
)
GPH010 = Code(
    code="GPH010",
    title="Hardware is forcing a GPU's clocks down",
    severity=Severity.ERROR,
    what="A hardware clock event is active: HW Slowdown, HW Thermal Slowdown or HW Power Brake Slowdown. The board "
    "itself cuts the clocks, often by half or more, whatever the driver asks for.",
    why="Decode runs at the memory and SM clocks the hardware allows: a GPU in HW slowdown serves a fraction of its "
    "tokens/s, and in a tensor-parallel group every step waits for it. Thermal: the GPU or its memory overheats (airflow, "
    "a failed fan, inlet temperature). Power brake: the power supply or the chassis signalled an overload.",
    fix_by_hand="Read the temperatures and power (`nvidia-smi -q -d TEMPERATURE,POWER,PERFORMANCE`). Thermal: check airflow, "
    "fans and inlet temperature, and that nothing blocks the GPU's intake. Power brake: check the PSUs and their "
    "redundancy, and the chassis's power capping. If it persists with normal temperatures and power, the board needs service.",
    example="GPU 2 at 100 % utilization: Clocks Event Reasons HW Slowdown Active, HW Thermal Slowdown Active, 92 C.",
)
GPH011 = Code(
    code="GPH011",
    title="The driver slows a busy GPU down for heat",
    severity=Severity.WARNING,
    what="SW Thermal Slowdown is active: the driver lowers the clocks to keep the GPU or its memory below its slowdown temperature.",
    why="Clocks held down for heat lower tokens/s for as long as the cooling cannot keep up, and they vary with the "
    "room: TPOT follows the temperature.",
    fix_by_hand="Check airflow, fan speeds and inlet temperature (`nvidia-smi -q -d TEMPERATURE`); in a chassis, the "
    "GPU's position and its neighbours' exhaust.",
    example="GPU 1 at 98 % utilization: SW Thermal Slowdown Active, GPU Current Temp 87 C.",
)
GPH012 = Code(
    code="GPH012",
    title="A GPU's power limit is set below its default",
    severity=Severity.WARNING,
    what="The power limit in force is lower than the board's default: someone (or a tool) capped it with "
    "`nvidia-smi -pl`, or the platform's power management did.",
    why="Under load the GPU clocks down to stay inside the lower limit (SW Power Cap), so it serves fewer tokens/s than "
    "the same GPU elsewhere. A cap applied on one node of a fleet makes it the slowest member of every group it joins.",
    fix_by_hand="If the cap is not intended: `sudo nvidia-smi -i N -pl DEFAULT_WATTS` (it lasts until the driver unloads; "
    "persist it where the node's configuration applies it), and find what set it (a startup script, a power policy).",
    example="GPU 0: Current Power Limit 400.00 W, Default Power Limit 700.00 W.",
)
GPH013 = Code(
    code="GPH013",
    title="A busy GPU's memory clock is below its maximum",
    severity=Severity.WARNING,
    what="While the GPU was busy, its memory clock ran below the maximum the board supports.",
    why="Decode is memory-bound: its tokens/s ceiling is the memory bandwidth, which is proportional to the memory clock. "
    "A memory clock held at 80 % caps decode at 80 % of what the GPU can do.",
    fix_by_hand="Check for locked memory clocks (`nvidia-smi -q -d CLOCK`: Applications Clocks; `nvidia-smi -rmc` resets a "
    "memory clock lock) and for the clock event reasons above; a power cap or heat also lowers it.",
    example="GPU 0 at 100 % utilization: Memory 1593 MHz, Max Memory 2619 MHz.",
)
GPH014 = Code(
    code="GPH014",
    title="A GPU's application clocks are locked below its defaults",
    severity=Severity.WARNING,
    what="Application clocks are set lower than the board's default application clocks: the GPU runs kernels at those clocks at most.",
    why="Locked-low clocks cap throughput on every job: a forgotten `nvidia-smi -ac` from a benchmark or a power experiment "
    "makes one node slower than its peers.",
    fix_by_hand="Reset them: `sudo nvidia-smi -i N -rac` (and `-rgc`/`-rmc` for locked GPU and memory clocks).",
    example="GPU 4: Applications Clocks Graphics 1005 MHz, Default Applications Clocks Graphics 1410 MHz.",
)
GPH020 = Code(
    code="GPH020",
    title="Uncorrectable ECC errors on a GPU since the driver loaded",
    severity=Severity.ERROR,
    what="The GPU's memory reported uncorrectable (double-bit) ECC errors since the driver last loaded.",
    why="An uncorrectable error corrupts the data it hits: a process using that memory gets Xid 48 or 94/95 and dies, or "
    "carries wrong numbers on. The engine on that GPU is not to be trusted until it is reset.",
    fix_by_hand="Drain the GPU's workloads and reset it (`sudo nvidia-smi -r -i N`, or reboot); then check Remapped Rows "
    "(pending, failure) or Retired Pages. Errors that return after a reset mean the board needs an RMA.",
    example="GPU 6: ECC Errors Volatile DRAM Uncorrectable 3.",
)
GPH021 = Code(
    code="GPH021",
    title="Uncorrectable ECC errors in a GPU's history",
    severity=Severity.INFO,
    what="The GPU's lifetime (aggregate) counters hold uncorrectable ECC errors; none since the driver last loaded.",
    why="The errors were handled (rows remapped or pages retired) and the GPU was reset since. A board with a history of "
    "them is worth watching: new ones are an RMA case.",
    fix_by_hand="Watch the volatile counter and Remapped Rows over time (dcgm-exporter, or this tool's agent); keep the "
    "board's serial with the history.",
    example="GPU 2: ECC Errors Aggregate DRAM Uncorrectable 2, Volatile 0; Remapped Rows Uncorrectable Error 2.",
)
GPH022 = Code(
    code="GPH022",
    title="A GPU has memory pages waiting to be retired",
    severity=Severity.ERROR,
    what="Pages with ECC errors are marked to be retired, which happens only at the next GPU reset (Pending Page "
    "Blacklist: Yes). This is the mechanism of GPUs before Ampere.",
    why="Until the reset, the faulty pages are still in use: allocations can land on them and processes fail with ECC Xids.",
    fix_by_hand="Drain the GPU and reset it (`sudo nvidia-smi -r -i N`) or reboot; then check that Pending is No. A GPU "
    "that keeps retiring pages needs an RMA.",
    example="GPU 1 (Tesla V100): Retired Pages Double Bit ECC 2, Pending Page Blacklist Yes.",
)
GPH023 = Code(
    code="GPH023",
    title="A GPU waits for a reset to remap a memory row",
    severity=Severity.ERROR,
    what="Row remapping is pending: the GPU found a bad memory row and will replace it with a spare row at the next reset "
    "(Ampere and later).",
    why="Until the reset the memory is not whole: NVIDIA's guidance is to reset the GPU as soon as it can be drained, and "
    "new processes on it can hit the bad row.",
    fix_by_hand="Drain the GPU's workloads and reset it (`sudo nvidia-smi -r -i N`, or reboot the node); then check that "
    "Remapped Rows Pending is No.",
    example="GPU 0 (A100-SXM4-80GB): Remapped Rows Uncorrectable Error 1, Pending Yes.",
)
GPH024 = Code(
    code="GPH024",
    title="A GPU could not remap a faulty memory row",
    severity=Severity.ERROR,
    what="Row remapping failed: the memory bank ran out of spare rows (Remapping Failure Occurred: Yes).",
    why="The faulty memory stays in use and errors will recur: NVIDIA treats this as a board to be replaced.",
    fix_by_hand="Take the GPU out of service and open an RMA with its serial number and the `nvidia-smi -q` output.",
    example="GPU 3: Remapped Rows Remapping Failure Occurred Yes.",
)
GPH030 = FixableCode[CommandsParams](
    code="GPH030",
    title="Persistence mode is off on a data-center GPU",
    severity=Severity.WARNING,
    what="The driver's persistence mode is disabled on a Linux data-center GPU: the driver tears the GPU's state down "
    "whenever no process holds it, and sets it up again for the next one.",
    why="Each engine start and each health probe then pays the initialization (seconds on a multi-GPU node), the GPU "
    "state is lost between runs, and with nothing holding the GPUs a probe can race the engine's start. NVIDIA recommends "
    "nvidia-persistenced on every data-center node.",
    fix_by_hand="sudo systemctl enable --now nvidia-persistenced\n"
    "(or, until the next reboot: sudo nvidia-smi -pm 1). Persistence mode does not exist on Windows.",
    example="All 8 GPUs of an A100 node: Persistence Mode Disabled.",
    params=CommandsParams,
    fix_safety=DISPLAY_ONLY,
)
GPH031 = Code(
    code="GPH031",
    title="A GPU's compute mode keeps processes out",
    severity=Severity.WARNING,
    what="The GPU's compute mode is Prohibited (no CUDA context may be created), Exclusive_Process (one process at a "
    "time) or, on old drivers, Exclusive_Thread (one thread of one process).",
    why="Prohibited: no engine can start on the GPU. Exclusive_Process: a second process (a second engine, a health probe, "
    "a profiler) cannot open the GPU while the engine holds it, and fails with cudaErrorDevicesUnavailable.",
    fix_by_hand="If it is not intended: `sudo nvidia-smi -i N -c DEFAULT`; find what sets it at boot.",
    example="GPU 0: Compute Mode Exclusive_Process.",
)
GPH032 = Code(
    code="GPH032",
    title="MIG is enabled: engines see slices, not the GPU",
    severity=Severity.INFO,
    what="Multi-Instance GPU mode is enabled (or pending a reset): the GPU is split into instances, each with its own "
    "share of memory and compute.",
    why="An engine started on a MIG device sees only that slice's memory and bandwidth: a model sized for the whole GPU "
    "does not fit, and its decode ceiling is the slice's. The decode budget uses the slice.",
    fix_by_hand="Size the deployment for the slices (`nvidia-smi -L` lists them), or disable MIG: "
    "`sudo nvidia-smi -i N -mig 0` and reset the GPU.",
    example="GPU 0 (H100 80GB): MIG Mode Current Enabled; 7 instances of 1g.10gb.",
)
GPH033 = Code(
    code="GPH033",
    title="Other processes hold GPU memory before deployment",
    severity=Severity.INFO,
    what="Processes already hold memory on the GPU that the engine would use.",
    why="An engine sizes its KV cache from the free memory (vLLM's --gpu-memory-utilization is a share of the whole "
    "GPU): memory another process holds shrinks the cache and the batch, or makes the engine refuse to start. The decode "
    "budget subtracts it.",
    fix_by_hand="Find the processes (`nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv`) and stop "
    "them, or plan for the memory that is left.",
    example="GPU 0: 22 GiB held by python3 (pid 4121) before the engine starts.",
)
GPH040 = Code(
    code="GPH040",
    title="An NVLink is down or failing",
    severity=Severity.ERROR,
    what="An NVLink of the GPU is inactive although the topology connects the GPU by NVLink, or its links count errors.",
    why="Tensor-parallel decode exchanges activations every layer: a missing link moves that traffic to slower links or "
    "PCIe, and every step of the group waits. Errors that keep rising end in Xid 74 and a crashed engine.",
    fix_by_hand="Read the links (`nvidia-smi nvlink -s`, `nvidia-smi nvlink -e`) and the topology (`nvidia-smi topo -m`). "
    "Reset the GPUs or reboot; links that stay down need the board or its bridge serviced.",
    example="GPU 2: Link 5 inactive while topo -m shows NV18 between GPU 2 and GPU 3.",
)
GPH041 = Code(
    code="GPH041",
    title="The NVSwitch fabric is not ready",
    severity=Severity.ERROR,
    what="On a GPU board with NVSwitches (HGX), the fabric manager is not running or has not finished setting up the "
    "fabric (Fabric State not Completed, or its status an error).",
    why="Until the fabric is up, CUDA fails to initialize on these GPUs with error 802 (system not yet initialized): no engine starts.",
    fix_by_hand="sudo systemctl enable --now nvidia-fabricmanager\n"
    "Its version must match the driver's exactly; read its log (/var/log/fabricmanager.log) for the reason it stopped.",
    example="8 × H100 SXM on NVSwitches: Fabric State In Progress, nvidia-fabricmanager not running.",
)
GPH042 = Code(
    code="GPH042",
    title="NVIDIA GPUs on the PCI bus that the driver does not show",
    severity=Severity.ERROR,
    what="More NVIDIA GPUs are on the PCI bus than NVML (or nvidia-smi) lists, and no CUDA_VISIBLE_DEVICES or "
    "NVIDIA_VISIBLE_DEVICES hides them.",
    why="A GPU the driver lost (fallen off the bus, failed to initialize) cannot serve: a plan for 8 GPUs runs on 7, "
    "or tensor parallelism over 8 fails at start.",
    fix_by_hand="Read the kernel log for the missing GPU's bus address (`dmesg | grep -i nvrm`, Xid 79 or RmInitAdapter "
    "failed); reset or reboot; a GPU that stays missing needs reseating or service.",
    example="8 NVIDIA 3D controllers in lspci, 7 GPUs in nvidia-smi: 0000:b5:00.0 is missing.",
)

CODES: tuple[Code, ...] = (GPH001, GPH002, GPH003, GPH010, GPH011, GPH012, GPH013, GPH014)
CODES += (GPH020, GPH021, GPH022, GPH023, GPH024, GPH030, GPH031, GPH032, GPH033, GPH040, GPH041, GPH042)

# what a person does about each: the alert's action label, and the order a node's problems are read in
ACTIONS: dict[str, Action] = {
    GPH001.code: Action.RESEAT,
    GPH002.code: Action.BIOS,
    GPH003.code: Action.RESEAT,
    GPH010.code: Action.COOLING,
    GPH011.code: Action.COOLING,
    GPH012.code: Action.CONFIGURE,
    GPH013.code: Action.CONFIGURE,
    GPH014.code: Action.CONFIGURE,
    GPH020.code: Action.RESET,
    GPH021.code: Action.NONE,
    GPH022.code: Action.RESET,
    GPH023.code: Action.RESET,
    GPH024.code: Action.RMA,
    GPH030.code: Action.CONFIGURE,
    GPH031.code: Action.CONFIGURE,
    GPH032.code: Action.NONE,
    GPH033.code: Action.NONE,  # on a serving node the engine itself holds it: said, never an alert
    GPH040.code: Action.RESET,
    GPH041.code: Action.CONFIGURE,
    GPH042.code: Action.RESET,
}

HARDWARE_SLOWDOWN = frozenset({ClockEvent.HW_SLOWDOWN, ClockEvent.HW_THERMAL, ClockEvent.HW_POWER_BRAKE})
