"""The joints between features are typed, and the type checker proves them: the mistakes that crashed
a check at run time (a fix on a code without one, a facts field read by name, a code by string) are
type errors. CI runs the whole package through mypy (.ci/run: tests/support/typecheck.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .support.typecheck import mypy

pytest.importorskip("mypy")

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


def test_mypy_reports_every_broken_joint(tmp_path: Path) -> None:
    source = tmp_path / "careless.py"
    source.write_text(WRONG)
    proc = mypy([str(source)], cache=tmp_path / "cache")
    flagged = {int(m.group(1)) for m in re.finditer(rf"{re.escape(source.name)}:(\d+): error", proc.stdout)}
    expected = {number for number, line in enumerate(WRONG.splitlines(), start=1) if "# LINE" in line}
    assert expected <= flagged, proc.stdout
    assert flagged <= expected, proc.stdout  # and nothing that is right
