"""Every way a file's bytes can be read, and which reading, if any, is the text.

A reading is the text some legacy encoding decodes the bytes into, strictly and without a control,
C1, private-use, replacement or unassigned character. Encodings that give the identical text are
one reading, and inside a family of nested code pages (GBK ⊂ GB18030, cp950/Big5 ⊂ Big5-HKSCS,
cp932/Shift_JIS, EUC-KR ⊂ cp949, TIS-620 ⊂ cp874) the first that decodes names it.

Each reading is scored by language statistics (language.py) on the file's non-ASCII words: it takes
the language it reads best as, and a reading that reads as no language (below TEXT_RATE bits per
byte, as CJK bytes read one by one do) is never chosen. A reading is chosen only when it beats every
other reading, on the words where the two differ, by EVIDENCE_BITS of likelihood, where a word that
looks like a word in only one of them ("naïve" against "naÏve", "caf©", "｣825") counts WORD_BITS.
Anything less is refused, with the readings that could not be told apart.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from decode_doctor.i18n import _

from .language import Model, Words, best_model

if TYPE_CHECKING:
    import numpy as np

# family → codecs; the first that decodes cleanly names the family's reading. The Windows code pages
# come first where they map a few punctuation marks differently from the standard (GBK's A1A4 is
# U+00B7 "·", GB2312's U+30FB "・"): files from Windows, and browsers (WHATWG), read them so.
FAMILIES: dict[str, tuple[str, ...]] = {
    "gbk": ("gbk", "gb18030"),
    "big5": ("cp950", "big5", "big5hkscs"),
    "shift_jis": ("cp932", "shift_jis"),
    "euc_jp": ("euc_jp",),
    "euc_kr": ("euc_kr", "cp949"),
    "johab": ("johab",),
    "cp1252": ("cp1252",),
    "iso8859_15": ("iso8859_15",),
    "mac_roman": ("mac_roman",),
    "cp1250": ("cp1250",),
    "iso8859_2": ("iso8859_2",),
    "iso8859_16": ("iso8859_16",),
    "cp1254": ("cp1254",),
    "iso8859_9": ("iso8859_9",),
    "iso8859_3": ("iso8859_3",),
    "cp1257": ("cp1257",),
    "iso8859_13": ("iso8859_13",),
    "iso8859_4": ("iso8859_4",),
    "iso8859_10": ("iso8859_10",),
    "iso8859_14": ("iso8859_14",),
    "cp1251": ("cp1251",),
    "iso8859_5": ("iso8859_5",),
    "koi8_r": ("koi8_r",),
    "koi8_u": ("koi8_u",),
    "cp866": ("cp866",),
    "cp855": ("cp855",),
    "mac_cyrillic": ("mac_cyrillic",),
    "cp1253": ("cp1253",),
    "iso8859_7": ("iso8859_7",),
    "cp1255": ("cp1255",),
    "iso8859_8": ("iso8859_8",),
    "cp1256": ("cp1256",),
    "iso8859_6": ("iso8859_6",),
    "cp1258": ("cp1258",),
    "tis_620": ("tis_620", "iso8859_11", "cp874"),
    "iso8859_1": ("iso8859_1",),
}


def family_of(encoding: str) -> str | None:
    """The family a codec belongs to (its first member names it)."""
    encoding = encoding.lower().replace("-", "_")
    return next((family for family, codecs in FAMILIES.items() if encoding in codecs), None)


MULTIBYTE = ("gb18030", "big5hkscs", "cp932", "euc_jp", "cp949", "johab")  # the widest of each family
MULTIBYTE_CODECS = {"gbk", "gb18030", "cp950", "big5", "big5hkscs", "cp932", "shift_jis", "euc_jp", "euc_kr", "cp949", "johab"}
SAMPLE_BYTES = 65_536  # of non-ASCII words the languages are told from
EVIDENCE_BITS = 10.0  # log2 likelihood ratio one reading must lead another by: about 1000 to 1
EVIDENCE_RATE = 0.25  # and per byte of the differing words, so that a long file's noise cannot add up to it
SHORT_BYTES, SHORT_BITS = 8, 2.0  # below 8 bytes of differing words, 2 bits more per missing byte
WORD_BITS = 8.0  # a differing word that looks like a word in only one reading
VOTED_WORDS = 64  # the most frequent differing words are looked at one by one
TEXT_RATE = -9.0  # bits per byte pair inside words: a reading below this is no language chardet knows
WORD_CANDIDATES = 8  # readings of text, likeliest first, that the word evidence may choose (lexicon.py)

_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\ue000-\uf8ff\ufffd\U000f0000-\U0010ffff]")
_ASCII = bytes(range(0x80))
# A word in bytes: ASCII letters and non-ASCII bytes, each non-ASCII byte with the byte after it (a
# trail byte of these encodings is never a space or a control), so no character is cut in two.
_BYTE_WORD = re.compile(rb"(?:[A-Za-z]|[\x80-\xff][\x21-\xff]?)+")
_ESCAPE = re.compile(rb"(?<![\x80-\xff])\\[nrt]")  # "\n" in a JSON string: its "n" is not part of a word


@dataclass
class Reading:
    encoding: str  # the codec that names it
    hot: str  # the file's non-ASCII lines, decoded (the rest is ASCII, the same in every reading)
    words: list[str | None]  # the file's non-ASCII words (Words.chunks) as this reading decodes them
    source: bytes = field(default=b"", repr=False)
    also: list[str] = field(default_factory=list)  # other codecs giving the same text
    model: Model | None = None  # the language it reads best as
    bits: np.ndarray | None = None  # log2-likelihood of each word under model
    rate: float = float("-inf")  # log2-likelihood per byte of all the words
    inner_rate: float = float("-inf")  # per byte pair inside the words (Words.inner_rate)

    _text: str | None = field(default=None, repr=False)

    @property
    def text(self) -> str:
        """The whole file decoded (only the reading chosen is ever decoded whole)."""
        if self._text is None:
            self._text = self.source.decode(self.encoding)
        return self._text

    @property
    def codecs(self) -> list[str]:
        return [self.encoding, *self.also]

    @property
    def language(self) -> str:
        return self.model.language_name if self.model else "no known language"


@functools.lru_cache(maxsize=1 << 16)
def _unassigned(char: str) -> bool:
    return unicodedata.category(char) == "Cn"


def forbidden(text: str) -> str | None:
    """Why the text cannot be a real text: a control, C1, private-use, replacement or unassigned character."""
    bad = _FORBIDDEN.search(text)
    if bad:
        code = ord(bad.group())
        kind = _("control character") if code < 0x80 else _("C1 control") if code <= 0x9F else _("private-use or replacement character")
        return _("{kind} U+{code:04X}", kind=kind, code=code)
    if not text.isascii():
        for char in set(text):
            if ord(char) > 0x7F and _unassigned(char):
                return _("unassigned U+{char:04X}", char=ord(char))
    return None


@functools.cache
def _bad_bytes(codec: str) -> frozenset[int] | None:
    """For an ASCII-compatible one-byte code page, the bytes it cannot read as text; None for others."""
    if codec in MULTIBYTE_CODECS or bytes(range(0x80)).decode(codec) != bytes(range(0x80)).decode("ascii"):
        return None
    bad = set()
    for byte in range(0x80, 0x100):
        try:
            char = bytes((byte,)).decode(codec)
        except UnicodeDecodeError:
            bad.add(byte)
            continue
        if len(char) != 1 or forbidden(char):
            bad.add(byte)
    return frozenset(bad)


def hot_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each line holding a non-ASCII byte; the ASCII bulk is scanned once, vectorised."""
    import numpy as np

    if data.isascii():
        return []
    high = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) >= 0x80)
    spans = []
    index = 0
    while index < len(high):
        position = int(high[index])
        start = data.rfind(b"\n", 0, position) + 1
        end = data.find(b"\n", position)
        end = len(data) if end < 0 else end
        spans.append((start, end))
        index = int(np.searchsorted(high, end, side="right"))
    return spans


