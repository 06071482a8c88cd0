"""The GPU stack: driver, the CUDA it supports, the toolkit, PyTorch's CUDA build and cuDNN, and
whether each pair works together; driver failures told apart; Jetson boards recognised."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from decode_doctor.check import Check, Needs, Option, SkipCheck
from decode_doctor.context import Context
from decode_doctor.model import Code, CommandRecord, Finding, Severity

SMI_TIMEOUT_S = 15.0
KERNEL_LOGS = ("/var/log/kern.log", "/var/log/syslog", "/var/log/messages")
DRIVER_FIX = "Install the NVIDIA driver for this GPU (ubuntu-drivers install, or the distribution's nvidia-driver package), then reboot."

GPU001 = Code("GPU001", "NVIDIA GPUs and driver", Severity.INFO,
    what="The GPUs the driver reports (name, memory, architecture, MIG mode, theoretical memory bandwidth where NVML gives the bus width), the driver version and the highest CUDA version it supports.",
    why="Every other GPU judgement (toolkit, PyTorch build, memory budget) starts from these numbers.",
    fix_by_hand="Nothing to fix.")
GPU010 = Code("GPU010", "nvidia-smi cannot talk to the NVIDIA driver", Severity.ERROR,
    what="nvidia-smi says it couldn't communicate with the NVIDIA driver: the kernel module is not loaded (not installed, blocked by Secure Boot, or nouveau holds the GPU).",
    why="No CUDA program can use the GPU; inference falls back to the CPU or fails at start.",
    fix_by_hand=f"{DRIVER_FIX} Check `lsmod | grep nvidia`, `mokutil --sb-state` and `dmesg | grep -i nvrm`.")
GPU011 = Code("GPU011", "NVIDIA driver and library versions do not match", Severity.ERROR,
    what="\"Failed to initialize NVML: Driver/library version mismatch\": the user-space libraries were upgraded but the old kernel module is still loaded (the kernel log says \"API mismatch\").",
    why="NVML, CUDA and nvidia-container-cli all refuse to start until they match: every GPU workload on the host is down.",
    fix_by_hand="Reboot; or, with no GPU process running, reload the module: sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia.")
GPU012 = Code("GPU012", "The NVIDIA driver finds no GPU", Severity.ERROR,
    what="nvidia-smi prints \"No devices were found\": the driver is loaded but no GPU is bound to it (unsupported GPU for this driver branch, GPU passed to a VM, or a failed probe).",
    why="No CUDA device is visible to inference servers.",
    fix_by_hand="Check `lspci -nn | grep -i nvidia` and the kernel log; install a driver branch that supports the GPU.")
GPU013 = Code("GPU013", "nvidia-smi reports an Unknown Error for a GPU", Severity.ERROR,
    what="\"Unable to determine the device handle for GPU …: Unknown Error\": the driver lost the GPU (power, thermal, PCIe or hardware fault).",
    why="That GPU cannot run work; jobs scheduled on it fail.",
    fix_by_hand="Look for Xid errors in the kernel log, reseat or power-cycle the node, and check cooling and power.")
GPU014 = Code("GPU014", "A GPU has fallen off the bus", Severity.ERROR,
    what="The kernel log says the GPU \"has fallen off the bus and is not responding to commands\".",
    why="The GPU is gone until a reset or reboot; this is usually power, thermal, riser or hardware trouble, and recurs.",
    fix_by_hand="Reboot (or nvidia-smi -r for that GPU); check power supply, cooling and PCIe seating; report repeated events to the vendor.")
GPU015 = Code("GPU015", "An NVIDIA GPU is present but nvidia-smi is not installed", Severity.WARNING,
    what="The PCI bus shows an NVIDIA display controller, but there is no nvidia-smi (and no NVML): the proprietary driver is probably not installed.",
    why="Without the driver, CUDA cannot use the GPU.",
    fix_by_hand=DRIVER_FIX)
GPU016 = Code("GPU016", "nvidia-smi hangs", Severity.ERROR,
    what="nvidia-smi did not answer within its time limit.",
    why="A hung nvidia-smi is itself a symptom: the driver is stuck (a GPU in a bad state, a kernel module waiting on hardware); CUDA programs will hang the same way.",
    fix_by_hand="Look at the kernel log for Xid or fallen-off-the-bus messages; reset the GPU (nvidia-smi -r) or reboot.")
GPU017 = Code("GPU017", "nvidia-smi output could not be read", Severity.WARNING,
    what="nvidia-smi -q -x ran but printed something that is not its XML report.",
    why="decode-doctor cannot judge the driver; a broken or mismatched nvidia-smi binary is a symptom too.",
    fix_by_hand="Run nvidia-smi -q yourself and attach the output to the ticket.")
GPU020 = Code("GPU020", "The CUDA toolkit needs a newer driver", Severity.ERROR,
    what="The installed CUDA toolkit (nvcc, /usr/local/cuda*/version.json) is newer than the driver fully supports.",
    why="Under minor-version compatibility (same major version) programs built with it run with a limited feature set, and PTX it generates fails to JIT on the older driver (cudaErrorUnsupportedPtxVersion); across major versions nothing it builds runs.",
    fix_by_hand="Upgrade the driver to the version named in the finding, or install the toolkit matching the driver.")
GPU021 = Code("GPU021", "PyTorch's CUDA build and the driver", Severity.ERROR,
    what="The PyTorch wheel was built for a CUDA version that this driver cannot run, or runs only through minor-version compatibility.",
    why="An incompatible pair fails at the first CUDA call (\"The NVIDIA driver on your system is too old\"), and torch.cuda.is_available() returns False.",
    fix_by_hand="Upgrade the driver to the version named in the finding, or install the PyTorch build named there (pip install torch --index-url https://download.pytorch.org/whl/cu118).")
GPU022 = Code("GPU022", "PyTorch is a CPU-only build on a GPU host", Severity.ERROR,
    what="torch/version.py says cuda = None: this PyTorch has no CUDA support.",
    why="Inference runs on the CPU, orders of magnitude slower at decode, with no error message.",
    fix_by_hand="Install a CUDA build: pip install torch --index-url https://download.pytorch.org/whl/cu124 (pick the build the driver supports).")
GPU023 = Code("GPU023", "Below the baseline for LLM inference (CUDA 11.8+, cuDNN 8.6+, PyTorch 2.0+)", Severity.WARNING,
    what="A component is older than the baseline the field write-ups assume.",
    why="Serving engines (vLLM, TGI, TensorRT-LLM) and flash attention require at least these versions; older stacks miss fused kernels and bf16 support.",
    fix_by_hand="Upgrade the component named in the finding.")
GPU030 = Code("GPU030", "NVIDIA Jetson / Tegra board (unified memory)", Severity.INFO,
    what="An NVIDIA Tegra board (Jetson): no nvidia-smi; the GPU shares the system RAM with the CPU.",
    why="The decode budget has one memory pool for weights, KV cache and the OS; vm.swappiness and zram matter more, since pages the GPU needs can be swapped out.",
    fix_by_hand="Budget against total RAM minus the OS, keep swappiness low, and use tegrastats to watch memory.")


def _record_evidence(record: CommandRecord) -> dict[str, Any]:
    return {"command": " ".join(record.argv), "exit_code": record.exit_code, "output": record.excerpt(800), "timed_out": record.timed_out}


def nvidia_pci_devices(ctx: Context) -> list[str]:
    base = ctx.host_path("/sys/bus/pci/devices")
    found = []
    if base.is_dir():
        for device in sorted(base.iterdir()):
            try:
                vendor = (device / "vendor").read_text().strip()
                klass = (device / "class").read_text().strip()
            except OSError:
                continue
            if vendor == "0x10de" and klass.startswith("0x03"):
                found.append(device.name)
    return found


TORCH_PROBE = r"""
import importlib.util, json, sys
out = {"python": sys.executable, "torch_dir": None, "cudnn": None}
spec = importlib.util.find_spec("torch")
if spec and spec.submodule_search_locations:
    out["torch_dir"] = list(spec.submodule_search_locations)[0]
