"""What the gpu check reads in a pasted text (decode-doctor analyze): nvidia-smi's table, -q, -q -x and
its error messages, and kernel logs. Every finding cites the line it came from."""

from __future__ import annotations

import dataclasses
from typing import Any

from decode_doctor.engine import Analysis, Check, Code, Finding
from decode_doctor.i18n import _

from .codes import GPU021, GPU022, GPU023, GPU025, GPU026
from .collect_env import looks_like_collect_env, parse_collect_env, torch_errors
from .contract import DriverInfo, GpuDevice, GpuFacts, Toolkit, TorchBuild
from .kernellog import KERNEL_EVENTS, XID_OFF_BUS, event_finding
from .nvidia import KERNEL_PATTERNS, SMI_FAILURES, min_driver, parse_smi_text, parse_smi_xml, scan_kernel_log
from .smi import SMI_FAILURE_CODES
from .software import judge_software
from .table import looks_like_table, parse_smi_table
from .xid import finding as xid_finding
from .xid import parse_xid, xid_events

MAX_LINES = 200_000


def driver_info(text: str) -> tuple[DriverInfo, str] | None:
    """The driver and GPUs from whichever nvidia-smi report the text is, recognised by content."""
    head = text[:4096]
    try:
        if "<nvidia_smi_log" in head:
            return parse_smi_xml(text), "nvidia-smi -q -x"
        if looks_like_table(text):
            return parse_smi_table(text), "nvidia-smi table"
        if "NVSMI LOG" in head or "Attached GPUs" in head:
            return parse_smi_text(text), "nvidia-smi -q"
    except ValueError:
        return None
    return None


def line_events(lines: list[str]) -> list[tuple[int, str, str]]:
    """(line number, kind, text) for nvidia-smi failures and kernel-log events, line by line."""
    found = []
    for number, line in enumerate(lines[:MAX_LINES], start=1):
        if len(line) > 4096:
            line = line[:4096]
        for kind, pattern in SMI_FAILURES if "NVRM" not in line else ():  # a kernel line is not nvidia-smi's
            if pattern.search(line):
                found.append((number, f"smi:{kind}", line.strip()))
                break
        else:
            for kind, pattern in KERNEL_PATTERNS:
                match = pattern.search(line)
                if match:
                    found.append((number, f"kernel:{kind}", " ".join(match.group(0).split())))
                    break
    # a message the kernel split over lines ("NVRM: API mismatch … but\nNVRM: this kernel module …")
    seen = {kind for _, kind, _ in found}
    for kind, text in scan_kernel_log("\n".join(lines[:MAX_LINES])):
        if f"kernel:{kind}" not in seen:
            seen.add(f"kernel:{kind}")
            number = next((i for i, line in enumerate(lines[:MAX_LINES], start=1) if text[:24] in " ".join(line.split())), 1)
            found.append((number, f"kernel:{kind}", text))
    return found


def cited_at(source: str, line: int) -> str:
    """Where a pasted text said it, to follow a message: " (nvidia-smi.txt, line 12)"."""
    return _(" ({source}, line {line})", source=source, line=line)


def evidence(source: str, number: int, text: str) -> dict[str, Any]:
    return {"source": source, "line": number, "text": text[:300]}


def analyze(check: Check, text: str, source: str) -> Analysis | None:
    """The findings and facts in one pasted text, each finding citing its line."""
    found = driver_info(text)
    facts = None
    kinds = []
    findings: list[Finding] = []
    if found is not None:
        info, kind = found
        facts = GpuFacts(info.driver_version, info.cuda_version, kind, info.attached, info.devices, info.notes)
        kinds.append(kind)
    elif looks_like_collect_env(text):
        facts, judged = collect_env_findings(check, text, source)
        findings.extend(judged)
        kinds.append("PyTorch collect_env")
    seen: set[str] = {f.code for f in findings}
    lines = text.splitlines()[:MAX_LINES]
    for number, kind, line in line_events(lines):
        family, _colon, name = kind.partition(":")
        if family == "kernel" and name == "xid":
            if (parse_xid(line) or ("", 0, 0))[1] != XID_OFF_BUS:
                continue  # the other Xids are read below, one finding for all of them
            name = "off-bus"
        code: Code | None = None
        message = ""
        if family == "smi" and name in SMI_FAILURE_CODES:
            code, message = SMI_FAILURE_CODES[name]
        elif family == "kernel" and name in KERNEL_EVENTS:
            code = KERNEL_EVENTS[name][0]
        if code is None or code.code in seen:  # one finding per code, citing its first line
            continue
        seen.add(code.code)
        suffix = cited_at(source, number)
        if family == "smi":
            findings.append(check.finding(code, _(message) + suffix, evidence=evidence(source, number, line)))
        else:
            cited = event_finding(check, name, line, suffix, evidence(source, number, line))
            findings.extend([cited] if cited else [])
    xids = xid_events(lines)
    first = next((event for event in xids if event.number != 79), None)
    if first:
        cite = evidence(source, first.line, first.text)
        finding = xid_finding(check, xids, _("{source} (first Xid at line {line})", source=source, line=first.line), cite)
        findings.extend([finding] if finding else [])
    if facts is None:
        torch_findings = torch_error_findings(check, lines, source, None)
        findings.extend(torch_findings)
    if findings and (not kinds or len(findings) > len(seen)):
        kinds.append("error messages")
    if facts is None and not findings:
        return None
    return Analysis(findings, facts, " and ".join(kinds))


