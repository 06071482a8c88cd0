"""The GPU stack: driver, the CUDA it supports, the toolkit, PyTorch's CUDA build and cuDNN, and
whether each pair works together; driver failures told apart; Jetson boards recognised."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decode_doctor.engine import (
    Analysis,
    Check,
    Code,
    CommandRecord,
    Context,
    EnvRow,
    Facts,
    Finding,
    Metric,
    Needs,
    Option,
    Sample,
    Severity,
    SkipCheck,
)
from decode_doctor.engine.units import amount

from .cudapaths import path_findings, resolve
from .nvidia import DriverInfo, GpuDevice
from .xid import XidEvent
from .xid import finding as xid_gpu018

SMI_TIMEOUT_S = 15.0
KERNEL_LOGS = ("/var/log/kern.log", "/var/log/syslog", "/var/log/messages")
DRIVER_FIX = "Install the NVIDIA driver for this GPU (ubuntu-drivers install, or the distribution's nvidia-driver package), then reboot."

GPU010 = Code(
    "GPU010",
    "nvidia-smi cannot talk to the NVIDIA driver",
    Severity.ERROR,
    what="nvidia-smi says it couldn't communicate with the NVIDIA driver: the kernel module is not loaded (not installed, blocked by "
    "Secure Boot, or nouveau holds the GPU).",
    why="No CUDA program can use the GPU; inference falls back to the CPU or fails at start.",
    fix_by_hand=f"{DRIVER_FIX} Check `lsmod | grep nvidia`, `mokutil --sb-state` and `dmesg | grep -i nvrm`.",
)
GPU011 = Code(
    "GPU011",
    "NVIDIA driver and library versions do not match",
    Severity.ERROR,
    what='"Failed to initialize NVML: Driver/library version mismatch": the user-space libraries were upgraded but the old kernel module '
    'is still loaded (the kernel log says "API mismatch").',
    why="NVML, CUDA and nvidia-container-cli all refuse to start until they match: every GPU workload on the host is down.",
    fix_by_hand="Reboot; or, with no GPU process running, reload the module: sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && "
    "sudo "
    "modprobe nvidia.",
)
GPU012 = Code(
    "GPU012",
    "The NVIDIA driver finds no GPU",
    Severity.ERROR,
    what='nvidia-smi prints "No devices were found": the driver is loaded but no GPU is bound to it (unsupported GPU for this driver '
    "branch, GPU passed to a VM, or a failed probe).",
    why="No CUDA device is visible to inference servers.",
    fix_by_hand="Check `lspci -nn | grep -i nvidia` and the kernel log; install a driver branch that supports the GPU.",
)
GPU013 = Code(
    "GPU013",
    "nvidia-smi reports an Unknown Error for a GPU",
    Severity.ERROR,
    what='"Unable to determine the device handle for GPU …: Unknown Error": the driver lost the GPU (power, thermal, PCIe or hardware '
    "fault).",
    why="That GPU cannot run work; jobs scheduled on it fail.",
    fix_by_hand="Look for Xid errors in the kernel log, reseat or power-cycle the node, and check cooling and power.",
)
GPU014 = Code(
    "GPU014",
    "A GPU has fallen off the bus",
    Severity.ERROR,
    what='The kernel log says the GPU "has fallen off the bus and is not responding to commands".',
    why="The GPU is gone until a reset or reboot; this is usually power, thermal, riser or hardware trouble, and recurs.",
    fix_by_hand="Reboot (or nvidia-smi -r for that GPU); check power supply, cooling and PCIe seating; report repeated events to the "
    "vendor.",
)
GPU015 = Code(
    "GPU015",
    "An NVIDIA GPU is present but nvidia-smi is not installed",
    Severity.WARNING,
    what="The PCI bus shows an NVIDIA display controller, but there is no nvidia-smi (and no NVML): the proprietary driver is probably "
    "not installed.",
    why="Without the driver, CUDA cannot use the GPU.",
    fix_by_hand=DRIVER_FIX,
)
GPU016 = Code(
    "GPU016",
    "nvidia-smi hangs",
    Severity.ERROR,
    what="nvidia-smi did not answer within its time limit.",
    why="A hung nvidia-smi is itself a symptom: the driver is stuck (a GPU in a bad state, a kernel module waiting on hardware); CUDA "
    "programs will hang the same way.",
    fix_by_hand="Look at the kernel log for Xid or fallen-off-the-bus messages; reset the GPU (nvidia-smi -r) or reboot.",
)
GPU017 = Code(
    "GPU017",
    "nvidia-smi output could not be read",
    Severity.WARNING,
    what="nvidia-smi -q -x ran but printed something that is not its XML report.",
    why="decode-doctor cannot judge the driver; a broken or mismatched nvidia-smi binary is a symptom too.",
    fix_by_hand="Run nvidia-smi -q yourself and attach the output to the ticket.",
)
GPU018 = Code(
    "GPU018",
    "The kernel log holds NVIDIA Xid errors",
    Severity.WARNING,
    what='NVRM: Xid lines in dmesg or the journal (the old "Xid (0000:01:00): N" and the newer "Xid (PCI:…): N, pid=…, name=…" '
    "formats), counted per Xid with the GPUs and the first and last time. Each Xid is looked up in NVIDIA's Xid catalog for its "
    "meaning, likely cause and next step. Xid 79 (fallen off the bus) is GPU014.",
    why="Some Xids are an application's own fault (13, 31, 43, 45), others mean the GPU needs a reset or the node a reboot (46, 48, "
    "62, 64, 74, 95, 109, 119, 120, 154); a decode server on such a GPU stalls or dies. The finding is an error when any Xid "
    "asks for a GPU reset or a reboot.",
    fix_by_hand="Do the next step the finding gives for each Xid; NVIDIA's catalog "
    "(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) has the full resolution buckets. Attach the cited "
    "kernel log lines to the ticket.",
)
GPU020 = Code(
    "GPU020",
    "The CUDA toolkit needs a newer driver",
    Severity.ERROR,
    what="The installed CUDA toolkit (nvcc, /usr/local/cuda*/version.json) is newer than the driver fully supports.",
    why="Under minor-version compatibility (same major version) programs built with it run with a limited feature set, and PTX it "
    "generates fails to JIT on the older driver (cudaErrorUnsupportedPtxVersion); across major versions nothing it builds runs.",
    fix_by_hand="Upgrade the driver to the version named in the finding, or install the toolkit matching the driver.",
)
GPU021 = Code(
    "GPU021",
    "PyTorch's CUDA build and the driver",
    Severity.ERROR,
    what="The PyTorch wheel was built for a CUDA version that this driver cannot run, or runs only through minor-version compatibility.",
    why='An incompatible pair fails at the first CUDA call ("The NVIDIA driver on your system is too old"), and '
    "torch.cuda.is_available() returns False.",
    fix_by_hand="Upgrade the driver to the version named in the finding, or install the PyTorch build named there (pip install torch "
    "--index-url "
    "https://download.pytorch.org/whl/cu118).",
)
GPU022 = Code(
    "GPU022",
    "PyTorch is a CPU-only build on a GPU host",
    Severity.ERROR,
    what="torch/version.py says cuda = None: this PyTorch has no CUDA support.",
    why="Inference runs on the CPU, orders of magnitude slower at decode, with no error message.",
    fix_by_hand="Install a CUDA build: pip install torch --index-url https://download.pytorch.org/whl/cu124 (pick the build the driver "
    "supports).",
)
GPU023 = Code(
    "GPU023",
    "Below the baseline for LLM inference (CUDA 11.8+, cuDNN 8.6+, PyTorch 2.0+)",
    Severity.WARNING,
    what="A component is older than the baseline the field write-ups assume.",
    why="Serving engines (vLLM, TGI, TensorRT-LLM) and flash attention require at least these versions; older stacks miss fused kernels "
    "and bf16 support.",
    fix_by_hand="Upgrade the component named in the finding.",
)
GPU024 = Code(
    "GPU024",
    "CUDA software is installed but there is no NVIDIA GPU yet",
    Severity.INFO,
    what="No NVIDIA GPU or driver on this host, but a CUDA toolkit or a CUDA build of PyTorch is installed.",
    why="The driver installed with the GPU must be at least what that software needs, or the first run fails with "
    '"CUDA driver version is insufficient for CUDA runtime version".',
    fix_by_hand="Install at least the driver branch named in the finding with the GPU, or pick software built for the driver you "
    "will have.",
)
GPU025 = Code(
    "GPU025",
    "PyTorch was not built for this GPU's architecture",
    Severity.ERROR,
    what='PyTorch warns "… with CUDA capability sm_NN is not compatible with the current PyTorch installation": the wheel carries no '
    "kernels for this GPU's compute capability (a Hopper sm_90 or Blackwell sm_100/sm_120 GPU with a wheel built for an older CUDA).",
    why='Every CUDA kernel launch fails with "no kernel image is available for execution on the device"; an inference server '
    "does not start or crashes at the first request.",
    fix_by_hand="Install a PyTorch build for a CUDA that knows the GPU: sm_90 (H100/H200) needs CUDA 11.8 or newer wheels, sm_100 and "
    "sm_120 (Blackwell) need cu128 or newer; then check torch.cuda.get_arch_list() lists the capability.",
)
GPU026 = Code(
    "GPU026",
    "PyTorch reports CUDA unavailable",
    Severity.WARNING,
    what='A pasted collect_env says "Is CUDA available: False" for a PyTorch that is not a ROCm build.',
    why="The serving engine falls back to the CPU or refuses to start; decode on the CPU is one to two orders of magnitude slower.",
    fix_by_hand="With no NVIDIA driver: install it (or, on an AMD GPU, a ROCm build of PyTorch). With a CPU-only PyTorch: install a CUDA "
    "build. With both present: check CUDA_VISIBLE_DEVICES, the container's --gpus flag and the kernel log for Xid errors.",
)
GPU027 = Code(
    "GPU027",
    "CUDA toolkits disagree: PATH, LD_LIBRARY_PATH and CUDA_HOME pick different ones",
    Severity.WARNING,
    what="Several CUDA toolkits are installed and the mechanisms that choose one do not agree: CUDA_HOME (or CUDA_PATH, what "
    "PyTorch's extension builds use), the first nvcc on PATH, and the first libcudart on LD_LIBRARY_PATH; or CUDA_HOME names "
    "a directory that is not there.",
    why="An extension (flash-attn, a vLLM or llama.cpp build) compiles with one toolkit's headers and nvcc, links or loads "
    'another\'s runtime, and fails with undefined symbols or "CUDA driver version is insufficient", or silently uses the old one.',
    fix_by_hand="Pick one toolkit and point all three at it: export CUDA_HOME=/usr/local/cuda-X.Y, PATH=$CUDA_HOME/bin:$PATH, "
    "LD_LIBRARY_PATH=$CUDA_HOME/lib64:$LD_LIBRARY_PATH (or point /usr/local/cuda at it and use that).",
)
GPU028 = Code(
    "GPU028",
    "A CUDA toolkit's libcuda stub is on the library path",
    Severity.ERROR,
    what="A toolkit's lib64/stubs directory (a libcuda.so for linking without a driver) is on LD_LIBRARY_PATH or in "
    "/etc/ld.so.conf.d; with a libcuda.so.1 there it is loaded instead of the driver's.",
    why='CUDA programs then fail at start with "CUDA driver is a stub library" (cudaErrorStubLibrary) or report no GPU, although '
    "the driver works.",
    fix_by_hand="Remove the stubs directory from LD_LIBRARY_PATH and ld.so.conf.d (then run ldconfig); link against stubs with "
    "-L at build time only.",
)
GPU029 = Code(
    "GPU029",
    "The host compiler is newer than nvcc accepts",
    Severity.ERROR,
    what="The GCC that nvcc would call (NVCC_CCBIN, CUDAHOSTCXX or g++ on PATH) is newer than the toolkit's "
    "include/crt/host_config.h allows.",
    why='Every CUDA extension build (flash-attn, vLLM or llama.cpp from source) stops with "#error -- unsupported GNU '
    'version!"; -allow-unsupported-compiler compiles at the risk of wrong code.',
    fix_by_hand="Install a supported GCC beside it and point nvcc at it (export NVCC_CCBIN=g++-13, or CC/CXX for CMake), or use a "
    "newer CUDA toolkit.",
)
GPU031 = Code(
    "GPU031",
    "PyTorch's CUDA build and the toolkit an extension build would use differ",
    Severity.ERROR,
    what="PyTorch was built with one CUDA version, and the toolkit torch.utils.cpp_extension would compile with (CUDA_HOME, "
    "CUDA_PATH, nvcc on PATH, /usr/local/cuda) is another.",
    why='A different major version makes the build stop with "The detected CUDA version mismatches the version that was used to '
    'compile PyTorch"; a different minor version builds with a warning.',
    fix_by_hand="Point CUDA_HOME at a toolkit with PyTorch's CUDA version (torch.version.cuda), or install the PyTorch build for the "
    "toolkit you have.",
)
GPU030 = Code(
    "GPU030",
    "NVIDIA Jetson / Tegra board (unified memory)",
    Severity.INFO,
    what="An NVIDIA Tegra board (Jetson): no nvidia-smi; the GPU shares the system RAM with the CPU.",
    why="The decode budget has one memory pool for weights, KV cache and the OS; vm.swappiness and zram matter more, since pages the GPU "
    "needs can be swapped out.",
    fix_by_hand="Budget against total RAM minus the OS, keep swappiness low, and use tegrastats to watch memory.",
)


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


@dataclass(frozen=True)
class Toolkit:
    version: str
    judged: str  # the X.Y the compatibility table is read with
    source: str


@dataclass(frozen=True)
class TorchBuild:
    version: str | None
    cuda: str | None
    hip: str | None
    cudnn: str | None
    python: str
    torch_dir: str


@dataclass(frozen=True)
class GpuFacts(Facts):
    driver: str | None = None
    cuda: str | None = None  # the highest CUDA the driver supports
    source: str | None = None  # NVML, nvidia-smi -q -x, nvidia-smi -q
    attached: int | None = None
    devices: list[GpuDevice] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unified_memory: bool = False  # Jetson: the GPU allocates from system RAM
    board: str | None = None
    toolkits: list[Toolkit] = field(default_factory=list)
    torch: TorchBuild | None = None

    def summary(self) -> list[str]:
        lines = []
        if self.driver or self.devices:
            parts = [_device_text(d) for d in self.devices] or ["no GPU listed"]
            cuda = f"CUDA ≤ {self.cuda}, " if self.cuda else ""
            head = f"Driver {self.driver or '?'} ({cuda}via {self.source})"
            notes = f" ({'; '.join(self.notes)})" if self.notes else ""
            lines.append(f"{head}: " + "; ".join(parts) + notes)
        if self.board:
            lines.append(self.board)
        lines += [f"CUDA toolkit {t.version} ({t.source})" for t in self.toolkits]
        if self.torch:
            build = f"CUDA {self.torch.cuda}" if self.torch.cuda else f"ROCm {self.torch.hip}" if self.torch.hip else "CPU-only"
            lines.append(f"PyTorch {self.torch.version} ({build}, cuDNN {self.torch.cudnn or '?'}) in {self.torch.python}")
        return lines

    def environment(self) -> list[EnvRow]:
        rows = []
        if self.driver or self.devices:
            rows.append(EnvRow("NVIDIA driver", self.driver or "unknown", ("GPU01", "GPU020", "GPU021")))
            rows.append(EnvRow("CUDA (driver)", self.cuda or "unknown", ("GPU02",)))
        if self.board:
            rows.append(EnvRow("board", self.board, ("GPU030",)))
        rows += [EnvRow(f"GPU {d.index}", f"{d.name} ({d.memory_mib} MiB)") for d in self.devices]
        if self.toolkits:
            rows.append(EnvRow("CUDA toolkit", ", ".join(f"{t.version} ({t.source})" for t in self.toolkits), ("GPU020", "GPU023")))
        if self.torch:
            rows.append(
                EnvRow("PyTorch (serving)", f"{self.torch.version}, CUDA {self.torch.cuda or 'none'}", ("GPU021", "GPU022", "GPU023"))
            )
        return rows

    def metrics(self) -> list[Metric]:
        samples = tuple(Sample({"gpu": str(d.index), "name": d.name}, float(d.memory_mib << 20)) for d in self.devices if d.memory_mib)
        return [Metric("decode_doctor_gpu_memory_bytes", "Memory of each NVIDIA GPU, in bytes.", samples)] if samples else []

    def compared(self) -> dict[str, str | float]:
        values: dict[str, str | float] = {}
        if self.driver:
            values["NVIDIA driver"] = self.driver
        if self.cuda:
            values["CUDA (driver)"] = self.cuda
        if self.torch and self.torch.version:
            values["PyTorch"] = self.torch.version
        for toolkit in self.toolkits:
            values[f"CUDA toolkit ({toolkit.source})"] = toolkit.version
        return values


def _device_text(device: GpuDevice) -> str:
    memory = f"{device.memory_mib / 1024:.0f} GiB" if device.memory_mib else "memory unknown"
    bandwidth = f"{device.theoretical_gbps:.0f} GB/s theoretical" if device.theoretical_gbps else "bandwidth unknown (no bus width)"
    mig = ", MIG enabled" if (device.mig_mode or "").lower() == "enabled" else ""
    arch = f", {device.architecture}" if device.architecture else ""
    return f"GPU {device.index}: {device.name} ({memory}{arch}{mig}, {bandwidth})"


def _last_json_object(output: str) -> dict[str, Any] | None:
    """The probe's JSON line: the last line that is a JSON object (a sitecustomize or a warning may
    print around it)."""
    for line in reversed(output.strip().splitlines()[-50:]):
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    return None


def probe_torch(ctx: Context) -> TorchBuild | str | None:
    """PyTorch's version and CUDA build from torch/version.py, without importing torch; a string says
    why the probe failed; None: no torch."""
    from .nvidia import parse_torch_version_py

    python = ctx.options.get("python") or sys.executable
    record = ctx.run([python, "-c", TORCH_PROBE], timeout_s=20)
    if not record.ok:
        return record.error or record.stderr.strip()[-200:] or "the probe failed"
    data = _last_json_object(record.stdout)
    if data is None:
        return f"the probe printed no JSON object: {record.stdout.strip()[-120:]!r}"
    if not isinstance(data.get("torch_dir"), str) or not data["torch_dir"]:
        return None
    torch_dir = Path(data["torch_dir"])
    try:
        with open(torch_dir / "version.py", "rb") as handle:
            version = parse_torch_version_py(handle.read(1 << 16).decode("utf-8", errors="replace"))
    except OSError:
        return f"{torch_dir}/version.py is unreadable"
    cudnn = data.get("cudnn")
    if not cudnn:
        libs = sorted((torch_dir / "lib").glob("libcudnn.so.*")) if (torch_dir / "lib").is_dir() else []
        cudnn = libs[0].name.split(".so.", 1)[1] if libs else None
    python_version = data.get("python") if isinstance(data.get("python"), str) else "?"
    cudnn = cudnn if isinstance(cudnn, str) or cudnn is None else str(cudnn)
    return TorchBuild(version["version"], version["cuda"], version["hip"], cudnn, python_version, str(torch_dir))


def toolkits(ctx: Context) -> list[Toolkit]:
    from .nvidia import parse_nvcc, parse_version_json

    found = []
    nvcc = ctx.which("nvcc")
    if nvcc:
        record = ctx.run([nvcc, "--version"], timeout_s=10)
        version = parse_nvcc(record.stdout)
        if version:
            # nvcc's third number is its own build (12.8.61), not the toolkit update (12.8.1): judge X.Y
            found.append(Toolkit(version, ".".join(version.split(".")[:2]), nvcc))
    local = ctx.host_path("/usr/local")
    if local.is_dir():
        for directory in sorted(local.glob("cuda*")):
            # /usr/local/cuda is a link: followed inside --root, never to this machine's files
            real = resolve(ctx, f"/usr/local/{directory.name}")
            text = ctx.read_text(f"{real}/version.json") if ctx.host_path(real).is_dir() else None
            version = parse_version_json(text) if text else None
            if version and not any(t.version == version for t in found):
                found.append(Toolkit(version, version, f"/usr/local/{directory.name}/version.json"))
    return found


def kernel_texts(ctx: Context) -> list[tuple[str, str]]:
    """(source, text) for each kernel log there is: the log files, and on a live host dmesg and the
    journal's kernel messages."""
    texts = []
    for log in KERNEL_LOGS:
        text = ctx.read_text(log, limit=4 << 20)
        if text:
            texts.append((log, text[-(2 << 20) :]))
    if ctx.live_host:
        for argv in (["dmesg"], ["journalctl", "-k", "--no-pager", "-o", "short-iso", "-n", "50000"]):
            if ctx.which(argv[0]):
                record = ctx.run(argv, timeout_s=10)
                if record.ok and record.stdout:
                    texts.append((" ".join(argv[:2]), record.stdout[-(4 << 20) :]))
    return texts


