"""Regenerates every file derived from the code, in order, or (--check) says which is stale.

    python tests/support/regenerate.py           # after adding or changing a check, a message, a rule
    python tests/support/regenerate.py --check   # CI: exit 1 naming each stale file and this command

Derived, each from one source:
- doctor/engine/data/index.json: the registry's index (what selection, --help and explain know without
  importing every check), from a full import of checks/ and fixers/;
- doctor/locale/decode_doctor.pot and the msgids of each .po (their Chinese stays the translator's: new
  messages are listed, untranslated, for a person to write), and the compiled .mo beside each .po;
- deploy/prometheus-operator/prometheusrule.yaml, from deploy/prometheus/decode-doctor.rules.yml;
- README.md's generated tables (the checks table, the audit table) and the golden outputs under
  tests/golden/ (English and Chinese), from the program's own output: read their diff before committing.
The glossary's list of check names is not a file: tests/support/latin.py reads the names from the index.

--check regenerates into a scratch copy of those files and compares, so it never changes the tree.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COMMAND = "python tests/support/regenerate.py"
PO = Path("doctor/locale/zh_CN/LC_MESSAGES/decode_doctor.po")
# the tests that rewrite their derived file under DD_UPDATE_README / DD_UPDATE_GOLDEN
UPDATING_TESTS = ("tests/test_readme.py", "tests/test_audit.py", "tests/test_zh_golden.py", "tests/test_hosts.py", "tests/test_i18n.py")
DERIVED = (
    "doctor/engine/data/index.json",
    "doctor/locale/decode_doctor.pot",
    "doctor/locale/zh_CN/LC_MESSAGES/decode_doctor.po",
    "deploy/prometheus-operator/prometheusrule.yaml",
    "README.md",
    "tests/golden",
)


@dataclass(frozen=True)
class Step:
    what: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


def steps() -> list[Step]:
    python = sys.executable
    return [
        Step("the registry's index", (python, "-m", "decode_doctor.engine.index", "--write")),
        Step("the message catalogs", (python, "-m", "decode_doctor.i18n.messages")),
        Step("the compiled catalogs", (python, "-c", _COMPILE)),
        Step("the PrometheusRule", (python, "deploy/prometheus-operator/generate.py")),
        Step(
            "README's tables and the golden outputs",
            (python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--no-header", "-o", "addopts=", *UPDATING_TESTS),
            (("DD_UPDATE_README", "1"), ("DD_UPDATE_GOLDEN", "1")),
        ),
    ]


# the .mo beside each .po, as an editable install has them (setup.py compiles them into a wheel)
_COMPILE = (
    "import importlib.util, pathlib; p = pathlib.Path('doctor/i18n/compile.py');"
    "s = importlib.util.spec_from_file_location('dd_compile', p); m = importlib.util.module_from_spec(s);"
    "s.loader.exec_module(m); m.compile_catalogs(pathlib.Path('doctor/locale'), pathlib.Path('doctor/locale'))"
)


def run_steps(cwd: Path, quiet: bool) -> list[str]:
    """Each step in cwd; the steps that failed, with their output's tail."""
    failed = []
    for step in steps():
        if step.env and untranslated(cwd / PO):  # outputs in Chinese wait for their Chinese: made once, after it
            print(f"regenerate: {step.what}: not yet (messages without Chinese, listed below)", flush=True)
            continue
        if not quiet:
            print(f"regenerate: {step.what}", flush=True)
        env = {**os.environ, **dict(step.env)}
        done = subprocess.run(step.argv, cwd=cwd, env=env, capture_output=True, text=True)
        # the updating tests rewrite their files and still pass; a failure is a real one (read it)
        if done.returncode != 0:
            failed.append(f"{step.what}: exit {done.returncode}\n{(done.stdout + done.stderr)[-3000:]}")
    return failed


def untranslated(po: Path) -> list[str]:
    from babel.messages.pofile import read_po

    with po.open("rb") as handle:
        catalog = read_po(handle)
    return [str(m.id if isinstance(m.id, str) else m.id[0]) for m in catalog if m.id and (not m.string or m.fuzzy)]


