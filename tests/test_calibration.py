"""The calibrated decode prediction (issue 26): the step model's fit, its records, and estimate's rows."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from decode_doctor.engine.statefile import host_id
from decode_doctor.models import calibration
from decode_doctor.models.calibration import Calibration, Run, measure
from decode_doctor.models.randomgguf import Shape

from .support.harness import cli
from .support.llamaserver import available

TINY_SMALL = Shape(hidden=128, layers=2, ffn=256, heads=2, kv_heads=2, vocab=512)
TINY_LARGE = Shape(hidden=256, layers=4, ffn=512, heads=4, kv_heads=1, vocab=1024)
TRUE = {"fixed": 1.5e-3, "per_byte": 2.5e-11, "per_unit": 1.2e-10, "per_kv": 3e-11}


def _calibration(**changes: object) -> Calibration:
    base = Calibration(
        host=host_id(),
        engine="llama.cpp",
        engine_version=calibration.engine_version() or "0.3.36",
        threads=2,
        weight_type="F16",
        fixed_s=TRUE["fixed"],
        s_per_byte=TRUE["per_byte"],
        s_per_unit=TRUE["per_unit"],
        s_per_kv_byte=TRUE["per_kv"],
        spread=0.05,
        measured_at=time.time(),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_the_fit_recovers_the_step_constants_from_its_decodes(tmp_path, monkeypatch):
    """Decode times made from known constants give those constants back: the models' sizes separate
    the fixed cost from the bytes, their head layouts the query work from the cache bytes. Every run
    is repeated until two passes agree; here they agree at once."""
    monkeypatch.setattr(measure, "SMALL", TINY_SMALL)
    monkeypatch.setattr(measure, "LARGE", TINY_LARGE)
    monkeypatch.setattr(measure, "engine_version", lambda: "0.3.36")
    calls: list[tuple[str, int, str]] = []

    def fake_decode(model: Path, threads: int, depth: int, tokens: int = 32, timeout_s: float = 0, prompt: str = "batched") -> Run:
        calls.append((model.name, depth, prompt))
        weights, units, kv = calibration.features(model, depth)
        seconds = TRUE["fixed"] + weights * TRUE["per_byte"] + units * TRUE["per_unit"] + kv * TRUE["per_kv"]
        return Run(seconds, 0.01, 0.0, 0.0)

    monkeypatch.setattr(measure, "time_decode", fake_decode)
    said: list[str] = []
    found = calibration.calibrate(2, "Q8_0", tmp_path / "state", said.append)
    assert found.fixed_s == pytest.approx(TRUE["fixed"], rel=1e-6)
    assert found.s_per_byte == pytest.approx(TRUE["per_byte"], rel=1e-6)
    assert found.s_per_unit == pytest.approx(TRUE["per_unit"], rel=1e-6)
    assert found.s_per_kv_byte == pytest.approx(TRUE["per_kv"], rel=1e-6)
    assert found.spread == calibration.MIN_SPREAD and not found.contended and found.passes == 2 and found.repeatability == 0
    assert len(calls) == 8 and {prompt for _name, _depth, prompt in calls} == {"batched"} and found.prompt == "batched"
    assert calibration.load(tmp_path / "state") == [found]
    assert any("calibrated in" in line for line in said) and any("pass 2 (of 2 to 3)" in line for line in said)
    assert not list(tmp_path.glob("**/*.gguf"))  # the models are written to a temporary folder and gone


def test_passes_repeat_until_they_agree_and_the_interval_is_as_wide_as_they_lay_apart(tmp_path, monkeypatch):
    """A host that drifts: the first pass 20 % slower than the next two. A third pass is taken, each
    point is the median of its passes, and the interval is the passes' half-range near that size;
    the steal and other work it saw widen it further, and the calibration is kept, not refused."""
    monkeypatch.setattr(measure, "SMALL", TINY_SMALL)
    monkeypatch.setattr(measure, "LARGE", TINY_LARGE)
    monkeypatch.setattr(measure, "engine_version", lambda: "0.3.36")
    monkeypatch.setattr("decode_doctor.engine.workers.usable_cpus", lambda: 2)
    counted: dict[tuple[str, int], int] = {}

    def drifting(model: Path, threads: int, depth: int, tokens: int = 32, timeout_s: float = 0, prompt: str = "batched") -> Run:
        seen = counted[(model.name, depth)] = counted.get((model.name, depth), 0) + 1
        weights, units, kv = calibration.features(model, depth)
        seconds = TRUE["fixed"] + weights * TRUE["per_byte"] + units * TRUE["per_unit"] + kv * TRUE["per_kv"]
        return Run(seconds * (1.2 if seen == 1 else 1.0), 0.01, 0.2, 0.023)

    monkeypatch.setattr(measure, "time_decode", drifting)
    found = calibration.calibrate(2, "F16", tmp_path / "state")
    assert found.passes == 3 and set(counted.values()) == {3}
    assert found.s_per_byte == pytest.approx(TRUE["per_byte"], rel=1e-6)  # the median of three: the two that agree
    assert found.repeatability == pytest.approx(0.1, rel=1e-6)  # half of 20 % over the median
    assert found.contended and found.widened == pytest.approx(0.023 + 0.2 / 2)
    assert found.spread == pytest.approx(0.1 + found.widened)
    predicted = calibration.predict(found, 1e8, 0.0, 0.0, 0)
    assert predicted.spread == pytest.approx(max(calibration.MIN_SPREAD, 0.1) + found.widened, rel=1e-3)
    assert "beside other work (0.20 cores, 2.3% stolen): its interval widened by 12.3%" in found.describe()
    assert calibration.best([found], found.host, "0.3.36", 2, "F16") == found  # kept and used, widened


def test_a_third_point_near_the_models_size_takes_over_past_the_small_ones(tmp_path, monkeypatch):
    """A model far larger than the calibration's own gets a third point near its size; the weights'
    time follows the line through the points, so it is not extrapolated from two small models."""
    monkeypatch.setattr(measure, "SMALL", TINY_SMALL)
    monkeypatch.setattr(measure, "LARGE", TINY_LARGE)
    monkeypatch.setattr(measure, "XL_MAX_BYTES", 2e7)  # the smallest shape of randomgguf.shape_for, 19 MB
    monkeypatch.setattr(measure, "engine_version", lambda: "0.3.36")
    per_byte_large = TRUE["per_byte"] * 0.25  # out of the caches the bytes stream faster than the small fit says

    def kinked(model: Path, threads: int, depth: int, tokens: int = 32, timeout_s: float = 0, prompt: str = "batched") -> Run:
        weights, units, kv = calibration.features(model, depth)
        knee = 4e6
        seconds = TRUE["fixed"] + min(weights, knee) * TRUE["per_byte"] + max(0.0, weights - knee) * per_byte_large
        return Run(seconds + units * TRUE["per_unit"] + kv * TRUE["per_kv"], 0.01, 0.0, 0.0)

    monkeypatch.setattr(measure, "time_decode", kinked)
    found = calibration.calibrate(1, "F16", tmp_path / "state", target_bytes=1e9)
    assert len(found.points) == 3 and found.largest_bytes > 3 * found.points[1][0]
    assert found.s_per_byte == pytest.approx(per_byte_large, rel=1e-6)  # the last segment's slope
    far = 1e9
    truth = TRUE["fixed"] + 4e6 * TRUE["per_byte"] + (far - 4e6) * per_byte_large
    assert found.weight_seconds(far) == pytest.approx(truth, rel=1e-6)
    two_point = replace(found, points=found.points[:2])
    assert two_point.weight_seconds(far) > truth * 1.5  # what two small models would have said


def test_calibrations_are_kept_beside_other_work_and_the_newest_of_the_narrow_ones_is_used(tmp_path):
    quiet = _calibration(measured_at=time.time() - 100)
    records = [
        _calibration(foreign_cores=0.25, spread=0.5, measured_at=time.time() - 50),  # newer, but far wider
        _calibration(threads=1),
        _calibration(weight_type="Q4_0"),
        _calibration(engine_version="0.0.1"),
        _calibration(host="elsewhere"),
        _calibration(measured_at=time.time() - calibration.MAX_AGE_S - 60),
        quiet,
    ]
    engine = quiet.engine_version
    assert calibration.best(records, quiet.host, engine, 2, "F16") == quiet
    assert calibration.best(records[:1], quiet.host, engine, 2, "F16") == records[0]  # all there is: used, widened
    newer = _calibration(foreign_cores=0.25, spread=0.08, measured_at=time.time() - 10)
    assert calibration.best([*records, newer], quiet.host, engine, 2, "F16") == newer  # within twice the narrowest
    future = _calibration(measured_at=time.time() + 3600)
    assert calibration.best([quiet, future], quiet.host, engine, 2, "F16") == quiet  # a clock that ran ahead is distrusted
    assert records[0].contended and "beside other work" in records[0].describe()
    for record in records:
        calibration.record(tmp_path, record)
    assert calibration.load(tmp_path) == records
    (tmp_path / calibration.CACHE_NAME).write_text("{not json")
    assert calibration.load(tmp_path) == []
    (tmp_path / calibration.CACHE_NAME).write_text(json.dumps([{**asdict(quiet), "points": [[1, 2]]}, asdict(quiet)]))
    assert calibration.load(tmp_path) == [quiet]  # a malformed point is a skipped record, not a crash


def test_a_prediction_is_never_faster_than_the_ceiling():
    cal = _calibration(fixed_s=0.0, s_per_byte=1e-12)  # a calibration that overstates the weights' rate
    predicted = calibration.predict(cal, 1e9, 0.0, 0.0, 0)
    bounded = calibration.bounded(predicted, 0.025)
    assert predicted.tpot_s < 0.025 and bounded.tpot_s == 0.025 and bounded.bounded
    assert bounded.low_s < bounded.tpot_s < bounded.high_s
    slower = calibration.predict(_calibration(), 1e9, 0.0, 0.0, 0)
    assert calibration.bounded(slower, 0.001) == slower


def _tiny_gguf(tmp_path: Path) -> Path:
    pytest.importorskip("gguf")
    from decode_doctor.models.randomgguf import write

    return write(tmp_path / "tiny.gguf", TINY_LARGE, "F16")


def test_estimate_predicts_from_this_hosts_calibration_beside_the_ceiling(tmp_path):
    model = _tiny_gguf(tmp_path)
    state = tmp_path / "state"
    base = ("estimate", "--model", str(model), "--threads", "2", "--bandwidth", "40", "--context", "1024", "--state-dir", str(state))
    before = cli(*base, "--format", "json")
    prediction = json.loads(before.stdout)["prediction"]
    assert prediction["calibrated"] is False
    if calibration.engine_version() is None:
        assert "llama-cpp-python is not installed" in prediction["why_not"]
        return
    assert "run with --calibrate" in prediction["why_not"]
    calibration.record(state, _calibration())
    text = cli(*base).stdout
    assert "predicted " in text and "at 1,024 tokens" in text and "±5%" in text and "the interval from" in text, text
    assert "calibration " in text and "2 thread(s), F16" in text
    data = json.loads(cli(*base, "--format", "json").stdout)["prediction"]
    start, end = data["at_start"], data["at_context"]
    assert data["calibrated"] and start["depth"] == 0 and end["depth"] == 1024
    assert end["tpot_s"] > start["tpot_s"] >= data["ceiling_s"][0]  # slower at depth, never above the ceiling's speed
    assert start["low_s"] < start["tpot_s"] < start["high_s"]


def test_estimate_says_why_it_cannot_calibrate_a_weight_type(tmp_path):
    pytest.importorskip("gguf")
    from decode_doctor.models.randomgguf import write

    if calibration.engine_version() is None:
        pytest.skip("llama-cpp-python is not installed: the weight type is never asked")
    model = write(tmp_path / "q.gguf", TINY_LARGE, "Q4_0")
    out = cli("estimate", "--model", str(model), "--bandwidth", "40", "--state-dir", str(tmp_path / "s"), "--threads", "3").stdout
    assert "predicted          not predicted: no calibration of llama.cpp" in out and "at 3 thread(s) for Q4_0 weights" in out


@pytest.mark.skipif(available() is not None, reason=str(available()))
def test_calibrate_with_the_real_engine_is_kept_and_reused(tmp_path, monkeypatch):
    """The real thing: llama-cpp-python decodes the random-weight models in passes (seconds). The
    host's load only widens the interval; the record is reused either way."""
    monkeypatch.setattr(measure, "DEPTH", 256)
    model = _tiny_gguf(tmp_path)
    state = tmp_path / "state"
    base = ("estimate", "--model", str(model), "--threads", "1", "--bandwidth", "40", "--state-dir", str(state), "--format", "json")
    first = json.loads(cli(*base, "--calibrate").stdout)["prediction"]
    assert first["calibrated"], first
    (kept,) = calibration.load(state)
    assert kept.threads == 1 and kept.weight_type == "F16" and kept.s_per_byte > 0 and kept.spread >= calibration.MIN_SPREAD
    assert kept.passes >= calibration.PASSES_MIN and len(kept.points) == 2 and kept.prompt == "batched" and not kept.crash
    again = json.loads(cli(*base).stdout)["prediction"]
    assert again["calibrated"] and again["calibration"]["measured_at"] == kept.measured_at
    start = again["at_start"]
    assert start["low_s"] < start["tpot_s"] < start["high_s"]