try:
    from importlib import metadata
    for name in ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu11"):
        try:
            out["cudnn"] = metadata.version(name)
            break
        except metadata.PackageNotFoundError:
            pass
except Exception:
    pass
print(json.dumps(out))
"""


def probe_torch(ctx: Context) -> dict[str, Any] | None:
    """PyTorch's version and CUDA build from torch/version.py, without importing torch."""
    from decode_doctor.nvidia import parse_torch_version_py

    python = ctx.options.get("python") or sys.executable
    record = ctx.run([python, "-c", TORCH_PROBE], timeout_s=20)
    if not record.ok:
        return {"error": (record.error or record.stderr.strip()[-200:] or "the probe failed"), "python": python}
    data = json.loads(record.stdout.strip().splitlines()[-1])
    if not data.get("torch_dir"):
        return None
    torch_dir = Path(data["torch_dir"])
    try:
        data.update(parse_torch_version_py((torch_dir / "version.py").read_text()))
    except OSError:
        return {"error": f"{torch_dir}/version.py is unreadable", "python": python}
    if not data.get("cudnn"):
        libs = sorted((torch_dir / "lib").glob("libcudnn.so.*")) if (torch_dir / "lib").is_dir() else []
        if libs:
            data["cudnn"] = libs[0].name.split(".so.", 1)[1]
    return data


