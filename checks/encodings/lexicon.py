"""Word evidence: the words two readings of the same bytes make, looked up in word-frequency lexicons.

The byte-pair statistics of language.py cannot separate two readings that differ in one letter of
one script ("Modèle" in windows-1252, "Modčle" in windows-1250): both letters are common in their
languages. A person decides at a glance, because only one of them is a word. This module asks
wordfreq (https://github.com/rspeer/wordfreq, the word frequencies of some 40 languages from
Wikipedia, subtitles, books, news and the web) the same question: each differing word of each reading
is looked up in the lexicons of the languages that reading's encoding is written in (the few its
bytes read best as), and its Zipf frequency (log10 of its occurrences per billion words) is the
evidence. CJK text has no spaces: its runs are cut greedily into the longest words the lexicon
holds, and a run with a character no word of the lexicon holds is not a word.

A reading decides against another only when its differing words are words (Zipf ≥ ZIPF_REAL) where
the other's are not words at all (absent from every lexicon consulted), by WORDS_MARGIN Zipf in all,
and no differing word points the other way; two real words (or two non-words) are a tie, and the file
stays refused. wordfreq is an optional dependency (`pip install 'decode-doctor[words]'`): without it
every such file is refused as before, and the refusal names the extra. It is imported only when a
file's readings are otherwise undecided: a check of UTF-8 files never loads it.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from decode_doctor.i18n import _

from .language import LANGUAGE_NAMES, families_for

if TYPE_CHECKING:
    import numpy as np

    from .language import Words
    from .readings import Choice, Comparison, Reading

EXTRA = "words"  # pip install 'decode-doctor[words]'
ZIPF_REAL = 2.5  # a word: at least this frequent (about 3 in ten million words) in its language
WORDS_MARGIN = 3.5  # Zipf, summed over the differing words where one reading is a word and the other none (calibrated: README)
LANGUAGES_CONSULTED = 3  # a reading's words are looked up in the languages its bytes read best as, at most
CJK_LONGEST = 6  # characters of the longest CJK word looked for
VOTED_WORDS = 64  # the most frequent differing words are looked up
# chardet's language codes → wordfreq's, where they differ (Norwegian Bokmål, Serbo-Croatian in Latin script)
WORDFREQ_LANGUAGE = {"no": "nb", "hr": "sh", "bs": "sh"}
CJK_LANGUAGES = {"zh", "ja", "ko"}
INFERRED_BREAK_ZIPF = 1.0  # wordfreq's INFERRED_SPACE_FACTOR (10) for a word break inside a CJK run
ZIPF_NONE_CJK = 1.5  # a CJK run less frequent than this, cut into the words it holds, is no word


def available() -> bool:
    """Whether wordfreq is installed (without importing it)."""
    try:
        return importlib.util.find_spec("wordfreq") is not None
    except (ImportError, ValueError):  # a broken install, or one a test hid
        return False


@functools.cache
def _wordfreq_languages() -> frozenset[str]:
    import wordfreq

    return frozenset(wordfreq.available_languages("best"))


def _wordfreq_name(language: str) -> str | None:
    name = WORDFREQ_LANGUAGE.get(language, language)
    return name if name in _wordfreq_languages() else None


@dataclass
class Lexicon:
    """One language's wordfreq list, held compactly: the hash of each word (sorted) and its frequency
    band. A dict of the 700,000 words of a large list takes some 100 MB of Python objects; this takes
    10 bytes a word. hash() of a str is fixed within a process, and the table lives only there."""

    hashes: np.ndarray  # int64, sorted
    bands: np.ndarray  # uint16: centibels below 1 (wordfreq's bucket index) of each word

    def frequency(self, word: str) -> float:
        import numpy as np

        key = hash(word)
        index = int(np.searchsorted(self.hashes, key))
        if index == len(self.hashes) or int(self.hashes[index]) != key:
            return 0.0
        return float(10.0 ** (-int(self.bands[index]) / 100.0))


@functools.cache
def _lexicon(language: str) -> Lexicon:
    """wordfreq's list of a language (its large list where there is one), read once per process."""
    import numpy as np
    import wordfreq

    buckets = wordfreq.read_cBpack(wordfreq.available_languages("best")[language])
    sizes = [len(bucket) for bucket in buckets]
    hashes = np.fromiter((hash(word) for bucket in buckets for word in bucket), dtype=np.int64, count=sum(sizes))
    bands = np.repeat(np.arange(len(buckets), dtype=np.uint16), sizes)
    order = np.argsort(hashes, kind="stable")
    return Lexicon(hashes[order], bands[order])


