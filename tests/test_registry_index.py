"""The registry's index (engine/index.py, issue 50): what selection, `check --help` and `explain` need is
known without importing every check, a run imports only the checks it runs (and the publishers of the
facts they read), and the index stays in sync with the checks and fixers it stands for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from decode_doctor.engine import index, plugins, registry

REPO = Path(__file__).resolve().parent.parent
HOST = REPO / "fixtures" / "hosts" / "healthy-server"

PROBE = """
import json, sys
from decode_doctor.cli.main import main
try:
    main({argv!r})
except SystemExit as exc:
    code = exc.code
else:
    code = 0
features = sorted(n for n in sys.modules if n.startswith(("decode_doctor.checks.", "decode_doctor.fixers.")))
print("PROBE:" + json.dumps({{"exit": code, "modules": features}}))
"""


def probe(*argv: str) -> dict[str, Any]:
    """Runs the CLI in a fresh interpreter; its exit code and the feature modules it imported."""
    proc = subprocess.run([sys.executable, "-c", PROBE.format(argv=list(argv))], capture_output=True, text=True, cwd=REPO)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PROBE:")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    result: dict[str, Any] = json.loads(lines[-1][len("PROBE:") :])
    result["output"] = proc.stdout + proc.stderr
    return result


def packages(modules: list[str]) -> set[str]:
    return {".".join(name.split(".")[:3]) for name in modules}


def test_the_index_is_in_sync_with_the_checks_and_fixers():
    """Rebuilt from a full import in a fresh interpreter, it is the file shipped."""
    proc = subprocess.run([sys.executable, "-m", "decode_doctor.engine.index", "--check"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, f"the registry's index is out of date: run `{index.COMMAND}` and commit {index.PATH.name}\n{proc.stderr}"


def test_the_index_holds_the_builtin_checks_and_no_error():
    data = index.read()
    assert data is not None and data["errors"] == [] and data["generated_by"] == index.COMMAND
    full = registry.build(plugins=False)
    assert [entry["name"] for entry in data["checks"]] == list(full.checks)
    assert [entry["name"] for entry in data["fixers"]] == list(full.fixers)


def test_a_selected_run_imports_only_the_check_it_runs():
    result = probe("check", "--select", "swappiness", "--root", str(HOST))
    assert result["exit"] == 0, result["output"][-2000:]
    assert "Ready" in result["output"]
    assert packages(result["modules"]) == {"decode_doctor.checks.swappiness"}, result["modules"]


def test_a_selected_run_imports_the_publishers_of_what_it_reads():
    """nvidia-container reads the gpu's and docker's facts: their packages load, no other feature's."""
    result = probe("check", "--select", "nvidia-container", "--root", str(HOST))
    assert result["exit"] in (0, 1, 3), result["output"][-2000:]
    assert packages(result["modules"]) == {"decode_doctor.checks.docker", "decode_doctor.checks.gpu"}, result["modules"]


def check_modules() -> set[str]:
    """The modules the built-in checks are defined in (a feature's commands.py may import its contracts)."""
    data = index.read()
    assert data is not None
    return {entry["class"].partition(":")[0] for entry in data["checks"]}


@pytest.mark.parametrize("argv", [["--help"], ["check", "--help"], ["report", "--help"]])
def test_help_imports_no_check(argv):
    result = probe(*argv)
    assert result["exit"] == 0, result["output"][-2000:]
    assert check_modules().isdisjoint(result["modules"]), result["modules"]