def hot_lines(data: bytes) -> list[bytes]:
    """The lines holding non-ASCII bytes: a newline is never a second byte in these encodings, so
    each line decodes on its own, and the ASCII bulk of a large vocab is not decoded 40 times."""
    return [data[start:end] for start, end in hot_spans(data)]


def words(lines: list[bytes], limit: int = SAMPLE_BYTES) -> Words:
    """The distinct non-ASCII words of lines (see _BYTE_WORD), counted, up to limit bytes of them."""
    found: dict[bytes, int] = {}
    size = 0
    for line in lines:
        if b"\\" in line:
            line = _ESCAPE.sub(b"  ", line)
        for match in _BYTE_WORD.finditer(line):
            chunk = match.group()
            if chunk.isascii():
                continue
            if chunk in found:
                found[chunk] += 1
            else:
                found[chunk] = 1
                size += len(chunk)
        if size >= limit:
            break
    return Words.of(found)


def _decoded(chunks: list[bytes], codec: str) -> list[str | None]:
    texts: list[str | None] = []
    for chunk in chunks:
        try:
            texts.append(chunk.decode(codec))
        except UnicodeDecodeError:  # a word cut inside a character (see _BYTE_WORD)
            texts.append(None)
    return texts


def readings(data: bytes, lines: list[bytes] | None = None) -> tuple[list[Reading], Words]:
    """Every clean reading of data, one per distinct text, each with the language it reads best as;
    and the file's non-ASCII words they were scored on."""
    lines = hot_lines(data) if lines is None else lines
    sample = b"\n".join(lines)
    found: dict[str, Reading] = {}
    chunks = words(lines)
    present = frozenset(sample.translate(None, _ASCII))
    for codecs in FAMILIES.values():
        for codec in codecs:
            bad_bytes = _bad_bytes(codec)
            if bad_bytes is not None and not bad_bytes.isdisjoint(present):
                continue  # a byte this one-byte code page leaves undefined or reads as a control
            try:
                text = sample.decode(codec)
            except UnicodeDecodeError:
                continue
            if bad_bytes is None and forbidden(text):
                continue  # a wider codec may map those bytes to characters (cp874's curly quotes)
            if text in found:
                found[text].also.append(codec)
            else:
                found[text] = Reading(codec, text, _decoded(chunks.chunks, codec), data)
            break
    size = chunks.size or 1.0
    for reading in found.values():
        best = best_model(reading.codecs, chunks)
        if best:
            reading.model, reading.bits = best
            reading.rate = float(reading.bits @ chunks.counts) / size
            reading.inner_rate = chunks.inner_rate(reading.model)
    return list(found.values()), chunks


