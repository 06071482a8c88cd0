"""The GPU health check: a reading of the GPUs (NVML and sysfs live, live.py; a pasted nvidia-smi or
lspci capture, captures.py) judged by judge.py. Nothing is said of a healthy GPU; what the reading
could not show is not judged, with why."""

from __future__ import annotations

from decode_doctor.engine import Analysis, Check, CommandsParams, Context, Finding, FixRef, Needs, NotJudged, SkipCheck
from decode_doctor.i18n import N_, _

from .codes import CODES, GPH030
from .contract import GpuHealth, GpuHealthFacts
from .judge import Judgement, Verdict, judge
from .reading import HostReading

PERSISTENCE_COMMANDS = ("sudo systemctl enable --now nvidia-persistenced",)


class GpuHealthCheck(Check):
    name = "gpu-health"
    looks_at = (
        "Per NVIDIA GPU, what decode feels without a crash to say so, as DCGM's deployment diagnostics and GPUd see it: a PCIe link "
        "narrower than both the GPU and its slot allow (GPH001; a board wired x8 by design is not downtrained), a generation below "
        "both ends' while busy (GPH002; an idle Gen1 link is power saving), PCIe replays (GPH003); hardware clock slowdown (GPH010), "
        "SW thermal slowdown (GPH011), a power limit below its default (GPH012), a busy GPU's memory clock below its max (GPH013), "
        "application clocks locked low (GPH014); uncorrectable ECC errors since the driver loaded (GPH020) or in the GPU's lifetime "
        "(GPH021), retired pages pending (GPH022), a row remap pending a reset (GPH023) or failed (GPH024, RMA); persistence mode off "
        "on a Linux data-center GPU (GPH030), compute mode Prohibited or Exclusive_Process (GPH031), MIG (GPH032), memory other "
        "processes hold (GPH033); NVLinks down where the topology says NV# (GPH040), an NVSwitch fabric not ready or its manager "
        "not running (GPH041), NVIDIA GPUs on the PCI bus that the driver does not show (GPH042). Live through NVML and sysfs; from "
        "`nvidia-smi -q` (whole or fragments), `-q -x`, `--query-gpu` CSV, the default table, `nvlink -s`, `topo -m` and `lspci -vv`"
    )
    description = N_("GPU health that decode feels: PCIe links, clock slowdowns, memory faults, modes, NVLink and fabric")
    codes = CODES
    needs = Needs(platforms=("linux",))
    timeout_s = 30.0
    facts_type = GpuHealthFacts
    pasted = N_("nvidia-smi -q, -q -x, --query-gpu CSV and its table, nvidia-smi nvlink -s and topo -m, lspci -vv")

    def run(self, ctx: Context) -> list[Finding]:
        from .live import read_live

        reading = read_live(ctx)
        if isinstance(reading, str):
            if reading:  # GPUs are there and could not be read: said; none at all: the check does not apply
                ctx.not_judged(_("the NVIDIA GPUs' health"), reading)
                return []
            raise SkipCheck(_("no NVIDIA GPU"))
        judgement = judge(reading)
        for item in judgement.unjudged:
            ctx.not_judged(item.what.text(), item.why.text())
        ctx.publish(facts_of(reading, judgement))
        return [self._finding(verdict, "") for verdict in judgement.verdicts]

    @classmethod
    def analyze(cls, text: str, source: str) -> Analysis | None:
        from .captures import read_capture

        reading = read_capture(text)
        if reading is None or not any(gpu.shows_health for gpu in reading.gpus):
            return None  # a topology, or a list of GPUs, says nothing of their health: no verdict to give
        check = cls()
        judgement = judge(reading)
        cited = [check._finding(verdict, source) for verdict in judgement.verdicts]
        unjudged = [NotJudged(item.what.text(), item.why.text()) for item in judgement.unjudged]
        return Analysis(cited, facts_of(reading, judgement), reading.kind, unjudged)

    def _finding(self, verdict: Verdict, source: str) -> Finding:
        message = verdict.message.text()
        evidence = dict(verdict.evidence)
        if source:
            line = verdict.gpu.line if verdict.gpu is not None else None
            evidence["source"] = source
            if line is not None:
                evidence["line"] = line
                message += _(" ({source}, line {line})", source=source, line=line)
            else:
                message += _(" ({source})", source=source)
        if verdict.code is GPH030:
            summary = _("enable the driver's persistence daemon: {commands}", commands="; ".join(PERSISTENCE_COMMANDS))
            fix = FixRef(summary, CommandsParams(_("enable the driver's persistence daemon"), PERSISTENCE_COMMANDS))
            return self.finding(GPH030, message, evidence=evidence, fix=fix)
        return self.finding(verdict.code, message, evidence=evidence, severity=verdict.severity)


def facts_of(reading: HostReading, judgement: Judgement) -> GpuHealthFacts:
    gpus = []
    for gpu in reading.gpus:
        codes = tuple(dict.fromkeys(v.code.code for v in judgement.verdicts if v.gpu is gpu))
        held = sum(p.used_mib or 0 for p in gpu.processes) if gpu.processes is not None else None
        gpus.append(GpuHealth(gpu.index, gpu.name, gpu.uuid, codes, held, gpu.mig_enabled))
    host = tuple(dict.fromkeys(v.code.code for v in judgement.verdicts if v.gpu is None))
    return GpuHealthFacts(reading.kind, tuple(gpus), host)
