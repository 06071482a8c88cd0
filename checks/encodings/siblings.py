"""A model repository as evidence: a file too short to decide alone, decided with the files around it.

Files of one model or dataset tree share an encoding far more often than not. A file whose own
readings could not be told apart (a two-word classes.txt, a config whose only non-ASCII text is one
path) takes the reading of the family its confidently decided siblings read as, when the siblings'
bytes, weighed against each of the file's other readings, carry it over the bar one file must clear.

The file's own bytes keep a veto. Siblings never decide when:
- the file's own language evidence leans to another reading, or another reading wins alone;
- two readings are in one script (cp1252/cp1250, GBK/EUC-JP): the file's own bytes must choose, by
  their language statistics or by the other reading holding an uncommon CJK character;
- the siblings' reading of the file has a word no text has: two alphabets in one word, a symbol or
  quotation mark between letters, a capital inside a lower-case word of a cased alphabet;
- it holds a letter neither the siblings nor their language use (Ukrainian "ї" in a Russian
  repository, "ð" in a French one), or a CJK character outside the common level of the siblings'
  character set (GB2312 level 1, Big5's frequent characters, JIS level 1, KS X 1001 Hangul), or it
  needs a wider codec than the siblings did (HKSCS beside Big5);
- a structured file's readings differ in a key or an id.

What stays possible, and is measured rather than assumed: a file of one to four non-ASCII characters
whose bytes are ordinary text in both encodings (b"\xbf\xc0." is "神." in EUC-JP and "오." in
EUC-KR) takes its repository's encoding, as a person reading it would
(benchmarks/bench_encodings_repositories.py and the property in tests/test_encodings_siblings.py).
"""

from __future__ import annotations

import functools
import json
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from decode_doctor.i18n import Said, _, said

from .readings import CJK_SCRIPTS
from .textenc import STRUCTURED, Readings, Status, Verdict, Where, line_at, line_number, mixed_lines, truncation

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .language import Words
    from .readings import Comparison, Reading

SIBLINGS_READ = 5  # confidently decided siblings whose bytes are weighed, at most
SIBLINGS_NEEDED = 2  # a repository speaks with two files at least: one file decided wrong must not carry others
CONFIDENT_BITS = 20.0  # a sibling counts when its own evidence won by this much (twice one file's bar)
SIBLING_CAP_BITS = 64.0  # one sibling's evidence against a rival, at most (a rival that cannot decode it at all)
# how far a file's own bytes may lean to another reading and still take its siblings' (below the 10
# bits one file needs to decide: a lean that small is noise on a few bytes, not evidence)
OWN_DEFICIT_BITS = 8.0
OWN_DEFICIT_RATE = 2.0  # and at most this per byte of its differing words: one byte leaning 6 bits is evidence
SAME_SCRIPT_LEAD_BITS = 2.0  # a rival in the siblings' own script must be beaten by the file's own bytes
ALPHABET_SHARE = 1e-4  # a letter the siblings' language model sees less often than this is not of its alphabet
CASED = {"latin", "cyrillic", "greek"}
INNER_MARKS = set("'’ʼ·‧‐‑-־׳״・")  # punctuation that does sit between letters of a word


@dataclass
class Sibling:
    """A file of the same repository that its own evidence decided: its bytes, read once, for the
    files beside it that are too short to decide alone."""

    name: str
    encoding: str  # the codec it was decided as
    family: str  # readings.FAMILIES key of that codec
    found: list[Reading]
    words: Words
    _against: dict[tuple[str, ...], tuple[float, int] | None] = field(default_factory=dict, repr=False)

    def against(self, other: Reading) -> tuple[float, int] | None:
        """Its own evidence for its family against the encoding of another file's reading (bits,
        capped, and bytes weighed), computed once per rival encoding; None: it has no reading of
        its own family."""
        from .readings import compare

        key = tuple(other.codecs)
        if key not in self._against:
            theirs, rival = self.reading(self.family), _same_text(self, other)
            if theirs is None:
                self._against[key] = None
            elif rival is None:  # the rival's encoding cannot read this file at all
                self._against[key] = (SIBLING_CAP_BITS, 0)
            else:
                evidence = compare(theirs, rival, self.words)
                self._against[key] = (min(evidence.score, SIBLING_CAP_BITS), evidence.size)
        return self._against[key]

    @staticmethod
    def of(name: str, data: bytes, encoding: str) -> Sibling | None:
        from .readings import family_of, hot_lines, readings

        family = family_of(encoding)
        if family is None:
            return None
        found, words = readings(data, hot_lines(data))
        return Sibling(name, encoding, family, found, words)

    def reading(self, family: str) -> Reading | None:
        from .readings import FAMILIES

        codecs = set(FAMILIES[family])
        return next((r for r in self.found if codecs & set(r.codecs)), None)

    @functools.cached_property
    def letters(self) -> set[str]:
        """The non-ASCII letters of its own reading, case-folded (read once: every undecided file asks)."""
        reading = self.reading(self.family)
        return {c.casefold() for c in reading.hot if ord(c) > 0x7F and c.isalpha()} if reading else set()

    def uses(self, letter: str) -> bool:
        """Whether the language its own reading is in writes letter (its language model sees the
        letter's byte at least ALPHABET_SHARE of the time; single-byte encodings only)."""
        from .language import SMOOTHING
        from .readings import MULTIBYTE_CODECS

        reading = self.reading(self.family)
        if reading is None or reading.model is None or self.encoding in MULTIBYTE_CODECS:
            return False
        try:
            raw = letter.encode(self.encoding)
        except UnicodeEncodeError:
            return False
        return len(raw) == 1 and float(reading.model.prior[raw[0]]) / SMOOTHING >= ALPHABET_SHARE


