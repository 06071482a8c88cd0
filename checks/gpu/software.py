"""The CUDA software judged against the driver and the LLM-inference baseline: the toolkits, PyTorch's
CUDA build and cuDNN. The live check and `analyze` (collect_env) judge with the same code."""

from __future__ import annotations

from decode_doctor.engine import Check, Finding, Severity
from decode_doctor.i18n import _

from .codes import GPU020, GPU021, GPU022, GPU023
from .contract import GpuFacts, Toolkit, TorchBuild
from .nvidia import build_for_driver, compat_table, judge, vkey


def judge_software(check: Check, facts: GpuFacts, gpu_host: bool) -> list[Finding]:
    baseline = compat_table()["baseline"]
    behind: list[str] = []  # the evidence, in English
    said: list[str] = []  # the same, in the user's language
    findings = []
    for toolkit in facts.toolkits:
        if vkey(toolkit.version) < vkey(baseline["cuda"]):
            behind.append(f"CUDA toolkit {toolkit.version} ({toolkit.source}) < {baseline['cuda']}")
            said.append(
                _(
                    "CUDA toolkit {version} ({source}) < {baseline}",
                    version=toolkit.version,
                    source=toolkit.source,
                    baseline=baseline["cuda"],
                )
            )
        if facts.driver:
            findings.extend(_toolkit_against_driver(check, toolkit, facts.driver))
    torch = facts.torch
    if torch:
        label = f"PyTorch {torch.version}"
        if torch.version and vkey(torch.version) < vkey(baseline["torch"]):
            behind.append(f"{label} < {baseline['torch']}")
            said.append(_("{what} is below {baseline}", what=label, baseline=baseline["torch"]))
        if torch.cudnn and vkey(torch.cudnn) < vkey(baseline["cudnn"]):
            behind.append(f"cuDNN {torch.cudnn} < {baseline['cudnn']}")
            said.append(_("{what} is below {baseline}", what=f"cuDNN {torch.cudnn}", baseline=baseline["cudnn"]))
        if torch.cuda and vkey(torch.cuda) < vkey(baseline["cuda"]):
            behind.append(f"{label} built for CUDA {torch.cuda} < {baseline['cuda']}")
            said.append(_("{torch} built for CUDA {cuda} < {baseline}", torch=label, cuda=torch.cuda, baseline=baseline["cuda"]))
        findings.extend(_torch_against_driver(check, torch, facts.driver, gpu_host))
    if behind:
        message = _("Below the LLM-inference baseline: {below}.", below=_("; ").join(said))
        findings.append(check.finding(GPU023, message, evidence={"below": behind, "baseline": baseline}))
    return findings


def _toolkit_against_driver(check: Check, toolkit: Toolkit, driver: str) -> list[Finding]:
    verdict = judge(toolkit.judged, driver, _("CUDA toolkit {version} ({source})", version=toolkit.version, source=toolkit.source))
    evidence = {
        "toolkit": toolkit.version,
        "source": toolkit.source,
        "driver": driver,
        "needs_full": verdict.needs_full,
        "minor_floor": verdict.floor,
    }
    if verdict.level == "incompatible":
        message = verdict.message + _(": upgrade the driver to >= {needs}.", needs=verdict.needs_full)
        return [check.finding(GPU020, message, evidence=evidence)]
    if verdict.level == "minor-compat":
        message = verdict.message + _(": limited features, and {effect}", effect=_(compat_table()["ptx_effect"]))
        return [check.finding(GPU020, message, evidence=evidence, severity=Severity.WARNING)]
    return []


def _torch_against_driver(check: Check, torch: TorchBuild, driver: str | None, gpu_host: bool) -> list[Finding]:
    label = f"PyTorch {torch.version}"
    evidence = {
        "torch": torch.version,
        "cuda": torch.cuda,
        "cudnn": torch.cudnn,
        "python": torch.python,
        "torch_dir": torch.torch_dir,
        "driver": driver,
    }
    if not torch.cuda:
        if not torch.hip and gpu_host:
            message = _("{label} (Python: {python}) is a CPU-only build on a host with an NVIDIA GPU.", label=label, python=torch.python)
            return [check.finding(GPU022, message, evidence=evidence)]
        return []
    if not driver:
        return []
    verdict = judge(torch.cuda, driver, _("PyTorch {version} built for CUDA {cuda}", version=torch.version, cuda=torch.cuda))
    if verdict.level == "incompatible":
        alternative = build_for_driver(driver)
        advice = _(": upgrade the driver to >= {needs}", needs=(verdict.needs_full or "").split(".")[0])
        if alternative:
            advice += _(" or install a {build} build", build="cu" + alternative.replace(".", ""))
        evidence.update(needs_full=verdict.needs_full, minor_floor=verdict.floor)
        return [check.finding(GPU021, verdict.message + advice + _("."), evidence=evidence)]
    if verdict.level == "minor-compat":
        return [check.finding(GPU021, verdict.message + _("."), evidence=evidence, severity=Severity.INFO)]
    return []
