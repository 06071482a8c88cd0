"""Decides the encoding of a text file from all of its bytes, and refuses to guess.

Order: BOMs decide; UTF-16 without a BOM shows in its zero bytes; binary content is skipped;
strict UTF-8 wins; then every legacy candidate (GB2312 ⊂ GBK ⊂ GB18030, Big5, Shift_JIS, EUC-JP,
EUC-KR, cp1252) is decoded strictly and scored for plausibility: control characters, C1 controls,
private-use or unassigned code points rule a reading out; otherwise the score is the share of
non-ASCII characters that the language of that encoding really uses (GB2312's 6,763 hanzi for
GBK, Big5's 5,401 level-1 characters, kana and JIS level-1 kanji for Japanese, KS X 1001 hangul
for Korean, letters inside words for cp1252). Structured files must also parse after decoding.
A reading is chosen only when it is the sole plausible one or clearly ahead; chardet breaks near
ties on longer texts; everything else is "ambiguous", with the candidates named.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

PLAUSIBLE = 0.85  # share of non-ASCII characters that must be ordinary for the encoding
MARGIN = 0.20  # how far the best reading must lead the next one to be chosen on its own
CHARDET_MIN_CHARS = 8  # below this many non-ASCII characters chardet's opinion is noise

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
)
# family → codecs from narrowest to widest; the narrowest that decodes names the encoding
FAMILIES: dict[str, tuple[str, ...]] = {
    "gbk": ("gb2312", "gbk", "gb18030"),
    "big5": ("big5", "cp950", "big5hkscs"),
    "shift_jis": ("shift_jis", "cp932"),
    "euc_jp": ("euc_jp",),
    "euc_kr": ("euc_kr", "cp949"),
    "cp1252": ("cp1252",),
}
CHARDET_FAMILY = {
    "gb2312": "gbk",
    "gbk": "gbk",
    "gb18030": "gbk",
    "big5": "big5",
    "cp950": "big5",
    "big5hkscs": "big5",
    "shift_jis": "shift_jis",
    "cp932": "shift_jis",
    "euc-jp": "euc_jp",
    "euc-kr": "euc_kr",
    "cp949": "euc_kr",
    "windows-1252": "cp1252",
    "iso-8859-1": "cp1252",
    "iso-8859-15": "cp1252",
}
STRUCTURED = {".json", ".jsonl", ".toml", ".yaml", ".yml"}
CODING_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.M)


@dataclass
class Candidate:
    encoding: str  # the narrowest codec that decodes the file
    family: str
    score: float
    text: str


@dataclass
class Verdict:
    status: str  # utf-8, ascii, convert, ambiguous, mixed, truncated, binary, undecodable, cookie
    encoding: str | None = None
    text: str | None = None  # the decoded text, for "convert"
    reason: str = ""
    bom: str | None = None
    bad_offset: int | None = None  # first byte strict UTF-8 rejects
    bad_line: int | None = None
    preview: str | None = None  # the decoded line with the first non-UTF-8 byte
    candidates: list[tuple[str, float]] = field(default_factory=list)
    mixed_lines: dict[str, list[int]] = field(default_factory=dict)


# --- what each language really uses, derived from the codecs themselves -------------------------


def _decode_grid(codec: str, leads: range, trails: list[int]) -> frozenset[str]:
    chars = set()
    for lead in leads:
        for trail in trails:
            try:
                chars.add(bytes((lead, trail)).decode(codec))
            except UnicodeDecodeError:
                pass
    return frozenset(chars)


@functools.cache
def gb2312_hanzi() -> frozenset[str]:
    return _decode_grid("gb2312", range(0xB0, 0xF8), list(range(0xA1, 0xFF)))


@functools.cache
def big5_level1() -> frozenset[str]:
    return _decode_grid("big5", range(0xA4, 0xC7), [*range(0x40, 0x7F), *range(0xA1, 0xFF)])


@functools.cache
def jis_level1_kanji() -> frozenset[str]:
    return _decode_grid("shift_jis", range(0x88, 0x99), [*range(0x40, 0x7F), *range(0x80, 0xFD)])


@functools.cache
def ksx1001_hangul() -> frozenset[str]:
    return _decode_grid("euc_kr", range(0xB0, 0xC9), list(range(0xA1, 0xFF)))


def _is_shared_punct(ch: str) -> bool:
    code = ord(ch)
    return 0x3000 <= code <= 0x303F or 0xFF00 <= code <= 0xFFEF or 0x2010 <= code <= 0x205E or ch in "·×÷°±§¨¤"


def _is_kana(ch: str) -> bool:
    return 0x3040 <= ord(ch) <= 0x30FF


_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\ue000-\uf8ff\U000f0000-\U0010ffff]")
_HIGH_CHAR = re.compile("[^\x00-\x7f]")
_HIGH_BYTE = re.compile(rb"[\x80-\xff]")
_CONTROL_BYTE = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def _ruled_out(text: str) -> str | None:
    bad = _FORBIDDEN.search(text)
    if bad:
        code = ord(bad.group())
        kind = "control character" if code < 0x7F else "C1 control" if code <= 0x9F else "private-use"
        return f"{kind} U+{code:04X}"
    for match in _HIGH_CHAR.finditer(text):
        if unicodedata.category(match.group()) == "Cn":
            return f"unassigned U+{ord(match.group()):04X}"
    return None


def _hot_spans(data: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of each line holding a non-ASCII byte, found without rescanning ASCII."""
    pos = 0
    while True:
        match = _HIGH_BYTE.search(data, pos)
        if match is None:
            return
        start = data.rfind(b"\n", 0, match.start()) + 1
        end = data.find(b"\n", match.start())
        end = len(data) if end < 0 else end
        yield start, end
        pos = end + 1