def kernel_events(texts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    from .nvidia import scan_kernel_log

    events: list[tuple[str, str]] = []
    for _, text in texts:
        for event in scan_kernel_log(text):
            if event not in events:
                events.append(event)
    return events


def kernel_xids(texts: list[tuple[str, str]]) -> tuple[str, list[XidEvent]]:
    """The Xid events of the one log that holds the most: kern.log, syslog and dmesg repeat each
    other, so adding them up would count each event twice."""
    from .xid import xid_events

    best: tuple[str, list[XidEvent]] = ("", [])
    for source, text in texts:
        events = xid_events(text.splitlines())
        if len(events) > len(best[1]):
            best = (source, events)
    return best


class GpuStack(Check):
    name = "gpu"
    description = "NVIDIA driver, CUDA, toolkit, PyTorch and cuDNN versions and whether they work together"
    codes = (
        GPU010,
        GPU011,
        GPU012,
        GPU013,
        GPU014,
        GPU015,
        GPU016,
        GPU017,
        GPU018,
        GPU020,
        GPU021,
        GPU022,
        GPU023,
        GPU024,
        GPU025,
        GPU026,
        GPU027,
        GPU028,
        GPU029,
        GPU031,
        GPU030,
    )
    needs = Needs(platforms=("linux",))
    options = (
        Option("--python", "The Python interpreter whose PyTorch to inspect (default: decode-doctor's own)."),
        Option(
            "--nvidia-smi-timeout",
            "Seconds nvidia-smi may take before it counts as hung [default: 15].",
            type=amount(0.0, 3600.0, "seconds"),
            metavar="SECONDS",
        ),
    )
    timeout_s = 45.0
    facts_type = GpuFacts
    reads = "nvidia-smi's table, -q and -q -x and its errors, kernel logs (Xids), torch/vLLM collect_env, PyTorch's CUDA errors"
    retired = {"GPU001": "the GPUs and driver are now facts (check --verbose, JSON facts.gpu)"}

    def run(self, ctx: Context) -> list[Finding]:
        from .nvidia import probe_nvml

        findings: list[Finding] = []
        info: DriverInfo | None = probe_nvml() if ctx.live_host else None
        smi_failed = False
        if info is None:
            info, smi_failed = self._nvidia_smi(ctx, findings)
        texts = kernel_texts(ctx)
        events = kernel_events(texts)
        findings.extend(self._kernel_findings(events, kernel_xids(texts), findings))
        tegra = ctx.read_text("/etc/nv_tegra_release")
        pci = nvidia_pci_devices(ctx)
        driver_dir = ctx.host_path("/proc/driver/nvidia").is_dir()
        if info is None and not tegra and not pci and not driver_dir and not findings:
            return self._without_gpu(ctx)
        board = None
        if tegra:
            model = (ctx.read_text("/proc/device-tree/model") or "NVIDIA Jetson").strip("\x00\n ")
            release = tegra.strip().splitlines()[0]
            board = f"{model}: {release}"
            message = f"{board}. CPU and GPU share the system RAM."
            findings.append(self.finding("GPU030", message, evidence={"model": model, "release": release}))
        elif info is None and pci and not smi_failed and not ctx.which("nvidia-smi"):
            message = f"NVIDIA GPU(s) at {', '.join(pci)} but no nvidia-smi: the driver is not installed."
            findings.append(self.finding("GPU015", message, evidence={"pci_devices": pci}))
        torch = probe_torch(ctx)
        facts = GpuFacts(
            driver=info.driver_version if info else None,
            cuda=info.cuda_version if info else None,
            source=info.source if info else None,
            attached=info.attached if info else None,
            devices=list(info.devices) if info else [],
            notes=list(info.notes) if info else [],
            unified_memory=bool(tegra),
            board=board,
            toolkits=toolkits(ctx),
            torch=torch if isinstance(torch, TorchBuild) else None,
        )
        ctx.publish(facts)
        findings.extend(self._software(facts, bool(facts.devices) or bool(pci) or bool(tegra)))
        return findings + path_findings(self, ctx, facts.torch.cuda if facts.torch else None)

    @classmethod
    def analyze(cls, text: str, source: str) -> Analysis | None:
        from .analyze import analyze

        return analyze(cls(), text, source)

    def _nvidia_smi(self, ctx: Context, findings: list[Finding]) -> tuple[Any, bool]:
        from .analyze import SMI_FAILURE_CODES
        from .nvidia import classify_smi_failure, parse_smi_text, parse_smi_xml

        if not ctx.which("nvidia-smi"):
            return None, False
        limit = ctx.options.get("nvidia_smi_timeout") or SMI_TIMEOUT_S
        record = ctx.run(["nvidia-smi", "-q", "-x"], timeout_s=limit)
        evidence = _record_evidence(record)
        if record.timed_out:
            findings.append(
                self.finding("GPU016", f"nvidia-smi -q -x did not answer within {limit:g} s: the driver is stuck.", evidence=evidence)
            )
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
        kind = classify_smi_failure(output, record.exit_code)
        code, message = SMI_FAILURE_CODES.get(kind or "", ("GPU017", f"nvidia-smi failed with exit code {record.exit_code}."))
        findings.append(self.finding(code, message + f" Output: {output.strip()[:200]}", evidence=evidence))
        return None, True

    def _kernel_findings(self, events: list[tuple[str, str]], xids: tuple[str, list[XidEvent]], findings: list[Finding]) -> list[Finding]:
        extra = []
        source, xid_list = xids
        off_bus = [text for kind, text in events if kind == "off-bus"] + [e.text for e in xid_list if e.number == 79]
        if off_bus:
            extra.append(self.finding("GPU014", f"The kernel log says: {off_bus[-1]}.", evidence={"kernel_log": off_bus[-5:]}))
        xid = xid_gpu018(self, xid_list, f"The kernel log ({source})", {"source": source})
        if xid:
            extra.append(xid)
        no_adapter = [text for kind, text in events if kind == "no-adapter"]
        if no_adapter and not any(f.code in ("GPU010", "GPU012") for f in findings):
            extra.append(
                self.finding(
                    "GPU012",
                    "The kernel log says: No NVIDIA graphics adapter probed (another driver such as nouveau holds the GPU, or it is "
                    "unsupported).",
                    evidence={"kernel_log": no_adapter[-5:]},
                )
            )
        mismatch = [text for kind, text in events if kind == "api-mismatch"]
        if mismatch and not any(f.code == "GPU011" for f in findings):
            extra.append(
                self.finding(
                    "GPU011", f"The kernel log says: {mismatch[-1]} Reboot or reload the module.", evidence={"kernel_log": mismatch[-5:]}
                )
            )
        elif mismatch:
            for i, finding in enumerate(findings):
                if finding.code == "GPU011":
                    findings[i] = self.finding(
                        "GPU011",
                        finding.message + f" Kernel log: {mismatch[-1]}",
                        evidence={**finding.evidence, "kernel_log": mismatch[-5:]},
                    )
        return extra

    def _without_gpu(self, ctx: Context) -> list[Finding]:
        """No GPU yet: the CUDA toolkits and PyTorch's CUDA build, and the driver they will need."""
        import importlib.util

        from .nvidia import min_driver, minor_floor

        found = toolkits(ctx)
        torch = probe_torch(ctx) if ctx.options.get("python") or importlib.util.find_spec("torch") else None
        torch = torch if isinstance(torch, TorchBuild) else None
        if not found and not (torch and torch.cuda):
            raise SkipCheck("no NVIDIA GPU (no NVML, nvidia-smi, /proc/driver/nvidia or NVIDIA PCI device)")
        facts = GpuFacts(source="no GPU", toolkits=found, torch=torch)
        ctx.publish(facts)
        needs = []
        items = [(f"CUDA toolkit {t.version} ({t.source})", t.judged) for t in found]
        if torch and torch.cuda:
            items.append((f"PyTorch {torch.version} built for CUDA {torch.cuda}", torch.cuda))
        for label, cuda in items:
            row, floor = min_driver(cuda), minor_floor(cuda)
            if row is not None:
                needs.append(f"{label} needs driver ≥ {row[1]}" + (f" (≥ {floor} with minor-version compatibility)" if floor else ""))
        message = "No NVIDIA GPU here yet. " + ("; ".join(needs) + "." if needs else "The installed CUDA software is listed in the facts.")
        findings = [self.finding("GPU024", message, evidence={"needs": needs})]
        return findings + self._software(facts, gpu_host=False) + path_findings(self, ctx, torch.cuda if torch else None)

    def _software(self, facts: GpuFacts, gpu_host: bool) -> list[Finding]:
        from .nvidia import compat_table, vkey

        baseline = compat_table()["baseline"]
        behind = []
        findings = []
        for toolkit in facts.toolkits:
            if vkey(toolkit.version) < vkey(baseline["cuda"]):
                behind.append(f"CUDA toolkit {toolkit.version} ({toolkit.source}) < {baseline['cuda']}")
            if facts.driver:
                findings.extend(self._toolkit_against_driver(toolkit, facts.driver))
        torch = facts.torch
        if torch:
            label = f"PyTorch {torch.version}"
            if torch.version and vkey(torch.version) < vkey(baseline["torch"]):
                behind.append(f"{label} < {baseline['torch']}")
            if torch.cudnn and vkey(torch.cudnn) < vkey(baseline["cudnn"]):
                behind.append(f"cuDNN {torch.cudnn} < {baseline['cudnn']}")
            if torch.cuda and vkey(torch.cuda) < vkey(baseline["cuda"]):
                behind.append(f"{label} built for CUDA {torch.cuda} < {baseline['cuda']}")
            findings.extend(self._torch_against_driver(torch, facts.driver, gpu_host))
        if behind:
            message = "Below the LLM-inference baseline: " + "; ".join(behind) + "."
            findings.append(self.finding("GPU023", message, evidence={"below": behind, "baseline": baseline}))
        return findings

    def _toolkit_against_driver(self, toolkit: Toolkit, driver: str) -> list[Finding]:
        from .nvidia import compat_table, judge

        verdict = judge(toolkit.judged, driver, f"CUDA toolkit {toolkit.version} ({toolkit.source})")
        evidence = {
            "toolkit": toolkit.version,
            "source": toolkit.source,
            "driver": driver,
            "needs_full": verdict.needs_full,
            "minor_floor": verdict.floor,
        }
        if verdict.level == "incompatible":
            message = verdict.message + f": upgrade the driver to >= {verdict.needs_full}."
            return [self.finding("GPU020", message, evidence=evidence)]
        if verdict.level == "minor-compat":
            message = verdict.message + ": limited features, and " + compat_table()["ptx_caveat"].split(", but ")[1]
            return [self.finding("GPU020", message, evidence=evidence, severity=Severity.WARNING)]
        return []

    def _torch_against_driver(self, torch: TorchBuild, driver: str | None, gpu_host: bool) -> list[Finding]:
        from .nvidia import build_for_driver, judge

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
                message = f"{label} (in {torch.python}) is a CPU-only build on a host with an NVIDIA GPU."
                return [self.finding("GPU022", message, evidence=evidence)]
            return []
        if not driver:
            return []
        verdict = judge(torch.cuda, driver, f"{label} built for CUDA {torch.cuda}")
        if verdict.level == "incompatible":
            alternative = build_for_driver(driver)
            advice = f": upgrade the driver to >= {(verdict.needs_full or '').split('.')[0]}"
            if alternative:
                advice += f" or install a cu{alternative.replace('.', '')} build"
            evidence.update(needs_full=verdict.needs_full, minor_floor=verdict.floor)
            return [self.finding("GPU021", verdict.message + advice + ".", evidence=evidence)]
        if verdict.level == "minor-compat":
            return [self.finding("GPU021", verdict.message + ".", evidence=evidence, severity=Severity.INFO)]
        return []
