"""AMD GPUs, Jetson power modes and Rockchip NPU drivers: what is there, read-only, and what slows
decode on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from decode_doctor.engine import Analysis, Check, Context, EnvRow, Facts, Finding, Needs, Severity, SkipCheck, device_with_memory
from decode_doctor.i18n import N_, _

from .amd import AmdGpu
from .codes import ACC001, ACC010, ACC011, ACC020, CODES
from .jetson import JetsonPower

TOOL_TIMEOUT_S = 10.0  # four tools at most: within the check's 60 s
DRM = "/sys/class/drm"


@dataclass(frozen=True)
class AcceleratorFacts(Facts):
    amd: list[AmdGpu] = field(default_factory=list)
    amd_source: str | None = None
    rocm: str | None = None
    jetson: JetsonPower | None = None
    rknpu: str | None = None
    soc: str | None = None

    def summary(self) -> list[str]:
        lines = []
        for gpu in self.amd:
            memory = f"{gpu.memory_mib / 1024:.0f} GiB" if gpu.memory_mib else _("memory unknown")
            details = ", ".join(x for x in (gpu.gfx, f"amdgpu {gpu.driver}" if gpu.driver else None) if x)
            lines.append(
                _(
                    "AMD GPU {index}: {name} ({details})",
                    index=gpu.index,
                    name=gpu.name,
                    details=_(", ").join([memory, gpu.bandwidth_class or _("memory type not reported"), *([details] if details else [])]),
                )
            )
        if self.rocm:
            lines.append(f"ROCm {self.rocm}")
        if self.jetson:
            emc = f", EMC {self.jetson.emc.current // 1_000_000}/{self.jetson.emc.maximum // 1_000_000} MHz" if self.jetson.emc else ""
            lines.append(_("Jetson power mode {mode}{emc}", mode=self.jetson.mode or _("not reported"), emc=emc))
        if self.rknpu:
            lines.append(_("Rockchip NPU driver {version}", version=self.rknpu) + (_(" on {soc}", soc=self.soc) if self.soc else ""))
        return lines

    def environment(self) -> list[EnvRow]:
        rows = [EnvRow(f"AMD GPU {g.index}", device_with_memory(g.name, g.memory_mib), (ACC001,)) for g in self.amd]
        if self.rocm:
            rows.append(EnvRow("ROCm", self.rocm, (ACC001,)))
        if self.jetson:
            rows.append(EnvRow(_("Jetson power mode"), self.jetson.mode or _("not read"), (ACC010, ACC011), known=bool(self.jetson.mode)))
        if self.rknpu:
            rows.append(EnvRow(_("RKNPU driver"), self.rknpu, (ACC020,)))
        return rows


def amd_from_sysfs(ctx: Context) -> list[AmdGpu]:
    base = ctx.host_path(DRM)
    if not base.is_dir():
        return []
    found = []
    for card in sorted(base.iterdir())[:256]:
        name = card.name
        if not (name.startswith("card") and name[4:].isdecimal()):
            continue
        device = f"{DRM}/{name}/device"
        vendor = (ctx.read_text(f"{device}/vendor", limit=64) or "").strip()
        klass = (ctx.read_text(f"{device}/class", limit=64) or "").strip()
        if vendor != "0x1002" or not klass.startswith(("0x03", "0x12")):
            continue
        product = (ctx.read_text(f"{device}/product_name", limit=256) or "").strip()
        ident = (ctx.read_text(f"{device}/device", limit=64) or "").strip()
        total = (ctx.read_text(f"{device}/mem_info_vram_total", limit=64) or "").strip()
        memory = int(total) >> 20 if total.isdecimal() else None
        found.append(AmdGpu(int(name[4:]), product or f"AMD GPU {ident or name}", memory))
    return found


def _tool_amd(ctx: Context) -> tuple[list[AmdGpu], str | None]:
    from .amd import parse

    for argv in (
        ["amd-smi", "static", "--asic", "--vram", "--driver", "--bus", "--json"],
        ["rocm-smi", "--showproductname", "--showmeminfo", "vram", "--showdriverversion", "--json"],
    ):
        if ctx.which(argv[0]):
            record = ctx.run(argv, timeout_s=TOOL_TIMEOUT_S)
            if record.ok:
                try:
                    return parse(record.stdout), argv[0]
                except ValueError:
                    continue
    return [], None


class Accelerators(Check):
    name = "accelerators"
    looks_at = (
        "AMD GPUs from `amd-smi static --json`, else `rocm-smi --json`, else amdgpu's sysfs (name, memory, gfx target, driver, "
        "bandwidth class, ROCm from `/opt/rocm/.info/version`; no `/dev/kfd` is ACC001); Jetson power mode and clocks from `nvpmodel "
        "-q` and `jetson_clocks --show` (below MAXN, ACC010; memory clock left to scale, ACC011); the Rockchip rknpu driver version "
        "from debugfs against what RKLLM needs (ACC020). All read-only. Facts: the GPUs, the mode, the NPU driver"
    )
    description = N_("AMD GPUs (amd-smi, rocm-smi, sysfs), Jetson power mode and clocks, Rockchip NPU driver")
    codes = CODES
    needs = Needs(platforms=("linux",))
    timeout_s = 60.0
    facts_type = AcceleratorFacts
    pasted = N_("amd-smi static, rocm-smi --json, nvpmodel -q, jetson_clocks --show, the rknpu driver version")

    def run(self, ctx: Context) -> list[Finding]:
        from .amd import rocm_version
        from .jetson import parse as parse_jetson
        from .rknpu import find_version

        findings: list[Finding] = []
        sysfs = amd_from_sysfs(ctx)
        tool, source = _tool_amd(ctx) if sysfs or ctx.which("amd-smi") or ctx.which("rocm-smi") else ([], None)
        amd = tool or sysfs
        if sysfs and not ctx.host_path("/dev/kfd").exists():
            message = _(
                "{count} AMD GPU(s) ({names}) but no /dev/kfd: ROCm cannot use them.",
                count=len(sysfs),
                names=", ".join(g.name for g in sysfs),
            )
            findings.append(self.finding(ACC001, message, evidence={"gpus": [g.name for g in sysfs]}))
        jetson = None
        failed: list[str] = []  # the Jetson tools that hung or failed, for the skip reason
        tegra = ctx.read_text("/etc/nv_tegra_release", limit=4096) is not None
        if tegra and not ctx.live_devices:  # nvpmodel and jetson_clocks answer for the board they run on, not that one
            ctx.not_judged(_("the Jetson power mode and clocks"), ctx.elsewhere)
        elif tegra:
            outputs = []
            for argv in (["nvpmodel", "-q"], ["jetson_clocks", "--show"]):
                if ctx.which(argv[0]):
                    record = ctx.run(argv, timeout_s=TOOL_TIMEOUT_S)
                    outputs.append(record.stdout if record.ok else "")
                    if not record.ok:
                        failed.append(f"{' '.join(argv)}: {record.error or f'exit {record.exit_code}'}")
            jetson = parse_jetson("\n".join(outputs)) if any(outputs) else None
            findings.extend(jetson_findings(self, jetson, "nvpmodel -q / jetson_clocks --show") if jetson else [])
        rknpu = None
        for path in ("/sys/kernel/debug/rknpu/version", "/sys/module/rknpu/version"):
            text = ctx.read_text(path, limit=4096)
            found = find_version(text or "") or (find_version(f"RKNPU driver: v{text.strip()}") if text and text.strip() else None)
            if found:
                rknpu = found[0]
                findings.extend(rknpu_findings(self, rknpu, {"source": path, "text": found[2]}))
                break
        compatible = (ctx.read_text("/proc/device-tree/compatible", limit=4096) or "").split("\x00")
        soc = next((c.split(",", 1)[1] for c in compatible if c.startswith("rockchip,rk")), None)
        if not amd and jetson is None and rknpu is None and not ctx.unjudged:
            if failed:
                raise SkipCheck(_("no AMD GPU, Jetson power tools or Rockchip NPU driver (Jetson: {failed})", failed="; ".join(failed)))
            raise SkipCheck(_("no AMD GPU, Jetson power tools or Rockchip NPU driver"))
        rocm = rocm_version(ctx.read_text("/opt/rocm/.info/version", limit=256))
        ctx.publish(AcceleratorFacts(amd, source or ("sysfs" if amd else None), rocm, jetson, rknpu, soc))
        return findings

    @classmethod
    def analyze(cls, text: str, source: str) -> Analysis | None:
        from .amd import looks_like_amd, parse
        from .jetson import looks_like_jetson
        from .jetson import parse as parse_jetson
        from .rknpu import find_version, looks_like_rknpu

        check = cls()
        if looks_like_amd(text):
            try:
                gpus = parse(text)
            except ValueError:
                return None
            kind = "amd-smi" if "MARKET_NAME" in text[:8192] or '"market_name"' in text[:8192] else "rocm-smi"
            return Analysis([], AcceleratorFacts(gpus, kind), kind)
        if looks_like_jetson(text):
            jetson = parse_jetson(text)
            return Analysis(jetson_findings(check, jetson, source), AcceleratorFacts(jetson=jetson), "nvpmodel / jetson_clocks")
        if looks_like_rknpu(text) and (found := find_version(text)):
            version, number, line = found
            cite = {"source": source, "line": number, "text": line[:300]}
            return Analysis(rknpu_findings(check, version, cite), AcceleratorFacts(rknpu=version), "rknpu driver version")
        return None


def jetson_findings(check: Check, jetson: JetsonPower, source: str) -> list[Finding]:
    findings = []
    cite: dict[str, Any] = {"source": source, "mode": jetson.mode}
    if jetson.mode_line:
        cite["line"] = jetson.mode_line
    if jetson.mode and not jetson.maximum_mode:
        gpu = _("; the GPU is capped at {mhz:.0f} MHz", mhz=jetson.gpu.maximum / 1e6) if jetson.gpu else ""
        cpus = _(", CPUs online {cpus}", cpus=jetson.online_cpus) if jetson.online_cpus else ""
        machine = _(" on {machine}", machine=jetson.machine) if jetson.machine else ""
        where = _(" ({source}, line {line})", source=source, line=jetson.mode_line) if jetson.mode_line and "/" not in source else ""
        message = _(
            "Power mode {mode}{machine}{cpus}{gpu}: switch to MAXN (or MAXN_SUPER) for full decode speed.{where}",
            mode=jetson.mode, machine=machine, cpus=cpus, gpu=gpu, where=where,
        )  # fmt: skip
        findings.append(check.finding(ACC010, message, evidence=cite))
    unlocked = []
    if jetson.emc and jetson.emc.current < jetson.emc.maximum and not jetson.emc_locked:
        unlocked.append(
            _("EMC (memory) at {current:.0f} of {maximum:.0f} MHz", current=jetson.emc.current / 1e6, maximum=jetson.emc.maximum / 1e6)
        )
    if jetson.gpu and jetson.gpu.minimum < jetson.gpu.maximum and jetson.gpu.current < jetson.gpu.maximum:
        unlocked.append(_("GPU at {current:.0f} of {maximum:.0f} MHz", current=jetson.gpu.current / 1e6, maximum=jetson.gpu.maximum / 1e6))
    if unlocked:
        message = _(
            "Clocks scale with load ({clocks}): sudo jetson_clocks pins them for serving and benchmarks.", clocks=_("; ").join(unlocked)
        )
        findings.append(check.finding(ACC011, message, evidence={**cite, "emc": str(jetson.emc), "gpu": str(jetson.gpu)}))
    return findings


def rknpu_findings(check: Check, version: str, cite: dict[str, Any]) -> list[Finding]:
    from .rknpu import RKLLM_CURRENT, RKLLM_MINIMUM, version_key

    key = version_key(version)
    if key < RKLLM_MINIMUM:
        where = _(" ({source}, line {line})", source=cite["source"], line=cite["line"]) if "line" in cite else ""
        message = _(
            "RKNPU driver {version} is older than 0.9.7, the oldest RKLLM accepts; current RKLLM ships driver 0.9.8.{where}",
            version=version,
            where=where,
        )
        return [check.finding(ACC020, message, evidence={**cite, "version": version})]
    if key < RKLLM_CURRENT:
        message = _(
            "RKNPU driver {version}: RKLLM runs, but models converted with current RKLLM releases expect driver 0.9.8.", version=version
        )
        return [check.finding(ACC020, message, evidence={**cite, "version": version}, severity=Severity.INFO)]
    return []