NO_REASON = Said("")


@dataclass
class Judgement:
    """What the siblings made of a file: a conversion, or why they could not decide it."""

    verdict: Verdict | None
    why: Said = NO_REASON  # why it could not decide: English in the evidence, text() in the message


def _weigh_against(
    ours: Reading, other: Reading, codec: str, words: Words, weighed: list[Sibling], family: str
) -> Judgement | tuple[Said, Comparison]:
    """The file's own bytes and its siblings' weighed for ``ours`` against one other reading: how the
    two are shown and the combined comparison, or the judgement that leaves the file unconverted."""
    from .readings import Comparison, compare

    own = compare(ours, other, words)
    shown = said(
        "{codec} «{word}» against {other} «{other_word}»",
        codec=codec,
        word=_first_word(ours, other),
        other=other.encoding,
        other_word=_first_word(other, ours),
    )
    if _script(ours) == _script(other) and own.score < SAME_SCRIPT_LEAD_BITS and not _has_rare(other):
        # two readings in one script (cp1252/cp1250, GBK/Big5): the file's own bytes must choose
        one_script = said(
            "{shown} are letters of one script, and its own bytes lean to {codec} by {bits} bits only",
            shown=shown,
            codec=codec,
            bits=format(own.score, ".1f"),
        )
        return Judgement(None, one_script)
    if own.score < -min(OWN_DEFICIT_BITS, OWN_DEFICIT_RATE * own.size) or _reversed(own).decisive:
        leans = said(
            "its own bytes lean to {other} by {bits} bits ({shown})", other=other.encoding, bits=format(-own.score, ".1f"), shown=shown
        )
        return Judgement(None, leans)
    combined = Comparison(own.bits, own.size, own.words_for_a, own.words_for_b, own.examples)
    for sibling in weighed:
        evidence = sibling.against(other)
        if evidence is None:
            return Judgement(None, said("{sibling} has no {family} reading", sibling=sibling.name, family=family))
        combined.bits += evidence[0]
        combined.size += evidence[1]
    if not combined.decisive:
        leads = said(
            "with the siblings, {codec} leads {other} by {bits} bits only ({shown})",
            codec=codec,
            other=other.encoding,
            bits=format(combined.score, ".1f"),
            shown=shown,
        )
        return Judgement(None, leads)
    return shown, combined


