"""The language decode-doctor speaks: English, or Simplified Chinese from gettext catalogs.

The language is chosen once per command: `--lang zh-CN|en`, else DECODE_DOCTOR_LANG, else the
locale (LC_ALL, then LC_MESSAGES, then LANG: zh_CN or zh_SG is Simplified Chinese); English
otherwise. Traditional Chinese locales (zh_TW, zh_HK, zh_MO) are not guessed to be Simplified.

Messages are marked in the code with `_()` (a named-placeholder template, formatted after it is
translated, so a translation may reorder the placeholders), `ngettext()` for plurals and `pgettext()`
where the same English needs two translations; a code's explanation is looked up by its code and
section (`explanation()`). The catalogs are `.po` files in locale/ kept in the repository, compiled
to `.mo` when the package is built or installed (setup.py), and loaded on first use only: English
loads nothing, and `--help` in English imports no more than before.
"""

from __future__ import annotations

import enum
import errno
import functools
import gettext as _gettext
import os
import re
import string
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

DOMAIN = "decode_doctor"
LOCALE_DIR = Path(__file__).resolve().parent.parent / "locale"
ENGLISH, CHINESE = "en", "zh-CN"
LANGUAGES = (ENGLISH, CHINESE)
ENV = "DECODE_DOCTOR_LANG"
SIMPLIFIED_LOCALES = ("zh_CN", "zh_SG", "zh-CN", "zh-SG", "zh_Hans", "zh-Hans")
GETTEXT_NAMES = {CHINESE: "zh_CN"}

_current = ENGLISH


class UnknownLanguage(ValueError):
    """A language decode-doctor does not speak; the message names the ones it does."""


def normalise(name: str) -> str:
    """ "zh-CN", "zh_cn", "zh", "zh-Hans", "en_US.UTF-8" → a supported language; anything else (zh-TW:
    Traditional Chinese is not written here) is refused."""
    bare = name.strip().split(".")[0].split("@")[0].replace("_", "-").lower()
    if bare in ("zh", "zh-cn", "zh-sg", "zh-hans", "zh-hans-cn", "zh-hans-sg"):
        return CHINESE
    if bare == "en" or bare.startswith("en-") or bare in ("c", "posix"):
        return ENGLISH
    raise UnknownLanguage(
        f"unknown language {name!r}: decode-doctor speaks {' and '.join(LANGUAGES)}"
    )  # untranslated: raised while the language is being chosen


def from_environment(env: Mapping[str, str]) -> str:
    """DECODE_DOCTOR_LANG when it names a language, else GNU gettext's LANGUAGE list (its first entry
    decode-doctor speaks), else the locale's messages language (LC_ALL, LC_MESSAGES, LANG)."""
    chosen = env.get(ENV, "").strip()
    if chosen:
        try:
            return normalise(chosen)
        except UnknownLanguage:
            pass  # a stray value must not stop the tool; environment_note() says it was not used
    locale = next((env[v].strip() for v in ("LC_ALL", "LC_MESSAGES", "LANG") if env.get(v, "").strip()), "")
    if env.get("LANGUAGE", "").strip() and locale not in ("C", "POSIX"):  # gettext ignores LANGUAGE under the C locale
        for entry in env["LANGUAGE"].split(":"):
            try:
                return normalise(entry)
            except UnknownLanguage:
                continue
    if locale:
        return CHINESE if locale.startswith(SIMPLIFIED_LOCALES) or locale.split(".")[0] == "zh" else ENGLISH
    return ENGLISH


def environment_note(env: Mapping[str, str]) -> str | None:
    """One line when DECODE_DOCTOR_LANG names no language decode-doctor speaks (it was not used)."""
    chosen = env.get(ENV, "").strip()
    if not chosen:
        return None
    try:
        normalise(chosen)
    except UnknownLanguage:
        return f"decode-doctor: {ENV}={chosen!r} is not a language decode-doctor speaks ({', '.join(LANGUAGES)}); ignored"
    return None


def use(language: str) -> None:
    """Speak language from now on in this process."""
    global _current
    _current = normalise(language)


def current() -> str:
    return _current


def chinese() -> bool:
    return _current == CHINESE


@functools.cache
def catalog(language: str) -> _gettext.NullTranslations:
    """The compiled catalog of language; an English stand-in when it is English or not compiled."""
    if language == ENGLISH:
        return _gettext.NullTranslations()
    return _gettext.translation(DOMAIN, str(LOCALE_DIR), languages=[GETTEXT_NAMES[language]], fallback=True)


def compiled(language: str = CHINESE) -> bool:
    """Whether language's catalog is installed (a source checkout never built has only the .po)."""
    return type(catalog(language)) is not _gettext.NullTranslations