@functools.cache
def _simplified() -> dict[int, str]:
    """wordfreq's Traditional → Simplified character map (its Chinese lexicon is keyed in Simplified);
    read from its data, without its jieba tokenizer."""
    import msgpack
    from wordfreq.util import data_path

    with gzip.open(data_path("_chinese_mapping.msgpack.gz")) as handle:
        mapping: dict[int, str] = msgpack.load(handle, raw=False, strict_map_key=False)
    return mapping


def _zipf(frequency: float) -> float:
    import math

    return round(math.log10(frequency) + 9, 2) if frequency > 0 else 0.0


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return (
        0x3040 <= code <= 0x30FF  # hiragana, katakana
        or 0x3400 <= code <= 0x9FFF  # CJK unified ideographs
        or 0xAC00 <= code <= 0xD7A3  # Hangul syllables
        or 0x1100 <= code <= 0x11FF  # Hangul jamo
        or 0x3130 <= code <= 0x318F  # Hangul compatibility jamo
        or 0xF900 <= code <= 0xFAFF  # compatibility ideographs
        or 0xFF66 <= code <= 0xFF9F  # half-width katakana
    )


def _cjk_zipf(text: str, language: str) -> tuple[float, bool] | None:
    """The Zipf of a CJK word or sentence as wordfreq combines the words it is cut into (1/f = 1/f1 +
    1/f2 + …, and a tenth for each word break it had to infer, as wordfreq does for Chinese): its CJK
    runs cut greedily into the longest words the lexicon holds. 0.0 when a character is in no word
    of the lexicon; None when it holds no CJK character. And whether the lexicon cut a run of two or
    more characters into single characters only: characters that make no word together."""
    lexicon = _lexicon(language)
    if language == "zh":
        text = text.translate(_simplified())
    runs: list[str] = []
    current = ""
    for char in text:
        if _is_cjk(char):
            current += char
        elif current:
            runs.append(current)
            current = ""
    if current:
        runs.append(current)
    if not runs:
        return None
    inverse, tokens, longest = 0.0, 0, 1
    for run in runs:
        start = 0
        while start < len(run):
            for end in range(min(len(run), start + CJK_LONGEST), start, -1):
                frequency = lexicon.frequency(run[start:end])
                if frequency:
                    inverse += 1.0 / frequency
                    tokens += 1
                    longest = max(longest, end - start)
                    start = end
                    break
            else:
                return 0.0, False
    singles = longest == 1 and tokens > len(runs)
    return max(_zipf(1.0 / inverse) - (tokens - len(runs)) * INFERRED_BREAK_ZIPF, 0.0), singles


@functools.lru_cache(maxsize=1 << 16)
def word_zipf(word: str, language: str) -> tuple[float, bool] | None:
    """The Zipf frequency of a word in a language (wordfreq's code), 0.0 for no word of its lexicon,
    and for CJK whether its characters were cut into single ones (_cjk_zipf); None (no opinion) for a
    word without letters."""
    if not any(unicodedata.category(char)[0] == "L" for char in word):
        return None
    if language in CJK_LANGUAGES:
        return _cjk_zipf(word, language)
    if any(_is_cjk(char) for char in word):
        return 0.0, False  # a Han or kana character in a word of an alphabetic language
    from .readings import word_looks_real

    if word_looks_real(word) is False:
        return 0.0, False  # two alphabets in one word, a symbol between letters: no word, whatever its pieces are
    return _alphabetic_zipf(word, language), False


def _alphabetic_zipf(word: str, language: str) -> float:
    """As wordfreq.zipf_frequency: the word cut into wordfreq's tokens (its own tokenizer and
    normalisation: case, diacritics, curly quotes), their frequencies combined (1/f = 1/f1 + 1/f2 + …);
    0.0 when a token is missing. Looked up in the compact table, not wordfreq's cached dicts."""
    from wordfreq.tokens import lossy_tokenize

    tokens = lossy_tokenize(word, language)
    if not tokens:
        return 0.0
    lexicon = _lexicon(language)
    inverse = 0.0
    for token in tokens:
        frequency = lexicon.frequency(token)
        if not frequency:
            return 0.0
        inverse += 1.0 / frequency
    return _zipf(1.0 / inverse)


@dataclass
class Looked:
    """One reading's word in the lexicons of its languages."""

    word: str
    zipf: float | None  # the highest over the languages consulted; None: no letters
    singles: bool = False  # CJK cut into single characters only, in every language consulted (_cjk_zipf)
    language: str | None = None  # chardet's code of the language it is a word of (the first, if none)
    languages: list[str] = field(default_factory=list)  # chardet's codes of the languages consulted