def test_the_registry_and_the_check_command_import_no_feature_module():
    code = (
        "import sys\n"
        "from decode_doctor.engine.registry import load\n"
        "from decode_doctor.cli.common import RunCommand\n"
        "registry = load()\n"
        "command = RunCommand('probe', params=[], callback=None)\n"
        "assert registry.names() and command.check_fields and registry.owner('SWAP001') == 'swappiness'\n"
        "print(sorted(n for n in sys.modules if n.startswith(('decode_doctor.checks.', 'decode_doctor.fixers.'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_check_help_lists_every_checks_flags_from_the_index():
    result = probe("check", "--help")
    data = index.read()
    assert data is not None
    flags = [str(item["flag"]["flag"]) for entry in data["checks"] for item in (entry["options"] or {"flags": []})["flags"]]
    assert flags and all(flag in result["output"] for flag in flags)


def test_explain_imports_only_the_check_of_the_code():
    result = probe("explain", "SWAP001")
    assert result["exit"] == 0 and "SWAP001" in result["output"]
    assert packages(result["modules"]) == {"decode_doctor.checks.swappiness"}


def test_a_check_option_given_on_the_command_line_is_parsed_by_its_type():
    """The flags come from the index; a value given is parsed by the options type, imported then."""
    result = probe("check", "--select", "swappiness", "--root", str(HOST), "--threads", "many")
    assert result["exit"] == 2 and "--threads" in result["output"], result["output"][-2000:]


def test_the_indexed_registry_agrees_with_the_full_one():
    full = registry.build(plugins=False)
    lazy = index.indexed()
    assert lazy is not None and lazy.lazy is not None
    assert lazy.names() == list(full.checks)
    assert lazy.claims == full.claims and lazy.origins == full.origins and lazy.errors == []

    def described(infos: list[registry.CheckInfo]) -> list[Any]:
        shown = []
        for info in infos:
            flags = [
                (name, flag.flag, flag.help, flag.multiple, flag.is_flag, flag.choices, flag.metavar, default)
                for name, flag, default in info.flags
            ]
            shown.append((info.name, info.codes, dict(info.retired), flags))
        return shown

    assert described(lazy.catalog()) == described(full.catalog())
    for name, cls in full.checks.items():
        assert lazy.checks[name] is cls
        if cls.facts_type is not None:
            assert lazy.publisher(cls.facts_type) is cls
    for name, cls in full.fixers.items():
        assert lazy.fixers[name] is cls
    assert lazy.lazy.full is None  # every lookup answered from the index and one package at a time


def test_an_index_that_differs_from_its_package_builds_the_full_registry(monkeypatch):
    data = index.read()
    assert data is not None
    stale = json.loads(json.dumps(data))
    (entry,) = [e for e in stale["checks"] if e["name"] == "swappiness"]
    entry["codes"] = entry["codes"][1:]
    monkeypatch.setattr(index, "read", lambda: stale)
    lazy = index.indexed()
    assert lazy is not None and lazy.lazy is not None
    cls = lazy.checks["swappiness"]
    assert lazy.lazy.full is not None  # the package did not match its entry: everything was imported and verified
    assert cls is lazy.lazy.full.checks["swappiness"] and len(lazy.checks) == len(lazy.lazy.full.checks)


def test_an_index_that_cannot_stand_for_the_install_is_not_used(monkeypatch, tmp_path):
    data = index.read()
    assert data is not None
    missing = {**data, "files": [*data["files"], "decode_doctor:models/gone.py"]}
    monkeypatch.setattr(index, "read", lambda: missing)
    assert index.indexed() is None  # a module removed from the install: the full import names it
    added = {**data, "modules": data["modules"][1:]}
    monkeypatch.setattr(index, "read", lambda: added)
    assert index.indexed() is None  # a module the index does not know
    monkeypatch.setattr(index, "read", lambda: {**data, "errors": ["a contract broken"]})
    assert index.indexed() is None


def test_an_installed_plugin_loads_the_full_way(monkeypatch, tmp_path):
    dist = tmp_path / "dd_probe-0.0.dist-info"
    dist.mkdir()
    (dist / "entry_points.txt").write_text("[console_scripts]\nprobe = dd_probe:main\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not plugins.plugins_declared((registry.CHECK_GROUP, registry.FIXER_GROUP))
    assert index.indexed() is not None
    (dist / "entry_points.txt").write_text("[decode_doctor.fixers]\nprobe = dd_probe\n")
    assert plugins.plugins_declared((registry.CHECK_GROUP, registry.FIXER_GROUP))
    assert index.indexed() is None


def test_a_selected_check_whose_module_does_not_import_is_a_load_error_as_before(monkeypatch):
    """What the full import says of a broken module, a run that imports it says too: the check is not
    loaded, the selection matches nothing, the error is the same."""
    from decode_doctor.app.service import sort_selectors

    monkeypatch.setitem(sys.modules, "decode_doctor.checks.swappiness.sysctl", None)  # its import fails
    full = registry.build(plugins=False)
    lazy = index.indexed()
    assert lazy is not None
    sorted_out = sort_selectors(lazy, ["swappiness"])
    assert sorted_out.unknown == ("swappiness",)
    (error,) = [e for e in full.errors if e.startswith("decode_doctor.checks.swappiness:")]
    assert lazy.errors == [error] and "swappiness" not in lazy.checks