def translate(po: Path, translations: Path) -> list[str]:
    """The .po with msgstr filled from a JSON object: a message's English (msgid), or for a code's explanation
    its context ("THP001 why"), → its Chinese. The keys that match no message of the catalog."""
    import json

    from babel.messages.pofile import read_po, write_po

    given = json.loads(translations.read_text(encoding="utf-8"))
    with po.open("rb") as handle:
        catalog = read_po(handle)
    used = set()
    for message in catalog:
        if not message.id:
            continue
        english = message.id if isinstance(message.id, str) else message.id[0]
        for key in (message.context, english):
            if key in given:
                # Chinese has one plural form: a plural message's one msgstr
                message.string = (given[key],) if isinstance(message.id, tuple | list) else given[key]
                message.flags.discard("fuzzy")
                used.add(key)
                break
    with po.open("wb") as handle:
        write_po(handle, catalog, width=100, ignore_obsolete=True)
    return sorted(set(given) - used)


def _copy_derived(source: Path, target: Path) -> None:
    for name in DERIVED:
        origin = source / name
        if origin.is_dir():
            shutil.copytree(origin, target / name, dirs_exist_ok=True)
        elif origin.exists():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, target / name)


def _same(a: Path, b: Path) -> bool:
    """Equal files; a catalog's extraction time and its messages' source lines (#:) are not a difference."""
    if not (a.is_file() and b.is_file()):
        return False
    if a.suffix in (".po", ".pot"):
        noise = (b'"POT-Creation-Date:', b"#:")
        return [line for line in a.read_bytes().splitlines() if not line.startswith(noise)] == [
            line for line in b.read_bytes().splitlines() if not line.startswith(noise)
        ]
    return filecmp.cmp(a, b, shallow=False)


def _differing(before: Path, after: Path) -> list[str]:
    stale = []
    for name in DERIVED:
        a, b = before / name, after / name
        if a.is_dir() or b.is_dir():
            names = {p.relative_to(a) for p in a.rglob("*") if p.is_file()} | {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
            stale += [f"{name}/{n}" for n in sorted(names) if not _same(a / n, b / n)]
        elif not _same(a, b):
            stale.append(name)
    return stale


def check() -> int:
    """Regenerates in place with the originals kept aside, compares, then puts every original back."""
    with tempfile.TemporaryDirectory(prefix="dd-derived-") as scratch:
        kept, fresh = Path(scratch) / "kept", Path(scratch) / "fresh"
        _copy_derived(REPO, kept)
        try:
            failed = run_steps(REPO, quiet=True)
            _copy_derived(REPO, fresh)
        finally:
            for name in DERIVED:
                if (REPO / name).is_dir():
                    shutil.rmtree(REPO / name)
            _copy_derived(kept, REPO)
        stale = _differing(kept, fresh)
    for problem in failed:
        print(f"regenerate: {problem}", file=sys.stderr)
    if stale:
        print(f"stale derived files (run `{COMMAND}` and read the diff):", file=sys.stderr)
        for name in stale:
            print(f"  {name}", file=sys.stderr)
    return 1 if stale or failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="exit 1 naming each stale derived file; change nothing")
    parser.add_argument(
        "--translations", type=Path, metavar="FILE", help="fill the zh_CN .po from a JSON object (msgid or 'CODE section' → Chinese) first"
    )
    args = parser.parse_args(argv)
    if args.check:
        return check()
    po = REPO / PO
    failed = run_steps(REPO, quiet=False)
    if args.translations is not None:
        unmatched = translate(po, args.translations)
        if unmatched:
            print(f"regenerate: {len(unmatched)} translation(s) match no message: {', '.join(unmatched[:5])}", file=sys.stderr)
            return 1
        failed = run_steps(REPO, quiet=False)  # the Chinese compiled, and the outputs that show it
    missing = untranslated(po)
    for problem in failed:  # the tests of derived files fail while a message has no Chinese: said below
        print(f"regenerate: {problem if not missing else problem.splitlines()[0]}", file=sys.stderr)
    if missing:
        print(f"{len(missing)} message(s) have no Chinese yet: write them in doctor/locale/zh_CN/LC_MESSAGES/decode_doctor.po")
        for message in missing[:40]:
            print(f"  {message[:110]}")
    return 1 if failed and not missing else 0


if __name__ == "__main__":
    sys.exit(main())
