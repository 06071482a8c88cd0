"""Type-checks doctor/, checks/ and fixers/ as the one package they install as (decode_doctor, with
decode_doctor.checks and decode_doctor.fixers), with the configuration in pyproject.toml.

The package directories are renamed at install time (package-dir), so both checkers are pointed at a
tree of links that has the installed shape, and every decode_doctor import resolves to it; paths in
their messages are mapped back to the repository's.
Usage: python tests/support/typecheck.py [mypy options] | --pyright [pyright options]; exit status:
the checker's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]


def package_tree(root: Path) -> Path:
    """root/decode_doctor: links to doctor/'s entries, checks/ and fixers/."""
    package = root / "decode_doctor"
    package.mkdir()
    for entry in sorted((REPO / "doctor").iterdir()):
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    (package / "checks").symlink_to(REPO / "checks")
    (package / "fixers").symlink_to(REPO / "fixers")
    return package


def mypy(targets: list[str], extra: list[str] | None = None, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    """mypy over targets (-p decode_doctor, or files) with the package importable as installed."""
    with tempfile.TemporaryDirectory(prefix="dd-typecheck-") as tmp:
        package_tree(Path(tmp))
        command = [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml")]
        command += ["--cache-dir", str(cache or REPO / ".mypy_cache"), *(extra or []), *targets]
        return subprocess.run(command, cwd=tmp, capture_output=True, text=True, env={**os.environ, "MYPYPATH": tmp})


def pyright_config(root: Path) -> Path:
    """root/pyrightconfig.json: pyproject.toml's [tool.pyright] with root as the project root, where
    pyright resolves decode_doctor (a project at the repository would find no such directory, and the
    editable install's import hook is nothing pyright follows)."""
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pyright"]
    config = root / "pyrightconfig.json"
    config.write_text(json.dumps({**settings, "include": ["decode_doctor"]}, indent=1))
    return config


def pyright(extra: list[str], targets: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """pyright (the [tool.pyright] settings) over targets (files; by default the package) in the same
    installed shape. pyright is the pip package (the test extra): it fetches its Node package on first use."""
    with tempfile.TemporaryDirectory(prefix="dd-pyright-") as tmp:
        package_tree(Path(tmp))
        config = pyright_config(Path(tmp))
        command = [sys.executable, "-m", "pyright", "--project", str(config), "--pythonpath", sys.executable, *extra, *(targets or [])]
        env = {**os.environ, "PYRIGHT_PYTHON_IGNORE_WARNINGS": "1"}  # no "a newer pyright exists" on every run
        return subprocess.run(command, cwd=tmp, capture_output=True, text=True, env=env)


def main(argv: list[str]) -> int:
    proc = pyright(argv[1:]) if argv[:1] == ["--pyright"] else mypy(["-p", "decode_doctor"], argv)
    for stream, text in ((sys.stdout, proc.stdout), (sys.stderr, proc.stderr)):
        text = text.replace("decode_doctor/checks/", "checks/").replace("decode_doctor/fixers/", "fixers/")
        stream.write(text.replace("decode_doctor/", "doctor/"))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
