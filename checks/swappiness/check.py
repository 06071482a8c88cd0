"""vm.swappiness: paging out weights or KV cache turns a steady decode into latency spikes."""

from __future__ import annotations

from dataclasses import dataclass

from decode_doctor.engine import Check, Context, EnvRow, Facts, Finding, FixRef, Metric, Needs, Sample

from .codes import CODES, RETIRED, SWAP001, SWAP003, SWAP004, TARGET, THRESHOLD, SwappinessParams
from .sysctl import SWAPPINESS, effective_conf_name, persistent_setting, proc_sys_read_only


@dataclass(frozen=True)
class SwappinessFacts(Facts):
    swappiness: int
    swap_devices: list[str]
    swap_total_kib: int | None
    persistent_value: str | None
    persistent_source: str | None
    proc_sys_read_only: bool
    tuned_profile: str | None = None

    @property
    def has_swap(self) -> bool:
        return bool(self.swap_devices) or bool(self.swap_total_kib)

    def swap_text(self) -> str:
        if not self.has_swap:
            return "no swap"
        size = f"{self.swap_total_kib / 1048576:.1f} GiB of swap" if self.swap_total_kib else "swap"
        return size + (f" on {', '.join(self.swap_devices)}" if self.swap_devices else "")

    def summary(self) -> list[str]:
        effect = "" if self.has_swap else " (it has no effect)"
        return [f"vm.swappiness {self.swappiness} with {self.swap_text()}{effect}"]

    def environment(self) -> list[EnvRow]:
        boot = f", {self.persistent_value} at boot ({self.persistent_source})" if self.persistent_value else ""
        return [
            EnvRow("vm.swappiness", f"{self.swappiness}{boot}", CODES),
            EnvRow("swap", self.swap_text(), (SWAP001,)),
        ]

    def metrics(self) -> list[Metric]:
        swap_bytes = (self.swap_total_kib or 0) * 1024
        return [
            Metric("decode_doctor_vm_swappiness", "vm.swappiness now.", (Sample({}, self.swappiness),)),
            Metric("decode_doctor_swap_bytes", "Swap configured, in bytes.", (Sample({}, swap_bytes),)),
        ]

    def compared(self) -> dict[str, str | float]:
        return {"vm.swappiness": str(self.swappiness), "swap": self.swap_text()}


def _swap_devices(ctx: Context) -> list[str]:
    text = ctx.read_text("/proc/swaps") or ""
    return [line.split()[0] for line in text.splitlines()[1:] if line.strip()]


def _as_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


class Swappiness(Check):
    name = "swappiness"
    looks_at = (
        "`vm.swappiness` against the swap configured, now and at boot (sysctl.d order); read-only `/proc/sys` in containers. Facts: the"
        " value, the swap, the boot-time setting"
    )
    description = "vm.swappiness against the swap configured, now and at boot"
    codes = CODES
    needs = Needs(platforms=("linux",))
    timeout_s = 5.0
    facts_type = SwappinessFacts
    retired = RETIRED

    def run(self, ctx: Context) -> list[Finding]:
        said = len(ctx.unjudged)
        raw = ctx.read_text(SWAPPINESS)
        if raw is None:
            if len(ctx.unjudged) == said:  # not already named (a FIFO where the tunable should be)
                where = "" if ctx.live_host else f" under {ctx.root}"
                ctx.not_judged("vm.swappiness", f"{SWAPPINESS} is not there{where}")
            return []
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(f"{SWAPPINESS} holds {raw.strip()[:40]!r}, not a number") from None
        try:
            total = ctx.meminfo_bytes("SwapTotal")
        except ValueError:  # a garbled line: the swap devices in /proc/swaps still say whether there is swap
            total = None
        persistent = persistent_setting(ctx)
        tuned = ctx.read_text("/etc/tuned/active_profile")
        facts = SwappinessFacts(
            swappiness=value,
            swap_devices=_swap_devices(ctx),
            swap_total_kib=None if total is None else total // 1024,
            persistent_value=persistent.value if persistent else None,
            persistent_source=persistent.source if persistent else None,
            proc_sys_read_only=proc_sys_read_only(ctx),
            tuned_profile=tuned.strip() if tuned else None,
        )
        ctx.publish(facts)
        evidence = {"source": SWAPPINESS, **facts.to_dict()}
        findings = []
        read_only = facts.proc_sys_read_only
        if read_only:
            message = f"/proc/sys is read-only; vm.swappiness is {value} on the host."
            findings.append(self.finding(SWAP003, message, evidence=evidence))
        if not facts.has_swap:
            return findings
        fix = None if read_only else FixRef(f"set vm.swappiness={TARGET} now and at boot", SwappinessParams(TARGET))
        # A fix must take effect: with no sysctl.d name read after the file that sets the value at
        # boot (/etc/sysctl.conf is read after all of them), none is offered; the message says what to edit.
        boot_fix = fix if fix is not None and effective_conf_name(ctx, f"vm.swappiness = {TARGET}\n") else None
        if value > THRESHOLD:
            message = f"vm.swappiness is {value} (> {THRESHOLD}) with {facts.swap_text()}: weights and KV cache can be paged out."
            if read_only:
                message += " Change it on the host."
            findings.append(self.finding(SWAP001, message, evidence=evidence, path=SWAPPINESS, fix=fix))
        elif persistent and _as_int(persistent.value) > THRESHOLD:
            message = f"vm.swappiness is {value} now, but {persistent.source} sets {persistent.value} at boot."
            if fix is not None and boot_fix is None:
                message += f" No sysctl.d file is read after it: edit {persistent.source} (vm.swappiness = {TARGET})."
            findings.append(self.finding(SWAP004, message, evidence=evidence, path=persistent.source, fix=boot_fix))
        return findings