def toolkits(ctx: Context) -> list[dict[str, str]]:
    from decode_doctor.nvidia import parse_nvcc, parse_version_json

    found = []
    nvcc = ctx.which("nvcc")
    if nvcc:
        record = ctx.run([nvcc, "--version"], timeout_s=10)
        version = parse_nvcc(record.stdout)
        if version:
            # nvcc's third number is its own build (12.8.61), not the toolkit update (12.8.1): judge X.Y
            found.append({"version": version, "judged": ".".join(version.split(".")[:2]), "source": nvcc})
    local = ctx.host_path("/usr/local")
    if local.is_dir():
        for directory in sorted(local.glob("cuda*")):
            text = ctx.read_text(f"/usr/local/{directory.name}/version.json") if directory.is_dir() else None
            version = parse_version_json(text) if text else None
            if version and not any(t["version"] == version for t in found):
                found.append({"version": version, "judged": version, "source": f"/usr/local/{directory.name}/version.json"})
    return found


def kernel_events(ctx: Context) -> list[tuple[str, str]]:
    from decode_doctor.nvidia import scan_kernel_log

    events: list[tuple[str, str]] = []
    texts = []
    for log in KERNEL_LOGS:
        text = ctx.read_text(log, limit=4 << 20)
        if text:
            texts.append(text[-(2 << 20):])
    if ctx.live_host and ctx.which("dmesg"):
        record = ctx.run(["dmesg"], timeout_s=5)
        if record.ok:
            texts.append(record.stdout)
    for text in texts:
        for event in scan_kernel_log(text):
            if event not in events:
                events.append(event)
    return events


