"""The encodings check on text nobody here wrote: chardet's and charset-normalizer's labelled test files.

    python benchmarks/bench_encodings_corpora.py [--cache DIR] [--show-wrong]

Downloads chardet 5.2.0's and charset-normalizer 3.5.3's source distributions with pip at run time
(nothing is vendored) and labels each file as their authors do:
- chardet: tests/<ENCODING>[-<language>]/<file>, the encoding is the longest leading part of the
  directory name that Python knows as a codec ("iso-8859-2-czech" → iso-8859-2);
- charset-normalizer: the (file, encoding) pairs of tests/test_full_detection.py, read from its source.
A file whose bytes its label does not decode strictly is counted apart (mislabelled); a file labelled
TIS-620, ISO-8859-1 or ISO-8859-9 whose bytes 0x80–0x9F that label reads as C1 controls is taken
to be in the Windows superset (windows-874, -1252, -1254), as browsers read those labels. A file
labelled GB2312, Shift_JIS, Big5 or EUC-KR is read right in its label's codec or in the Windows code
page browsers use for that label (they differ in a few punctuation marks).

For each file, decode-doctor's detection and conversion (with its word lexicon, and without it as the
default install runs), chardet.detect() + decode, and
charset_normalizer.from_bytes().best() + decode are each counted as: converted right (the text is
the label's text), left alone (already UTF-8/ASCII, correctly), missed (a legacy file taken for
UTF-8/ASCII and left as it is), refused (no conversion, with the reason; safe), or silent corruption
(converted to a text that is not the label's). Printed per encoding family and in total.
"""

from __future__ import annotations

import argparse
import ast
import codecs
import subprocess
import sys
import tarfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from decode_doctor.checks.encodings.textenc import Status, converted_bytes, decide

SOURCES = {"chardet": "chardet==5.2.0", "charset-normalizer": "charset-normalizer==3.5.3"}
UTF = ("utf-8", "utf-8-sig", "ascii", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be")
FAMILIES = {
    "Western (8859-1/15, cp1252, MacRoman)": ("iso8859-1", "iso8859-15", "cp1252", "mac-roman", "latin-1"),
    "Central European (8859-2, cp1250)": ("iso8859-2", "cp1250"),
    "Turkish (8859-9, cp1254)": ("iso8859-9", "cp1254"),
    "Cyrillic (8859-5, cp1251, KOI8, cp866, cp855, Mac)": ("iso8859-5", "cp1251", "koi8-r", "koi8-u", "cp866", "cp855", "mac-cyrillic"),
    "Greek (8859-7, cp1253)": ("iso8859-7", "cp1253"),
    "Hebrew (8859-8, cp1255)": ("iso8859-8", "cp1255"),
    "Arabic (8859-6, cp1256)": ("iso8859-6", "cp1256"),
    "Thai (TIS-620)": ("tis-620", "cp874"),
    "Chinese (GB2312/GBK/GB18030, Big5)": ("gb2312", "gbk", "gb18030", "big5", "cp950", "big5hkscs"),
    "Japanese (Shift_JIS, cp932, EUC-JP, ISO-2022-JP)": ("shift_jis", "cp932", "euc_jp", "iso2022_jp"),
    "Korean (EUC-KR, cp949, Johab, ISO-2022-KR)": ("euc_kr", "cp949", "johab", "iso2022_kr"),
    "Unicode (UTF-8, UTF-16, UTF-32)": tuple(codecs.lookup(u).name for u in UTF),
}


# WHATWG reads these labels as the Windows encodings, which give 0x80–0x9F characters
WINDOWS_SUPERSET = {"tis-620": "cp874", "iso8859-11": "cp874", "iso8859-1": "cp1252", "iso8859-9": "cp1254"}
# and these with the Windows code page's mapping of a few punctuation marks (GB2312 A1A4: "・" or "·")
WHATWG_DECODER = {"gb2312": "gbk", "shift_jis": "cp932", "big5": "cp950", "euc_kr": "cp949"}


def family(label: str) -> str:
    name = codecs.lookup(label).name
    return next((f for f, names in FAMILIES.items() if name in names), "other")


@dataclass
class Sample:
    source: str
    path: Path
    label: str
    data: bytes
    truth: str | None  # the label's strict decoding; None: mislabelled
    as_browsers_read: str | None = None  # the decoding of the label's WHATWG decoder, where it differs


def fetch(cache: Path) -> dict[str, Path]:
    cache.mkdir(parents=True, exist_ok=True)
    roots = {}
    for name, requirement in SOURCES.items():
        archive = next(cache.glob(f"{requirement.split('==')[0].replace('-', '_')}-*.tar.gz"), None) or next(
            cache.glob(f"{requirement.split('==')[0]}-*.tar.gz"), None
        )
        if archive is None:
            print(f"downloading {requirement} (source distribution) with pip…", file=sys.stderr)
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:", requirement, "-d", str(cache)],
                check=True,
            )
            archive = next(cache.glob("*.tar.gz"), None)
            archive = next(p for p in cache.glob("*.tar.gz") if p.name.lower().replace("_", "-").startswith(name))
        target = cache / archive.name.removesuffix(".tar.gz")
        if not target.is_dir():
            with tarfile.open(archive) as tar:
                tar.extractall(cache, filter="data")
        roots[name] = target
    return roots