def hot_lines(data: bytes) -> bytes:
    """The lines holding non-ASCII bytes. A newline is never a second byte in these encodings,
    so each line decodes on its own, and the ASCII bulk of a large vocab is not rescanned."""
    return b"\n".join(data[start:end] for start, end in _hot_spans(data))


LATIN_SYMBOLS = set("€‚„…†‡‰‹›‘’“”•–—˜™©®°±²³µ¶·¹º»¼½¾¿×÷")


def _latin_ordinary(text: str) -> int:
    """cp1252 characters that look like Latin text: alone inside a word, or a pair of letters
    touching ASCII letters ("ções"); longer runs of high characters are multi-byte mojibake."""
    ordinary = 0
    for run in HIGH_RUN.finditer(text):
        chars = run.group()
        if len(chars) == 1:
            ordinary += chars.isalpha() or chars in LATIN_SYMBOLS
        elif len(chars) == 2 and chars.isalpha():
            before = text[run.start() - 1] if run.start() > 0 else ""
            after = text[run.end()] if run.end() < len(text) else ""
            if (before.isascii() and before.isalpha()) or (after.isascii() and after.isalpha()):
                ordinary += 2
    return ordinary


@functools.cache
def gb2312_symbols() -> frozenset[str]:
    """Rows 1–3 of GB2312: punctuation, numbered forms, full-width ASCII."""
    return _decode_grid("gb2312", range(0xA1, 0xA4), list(range(0xA1, 0xFF)))


@functools.cache
def big5_symbols() -> frozenset[str]:
    return _decode_grid("big5", range(0xA1, 0xA4), [*range(0x40, 0x7F), *range(0xA1, 0xFF)])


def _is_emoji(ch: str) -> bool:
    return ord(ch) >= 0x1F000 or unicodedata.category(ch) == "So"


