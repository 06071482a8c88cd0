"""CONTRIBUTING.md's walk-through, followed literally in a copy of the repository: each file it shows is
written, each command it shows is run, and then the gates a change must pass — ruff, mypy, the tests of
everything derived (README's tables, the catalogs, the goldens, the glossary, the registry's index) and
the new check's own test. Adding a fixable check needs no hand edit of a derived file: if it did, a gate
here fails.

The copy imports as decode_doctor through a folder of links on PYTHONPATH (decode_doctor → doctor/'s
entries, decode_doctor.checks → checks/, decode_doctor.fixers → fixers/), the way the editable install
maps this checkout; every process the gates start inherits it."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

CONTRIBUTING = REPO / "CONTRIBUTING.md"
FILE_BLOCK = re.compile(r"^File `([^`]+)`[^\n]*:\n\n```\w*\n(.*?)^```", re.M | re.S)
COMMAND_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.M | re.S)
GATES = (
    "tests/test_thp.py",
    "tests/test_readme.py",
    "tests/test_i18n.py",
    "tests/test_i18n_gate.py",
    "tests/test_i18n_glossary.py",
    "tests/test_zh_golden.py",
    "tests/test_registry_index.py",
    "tests/test_architecture.py",
    "tests/test_audit.py",
)


def _copy_checkout(target: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, (entry.decode() for entry in listed)):
        source = REPO / name
        if source.is_file() and not source.is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def _import_path(source: Path, links: Path) -> None:
    package = links / "decode_doctor"
    package.mkdir(parents=True)
    for entry in (source / "doctor").iterdir():
        (package / entry.name).symlink_to(entry)
    (package / "checks").symlink_to(source / "checks")
    (package / "fixers").symlink_to(source / "fixers")


def _commands(block: str) -> list[list[str]]:
    """The walk-through's shell lines as argv lists (a `&&` splits one line into two commands)."""
    found = []
    for line in block.strip().splitlines():
        for part in line.split("&&"):
            found.append(shlex.split(part))
    return found


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    if argv[0] == ".venv/bin/python":
        argv = [sys.executable, *argv[1:]]
    elif argv[0].startswith(".venv/bin/"):
        argv = [str(Path(sys.executable).parent / Path(argv[0]).name), *argv[1:]]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=1200)


@pytest.mark.skipif(shutil.which("git") is None, reason="the copy is made from git's list of files")
def test_the_walk_through_adds_a_fixable_check_with_no_hand_edit_of_a_derived_file(tmp_path):
    text = CONTRIBUTING.read_text(encoding="utf-8")
    section = text.split("## Adding a fixable check", 1)[1].split("\n## ", 1)[0]
    files = FILE_BLOCK.findall(section)
    assert {name for name, _body in files} >= {"checks/thp/check.py", "fixers/thp.py", "tests/test_thp.py", "thp.zh_CN.json"}
    source, links = tmp_path / "src", tmp_path / "links"
    _copy_checkout(source)
    _import_path(source, links)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(links), os.environ.get("PYTHONPATH", "")]))}
    env.pop("DD_UPDATE_GOLDEN", None)
    env.pop("DD_UPDATE_README", None)
    where = _run(
        [sys.executable, "-c", "import decode_doctor, pathlib; print(pathlib.Path(decode_doctor.__file__).resolve())"], source, env
    )
    assert where.stdout.strip() == str(source / "doctor" / "__init__.py"), where.stdout + where.stderr
    for name, body in files:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(body, encoding="utf-8")
    # the commands after the files, in order: regenerate, translate, format; the last block's pytest is
    # the whole suite, which the gates below stand for (a copy's full run would take this test's budget)
    blocks = COMMAND_BLOCK.findall(section)
    for argv in (argv for block in blocks for argv in _commands(block)):
        if argv[:3] == [".venv/bin/python", "-m", "pytest"]:
            continue
        done = _run(argv, source, env)
        assert done.returncode == 0, f"{shlex.join(argv)}: exit {done.returncode}\n{(done.stdout + done.stderr)[-4000:]}"
    lint = _run([".venv/bin/ruff", "check", "checks/thp", "fixers/thp.py", "tests/test_thp.py"], source, env)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    gates = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *GATES], source, env)
    assert gates.returncode == 0, gates.stdout[-6000:] + gates.stderr[-2000:]
    listed = _run([sys.executable, "-m", "decode_doctor", "list", "--format", "json"], source, env)
    assert '"thp"' in listed.stdout and "THP001" in listed.stdout
    readme = (source / "README.md").read_text(encoding="utf-8")
    assert "| `thp` |" in readme  # the checks table, regenerated
    assert "THP001" in (source / "doctor/locale/decode_doctor.pot").read_text(encoding="utf-8")