def decide_with_siblings(
    data: bytes, suffix: str, siblings: list[Sibling], known: Readings | None = None, repository: str = ""
) -> Judgement:
    """A conversion for a file its own evidence could not decide (see the module's rules), or why
    it stays undecided. known: the file's readings from its first look, when they were kept;
    repository: the model directory the siblings are of, as shown to people."""
    from .readings import FAMILIES, hot_spans, readings

    families = {s.family for s in siblings}
    if len(families) != 1:
        return Judgement(None, said("the sibling files do not read as one encoding"))
    family = families.pop()
    spans = list(hot_spans(data))
    if known is not None:  # its first look found it neither mixed nor cut off
        found, words = known.found, known.words
    else:
        lines = [data[start:end] for start, end in spans]
        if not lines or mixed_lines(data, spans) or truncation(data, lines):
            return Judgement(None, said("its own lines are mixed or cut off"))
        found, words = readings(data, lines)
    codecs = set(FAMILIES[family])
    ours = next((r for r in found if codecs & set(r.codecs)), None)
    if ours is None:
        return Judgement(None, said("no {family} codec reads it as clean text", family=family))
    weighed = siblings[:SIBLINGS_READ]
    codec = next((c for c in ours.codecs if c in {s.encoding for s in weighed}), None)
    if codec is None:
        wider = said(
            "it needs {encoding}, a wider codec than the siblings' {codecs}",
            encoding=ours.encoding,
            codecs=_names(s.encoding for s in weighed),
        )
        return Judgement(None, wider)
    odd = _odd(ours, codec, weighed)
    if odd:
        return Judgement(None, said("read as {codec} it {odd}", codec=codec, odd=odd))
    nearest: tuple[Reading, Comparison] | None = None
    beaten: list[tuple[Reading, Said]] = []  # every other reading, with how it is shown
    for other in found:
        if other is ours:
            continue
        weighed_against = _weigh_against(ours, other, codec, words, weighed, family)
        if isinstance(weighed_against, Judgement):
            return weighed_against
        shown, combined = weighed_against
        beaten.append((other, shown))
        if nearest is None or combined.score < nearest[1].score:
            nearest = (other, combined)
    if suffix in STRUCTURED:  # parsed only now, for a file the evidence would convert
        our_fields = _key_fields(ours.text, suffix)
        if our_fields is None:
            return Judgement(None, said("read as {codec} it does not parse as {format}", codec=codec, format=suffix[1:].upper()))
        differing = next((shown for other, shown in beaten if _fields_differ(our_fields, other, suffix)), None)
        if differing is not None:
            return Judgement(None, said("its readings differ in a key or an id ({differing})", differing=differing))
    own_bytes = sum(len(data[start:end].translate(None, bytes(range(0x80)))) for start, end in spans)
    against = _("; against {other} by {bits:.0f} bits together", other=nearest[0].encoding, bits=nearest[1].score) if nearest else ""
    where = Where(bad_offset=spans[0][0], bad_line=line_number(data, spans[0][0]))
    reason = _(
        "its own {count} non-ASCII byte(s) are too few to decide alone; decided with the evidence of {siblings} sibling "
        "file(s) of {repository} ({names}), all {family}{against}",
        count=own_bytes,
        siblings=len(weighed),
        repository=repository or _("its directory"),
        names=_names(s.name for s in weighed),
        family=family,
        against=against,
    )
    preview = line_at(data, where["bad_offset"], codec)
    return Judgement(Verdict(Status.CONVERT, codec, text=ours.text, reason=reason, language=ours.language, preview=preview, **where))


def _reversed(comparison: Comparison) -> Comparison:
    """The same evidence read the other way (compare(b, a) from compare(a, b))."""
    from .readings import Comparison

    return Comparison(-comparison.bits, comparison.size, comparison.words_for_b, comparison.words_for_a)


def _names(names: Iterable[str], shown: int = 3) -> str:
    unique = list(dict.fromkeys(names))
    return ", ".join(unique[:shown]) + (_(" and {count} more", count=len(unique) - shown) if len(unique) > shown else "")


def _first_word(reading: Reading, other: Reading) -> str:
    """Reading's first word that other reads differently."""
    for mine, theirs in zip(reading.words, other.words, strict=True):
        if mine != theirs and mine is not None:
            return mine if len(mine) <= 16 else mine[:15] + "…"
    return "?"


# --- the file's own veto ----------------------------------------------------------------------


def _odd(ours: Reading, codec: str, siblings: list[Sibling]) -> Said | None:
    """What in the siblings' reading of the file shows, on its own bytes, that it is not this text."""
    from .readings import word_looks_real

    odd = next((w for w in ours.words if w is not None and (word_looks_real(w) is False or _odd_word(w))), None)
    if odd is not None:
        return said("has «{word}», a shape no word has", word=odd)
    hot = [c for c in set(ours.hot) if ord(c) > 0x7F]
    rare = next((c for c in hot if _rare(c, codec)), None)
    if rare is not None:
        return said("holds «{char}», outside the common characters of {codec}", char=rare, codec=codec)
    letters = [c for c in hot if c.isalpha() and _letter_script(c) not in CJK_SCRIPTS]
    if letters:
        known = set().union(*(s.letters for s in siblings))
        unknown = next((c for c in letters if c.casefold() not in known and not any(s.uses(c) for s in siblings)), None)
        if unknown is not None:
            return said("holds «{char}», a letter the sibling files' language does not use", char=unknown)
    return None


def _has_rare(reading: Reading) -> bool:
    """Whether a reading holds a CJK character outside the common level of its own character set."""
    return any(_rare(char, reading.encoding) for char in reading.hot if ord(char) > 0x7F)


def _odd_word(word: str) -> bool:
    """A shape real words do not have, beyond word_looks_real: a quotation mark or other punctuation
    between two letters ("u»ou"), a capital after a small letter of a non-ASCII cased alphabet
    ("сОятдёпм"), a lone Hangul jamo beside syllables."""
    for index, char in enumerate(word):
        category = unicodedata.category(char)
        between_letters = 0 < index < len(word) - 1 and word[index - 1].isalpha() and word[index + 1].isalpha()
        if category[0] == "P" and not char.isascii() and char not in INNER_MARKS and between_letters:
            return True
        if index and char.isupper() and not char.isascii() and word[index - 1].islower() and _letter_script(char) in CASED:
            return True
        if 0x3131 <= ord(char) <= 0x318E and len(word) > 1:
            return True
    return False


