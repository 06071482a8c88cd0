"""Typed facts: what a check learned about the host, beside its findings.

A check publishes one Facts dataclass (ctx.publish). Later checks read it by type
(ctx.facts.get(BandwidthFacts), declared in Needs.reads), and the
reports are built from it through the hooks below, so no module outside a feature names that
feature's codes or keys: the environment table, Prometheus metrics, HTML blocks, the text summary
and `diff` all ask the facts. Facts cross process boundaries (pickle) and land in the JSON report
(to_dict); from_dict rebuilds them when a report is read back.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, Union, cast

from ..i18n import _, raw_text
from .findings import Code, JSONValue

F = TypeVar("F", bound="Facts")
T = TypeVar("T")


def device_with_memory(name: str, memory_mib: int | None) -> str:
    """An environment table's device cell: its name and memory, or that its memory was not reported."""
    if memory_mib:
        return _("{name} ({memory} MiB)", name=name, memory=f"{memory_mib:,}")
    return _("{name} (memory not reported)", name=name)


@dataclass(frozen=True)
class EnvRow:
    """One row of the environment table. codes: this feature's codes (constants, or code prefixes
    such as "GPU02") whose findings judge it."""

    name: str
    value: str
    codes: tuple[Code | str, ...] = ()
    known: bool = True  # False: the value could not be read, so its row is "not judged", never "ok"

    def __post_init__(self) -> None:
        raw_text(self.value, f"the environment row {self.name!r}")

    @property
    def prefixes(self) -> tuple[str, ...]:
        return tuple(c.code if isinstance(c, Code) else c for c in self.codes)


@dataclass(frozen=True)
class Sample:
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Metric:
    """A Prometheus gauge; the host label is added by the renderer."""

    name: str
    help: str
    samples: tuple[Sample, ...]


@dataclass(frozen=True)
class Series:
    label: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Chart:
    """A line chart as data; the HTML report draws it as inline SVG."""

    x_label: str
    y_label: str
    series: tuple[Series, ...]
    log_x: bool = False


@dataclass(frozen=True)
class HtmlBlock:
    """A section of the HTML report: a two-column table, a chart, or both."""

    title: str
    rows: tuple[tuple[str, str], ...] = ()
    chart: Chart | None = None


@dataclass(frozen=True)
class Facts:
    """Base class of every check's facts; subclasses are frozen dataclasses."""

    # Show summary() in the default text output (facts that answer what the user asked, such as
    # a model's budget); host inventory is shown with --verbose only.
    shown_by_default: ClassVar[bool] = False

    def summary(self) -> list[str]:
        """Lines for the text report."""
        return []

    def environment(self) -> list[EnvRow]:
        return []

    def metrics(self) -> list[Metric]:
        return []

    def html(self) -> list[HtmlBlock]:
        return []

    def compared(self) -> dict[str, str | float]:
        """Values `diff` compares between two reports: strings as versions, numbers as measurements."""
        return {}

    def to_dict(self) -> dict[str, JSONValue]:
        return values_dict(self)

    @classmethod
    def from_dict(cls: type[F], data: Mapping[str, object]) -> F:
        """Rebuilds the facts from to_dict(); raises ValueError when the data do not fit."""
        return cast(F, _build(cls, data))


class Board:
    """Typed values by their type, one of each: the facts published so far (ctx.facts.get(GpuFacts))
    and what a command hands the checks (ctx.supplied.get(Measured)).

    A feature whose facts others read publishes their type in its contract module; a reader
    imports that module and asks for the type, so a renamed field is a type error, not a crash.
    """

    def __init__(self, values: Iterable[object] = ()) -> None:
        self._by_type: dict[type, object] = {}
        for value in values:
            self.put(value)

    def put(self, value: object) -> None:
        self._by_type[type(value)] = value

    def get(self, kind: type[T]) -> T | None:
        found = self._by_type.get(kind)
        return found if isinstance(found, kind) else None

    def values(self) -> list[object]:
        return list(self._by_type.values())

    def __len__(self) -> int:
        return len(self._by_type)


def _build(cls: type, data: object) -> object:
    if not isinstance(data, dict):
        raise ValueError(
            f"{cls.__name__}: expected an object, got {type(data).__name__}"
        )  # untranslated: a programmer's error (facts travel between checks)
    hints = typing.get_type_hints(cls)
    values = {}
    for item in dataclasses.fields(cls):
        if not item.init:
            continue
        if item.name not in data:
            if item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING:
                raise ValueError(
                    f"{cls.__name__}: {item.name} is missing"
                )  # untranslated: a programmer's error (facts travel between checks)
            continue
        values[item.name] = _convert(hints[item.name], data[item.name])
    return cls(**values)


def _convert(hint: object, value: object) -> object:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None:
            return None
        for option in options:
            try:
                return _convert(option, value)
            except (ValueError, TypeError):
                continue
        return value
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _build(hint, value)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)  # a state written by its value; ValueError for one this release does not know
    if origin in (list, tuple) and isinstance(value, list):
        args = typing.get_args(hint)
        inner = args[0] if args else Any
        items = [_convert(inner, v) for v in value]
        return tuple(items) if origin is tuple else items
    return value


REPORTED = "decode_doctor.reported"  # field metadata: False keeps a field out of reports (a config.json read whole)


def values_dict(value: object) -> dict[str, JSONValue]:
    """A value's fields as a dict, as dataclasses.asdict makes it, less the fields marked
    metadata={REPORTED: False} (facts hold values only: no callables, tests/test_contract.py)."""
    assert dataclasses.is_dataclass(value) and not isinstance(value, type)
    data = dataclasses.asdict(value)
    _drop_unreported(value, data)
    return data


def _drop_unreported(value: object, data: object) -> None:
    """Removes, in asdict's output data, the fields of value (and of the dataclasses it holds) marked unreported."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and isinstance(data, dict):
        for item in dataclasses.fields(value):
            if item.metadata.get(REPORTED, True) is False:
                data.pop(item.name, None)
            elif item.name in data:
                _drop_unreported(getattr(value, item.name), data[item.name])
    elif isinstance(value, list | tuple) and isinstance(data, list | tuple):
        for inner, shown in zip(value, data, strict=False):
            _drop_unreported(inner, shown)
    elif isinstance(value, dict) and isinstance(data, dict):
        for key, inner in value.items():
            if key in data:
                _drop_unreported(inner, data[key])
