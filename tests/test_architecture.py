"""The architecture holds: a feature is added by files alone, no module outside a feature imports
its names, the engine and the reports name no check, and every package is installed."""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import sys
from pathlib import Path

import pytest

from .conftest import PLUGINS, REPO, run_dd, tree_digest

SOURCES = {"decode_doctor": REPO / "doctor", "decode_doctor.checks": REPO / "checks", "decode_doctor.fixers": REPO / "fixers"}
FEATURES = sorted(p.name for p in (REPO / "checks").iterdir() if (p / "__init__.py").is_file())


@functools.cache
def _modules() -> list[tuple[str, Path]]:
    found = []
    for package, root in SOURCES.items():
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join([package, *parts])
            if package == "decode_doctor" and parts and parts[0] in ("checks", "fixers"):
                continue
            found.append((name, path))
    return found


@functools.cache
def _imports(name: str, path: Path) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((module, [alias.name for alias in node.names]))
    return found


def _feature_of(module: str) -> str | None:
    match = re.match(r"decode_doctor\.checks\.([a-z_]+)", module)
    return match.group(1) if match else None


CONTRACT = "contract"  # the one public module of a feature that other features may import


def test_features_meet_only_through_their_published_contracts():
    """A feature reads another only through that feature's contract module; a contract imports nothing
    of its feature but its codes; a fixer takes its own feature's public names."""
    offences = []
    for name, path in _modules():
        own = _feature_of(name)
        fixer_of = name.rsplit(".", 1)[1] if name.startswith("decode_doctor.fixers.") else None
        for module, names in _imports(name, path):
            target = _feature_of(module)
            if module == "decode_doctor.checks" and names:
                target = names[0]
            if name.endswith("." + CONTRACT) and own is not None and target == own and module.rsplit(".", 1)[-1] not in ("codes",):
                offences.append(f"{name} (a contract) imports {module}: a contract holds types and imports only its codes")
            if target is None or target == own:
                continue
            if module == f"decode_doctor.checks.{target}.{CONTRACT}":
                continue  # the typed joint: facts and value types of another feature
            if fixer_of == target:  # a feature's fixer takes its public names
                private = [n for n in names if n.startswith("_")]
                if private:
                    offences.append(f"{name} imports private names {private} from {module}")
                continue
            offences.append(f"{name} imports {module}")
    assert offences == []


def _command_modules() -> set[str]:
    """A feature's command modules: commands.py, the modules its commands import when they run (the
    work behind a command, imported inside the command's function), and, of what those import of their
    own feature in turn, the modules that use the application layer too (the command's work split in
    modules; a module the feature's checks share stays theirs), and the modules only command modules import."""
    modules = dict(_modules())
    found: set[str] = set()
    todo: list[tuple[str, bool]] = []
    for name, path in modules.items():
        if not (name.endswith(".commands") and _feature_of(name)):
            continue
        found.add(name)
        package = name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.ImportFrom) and inner.level == 1 and inner.module:
                        todo.append((f"{package}.{inner.module}", True))
    while todo:
        name, direct = todo.pop()
        if name in found or name not in modules:
            continue
        imported = _imports(name, modules[name])
        if not direct and not any(module.startswith("decode_doctor.app") for module, _names in imported):
            continue
        found.add(name)
        todo.extend((module, False) for module, _names in imported if _feature_of(module) == _feature_of(name))
    importers: dict[str, set[str]] = {}
    for name, path in modules.items():
        for module, _names in _imports(name, path):
            importers.setdefault(module, set()).add(name)
    grown = True
    while grown:  # a module only command modules import is the command's too (its text, its types)
        grown = False
        for name in modules:
            users = importers.get(name, set())
            if name not in found and _feature_of(name) and users and users <= found:
                found.add(name)
                grown = True
    return found


