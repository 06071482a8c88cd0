"""The distribution is the tool: the wheel and the sdist that `python -m build` makes hold every module
and data file of doctor/, checks/ and fixers/ (compared with the source tree whole, file by file), their
metadata passes `twine check`, and the wheel installed into a fresh venv, away from the checkout, runs
every command with every check loaded.

The README's first command itself (`pip install .` with its dependencies from the index) runs in
.ci/run through tests/support/firstrun.py; here the wheel is installed without dependencies and finds
them in this venv through a .pth line, which adds their directory but never this venv's own .pth
files, so the editable install's import hook (which would resolve a missing package from the checkout)
stays out."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = {"doctor": "decode_doctor", "checks": "decode_doctor/checks", "fixers": "decode_doctor/fixers"}
SKIPPED_PARTS = {"__pycache__"}
SKIPPED_SUFFIXES = {".pyc", ".mo"}  # bytecode, and catalogs the build compiles from the .po beside them


def source_files() -> set[str]:
    """Every file of the three source trees (tracked by git where this is a checkout, else on disk),
    as the path it has in the installed package."""
    found: set[str] = set()
    for directory, package in ROOTS.items():
        for path in (REPO / directory).rglob("*"):
            relative = path.relative_to(REPO / directory)
            if path.is_file() and not SKIPPED_PARTS & set(relative.parts) and path.suffix not in SKIPPED_SUFFIXES:
                found.add(f"{package}/{relative.as_posix()}")
    tracked = _tracked()
    return {name for name in found if tracked is None or _source_path(name) in tracked}


def _source_path(installed: str) -> str:
    for directory, package in sorted(ROOTS.items(), key=lambda item: -len(item[1])):
        if installed.startswith(package + "/"):
            return f"{directory}/{installed[len(package) + 1 :]}"
    raise ValueError(installed)


def _tracked() -> set[str] | None:
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        return None
    proc = subprocess.run([git, "ls-files", "-co", "--exclude-standard", *ROOTS], cwd=REPO, capture_output=True, text=True)
    return set(proc.stdout.splitlines()) if proc.returncode == 0 else None


def compiled_catalogs(files: set[str]) -> set[str]:
    return {name[: -len(".po")] + ".mo" for name in files if name.endswith(".po")}


@cache
def _built(out: str) -> tuple[Path, Path]:
    """The wheel and the sdist, built by `python -m build` from a copy of the project (a build writes
    build/ and *.egg-info beside its sources; the checkout stays as it is)."""
    pytest.importorskip("build")
    work = Path(out)
    project = work / "project"
    project.mkdir(parents=True)
    for name in ("pyproject.toml", "setup.py", "README.md", "babel.cfg"):
        shutil.copy(REPO / name, project / name)
    for directory in ROOTS:
        shutil.copytree(REPO / directory, project / directory, ignore=shutil.ignore_patterns("__pycache__", "*.mo", "*.pyc"))
    dist = work / "dist"
    command = [sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(dist), str(project)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = dist.glob("decode_doctor-*.whl")
    (sdist,) = dist.glob("decode_doctor-*.tar.gz")
    return wheel, sdist


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _built(str(tmp_path_factory.mktemp("distribution")))


def test_the_wheel_holds_every_module_and_data_file_and_nothing_else(built: tuple[Path, Path]) -> None:
    wheel, _sdist = built
    names = {name for name in zipfile.ZipFile(wheel).namelist() if ".dist-info/" not in name}
    expected = source_files()
    assert len(expected) > 200  # the comparison is over the whole tree, not a few names
    assert sorted(expected - names) == []  # e.g. doctor/models/*, which find_packages skipped without an __init__.py
    assert sorted(names - expected - compiled_catalogs(expected)) == []
    assert compiled_catalogs(expected) <= names


def test_the_sdist_holds_every_source_file_and_builds_the_same_wheel(built: tuple[Path, Path], tmp_path: Path) -> None:
    wheel, sdist = built
    with tarfile.open(sdist) as archive:
        members = {member.name.split("/", 1)[1] for member in archive.getmembers() if member.isfile() and "/" in member.name}
        if hasattr(tarfile, "data_filter"):  # Python 3.10.12 and later
            archive.extractall(tmp_path, filter="data")
        else:
            archive.extractall(tmp_path)
    missing = sorted(_source_path(name) for name in source_files() if _source_path(name) not in members)
    assert missing == []
    assert {"pyproject.toml", "setup.py", "README.md"} <= members
    # a wheel built from the sdist (as pip does from an index) is the same wheel, file for file
    (unpacked,) = tmp_path.glob("decode_doctor-*")
    out = tmp_path / "again"
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out), str(unpacked)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (again,) = out.glob("*.whl")
    assert set(zipfile.ZipFile(again).namelist()) == set(zipfile.ZipFile(wheel).namelist())


def test_the_metadata_is_valid_and_has_one_version(built: tuple[Path, Path]) -> None:
    pytest.importorskip("twine")
    wheel, sdist = built
    proc = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from decode_doctor import __version__

    assert wheel.name.startswith(f"decode_doctor-{__version__}-") and sdist.name == f"decode_doctor-{__version__}.tar.gz"
    metadata = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert f"\nVersion: {__version__}\n" in text and "\nRequires-Python: >=3.10\n" in text


def fresh_venv(wheel: Path, venv: Path) -> Path:
    """A new venv holding only the wheel; this venv's dependencies reachable through a .pth line.
    Returns its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)]
    proc = subprocess.run(pip, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    probe = [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    site = Path(subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip())
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "dd-test-dependencies.pth").write_text("".join(f"{path}\n" for path in sorted(ours)))
    return site


@pytest.fixture(scope="module")
def installed(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("installed") / "venv"
    fresh_venv(built[0], venv)
    return venv


def run_installed(venv: Path, *args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "DD_EMITTED_LOG")}
    command = [str(venv / "bin" / "decode-doctor"), *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env={**clean, "NO_COLOR": "1", **(env or {})}, timeout=300)


def assert_whole(proc: subprocess.CompletedProcess[str], *codes: int) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode in (codes or (0,)), out[-3000:]
    assert "Traceback" not in out and "could not load" not in out and "ModuleNotFoundError" not in out, out[-3000:]


def test_the_installed_wheel_is_the_whole_tool(installed: Path, tmp_path: Path) -> None:
    where = installed / "bin" / "python"
    located = subprocess.run(
        [str(where), "-c", "import decode_doctor; print(decode_doctor.__file__)"], capture_output=True, text=True, cwd=tmp_path
    )
    assert str(installed) in located.stdout and str(REPO) not in located.stdout  # the wheel, never the checkout
    assert_whole(run_installed(installed, "--help", cwd=tmp_path))
    assert_whole(run_installed(installed, "estimate", "--help", cwd=tmp_path))
    listing = run_installed(installed, "list", "--format", "json", cwd=tmp_path)
    assert_whole(listing)
    import json

    from decode_doctor.engine.registry import load

    listed = json.loads(listing.stdout)
    assert listed["load_errors"] == [] and {row["check"] for row in listed["checks"]} == set(load().checks)
    assert_whole(run_installed(installed, "explain", "GPU020", cwd=tmp_path))


def test_the_installed_wheel_estimates_checks_and_runs_the_agent(installed: Path, tmp_path: Path) -> None:
    model = tmp_path / "gpt-oss-20b"
    model.mkdir()
    shutil.copy(REPO / "fixtures" / "models" / "configs" / "gpt-oss-20b.json", model / "config.json")
    estimate = run_installed(installed, "estimate", "--model", str(model), "--gpu", "H100-SXM", "--context", "8192", cwd=tmp_path)
    assert_whole(estimate)
    assert "tok/s" in estimate.stdout
    host = REPO / "fixtures" / "hosts" / "swap60-rhel7"
    state = {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    # another host's files: its memory bandwidth is not judged here (exit 3); what counts is that all loaded
    assert_whole(run_installed(installed, "check", "--root", str(host), cwd=tmp_path, env=state), 3)
    assert_whole(run_installed(installed, "--lang", "zh-CN", "check", "--root", str(host), cwd=tmp_path, env=state), 3)
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    agent = run_installed(
        installed, "agent", "--once", "--root", str(host), "--textfile-directory", str(textfiles), cwd=tmp_path, env=state
    )
    assert_whole(agent, 0, 1, 3)  # another host's files: what only a live host says is not judged there
    (prom,) = textfiles.glob("*.prom")
    assert re.search(r"^decode_doctor_load_errors\{host=\"[^\"]+\"\} 0$", prom.read_text(), re.M)


@pytest.fixture(scope="module")
def broken(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of the issue that found this: installed, then its decode_doctor/models removed."""
    venv = tmp_path_factory.mktemp("broken") / "venv"
    site = fresh_venv(built[0], venv)
    shutil.rmtree(site / "decode_doctor" / "models")
    (site / "decode_doctor" / "cli" / "undo.py").unlink()
    return venv


def test_a_module_that_did_not_load_is_never_ready(broken: Path, tmp_path: Path) -> None:
    host = REPO / "fixtures" / "hosts" / "swap60-rhel7"
    state = {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    helped = run_installed(broken, "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "Traceback" not in helped.stdout + helped.stderr, helped.stderr[-3000:]
    assert "decode_doctor.checks.planning.commands: ModuleNotFoundError" in helped.stdout  # named, not a crash
    undo = run_installed(broken, "undo", "--list", cwd=tmp_path)
    assert undo.returncode == 3 and "Traceback" not in undo.stderr, undo.stderr
    assert "the command undo could not load: decode_doctor.cli.undo: ModuleNotFoundError" in undo.stderr
    text = run_installed(broken, "check", "--root", str(host), "--select", "swappiness", cwd=tmp_path, env=state)
    assert text.returncode == 3, text.stdout + text.stderr
    assert "Ready" not in text.stdout and "could not load: decode_doctor.checks.artifacts: ModuleNotFoundError" in text.stdout
    report = tmp_path / "r.json"
    run_installed(broken, "check", "--root", str(host), "--format", "json", "-o", str(report), cwd=tmp_path, env=state)
    import json

    data = json.loads(report.read_text())
    assert data["summary"]["verdict"] == "incomplete" and data["summary"]["outcome"] == "incomplete"
    assert data["summary"]["exit_code"] == 3 and data["summary"]["load_errors"] == len(data["load_errors"]) >= 5
    merged = run_installed(broken, "merge", str(report), "--format", "json", cwd=tmp_path, env=state)
    assert json.loads(merged.stdout)["hosts"][0]["verdict"] == "incomplete", merged.stdout[-2000:]
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    agent = run_installed(broken, "agent", "--once", "--root", str(host), "--textfile-directory", str(textfiles), cwd=tmp_path, env=state)
    assert agent.returncode == 3, agent.stdout + agent.stderr
    (prom,) = textfiles.glob("*.prom")
    metrics = prom.read_text()
    assert re.search(r'^decode_doctor_verdict\{host="[^"]+",verdict="incomplete"\} 1$', metrics, re.M)
    assert re.search(r"^decode_doctor_load_errors\{host=\"[^\"]+\"\} [5-9]$", metrics, re.M)
