"""The command line in the chosen language: `--lang` on the group and on every command, the help
texts of decode-doctor's commands and options (looked up in the context "cli", the English text
being the message id), and click's own words (usage, errors, "Show this message and exit.").

Click marks its strings with the stdlib gettext in the default domain; decode-doctor's catalog holds
their translations (CLICK_MESSAGES marks them for extraction), and click's modules are pointed at
this module's lookups once a command runs in Chinese. Nothing here imports more than click.

Over 500 lines: click's words, its help layout and its usage errors are one adapter around click's
internals (the formatter, the patched lookups and messages); split, the patches would be scattered."""

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
    N_("Positional arguments"),
    N_("Show this message and exit."),
    N_("Show the version and exit."),
    N_("Error: {message}"),
    N_("Try '{command} {option}' for help."),
    N_("No such option {name!r}."),
    N_("No such command {name!r}."),
    N_("Missing argument"),
    N_("Missing option"),
    N_("Missing parameter"),
    N_("Missing {param_type}"),
    N_("Missing parameter: {param_name}"),
    N_("Missing command."),
    N_("Choose from:\n\t{choices}"),
    N_("Invalid value for {param_hint}: {message}"),
    N_("Invalid value: {message}"),
    N_("Option {name!r} does not take a value."),
    N_("Argument {name!r} takes {nargs} values."),
    N_plural("Got unexpected extra argument ({args})", "Got unexpected extra arguments ({args})"),
    N_plural("{value!r} is not {choice}.", "{value!r} is not one of {choices}."),
    N_plural("Did you mean {possibility}?", "(Did you mean one of: {possibilities}?)"),
    N_plural("Option {name!r} requires an argument.", "Option {name!r} requires {nargs} arguments."),
    N_plural("Takes {nargs} values but 1 was given.", "Takes {nargs} values but {len} were given."),
    N_plural("{len_type} values are required, but {len_value} was given.", "{len_type} values are required, but {len_value} were given."),
    N_("{value!r} is not a valid {number_type}."),
    N_("{value} is not in the range {range}."),
    N_("{value!r} is not a valid boolean. Recognized values: {states}"),
    N_("{value!r} is not a valid UUID."),
    N_plural("{value!r} does not match the format {format}.", "{value!r} does not match the formats {formats}."),
    N_("Value must be an iterable."),
    N_("default: {default}"),
    N_("env var: {var}"),
    N_("(dynamic)"),
    N_("Aborted!"),
    N_("Do you want to continue?"),
    N_("Confirm the action without prompting."),
    N_("Error: invalid input"),
    N_("Error: The two entered values do not match."),
    N_("Repeat for confirmation"),
    N_("{name} {filename!r} does not exist."),
    N_("{name} {filename!r} is a directory."),
    N_("{name} {filename!r} is a file."),
    N_("{name} {filename!r} is not readable."),
    N_("{name} {filename!r} is not writable."),
    N_("{name} {filename!r} is not executable."),
    N_("Could not open file {filename!r}: {message}"),
    N_("unknown error"),
    N_("file"),
    N_("directory"),
    N_("path"),
    N_("%(prog)s, version %(version)s"),
    N_("COMMAND [ARGS]..."),
)
# click's type names as its messages use them ("'x' is not a valid integer range."), said in Chinese
TYPE_NAMES = {
    "integer": N_("integer"),
    "integer range": N_("integer range"),
    "float": N_("float"),
    "float range": N_("float range"),
    "boolean": N_("boolean"),
    "text": N_("text"),
    "uuid": N_("UUID"),
    "datetime": N_("datetime"),
    "choice": N_("choice"),
    "file": N_("file"),
    "directory": N_("directory"),
    "path": N_("path"),
    "filename": N_("filename"),
    "argument": N_("argument"),
    "option": N_("option"),
    "parameter": N_("parameter"),
}
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
        if chinese():  # a group's "[OPTIONS] COMMAND [ARGS]..." beside a command's [选项]
            args = args.replace("[OPTIONS]", _("[OPTIONS]")).replace("COMMAND [ARGS]...", _("COMMAND [ARGS]..."))
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
            lines = width.wrap(chinese_help_tail(_joined_lines(text)), max(self.width - column, 20))
            self.write(lines[0] + "\n")
            for line in lines[1:]:
                self.write(" " * column + line + "\n")


