"""The GPU health check on the hand-labelled real captures (fixtures/gpuhealth/real-labels.toml and
public/LABELS.toml): none crashes it, and none gets a fault code its label does not have. Recall is
not asserted: benchmarks/gpuhealth_captures.py reports it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "gpuhealth_captures.py"
# a false one of these sends someone to reseat a board, cool a rack or drain a GPU
FAULT_CODES = frozenset({"GPH001", "GPH002", "GPH010", "GPH020", "GPH021", "GPH022", "GPH023", "GPH024"})


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpuhealth_captures", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


bench = _benchmark()
CAPTURES = [c for c in bench.load_labels(shared=None) if c.path is not None]  # the copies in this repository only


def test_the_labels_cover_public_captures_with_and_without_faults():
    public = [c for c in CAPTURES if c.name.startswith("public/")]
    assert len(public) >= 25
    assert sum(not c.healthy for c in public) >= 10
    assert {c.kind.split(" (")[0] for c in public} >= {"nvidia-smi -q", "nvidia-smi table", "nvidia-smi nvlink -s", "nvidia-smi topo -m"}


def test_every_label_is_a_code_of_the_check():
    from decode_doctor.checks.gpuhealth.codes import CODES

    known = {code.code for code in CODES}
    for capture in bench.load_labels(shared=None):
        assert capture.sure | capture.ambiguous <= known, capture.name


@pytest.mark.parametrize("capture", CAPTURES, ids=[c.name for c in CAPTURES])
def test_a_real_capture_neither_crashes_the_check_nor_gets_a_fault_it_does_not_show(capture):
    outcome = bench.analyze_in_process(capture.path)
    assert outcome.crash is None, outcome.crash
    false = (outcome.found - capture.sure - capture.ambiguous) & FAULT_CODES
    assert not false, f"{capture.name}: {sorted(false)} found, labelled {sorted(capture.sure)}"