def languages_of(reading: Reading, found: Words) -> list[str]:
    """The languages (chardet's codes) a reading's words are looked up in: those its bytes read best
    as, among the language models of its encodings that wordfreq has a lexicon of."""
    import numpy as np

    distinct = found.distinct[0]
    scored: list[tuple[float, str]] = []
    for stacked in families_for(reading.codecs):
        totals = stacked.log_probability(distinct) @ found.pair_counts
        for index in np.argsort(-totals):
            scored.append((float(totals[index]), stacked.languages[int(index)]))
    ranked = [language for _bits, language in sorted(scored, key=lambda pair: -pair[0])]
    chosen = list(dict.fromkeys(language for language in ranked if _wordfreq_name(language)))
    return chosen[:LANGUAGES_CONSULTED]


def look_up(word: str, languages: list[str]) -> Looked:
    """A word in the lexicons of languages: the one it is likeliest in (a whole word before one cut
    into single characters)."""
    best: tuple[tuple[bool, float], str, bool] | None = None
    for language in languages:
        name = _wordfreq_name(language)
        if name is None:
            continue
        found = word_zipf(word, name)
        if found is None:
            return Looked(word, None, False, None, languages)
        zipf, singles = found
        if best is None or (not singles, zipf) > best[0]:
            best = ((not singles, zipf), language, singles)
    if best is None:
        return Looked(word, None, False, None, languages)
    return Looked(word, best[0][1], best[2], best[1], languages)


@dataclass
class WordEvidence:
    """The words of reading a against reading b where they differ: a decides when lead ≥ WORDS_MARGIN
    and nothing points to b."""

    for_a: list[tuple[Looked, Looked]] = field(default_factory=list)  # a is a word, b none
    for_b: list[tuple[Looked, Looked]] = field(default_factory=list)  # b is a word, a none
    ties: list[tuple[Looked, Looked]] = field(default_factory=list)  # both words
    weak: list[tuple[Looked, Looked]] = field(default_factory=list)  # one a word, the other rare but not none
    lead: float = 0.0  # Zipf of a's words in for_a, each counted as often as it occurs
    unlisted: tuple[str, str] | None = None  # (encoding, language) of a reading with no lexicon to look it up in

    @property
    def decisive(self) -> bool:
        return self.lead >= WORDS_MARGIN and not self.for_b and len(self.ties) < len(self.for_a)

    def shown(self) -> str:
        """The evidence as people read it: "Modèle: French, Zipf 4.1; Modčle: not a word in Czech, Slovak"."""
        pairs = self.for_a[:2] or self.ties[:1] or self.for_b[:1]
        return _("; ").join(_("{a}; {b}", a=_said(a), b=_said(b)) for a, b in pairs)

    def why_not(self) -> str:
        """Why it does not decide, as people read it."""
        if self.unlisted is not None:
            encoding, language = self.unlisted
            return _("no word list of {language} ({encoding}) to look its words up in", language=_language(language), encoding=encoding)
        if self.for_b:
            a, b = self.for_b[0]
            return _("the words point both ways ({b}; {a})", b=_said(b), a=_said(a))
        if self.ties and len(self.ties) >= len(self.for_a):
            a, b = self.ties[0]
            return _("both readings are words ({a}; {b})", a=_said(a), b=_said(b))
        if not self.for_a and self.weak:
            a, b = self.weak[0]
            return _("one reading makes frequent words, the other rare ones that still exist ({a}; {b})", a=_said(a), b=_said(b))
        if not self.for_a:
            return _("neither reading's words are frequent words of their languages")
        return _("its words lead by Zipf {lead:.1f} only ({shown})", lead=self.lead, shown=self.shown())

    def english(self) -> dict[str, object]:
        """The evidence for a finding's JSON."""

        def entry(looked: Looked) -> dict[str, object]:
            return {"word": looked.word, "zipf": looked.zipf, "language": looked.language, "languages": looked.languages}

        return {
            "lead_zipf": round(self.lead, 2),
            "for": [[entry(a), entry(b)] for a, b in self.for_a[:6]],
            "against": [[entry(a), entry(b)] for a, b in self.for_b[:6]],
            "ties": [[entry(a), entry(b)] for a, b in self.ties[:6]],
        }


def _language(code: str | None) -> str:
    return _(LANGUAGE_NAMES.get(code, code)) if code else "?"


def _said(looked: Looked) -> str:
    if looked.zipf and looked.singles:
        return _("«{word}»: characters that make no {language} word together", word=looked.word, language=_language(looked.language))
    if looked.zipf:
        return _("«{word}»: {language}, Zipf {zipf:.1f}", word=looked.word, language=_language(looked.language), zipf=looked.zipf)
    names = _(", ").join(_language(code) for code in looked.languages)
    return _("«{word}»: not a word in {languages}", word=looked.word, languages=names)


def _real(looked: Looked) -> bool:
    """A word: at least ZIPF_REAL, and for CJK not characters that make no word together."""
    return looked.zipf is not None and looked.zipf >= ZIPF_REAL and not looked.singles


