"""Decides the encoding of a text file from all of its bytes, and refuses to guess.

Order: byte-order marks decide; UTF-16/32 without one show in where their zero bytes fall; ISO-2022
escapes name their character sets; binary content is left alone; strict UTF-8 wins; a Python file
keeps its coding cookie. What is left is read in every legacy encoding (readings.py) and converted
only when one reading beats every other by its language statistics; structured files must also
parse after decoding. A file whose UTF-8 lines sit beside lines in another encoding is never
converted (no single conversion is right for both).

An encoding the user names applies only to a file this could not decide on its own: a file that
reads clearly as something else is reported and left alone. What the bytes show before any reading
(binary formats, wide encodings without a BOM, control bytes) is sniff.py's.
"""

from __future__ import annotations

import enum
import json
import re
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from decode_doctor.i18n import _, said

from .sniff import control_byte, sniff_binary, wide_without_bom

if TYPE_CHECKING:
    from .language import Words
    from .readings import Reading

BOMS = (
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)
ISO2022 = ("iso2022_jp", "iso2022_jp_2", "iso2022_jp_ext", "iso2022_kr")
STRUCTURED = {".json", ".jsonl", ".toml", ".yaml", ".yml"}
CODING_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.M)
_ESCAPES = (b"\x1b$", b"\x1b(", b"\x1b)")
SHOWN_READINGS = 3  # competing readings shown side by side in a refusal
SHOWN_WORDS = 4


@dataclass
class Shown:
    """One competing reading, as a refusal shows it."""

    encoding: str
    language: str
    words: list[str]  # the words where the readings differ, in this reading


class Status(str, enum.Enum):
    """A file's verdict: text already UTF-8 (or plain ASCII), a legacy encoding to convert, or one of the
    reasons it is refused."""

    UTF8 = "utf-8"
    ASCII = "ascii"
    CONVERT = "convert"  # decoded clearly from one legacy encoding: the fix converts it
    AMBIGUOUS = "ambiguous"  # several legacy readings, none clearly right
    CONTRADICTED = "contradicted"  # the encoding the user named reads as another
    MIXED = "mixed"  # UTF-8 lines beside lines in another encoding
    TRUNCATED = "truncated"  # cut off inside its last character
    BINARY = "binary"
    UNDECODABLE = "undecodable"
    COOKIE = "cookie"  # a Python source that declares its coding

    @property
    def is_utf8(self) -> bool:
        return self in (Status.UTF8, Status.ASCII)


@dataclass
class Verdict:
    status: Status
    encoding: str | None = None
    text: str | None = None  # the decoded text, for "convert"
    reason: str = ""
    language: str | None = None
    bom: str | None = None
    bad_offset: int | None = None  # first byte strict UTF-8 rejects
    bad_line: int | None = None
    preview: str | None = None  # the decoded line with the first non-UTF-8 byte
    readings: list[Shown] = field(default_factory=list)  # for "ambiguous" and "contradicted"
    stated: str | None = None  # the encoding the user named, when it was not used
    mixed_lines: dict[str, list[int]] = field(default_factory=dict)
    margin: float | None = None  # a legacy reading chosen on its own evidence: bits it won by
    words: dict[str, object] | None = None  # a reading chosen by the words it makes: their evidence (lexicon.py)
    # an ambiguous file's readings, kept for a second look with its siblings (never serialized)
    found: Readings | None = field(default=None, repr=False, compare=False)

    @property
    def candidates(self) -> list[str]:
        return [shown.encoding for shown in self.readings]


@dataclass(frozen=True)
class Readings:
    """Every clean legacy reading of a file and its words (readings.readings)."""

    found: list[Reading]
    words: Words


class Where(TypedDict):
    """Where strict UTF-8 first fails: the byte and its line."""

    bad_offset: int
    bad_line: int


def parses(text: str, suffix: str) -> bool:
    """Structured files must parse after decoding (a 0x5C second byte turns into a backslash)."""
    try:
        if suffix == ".json":
            json.loads(text)
        elif suffix == ".jsonl":
            for line in text.splitlines():
                if line.strip():
                    json.loads(line)
        elif suffix == ".toml":
            if sys.version_info >= (3, 11):
                import tomllib
            else:  # Python 3.10
                import tomli as tomllib  # pyright: ignore[reportMissingImports]
            tomllib.loads(text)
        elif suffix in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError:
                return True
            yaml.safe_load(text)
    except Exception:
        return False
    return True