def test_a_failed_decode_is_a_one_line_calibration_error(tmp_path):
    if calibration.engine_version() is None:
        pytest.skip("llama-cpp-python is not installed")
    (tmp_path / "broken.gguf").write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(calibration.CalibrationError, match=r"llama\.cpp failed decoding broken\.gguf"):
        calibration.time_decode(tmp_path / "broken.gguf", 1, 0, 2, timeout_s=60)


def test_a_host_whose_calibrations_drift_apart_widens_the_next_ones_interval():
    """Two calibrations of one key an hour apart whose shared point differs by 30 %: the second one's
    interval is at least half that gap, said as such; an unrelated key leaves it alone."""
    earlier = _calibration(measured_at=time.time() - 3600, points=((1e7, 1e-3, 0.01), (1e8, 4e-3, 0.01)), spread=0.03)
    later = _calibration(points=((1e7, 1e-3, 0.01), (1e8, 5.2e-3, 0.01)), spread=0.03)
    drifted = calibration.with_drift(later, [earlier, _calibration(threads=1, points=((1e8, 1.0, 0.0),))])
    assert drifted.drift == pytest.approx(0.15) and drifted.drift_since == earlier.measured_at
    assert drifted.spread == pytest.approx(0.15) and calibration.predict(drifted, 5e7, 0.0, 0.0, 0).spread == pytest.approx(0.15)
    assert "half its gap to this host's calibration 1.0 h before it, 15.0%" in drifted.interval_text()
    assert calibration.with_drift(later, [_calibration(threads=1, points=earlier.points)]) == later
