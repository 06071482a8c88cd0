"""The command line in the chosen language: `--lang` on the group and on every command, the help
texts of decode-doctor's commands and options (looked up in the context "cli", the English text
being the message id), and click's own words (usage, errors, "Show this message and exit.").

Click marks its strings with the stdlib gettext in the default domain; decode-doctor's catalog holds
their translations (CLICK_MESSAGES marks them for extraction), and click's modules are pointed at
this module's lookups once a command runs in Chinese. Nothing here imports more than click."""

from __future__ import annotations

import copy
import functools
import inspect
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click

from . import LANGUAGES, N_, N_plural, UnknownLanguage, _, catalog, chinese, current, use, width

F = TypeVar("F", bound=Callable[..., Any])
CONTEXT = "cli"

# click's own messages that a decode-doctor user meets (help pages and usage errors): their
# translations are in the catalog, under click's English as the id.
CLICK_MESSAGES = (
    N_("Usage:"),
    N_("required"),  # an option's [required] marker in --help
    N_("Options"),
    N_("Commands"),
    N_("Show this message and exit."),
    N_("Show the version and exit."),
    N_("Error: {message}"),
    N_("Try '{command} {option}' for help."),
    N_("No such option {name!r}."),
    N_("No such command {name!r}."),
    N_("Missing argument"),
    N_("Missing option"),
    N_("Missing parameter"),
    N_("Missing command."),
    N_("Invalid value for {param_hint}: {message}"),
    N_("Invalid value: {message}"),
    N_("Option {name!r} does not take a value."),
    N_plural("Got unexpected extra argument ({args})", "Got unexpected extra arguments ({args})"),
    N_plural("{value!r} is not {choice}.", "{value!r} is not one of {choices}."),
    N_plural("Did you mean {possibility}?", "(Did you mean one of: {possibilities}?)"),
    N_plural("Option {name!r} requires an argument.", "Option {name!r} requires {nargs} arguments."),
    N_("{value!r} is not a valid {number_type}."),
    N_("{value} is not in the range {range}."),
    N_("default: {default}"),
    N_("Aborted!"),
    N_("Do you want to continue?"),
    N_("Confirm the action without prompting."),
    N_("{name} {filename!r} does not exist."),
    N_("{name} {filename!r} is a directory."),
    N_("{name} {filename!r} is a file."),
    N_("{name} {filename!r} is not readable."),
    N_("{name} {filename!r} is not writable."),
    N_("file"),
    N_("directory"),
    N_("path"),
    N_("%(prog)s, version %(version)s"),
)
CLICK_MODULES = ("core", "exceptions", "formatting", "parser", "types", "decorators", "termui")


def lang_in(args: list[str]) -> str | None:
    """The value of the last --lang on a command line (before a bare --), or None."""
    found = None
    for index, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--lang" and index + 1 < len(args):
            found = args[index + 1]
        elif arg.startswith("--lang="):
            found = arg.split("=", 1)[1]
    return found