def _codec_of(directory: str) -> str | None:
    parts = directory.split("-")
    for end in range(len(parts), 0, -1):
        try:
            return codecs.lookup("-".join(parts[:end])).name
        except LookupError:
            continue
    return None


def labelled(roots: dict[str, Path]) -> list[Sample]:
    samples = []
    for directory in sorted((roots["chardet"] / "tests").iterdir()):
        label = _codec_of(directory.name) if directory.is_dir() else None
        if label is None:
            continue
        samples += [_sample("chardet", path, label) for path in sorted(directory.iterdir()) if path.is_file()]
    cases = roots["charset-normalizer"] / "tests" / "test_full_detection.py"
    for node in ast.walk(ast.parse(cases.read_text())):
        if isinstance(node, ast.Tuple) and len(node.elts) == 3 and all(isinstance(e, ast.Constant) for e in node.elts):
            name, label, _ = (e.value for e in node.elts)
            path = roots["charset-normalizer"] / "data" / name
            if path.is_file():
                samples.append(_sample("charset-normalizer", path, codecs.lookup(label).name))
    return samples


def _sample(source: str, path: Path, label: str) -> Sample:
    data = path.read_bytes()
    try:
        truth = data.decode("utf-8-sig" if label in ("utf-8", "utf_8") and data.startswith(codecs.BOM_UTF8) else label)
    except UnicodeDecodeError:
        truth = None
    if truth is not None and label.startswith(("utf-16", "utf-32")):
        truth = truth.lstrip("\ufeff")
    if truth is not None and label in WINDOWS_SUPERSET and any("\x80" <= char <= "\x9f" for char in truth):
        try:  # bytes 0x80–0x9F that the label reads as C1 controls: the page was in the Windows superset
            truth = data.decode(WINDOWS_SUPERSET[label])
        except UnicodeDecodeError:
            pass
    return Sample(source, path, label, data, truth, as_browsers_read(data, label))


def as_browsers_read(data: bytes, label: str) -> str | None:
    """The text browsers decode for label (WHATWG: Big5 as cp950, GB2312 as GBK…), where it differs."""
    if label not in WHATWG_DECODER:
        return None
    try:
        return data.decode(WHATWG_DECODER[label])
    except UnicodeDecodeError:
        return None


def judge(sample: Sample, text: str | None, converted: bool) -> str:
    """left alone: a UTF-8 file kept as it is (right); missed: a file in a legacy encoding taken for
    UTF-8 or ASCII and left broken (loaders still fail on it)."""
    assert sample.truth is not None
    if not converted:
        if text is None:
            return "refused"
        return "left alone" if family(sample.label).startswith("Unicode") else "missed"
    if text is None:
        return "SILENT CORRUPTION"
    return "converted right" if text.lstrip("\ufeff") in (sample.truth.lstrip("\ufeff"), sample.as_browsers_read) else "SILENT CORRUPTION"


def ours(sample: Sample) -> tuple[str, str]:
    verdict = decide(sample.data, sample.path.suffix.lower())
    if verdict.status.is_utf8:
        return judge(sample, verdict.text, False), verdict.status
    if verdict.status != Status.CONVERT:
        return "refused", f"{verdict.status}: {verdict.reason}"
    text = converted_bytes(verdict, keep_utf8_bom=False).decode("utf-8")
    return judge(sample, text, True), verdict.encoding or "?"