def collect_env_findings(check: Check, text: str, source: str) -> tuple[GpuFacts, list[Finding]]:
    """Facts from torch's or vLLM's collect_env, judged like the live check judges the host."""
    env = parse_collect_env(text)
    cuda_build = env.cuda_build if env.cuda_build and env.cuda_build[:1].isdecimal() else None
    torch = TorchBuild(env.torch, cuda_build, env.rocm_build, env.cudnn, env.python or _("not reported"), "") if env.torch else None
    toolkits = []
    if env.cuda_runtime and env.cuda_runtime[:1].isdecimal():  # nvcc's release on PATH
        toolkits.append(Toolkit(env.cuda_runtime, ".".join(env.cuda_runtime.split(".")[:2]), "collect_env"))
    devices = [GpuDevice(index, name) for index, name in enumerate(env.gpus) if env.driver]
    notes = [f"vLLM {env.vllm.split(' (', 1)[0]}"] if env.vllm else []  # without its "(git sha: …)"
    facts = GpuFacts(
        env.driver, None, "collect_env", len(devices) or None, tuple(devices), tuple(notes), toolkits=tuple(toolkits), torch=torch
    )
    judged = judge_software(check, facts, gpu_host=bool(env.driver))
    lines = text.splitlines()
    cited = []
    for finding in judged:
        field = "torch" if finding.code in (GPU021.code, GPU022.code, GPU023.code) else "cuda_runtime"
        number = env.lines.get(field) or env.lines.get("torch") or 1
        line = lines[number - 1] if number <= len(lines) else ""
        message = finding.message + cited_at(source, number)
        cited.append(dataclasses.replace(finding, message=message, evidence={**finding.evidence, **evidence(source, number, line)}))
    cited.extend(torch_error_findings(check, lines, source, cuda_build))
    if env.cuda_available is False and not env.rocm_build:
        number = env.lines["cuda_available"]
        if not env.driver:
            why = _("no NVIDIA driver answered (Nvidia driver version: none)")
        elif torch and not torch.cuda:
            why = _("this PyTorch ({version}) is a CPU-only build", version=torch.version)
        else:
            why = _("the driver is there, so look at CUDA_VISIBLE_DEVICES, the container's GPU access and the kernel log")
        message = _("PyTorch reports CUDA unavailable: {why}.", why=why) + cited_at(source, number)
        cited.append(check.finding(GPU026, message, evidence=evidence(source, number, lines[number - 1])))
    return facts, cited


def torch_error_findings(check: Check, lines: list[str], source: str, cuda_build: str | None) -> list[Finding]:
    """PyTorch's own CUDA errors: a driver too old for the wheel (GPU021), a wheel without the GPU's
    architecture (GPU025)."""
    findings = []
    errors = torch_errors(lines)
    firsts = [next((e for e in errors if e.kind == kind), None) for kind in ("driver-too-old", "arch-missing")]
    for error in [e for e in firsts if e is not None]:
        cite = evidence(source, error.line, error.text)
        if error.kind == "driver-too-old":
            needs = min_driver(cuda_build) if cuda_build else None
            torch_name = _("PyTorch built for CUDA {cuda}", cuda=cuda_build) if cuda_build else "PyTorch"
            advice = _("upgrade the driver to ≥ {driver}", driver=needs[1]) if needs else _("upgrade the driver")
            if error.driver_cuda:
                message = _(
                    "{torch} says the NVIDIA driver is too old: the driver supports CUDA ≤ {driver_cuda}; {advice}, {instead}.",
                    torch=torch_name,
                    driver_cuda=error.driver_cuda,
                    advice=advice,
                    instead=_("or install a PyTorch built for CUDA ≤ {cuda}", cuda=error.driver_cuda),
                )
            else:
                message = _(
                    "{torch} says the NVIDIA driver is too old for it; {advice}, or install a PyTorch built for the CUDA the driver "
                    "supports.",
                    torch=torch_name,
                    advice=advice,
                )
            message += cited_at(source, error.line)
            findings.append(check.finding(GPU021, message, evidence={**cite, "driver_cuda": error.driver_cuda}))
        elif error.kind == "arch-missing":
            if error.supported:
                message = _(
                    "This PyTorch has no kernels for the GPU's CUDA capability {capability} (it has {supported}): "
                    "install a build for a newer CUDA.",
                    capability=error.capability,
                    supported=" ".join(error.supported),
                )
            else:
                message = _(
                    "This PyTorch has no kernels for the GPU's CUDA capability {capability}: install a build for a newer CUDA.",
                    capability=error.capability,
                )
            message += cited_at(source, error.line)
            findings.append(check.finding(GPU025, message, evidence={**cite, "capability": error.capability}))
    return findings
