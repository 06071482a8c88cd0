"""The GPU stack: driver, the CUDA it supports, the toolkit, PyTorch's CUDA build and cuDNN, and
whether each pair works together; driver failures told apart; Jetson boards recognised.

The check orchestrates what each module reads: NVML and nvidia-smi (smi.py), the kernel logs
(kernellog.py), the board and PCI bus (board.py), PyTorch (torchprobe.py), the toolkits
(toolkits.py) and the CUDA paths (cudapaths.py); software.py judges versions against the driver.
"""

from __future__ import annotations

import importlib.util

from decode_doctor.engine import Analysis, Check, Context, Finding, Needs, SkipCheck
from decode_doctor.i18n import N_, _

from .board import nvidia_pci_devices, tegra_board
from .codes import CODES, GPU015, GPU024, GPU030, RETIRED
from .contract import DriverInfo, GpuFacts, TorchBuild
from .cudapaths import path_findings
from .kernellog import kernel_findings, kernel_logs
from .options import GpuOptions
from .procdriver import read_proc_driver
from .smi import read_nvidia_smi
from .software import judge_software
from .toolkits import toolkits
from .torchprobe import probe_torch


class GpuStack(Check):
    name = "gpu"
    looks_at = (
        "NVML (the `gpu` extra) or `nvidia-smi -q -x` (text fallback, driver 610's KMD/UMD fields); driver failures told apart (no "
        "driver, driver/library mismatch with the kernel log's API-mismatch line, no devices, Unknown Error, fallen off the bus, "
        'nvidia-smi missing or hung; "GPU is lost" and exit code 15 as a GPU off the bus, exit code 9 as no driver whatever the '
        'wording; NVIDIA Xid lines counted, GPU018, Xid 79 as GPU014); "Not Found"/"N/A" are never versions; CUDA toolkit (nvcc, '
        "`/usr/local/cuda*/version.json`), PyTorch's CUDA build and cuDNN read without importing torch (`--python` picks the serving "
        "interpreter), each judged against NVIDIA's driver table and minor-version compatibility (`checks/gpu/data/cuda-drivers.json`, "
        "source named there); baseline CUDA 11.8 / cuDNN 8.6 / PyTorch 2.0; Jetson boards. Facts: GPUs, memory, architecture, MIG, "
        "theoretical bandwidth, driver, toolkits, PyTorch. No GPU: the CUDA toolkits and PyTorch's CUDA build with the driver they will"
        " need (GPU024), else skipped, said once. CUDA path hygiene: toolkits that PATH, LD_LIBRARY_PATH and CUDA_HOME pick differently"
        " (GPU027), a toolkit's libcuda stub on the loader path (GPU028), a GCC newer than the toolkit's own `crt/host_config.h` allows"
        " (GPU029), PyTorch's CUDA against the toolkit an extension build would use (GPU031); from pasted texts a wheel without the "
        "GPU's architecture (GPU025) and CUDA unavailable (GPU026)"
    )
    description = N_("NVIDIA driver, CUDA, toolkit, PyTorch and cuDNN versions and whether they work together")
    codes = CODES
    needs = Needs(platforms=("linux",))
    options = GpuOptions
    timeout_s = 45.0
    facts_type = GpuFacts
    pasted = N_("nvidia-smi's table, -q and -q -x and its errors, kernel logs (Xids), torch/vLLM collect_env, PyTorch's CUDA errors")
    retired = RETIRED

    def run(self, ctx: Context) -> list[Finding]:
        from .nvidia import probe_nvml

        findings: list[Finding] = []
        info: DriverInfo | None = probe_nvml() if ctx.live_devices else None
        smi_failed = False
        if info is None:
            info, smi_failed = read_nvidia_smi(self, ctx, findings)
        logs = kernel_logs(ctx)
        findings.extend(kernel_findings(self, logs.texts, findings))
        board = tegra_board(ctx)
        pci = nvidia_pci_devices(ctx)
        driver_dir = ctx.host_path("/proc/driver/nvidia").is_dir()
        if info is None and driver_dir and not smi_failed and board is None:
            # the kernel module is loaded: what it says of itself, and what only NVML could have said
            info = read_proc_driver(ctx)
            if info is not None:
                ctx.not_judged(_("the GPUs' memory and the CUDA version the driver supports"), unreachable_nvml(ctx))
        if info is None and board is None and not pci and not driver_dir and not findings:
            return self._without_gpu(ctx)
        if logs.unread:
            ctx.not_judged(_("Xid errors and driver events in the kernel log"), logs.unread)
        if board is not None:
            message = _("{board}. CPU and GPU share the system RAM.", board=board.text)
            findings.append(self.finding(GPU030, message, evidence={"model": board.model, "release": board.release}))
        elif info is None and pci and not driver_dir and not smi_failed and not ctx.installed("nvidia-smi"):
            message = _("NVIDIA GPU(s) at {addresses} but no nvidia-smi: the driver is not installed.", addresses=", ".join(pci))
            findings.append(self.finding(GPU015, message, evidence={"pci_devices": pci}))
        # a node agent's own Python is its container's, not the node's serving one (unless --python names it)
        torch = serving_torch(ctx, default=not ctx.same_host)
        if isinstance(torch, str):
            ctx.not_judged(_("PyTorch's CUDA build"), torch)
        facts = GpuFacts(
            driver=info.driver_version if info else None,
            cuda=info.cuda_version if info else None,
            source=info.source if info else None,
            attached=info.attached if info else None,
            devices=info.devices if info else (),
            notes=info.notes if info else (),
            unified_memory=board is not None,
            board=board.text if board else None,
            toolkits=tuple(toolkits(ctx)),
            torch=torch if isinstance(torch, TorchBuild) else None,
        )
        ctx.publish(facts)
        findings.extend(judge_software(self, facts, bool(facts.devices) or bool(pci) or board is not None))
        return findings + path_findings(self, ctx, facts.torch.cuda if facts.torch else None)

    @classmethod
    def analyze(cls, text: str, source: str) -> Analysis | None:
        from .analyze import analyze

        return analyze(cls(), text, source)

    def _without_gpu(self, ctx: Context) -> list[Finding]:
        """No GPU yet: the CUDA toolkits and PyTorch's CUDA build, and the driver they will need."""
        from .nvidia import min_driver, minor_floor

        found = toolkits(ctx)
        probed = serving_torch(ctx, default=bool(importlib.util.find_spec("torch")))
        torch = probed if isinstance(probed, TorchBuild) else None
        if isinstance(probed, str):
            ctx.not_judged(_("PyTorch's CUDA build"), probed)
        facts = GpuFacts(source="no GPU", toolkits=tuple(found), torch=torch)
        if not found and not (torch and torch.cuda):
            if ctx.unjudged:  # a PyTorch that could not be read is said (not judged), never skipped unsaid
                ctx.publish(facts)
                return []
            raise SkipCheck(_("no NVIDIA GPU (no NVML, nvidia-smi, /proc/driver/nvidia or NVIDIA PCI device)"))
        ctx.publish(facts)
        needs, said = [], []  # the evidence in English (machine-read), the message in the user's language
        items = [
            (f"CUDA toolkit {t.version} ({t.source})", _("CUDA toolkit {version} ({source})", version=t.version, source=t.source), t.judged)
            for t in found
        ]
        if torch and torch.cuda:
            label = _("PyTorch {version} built for CUDA {cuda}", version=torch.version, cuda=torch.cuda)
            items.append((f"PyTorch {torch.version} built for CUDA {torch.cuda}", label, torch.cuda))
        for english, label, cuda in items:
            row, floor = min_driver(cuda), minor_floor(cuda)
            if row is not None:
                needs.append(f"{english} needs driver ≥ {row[1]}" + (f" (≥ {floor} with minor-version compatibility)" if floor else ""))
                minor = _(" (≥ {floor} with minor-version compatibility)", floor=floor) if floor else ""
                said.append(_("{label} needs driver ≥ {driver}", label=label, driver=row[1]) + minor)
        listed = _("; ").join(said) + _(".") if said else _("The installed CUDA software is listed in the facts.")
        message = _("No NVIDIA GPU here yet. ") + listed
        findings = [self.finding(GPU024, message, evidence={"needs": needs})]
        return findings + judge_software(self, facts, gpu_host=False) + path_findings(self, ctx, torch.cuda if torch else None)