def without_words(sample: Sample) -> tuple[str, str]:
    """decode-doctor as the default install runs it, without the word lexicon (the `words` extra)."""
    from decode_doctor.checks.encodings import lexicon

    available, lexicon.available = lexicon.available, lambda: False
    try:
        return ours(sample)
    finally:
        lexicon.available = available


def library(sample: Sample, name: str) -> tuple[str, str]:
    if name == "chardet":
        import chardet

        encoding = chardet.detect(sample.data)["encoding"]
    else:
        import charset_normalizer

        best = charset_normalizer.from_bytes(sample.data).best()
        encoding = best.encoding if best else None
    if encoding is None:
        return "refused", "none"
    try:
        text = sample.data.decode(encoding)
    except (UnicodeDecodeError, LookupError):
        return "refused", f"{encoding} (does not decode)"
    if codecs.lookup(encoding).name in ("utf-8", "ascii", "utf-8-sig"):
        return judge(sample, text, False), encoding
    return judge(sample, text, True), encoding


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "decode-doctor" / "corpora")
    parser.add_argument("--show-wrong", action="store_true", help="List every file a tool silently corrupted or decode-doctor refused.")
    args = parser.parse_args()
    samples = labelled(fetch(args.cache))
    usable = [s for s in samples if s.truth is not None]
    print(f"{len(samples)} labelled files ({len(samples) - len(usable)} whose label does not decode them are left out)")
    tools = {
        "decode-doctor": ours,
        "decode-doctor, no words extra": without_words,
        "chardet": lambda s: library(s, "chardet"),
        "charset-normalizer": lambda s: library(s, "charset-normalizer"),
    }
    table: dict[str, dict[str, Counter[str]]] = {tool: defaultdict(Counter) for tool in tools}
    wrong: list[str] = []
    for tool, run in tools.items():
        started = time.perf_counter()
        for sample in usable:
            outcome, detail = run(sample)
            table[tool][family(sample.label)][outcome] += 1
            table[tool]["TOTAL"][outcome] += 1
            if args.show_wrong and (outcome == "SILENT CORRUPTION" or (tool.startswith("decode-doctor") and outcome == "refused")):
                wrong.append(f"{tool:<18} {outcome:<17} {sample.label:<12} → {detail[:90]:<90} {sample.path.relative_to(args.cache)}")
        elapsed = time.perf_counter() - started
        print(f"{tool}: {len(usable) / elapsed:,.0f} files/s")
    outcomes = ("converted right", "left alone", "missed", "refused", "SILENT CORRUPTION")
    families = [*sorted({f for t in table.values() for f in t if f != "TOTAL"}), "TOTAL"]
    for tool in tools:
        print(f"\n{tool}")
        print(f"  {'family':<52} {'files':>5} " + " ".join(f"{o:>17}" for o in outcomes))
        for name in families:
            counts = table[tool][name]
            print(f"  {name:<52} {sum(counts.values()):>5} " + " ".join(f"{counts[o]:>17}" for o in outcomes))
    legacy = [s for s in usable if not family(s.label).startswith("Unicode")]
    supported = [s for s in legacy if family(s.label) != "other"]
    right = sum(1 for s in supported if ours(s)[0] == "converted right")
    share = right / max(len(supported), 1)
    print(f"\ndecode-doctor converted {right} of {len(supported)} legacy files in supported families ({share:.1%})")
    right = sum(1 for s in supported if without_words(s)[0] == "converted right")
    print(f"  without the words extra: {right} of {len(supported)} ({right / max(len(supported), 1):.1%})")
    for tool in tools:
        print(f"{tool}: {table[tool]['TOTAL']['SILENT CORRUPTION']} silent corruption(s) on these files")
    print(f"decode-doctor on the repository's generated corpus: {generated()}")
    for line in wrong:
        print(line)


def generated() -> str:
    """The same judgement on tests/support/textcorpus.py (the failure classes written for this repository)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from support.textcorpus import corpus

    outcomes: Counter[str] = Counter()
    for item in corpus():
        verdict = decide(item.data, Path(item.rel).suffix.lower())
        if verdict.status == Status.CONVERT:
            text = converted_bytes(verdict, keep_utf8_bom=False).decode("utf-8")
            outcomes["converted right" if text == (item.text or "").lstrip("\ufeff") else "SILENT CORRUPTION"] += 1
        else:
            outcomes[verdict.status] += 1
    return ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items()))


if __name__ == "__main__":
    main()
