"""The images check on files nobody here made: Pillow's test images, PngSuite, libpng's test and
crasher PNGs, and bmpsuite, labelled the way their authors label them.

    python benchmarks/bench_images_corpora.py [--cache DIR] [--show-wrong]

Fetched at run time, nothing vendored: Pillow 13.0.0's source distribution from PyPI (Tests/images,
bmpsuite inside it), and Debian bookworm's source packages of libpng1.6 (contrib/pngsuite,
contrib/testpngs) and libstb (tests/pngsuite, the full PngSuite), each checked against its sha256.

Labels, each with its rule:
- PngSuite (libpng's and stb's copies): a name starting with "x" is corrupt; the suite's README says
  "x" files are "corrupted files" every decoder should reject. Every other PngSuite file is valid.
- libpng's contrib/testpngs/crashers: the files tests/pngtest-all runs with --xfail (pngtest must
  fail on them) or --relaxed (read only with CRC and Adler checks relaxed) are corrupt; the rest of
  contrib/testpngs are valid (pngtest and pngimage read them strictly).
- bmpsuite (Pillow's Tests/images/bmp): b/ is "bad" (corrupt), g/ is "good" (valid); q/
  ("questionable") is shown apart and not scored.
- Pillow's Tests/images: a file opened and loaded inside `with pytest.raises(...)` (or passed to
  `pytest.raises(..., Image.open, path)`) in Pillow's own tests is corrupt, but for the files in
  NOT_CORRUPT (raised on for another reason, said beside each); the others are not labelled, and
  count only in the "Pillow loads it without a warning, yet quarantined" line. stb's iphone/ PNGs
  (Apple's CgBI variant) are not labelled either.

For each file: decode-doctor's images check (its two workers, one verdict per file: error, warning,
info or nothing), a Pillow open()+load()-every-frame loop (raises: error; warns: warning), and
ImageMagick's `identify -regard-warnings` when it is installed. Printed: recall on the corrupt files
(flagged as error or warning), errors on the valid files, the Pillow-breaking files decode-doctor does
not call errors (target 0), the files decode-doctor would quarantine although Pillow loads them without
a warning (target 0), and the time each took.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from decode_doctor.checks.images.check import Images
from decode_doctor.checks.images.walk import IMAGE_SUFFIXES
from decode_doctor.engine import Context

SOURCES = {
    "pillow": (
        "https://files.pythonhosted.org/packages/ce/a4/9cc30690a394a8305e8be4c9036aa16d0dfddadd09079860b582f562496d/pillow-13.0.0.tar.gz",
        "cdcd1ba258178f7356d74170c9a81ba4eab6a5d55748bc402a5a2a6fe6be3510",
    ),
    "libpng": (
        "http://deb.debian.org/debian/pool/main/libp/libpng1.6/libpng1.6_1.6.39.orig.tar.gz",
        "a00e9d2f2f664186e4202db9299397f851aea71b36a35e74910b8820e380d441",
    ),
    "libstb": (
        "http://deb.debian.org/debian/pool/main/libs/libstb/libstb_0.0~git20220908.8b5f1f3+ds.orig.tar.xz",
        "6949c8ff9f86d982cff1b384f1301a731cbaf3b3fa4d1728c7b48a02386d31d8",
    ),
}
ERROR, WARNING = "error", "warning"
# raised on in Pillow's tests for another reason than damage
NOT_CORRUPT = {"Tests/images/avif/hopper.heif": "test_heif_raises_unidentified_image_error: the AVIF plugin must leave HEIF alone"}


@dataclass
class Labelled:
    path: Path
    source: str
    label: str  # corrupt, valid, questionable, unlabelled
    rule: str


def fetch(cache: Path) -> dict[str, Path]:
    cache.mkdir(parents=True, exist_ok=True)
    roots = {}
    for name, (url, sha256) in SOURCES.items():
        archive = cache / url.rsplit("/", 1)[1]
        if not archive.exists():
            print(f"downloading {url}…", file=sys.stderr)
            with urllib.request.urlopen(url, timeout=300) as response, open(archive.with_suffix(".part"), "wb") as out:
                shutil.copyfileobj(response, out)
            archive.with_suffix(".part").rename(archive)
        if hashlib.sha256(archive.read_bytes()).hexdigest() != sha256:
            raise SystemExit(f"{archive}: sha256 does not match the pinned one; delete it and run again")
        target = cache / name
        if not target.is_dir():
            with tarfile.open(archive) as tar:
                tar.extractall(target, filter="data")
        roots[name] = next(target.iterdir())
    return roots


def labelled(roots: dict[str, Path]) -> list[Labelled]:
    out: list[Labelled] = []
    suite = "PngSuite: 'x' names are corrupt"
    for base in (roots["libpng"] / "contrib" / "pngsuite", roots["libstb"] / "tests" / "pngsuite"):
        for path in sorted(base.rglob("*.png")):
            if path.parent.name == "iphone":  # stb's own additions: Apple CgBI files, not PNG as the standard has it
                out.append(Labelled(path, "stb iphone/", "unlabelled", "Apple CgBI, read only by Apple's and stb's decoders"))
                continue
            out.append(Labelled(path, "PngSuite", "corrupt" if path.name.startswith("x") else "valid", suite))
    testpngs = roots["libpng"] / "contrib" / "testpngs"
    xfail, relaxed = _pngtest_all(roots["libpng"] / "tests" / "pngtest-all")
    for path in sorted(testpngs.rglob("*.png")):
        if path.name in xfail:
            out.append(Labelled(path, "libpng crashers", "corrupt", "pngtest-all --xfail"))
        elif path.name in relaxed:
            out.append(Labelled(path, "libpng crashers", "corrupt", "pngtest-all --relaxed (bad CRC/Adler)"))
        else:
            out.append(Labelled(path, "libpng testpngs", "valid", "read strictly by pngtest"))
    bmp = roots["pillow"] / "Tests" / "images" / "bmp"
    for folder, label in (("b", "corrupt"), ("g", "valid"), ("q", "questionable")):
        for path in sorted((bmp / folder).glob("*.bmp")):
            out.append(Labelled(path, "bmpsuite", label, f"bmpsuite {folder}/"))
    raising = _pillow_raises(roots["pillow"] / "Tests")
    images = roots["pillow"] / "Tests" / "images"
    for path in sorted(images.rglob("*")):
        if path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES and bmp not in path.parents:
            relative = path.relative_to(roots["pillow"]).as_posix()
            label = "corrupt" if relative in raising and relative not in NOT_CORRUPT else "unlabelled"
            out.append(Labelled(path, "Pillow Tests/images", label, "opened and loaded in pytest.raises" if label == "corrupt" else ""))
    return out


def _pngtest_all(script: Path) -> tuple[set[str], set[str]]:
    xfail: set[str] = set()
    relaxed: set[str] = set()
    text = script.read_text().replace("\\\n", " ")
    crashers = script.parent.parent / "contrib" / "testpngs" / "crashers"
    for line in text.splitlines():
        if "--xfail" not in line and "--relaxed" not in line:
            continue
        names: set[str] = set()
        for pattern in re.findall(r"crashers/(\S+)", line):
            names |= {p.name for p in crashers.glob(pattern)}
        (xfail if "--xfail" in line else relaxed).update(names)
    return xfail, relaxed


def _pillow_raises(tests: Path) -> set[str]:
    """Image paths Pillow's tests open and load inside pytest.raises."""
    found: set[str] = set()
    for source in tests.glob("test_*.py"):
        try:
            tree = ast.parse(source.read_text())
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.With) and any(_is_raises(item.context_expr) for item in node.items):
                found |= _opened_paths(node.body) if _loads(node.body) else set()
            elif (
                isinstance(node, ast.Call)
                and _is_raises(node)
                and len(node.args) >= 3
                and _dotted(node.args[1]) == "Image.open"
                and isinstance(node.args[2], ast.Constant)
            ):
                found.add(str(node.args[2].value))
    return {path for path in found if isinstance(path, str) and path.startswith("Tests/images/")}