def line_number(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def line_at(data: bytes, offset: int | None, encoding: str) -> str:
    """The line holding byte offset, decoded: a newline is never part of a character, so a line
    decodes on its own (for the one-byte and multi-byte encodings read line by line here)."""
    if offset is None:
        return ""
    start = data.rfind(b"\n", 0, offset) + 1
    end = data.find(b"\n", offset)
    try:
        return data[start : end if end >= 0 else len(data)].decode(encoding).strip()[:160]
    except (UnicodeDecodeError, LookupError):
        return ""


def _before_utf8(data: bytes) -> Verdict | None:
    """The verdicts that come before UTF-8: BOMs, wide encodings without one, ISO-2022, binary."""
    from .readings import forbidden

    for bom, codec in BOMS:
        if data.startswith(bom):
            try:
                text = data.decode(codec)
            except UnicodeDecodeError as exc:
                reason = _("starts with a {codec} BOM but byte {start} does not decode", codec=codec, start=exc.start)
                return Verdict(Status.UNDECODABLE, codec, reason=reason, bad_offset=exc.start)
            if codec == "utf-8-sig":
                return Verdict(Status.UTF8, "utf-8", text=text, bom=codec)
            return Verdict(Status.CONVERT, codec, text=text, reason=_("{value} with a byte-order mark", value=codec.upper()), bom=codec)
    wide = wide_without_bom(data)
    if wide:
        try:
            decoded: str | None = data.decode(wide)
        except UnicodeDecodeError:
            decoded = None
        if decoded is not None and not forbidden(decoded):
            text = decoded
            zeros = _("three bytes in four") if wide.startswith("utf-32") else _("every other byte")
            return Verdict(
                Status.CONVERT,
                wide,
                text=text,
                reason=_("{value} without a byte-order mark ({zeros} zero)", value=wide.upper(), zeros=zeros),
            )
    if data.isascii() and any(escape in data for escape in _ESCAPES):
        for codec in ISO2022:
            try:
                text = data.decode(codec)
            except UnicodeDecodeError:
                continue
            if not text.isascii() and not forbidden(text):
                return Verdict(
                    Status.CONVERT, codec, text=text, reason=_("{value}: its escape sequences name the character sets", value=codec.upper())
                )
    binary = sniff_binary(data[:4096]) or (b"\x00" in data and _("NUL bytes")) or None
    if binary:
        return Verdict(Status.BINARY, reason=binary)
    return None


def decide(data: bytes, suffix: str = "", stated: str | None = None) -> Verdict:
    """The verdict on one file's bytes. suffix (".json") enables the parse check; stated is an encoding
    the user named (--from-encoding), used only if the bytes do not decide."""
    early = _before_utf8(data)
    if early is not None:
        return early
    try:
        text = data.decode("utf-8")
        return Verdict(Status.ASCII if data.isascii() else Status.UTF8, "utf-8", text=text)
    except UnicodeDecodeError as exc:
        line_no = line_number(data, exc.start)
        where = Where(bad_offset=exc.start, bad_line=line_no)
        utf8_cut = exc.reason == "unexpected end of data" and exc.start >= len(data) - 3 and not data[: exc.start].isascii()
    if suffix == ".py":
        cookie = CODING_COOKIE.search(b"\n".join(data.split(b"\n")[:2]))
        if cookie:
            named = cookie.group(1).decode(errors="replace")
            return Verdict(Status.COOKIE, named, reason=_("declares coding: {named}", named=named), **where)
    if utf8_cut:
        return Verdict(Status.TRUNCATED, "utf-8", reason=_("UTF-8 text cut off inside its last character"), **where)
    control = control_byte(data)
    if control is not None:  # never a byte of a character in these encodings: a real control character
        return Verdict(Status.UNDECODABLE, reason=_("control byte 0x{control:02x} in the text", control=control), **where)
    return _legacy(data, suffix, stated, where)


def _legacy(data: bytes, suffix: str, stated: str | None, where: Where) -> Verdict:
    from .readings import choose, hot_spans, readings

    spans = list(hot_spans(data))
    lines = [data[start:end] for start, end in spans]
    mixed = mixed_lines(data, spans)
    if mixed:
        return Verdict(Status.MIXED, reason=_("UTF-8 lines beside lines in another encoding"), mixed_lines=mixed, **where)
    truncated = truncation(data, lines)
    if truncated:
        return Verdict(
            Status.TRUNCATED, truncated, reason=_("{truncated} text cut off inside its last character", truncated=truncated), **where
        )
    found, words = readings(data, lines)
    choice = choose(found, words)
    undecided = [r for r, _ in choice.rivals]
    shown = _side_by_side(undecided or sorted(found, key=lambda r: -r.rate), words)
    stated_reading = _stated_reading(data, stated, found) if stated else None
    if choice.reading is None:
        if stated and stated_reading is not None and undecided and stated_reading not in undecided:
            names = " and ".join(r.encoding for r in undecided[:3])
            reason = _("you said {stated}, but the file does not read as {stated}: {names} read far better", stated=stated, names=names)
            readings_shown = _side_by_side([*undecided[:2], stated_reading], words)
            return Verdict(Status.CONTRADICTED, None, reason=reason, readings=readings_shown, stated=stated, **where)
        if stated:
            return _as_stated(data, suffix, stated, where, shown)
        return Verdict(Status.AMBIGUOUS, reason=choice.why, readings=shown, found=Readings(found, words), **where)
    reading = choice.reading
    if stated and stated_reading is not reading:
        behind = (
            _(", and {stated} reads far worse", stated=stated)
            if stated_reading is not None
            else _(", which {stated} does not decode cleanly", stated=stated)
        )
        return Verdict(
            Status.CONTRADICTED,
            reading.encoding,
            reason=_(
                "you said {stated}; this file reads as {encoding} ({language}){behind}",
                stated=stated,
                encoding=reading.encoding,
                language=_(reading.language),
                behind=behind,
            ),
            language=reading.language,
            readings=_side_by_side([reading, stated_reading] if stated_reading else [reading], words),
            stated=stated,
            **where,
        )
    if suffix in STRUCTURED and not parses(reading.text, suffix):
        return Verdict(
            Status.UNDECODABLE,
            reading.encoding,
            reason=_(
                "it reads as {encoding} ({language}), but decoded so it does not parse as {value}",
                encoding=reading.encoding,
                language=_(reading.language),
                value=suffix[1:].upper(),
            ),
            **where,
        )
    return Verdict(
        Status.CONVERT,
        reading.encoding,
        text=reading.text,
        reason=choice.why,
        language=reading.language,
        preview=line_at(data, where["bad_offset"], reading.encoding),
        margin=choice.margin,
        words=choice.words,
        **where,
    )


def _stated_reading(data: bytes, stated: str, found: list[Reading]) -> Reading | None:
    """The reading that gives the text the stated encoding gives, if it is one of the clean readings."""
    from .readings import hot_lines

    try:
        hot = b"\n".join(hot_lines(data)).decode(stated)
        match = next((reading for reading in found if reading.hot == hot), None)
        return match if match is not None and match.text == data.decode(stated) else None
    except (UnicodeDecodeError, LookupError):
        return None


def _as_stated(data: bytes, suffix: str, stated: str, where: Where, shown: list[Shown]) -> Verdict:
    from .readings import forbidden

    try:
        text = data.decode(stated)
    except UnicodeDecodeError as exc:
        reason = _("--from-encoding {stated} fails at byte {start}: {reason}", stated=stated, start=exc.start, reason=exc.reason)
        return Verdict(Status.UNDECODABLE, stated, reason=reason, stated=stated, readings=shown, **where)
    bad = forbidden(text)
    if bad:
        reason = _("decoded as {stated} it holds a {bad}, which no real text does", stated=stated, bad=bad)
        return Verdict(Status.UNDECODABLE, stated, reason=reason, stated=stated, readings=shown, **where)
    if suffix in STRUCTURED and not parses(text, suffix):
        reason = _("decoded as {stated} it no longer parses as {value}", stated=stated, value=suffix[1:].upper())
        return Verdict(Status.UNDECODABLE, stated, reason=reason, stated=stated, readings=shown, **where)
    return Verdict(
        Status.CONVERT,
        stated,
        text=text,
        reason=_("--from-encoding {stated}", stated=stated),
        preview=line_at(data, where["bad_offset"], stated),
        **where,
    )


def _side_by_side(candidates: list[Reading], words: Words) -> list[Shown]:
    """The competing readings, each with its words at the places where they differ most often."""
    from .readings import _decoded

    candidates = candidates[:SHOWN_READINGS]
    if not candidates:
        return []
    texts = [r.words if len(r.words) == len(words.chunks) else _decoded(words.chunks, r.encoding) for r in candidates]
    differing = [i for i in range(len(words.chunks)) if len({t[i] for t in texts}) > 1]
    differing.sort(key=lambda i: -words.counts[i])
    places = differing[:SHOWN_WORDS]
    return [Shown(r.encoding, r.language, [t[i] or "?" for i in places]) for r, t in zip(candidates, texts, strict=True)]


def truncation(data: bytes, lines: list[bytes]) -> str | None:
    """A multi-byte encoding that fails only in its last character, and reads well up to it."""
    from .readings import FAMILIES, MULTIBYTE, choose, readings

    if data[-3:].isascii():  # a cut character ends in its lead byte, or GB18030's lead and digit
        return None
    sample = b"\n".join(lines)  # the rest is ASCII; the last line is the file's end
    for codec in MULTIBYTE:
        try:
            sample.decode(codec)
            continue
        except UnicodeDecodeError as exc:
            if exc.start < len(sample) - 3 or exc.reason not in ("incomplete multibyte sequence", "unexpected end of data"):
                continue
            cut = len(data) - (len(sample) - exc.start)
        family = next(members for members in FAMILIES.values() if codec in members)
        choice = choose(*readings(data[:cut]))
        if choice.reading is not None and set(choice.reading.codecs) & set(family):
            return choice.reading.encoding
    return None


def mixed_lines(data: bytes, spans: list[tuple[int, int]]) -> dict[str, list[int]]:
    """Lines that read better as UTF-8 than in the encoding of the file's other non-ASCII lines.
    A line that decodes as UTF-8 but holds one lone two-byte character is not counted either way."""
    from .language import best_model
    from .readings import EVIDENCE_BITS, choose, readings, words

    utf8: list[tuple[int, bytes]] = []
    legacy: list[tuple[int, bytes]] = []
    line_no, last = 1, 0
    for start, end in spans:
        line_no += data.count(b"\n", last, start)
        last = start
        line = data[start:end]
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            legacy.append((line_no, line))
            continue
        # one two-byte sequence (C3 A8, "è") is too easily a legacy character pair ("猫" in GBK)
        wide = [char for char in text if ord(char) > 0x7F]
        if len(wide) >= 2 or any(ord(char) >= 0x800 for char in wide):
            utf8.append((line_no, line))
    if not utf8 or not legacy:
        return {}
    others = [line for _, line in legacy]
    found, legacy_words = readings(b"\n".join(others), others)
    choice = choose(found, legacy_words)
    rest = choice.reading or (max(found, key=lambda r: r.rate) if found else None)
    chunks: Words = words([line for _, line in utf8])
    as_utf8 = best_model(["utf-8"], chunks)
    if as_utf8 is None:
        return {}
    utf8_bits = float(as_utf8[1] @ chunks.counts)
    rest_bits = -float("inf")
    if rest is not None and rest.model is not None:
        try:
            b"\n".join(line for _, line in utf8).decode(rest.encoding)
            rest_bits = float(chunks.bits(rest.model) @ chunks.counts)
        except UnicodeDecodeError:
            pass
    if utf8_bits - rest_bits < EVIDENCE_BITS:
        return {}
    name = rest.encoding if rest is not None else "not UTF-8"
    return {"utf-8": [n for n, _ in utf8], name: [n for n, _ in legacy]}


def converted_bytes(verdict: Verdict, keep_utf8_bom: bool) -> bytes:
    """UTF-8 bytes for a 'convert' verdict; line endings are whatever the text holds (CRLF stays)."""
    assert verdict.text is not None
    text = verdict.text[1:] if verdict.text.startswith("\ufeff") else verdict.text
    data = text.encode("utf-8")
    if keep_utf8_bom:
        data = b"\xef\xbb\xbf" + data
    if data.decode("utf-8-sig" if keep_utf8_bom else "utf-8") != text:
        raise ValueError(said("the converted bytes do not decode back to the same text"))
    return data