SCORERS: dict[str, Callable[[str, int], bool]] = {
    # GB18030's four-byte forms carry emoji and rare characters that no other encoding produces
    "gbk": lambda t, i: t[i] in gb2312_hanzi() or t[i] in gb2312_symbols() or _is_shared_punct(t[i]) or _is_emoji(t[i]),
    "big5": lambda t, i: t[i] in big5_level1() or t[i] in big5_symbols() or _is_shared_punct(t[i]),
    "shift_jis": lambda t, i: _is_kana(t[i]) or t[i] in jis_level1_kanji() or _is_shared_punct(t[i]),
    "euc_jp": lambda t, i: _is_kana(t[i]) or t[i] in jis_level1_kanji() or _is_shared_punct(t[i]),
    "euc_kr": lambda t, i: t[i] in ksx1001_hangul() or _is_shared_punct(t[i]),
}


HIGH_RUN = re.compile(r"[^\x00-\x7f]+")


def _spaced_like_korean(text: str) -> bool:
    """Korean puts spaces between short words; Chinese and Japanese run on for a whole clause."""
    runs = HIGH_RUN.findall(text)
    if len(runs) < 4:
        return False
    spaced = len(re.findall(r"[^\x00-\x7f]{1,5} (?=[^\x00-\x7f])", text))
    return spaced >= 0.5 * (len(runs) - 1) and sum(map(len, runs)) / len(runs) <= 5


def plausibility(text: str, family: str) -> float:
    if _ruled_out(text):
        return 0.0
    high = [match.start() for match in _HIGH_CHAR.finditer(text)]
    if not high:
        return 1.0
    if family == "cp1252":
        return _latin_ordinary(text) / len(high)
    ordinary = SCORERS[family]
    score = sum(1 for i in high if ordinary(text, i)) / len(high)
    if family in ("gbk", "big5", "shift_jis", "euc_jp") and _spaced_like_korean(text):
        score *= 0.5
    if family in ("shift_jis", "euc_jp") and len(high) >= 8 and not any(_is_kana(text[i]) for i in high):
        score *= 0.5  # Japanese prose without a single kana is not Japanese prose
    return score


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
            try:
                import tomllib
            except ImportError:  # Python 3.10
                import tomli as tomllib
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


def _utf16_without_bom(data: bytes) -> str | None:
    if len(data) < 4 or len(data) % 2:
        return None
    even, odd = data[0::2], data[1::2]
    zero_even, zero_odd = even.count(0) / len(even), odd.count(0) / len(odd)
    if zero_odd > 0.4 and zero_even < 0.05:
        return "utf-16-le"
    if zero_even > 0.4 and zero_odd < 0.05:
        return "utf-16-be"
    return None


def _position(data: bytes, offset: int) -> tuple[int, str]:
    line_no = data.count(b"\n", 0, offset) + 1
    start = data.rfind(b"\n", 0, offset) + 1
    end = data.find(b"\n", offset)
    return line_no, data[start : end if end >= 0 else len(data)].decode("utf-8", errors="replace")[:160]


def _candidates(data: bytes, hot: bytes, suffix: str) -> list[Candidate]:
    """One reading per family: the narrowest codec that decodes, scored on the non-ASCII lines;
    only plausible readings are decoded whole and, for structured files, parsed."""
    found = []
    for family, codecs in FAMILIES.items():
        for codec in codecs:
            try:
                hot_text = hot.decode(codec)
            except UnicodeDecodeError:
                continue
            score = plausibility(hot_text, family)
            if score < PLAUSIBLE:
                found.append(Candidate(codec, family, score, ""))
                break
            text = data.decode(codec)  # the other lines are ASCII: this cannot fail now
            if suffix in STRUCTURED and not parses(text, suffix):
                break
            found.append(Candidate(codec, family, score, text))
            break
    return found


