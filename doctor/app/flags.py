"""A command's options, declared the way a check's are (engine.options): one frozen Options dataclass
per command whose fields are made with option(), or with same_as() where the flag is declared
elsewhere — one flag, one range, one help text, shared by the commands that take it. An option of
the checks' (--threads, --bandwidth, --context, --concurrency…) stays in its feature's contract and a
command that takes it too refers to that declaration; the options more than one command declares the
same way are SharedOptions, below. click_options() makes a dataclass the command's click options, and
its callback turns click's parameters into the dataclass at once (Options.from_values) and passes only
that on. Light enough for --help."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click

from ..engine.options import FLAG, Flag, Options, option
from ..reports.formats import Use, choices
from .choices import FAIL_ON_LEVELS, INCOMPLETE_HELP, INCOMPLETE_POLICIES

F = TypeVar("F", bound=Callable[..., Any])


def same_as(kind: type[Options], name: str) -> Any:
    """A field that is the option kind.name, declared there once: the same flag, help, parse and
    default (its click option maps back to that one declaration)."""
    found = next(((described, default) for field_name, described, default in kind.flags() if field_name == name), None)
    if found is None:
        raise AttributeError(f"{kind.__name__} has no option {name}")  # untranslated: a programmer's error, at import
    described, default = found
    return field(default=default, metadata={FLAG: described})


def click_type(described: Flag) -> object:
    """The click type of an option: its kind, its choices, or its parse function (whose ValueError is
    the usage error, said in the user's language); None for a flag or a plain string."""
    if described.is_flag:
        return None
    if described.kind is not None:
        return described.kind
    if described.choices:
        return click.Choice(described.choices)
    if described.parse is not None:
        return Parsed(described.parse)
    return None


def click_option(name: str, described: Flag, default: object) -> click.Option:
    """One option as a click Option; .declaration is the Flag it was made from."""
    made = click.Option(
        [*((described.short,) if described.short else ()), described.flag, name],
        multiple=described.multiple,
        is_flag=described.is_flag,
        default=None if described.required else default,  # click 8.3+ reads an option without one as taking an optional value
        type=click_type(described),
        metavar=described.metavar,
        help=described.help or None,
        required=described.required,
        show_default=described.show_default,
        envvar=described.envvar,
    )
    made.declaration = described  # type: ignore[attr-defined]
    return made


def click_options(*kinds: type[Options]) -> Callable[[F], F]:
    """A decorator adding each field of kinds as a click option, in order, where it stands among the
    command's other decorators (as click.option decorators in its place would)."""

    def decorate(function: F) -> F:
        made = [click_option(name, described, default) for kind in kinds for name, described, default in kind.flags()]
        params: list[object] = getattr(function, "__click_params__", [])
        params.extend(reversed(made))  # click reverses the list it collected from the decorators
        function.__click_params__ = params  # type: ignore[attr-defined]
        return function

    return decorate


class Parsed(click.ParamType):
    """An option's parse function as click's type: its ValueError is the usage error, said in the user's
    language (click's own wrapper would print str(exc), the English)."""

    def __init__(self, parse: Callable[[str], object]) -> None:
        self.parse = parse
        self.name = getattr(parse, "__name__", "value").removeprefix("parse_")  # parse_rate: RATE

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return self.parse(value)
        except ValueError as exc:
            from ..i18n import localized, reason

            self.fail(localized(reason(exc)), param, ctx)


@dataclass(frozen=True)
class SharedOptions(Options):
    """The declarations analyze and bench share with each other (and check with them: --incomplete)."""

    fail_on: str = option(
        "--fail-on", "Exit 1 when a finding is at or above this severity.", choices=FAIL_ON_LEVELS, default="error", show_default=True
    )
    incomplete: str = option("--incomplete", INCOMPLETE_HELP, choices=INCOMPLETE_POLICIES, default="fail", show_default=True)
    debug: bool = option("--debug", "Show tracebacks of internal errors.", is_flag=True, default=False)


# Each command's --format offers the formats of its use (reports.formats declares them once).
REPORT_FORMATS = choices(Use.REPORT)  # check, analyze (bench leaves out prometheus)
SINGLE_FORMATS = choices(Use.SINGLE)  # report
DIFF_FORMATS = choices(Use.DIFF)  # diff
FLEET_FORMATS = choices(Use.FLEET)  # merge
INFO_FORMATS = choices(Use.INFO)  # list, explain