def _chosen(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    try:
        use(value)
    except UnknownLanguage as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None  # untranslated: no language chosen yet
    _point_click_here()


LANG_HELP = "The language of what decode-doctor prints: zh-CN or en [default: DECODE_DOCTOR_LANG, else the locale]."


def _lang_attributes() -> dict[str, Any]:
    return {"metavar": "|".join(LANGUAGES), "expose_value": False, "is_eager": True, "callback": _chosen, "help": LANG_HELP}


def _lang_parameter() -> click.Option:
    return click.Option(["--lang"], **_lang_attributes())


def lang_option(function: F) -> F:
    """--lang on a command or group (decorator)."""
    return click.option("--lang", **_lang_attributes())(function)


def help_text(english: str | None) -> str:
    """A help text in the current language: decode-doctor's own (context "cli"), else click's (the
    ones click fixed when a decorator ran, such as --version's)."""
    if not english or not chinese():
        return english or ""
    translations = catalog(current())
    key = inspect.cleandoc(english)  # click keeps a docstring's indentation, ast and inspect do not
    found = translations.pgettext(CONTEXT, key)
    return found if found != key else translations.gettext(english)


class Formatter(click.HelpFormatter):
    """click's help layout; in Chinese a heading ends with "：" and "用法：" takes no space after it."""

    def write_heading(self, heading: str) -> None:
        if chinese():
            self.write(f"{'':>{self.current_indent}}{heading}：\n")
        else:
            super().write_heading(heading)

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        if chinese() and prefix is None:
            prefix = catalog(current()).gettext("Usage:")
        super().write_usage(prog, args, prefix)

    def write_text(self, text: str) -> None:
        """Paragraphs wrapped by display width in Chinese (click counts characters: a CJK one takes two columns)."""
        if not chinese():
            super().write_text(text)
            return
        indent = " " * self.current_indent
        paragraphs = [p for p in text.split("\n\n") if p.strip()]
        for number, paragraph in enumerate(paragraphs):
            for line in width.wrap(_joined_lines(paragraph), self.width, indent):
                self.write(line + "\n")
            if number < len(paragraphs) - 1:
                self.write("\n")

    def write_dl(self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        """The option and command tables with their second column wrapped by display width in Chinese,
        so no line passes the formatter's width and a term never splits inside a word."""
        if not chinese():
            super().write_dl(rows, col_max, col_spacing)
            return
        rows = list(rows)
        first = min(max((width.width(term) for term, _ in rows), default=0), col_max) + col_spacing
        column = self.current_indent + first
        for term, text in rows:
            self.write(" " * self.current_indent + term)
            if not text:
                self.write("\n")
                continue
            if width.width(term) <= first - col_spacing:
                self.write(" " * (first - width.width(term)))
            else:
                self.write("\n" + " " * column)
            text = re.sub(r"(?<=\S); (?=[^\[]*\]\s*$)", "，", text)  # click's "[default: 1; x>=1]"
            lines = width.wrap(_joined_lines(text), max(self.width - column, 20))
            self.write(lines[0] + "\n")
            for line in lines[1:]:
                self.write(" " * column + line + "\n")


def _joined_lines(text: str) -> str:
    """A help text's line breaks joined: without a space beside Chinese, with one between Latin words."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    joined = lines[0] if lines else ""
    for line in lines[1:]:
        tight = bool(joined and line) and (
            joined[-1] in FULL_WIDTH_PUNCTUATION
            or line[0] in FULL_WIDTH_PUNCTUATION
            or (ord(joined[-1]) > 0x2E7F and ord(line[0]) > 0x2E7F)
        )
        joined += ("" if tight else " ") + line
    return joined


FULL_WIDTH_PUNCTUATION = "，。、：；！？（）“”‘’《》「」——…"


def first_sentence(text: str) -> str:
    """A help text's first sentence, as the command listing shows it (". " ends an English one, "。" a
    Chinese one), its line breaks joined."""
    first = _joined_lines(text.strip().split("\n\n", 1)[0])
    if "。" in first:
        return first.split("。", 1)[0] + "。"
    head, dot, _rest = first.partition(". ")
    return head + ("." if dot else "")


def short_help(command: click.Command) -> str:
    """A command's one line for the group's listing: click's first sentence in English; in Chinese the
    first sentence of the translated help (click's cut at ". " does not see "。")."""
    english = command.get_short_help_str(200)
    if not chinese() or command.short_help:
        return help_text(english)
    whole = help_text(command.help)
    if whole == command.help:
        return english
    first = whole.strip().split("\n\n", 1)[0].replace("\n", "")
    return first.split("。", 1)[0] + ("。" if "。" in first else "")


def translated_params(params: list[click.Parameter]) -> list[click.Parameter]:
    """params with their help texts in the current language (copies; English: params themselves)."""
    return _translated_params(params) if chinese() else params


def _path_metavar(param: click.Parameter) -> str | None:
    """click names a path's placeholder after its type's (translated) name: 目录 beside NAME and N.
    Placeholders stay English capitals in every language, like the flags they follow."""
    kind = param.type
    if param.metavar or not isinstance(kind, click.Path):
        return None
    return "DIRECTORY" if not kind.file_okay else "FILE" if not kind.dir_okay else "PATH"


def _translated_params(params: list[click.Parameter]) -> list[click.Parameter]:
    made = []
    for param in params:
        metavar = _path_metavar(param)
        if (isinstance(param, click.Option) and param.help) or metavar:
            param = copy.copy(param)
            if isinstance(param, click.Option) and param.help:
                param.help = help_text(param.help)
            param.metavar = metavar or param.metavar
        made.append(param)
    return made


def prepared(command: click.Command) -> click.Command:
    """The command with --lang among its options and, in Chinese, its help texts translated (a copy:
    the command objects are shared by every language in one process)."""
    if not any(p.name == "lang" for p in command.params):
        command.params.append(_lang_parameter())
    if not chinese():
        return command
    _point_click_here()
    translated = copy.copy(command)
    translated.help = help_text(command.help)
    translated.short_help = help_text(command.short_help) if command.short_help else None
    translated.params = _translated_params(command.params)
    translated.options_metavar = _("[OPTIONS]")
    original_get_params = translated.get_params  # click adds --help here, its text fixed when first made

    def get_params(ctx: click.Context) -> list[click.Parameter]:
        return _translated_params(original_get_params(ctx))

    translated.get_params = get_params  # type: ignore[method-assign]
    return translated


def format_help_text(command: click.Command, ctx: click.Context, formatter: click.HelpFormatter) -> None:
    """A group's own help text, translated."""
    original = command.help
    command.help = help_text(original)
    try:
        click.Command.format_help_text(command, ctx, formatter)
    finally:
        command.help = original


def click_gettext(message: str) -> str:
    return catalog(current()).gettext(message) if chinese() else message


def click_ngettext(singular: str, plural: str, count: int) -> str:
    return catalog(current()).ngettext(singular, plural, count) if chinese() else (singular if count == 1 else plural)


def point_click_here() -> None:
    if chinese():
        _point_click_here()


@functools.cache
def _point_click_here() -> None:
    """click's modules look their words up here from now on (in English: click's own words)."""
    import importlib

    click.Context.formatter_class = Formatter
    for name in CLICK_MODULES:
        module = importlib.import_module(f"click.{name}")
        if hasattr(module, "_"):
            module._ = click_gettext  # type: ignore[attr-defined]
        if hasattr(module, "ngettext"):
            module.ngettext = click_ngettext  # type: ignore[attr-defined]
