"""Decides the encoding of a text file from all of its bytes, and refuses to guess.

Order: byte-order marks decide; UTF-16/32 without one show in where their zero bytes fall; ISO-2022
escapes name their character sets; binary content is left alone; strict UTF-8 wins; a Python file
keeps its coding cookie. What is left is read in every legacy encoding (readings.py) and converted
only when one reading beats every other by its language statistics; structured files must also
parse after decoding. A file whose UTF-8 lines sit beside lines in another encoding is never
converted (no single conversion is right for both).

An encoding the user names applies only to a file this could not decide on its own: a file that
reads clearly as something else is reported and left alone.
"""

from __future__ import annotations

import enum
import json
import re
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from decode_doctor.i18n import _, said

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
BINARY_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"PK\x03\x04", "zip"),
    (b"GGUF", "GGUF"),
    (b"\x89PNG", "PNG"),
    (b"\xff\xd8\xff", "JPEG"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\x7fELF", "ELF"),
    (b"SQLite format 3\x00", "SQLite"),
    (b"\x93NUMPY", "numpy"),
    (b"%PDF", "PDF"),
    (b"\x89HDF\r\n\x1a\n", "HDF5"),
    (b"\x08\x01\x12", "ONNX/protobuf"),
)
ISO2022 = ("iso2022_jp", "iso2022_jp_2", "iso2022_jp_ext", "iso2022_kr")
STRUCTURED = {".json", ".jsonl", ".toml", ".yaml", ".yml"}
CODING_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.M)
CONTROL_BYTES = [b for b in range(0x80) if b <= 0x08 or b == 0x0B or 0x0E <= b <= 0x1F or b == 0x7F]
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


def sniff_binary(data: bytes) -> str | None:
    for magic, name in BINARY_MAGIC:
        if data.startswith(magic):
            return name
    if data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "pickle"
    if len(data) >= 10 and data[8:10] == b'{"':
        length = int.from_bytes(data[:8], "little")
        if 0 < length <= len(data) - 8:
            return "safetensors"
    if b"\x00" in data:
        return "NUL bytes"
    return None


def _wide_without_bom(data: bytes) -> str | None:
    """UTF-32 or UTF-16 without a BOM, from where the zero bytes of its ASCII characters fall."""
    if len(data) >= 8 and len(data) % 4 == 0:
        lanes = [data[i::4].count(0) / (len(data) // 4) for i in range(4)]
        if lanes[1] > 0.95 and lanes[2] > 0.95 and lanes[3] > 0.95:
            return "utf-32-le"
        if lanes[0] > 0.95 and lanes[1] > 0.95 and lanes[2] > 0.95:
            return "utf-32-be"
    if len(data) < 4 or len(data) % 2:
        return None
    even, odd = data[0::2], data[1::2]
    zero_even, zero_odd = even.count(0) / len(even), odd.count(0) / len(odd)
    for codec, lean in (("utf-16-le", zero_odd > 0.4 and zero_even < 0.05), ("utf-16-be", zero_even > 0.4 and zero_odd < 0.05)):
        if lean and _mostly_ascii(data, codec):
            return codec
    return _wide_cjk(data)


def _mostly_ascii(data: bytes, codec: str) -> bool:
    """The characters whose high byte is zero are text: most of them printable ASCII (not "é", "ÿ"
    and friends, which random bytes give as often)."""
    try:
        text = data.decode(codec)
    except UnicodeDecodeError:
        return False
    low = [c for c in text if ord(c) < 0x100]
    return len(low) >= 3 and sum(1 for c in low if " " <= c <= "~" or c in "\t\r\n") >= 0.75 * len(low)


WIDE_LINE_ENDS = {"utf-16-le": b"\n\x00", "utf-16-be": b"\x00\n"}
CJK_SHARE = 0.9  # of the characters that are not ASCII: what a CJK text without a BOM must be
WIDE_CJK_LIMIT = 16 << 20  # larger files are not read as UTF-16 without a BOM on this evidence


def _wide_cjk(data: bytes) -> str | None:
    """UTF-16 without a BOM whose text is CJK (few zero bytes: only its line ends and spaces have
    them): every line end falls at an even offset (`0a 00` little-endian), the whole decodes
    strictly (surrogates paired), holds no control, private-use or unassigned character, and at
    least nine in ten of its characters beyond ASCII are CJK. Random bytes of even length almost
    never pass all of that; an odd length never is UTF-16."""
    from .readings import forbidden

    if len(data) % 2 or len(data) < 4 or len(data) > WIDE_CJK_LIMIT or sniff_binary(data[:4096]) not in (None, "NUL bytes"):
        return None
    for codec, line_end in WIDE_LINE_ENDS.items():
        ends = _find_all(data, line_end)
        aligned = [i for i in ends if i % 2 == 0]
        if not aligned or (len(aligned) < len(ends) and len(aligned) < 2):
            continue
        try:
            text = data.decode(codec)
        except UnicodeDecodeError:
            continue
        if forbidden(text.replace("\r", "").replace("\n", "").replace("\t", "")):
            continue
        wide = [c for c in text if ord(c) > 0x7F]
        if len(wide) < 2 or (len(aligned) < 2 and len(wide) < 6):  # two lines, or one line of six
            continue
        hangul = sum(1 for c in wide if 0xAC00 <= ord(c) <= 0xD7A3)
        han = sum(1 for c in wide if _is_cjk(c)) - hangul
        # one language: Chinese and Japanese text has no Hangul, Korean text little Han (random units mix them)
        cjk = max(han, hangul) if min(han, hangul) <= 0.1 * (han + hangul) else 0
        if cjk >= CJK_SHARE * len(wide) and text.count("\n") == len(aligned):
            return codec
    return None


def _find_all(data: bytes, needle: bytes) -> list[int]:
    found: list[int] = []
    start = data.find(needle)
    while start >= 0 and len(found) < 1 << 20:
        found.append(start)
        start = data.find(needle, start + 1)
    return found


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return (
        0x4E00 <= code <= 0x9FFF  # CJK unified ideographs
        or 0x3000 <= code <= 0x30FF  # CJK punctuation, hiragana, katakana
        or 0xAC00 <= code <= 0xD7A3  # Hangul syllables
        or 0xFF00 <= code <= 0xFFEF  # full- and half-width forms
        or 0xF900 <= code <= 0xFAFF  # compatibility ideographs
    )


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


def _control_byte(data: bytes) -> int | None:
    import numpy as np

    table = np.zeros(256, dtype=bool)
    table[CONTROL_BYTES] = True
    values = np.frombuffer(data, dtype=np.uint8)
    found = np.flatnonzero(table[values])
    return int(values[found[0]]) if len(found) else None


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
    wide = _wide_without_bom(data)
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
    control = _control_byte(data)
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
