from __future__ import annotations

from dataclasses import dataclass


class _Clock:
    now = 0.0

    def advance(self, seconds: float) -> None:
        self.now += seconds


_clock = _Clock()


@dataclass
class _Props:
    name: str
    total_memory: int


def is_available() -> bool:
    return True


def device_count() -> int:
    return 1


def get_device_properties(index: int) -> _Props:
    return _Props("NVIDIA H200 (fake)", 150_000_000_000)


def mem_get_info(index: int) -> tuple[int, int]:
    return 140_000_000_000, 150_000_000_000


def empty_cache() -> None:
    pass


class Event:
    def __init__(self, enable_timing: bool = False):
        self.at = 0.0

    def record(self) -> None:
        self.at = _clock.now

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: Event) -> float:
        return (end.at - self.at) * 1000
