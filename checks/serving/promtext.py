"""The Prometheus text exposition format (and the OpenMetrics text most servers also accept), parsed
in one pass with limits: a scan per line, no regular expression, the text and its series bounded,
so a hostile /metrics answer costs linear time and bounded memory."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from decode_doctor.i18n import said

MAX_TEXT_BYTES = 8 << 20
MAX_LINE_CHARS = 64 << 10
MAX_SAMPLES = 200_000
MAX_LABELS = 64
MAX_DROPPED = 100  # the metric names of dropped lines kept, for the diagnosis to tell what it lost


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str) -> str | None:
        return next((v for k, v in self.labels if k == key), None)


@dataclass
class Exposition:
    samples: list[Sample]
    types: dict[str, str]  # family → counter, gauge, histogram…
    skipped: int  # lines that were not valid samples
    truncated: bool  # the text or the sample count passed its limit
    dropped: tuple[str, ...] = ()  # the metric names their dropped lines start with (too long, cut, malformed)

    def named(self, name: str) -> list[Sample]:
        return [s for s in self.samples if s.name == name]


def _name_end(line: str, start: int) -> int:
    index = start
    while index < len(line) and (line[index].isalnum() or line[index] in "_:"):
        index += 1
    return index


def _labels(line: str, index: int) -> tuple[tuple[tuple[str, str], ...], int]:
    """Parses {a="b",c="d"} starting at the brace; returns the labels and the index after it."""
    labels: list[tuple[str, str]] = []
    index += 1
    while True:
        while index < len(line) and line[index] in " ,":
            index += 1
        if index < len(line) and line[index] == "}":
            return tuple(labels), index + 1
        end = _name_end(line, index)
        if end == index or line[end : end + 2] != '="':
            raise ValueError(said("bad label"))
        key = line[index:end]
        index = end + 2
        value: list[str] = []
        while True:
            if index >= len(line):
                raise ValueError(said("unterminated label value"))
            char = line[index]
            if char == "\\" and index + 1 < len(line):
                nxt = line[index + 1]
                value.append("\n" if nxt == "n" else nxt)
                index += 2
                continue
            if char == '"':
                index += 1
                break
            value.append(char)
            index += 1
        labels.append((key, "".join(value)))
        if len(labels) > MAX_LABELS:
            raise ValueError(said("too many labels"))


def _value(text: str) -> float:
    lowered = text.lower()
    if lowered in ("nan",):
        return math.nan
    if lowered in ("+inf", "inf"):
        return math.inf
    if lowered == "-inf":
        return -math.inf
    return float(text)


def _lines(text: str) -> Iterator[str]:
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        if end < 0:
            end = len(text)
        yield text[start:end]
        start = end + 1


def parse(data: bytes | str) -> Exposition:
    truncated = len(data) > MAX_TEXT_BYTES
    raw = data[:MAX_TEXT_BYTES]
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    samples: list[Sample] = []
    types: dict[str, str] = {}
    skipped = 0
    dropped: list[str] = []

    def drop(line: str) -> None:
        nonlocal skipped
        skipped += 1
        name = line[: _name_end(line[:256], 0)]
        if name and len(dropped) < MAX_DROPPED and name not in dropped:
            dropped.append(name)

    for line in _lines(text):
        line = line.strip()
        if not line:
            continue
        if len(line) > MAX_LINE_CHARS:
            drop(line)
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3].strip().lower()
            continue
        try:
            end = _name_end(line, 0)
            if end == 0:
                raise ValueError(said("no metric name"))
            name = line[:end]
            labels: tuple[tuple[str, str], ...] = ()
            index = end
            if index < len(line) and line[index] == "{":
                labels, index = _labels(line, index)
            fields = line[index:].split()
            if not fields:
                raise ValueError(said("no sample value"))
            samples.append(Sample(name, labels, _value(fields[0])))
        except ValueError:
            drop(line)
            continue
        if len(samples) >= MAX_SAMPLES:
            truncated = True
            break
    return Exposition(samples, types, skipped, truncated, tuple(dropped))
