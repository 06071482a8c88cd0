"""Language evidence: how likely some bytes are as text of a language written in an encoding.

The statistics are chardet 7's own models: for each (language, encoding) a table of how often each
byte pair occurs in real text of that language in that encoding. For the two-byte CJK encodings a
byte pair inside a character is that character's frequency; for the alphabetic ones it is a
character-pair frequency. Read as a Markov chain, log2 P(next byte | byte), two readings of the same
bytes compare by likelihood, on exactly the bytes where they differ.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from decode_doctor.i18n import N_

if TYPE_CHECKING:
    import numpy as np


SMOOTHING = 16.0  # weight of a byte's overall frequency in each conditional probability
UNSEEN = 0.25  # a byte the model never saw counts as a quarter of its rarest

# our codec names → chardet's, where its registry does not resolve ours to a modelled encoding
MODEL_ENCODING = {
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "big5": "big5hkscs",
    "cp950": "big5hkscs",
    "shift_jis": "cp932",
    "euc_jp": "euc_jis_2004",
}
# fmt: off
LANGUAGE_NAMES = {
    "ar": N_("Arabic"), "be": N_("Belarusian"), "bg": N_("Bulgarian"), "br": N_("Breton"), "cs": N_("Czech"), "cy": N_("Welsh"),
    "da": N_("Danish"), "de": N_("German"), "el": N_("Greek"), "en": N_("English"), "eo": N_("Esperanto"), "es": N_("Spanish"),
    "et": N_("Estonian"), "fa": N_("Persian"), "fi": N_("Finnish"), "fr": N_("French"), "ga": N_("Irish"), "gd": N_("Scottish Gaelic"),
    "he": N_("Hebrew"), "hr": N_("Croatian"), "hu": N_("Hungarian"), "id": N_("Indonesian"), "is": N_("Icelandic"), "it": N_("Italian"),
    "ja": N_("Japanese"), "kk": N_("Kazakh"), "ko": N_("Korean"), "lt": N_("Lithuanian"), "lv": N_("Latvian"), "mk": N_("Macedonian"),
    "ms": N_("Malay"), "mt": N_("Maltese"), "nl": N_("Dutch"), "no": N_("Norwegian"), "pl": N_("Polish"), "pt": N_("Portuguese"),
    "ro": N_("Romanian"), "ru": N_("Russian"), "sk": N_("Slovak"), "sl": N_("Slovenian"), "sr": N_("Serbian"), "sv": N_("Swedish"),
    "tg": N_("Tajik"), "th": N_("Thai"), "tr": N_("Turkish"), "uk": N_("Ukrainian"), "ur": N_("Urdu"), "vi": N_("Vietnamese"),
    "zh": N_("Chinese"), "zxx": N_("no particular language"),
}
# fmt: on


@dataclass
class Model:
    """log2 P(second byte | first byte), the counts smoothed towards how often the second byte occurs
    at all, so that a byte seen a few times does not make its rare successors look certain. Evaluated
    only at the pairs a file holds: a full table of floats per model would take 180 MB for all of them."""

    language: str
    encoding: str
    weights: np.ndarray  # uint8[65536], chardet's table (a view, not a copy)
    rows: np.ndarray  # float64[256]: smoothing added to each first byte's total weight
    prior: np.ndarray  # float64[256]: smoothing times how often each byte comes second

    @property
    def language_name(self) -> str:
        return LANGUAGE_NAMES.get(self.language, self.language)

    def log_probability(self, pairs: np.ndarray) -> np.ndarray:
        import numpy as np

        return np.log2((self.weights[pairs] + self.prior[pairs & 0xFF]) / self.rows[pairs >> 8])


@functools.cache
def _languages_by_encoding() -> dict[str, list[str]]:
    try:
        from chardet.models import load_models
    except ImportError:  # chardet < 7 ships no models: no statistics, so every ambiguity is refused
        return {}
    index: dict[str, list[str]] = {}
    for key in load_models():
        language, encoding = key.split("/", 1)
        index.setdefault(encoding, []).append(language)
    return index


@functools.cache
def model_encoding(codec: str) -> str | None:
    """chardet's name for the encoding its models of codec are keyed by, if it has any."""
    if codec in MODEL_ENCODING:
        return MODEL_ENCODING[codec]
    try:
        from chardet.registry import lookup_encoding
    except ImportError:
        return None
    name = lookup_encoding(codec) or codec
    return name if name in _languages_by_encoding() else None


@dataclass
class Family:
    """Every language model of one encoding, stacked, so that a file is scored in all at once."""

    encoding: str
    languages: list[str]
    weights: np.ndarray  # uint8[languages, 65536]
    rows: np.ndarray  # float64[languages, 256]
    prior: np.ndarray  # float64[languages, 256]

    def log_probability(self, pairs: np.ndarray) -> np.ndarray:
        """float64[languages, pairs]."""
        import numpy as np

        return np.log2((self.weights[:, pairs] + self.prior[:, pairs & 0xFF]) / self.rows[:, pairs >> 8])

    def model(self, index: int) -> Model:
        return Model(self.languages[index], self.encoding, self.weights[index], self.rows[index], self.prior[index])