STRICT_ENV = "DECODE_DOCTOR_STRICT_SENTENCES"
# what a program value looks like when it reaches a sentence unrendered (str(None), str(True), a state's
# machine word): never a word a reader should see in a sentence, in either language
RAW_WORDS = frozenset({"None", "True", "False", "absent", "unknown", "null", "nan", "NaN", "?"})


class RawValueInSentence(TypeError):
    """A placeholder was given a program value (None, a bool, an exception, an Enum's machine value,
    "None"/"unknown"/…) instead of words; raised where DECODE_DOCTOR_STRICT_SENTENCES=1 (the tests).
    Its text is for the developer whose test failed, in English."""

    def __init__(self, where: str, text: str, why: str) -> None:
        super().__init__(where, text, why)
        self.where, self.text, self.why = where, text, why

    def __str__(self) -> str:
        return f"{self.where} {self.text!r} was given {self.why}"


def raw_value(value: object) -> str | None:
    """Why value may not fill a sentence's placeholder, or None when it may."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, BaseException):
        return f"an exception ({type(value).__name__}): say what failed with reason()/a message"
    if isinstance(value, enum.Enum) and not isinstance(value, Said):
        return f"the Enum {type(value).__name__}.{value.name}: use its .label"
    if isinstance(value, str) and not isinstance(value, Said) and value.strip() in RAW_WORDS:
        return f"the raw word {value.strip()!r}"
    if isinstance(value, float) and value != value:
        return "NaN"
    return None


_RAW_IN_TEXT = re.compile(r"(?<![\w`'\"])(None|True|False)(?![\w`'\"])|(?<![\w?])\?(?=[ )）,，]|$)")


def raw_text(text: str, where: str) -> None:
    """In strict mode, fails when a composed text (an environment row, a summary line built without
    _()) holds a program value: None, True, False, or "?" standing for a value."""
    if os.environ.get(STRICT_ENV) == "1" and (found := _RAW_IN_TEXT.search(text)):
        raise RawValueInSentence(where, text, f"the raw value {found.group(0)!r}")


def _fill(message: str, text: str, values: Mapping[str, object]) -> str:
    """text with its placeholders filled; a raw program value among values fails in strict mode (the
    tests, so every path they reach is held to it) and reads "?" nowhere: it becomes the word for
    "not known" in the reader's language."""
    if not values:
        return text
    checked = dict(values)
    used = _placeholders(text)
    for name, value in values.items():
        if name not in used:
            continue
        why = raw_value(value)
        if why is None:
            continue
        if os.environ.get(STRICT_ENV) == "1":
            raise RawValueInSentence(f"{{{name}}} of", message, why)
        checked[name] = _unknown()
    return text.format(**checked)


@functools.lru_cache(maxsize=4096)
def _placeholders(text: str) -> frozenset[str]:
    """The names a template's {placeholders} use (a value given but not used is never shown)."""
    try:
        fields = [field for _literal, field, _spec, _conversion in string.Formatter().parse(text) if field]
    except ValueError:  # a malformed template: format() says so itself
        return frozenset()
    # a placeholder the template itself quotes (`{x}`, "{x}", “{x}”) shows a value as the input wrote it
    quoted = {m.group(2) for m in re.finditer(r"([`\"“])\{(\w+)[^{}]*\}[`\"”]", text)}
    return frozenset(name for field in fields if (name := re.split(r"[.\[]", field, maxsplit=1)[0]) not in quoted)


def _unknown() -> str:
    return _("not known")


def _(message: str, /, **values: object) -> str:
    """message translated, then its {named} placeholders filled from values."""
    text = catalog(_current).gettext(message) if _current != ENGLISH else message
    return _fill(message, text, values)


def ngettext(singular: str, plural: str, count: int, /, **values: object) -> str:
    """The singular or plural form for count (Chinese has one form), formatted with count and values."""
    text = catalog(_current).ngettext(singular, plural, count) if _current != ENGLISH else (singular if count == 1 else plural)
    return _fill(singular, text, {"count": count, **values})


def pgettext(context: str, message: str, /, **values: object) -> str:
    """message translated in context (the same English that needs two translations)."""
    text = catalog(_current).pgettext(context, message) if _current != ENGLISH else message
    return _fill(message, text, values)


class Said(str):
    """English text that can also be said in the user's language: the string itself is the English
    (what evidence, JSON and manifests keep, and what any code that treats it as a str sees), text()
    is the user's language. Made with said("template {name}", name=…), which Babel extracts; a value
    may itself be a Said. It pickles (it crosses the image workers' pipe)."""

    message: str
    values: tuple[tuple[str, object], ...]

    def __new__(cls, message: str, values: tuple[tuple[str, object], ...] = ()) -> Said:
        english = _fill(message, message, dict(values))
        self = super().__new__(cls, english)
        self.message, self.values = message, values
        return self

    def __reduce__(self) -> tuple[type[Said], tuple[str, tuple[tuple[str, object], ...]]]:
        return Said, (self.message, self.values)

    def english(self) -> str:
        return str.__str__(self)

    def text(self) -> str:
        """In the user's language."""
        return _(self.message, **{name: value.text() if isinstance(value, Said) else value for name, value in self.values})