def test_checks_use_the_application_layer_and_nothing_above_it():
    """Nothing under checks/ imports the CLI, the reports or the fix executor; only the modules behind a
    feature's command use the application layer, and no check or fixer imports one of those."""
    commands = _command_modules()
    offences = []
    for name, path in _modules():
        if not name.startswith("decode_doctor.checks."):
            continue
        for module, _ in _imports(name, path):
            if module.startswith(("decode_doctor.cli", "decode_doctor.reports", "decode_doctor.fixes")):
                offences.append(f"{name} imports {module}")
            if module.startswith("decode_doctor.app") and name not in commands:
                offences.append(f"{name} imports {module}, but is no command module")
            if module in commands and name not in commands:
                offences.append(f"{name} imports the command module {module}")
    assert offences == []


def test_commands_go_through_the_application_layer():
    """The CLI reads options and writes what the application layer hands back: it imports nothing of
    the reports, the fix executor or a feature (but the feature commands it lists)."""
    offences = []
    for name, path in _modules():
        if not name.startswith("decode_doctor.cli"):
            continue
        for module, _ in _imports(name, path):
            if module.startswith(("decode_doctor.reports", "decode_doctor.fixes")):
                offences.append(f"{name} imports {module}")
            if _feature_of(module) and not module.endswith(".commands"):
                offences.append(f"{name} imports {module}")
    assert offences == []


def test_the_engine_and_the_reports_name_no_code():
    from decode_doctor.engine.registry import load

    codes = set(load().codes())
    named = []
    for name, path in _modules():
        if name.startswith(("decode_doctor.checks", "decode_doctor.fixers")):
            continue
        text = path.read_text()
        named += [f"{name}: {code}" for code in sorted(codes) if re.search(rf"\b{code}\b", text)]
    assert named == []


NEW_FEATURE = {
    "__init__.py": '"""A feature added by files alone."""\n',
    "codes.py": (
        "from decode_doctor.engine import Code, Severity\n\n"
        'NEW001 = Code("NEW001", "A new finding", Severity.INFO, "w", "y", "f", example="e")\n'
    ),
    "check.py": (
        "from decode_doctor.engine import Check, Context, Finding\n\n"
        "from .codes import NEW001\n\n\n"
        "class NewFeature(Check):\n"
        '    name = "new-feature"\n'
        '    description = "a feature that is only files"\n'
        "    codes = (NEW001,)\n\n"
        "    def run(self, ctx: Context) -> list[Finding]:\n"
        '        return [self.finding(NEW001, "found by a package nobody listed")]\n'
    ),
}


