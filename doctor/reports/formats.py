"""The output formats, declared once (kept apart from the renderers, so a command's --help imports none
of them). Every command's --format choices, `report`'s single files, the bundle's members and what
renders each come from the registry below; an unknown name is a usage error (UnknownFormat), never a
fallback to text.

A format is one `Format` record: registered here for the built-in ones, by `register()` (or
`registered()`, for a while) in a program that embeds decode-doctor, or by a plugin's entry point in the
`decode_doctor.formats` group naming its Format (or a tuple of them), read the first time the registry
is consulted. Its renderers are named "module:function" and imported only when something is rendered:

- Use.REPORT: fn(view: ReportView, stream: TextIO, how: reports.render.Rendering) -> None
- Use.DIFF:   fn(change: reports.compare.Difference) -> str
- Use.FLEET:  fn(fleet: reports.fleet.Fleet) -> str
- Use.SINGLE and Use.INFO have none here: `report --format` writes the format's bundle member, or its
  report rendered from the bundle's view; `list` and `explain` render their own documents."""

from __future__ import annotations

import enum
import importlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..engine.plugins import plugins_declared
from ..i18n import _


class Use(str, enum.Enum):
    """Where a format is offered."""

    REPORT = "report"  # a run's report: check, analyze, bench (text, json, markdown, html, prometheus)
    SINGLE = "single"  # `report --format`: one redacted file instead of the bundle (and "bundle" itself)
    DIFF = "diff"  # `diff`: two reports compared
    FLEET = "fleet"  # `merge`: a fleet of reports
    INFO = "info"  # `list`, `explain`


class UnknownFormat(ValueError):
    """A format name the registry does not hold for this use: a usage error, never a fallback."""

    def __init__(self, name: str, use: Use | None, offered: tuple[str, ...]):
        where = f" for {use.value}" if use is not None else ""
        super().__init__(f"unknown format {name!r}{where}: choose from {', '.join(offered)}")
        self.name = name
        self.use = use
        self.offered = offered


@dataclass(frozen=True)
class Offer:
    """A format offered for one use: what renders it there and where --help lists it."""

    renderer: str | None = None  # "module:function", imported only when it renders; None: see the module's docstring
    rank: int = 100  # --help lists a use's formats by rank, then in the order they were registered


@dataclass(frozen=True)
class Member:
    """A format's file in the support bundle."""

    name: str  # report.json
    renderer: str | None = None  # "module:function" (as Use.REPORT's) when the file differs from the report; None: the report's renderer


@dataclass(frozen=True)
class Format:
    """One output format, everything about it in one place."""

    name: str  # what --format takes
    suffix: str  # its files' suffix: .json
    media_type: str  # what it is served or attached as
    redacted: bool  # secrets redacted and leak-checked wherever it is written (all but the terminal's text)
    offers: Mapping[Use, Offer] = field(default_factory=dict)
    member: Member | None = None  # its file in the support bundle; None: not a member
    stem: str = "report"  # its file's name when it is no bundle member: stem + suffix
    terminal: bool = False  # read on a terminal as it is (text, Markdown): control characters are escaped

    @property
    def file_name(self) -> str:
        """Its file (in the bundle, or alone from `report --format NAME`): its member's name, else stem + suffix."""
        return self.member.name if self.member is not None else self.stem + self.suffix

    def renderer(self, use: Use) -> Callable[..., Any]:
        """The function that renders it for this use, imported now; UnknownFormat when it has none."""
        if use not in self.offers:
            raise UnknownFormat(self.name, use, choices(use))
        target = self.offers[use].renderer
        if target is None:
            raise LookupError(_("format {name!r} is rendered by the command itself for {use}", name=self.name, use=use.value))
        return resolve(target)


BUNDLE = "bundle"  # `report`'s default: the whole support bundle (app.bundle writes it)
_RENDER = "decode_doctor.reports.render:"

