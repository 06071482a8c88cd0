"""The encodings check on model repositories built from text nobody here wrote.

    python benchmarks/bench_encodings_repositories.py [--cache DIR] [--verbose] [--without-words]

The text: chardet 5.2.0's and charset-normalizer 3.5.3's labelled test files (downloaded with pip at
run time by bench_encodings_corpora.py's fetch; nothing is vendored), each decoded with its label. From
each legacy labelled file a repository is written in that file's encoding, shaped like the ones
people publish (issue 28):
- three long files decided on their own: tokenizer_config.json (a chat template holding the text's
  first sentences), dataset_info.json (a description) and README.md (a paragraph);
- short files: classes.txt (two or three of the text's shortest non-ASCII words, one per line),
  labels.txt (one word), config.json whose only non-ASCII text is a Windows path holding a word
  ("D:\\<word>\\model"), and vocab.txt: 20,000 ASCII tokens and one of the text's words;
- one file that contradicts its siblings: other.txt, a sentence of another labelled file, in another
  encoding family (its own evidence, when it has any, must win; else it is refused).

Each short file is counted as converted right, refused (safe) or silent corruption (converted to a
text that is not the one written); other.txt as refused, converted right (in its own encoding) or
silent corruption (converted with the siblings' encoding, or any other wrong one). Beside it, the same
short files judged alone (no siblings), as the check did before repository evidence. Then the short
files of the repositories that had a voice (long files decided confidently, agreeing), and why each
one the siblings did not decide was refused (--verbose lists them).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_encodings_corpora import Sample, as_browsers_read, family, fetch, labelled

from decode_doctor.checks.encodings.textenc import Status, decide
from tests.support.harness import run_check

SHORT = ("classes.txt", "labels.txt", "config.json", "vocab.txt")
WORD = re.compile(r"[^\s\x00-\x7f]{1,12}")  # a run of non-ASCII characters: a word of CJK or an accented one
SENTENCE_CHARS = 400


def _words(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for match in WORD.finditer(text):
        word = match.group().strip(".,;:!?()[]{}\"'«»“”‘’。、，！？（）「」")
        if word and word not in seen and not any(c in word for c in '\\"') and word.isprintable():
            seen[word] = None
    return sorted(seen, key=len)


def _lettered(sample: Sample) -> bool:
    """A text whose first characters beyond ASCII are mostly letters (not a page of box-drawing art)."""
    import unicodedata

    head = " ".join((sample.truth or "").split())[:80]
    wide = [c for c in head if ord(c) > 0x7F]
    return bool(wide) and sum(unicodedata.category(c).startswith("L") for c in wide) >= 0.5 * len(wide)


def _sentences(text: str) -> str:
    flat = " ".join(text.split())
    return flat[:SENTENCE_CHARS]


def repository(sample: Sample, other: Sample, root: Path) -> dict[str, str] | None:
    """The files of one repository, as text, before encoding; None when the sample gives too little."""
    assert sample.truth is not None and other.truth is not None
    words = _words(sample.truth)
    if len(words) < 4:
        return None
    body = _sentences(sample.truth)
    texts = {
        "tokenizer_config.json": json.dumps({"chat_template": "{% for m in messages %}" + body + "{% endfor %}"}, ensure_ascii=False),
        "dataset_info.json": json.dumps({"description": body[:200]}, ensure_ascii=False),
        "README.md": f"# model\n\n{body}\n",
        "classes.txt": "\n".join(words[:3]) + "\n",
        "labels.txt": words[3] + "\n",
        "config.json": json.dumps({"_name_or_path": f"D:\\{words[1]}\\model", "model_type": "llama"}, ensure_ascii=False),
        "vocab.txt": "\n".join([f"tok{i}" for i in range(20_000)] + [words[2]]) + "\n",
    }
    encoded = {}
    for name, text in texts.items():
        try:
            encoded[name] = text.encode(sample.label)
        except UnicodeEncodeError:
            return None
    other_text = " ".join(other.truth.split())[:80]
    try:
        encoded["other.txt"] = (other_text + "\n").encode(other.label)
    except UnicodeEncodeError:
        return None
    root.mkdir(parents=True)
    for name, data in encoded.items():
        (root / name).write_bytes(data)
    texts["other.txt"] = other_text + "\n"
    return texts


def outcome(finding_text: str | None, written: str, data: bytes, label: str) -> str:
    """A label read the way browsers read it (WHATWG: Big5 as cp950, GB2312 as GBK…) is right too."""
    if finding_text is None:
        return "refused"
    return "converted right" if finding_text in (written, as_browsers_read(data, label)) else "SILENT CORRUPTION"


REASONS = (
    ("letters of one script", "two readings in one script: its own bytes lean too little"),
    ("own bytes lean", "its own bytes lean to another reading"),
    ("a shape no word has", "the siblings' reading has a misshapen word"),
    ("common characters", "the siblings' reading has an uncommon CJK character"),
    ("never use", "the siblings' reading has a letter they never use"),
    ("wider codec", "it needs a wider codec than the siblings"),
    ("leads", "siblings and own bytes together stay under the bar"),
    ("key or an id", "a structured file whose readings differ in a key or id"),
)


def _reason(why: str) -> str:
    if not why:
        return "no second look (the sibling voice was another family, or the file was decided alone)"
    return next((label for needle, label in REASONS if needle in why), why[:60])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "decode-doctor" / "corpora")
    parser.add_argument("--verbose", action="store_true", help="print why each short file of a decided repository was refused")
    parser.add_argument("--without-words", action="store_true", help="judge as the default install does, without the words extra's lexicon")
    args = parser.parse_args()
    if args.without_words:
        from decode_doctor.checks.encodings import lexicon

        lexicon.available = lambda: False
    print("word evidence:", "off (as without the words extra)" if args.without_words else "on (the words extra)")
    samples = [s for s in labelled(fetch(args.cache)) if s.truth is not None and not family(s.label).startswith(("Unicode", "other"))]
    results: Counter[tuple[str, str]] = Counter()
    alone: Counter[tuple[str, str]] = Counter()
    contradicting: Counter[str] = Counter()
    contradicting_alone: Counter[str] = Counter()
    corrupted: list[str] = []
    in_decided: Counter[str] = Counter()  # short files of repositories whose long files spoke with one voice
    why_not: Counter[str] = Counter()  # why the siblings did not decide a refused short file
    built = 0
    with tempfile.TemporaryDirectory(prefix="dd-repos-") as scratch:
        for index, sample in enumerate(samples):
            others = [s for s in samples if family(s.label) != family(sample.label) and _lettered(s)]
            other = others[index % len(others)]
            root = Path(scratch) / f"repo{index}"
            texts = repository(sample, other, root)
            if texts is None:
                continue
            built += 1
            run = run_check("encodings", models=(root,))
            converted = {}
            for finding in run.findings:
                if finding.code == "ENC001" and finding.path:
                    name = Path(finding.path).name
                    converted[name] = (root / name).read_bytes().decode(finding.evidence["encoding"])
            fam = family(sample.label)
            voice = any("siblings" in f.evidence or "sibling file(s)" in f.message for f in run.findings)
            reasons = {Path(f.path).name: str(f.evidence.get("siblings_why_not", "")) for f in run.findings if f.path}
            for name in SHORT:
                data = (root / name).read_bytes()
                result = outcome(converted.get(name), texts[name], data, sample.label)
                results[(fam, result)] += 1
                if voice:
                    in_decided[result] += 1
                    if result == "refused":
                        why_not[_reason(reasons.get(name, ""))] += 1
                        if args.verbose:
                            print(f"  {sample.label:<12} {name:<12} {reasons.get(name, '')[:150]}")
                if result == "SILENT CORRUPTION":
                    corrupted.append(f"{sample.path.name} ({sample.label}) {name}")
                verdict = decide(data, Path(name).suffix)
                alone[(fam, outcome(verdict.text if verdict.status == Status.CONVERT else None, texts[name], data, sample.label))] += 1
            data = (root / "other.txt").read_bytes()
            result = outcome(converted.get("other.txt"), texts["other.txt"], data, other.label)
            contradicting[result] += 1
            verdict = decide(data, ".txt")
            contradicting_alone[
                outcome(verdict.text if verdict.status == Status.CONVERT else None, texts["other.txt"], data, other.label)
            ] += 1
            if result == "SILENT CORRUPTION":
                corrupted.append(f"{sample.path.name} ({sample.label}) other.txt in {other.label}")
    print(f"{built} repositories from {len(samples)} legacy labelled files; short files: {', '.join(SHORT)}\n")
    print(f"{'family':<52} {'with siblings':>34}   {'alone (before)':>34}")
    for fam in sorted({f for f, _ in results}):
        shown = [
            " / ".join(f"{counts[(fam, o)]}" for o in ("converted right", "refused", "SILENT CORRUPTION")) for counts in (results, alone)
        ]
        print(f"{fam:<52} {shown[0]:>34}   {shown[1]:>34}")
    total = lambda counts, o: sum(n for (f, r), n in counts.items() if r == o)  # noqa: E731
    print(f"\n{'total (right / refused / corrupted)':<52} "
          f"{total(results, 'converted right')} / {total(results, 'refused')} / {total(results, 'SILENT CORRUPTION'):<14}"
          f"   {total(alone, 'converted right')} / {total(alone, 'refused')} / {total(alone, 'SILENT CORRUPTION')}")  # fmt: skip
    print(f"contradicting file (other.txt, another family): {dict(contradicting)}; alone (before): {dict(contradicting_alone)}")
    print(f"\nshort files of repositories whose long files were decided (a repository voice): {dict(in_decided)}")
    for reason, count in why_not.most_common():
        print(f"  refused: {count:>4}  {reason}")
    for line in corrupted[:20]:
        print("  corrupted:", line)


if __name__ == "__main__":
    main()