class _Joined(Said):
    """Texts joined by a separator: English joined as given, text() with the separator translated and
    each item said in the user's language."""

    items: tuple[str, ...]

    def __new__(cls, separator: str, items: tuple[str, ...]) -> _Joined:
        self = str.__new__(cls, separator.join(items))
        self.message, self.values, self.items = separator, (), items
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return joined, (self.message, self.items)

    def text(self) -> str:
        return _(self.message).join(localized(item) for item in self.items)


def joined(separator: str, items: Iterable[str]) -> Said:
    """separator.join(items) as a Said: "; " and ", " read "；" and "，" in Chinese."""
    return _Joined(separator, tuple(items))


def reason(exc: BaseException) -> str:
    """What an exception says, kept a Said when it was raised with one (str(exc) would drop it)."""
    return exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], Said) else str(exc)


def localized(text: str) -> str:
    """A text as the user reads it: a Said in their language, a message marked with N_ translated."""
    return text.text() if isinstance(text, Said) else _(text)


def said(message: str, /, **values: object) -> Said:
    """message and its values, to be said in English (the string itself) or in the user's language (text())."""
    return Said(message, tuple(values.items()))


def sentences(*parts: str) -> str:
    """Sentences one after another: a space between them in English, none in Chinese (。 ends one)."""
    return ("" if _current == CHINESE else " ").join(part for part in parts if part)


def N_(message: str) -> str:
    """Marks message for the catalog where it is defined; _() translates it where it is shown."""
    return message


def N_plural(singular: str, plural: str) -> tuple[str, str]:
    """Marks a plural pair for the catalog (the message's singular and plural forms)."""
    return singular, plural


def translated(code: str, section: str, english: str) -> bool:
    """Whether the catalog of the current language holds this section (English: always)."""
    if _current == ENGLISH or not english:
        return True
    held = getattr(catalog(_current), "_catalog", {})  # GNUTranslations: "context\x04id" → text
    return bool(held.get(f"{code} {section}\x04{english}"))


def explanation(code: str, section: str, english: str) -> str:
    """A code's explanation section (title, what, why, fix_by_hand, example, fix_safety) in the
    current language: looked up by "CODE section", so two codes with the same English may differ."""
    if _current == ENGLISH or not english:
        return english
    lookup = catalog(_current).pgettext  # a plain name: the extractor takes this call for a message
    return lookup(f"{code} {section}", english)


# what the operating system says of a path, in the words of its own English (Linux's strerror) and in
# the catalog: the errors a user meets for a path they gave
OS_ERRORS = {
    errno.ENOENT: N_("No such file or directory"),
    errno.EACCES: N_("Permission denied"),
    errno.EPERM: N_("Operation not permitted"),
    errno.EISDIR: N_("Is a directory"),
    errno.ENOTDIR: N_("Not a directory"),
    errno.ENOSPC: N_("No space left on device"),
    errno.EROFS: N_("Read-only file system"),
    errno.ELOOP: N_("Too many levels of symbolic links"),
    errno.EIO: N_("Input/output error"),
    errno.EEXIST: N_("File exists"),
    errno.ECONNREFUSED: N_("Connection refused"),
    errno.ECONNRESET: N_("Connection reset by peer"),
    errno.ETIMEDOUT: N_("Connection timed out"),
    errno.EHOSTUNREACH: N_("No route to host"),
    errno.ENETUNREACH: N_("Network is unreachable"),
}


def literal(value: object) -> str:
    """A value as the input wrote it, quoted as code (`null`, `NaN`, `True`): evidence, never words."""
    return f"`{value}`"


def json_failure(exc: BaseException) -> str:
    """Why bytes did not parse as JSON, in the reader's words (never the exception's repr): where it broke
    for a syntax error; not UTF-8; nested too deeply; a number or value JSON cannot hold."""
    import json

    if isinstance(exc, json.JSONDecodeError):
        return _("not valid JSON at line {line}, column {column}", line=exc.lineno, column=exc.colno)
    if isinstance(exc, UnicodeDecodeError):
        return _("not UTF-8 text")
    if isinstance(exc, RecursionError):
        return _("nested too deeply")
    return _("a number or value JSON cannot hold")


def os_reason(exc: OSError) -> Said:
    """What an OSError says: the catalog's words where its errno is a common one (the English is the
    system's own strerror), else its text as the system wrote it."""
    if exc.errno in OS_ERRORS:  # by number: asyncio's refused connect says "Connect call failed (…)" for ECONNREFUSED
        return said(OS_ERRORS[exc.errno])
    return Said(exc.strerror or str(exc))
