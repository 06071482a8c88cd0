"""Jetson power mode and clocks from `nvpmodel -q` and `jetson_clocks --show`: a board below its
maximum power mode, or with its memory clock left to scale, decodes slower than it can."""

from __future__ import annotations

from dataclasses import dataclass

MAX_LINES = 10_000


@dataclass(frozen=True)
class Clock:
    minimum: int
    maximum: int
    current: int


@dataclass(frozen=True)
class JetsonPower:
    mode: str | None = None  # "MAXN", "MAXN_SUPER", "25W", "5W"
    mode_line: int | None = None
    machine: str | None = None
    gpu: Clock | None = None
    emc: Clock | None = None  # the memory controller clock: what bounds decode
    emc_locked: bool | None = None
    online_cpus: str | None = None

    @property
    def maximum_mode(self) -> bool:
        return self.mode is not None and self.mode.upper().startswith("MAXN")


def looks_like_jetson(text: str) -> bool:
    return "NV Power Mode:" in text[:65536]


def _clock(words: list[str]) -> Clock | None:
    values = dict(word.split("=", 1) for word in words if "=" in word)
    try:
        return Clock(int(values["MinFreq"]), int(values["MaxFreq"]), int(values["CurrentFreq"]))
    except (KeyError, ValueError):
        return None


def parse(text: str) -> JetsonPower:
    """The last report in the text (a paste may hold a before and an after)."""
    found: dict[str, object] = {}
    for number, line in enumerate(text.splitlines()[:MAX_LINES], start=1):
        line = line[:4096].strip()
        words = line.split()
        if line.startswith("NV Power Mode:"):
            found.update(mode=line.split(":", 1)[1].strip() or None, mode_line=number)
        elif line.startswith("SOC family:") and "Machine:" in line:
            found["machine"] = line.split("Machine:", 1)[1].strip() or None
        elif line.startswith("Online CPUs:"):
            found["online_cpus"] = line.split(":", 1)[1].strip() or None
        elif words[:1] == ["GPU"] and "MinFreq=" in line:
            found["gpu"] = _clock(words[1:])
        elif words[:1] == ["EMC"] and "MinFreq=" in line:
            found["emc"] = _clock(words[1:])
            override = next((w.split("=", 1)[1] for w in words if w.startswith("FreqOverride=")), None)
            found["emc_locked"] = override == "1" if override in ("0", "1") else None
    return JetsonPower(**found)  # type: ignore[arg-type]
