"""The joints between features are typed, and the type checkers prove them: the mistakes that crashed
a check at run time (a fix on a code without one, a facts field read by name, a code by string) are
type errors, and so is a cross-module mistake (a name or module that does not exist, a wrong argument
type). CI runs the whole package through mypy and pyright (.ci/run: tests/support/typecheck.py); each
test here plants errors and asserts that the checker, configured as the gate is, reports every one."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .support.typecheck import mypy, pyright

WRONG = """
from decode_doctor.checks.bandwidth.contract import BandwidthFacts
from decode_doctor.checks.gpu.contract import GpuFacts
from decode_doctor.checks.images.codes import IMG005, IMG014, QuarantineParams, RenameParams
from decode_doctor.engine import Check, Context, Finding, FixRef


class Careless(Check):
    name = "careless"

    def run(self, ctx: Context) -> list[Finding]:
        rename = FixRef("rename", RenameParams("b.png", None))
        one = self.finding(IMG014, "m", fix=rename)  # LINE fix on a code without one
        two = self.finding(IMG005, "m", fix=FixRef("q", QuarantineParams("d", "m", "r", None)))  # LINE fix of another kind
        three = self.finding("IMG005", "m")  # LINE a code by string
        facts = ctx.facts.get("bandwidth")  # LINE facts by name
        measured = ctx.facts.get(BandwidthFacts)
        speed = measured.cpu.measured.read_gbps if measured else 0.0
        devices = ctx.facts.get(GpuFacts)
        missing = devices.gpus if devices else []  # LINE a field the contract does not have
        return [one, two, three]
"""

# A module outside the package that reaches into three of its packages (checks, engine, models), as a
# feature does: every marked line is an error, and the rest is right.
CROSS = """
from pathlib import Path

from decode_doctor.checks.gpu.contract import GpuDevices  # LINE a name the gpu contract does not define
from decode_doctor.engine.statefiles import read_state  # LINE a module the engine does not have
from decode_doctor.engine.statefile import read_records
from decode_doctor.models.calibration.model import Calibration
from decode_doctor.models.ggufheader import read_gguf_header

records = read_records("calibrations.json", Calibration)  # LINE a str where the engine takes a Path
header = read_gguf_header(records[0])  # LINE a record where the models package takes a Path
fine = read_records(Path("calibrations.json"), Calibration)
"""


def _unavailable(reason: str) -> None:
    """A checker that cannot run here: skipped on a developer's machine, a failure in CI, where a
    skipped gate would pass for one that ran."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: CI runs every type gate")
    pytest.skip(reason)


def _run_mypy(source: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    if importlib.util.find_spec("mypy") is None:
        _unavailable("mypy is not installed (pip install -e '.[test]')")
    return mypy([str(source)], cache=tmp_path / "cache"), rf"{re.escape(source.name)}:(\d+): error"


def _run_pyright(source: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    if importlib.util.find_spec("pyright") is None:
        _unavailable("pyright is not installed (pip install -e '.[test]')")
    if shutil.which("node") is None:
        _unavailable("pyright needs node on PATH for its Node package")
    return pyright([], [str(source)]), rf"{re.escape(source.name)}:(\d+):\d+ - error"


CHECKERS = {"mypy": _run_mypy, "pyright": _run_pyright}


def _flagged_and_expected(checker: str, text: str, tmp_path: Path) -> tuple[set[int], set[int], str]:
    """The lines the checker reports as errors in text, the lines marked # LINE, and its output."""
    source = tmp_path / "careless.py"
    source.write_text(text)
    proc, error = CHECKERS[checker](source, tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the gate fails (not 0; not 2+, a crash)
    flagged = {int(m.group(1)) for m in re.finditer(error, proc.stdout)}
    expected = {number for number, line in enumerate(text.splitlines(), start=1) if "# LINE" in line}
    return flagged, expected, proc.stdout


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_checker_reports_every_cross_module_error(checker: str, tmp_path: Path) -> None:
    flagged, expected, output = _flagged_and_expected(checker, CROSS, tmp_path)
    assert flagged == expected, output  # every planted error, and nothing that is right


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_checker_reports_every_broken_joint(checker: str, tmp_path: Path) -> None:
    flagged, expected, output = _flagged_and_expected(checker, WRONG, tmp_path)
    assert flagged == expected, output
