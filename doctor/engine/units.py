"""Sizes and rates as people write them: 80GiB, 24GB, 3.35TB/s. A bare number of bytes is GiB (what
GPUs are sold in: a "24 GB" card holds 24 GiB = 25.77 GB); a bare rate is GB/s."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from ..i18n import N_, _, chinese, ngettext

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgtp]?i?b?)?\s*$", re.I)
_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgtp]?i?b?)?\s*(?:/\s*s|ps)?\s*$", re.I)
DECIMAL = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
BINARY = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def _scale(unit: str, default: str) -> float:
    unit = (unit or default).lower().rstrip("b")
    if unit.endswith("i"):
        return BINARY[unit[:-1]]
    return DECIMAL[unit]


def parse_bytes(text: str) -> int:
    """'80GiB', '24GB', '24' (GiB) → bytes; ValueError with a one-line reason otherwise."""
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(_("{text} is not a size: write 80GiB, 24GB or 512MiB", text=given(text)))
    value = float(match.group(1)) * _scale(match.group(2) or "", "GiB")
    if value <= 0:
        raise ValueError(_("{text}: a size must be more than 0", text=given(text)))
    return int(value)


def parse_rate(text: str) -> float:
    """'3.35TB/s', '900GB/s', '204.8' (GB/s) → GB/s."""
    match = _RATE.match(str(text))
    if not match:
        raise ValueError(_("{text} is not a bandwidth: write 3.35TB/s or 900GB/s", text=given(text)))
    value = float(match.group(1)) * _scale(match.group(2) or "", "GB") / 1e9
    if value <= 0:
        raise ValueError(_("{text}: a bandwidth must be more than 0", text=given(text)))
    return value


def whole(minimum: int = 1, maximum: int | None = None, what: str = N_("a whole number")) -> Callable[[str], int]:
    """A command-line type: an integer within [minimum, maximum]; ValueError names the range."""

    def parse(text: str) -> int:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise ValueError(_("{text} is not {what}", text=given(text), what=_(what))) from None
        if value < minimum or (maximum is not None and value > maximum):
            if maximum is not None:
                message = _(
                    "{value} is out of range: give {what} from {minimum:,} to {maximum:,}",
                    value=given(value),
                    what=_(what),
                    minimum=minimum,
                    maximum=maximum,
                )
            else:
                message = _(
                    "{value} is out of range: give {what} from {minimum:,} or more", value=given(value), what=_(what), minimum=minimum
                )
            raise ValueError(message)
        return value

    parse.__name__ = what
    return parse


def amount(minimum: float = 0.0, maximum: float | None = None, what: str = N_("a number")) -> Callable[[str], float]:
    """A command-line type: a finite number above minimum (exclusive) and at most maximum."""

    def parse(text: str) -> float:
        try:
            value = float(str(text).strip())
        except ValueError:
            raise ValueError(_("{text} is not {what}", text=given(text), what=_(what))) from None
        if not math.isfinite(value) or value <= minimum or (maximum is not None and value > maximum):
            if maximum is not None:
                message = _(
                    "{text} is out of range: give {what} above {minimum:g} and at most {maximum:g}",
                    text=given(text),
                    what=_(what),
                    minimum=minimum,
                    maximum=maximum,
                )
            else:
                message = _("{text} is out of range: give {what} above {minimum:g}", text=given(text), what=_(what), minimum=minimum)
            raise ValueError(message)
        return value

    parse.__name__ = what
    return parse


def given(text: object) -> str:
    """What the user typed, quoted as a Chinese reader expects a quoted input too: "5x"."""
    return f'"{text}"'


def human_bytes(value: float | None) -> str:
    if value is None:
        return _("not known")
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.1f} {unit}"
    return byte_count(value)


def human_binary(value: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= size:
            return f"{value / size:g} {unit}" if (value / size).is_integer() else f"{value / size:.1f} {unit}"
    return byte_count(value)


def byte_count(value: float) -> str:
    """A size below a kilobyte in words ("41 bytes", "41 字节"): a bare "B" beside "17.17B" reads as billions."""
    count = round(value)
    return ngettext("{count} byte", "{count} bytes", count, count=f"{count:,}")


def large_count(value: float, exact: bool = False) -> str:
    """A count in the billions as a reader writes it: "13.42B" (exact: "13,421,772,800") in English,
    "134.2 亿" in Chinese."""
    if chinese():
        if value >= 1e8:
            return f"{value / 1e8:,.1f} 亿"
        return f"{value / 1e4:,.1f} 万" if value >= 1e4 else f"{value:,.0f} "
    return f"{value:,.0f}" if exact else f"{value / 1e9:.2f}B"


_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def duration(minimum: float, maximum: float) -> Callable[[str], float]:
    """A command-line type: a time in seconds, written 900, 90s, 15m, 1h or 1d, within [minimum, maximum]."""

    def parse(text: str) -> float:
        stripped = str(text).strip().lower()
        digits = stripped.rstrip("abcdefghijklmnopqrstuvwxyz").strip()
        unit = stripped[len(stripped.rstrip("abcdefghijklmnopqrstuvwxyz")) :]
        try:
            value = float(digits) * _DURATION_UNITS[unit]
        except (ValueError, KeyError):
            raise ValueError(_("{text} is not a time: write 900, 90s, 15m, 1h or 1d", text=given(text))) from None
        if not math.isfinite(value) or value < minimum or value > maximum:
            raise ValueError(
                _(
                    "{text} is out of range: give a time from {minimum:g} s to {maximum:g} s",
                    text=given(text),
                    minimum=minimum,
                    maximum=maximum,
                )
            )
        return value

    return parse
