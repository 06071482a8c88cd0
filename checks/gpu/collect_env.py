"""The output of `python -m torch.utils.collect_env` and vLLM's `collect_env.py` (the old "Key: value"
form and the newer sectioned "Key   : value" form), and PyTorch's own CUDA error messages, read line
by line: the PyTorch build, the driver, the GPUs, cuDNN and the toolkit nvcc reports."""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_LINES = 20_000
MAX_LINE = 4096
MAX_GPUS = 1024
ABSENT = frozenset({"", "n/a", "none", "could not collect", "no cuda", "not found", "unknown"})
# the keys read; a value may continue on the lines below (the GPU list, cuDNN's candidates)
KEYS = {
    "pytorch version": "torch",
    "cuda used to build pytorch": "cuda_build",
    "rocm used to build pytorch": "rocm_build",
    "is cuda available": "cuda_available",
    "cuda runtime version": "cuda_runtime",
    "nvidia driver version": "driver",
    "gpu models and configuration": "gpus",
    "cudnn version": "cudnn",
    "hip runtime version": "hip",
    "os": "os",
    "python version": "python",
    "vllm version": "vllm",
}


@dataclass
class CollectEnv:
    torch: str | None = None
    cuda_build: str | None = None  # "12.1": the CUDA the wheel was built with
    rocm_build: str | None = None
    cuda_available: bool | None = None
    cuda_runtime: str | None = None  # what nvcc on PATH says (the system toolkit), not the wheel's runtime
    driver: str | None = None
    gpus: list[str] = field(default_factory=list)
    cudnn: str | None = None
    hip: str | None = None
    os: str | None = None
    python: str | None = None
    vllm: str | None = None
    lines: dict[str, int] = field(default_factory=dict)  # field → the line it came from


def looks_like_collect_env(text: str) -> bool:
    head = text[:16384]
    return ("CUDA used to build PyTorch" in head or "Is CUDA available" in head) and "Nvidia driver version" in text[:65536]


def _value(raw: str) -> str | None:
    value = " ".join(raw.split())
    return None if value.lower() in ABSENT else value


def _cudnn_version(text: str) -> str | None:
    """ "8.9.7" from "/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.7", or a bare "8.9.2" / "90100"."""
    at = text.find("libcudnn.so.")
    candidate = (text[at + len("libcudnn.so.") :].split() or [""])[0] if at >= 0 else text.strip()
    if candidate.isdecimal() and len(candidate) == 5:  # torch.backends.cudnn.version(): 90100 is 9.1.0
        return f"{int(candidate) // 10000}.{int(candidate) // 100 % 100}.{int(candidate) % 100}"
    parts = candidate.split(".")
    return candidate if 1 <= len(parts) <= 4 and all(p.isdecimal() and len(p) <= 4 for p in parts) else None


def parse_collect_env(text: str) -> CollectEnv:
    found = CollectEnv()
    continuing = ""  # the multi-line field being read
    for number, line in enumerate(text.splitlines()[:MAX_LINES], start=1):
        line = line[:MAX_LINE]
        key, colon, raw = line.partition(":")
        name = KEYS.get(" ".join(key.split()).lower()) if colon and not line.startswith((" ", "\t", "/")) else None
        if name is None:
            stripped = line.strip()
            if continuing == "gpus" and stripped.startswith("GPU ") and ":" in stripped and len(found.gpus) < MAX_GPUS:
                found.gpus.append(stripped.split(":", 1)[1].split("(UUID")[0].strip() or stripped)
                continue
            if continuing == "cudnn" and "libcudnn.so." in stripped:
                found.cudnn = found.cudnn or _cudnn_version(stripped)
                continue
            continuing = ""
            continue
        continuing = name
        value = _value(raw)
        if name in found.lines or value is None:
            continue
        found.lines[name] = number
        if name == "cuda_available":
            found.cuda_available = value.lower() == "true"
        elif name == "gpus":
            name_part = value.split(":", 1)[1] if value.startswith("GPU ") and ":" in value else value
            found.gpus.append(name_part.split("(UUID")[0].strip() or value)
        elif name == "cudnn":
            found.cudnn = _cudnn_version(value)
        elif name in ("torch", "python"):
            setattr(found, name, value.split()[0])
        else:
            setattr(found, name, value)
    return found


TOO_OLD = "driver on your system is too old (found version "
CAPABILITY = " with CUDA capability "


@dataclass(frozen=True)
class TorchError:
    kind: str  # "driver-too-old" or "arch-missing"
    line: int
    text: str
    driver_cuda: str | None = None  # "10.1" from "found version 10010"
    capability: str | None = None  # "sm_90"
    supported: tuple[str, ...] = ()


def torch_errors(lines: list[str]) -> list[TorchError]:
    """PyTorch's messages that say why CUDA fails: the driver too old for the wheel ("found version
    10010": the CUDA the driver supports, 1000×major + 10×minor), or a wheel without the GPU's
    architecture ("with CUDA capability sm_90 is not compatible with the current PyTorch installation")."""
    errors = []
    for number, line in enumerate(lines[:MAX_LINES], start=1):
        line = line[:MAX_LINE]
        at = line.find(TOO_OLD)
        if at >= 0:
            digits = line[at + len(TOO_OLD) :].split(")", 1)[0].strip()
            cuda = f"{int(digits) // 1000}.{int(digits) % 1000 // 10}" if digits.isdecimal() and len(digits) <= 6 else None
            errors.append(TorchError("driver-too-old", number, line.strip(), driver_cuda=cuda))
            continue
        at = line.find(CAPABILITY)
        if at >= 0 and "is not compatible with the current PyTorch installation" in line:
            capability = (line[at + len(CAPABILITY) :].split() or ["?"])[0]
            supported: tuple[str, ...] = ()
            following = lines[number] if number < len(lines) else ""
            if "supports CUDA capabilities" in following:
                supported = tuple(w.rstrip(".") for w in following.split("capabilities", 1)[1].split() if w.startswith("sm_"))
            errors.append(TorchError("arch-missing", number, line.strip(), capability=capability, supported=supported))
    return errors