# --- comparing two readings on the words where they differ ---------------------------------------

_WORD = re.compile(r"[^\s!-@\[-`{-~]+")  # letters and anything non-ASCII: ASCII punctuation, digits and spaces cut words


@functools.lru_cache(maxsize=1 << 16)
def _script(char: str) -> str | None:
    if char.isascii():
        return "latin" if char.isalpha() else None
    try:
        name = unicodedata.name(char)
    except ValueError:
        return "unknown"
    if unicodedata.category(char)[0] not in "LM":
        return None
    if name.startswith("HALFWIDTH KATAKANA"):
        return "halfwidth-kana"
    for script in ("LATIN", "CYRILLIC", "GREEK", "HEBREW", "ARABIC", "THAI", "HANGUL", "HIRAGANA", "KATAKANA", "CJK"):
        if name.startswith(script) or f" {script} " in f" {name} ":
            return script.lower()
    return "other"


CJK_SCRIPTS = {"cjk", "hiragana", "katakana", "halfwidth-kana", "hangul"}


@functools.lru_cache(maxsize=1 << 17)
def word_looks_real(word: str) -> bool | None:
    """For a word of an alphabetic script: one script, no symbol touching a letter ("caf©",
    "разбилс€"), no accented capital inside a lower-case word ("naÏve"). None (no opinion) for CJK
    text, which has no spaces between words and mixes scripts in ordinary sentences, and for symbols."""
    scripts = {s for s in map(_script, word) if s}
    if scripts & CJK_SCRIPTS or not scripts:
        return None
    if len(scripts) > 1:
        return False  # "cafщ", "Ωmega": two alphabets in one word
    for index, char in enumerate(word):
        if char.isascii() or unicodedata.category(char) not in ("Sm", "Sc", "Sk", "So", "No"):
            continue
        neighbours = word[max(index - 1, 0) : index] + word[index + 1 : index + 2]
        if any(n.isalpha() for n in neighbours):
            return False
    seen_lower = False
    for char in word:
        if char.islower():
            seen_lower = True
        elif seen_lower and char.isupper() and not char.isascii() and unicodedata.decomposition(char):
            return False
    return True


@dataclass
class Comparison:
    """The evidence for reading a against reading b, on the words where they differ."""

    bits: float = 0.0  # log2 of how much likelier those words are in a's language than in b's
    size: int = 0  # bytes of those words
    words_for_a: int = 0  # differing words that look like words only in a
    words_for_b: int = 0
    examples: list[tuple[str, str]] = field(default_factory=list)  # a few differing words, a's first

    @property
    def score(self) -> float:
        return self.bits + WORD_BITS * (self.words_for_a - self.words_for_b)

    @property
    def decisive(self) -> bool:
        # a few bytes give noisy likelihoods, and the best of thirty readings is partly luck: short
        # evidence must lead by more
        needed = EVIDENCE_BITS + SHORT_BITS * max(0, SHORT_BYTES - self.size)
        return self.score >= needed and self.score >= EVIDENCE_RATE * self.size


