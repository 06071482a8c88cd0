"""The swappiness feature's codes, each with its explanation in fixed sections, and the typed
value its fix takes."""

from __future__ import annotations

from dataclasses import dataclass

from decode_doctor.engine import Code, FixableCode, FixParams, Severity

THRESHOLD = 10
TARGET = 1


@dataclass(frozen=True)
class SwappinessParams(FixParams):
    """Set vm.swappiness to target now (/proc/sys) and at boot (a sysctl.d file)."""

    target: int = TARGET


SWAP001 = FixableCode[SwappinessParams](
    code="SWAP001",
    title="vm.swappiness is high on a host with swap",
    severity=Severity.WARNING,
    what="The kernel's vm.swappiness is above 10 while swap is enabled, so under memory pressure the "
    "kernel readily pages out anonymous memory instead of dropping page cache.",
    why="An inference server keeps model weights and the KV cache in anonymous (or pinned) memory. "
    "When they are paged out, every decode step that touches them waits for the disk: tokens/s "
    "collapses and tail latency spikes by orders of magnitude. On unified-memory boards (Jetson), "
    "the GPU allocates from the same pool and allocations fail or stall instead.",
    fix_by_hand="sudo sysctl -w vm.swappiness=1\n"
    "echo 'vm.swappiness = 1' | sudo tee /etc/sysctl.d/90-decode-doctor.conf\n"
    "A tuned profile (tuned-adm active) or a later sysctl.d file can set it again at boot: check both.",
    example="vm.swappiness = 60 (the distribution default) with 8 GiB of swap on an 80 GiB host.",
    params=SwappinessParams,
    fix_safety="Safe: writes 1 to /proc/sys/vm/swappiness and a sysctl.d file so it survives reboots; "
    "both are journaled and `decode-doctor undo` restores the previous value and file exactly.",
    concerns=("memory",),
)
SWAP003 = Code(
    code="SWAP003",
    title="/proc/sys is read-only here (container)",
    severity=Severity.INFO,
    what="/proc/sys is mounted read-only, as inside most containers: vm.swappiness is the host's and cannot be changed from here.",
    why="The value still governs this container's memory: a high host swappiness pages out the "
    "inference server's weights and KV cache just the same.",
    fix_by_hand="Set it on the host (sudo sysctl -w vm.swappiness=1 plus a sysctl.d file), or ask the "
    "platform team to; vm.swappiness is a node-level sysctl (not namespaced), so no pod securityContext can set it.",
    example="Inside a Kubernetes pod, /proc/sys is mounted read-only and the host's vm.swappiness is 60.",
)
SWAP004 = FixableCode[SwappinessParams](
    code="SWAP004",
    title="vm.swappiness will rise again at boot",
    severity=Severity.WARNING,
    what="The running value is fine, but the sysctl configuration applied at boot sets a value above 10.",
    why="After the next reboot the kernel pages out weights and KV cache again, and decode latency "
    "regresses with nothing changed in the deployment.",
    fix_by_hand="Edit the named sysctl file, or add a later one that sets vm.swappiness = 1.",
    params=SwappinessParams,
    fix_safety="Safe: writes a sysctl.d file that sets vm.swappiness = 1; journaled and undoable.",
    concerns=("memory",),
    example="vm.swappiness is 1 now (set by hand), but /etc/sysctl.d/99-tuning.conf sets 60 at the next boot.",
)

CODES = (SWAP001, SWAP003, SWAP004)
RETIRED = {"SWAP002": "no swap is now a fact (the environment table's swap row; check --verbose)"}
