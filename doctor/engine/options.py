"""Typed check options: each check that adds options to `decode-doctor check` declares them as one
frozen dataclass (a subclass of Options), each field with its command-line flag:

    @dataclass(frozen=True)
    class BandwidthOptions(Options):
        threads: int | None = option("--threads", "Threads for the CPU probe.", parse=int, default=None)
        thorough: bool = option("--thorough", "A larger buffer and longer probe.", is_flag=True, default=False)

    class Bandwidth(Check):
        options = BandwidthOptions

A check reads its options, and the options another feature owns, by type: `ctx.option(BandwidthOptions)`
(the values given, or the dataclass's defaults). Options more than one feature reads live in the
contract module of the feature that owns their meaning. The registry holds them to one namespace when it
loads (a flag, a field name, an options type: one owner each) and checks every option a check refers
to by name (Reads.unless_option, Needs.inputs): a misspelled one is a load error, never a silent
"not given".

Commands declare their options the same way (app.flags: click_options, same_as): a command's callback
turns click's parameters into its dataclasses at once and passes only those on, and a flag two
commands take (--threads for check, estimate and bench) is one declaration.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar, cast, overload

T = TypeVar("T", bound="Options")
V = TypeVar("V")

FLAG = "decode_doctor.flag"  # the dataclass field metadata key of an option's Flag


@dataclass(frozen=True)
class Flag:
    """What the command line shows and takes for one option."""

    flag: str  # "--from-encoding"
    help: str
    multiple: bool = False
    is_flag: bool = False
    parse: Callable[[str], object] | None = None  # raising ValueError is a usage error on the command line
    choices: tuple[str, ...] = ()
    metavar: str | None = None  # what --help shows for the value
    # what only a command's own options use (a check's options leave them at these defaults):
    short: str | None = None  # "-o" beside "--output"
    required: bool = False
    show_default: bool = False
    envvar: str | None = None
    kind: object = None  # a click ParamType (a path, a range) the command line uses instead of parse


@overload
def option(
    flag: str,
    help: str,
    *,
    default: V,
    multiple: bool = False,
    is_flag: bool = False,
    parse: Callable[[str], object] | None = None,
    choices: tuple[str, ...] = (),
    metavar: str | None = None,
    short: str | None = None,
    required: bool = False,
    show_default: bool = False,
    envvar: str | None = None,
    kind: object = None,
) -> V: ...


@overload
def option(
    flag: str,
    help: str,
    *,
    multiple: bool = False,
    is_flag: bool = False,
    parse: Callable[[str], object] | None = None,
    choices: tuple[str, ...] = (),
    metavar: str | None = None,
    short: str | None = None,
    show_default: bool = False,
    envvar: str | None = None,
    kind: object = None,
) -> None: ...


def option(
    flag: str,
    help: str,
    *,
    default: object = None,
    multiple: bool = False,
    is_flag: bool = False,
    parse: Callable[[str], object] | None = None,
    choices: tuple[str, ...] = (),
    metavar: str | None = None,
    short: str | None = None,
    required: bool = False,
    show_default: bool = False,
    envvar: str | None = None,
    kind: object = None,
) -> object:
    """A field of an Options dataclass that is also a command-line option (see the module's docstring):
    typed as its default (a field without a default is None until given; a multiple one takes default=()).
    A command's own options may also name a short flag, be required (its default then never used), show
    their default, read an environment variable, or take a click type (kind: a path, a range) instead of
    parse (app.flags makes them click options)."""
    described = Flag(flag, help, multiple, is_flag, parse, choices, metavar, short, required, show_default, envvar, kind)
    if multiple:
        return field(default=tuple(cast("tuple[object, ...]", default or ())), metadata={FLAG: described})
    return field(default=default, metadata={FLAG: described})


class Options:
    """Base of a check's typed options: a frozen dataclass whose fields are made with option()."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[object]]]

    @classmethod
    def flags(cls) -> Iterator[tuple[str, Flag, object]]:
        """(field name, its flag, its default) for each option."""
        for item in dataclasses.fields(cls):
            described = item.metadata.get(FLAG)
            if isinstance(described, Flag):
                yield item.name, described, item.default

    @classmethod
    def names(cls) -> frozenset[str]:
        return frozenset(name for name, _flag, _default in cls.flags())

    @classmethod
    def from_values(cls: type[T], values: Mapping[str, object]) -> T:
        """The options from values by field name (a command line's parameters: others are ignored);
        a field absent or None keeps its default (a multiple option: an empty tuple)."""
        given: dict[str, object] = {}
        for name, described, _default in cls.flags():
            value = values.get(name)
            if value is None or (described.multiple and not value):
                continue
            given[name] = tuple(cast("tuple[object, ...]", value)) if described.multiple else value
        return cls(**given)

    def given(self) -> dict[str, object]:
        """The fields that differ from their defaults."""
        return {name: getattr(self, name) for name, _flag, default in self.flags() if getattr(self, name) != default}


class OptionValues:
    """The options of one run, by type: what the command line (or a command such as bench) gave."""

    def __init__(self, values: tuple[Options, ...] = ()) -> None:
        self._by_type: dict[type[Options], Options] = {}
        for value in values:
            self._by_type[type(value)] = value

    def get(self, kind: type[T]) -> T:
        """The options of that type as given, or its defaults."""
        found = self._by_type.get(kind)
        return found if isinstance(found, kind) else kind()

    def value(self, ref: OptionRef) -> object:
        """The value of the referenced option (its default when not given)."""
        return getattr(self.get(ref.kind), ref.name)

    def given(self, kind: type[Options], name: str) -> bool:
        """Whether the option was given a value other than its default."""
        found = self._by_type.get(kind)
        return found is not None and name in found.given()

    def __iter__(self) -> Iterator[Options]:
        return iter(self._by_type.values())

    def merged(self, *defaults: Options) -> OptionValues:
        """These options, with each field the run left at its default taken from defaults (a command's
        own settings, such as the agent's)."""
        result = dict(self._by_type)
        for value in defaults:
            current = result.get(type(value))
            if current is None:
                result[type(value)] = value
                continue
            unset = {name: getattr(value, name) for name in value.given() if name not in current.given()}
            result[type(value)] = dataclasses.replace(current, **unset)
        return OptionValues(tuple(result.values()))


@dataclass(frozen=True)
class OptionRef:
    """A reference to one option by its type and field, checked by the registry when it loads."""

    kind: type[Options]
    name: str

    def __str__(self) -> str:
        return f"{self.kind.__name__}.{self.name}"

    @property
    def flag(self) -> str:
        """Its command-line flag ("--endpoint"); the field's name when it has none (the registry refuses that)."""
        found = next((described.flag for name, described, _default in self.kind.flags() if name == self.name), None)
        return found or self.name