@functools.cache
def family(encoding: str) -> Family:
    import numpy as np
    from chardet.models import load_models

    languages = _languages_by_encoding()[encoding]
    tables = load_models()
    weights = np.stack([np.frombuffer(tables[f"{language}/{encoding}"], dtype=np.uint8) for language in languages])
    square = weights.reshape(len(languages), 256, 256)
    rows, columns = square.sum(axis=2, dtype=np.float64), square.sum(axis=1, dtype=np.float64)
    total = rows.sum(axis=1, keepdims=True)
    prior = np.where(columns > 0, columns / total, UNSEEN / total)
    return Family(encoding, languages, weights, rows + SMOOTHING, SMOOTHING * prior)


def model(language: str, encoding: str) -> Model:
    stacked = family(encoding)
    return stacked.model(stacked.languages.index(language))


def families_for(codecs: Iterable[str]) -> list[Family]:
    """The model families of the encodings that codecs resolve to (codecs that give one text)."""
    return [family(e) for e in dict.fromkeys(e for e in map(model_encoding, codecs) if e)]


@dataclass
class Words:
    """A file's non-ASCII words (distinct, with how often each occurs) as byte pairs for the models."""

    chunks: list[bytes]
    counts: np.ndarray  # occurrences of each chunk
    lengths: np.ndarray  # bytes of each chunk
    pairs: np.ndarray  # every byte pair of every chunk, padded with a space either side
    owner: np.ndarray  # the chunk each pair belongs to
    inner: np.ndarray  # 1.0 for a pair inside a chunk, 0.0 for one with a padding space

    @functools.cached_property
    def distinct(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct pairs, and for each pair which of them it is."""
        import numpy as np

        return np.unique(self.pairs, return_inverse=True)

    @functools.cached_property
    def pair_counts(self) -> np.ndarray:
        """How often each distinct pair occurs in the file's words."""
        import numpy as np

        distinct, which = self.distinct
        return np.bincount(which, weights=self.counts[self.owner], minlength=len(distinct))

    @classmethod
    def of(cls, counted: dict[bytes, int]) -> Words:
        import numpy as np

        chunks = list(counted)
        padded = b"".join(b" " + chunk + b" " for chunk in chunks)
        data = np.frombuffer(padded, dtype=np.uint8).astype(np.int64)
        lengths = np.fromiter((len(chunk) for chunk in chunks), dtype=np.int64, count=len(chunks))
        # pairs run across the whole joined buffer; the pair from one chunk's closing space to the
        # next chunk's opening space is dropped
        starts = np.concatenate(([0], np.cumsum(lengths + 2)[:-1])) if chunks else np.zeros(0, dtype=np.int64)
        keep = np.ones(max(len(data) - 1, 0), dtype=bool)
        keep[(starts + lengths + 1)[:-1]] = False
        pairs = ((data[:-1] << 8) | data[1:])[keep] if len(data) > 1 else np.zeros(0, dtype=np.int64)
        owner = np.repeat(np.arange(len(chunks)), lengths + 1)
        inner = np.ones(len(pairs))
        first = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])) if chunks else np.zeros(0, dtype=np.int64)
        inner[first] = 0.0
        inner[first + lengths] = 0.0
        counts = np.fromiter(counted.values(), dtype=np.float64, count=len(chunks))
        return cls(chunks, counts, lengths, pairs, owner, inner)

    @property
    def size(self) -> float:
        return float(self.counts @ self.lengths)

    def bits(self, model: Model) -> np.ndarray:
        """log2-likelihood of each chunk under model."""
        import numpy as np

        distinct, which = self.distinct
        return np.bincount(self.owner, weights=model.log_probability(distinct)[which], minlength=len(self.chunks))

    def inner_rate(self, model: Model) -> float:
        """log2-likelihood per byte pair inside the words (not at their edges): how much like text of
        the model's language the words are, whatever surrounds them. 0.0 when no word has two bytes."""
        import numpy as np

        inside = float(self.counts @ np.maximum(self.lengths - 1, 0))
        if not inside:
            return 0.0
        distinct, which = self.distinct
        bits = np.bincount(self.owner, weights=model.log_probability(distinct)[which] * self.inner, minlength=len(self.chunks))
        return float(bits @ self.counts) / inside


def best_model(codecs: Iterable[str], words: Words) -> tuple[Model, np.ndarray] | None:
    """The language model under which the words are likeliest, among the models of codecs (which all
    decode the file into one text), and each word's log2-likelihood under it."""
    best: Model | None = None
    best_total = float("-inf")
    distinct, _ = words.distinct
    for stacked in families_for(codecs):
        totals = stacked.log_probability(distinct) @ words.pair_counts
        index = int(totals.argmax())
        if totals[index] > best_total:
            best, best_total = stacked.model(index), float(totals[index])
    return (best, words.bits(best)) if best is not None else None
