"""vm.swappiness: paging out weights or KV cache turns a steady decode into latency spikes."""

from __future__ import annotations

from dataclasses import dataclass

from decode_doctor.engine import Check, Context, EnvRow, Facts, Finding, FixRef, Metric, Needs, Sample
from decode_doctor.i18n import N_, _

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
            return _("no swap")
        size = _("{size:.1f} GiB of swap", size=self.swap_total_kib / 1048576) if self.swap_total_kib else _("swap")
        return size + (_(" on {devices}", devices=", ".join(self.swap_devices)) if self.swap_devices else "")

    def summary(self) -> list[str]:
        effect = "" if self.has_swap else _(" (it has no effect)")
        return [_("vm.swappiness {value} with {swap}{effect}", value=self.swappiness, swap=self.swap_text(), effect=effect)]

    def environment(self) -> list[EnvRow]:
        boot = (
            _(", {value} at boot ({source})", value=self.persistent_value, source=self.persistent_source) if self.persistent_value else ""
        )
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
    description = N_("vm.swappiness against the swap configured, now and at boot")
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
                missing = (
                    _("{path} is not there", path=SWAPPINESS)
                    if ctx.live_host
                    else _("{path} is not there under {root}", path=SWAPPINESS, root=ctx.root)
                )
                ctx.not_judged("vm.swappiness", missing)
            return []
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(_("{path} holds {value!r}, not a number", path=SWAPPINESS, value=raw.strip()[:40])) from None
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
            message = _("/proc/sys is read-only; vm.swappiness is {value} on the host.", value=value)
            findings.append(self.finding(SWAP003, message, evidence=evidence))
        if not facts.has_swap:
            return findings
        fix = None if read_only else FixRef(_("set vm.swappiness={target} now and at boot", target=TARGET), SwappinessParams(TARGET))
        # A fix must take effect: with no sysctl.d name read after the file that sets the value at
        # boot (/etc/sysctl.conf is read after all of them), none is offered; the message says what to edit.
        boot_fix = fix if fix is not None and effective_conf_name(ctx, f"vm.swappiness = {TARGET}\n") else None
        if value > THRESHOLD:
            message = _(
                "vm.swappiness is {value} (> {threshold}) with {swap}: weights and KV cache can be paged out.",
                value=value, threshold=THRESHOLD, swap=facts.swap_text(),
            )  # fmt: skip
            if read_only:
                message += _(" Change it on the host.")
            findings.append(self.finding(SWAP001, message, evidence=evidence, path=SWAPPINESS, fix=fix))
        elif persistent and _as_int(persistent.value) > THRESHOLD:
            message = _(
                "vm.swappiness is {value} now, but {source} sets {boot} at boot.",
                value=value,
                source=persistent.source,
                boot=persistent.value,
            )
            if fix is not None and boot_fix is None:
                message += _(
                    " No sysctl.d file is read after it: edit {source} (vm.swappiness = {target}).", source=persistent.source, target=TARGET
                )
            findings.append(self.finding(SWAP004, message, evidence=evidence, path=persistent.source, fix=boot_fix))
        return findings
