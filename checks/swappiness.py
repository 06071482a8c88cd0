"""vm.swappiness: paging out weights or KV cache turns a steady decode into latency spikes."""

from __future__ import annotations

import re
from dataclasses import dataclass

from decode_doctor.check import Check, Needs
from decode_doctor.context import Context
from decode_doctor.model import Code, Finding, FixRef, Severity

SWAPPINESS = "/proc/sys/vm/swappiness"
THRESHOLD = 10
TARGET = 1

# systemd-sysctl / `sysctl --system` order: files collated by name across these directories (the
# first directory holding a name wins), applied in lexical order; /etc/sysctl.conf comes last.
SYSCTL_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d")
SYSCTL_CONF = "/etc/sysctl.conf"
SETTING = re.compile(r"^\s*-?\s*vm[./]swappiness\s*=\s*(\S+)\s*$")

SWAP001 = Code(
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
    fix_safety="Safe: writes 1 to /proc/sys/vm/swappiness and a sysctl.d file so it survives reboots; "
    "both are journaled and `decode-doctor undo` restores the previous value and file exactly.",
)
SWAP002 = Code(
    code="SWAP002",
    title="No swap is configured",
    severity=Severity.INFO,
    what="No swap device or file is active, so vm.swappiness has no effect.",
    why="Without swap, memory pressure goes straight to the OOM killer: an inference server that "
    "over-commits (too long a context, too many concurrent sequences) is killed rather than slowed. "
    "That is often the right trade for decode, but size the KV cache so it never happens.",
    fix_by_hand="Nothing to do for swappiness. Budget memory with `decode-doctor estimate`; if you want "
    "a safety margin, add a small swap file and set vm.swappiness=1.",
)
SWAP003 = Code(
    code="SWAP003",
    title="/proc/sys is read-only here (container)",
    severity=Severity.INFO,
    what="/proc/sys is mounted read-only, as inside most containers: vm.swappiness is the host's "
    "and cannot be changed from here.",
    why="The value still governs this container's memory: a high host swappiness pages out the "
    "inference server's weights and KV cache just the same.",
    fix_by_hand="Set it on the host (sudo sysctl -w vm.swappiness=1 plus a sysctl.d file), or ask the "
    "platform team to; Kubernetes treats vm.* as unsafe sysctls, so pod securityContext cannot set it.",
)
SWAP004 = Code(
    code="SWAP004",
    title="vm.swappiness will rise again at boot",
    severity=Severity.WARNING,
    what="The running value is fine, but the sysctl configuration applied at boot sets a value above 10.",
    why="After the next reboot the kernel pages out weights and KV cache again, and decode latency "
    "regresses with nothing changed in the deployment.",
    fix_by_hand="Edit the named sysctl file, or add a later one that sets vm.swappiness = 1.",
    fix_safety="Safe: writes a sysctl.d file that sets vm.swappiness = 1; journaled and undoable.",
)


@dataclass(frozen=True)
class PersistentSetting:
    value: str
    source: str  # the host path of the file that sets it last


def persistent_setting(ctx: Context, extra_file: tuple[str, str] | None = None) -> PersistentSetting | None:
    """The vm.swappiness value the boot-time sysctl configuration ends with, and which file sets it.

    extra_file (name, text) lets the fixer ask what the result would be with its file added.
    """
    chosen: dict[str, str] = {}  # basename → host path
    for directory in SYSCTL_DIRS:
        host_dir = ctx.host_path(directory)
        if not host_dir.is_dir():
            continue
        for entry in sorted(host_dir.iterdir()):
            if entry.name.endswith(".conf") and entry.name not in chosen:
                chosen[entry.name] = f"{directory}/{entry.name}"
    texts: list[tuple[str, str]] = []
    for name in sorted(set(chosen) | ({extra_file[0]} if extra_file else set())):
        if extra_file and name == extra_file[0]:
            texts.append((f"/etc/sysctl.d/{name}", extra_file[1]))
            continue
        text = ctx.read_text(chosen[name])
        if text is not None:
            texts.append((chosen[name], text))
    conf = ctx.read_text(SYSCTL_CONF)
    if conf is not None:
        texts.append((SYSCTL_CONF, conf))
    result = None
    for source, text in texts:
        for line in text.splitlines():
            match = SETTING.match(line)
            if match:
                result = PersistentSetting(match.group(1), source)
    return result


