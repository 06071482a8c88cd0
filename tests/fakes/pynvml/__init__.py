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
