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
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, Union

from .findings import Code

F = TypeVar("F", bound="Facts")
T = TypeVar("T")


@dataclass(frozen=True)
class EnvRow:
    """One row of the environment table. codes: this feature's codes (constants, or code prefixes
    such as "GPU02") whose findings judge it."""

    name: str
    value: str
    codes: tuple[Code | str, ...] = ()

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

    def to_dict(self) -> dict[str, Any]:
        return values_dict(self)

    @classmethod
    def from_dict(cls: type[F], data: dict[str, Any]) -> F:
        """Rebuilds the facts from to_dict(); raises ValueError when the data do not fit."""
        return _build(cls, data)


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


def _build(cls: type, data: Any) -> Any:
    if not isinstance(data, dict):
        raise ValueError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    values = {}
    for item in dataclasses.fields(cls):
        if not item.init:
            continue
        if item.name not in data:
            if item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING:
                raise ValueError(f"{cls.__name__}: {item.name} is missing")
            continue
        values[item.name] = _convert(hints[item.name], data[item.name])
    return cls(**values)


def _convert(hint: Any, value: Any) -> Any:
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
    if origin in (list, tuple) and isinstance(value, list):
        args = typing.get_args(hint)
        inner = args[0] if args else Any
        items = [_convert(inner, v) for v in value]
        return tuple(items) if origin is tuple else items
    return value


def values_dict(value: Any) -> dict[str, Any]:
    """dataclasses.asdict without the callables a value may carry (a feature's hook for another,
    such as DecodePrediction.learn_with): a report holds values only."""
    return dataclasses.asdict(value, dict_factory=lambda items: {key: item for key, item in items if not callable(item)})