def _truncated(data: bytes) -> str | None:
    """A legacy multi-byte encoding that fails only in its last character (UTF-8's own cut is found in decide())."""
    for codec in ("gb18030", "big5", "shift_jis", "euc_kr"):
        try:
            data.decode(codec)
            return None
        except UnicodeDecodeError as exc:
            if (
                exc.end >= len(data)
                and exc.start >= len(data) - 3
                and exc.reason in ("unexpected end of data", "incomplete multibyte sequence")
            ):
                head = data[: exc.start]
                try:
                    text = head.decode(codec)
                except UnicodeDecodeError:
                    continue
                if any(ord(c) > 0x7F for c in text) and plausibility(text, CHARDET_FAMILY.get(codec, "gbk")) >= PLAUSIBLE:
                    return codec
    return None


def _mixed(data: bytes, best_family: str | None) -> dict[str, list[int]]:
    """Lines that are real UTF-8 (with multi-byte characters) beside lines that are not UTF-8."""
    utf8_lines, legacy_lines = [], []
    line_no, last = 1, 0
    for start, end in _hot_spans(data):
        line_no += data.count(b"\n", last, start)
        last = start
        line = data[start:end]
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            legacy_lines.append(line_no)
            continue
        wide = [c for c in text if ord(c) >= 0x800]
        if wide and all(
            c in gb2312_hanzi() or c in big5_level1() or _is_kana(c) or c in ksx1001_hangul() or _is_shared_punct(c) for c in wide
        ):
            utf8_lines.append(line_no)
        else:
            legacy_lines.append(line_no)
    if utf8_lines and legacy_lines:
        return {"utf-8": utf8_lines, best_family or "not utf-8": legacy_lines}
    return {}


def _chardet_family(data: bytes) -> tuple[str | None, float]:
    import chardet

    # Give chardet the lines that matter: the non-ASCII ones, wherever they are in the file.
    sample = hot_lines(data)[:200_000]
    guess = chardet.detect(sample)
    name = (guess.get("encoding") or "").lower()
    return CHARDET_FAMILY.get(name), float(guess.get("confidence") or 0.0)