def _letter_script(char: str) -> str | None:
    from .readings import _script as script_of

    return script_of(char)


def _rare(char: str, codec: str) -> bool:
    """A CJK character outside the common level of codec's character set: what a short label of that
    repository would hold almost never is one."""
    from .readings import family_of

    script = _letter_script(char)
    if script not in CJK_SCRIPTS:
        return False
    try:
        raw = char.encode(codec)
    except UnicodeEncodeError:
        return True
    code = int.from_bytes(raw, "big")
    family = family_of(codec)
    if script == "hangul":
        return family not in ("euc_kr", "johab") or len(char.encode("euc_kr", "replace")) != 2
    if family in ("euc_kr", "johab"):
        return True  # Han and kana in a short Korean label
    if script != "cjk":
        return family not in ("shift_jis", "euc_jp")  # kana outside Japanese
    common = {
        "gbk": (0xB0A1, 0xD7F9),  # GB2312 level 1
        "big5": (0xA440, 0xC67E),  # Big5's frequently used characters
        "shift_jis": (0x889F, 0x9872),  # JIS X 0208 level 1
        "euc_jp": (0xB0A1, 0xCFD3),
    }.get(family or "")
    return common is None or not (common[0] <= code <= common[1] and len(raw) == 2)


def _script(reading: Reading) -> str | None:
    """The script most of a reading's non-ASCII letters are in (counted over its distinct words)."""
    counts: dict[str, int] = {}
    for word in reading.words:
        for char in word or "":
            if ord(char) > 0x7F:
                name = _letter_script(char)
                if name:
                    counts[name] = counts.get(name, 0) + 1
    if counts.keys() & {"hiragana", "katakana", "halfwidth-kana"}:
        return "cjk"
    return max(counts, key=counts.__getitem__) if counts else None


def _same_text(sibling: Sibling, other: Reading) -> Reading | None:
    """The sibling's reading in the rival's encoding (its first codec that reads the sibling)."""
    for codec in other.codecs:
        match = next((r for r in sibling.found if codec in r.codecs), None)
        if match is not None:
            return match
    return None


ID_KEY = re.compile(r"(?:^|_)(?:id|ids|type)$")


MAX_FIELD_NODES = 100_000  # values walked in one structured file, at most (a YAML alias bomb stays small)


def _parsed(text: str, suffix: str) -> list[object] | None:
    """The documents of a structured file as this reading gives them; None when it does not parse
    (or YAML cannot be read here)."""
    try:
        if suffix == ".json":
            return [json.loads(text)]
        if suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        if suffix == ".toml":
            if sys.version_info >= (3, 11):
                import tomllib
            else:  # Python 3.10
                import tomli as tomllib  # pyright: ignore[reportMissingImports]
            return [tomllib.loads(text)]
        import yaml

        return list(yaml.safe_load_all(text))
    except Exception:  # ValueError, TOMLDecodeError, YAMLError, ImportError: not decided on siblings
        return None


def _key_fields(text: str, suffix: str = ".json") -> list[object] | None:
    """A structured file's keys and id-like values that hold non-ASCII text, as this reading gives
    them (JSON, JSON Lines, TOML, YAML: the values carry the evidence, the keys and ids must not
    differ between readings); None when it does not parse. (An ASCII key is the same bytes, read the
    same way, in every reading.)"""
    documents = _parsed(text, suffix)
    if documents is None:
        return None
    found: list[object] = []
    stack: list[tuple[object, int]] = [(document, 0) for document in documents]
    seen: set[int] = set()
    while stack and len(seen) < MAX_FIELD_NODES:
        item, depth = stack.pop()
        if depth > 64 or id(item) in seen:
            continue
        seen.add(id(item))
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        if isinstance(item, dict):
            for key, child in item.items():
                name = str(key)
                if not name.isascii():
                    found.append(("key", name))
                if isinstance(child, str) and not child.isascii() and ID_KEY.search(name):
                    found.append(("id", name, child))
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return None if stack else found  # too many values to compare: not decided on siblings


def _fields_differ(mine: list[object], other: Reading, suffix: str) -> bool:
    """Whether another reading of a structured file differs from ours (mine: _key_fields) in a key or
    an id-like value."""
    if not mine:
        return False  # keys and ids all ASCII: every reading gives them alike, no need to decode it
    return _key_fields(other.text, suffix) != mine
