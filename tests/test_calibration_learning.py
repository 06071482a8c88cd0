"""A live bench teaches this host's calibration (issue 26): a run fit to learn from is kept as the
newest calibration with source "bench"; any other run says why it taught nothing."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import replace

import pytest

from decode_doctor.checks.budget.contract import DecodePrediction
from decode_doctor.checks.serving.observe import ServerLoad
from decode_doctor.checks.serving.predicted import against_prediction
from decode_doctor.engine.statefile import host_id
from decode_doctor.models import calibration

from .test_serving import bench_of, level

ENGINE = calibration.engine_version() or "0.3.36"


def _recorded(state, **changes) -> calibration.Calibration:
    base = calibration.Calibration(host_id(), "llama.cpp", ENGINE, 2, "Q4_0", 2e-3, 4e-11, 1e-10, 3e-11, 0.05, time.time() - 60)
    found = replace(base, **changes)
    calibration.record(state, found)
    return found


def _prediction(found: calibration.Calibration, tpot_s: float, **changes) -> DecodePrediction:
    """The prediction the decode budget would publish from found: plain data, keyed to that record."""
    made = DecodePrediction(
        engine=found.engine, engine_version=found.engine_version, threads=found.threads, weight_type=found.weight_type,
        depth=512, tpot_s=tpot_s, low_s=tpot_s * 0.95, high_s=tpot_s * 1.05, calibrated_at=found.measured_at, source=found.source,
    )  # fmt: skip
    return replace(made, **changes)


QUIET = ServerLoad(server_cores=1.9, foreign_cores=0.02, steal=0.0)


def test_a_quiet_run_at_the_calibrated_threads_is_kept_as_the_newest_calibration(tmp_path):
    found = _recorded(tmp_path)
    check = against_prediction(
        bench_of([level(1, [0.022] * 12)]), _prediction(found, 0.020), QUIET, None, tmp_path, "http://127.0.0.1:8080/v1"
    )
    assert check is not None and check.error == pytest.approx(0.10)
    assert check.learned.startswith("learned: ") and "now predicts 22.00 ms here (its step terms ×1.10)" in check.learned
    old, new = calibration.load(tmp_path)
    assert old == found and new.source == "bench" and not new.contended
    for name in ("fixed_s", "s_per_byte", "s_per_unit", "s_per_kv_byte"):
        assert getattr(new, name) == pytest.approx(getattr(found, name) * 1.1)
    assert "bench of http://127.0.0.1:8080/v1 at depth 512: TPOT p50 22.000 ms against 20.000 ms" in new.basis
    assert calibration.best(calibration.load(tmp_path), host_id(), ENGINE, 2, "Q4_0") == new
    assert "learned from a live bench just now" in new.describe()
    # the next run compares with the learned record and says so
    again = against_prediction(bench_of([level(1, [0.022] * 12)]), _prediction(new, 0.022), QUIET, None, tmp_path)
    assert again is not None and again.source == "bench" and abs(again.error) < 1e-9


@pytest.mark.parametrize(
    ("load", "threads", "changes", "measured", "why"),
    [
        (None, None, {}, 0.022, "the server's process was not seen on this host"),
        (ServerLoad(None, 0.0, 0.0), None, {}, 0.022, "the server's process was not seen on this host"),
        (ServerLoad(1.9, 0.4, 0.0), None, {}, 0.022, "the host was busy during the run (0.40 cores of other work, 0% stolen)"),
        (ServerLoad(1.9, 0.0, 0.2), None, {}, 0.022, "the host was busy during the run (0.00 cores of other work, 20% stolen)"),
        (ServerLoad(1.0, 0.0, 0.0), None, {}, 0.022, "the server did not run the calibrated 2 thread(s)"),
        (QUIET, 1, {}, 0.022, "the server did not run the calibrated 2 thread(s)"),
        (QUIET, None, {"bounded": True}, 0.022, "the prediction was raised to the bandwidth ceiling"),
        (QUIET, None, {}, 0.045, "a gap of +125% is another deployment"),
    ],
)
def test_a_run_unfit_to_learn_from_changes_nothing_and_says_why(tmp_path, load, threads, changes, measured, why):
    found = _recorded(tmp_path)
    check = against_prediction(bench_of([level(1, [measured] * 12)]), _prediction(found, 0.020, **changes), load, threads, tmp_path)
    assert check is not None and check.learned.startswith(f"not learned: {why}"), check.learned
    assert calibration.load(tmp_path) == [found]


def test_a_calibration_gone_from_the_records_is_not_invented(tmp_path):
    found = _recorded(tmp_path)
    (tmp_path / calibration.CACHE_NAME).unlink()
    check = against_prediction(bench_of([level(1, [0.021] * 12)]), _prediction(found, 0.020), QUIET, None, tmp_path)
    assert check is not None and check.learned == "not learned: the calibration this prediction came from is no longer recorded"
    assert calibration.load(tmp_path) == []


def test_nothing_is_learned_unless_asked(tmp_path):
    found = _recorded(tmp_path)
    check = against_prediction(bench_of([level(1, [0.022] * 12)]), _prediction(found, 0.020), QUIET, None)
    assert check is not None and check.learned == "" and calibration.load(tmp_path) == [found]


def test_the_learner_stays_out_of_the_budgets_report(tmp_path):
    from decode_doctor.checks.budget.contract import Budget

    found = _recorded(tmp_path)
    budget = Budget("m", "cpu", 512, 1, "fp16", 1e9, "file", 1e9, 1.0, 1.0, 0.0, 1e9, 2**34, "fits", 40.0, "given", 25.0, 40.0, 40.0)
    budget = dataclasses.replace(budget, prediction=_prediction(found, 0.02))
    data = budget.to_dict()
    assert "learn_with" not in data["prediction"] and data["prediction"]["tpot_s"] == 0.02
    json.dumps(data)