def _none(looked: Looked, rival: Looked) -> bool:
    """Not a word: absent from every lexicon consulted; for CJK, a run whose words, cut as wordfreq
    would, are rarer than ZIPF_NONE_CJK, or, against a rival that is CJK too, two or more characters
    the lexicon holds only one by one. Measured on the corpora: no wrong CJK reading of two characters
    or more made a word the lexicon holds (0 of 6,283), while one true reading in eight is cut into
    single characters (Korean endings, Cantonese, Japanese particles): against a word of an alphabet
    that is no evidence."""
    if looked.zipf is None:
        return False
    if _has_cjk(looked.word):
        return looked.zipf < ZIPF_NONE_CJK or (looked.singles and _has_cjk(rival.word))
    return looked.zipf == 0.0


def _has_cjk(word: str) -> bool:
    return any(_is_cjk(char) for char in word)


def compare_words(a: Reading, b: Reading, found: Words) -> WordEvidence:
    """The word evidence for reading a against reading b, on the words they read differently."""

    evidence = WordEvidence()
    languages_a, languages_b = languages_of(a, found), languages_of(b, found)
    if not languages_a or not languages_b:
        unlisted = b if languages_a else a
        evidence.unlisted = (unlisted.encoding, unlisted.model.language if unlisted.model else "?")
        return evidence
    differing = [i for i, (x, y) in enumerate(zip(a.words, b.words, strict=True)) if x != y and x is not None and y is not None]
    differing.sort(key=lambda i: -found.counts[i])
    for i in differing[:VOTED_WORDS]:
        word_a, word_b = a.words[i], b.words[i]
        assert word_a is not None and word_b is not None
        looked_a, looked_b = look_up(word_a, languages_a), look_up(word_b, languages_b)
        if looked_a.zipf is None or looked_b.zipf is None:
            continue  # a symbol, not a word: no opinion
        count = int(found.counts[i])
        real_a, real_b = _real(looked_a), _real(looked_b)
        if real_a and real_b:
            evidence.ties.append((looked_a, looked_b))
        elif real_a and _none(looked_b, looked_a):
            evidence.for_a.append((looked_a, looked_b))
            evidence.lead += count * looked_a.zipf
        elif real_b and _none(looked_a, looked_b):
            evidence.for_b.append((looked_a, looked_b))
        elif real_a or real_b:
            evidence.weak.append((looked_a, looked_b))
    return evidence


def by_words(ranked: list[Reading], textual: list[Reading], found: Words, refused: Choice) -> Choice:
    """The second look at readings their bytes could not tell apart (readings.choose): the words they
    make. A reading is chosen when its words are words where every rival its bytes did not beat makes
    none, and those bytes do not read decisively as the rival; otherwise the refusal stands, and says
    why the words did not decide it."""
    from .readings import WORD_CANDIDATES, Choice, _misshapen, compare

    if not refused.rivals:
        return refused
    if not available():
        why = _(
            "{why}; the words they make were not looked up (install the {extra} extra: pip install 'decode-doctor[{extra}]')",
            why=refused.why,
            extra=EXTRA,
        )
        return Choice(None, why, refused.rivals)
    why_not: list[str] = []
    said_for: set[frozenset[str]] = set()
    for reading in textual[:WORD_CANDIDATES]:
        if _misshapen(reading, found):
            continue
        nearest: tuple[Reading, Comparison, WordEvidence] | None = None
        for other in ranked:
            if other is reading:
                continue
            comparison = compare(reading, other, found)
            if comparison.decisive:
                continue
            if compare(other, reading, found).decisive:
                break  # its bytes read decisively as the other: words never overrule them
            words = compare_words(reading, other, found)
            if not words.decisive:
                pair = frozenset((reading.encoding, other.encoding))
                if not words.for_b and pair not in said_for:  # not a reading the other's words beat: why this one was not chosen
                    said_for.add(pair)
                    why_not.append(
                        _("{reading} against {other}: {why}", reading=reading.encoding, other=other.encoding, why=words.why_not())
                    )
                break
            if nearest is None or words.lead < nearest[2].lead:
                nearest = (other, comparison, words)
        else:
            if nearest is None:
                continue
            other, comparison, words = nearest
            why = _(
                "reads as {language}; its bytes do not tell it from {encoding}, its words do: {shown}",
                language=_(reading.language),
                encoding=other.encoding,
                shown=words.shown(),
            )
            return Choice(reading, why, margin=comparison.score, words=words.english())
    if not why_not:
        return refused
    why = _("{why}; nor do their words: {why_not}", why=refused.why, why_not=_("; ").join(why_not[:2]))
    return Choice(None, why, refused.rivals)
