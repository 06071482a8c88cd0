"""The word evidence's margin, measured on short files cut from text nobody here wrote.

    python benchmarks/bench_encodings_words.py [--cache DIR] [--per-file N] [--margin ZIPF] [--without-words]

The text: chardet 5.2.0's and charset-normalizer 3.5.3's labelled test files (downloaded with pip at
run time by bench_encodings_corpora.py's fetch). From each legacy file, its first N distinct words
holding a non-ASCII letter, each written alone in the file's encoding twice: on a line of its own and
as a JSON value ({"name": "…"}); a word its label writes as UTF-8-valid bytes is left out. Each is
judged as one file: converted right, refused, or silent corruption, per encoding family, and how many
the words decided (checks/encodings/lexicon.py) and how many of those were wrong. --margin sets
lexicon.WORDS_MARGIN for the run; --without-words judges as the default install does.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_encodings_corpora import as_browsers_read, family, fetch, labelled

from decode_doctor.checks.encodings import lexicon
from decode_doctor.checks.encodings.textenc import Status, decide

WORD = re.compile(r"[^\W\d_]*[^\x00-\x7f][^\W\d_]*")  # a word holding a non-ASCII letter


def _words(text: str, limit: int) -> list[str]:
    seen: dict[str, None] = {}
    for match in WORD.finditer(text):
        word = match.group()
        if 0 < len(word) <= 20 and word.isprintable():
            seen[word] = None
            if len(seen) == limit:
                break
    return list(seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "decode-doctor" / "corpora")
    parser.add_argument("--per-file", type=int, default=20, help="distinct words taken from each labelled file")
    parser.add_argument("--margin", type=float, default=None, help=f"Zipf a reading's words must lead by (default {lexicon.WORDS_MARGIN})")
    parser.add_argument("--without-words", action="store_true", help="judge as the default install does, without the lexicon")
    args = parser.parse_args()
    if args.margin is not None:
        lexicon.WORDS_MARGIN = args.margin
    if args.without_words:
        lexicon.available = lambda: False
    samples = [s for s in labelled(fetch(args.cache)) if s.truth is not None]
    legacy = [s for s in samples if not family(s.label).startswith(("Unicode", "other"))]
    outcomes: Counter[str] = Counter()
    by_family: dict[str, Counter[str]] = {}
    by_words = wrong_by_words = 0
    wrong: list[str] = []
    started = time.perf_counter()
    for sample in legacy:
        assert sample.truth is not None
        for word in _words(sample.truth, args.per_file):
            for shape in (word + "\n", json.dumps({"name": word}, ensure_ascii=False)):
                try:
                    data = shape.encode(sample.label)
                except UnicodeEncodeError:
                    continue
                try:
                    data.decode("utf-8")
                    continue  # UTF-8-valid bytes: not a legacy file
                except UnicodeDecodeError:
                    pass
                verdict = decide(data, ".txt")
                if verdict.status == Status.CONVERT:
                    right = verdict.text in (data.decode(sample.label), as_browsers_read(data, sample.label))
                    outcome = "converted right" if right else "SILENT CORRUPTION"
                    if verdict.words is not None:
                        by_words += 1
                        wrong_by_words += not right
                    if not right:
                        wrong.append(f"{sample.label:<12} {word!r:<24} → {verdict.encoding}: {verdict.reason[:110]}")
                else:
                    outcome = "refused"
                outcomes[outcome] += 1
                by_family.setdefault(family(sample.label), Counter())[outcome] += 1
    elapsed = time.perf_counter() - started
    total = sum(outcomes.values())
    mode = "without the words extra" if args.without_words else f"word evidence, margin Zipf {lexicon.WORDS_MARGIN}"
    print(f"{total:,} short files from {len(legacy)} legacy labelled files ({mode}), {total / elapsed:,.0f} files/s")
    outcome_names = ("converted right", "refused", "SILENT CORRUPTION")
    print(f"  {'family':<52} " + " ".join(f"{o:>17}" for o in outcome_names))
    for name, counts in sorted(by_family.items()):
        print(f"  {name:<52} " + " ".join(f"{counts[o]:>17}" for o in outcome_names))
    print(f"  {'TOTAL':<52} " + " ".join(f"{outcomes[o]:>17}" for o in outcome_names))
    print(f"decided by their words: {by_words:,}, of them wrong: {wrong_by_words}")
    for line in wrong:
        print("  wrong:", line)


if __name__ == "__main__":
    main()