_RANGES = (
    (re.compile(r"(-?[\d.]+)<=x<=(-?[\d.]+)"), r"取值 \1–\2"),
    (re.compile(r"(-?[\d.]+)<x<=?(-?[\d.]+)"), r"取值大于 \1、不超过 \2"),
    (re.compile(r"x>=(-?[\d.]+)"), r"取值 ≥ \1"),
    (re.compile(r"x>(-?[\d.]+)"), r"取值 > \1"),
    (re.compile(r"x<=(-?[\d.]+)"), r"取值 ≤ \1"),
    (re.compile(r"x<(-?[\d.]+)"), r"取值 < \1"),
)
_CHECK_TAG = re.compile(r"。\s*\[([a-z][a-z0-9-]*)\]")
_TAIL = re.compile(r"。\s*((?:\[[^\[\]]*\]\s*)+)$")


def chinese_help_tail(text: str) -> str:
    """An option's help in Chinese with click's tail said the Chinese way: "[默认：1; x>=1]" →
    "[默认：1，取值 ≥ 1]", the check an option belongs to as a clause ("；检查项：bandwidth"), and the
    bracketed tail inside the sentence, before its full stop ("…）。  [默认：/]" → "…）[默认：/]。")."""
    for pattern, words in _RANGES:
        text = pattern.sub(words, text)
    text = re.sub(r"(?<=\S); (?=[^\[]*\]\s*$)", "，", text)  # click's "[default: 1; x>=1]"
    text = _CHECK_TAG.sub(r"；检查项：\1。", text)
    found = _TAIL.search(text)
    if found is None:
        return text
    head, tail = text[: found.start()], re.sub(r"\]\s*\[", "；", found.group(1).strip())
    return head + ("" if head[-1:] in FULL_WIDTH_PUNCTUATION else " ") + tail + "。"


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
    if not chinese():
        return message
    text = catalog(current()).gettext(message)
    return _ClickText(text, message) if text != message else text


def click_ngettext(singular: str, plural: str, count: int) -> str:
    if not chinese():
        return singular if count == 1 else plural
    text = catalog(current()).ngettext(singular, plural, count)
    return _ClickText(text, singular) if text not in (singular, plural) else text


class _ClickText(str):
    """One of click's messages in Chinese: its format() says click's values the Chinese way (a user's
    value in ASCII double quotes, a flag bare, type names in Chinese, lists joined by 、, ≥ for >=); the
    catalog's Chinese names each placeholder without !r, the quoting being done here."""

    english: str

    def __new__(cls, text: str, english: str) -> _ClickText:
        self = super().__new__(cls, text)
        self.english = english
        return self

    def format(self, *args: object, **values: object) -> str:
        return str(self).format(*args, **{key: _click_value(self.english, key, value) for key, value in values.items()})


FLAG_NAMES = ("No such option", "Option {name!r}", "Argument {name!r}")


def _click_value(english: str, key: str, value: object) -> object:
    """A value click puts in one of its messages, as the Chinese sentence shows it."""
    if key in ("number_type", "param_type") or (key == "name" and english.startswith("{name} {filename!r}")):
        return type_name(str(value))
    if key == "name":
        return str(value) if english.startswith(FLAG_NAMES) else quoted(value)
    if key in ("value", "filename") and "{" + key + "!r}" in english:
        return quoted(value)
    if key == "param_hint":
        return bare_hint(str(value))
    if key in ("choice", "choices", "formats", "format"):
        if english.startswith("Choose from"):
            return str(value).replace(",\n\t", "\n\t")
        return "、".join(quoted(item) for item in _reprs(str(value)))
    if key in ("possibility", "possibilities"):  # alternatives: "--a、--b 或 --c"
        options = _reprs(str(value))
        return "、".join(options[:-1]) + " 或 " + options[-1] if len(options) > 1 else "".join(options)
    if key == "args":  # click joined them with spaces
        return "、".join(quoted(arg) for arg in str(value).split(" "))
    if key == "states":
        return str(value).replace(", ", "、")
    if key == "range":
        return str(value).replace(">=", "≥").replace("<=", "≤")
    return value


def type_name(name: str) -> str:
    """A click type's name (integer, integer range, path…) in the current language."""
    english = TYPE_NAMES.get(name.lower())
    return catalog(current()).gettext(english) if english and chinese() else name


def quoted(value: object) -> str:
    """A user's value as the Chinese output quotes English: ASCII double quotes, escaped like repr."""
    text = repr(str(value))
    if text.startswith("'"):
        return '"' + text[1:-1].replace("\\'", "'").replace('"', '\\"') + '"'
    return text


def bare_hint(hint: str) -> str:
    """click's "'--model'" or "'--a' / '-a'": the flags bare, as decode-doctor's Chinese names them."""
    return re.sub(r"'([^'\s]+)'", r"\1", hint)