class GpuStack(Check):
    name = "gpu"
    description = "NVIDIA driver, CUDA, toolkit, PyTorch and cuDNN versions and whether they work together"
    codes = (GPU001, GPU010, GPU011, GPU012, GPU013, GPU014, GPU015, GPU016, GPU017, GPU020, GPU021, GPU022, GPU023, GPU030)
    needs = Needs(platforms=("linux",), files=("/proc/driver/nvidia", "/sys/bus/pci/devices", "/etc/nv_tegra_release", "/usr/local/cuda*/version.json", *KERNEL_LOGS), commands=("nvidia-smi -q -x", "nvcc --version", "dmesg", "python -c (find torch)"))
    options = (
        Option("--python", "The Python interpreter whose PyTorch to inspect (default: decode-doctor's own)."),
        Option("--nvidia-smi-timeout", "Seconds nvidia-smi may take before it counts as hung [default: 15].", type=float),
    )
    timeout_s = 45.0

    def run(self, ctx: Context) -> list[Finding]:
        from decode_doctor.nvidia import DriverInfo, probe_nvml

        findings: list[Finding] = []
        info: DriverInfo | None = probe_nvml() if ctx.live_host else None
        smi_failed = False
        if info is None:
            info, smi_failed = self._nvidia_smi(ctx, findings)
        events = kernel_events(ctx)
        findings.extend(self._kernel_findings(events, findings))
        tegra = ctx.read_text("/etc/nv_tegra_release")
        pci = nvidia_pci_devices(ctx)
        driver_dir = ctx.host_path("/proc/driver/nvidia").is_dir()
        if info is None and not tegra and not pci and not driver_dir and not findings:
            raise SkipCheck("no NVIDIA GPU (no NVML, nvidia-smi, /proc/driver/nvidia or NVIDIA PCI device)")
        facts: dict[str, Any] = {"driver": None, "cuda": None, "devices": [], "unified_memory": bool(tegra)}
        if tegra:
            model = (ctx.read_text("/proc/device-tree/model") or "NVIDIA Jetson").strip("\x00\n ")
            release = tegra.strip().splitlines()[0]
            findings.append(self.finding("GPU030", f"{model}: {release}. CPU and GPU share the system RAM.", evidence={"model": model, "release": release}))
        elif info is None and pci and not smi_failed and not ctx.which("nvidia-smi"):
            findings.append(self.finding("GPU015", f"NVIDIA GPU(s) at {', '.join(pci)} but no nvidia-smi: the driver is not installed.", evidence={"pci_devices": pci}))
        if info is not None:
            facts.update(driver=info.driver_version, cuda=info.cuda_version, devices=[d.to_dict() for d in info.devices], source=info.source)
            findings.append(self._inventory(info))
        findings.extend(self._software(ctx, info, bool(info and info.devices) or bool(pci) or bool(tegra)))
        ctx.publish("gpu", facts)
        return findings

    def _nvidia_smi(self, ctx: Context, findings: list[Finding]) -> tuple[Any, bool]:
        from decode_doctor.nvidia import classify_smi_failure, parse_smi_text, parse_smi_xml

        if not ctx.which("nvidia-smi"):
            return None, False
        limit = ctx.options.get("nvidia_smi_timeout") or SMI_TIMEOUT_S
        record = ctx.run(["nvidia-smi", "-q", "-x"], timeout_s=limit)
        evidence = _record_evidence(record)
        if record.timed_out:
            findings.append(self.finding("GPU016", f"nvidia-smi -q -x did not answer within {limit:g} s: the driver is stuck.", evidence=evidence))
            return None, True
        output = record.stdout + record.stderr
        if record.exit_code == 0:
            try:
                return parse_smi_xml(record.stdout), False
            except ValueError as exc:
                text = ctx.run(["nvidia-smi", "-q"], timeout_s=limit)
                try:
                    return parse_smi_text(text.stdout), False
                except ValueError:
                    findings.append(self.finding("GPU017", f"{exc}.", evidence=evidence))
                    return None, True
        kind = classify_smi_failure(output)
        code, message = {
            "no-driver": ("GPU010", "nvidia-smi cannot communicate with the NVIDIA driver: the kernel module is not loaded."),
            "version-mismatch": ("GPU011", "Driver/library version mismatch: the driver was upgraded but the old kernel module is still loaded; reboot or reload it."),
            "no-devices": ("GPU012", "The NVIDIA driver is loaded but finds no GPU."),
            "unknown-error": ("GPU013", "nvidia-smi cannot get a handle for a GPU (Unknown Error): the driver lost it."),
            "missing": ("GPU015", "nvidia-smi is not installed: the NVIDIA driver is missing."),
        }.get(kind or "", ("GPU017", f"nvidia-smi failed with exit code {record.exit_code}."))
        findings.append(self.finding(code, message + f" Output: {output.strip()[:200]}", evidence=evidence))
        return None, True

    def _kernel_findings(self, events: list[tuple[str, str]], findings: list[Finding]) -> list[Finding]:
        extra = []
        off_bus = [text for kind, text in events if kind == "off-bus"]
        if off_bus:
            extra.append(self.finding("GPU014", f"The kernel log says: {off_bus[-1]}.", evidence={"kernel_log": off_bus[-5:]}))
        no_adapter = [text for kind, text in events if kind == "no-adapter"]
        if no_adapter and not any(f.code in ("GPU010", "GPU012") for f in findings):
            extra.append(self.finding("GPU012", "The kernel log says: No NVIDIA graphics adapter probed (another driver such as nouveau holds the GPU, or it is unsupported).", evidence={"kernel_log": no_adapter[-5:]}))
        mismatch = [text for kind, text in events if kind == "api-mismatch"]
        if mismatch and not any(f.code == "GPU011" for f in findings):
            extra.append(self.finding("GPU011", f"The kernel log says: {mismatch[-1]} Reboot or reload the module.", evidence={"kernel_log": mismatch[-5:]}))
        elif mismatch:
            for i, finding in enumerate(findings):
                if finding.code == "GPU011":
                    findings[i] = self.finding("GPU011", finding.message + f" Kernel log: {mismatch[-1]}", evidence={**finding.evidence, "kernel_log": mismatch[-5:]})
        return extra

    def _inventory(self, info: Any) -> Finding:
        parts = []
        for device in info.devices:
            memory = f"{device.memory_mib / 1024:.0f} GiB" if device.memory_mib else "memory unknown"
            bandwidth = f"{device.theoretical_gbps:.0f} GB/s theoretical" if device.theoretical_gbps else "bandwidth unknown (no bus width)"
            mig = ", MIG enabled" if (device.mig_mode or "").lower() == "enabled" else ""
            parts.append(f"GPU {device.index}: {device.name} ({memory}{', ' + device.architecture if device.architecture else ''}{mig}, {bandwidth})")
        head = f"Driver {info.driver_version or '?'} (CUDA ≤ {info.cuda_version or '?'}, via {info.source})"
        evidence = {"driver_version": info.driver_version, "cuda_version": info.cuda_version, "source": info.source, "attached": info.attached, "devices": [d.to_dict() for d in info.devices], "notes": info.notes}
        return self.finding("GPU001", f"{head}: " + "; ".join(parts or ["no GPU listed"]) + ("" if not info.notes else f" ({'; '.join(info.notes)})"), evidence=evidence, sensitive=("devices",))

    def _software(self, ctx: Context, info: Any, gpu_host: bool) -> list[Finding]:
        from decode_doctor.nvidia import build_for_driver, compat_table, judge, vkey

        findings = []
        driver = info.driver_version if info else None
        baseline = compat_table()["baseline"]
        behind = []
        for toolkit in toolkits(ctx):
            version = toolkit["version"]
            if vkey(version) < vkey(baseline["cuda"]):
                behind.append(f"CUDA toolkit {version} ({toolkit['source']}) < {baseline['cuda']}")
            if driver:
                verdict = judge(toolkit["judged"], driver, f"CUDA toolkit {version} ({toolkit['source']})")
                evidence = {"toolkit": version, "source": toolkit["source"], "driver": driver, "needs_full": verdict.needs_full, "minor_floor": verdict.floor}
                if verdict.level == "incompatible":
                    findings.append(self.finding("GPU020", verdict.message + f": upgrade the driver to >= {verdict.needs_full}.", evidence=evidence))
                elif verdict.level == "minor-compat":
                    findings.append(self.finding("GPU020", verdict.message + ": limited features, and " + compat_table()["ptx_caveat"].split(", but ")[1], evidence=evidence, severity=Severity.WARNING))
        torch = probe_torch(ctx)
        if torch and torch.get("error"):
            torch = None
        if torch:
            label = f"PyTorch {torch.get('version')}"
            if torch.get("version") and vkey(torch["version"]) < vkey(baseline["torch"]):
                behind.append(f"{label} < {baseline['torch']}")
            cudnn = torch.get("cudnn")
            if cudnn and vkey(cudnn) < vkey(baseline["cudnn"]):
                behind.append(f"cuDNN {cudnn} < {baseline['cudnn']}")
            evidence = {"torch": torch.get("version"), "cuda": torch.get("cuda"), "cudnn": cudnn, "python": torch.get("python"), "torch_dir": torch.get("torch_dir"), "driver": driver}
            if torch.get("cuda"):
                if vkey(torch["cuda"]) < vkey(baseline["cuda"]):
                    behind.append(f"{label} built for CUDA {torch['cuda']} < {baseline['cuda']}")
                if driver:
                    verdict = judge(torch["cuda"], driver, f"{label} built for CUDA {torch['cuda']}")
                    if verdict.level == "incompatible":
                        alternative = build_for_driver(driver)
                        advice = f": upgrade the driver to >= {verdict.needs_full.split('.')[0]}" + (f" or install a cu{alternative.replace('.', '')} build" if alternative else "")
                        findings.append(self.finding("GPU021", verdict.message + advice + ".", evidence={**evidence, "needs_full": verdict.needs_full, "minor_floor": verdict.floor}))
                    elif verdict.level == "minor-compat":
                        findings.append(self.finding("GPU021", verdict.message + ".", evidence=evidence, severity=Severity.INFO))
            elif not torch.get("hip") and gpu_host:
                findings.append(self.finding("GPU022", f"{label} (in {torch.get('python')}) is a CPU-only build on a host with an NVIDIA GPU.", evidence=evidence))
        if behind:
            findings.append(self.finding("GPU023", "Below the LLM-inference baseline: " + "; ".join(behind) + ".", evidence={"below": behind, "baseline": baseline}))
        return findings