def compare(a: Reading, b: Reading, found: Words) -> Comparison:
    """The evidence for a against b on the words the two read differently."""
    import numpy as np

    comparison = Comparison()
    differing = [i for i, (x, y) in enumerate(zip(a.words, b.words, strict=True)) if x != y]
    if not differing:
        return comparison
    index = np.array(differing)
    counts = found.counts[index]
    if a.bits is not None and b.bits is not None:
        comparison.bits = float((a.bits[index] - b.bits[index]) @ counts)
    comparison.size = int(counts @ found.lengths[index])
    for i in index[np.argsort(-counts, kind="stable")[:VOTED_WORDS]]:
        word_a, word_b = a.words[i], b.words[i]
        if word_a is None or word_b is None:
            continue
        if len(comparison.examples) < 6:
            comparison.examples.append((word_a, word_b))
        real_a, real_b = word_looks_real(word_a), word_looks_real(word_b)
        if real_a is None or real_b is None or real_a == real_b:
            continue
        if real_a:
            comparison.words_for_a += int(found.counts[i])
        else:
            comparison.words_for_b += int(found.counts[i])
    return comparison


@dataclass
class Choice:
    reading: Reading | None
    why: str
    rivals: list[tuple[Reading, Comparison]] = field(default_factory=list)  # readings it could not be told from
    margin: float = float("inf")  # bits by which the chosen reading beat its nearest rival
    words: dict[str, object] | None = None  # a reading chosen by its words: the word evidence (lexicon.WordEvidence.english)


def choose(candidates: list[Reading], found: Words) -> Choice:
    """The one reading that beats every other, or none, with the readings that could not be told apart."""
    ranked = sorted(candidates, key=lambda r: -r.rate)
    if not ranked:
        return Choice(None, _("no legacy encoding decodes it into clean text"))
    textual = [r for r in ranked if r.inner_rate >= TEXT_RATE]
    if not textual:
        best = ranked[0]
        return Choice(
            None,
            _(
                "no encoding reads it as text of a known language (closest: {encoding} as {language})",
                encoding=best.encoding,
                language=_(best.language),
            ),
        )
    first: Choice | None = None
    for reading in textual[:3]:
        if _misshapen(reading, found):
            continue  # its words have shapes no text has ("дFбубубу"): however its bytes score, no winner
        rivals, nearest = [], None
        for other in ranked:
            if other is reading:
                continue
            comparison = compare(reading, other, found)
            if not comparison.decisive:
                rivals.append((other, comparison))
            elif nearest is None or comparison.score < nearest[1].score:
                nearest = (other, comparison)
        if not rivals:
            return Choice(reading, _why(reading, nearest), margin=nearest[1].score if nearest else float("inf"))
        first = first or Choice(None, _("the readings cannot be told apart"), [(reading, Comparison()), *rivals])
    refused = first or Choice(None, _("the readings cannot be told apart"), [(r, Comparison()) for r in textual[:3]])
    from .lexicon import by_words

    return by_words(ranked, textual, found, refused)


def _misshapen(reading: Reading, found: Words) -> bool:
    """Whether most of a reading's most frequent words that word_looks_real has an opinion on are
    not words (two alphabets in one word, a symbol between letters). Not asked of a CJK reading, whose
    text mixes symbols, Latin and its own scripts in ordinary words ("♡♥KINA")."""
    import numpy as np

    voted = [(reading.words[i], found.counts[i]) for i in np.argsort(-found.counts, kind="stable")[:VOTED_WORDS]]
    if any(_script(char) in CJK_SCRIPTS for word, _ in voted if word for char in word):
        return False
    if len(voted) <= FEW_WORDS and any(word and _capitals_then_small(word) for word, _ in voted):
        return True  # a file of a few words: one word cased as no word is ("ЗГФе", GB2312 read as ISO-8859-5) decides
    real = unreal = 0.0
    for word, count in voted:
        looks = word_looks_real(word) if word is not None else None
        if looks is True:
            real += count
        elif looks is False:
            unreal += count
    return bool(unreal > 0 and unreal >= real)


FEW_WORDS = 4  # a file this short has too few words for its misshapen ones to be outvoted


def _capitals_then_small(word: str) -> bool:
    """Two or more capitals of a non-ASCII cased alphabet, then a small letter: a shape ordinary words
    lack (an inflected acronym, "ВУЗе", is the exception a short file can afford to refuse)."""
    capitals = 0
    for char in word:
        if char.isupper() and not char.isascii():
            capitals += 1
        elif char.islower():
            return capitals >= 2
        else:
            capitals = 0
    return False


def _why(reading: Reading, nearest: tuple[Reading, Comparison] | None) -> str:
    if nearest is None:
        return _("reads as {language}; no other encoding decodes it cleanly", language=_(reading.language))
    other, comparison = nearest
    shown = _(", ").join(_("{a} not {b}", a=_short(a), b=_short(b)) for a, b in comparison.examples[:2])
    return _(
        "reads as {language}; the nearest other reading, {encoding}, loses by {score:.0f} bits ({shown})",
        language=_(reading.language),
        encoding=other.encoding,
        score=comparison.score,
        shown=shown,
    )


def _short(word: str, limit: int = 16) -> str:
    return word if len(word) <= limit else word[: limit - 1] + "…"