def test_a_new_check_package_loads_after_pip_install_with_no_other_edit(tmp_path):
    """Packages are discovered (setup.py), not listed: a copy of this tree with one more directory under
    checks/ installs it, and the registry loads its check."""
    import shutil
    import subprocess

    copy = tmp_path / "src"
    ignored = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in ("doctor", "checks", "fixers"):
        shutil.copytree(REPO / name, copy / name, ignore=ignored)  # a clone or a source archive alike: no git asked
    for name in ("setup.py", "pyproject.toml", "README.md", "babel.cfg", "LICENSE"):
        if (REPO / name).is_file():
            shutil.copy2(REPO / name, copy / name)
    feature = copy / "checks" / "ddnewfeature"
    feature.mkdir()
    for name, text in NEW_FEATURE.items():
        (feature / name).write_text(text)
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-compile", "--target", str(site)]
    installed = subprocess.run([*pip, str(copy)], capture_output=True, text=True, cwd=tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (site / "decode_doctor/checks/ddnewfeature/check.py").is_file()
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = "import decode_doctor, json, sys; print(decode_doctor.__file__)"
    where = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path).stdout
    assert where.startswith(str(site)), where  # the installed copy, not this checkout
    listing = subprocess.run(
        [sys.executable, "-m", "decode_doctor", "list", "--format", "json"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    checks = {c["check"]: c for c in json.loads(listing.stdout)["checks"]}
    assert checks["new-feature"]["codes"][0]["code"] == "NEW001" and checks["new-feature"]["origin"] == "builtin"


def test_every_feature_has_its_home():
    """checks/<feature>/ holds the checks; a fixer module, if any, is named after its feature."""
    fixers = {p.stem for p in (REPO / "fixers").glob("*.py") if p.stem != "__init__"}
    assert fixers <= set(FEATURES)


@pytest.fixture
def sample_plugin(tmp_path: Path) -> dict[str, str]:
    """An installed plugin as pip leaves one: a dist-info with entry points, the code on the path."""
    dist = tmp_path / "site" / "dd_sample_feature-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dd-sample-feature\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[decode_doctor.checks]\nsample = dd_sample_feature\n\n[decode_doctor.fixers]\nsample = dd_sample_feature.fixer\n"
    )
    return {"PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(PLUGINS)])}


def test_a_plugin_adds_a_check_a_fixer_an_environment_row_a_metric_and_an_html_row(sample_plugin, tmp_path):
    root = tmp_path / "host"
    (root / "etc").mkdir(parents=True)
    (root / "etc/sample-feature.conf").write_text("batching = off\n")
    listing = json.loads(run_dd("list", "--format", "json", env=sample_plugin).stdout)
    (sample,) = [c for c in listing["checks"] if c["check"] == "sample"]
    assert sample["origin"] == "plugin dd-sample-feature" and sample["codes"][0]["fix"] == "safe"
    assert listing["load_errors"] == []
    args = ("check", "--select", "sample", "--root", str(root))
    report = json.loads(run_dd(*args, "--format", "json", env=sample_plugin).stdout)
    assert report["findings"][0]["fix"]["fixer"] == "sample"
    assert {"name": "sample batching", "value": "off", "judged": "SAMPLE001"} in report["environment"]
    assert report["facts"]["sample"] == {"setting": "off"}
    assert 'decode_doctor_sample_batching{host="' in run_dd(*args, "--format", "prometheus", env=sample_plugin).stdout
    page = run_dd(*args, "--format", "html", env=sample_plugin).stdout
    assert "<h2>Sample feature</h2>" in page and "<th>batching</th><td>off</td>" in page
    before = tree_digest(root)
    fixed = run_dd(*args, "--fix", "--yes", "--state-dir", str(tmp_path / "state"), env=sample_plugin)
    assert "SAMPLE001: resolved" in fixed.stdout, fixed.stdout + fixed.stderr
    assert (root / "etc/sample-feature.conf").read_text() == "batching = on\n"
    assert run_dd("undo", "--state-dir", str(tmp_path / "state"), env=sample_plugin).returncode == 0
    assert tree_digest(root) == before


LINE_BOUND = 500  # a module of the project: doctor/, checks/, fixers/, benchmarks/, deploy/, setup.py
TEST_LINE_BOUND = 800  # a test module (tests/, fixtures/)
TEST_TREES = ("tests", "fixtures")
NOT_SOURCE = ("build", "dist")  # build outputs; hidden folders (.venv, .git) and *.egg-info are skipped too


def _project_modules() -> list[Path]:
    """Every .py file of the repository that is the project's own: not a virtual environment, not a build."""
    found: list[Path] = []
    for entry in sorted(REPO.iterdir()):
        if entry.name.startswith(".") or entry.name in NOT_SOURCE or entry.name.endswith(".egg-info"):
            continue
        if entry.is_dir():
            found.extend(sorted(entry.rglob("*.py")))
        elif entry.suffix == ".py":
            found.append(entry)
    return found


def test_no_module_passes_its_line_bound_without_a_reason():
    """Issues 37 and 50: modules stay small enough to read whole; a longer one says why in its docstring
    ("Over 500 lines: …", "Over 800 lines: …"). The rule covers every package, shipped or not (doctor/,
    checks/, fixers/, benchmarks/, deploy/, setup.py) at 500 lines. Test modules (tests/, tests/support/,
    fixtures/) get 800: a test module holds one subject's cases with their inputs written out in full (a
    capture, a table of expected readings), which reads best beside the cases and would only be split by
    count, not by seam; past 800 the same reason mechanism applies."""
    import ast

    long = []
    for path in _project_modules():
        relative = path.relative_to(REPO)
        bound = TEST_LINE_BOUND if relative.parts[0] in TEST_TREES else LINE_BOUND
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        if lines > bound and f"Over {bound} lines" not in (ast.get_docstring(ast.parse(text)) or ""):
            long.append(f'{relative}: {lines} lines (over {bound}, no "Over {bound} lines: …" reason in its docstring)')
    assert long == [], "modules past their line bound without a reason:\n" + "\n".join(long)