def _is_raises(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and _dotted(node.func) == "pytest.raises"


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _opened_paths(body: list[ast.stmt]) -> set[str]:
    paths = set()
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Call) and _dotted(node.func) == "Image.open" and node.args and isinstance(node.args[0], ast.Constant):
            paths.add(node.args[0].value)
    return paths


def _loads(body: list[ast.stmt]) -> bool:
    """The block opens the file and at most loads it (open alone raises for a bad header); a block that
    also saves, seeks or transforms tests something else."""
    names = {n.attr for n in ast.walk(ast.Module(body=body, type_ignores=[])) if isinstance(n, ast.Attribute)}
    return "open" in names and not names & {"save", "seek", "convert", "resize", "crop", "transpose", "getdata"}


def decode_doctor(files: list[Labelled]) -> tuple[dict[Path, str | None], float]:
    """The images check over a copy of the files (it never follows links): each file's verdict."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "dataset"
        copies = {}
        for index, item in enumerate(files):
            copy = root / f"{index // 500:03d}" / f"{index:05d}{item.path.suffix}"
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(item.path, copy)
            copies[str(copy)] = item.path
        started = time.perf_counter()
        findings = Images().run(Context(images=(root,)))
        elapsed = time.perf_counter() - started
        verdicts: dict[Path, str | None] = dict.fromkeys((item.path for item in files), None)
        for finding in findings:
            if finding.path and finding.path in copies:
                verdicts[copies[finding.path]] = finding.severity.value
            elif finding.code == "IMG008":
                for path in finding.evidence.get("files", {}):
                    verdicts[copies[path]] = "info"
    return verdicts, elapsed


def pillow(files: list[Labelled]) -> tuple[dict[Path, str | None], float]:
    from PIL import Image, ImageSequence

    verdicts: dict[Path, str | None] = {}
    started = time.perf_counter()
    for item in files:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with Image.open(item.path) as image:
                    for frame in ImageSequence.Iterator(image):
                        frame.load()
                verdicts[item.path] = WARNING if caught else None
            except Exception:
                verdicts[item.path] = ERROR
    return verdicts, time.perf_counter() - started


def identify(files: list[Labelled]) -> tuple[dict[Path, str | None], float] | None:
    if shutil.which("identify") is None:
        return None
    verdicts: dict[Path, str | None] = {}
    started = time.perf_counter()
    for item in files:
        proc = subprocess.run(["identify", "-regard-warnings", str(item.path)], capture_output=True, timeout=60)
        verdicts[item.path] = ERROR if proc.returncode else None
    return verdicts, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "decode-doctor" / "image-corpora")
    parser.add_argument("--show-wrong", action="store_true", help="List each file a target misses.")
    args = parser.parse_args()
    files = labelled(fetch(args.cache))
    counts = Counter((item.source, item.label) for item in files)
    print(f"{len(files)} files: " + ", ".join(f"{source} {label} {n}" for (source, label), n in sorted(counts.items())))
    tools = {"decode-doctor": decode_doctor(files), "Pillow open()+load()": pillow(files)}
    magick = identify(files)
    if magick:
        tools["identify -regard-warnings"] = magick
    else:
        print("(ImageMagick's identify is not installed: left out)")
    corrupt = [item for item in files if item.label == "corrupt"]
    valid = [item for item in files if item.label == "valid"]
    print(f"\n{'tool':<28} {'corrupt flagged (error+warning)':>32} {'valid called errors':>20} {'time':>8}")
    for tool, (verdicts, seconds) in tools.items():
        flagged = sum(1 for item in corrupt if verdicts.get(item.path) in (ERROR, WARNING))
        wrong = sum(1 for item in valid if verdicts.get(item.path) == ERROR)
        print(f"{tool:<28} {flagged:>20} of {len(corrupt):<9} {wrong:>12} of {len(valid):<5} {seconds:>7.1f}s")
    ours, loop = tools["decode-doctor"][0], tools["Pillow open()+load()"][0]
    breaks = [item for item in files if loop[item.path] == ERROR]
    unflagged = [item for item in breaks if ours[item.path] != ERROR]
    unchecked = [item for item in unflagged if ours[item.path] == "info"]
    quarantined = [item for item in files if ours[item.path] == ERROR and loop[item.path] is None]
    missed = [item for item in corrupt if ours[item.path] not in (ERROR, WARNING)]
    print(
        f"\nfiles Pillow's default load fails on: {len(breaks)}; decode-doctor calls {len(breaks) - len(unflagged)} errors, "
        f"{len(unchecked)} unchecked for want of a decoder here, {len(unflagged) - len(unchecked)} missed (target 0)"
    )
    print(f"files decode-doctor would quarantine although Pillow loads them without a warning: {len(quarantined)} (target 0)")
    print(f"labelled-corrupt files decode-doctor flags as neither error nor warning: {len(missed)} (target 0)")
    for item in files:
        if item.label == "questionable":
            print(f"  bmpsuite q/ {item.path.name}: decode-doctor {ours[item.path]}, Pillow {loop[item.path]}") if args.show_wrong else None
    if args.show_wrong:
        errors_on_valid = [item for item in valid if ours[item.path] == ERROR]
        groups = (
            ("Pillow breaks, not an error", unflagged),
            ("quarantined, Pillow loads", quarantined),
            ("missed", missed),
            ("labelled valid, an error", errors_on_valid),
        )
        for title, group in groups:
            for item in group:
                print(f"  {title}: {item.source} {item.path.name} ({item.rule}): decode-doctor {ours[item.path]}, Pillow {loop[item.path]}")


if __name__ == "__main__":
    main()