_BUILTIN = (
    Format(
        "text",
        ".txt",
        "text/plain; charset=utf-8",
        redacted=False,
        terminal=True,
        offers={
            Use.REPORT: Offer(_RENDER + "report_text", rank=0),
            Use.DIFF: Offer(_RENDER + "diff_text", rank=0),
            Use.FLEET: Offer(_RENDER + "fleet_text", rank=0),
            Use.INFO: Offer(rank=0),
        },
    ),
    Format(
        "json",
        ".json",
        "application/json",
        redacted=True,
        member=Member("report.json", _RENDER + "json_member"),  # the bundle's report.json ends without a newline
        offers={
            Use.REPORT: Offer(_RENDER + "report_json", rank=1),
            Use.SINGLE: Offer(rank=1),
            Use.DIFF: Offer(_RENDER + "diff_json", rank=1),
            Use.FLEET: Offer(_RENDER + "fleet_json", rank=4),
            Use.INFO: Offer(rank=1),
        },
    ),
    Format(
        "markdown",
        ".md",
        "text/markdown; charset=utf-8",
        redacted=True,
        terminal=True,
        member=Member("report.md"),
        offers={
            Use.REPORT: Offer(_RENDER + "report_markdown", rank=2),
            Use.SINGLE: Offer(rank=2),
            Use.FLEET: Offer(_RENDER + "fleet_markdown", rank=2),
            Use.INFO: Offer(rank=2),
        },
    ),
    Format(
        "html",
        ".html",
        "text/html; charset=utf-8",
        redacted=True,
        member=Member("report.html"),
        offers={
            Use.REPORT: Offer(_RENDER + "report_html", rank=3),
            Use.SINGLE: Offer(rank=3),
            Use.FLEET: Offer(_RENDER + "fleet_html", rank=3),
        },
    ),
    Format(
        "prometheus",
        ".prom",
        "text/plain; version=0.0.4; charset=utf-8",
        redacted=True,
        stem="metrics",
        offers={Use.REPORT: Offer(_RENDER + "report_prometheus", rank=4), Use.SINGLE: Offer(rank=4)},
    ),
    Format(BUNDLE, ".tar.gz", "application/gzip", redacted=True, offers={Use.SINGLE: Offer(rank=0)}),
)

PLUGIN_GROUP = "decode_doctor.formats"

_REGISTRY: dict[str, Format] = {}
_OFFERED: dict[Use, tuple[str, ...]] = {}  # derived from _REGISTRY at each change
_plugins_read = False
errors: list[str] = []  # the plugins that did not load, and why


def _derive() -> None:
    listed = list(_REGISTRY.values())  # registration order breaks a tie in rank
    _OFFERED.clear()
    for use in Use:
        offered = [f for f in listed if use in f.offers]
        _OFFERED[use] = tuple(f.name for f in sorted(offered, key=lambda f: f.offers[use].rank))


def _read_plugins() -> None:
    """The formats installed plugins declare, registered once, after the built-in ones. A plugin that
    does not load, or names something that is not a Format, is left out: it must not take the CLI down."""
    global _plugins_read
    if _plugins_read:
        return
    _plugins_read = True
    if not plugins_declared((PLUGIN_GROUP,)):
        return
    from importlib import metadata

    for entry in metadata.entry_points(group=PLUGIN_GROUP):
        try:
            loaded: object = entry.load()
        except Exception as exc:
            errors.append(f"format plugin {entry.name} ({entry.value}): {type(exc).__name__}: {exc}")
            continue
        for fmt in loaded if isinstance(loaded, tuple) else (loaded,):
            if not isinstance(fmt, Format):
                errors.append(f"format plugin {entry.name}: {fmt!r} is not a Format")
            elif fmt.name in _REGISTRY:
                errors.append(f"format plugin {entry.name}: the format {fmt.name!r} is already registered")
            else:
                register(fmt)


def register(fmt: Format, *, replace: bool = False) -> Format:
    """Adds a format to every place that offers, renders or writes formats; ValueError when the name is
    taken (unless replace)."""
    if not replace and fmt.name in _REGISTRY:
        raise ValueError(_("format {name!r} is already registered", name=fmt.name))
    _REGISTRY[fmt.name] = fmt
    _derive()
    return fmt


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)
    _derive()


@contextmanager
def registered(*formats: Format) -> Iterator[tuple[Format, ...]]:
    """Formats registered for the length of a with block (a test, an embedding program), then the
    registry as it was. A --format choice that click built before the block does not see them."""
    _read_plugins()
    before = dict(_REGISTRY)
    try:
        yield tuple(register(fmt, replace=True) for fmt in formats)
    finally:
        _REGISTRY.clear()
        _REGISTRY.update(before)
        _derive()


def registry() -> Mapping[str, Format]:
    """Every format by name, in registration order."""
    _read_plugins()
    return dict(_REGISTRY)


def choices(use: Use) -> tuple[str, ...]:
    """The names a command's --format offers for this use, in the order --help shows them."""
    _read_plugins()
    return _OFFERED[use]


def get(name: str, use: Use | None = None) -> Format:
    """The format of this name (offered for this use); UnknownFormat otherwise."""
    _read_plugins()
    fmt = _REGISTRY.get(name)
    if fmt is None or (use is not None and use not in fmt.offers):
        raise UnknownFormat(name, use, choices(use) if use is not None else tuple(_REGISTRY))
    return fmt


def members() -> tuple[Format, ...]:
    """The formats the support bundle holds a file of, in registration order."""
    _read_plugins()
    return tuple(f for f in _REGISTRY.values() if f.member is not None)


def resolve(target: str) -> Callable[..., Any]:
    """A "module:function" imported."""
    module, _colon, name = target.partition(":")
    found = getattr(importlib.import_module(module), name)
    if not callable(found):
        raise TypeError(_("{target} is not callable", target=target))
    return found


for _builtin in _BUILTIN:
    register(_builtin)

FORMATS = choices(Use.REPORT)
