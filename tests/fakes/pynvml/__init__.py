"""A stand-in for nvidia-ml-py: one H200-like device (5120-bit HBM3e at 2619 MHz)."""

NVML_CLOCK_MEM = 2


def nvmlInit() -> None:
    pass


def nvmlShutdown() -> None:
    pass


def nvmlDeviceGetCount() -> int:
    return 1


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    return index


def nvmlDeviceGetMemoryBusWidth(handle: int) -> int:
    return 5120


def nvmlDeviceGetMaxClockInfo(handle: int, clock: int) -> int:
    return 2619


class _Memory:
    total = 150_754_820_096


def nvmlSystemGetDriverVersion() -> str:
    return "590.48.01"


def nvmlSystemGetCudaDriverVersion() -> int:
    return 13010


def nvmlDeviceGetName(handle: int) -> str:
    return "NVIDIA H200"


def nvmlDeviceGetMemoryInfo(handle: int) -> _Memory:
    return _Memory()


def nvmlDeviceGetMigMode(handle: int) -> tuple[int, int]:
    return (0, 0)


def nvmlDeviceGetUUID(handle: int) -> str:
    return "GPU-00000000-0000-0000-0000-000000000000"


class NVMLError(Exception):
    """nvidia-ml-py's base error; a call this stand-in does not define is one the binding lacks."""


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_InvalidArgument(NVMLError):
    pass