def serving_torch(ctx: Context, default: bool) -> TorchBuild | str | None:
    """The serving Python's PyTorch: the one --python names, else this interpreter's when default says
    it stands for the host's; for another host's files none is run (this machine's Python is not
    theirs), and a --python named for them is not judged."""
    if not ctx.live_devices:
        if ctx.option(GpuOptions).python:
            ctx.not_judged(_("PyTorch's CUDA build"), ctx.elsewhere)
        return None
    return probe_torch(ctx) if ctx.option(GpuOptions).python or default else None


def unreachable_nvml(ctx: Context) -> str:
    """Why neither NVML nor nvidia-smi answered although the driver is loaded, with the next step."""
    if not ctx.live_devices:
        return _("the host under --root is not this machine (--same-host says it is), so NVML was not asked")
    if ctx.env.get("NVIDIA_VISIBLE_DEVICES") is None and not ctx.live_host:
        return _(
            "neither NVML nor nvidia-smi answers in this container: run it with the NVIDIA runtime "
            "(runtimeClassName: nvidia, NVIDIA_VISIBLE_DEVICES=all, NVIDIA_DRIVER_CAPABILITIES=utility)"
        )
    return _("neither NVML (libnvidia-ml.so.1) nor nvidia-smi answers here, although the driver is loaded")