def _reprs(joined: str) -> list[str]:
    """The items of click's ", ".join(map(repr, items))."""
    import ast

    try:
        items = ast.literal_eval(f"[{joined}]")
    except (ValueError, SyntaxError):
        return [joined]
    return [str(item) for item in items]


def _missing_message(self: click.exceptions.MissingParameter) -> str:
    """click's "Missing option '--model'." in Chinese: the flag bare, a Chinese full stop."""
    if not chinese():
        return _CLICK_FORMATS["MissingParameter"](self)
    hint = _hint(self)
    param_type = self.param_type or (self.param.param_type_name if self.param is not None else None)
    known = {"argument": "Missing argument", "option": "Missing option", "parameter": "Missing parameter"}
    if param_type in known:
        missing = click_gettext(known[param_type])
    else:
        missing = click_gettext("Missing {param_type}").format(param_type=param_type)
    said = f"{missing} {hint}。" if hint else f"{missing}。"
    extra = self.param.type.get_missing_message(param=self.param, ctx=self.ctx) if self.param is not None else None
    return said + "".join(part for part in (self.message, extra) if part)


def _invalid_message(self: click.BadParameter) -> str:
    """click's "Invalid value for '--x': …" in Chinese, naming the option even where the error was
    raised without it (a command body's BadParameter): the one option whose value the message quotes."""
    if not chinese():
        return _CLICK_FORMATS["BadParameter"](self)
    hint = _hint(self) or _option_quoted_in(self)
    if hint:
        return click_gettext("Invalid value for {param_hint}: {message}").format(param_hint=hint, message=self.message)
    return click_gettext("Invalid value: {message}").format(message=self.message)


def _hint(error: click.BadParameter) -> str | None:
    hint = error.param_hint
    if hint is None and error.param is not None:
        hint = error.param.get_error_hint(error.ctx)
    if hint is None:
        return None
    return bare_hint(hint if isinstance(hint, str) else " / ".join(repr(item) for item in hint))


def _option_quoted_in(error: click.BadParameter) -> str | None:
    """The option whose given value error's message quotes, when exactly one does (click's context
    knows every option's value; a BadParameter raised in a command's body carries no param)."""
    ctx = error.ctx
    if ctx is None:
        return None
    message = str(error.message)
    found = []
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        quotes = (repr(value), quoted(value), f"“{value}”") if isinstance(value, str) and value else ()
        if isinstance(param, click.Option) and any(form in message for form in quotes):
            found.append(param)
    return bare_hint(found[0].get_error_hint(ctx)) if len(found) == 1 else None


def _suggesting_message(self: click.exceptions.NoSuchOption | click.exceptions.NoSuchCommand) -> str:
    """click's "No such option '--rot'. Did you mean …?" in Chinese: no space after the full stop."""
    if not chinese() or not self.possibilities:
        return _CLICK_FORMATS[type(self).__name__](self)
    from click.exceptions import _format_possibilities

    return f"{self.message}{_format_possibilities(self.possibilities)}"


_CLICK_FORMATS: dict[str, Callable[..., str]] = {}


def point_click_here() -> None:
    if chinese():
        _point_click_here()


@functools.cache
def _point_click_here() -> None:
    """click's modules look their words up here from now on (in English: click's own words), and its
    usage errors are said the Chinese way while the language is Chinese."""
    import importlib

    from click import exceptions

    click.Context.formatter_class = Formatter
    for name in CLICK_MODULES:
        module = importlib.import_module(f"click.{name}")
        if hasattr(module, "_"):
            module._ = click_gettext  # type: ignore[attr-defined]
        if hasattr(module, "ngettext"):
            module.ngettext = click_ngettext  # type: ignore[attr-defined]
    for cls, method in (
        (exceptions.UsageError, exceptions.UsageError.format_message),
        (exceptions.MissingParameter, _missing_message),
        (exceptions.BadParameter, _invalid_message),
        (exceptions.NoSuchOption, _suggesting_message),
        (exceptions.NoSuchCommand, _suggesting_message),
    ):
        _CLICK_FORMATS[cls.__name__] = cls.__dict__.get("format_message", cls.format_message)
        cls.format_message = _typeset(method)  # type: ignore[method-assign,assignment]


def _typeset(method: Callable[[Any], str]) -> Callable[[Any], str]:
    """A usage error's message set by the Chinese typography rules (one bracket pair, no space after 。)."""
    from . import typography

    def format_message(self: Any) -> str:
        return typography.normalize(method(self))

    return format_message