def _swap_devices(ctx: Context) -> list[str]:
    text = ctx.read_text("/proc/swaps") or ""
    return [line.split()[0] for line in text.splitlines()[1:] if line.strip()]


def _swap_total_kib(ctx: Context) -> int | None:
    total = ctx.meminfo_bytes("SwapTotal")
    return None if total is None else total // 1024


def proc_sys_read_only(ctx: Context) -> bool:
    """True when the mount holding /proc/sys is read-only (containers)."""
    best = ("", False)
    for line in (ctx.read_text("/proc/self/mounts") or ctx.read_text("/proc/mounts") or "").splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        mountpoint, options = parts[1], parts[3].split(",")
        if SWAPPINESS.startswith(mountpoint.rstrip("/") + "/") and len(mountpoint) >= len(best[0]):
            best = (mountpoint, "ro" in options)
    return best[1]


class Swappiness(Check):
    name = "swappiness"
    description = "vm.swappiness against the swap configured, now and at boot"
    codes = (SWAP001, SWAP002, SWAP003, SWAP004)
    needs = Needs(
        platforms=("linux",),
        files=(SWAPPINESS, "/proc/swaps", "/proc/meminfo", "/proc/mounts", "/etc/sysctl.d/*.conf", SYSCTL_CONF),
    )
    timeout_s = 5.0

    def run(self, ctx: Context) -> list[Finding]:
        raw = ctx.read_text(SWAPPINESS)
        if raw is None:
            return []  # the engine reports "passed"; nothing to judge without the tunable
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(f"{SWAPPINESS} holds {raw.strip()[:40]!r}, not a number") from None
        devices = _swap_devices(ctx)
        total_kib = _swap_total_kib(ctx)
        persistent = persistent_setting(ctx)
        evidence = {
            "swappiness": value,
            "source": SWAPPINESS,
            "swap_devices": devices,
            "swap_total_kib": total_kib,
            "persistent_value": persistent.value if persistent else None,
            "persistent_source": persistent.source if persistent else None,
        }
        tuned = ctx.read_text("/etc/tuned/active_profile")
        if tuned:
            evidence["tuned_profile"] = tuned.strip()
        read_only = proc_sys_read_only(ctx)
        has_swap = bool(devices) or bool(total_kib)
        findings = []
        if read_only:
            findings.append(self.finding("SWAP003", f"/proc/sys is read-only; vm.swappiness is {value} on the host.", evidence=evidence))
        if not has_swap:
            findings.append(self.finding("SWAP002", f"No swap is active; vm.swappiness ({value}) has no effect.", evidence=evidence))
            return findings
        fix = FixRef(
            fixer="swappiness",
            summary=f"set vm.swappiness={TARGET} now and at boot",
            params={"target": TARGET},
        )
        if value > THRESHOLD:
            swap = f"{total_kib / 1048576:.1f} GiB of swap" if total_kib else f"swap on {', '.join(devices)}"
            message = f"vm.swappiness is {value} (> {THRESHOLD}) with {swap}: weights and KV cache can be paged out."
            if read_only:
                message += " Change it on the host."
            findings.append(self.finding("SWAP001", message, evidence=evidence, path=SWAPPINESS, fix=None if read_only else fix))
        elif persistent and _as_int(persistent.value) > THRESHOLD:
            findings.append(
                self.finding(
                    "SWAP004",
                    f"vm.swappiness is {value} now, but {persistent.source} sets {persistent.value} at boot.",
                    evidence=evidence,
                    path=persistent.source,
                    fix=None if read_only else fix,
                )
            )
        return findings


def _as_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0