def decide(data: bytes, suffix: str = "", from_encoding: str | None = None) -> Verdict:
    """The verdict on one file's bytes. suffix (".json") enables the parse check."""
    for bom, codec in BOMS:
        if data.startswith(bom):
            try:
                text = data.decode(codec)
            except UnicodeDecodeError as exc:
                return Verdict(
                    "undecodable",
                    codec,
                    reason=f"starts with a {codec} BOM but byte {exc.start} does not decode",
                    bad_offset=exc.start,
                    bom=codec,
                )
            if codec == "utf-8-sig":
                return Verdict("utf-8", "utf-8", text=text, bom=codec)
            return Verdict("convert", codec, text=text, reason=f"{codec.upper()} with a byte-order mark", bom=codec)
    utf16 = _utf16_without_bom(data)
    if utf16:
        try:
            text = data.decode(utf16)
            if not _ruled_out(text):
                return Verdict("convert", utf16, text=text, reason=f"{utf16.upper()} without a byte-order mark (every other byte is zero)")
        except UnicodeDecodeError:
            pass
    binary = sniff_binary(data[:4096]) or (b"\x00" in data and "NUL bytes") or None
    if binary:
        return Verdict("binary", reason=binary)
    try:
        text = data.decode("utf-8")
        return Verdict("ascii" if data.isascii() else "utf-8", "utf-8", text=text)
    except UnicodeDecodeError as exc:
        line_no, _preview = _position(data, exc.start)
        where = {"bad_offset": exc.start, "bad_line": line_no}
        utf8_cut = exc.reason == "unexpected end of data" and exc.start >= len(data) - 3 and not data[: exc.start].isascii()
    if suffix == ".py":
        cookie = CODING_COOKIE.search(b"\n".join(data.split(b"\n")[:2]))
        if cookie:
            return Verdict(
                "cookie",
                cookie.group(1).decode(errors="replace"),
                reason=f"declares coding: {cookie.group(1).decode(errors='replace')}",
                **where,
            )
    if utf8_cut:
        return Verdict("truncated", "utf-8", reason="utf-8 text cut off inside its last character", **where)
    if _CONTROL_BYTE.search(data):  # never a second byte in these encodings: a real control character
        return Verdict("undecodable", reason=f"control byte 0x{_CONTROL_BYTE.search(data).group()[0]:02x} in the text", **where)
    if from_encoding:
        try:
            text = data.decode(from_encoding)
        except UnicodeDecodeError as exc2:
            return Verdict(
                "undecodable", from_encoding, reason=f"--from-encoding {from_encoding} fails at byte {exc2.start}: {exc2.reason}", **where
            )
        except LookupError:
            return Verdict("undecodable", from_encoding, reason=f"unknown encoding {from_encoding!r}", **where)
        if suffix in STRUCTURED and not parses(text, suffix):
            return Verdict(
                "undecodable", from_encoding, reason=f"decoded as {from_encoding} it no longer parses as {suffix[1:].upper()}", **where
            )
        return Verdict(
            "convert", from_encoding, text=text, reason=f"--from-encoding {from_encoding}", preview=_line_of(text, line_no), **where
        )
    hot = hot_lines(data)
    candidates = _candidates(data, hot, suffix)
    candidates.sort(key=lambda c: -c.score)
    listed = [(c.encoding, round(c.score, 3)) for c in candidates]
    plausible = [c for c in candidates if c.score >= PLAUSIBLE]
    mixed = _mixed(data, plausible[0].family if plausible else None)
    if mixed:
        return Verdict("mixed", reason="UTF-8 lines beside lines in another encoding", mixed_lines=mixed, candidates=listed, **where)
    if not plausible:
        truncated = _truncated(data)
        if truncated:
            return Verdict("truncated", truncated, reason=f"{truncated} text cut off inside its last character", **where)
        return Verdict(
            "undecodable",
            reason="no encoding gives a plausible text" + (f" (best: {listed[0][0]} at {listed[0][1]:.0%})" if listed else ""),
            candidates=listed,
            **where,
        )
    best = plausible[0]
    runner_up = plausible[1] if len(plausible) > 1 else None
    chosen = None
    if runner_up is None or best.score - runner_up.score >= MARGIN:
        chosen = best
    else:
        high_chars = len(_HIGH_CHAR.findall(hot.decode(best.encoding)))
        if high_chars >= CHARDET_MIN_CHARS:
            family, confidence = _chardet_family(data)
            tied = [c for c in plausible if best.score - c.score < MARGIN]
            picks = [c for c in tied if c.family == family]
            if picks and confidence >= 0.6:
                chosen = picks[0]
    if chosen is None:
        names = " or ".join(c.encoding for c in plausible[:3])
        return Verdict("ambiguous", reason=f"ambiguous: {names}; pass --from-encoding", candidates=listed, **where)
    return Verdict(
        "convert",
        chosen.encoding,
        text=chosen.text,
        reason=f"{chosen.encoding} ({chosen.score:.0%} ordinary characters)",
        candidates=listed,
        preview=_line_of(chosen.text, line_no),
        **where,
    )


def _line_of(text: str, line_no: int) -> str:
    lines = text.split("\n")
    return lines[line_no - 1][:160] if 0 < line_no <= len(lines) else ""


def converted_bytes(verdict: Verdict, keep_utf8_bom: bool) -> bytes:
    """UTF-8 bytes for a 'convert' verdict; line endings are whatever the text holds (CRLF stays)."""
    assert verdict.text is not None
    text = verdict.text[1:] if verdict.text.startswith("\ufeff") else verdict.text
    data = text.encode("utf-8")
    if keep_utf8_bom:
        data = b"\xef\xbb\xbf" + data
    if data.decode("utf-8-sig" if keep_utf8_bom else "utf-8") != text:
        raise ValueError("the converted bytes do not decode back to the same text")
    return data
