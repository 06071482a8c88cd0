"""The calibrated decode prediction (issue 26): the step model's fit, its records, and estimate's rows."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from decode_doctor.checks.models import calibration
from decode_doctor.checks.models.bwcache import host_id
from decode_doctor.checks.models.calibration import Calibration, Run
from decode_doctor.checks.models.randomgguf import Shape

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


def test_the_fit_recovers_the_step_constants_from_four_decodes(tmp_path, monkeypatch):
    """Decode times made from known constants give those constants back: the two models' sizes
    separate the fixed cost from the bytes, their head layouts the query work from the cache bytes."""
    monkeypatch.setattr(calibration, "SMALL", TINY_SMALL)
    monkeypatch.setattr(calibration, "LARGE", TINY_LARGE)
    monkeypatch.setattr(calibration, "engine_version", lambda: "0.3.36")

    def fake_decode(model: Path, threads: int, depth: int, tokens: int = 32, timeout_s: float = 0) -> Run:
        weights, units, kv = calibration.features(model, depth)
        seconds = TRUE["fixed"] + weights * TRUE["per_byte"] + units * TRUE["per_unit"] + kv * TRUE["per_kv"]
        return Run(seconds, 0.01, 0.02, 0.0)

    monkeypatch.setattr(calibration, "time_decode", fake_decode)
    said: list[str] = []
    found = calibration.calibrate(2, "Q8_0", tmp_path / "state", said.append)
    assert found.fixed_s == pytest.approx(TRUE["fixed"], rel=1e-6)
    assert found.s_per_byte == pytest.approx(TRUE["per_byte"], rel=1e-6)
    assert found.s_per_unit == pytest.approx(TRUE["per_unit"], rel=1e-6)
    assert found.s_per_kv_byte == pytest.approx(TRUE["per_kv"], rel=1e-6)
    assert found.spread == calibration.MIN_SPREAD and not found.contended
    assert calibration.load(tmp_path / "state") == [found]
    assert any("calibrated in" in line for line in said)
    assert not list(tmp_path.glob("**/*.gguf"))  # the models are written to a temporary folder and gone


def test_a_contended_or_foreign_calibration_is_never_reused(tmp_path):
    quiet = _calibration()
    records = [
        _calibration(foreign_cores=0.25, measured_at=time.time() + 1),  # newer, but beside other work
        _calibration(threads=1),
        _calibration(weight_type="Q4_0"),
        _calibration(engine_version="0.0.1"),
        _calibration(host="elsewhere"),
        _calibration(measured_at=time.time() - calibration.MAX_AGE_S - 60),
        quiet,
    ]
    engine = quiet.engine_version
    assert calibration.best(records, quiet.host, engine, 2, "F16") == quiet
    assert records[0].contended and "CONTENDED" in records[0].describe()
    assert calibration.best(records[:1], quiet.host, engine, 2, "F16") is None
    for record in records:
        calibration.record(tmp_path, record)
    assert calibration.load(tmp_path) == records
    (tmp_path / calibration.CACHE_NAME).write_text("{not json")
    assert calibration.load(tmp_path) == []


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
    from decode_doctor.checks.models.randomgguf import write

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
    assert "predicted " in text and "at 1,024 tokens" in text and "±5%" in text, text
    assert "calibration " in text and "2 thread(s), F16" in text
    data = json.loads(cli(*base, "--format", "json").stdout)["prediction"]
    start, end = data["at_start"], data["at_context"]
    assert data["calibrated"] and start["depth"] == 0 and end["depth"] == 1024
    assert end["tpot_s"] > start["tpot_s"] >= data["ceiling_s"][0]  # slower at depth, never above the ceiling's speed
    assert start["low_s"] < start["tpot_s"] < start["high_s"]


def test_estimate_says_why_it_cannot_calibrate_a_weight_type(tmp_path):
    pytest.importorskip("gguf")
    from decode_doctor.checks.models.randomgguf import write

    if calibration.engine_version() is None:
        pytest.skip("llama-cpp-python is not installed: the weight type is never asked")
    model = write(tmp_path / "q.gguf", TINY_LARGE, "Q4_0")
    out = cli("estimate", "--model", str(model), "--bandwidth", "40", "--state-dir", str(tmp_path / "s"), "--threads", "3").stdout
    assert "predicted          none: no calibration of llama.cpp" in out and "at 3 thread(s) for Q4_0 weights" in out


@pytest.mark.skipif(available() is not None, reason=str(available()))
def test_calibrate_with_the_real_engine_is_kept_and_reused_unless_contended(tmp_path):
    """The real thing: llama-cpp-python decodes the two random-weight models (a few seconds). What
    the host's load decides is only whether the figure may be reused, and both outcomes are checked."""
    model = _tiny_gguf(tmp_path)
    state = tmp_path / "state"
    base = ("estimate", "--model", str(model), "--threads", "1", "--bandwidth", "40", "--state-dir", str(state), "--format", "json")
    first = json.loads(cli(*base, "--calibrate").stdout)["prediction"]
    assert first["calibrated"], first
    (kept,) = calibration.load(state)
    assert kept.threads == 1 and kept.weight_type == "F16" and kept.s_per_byte > 0 and kept.spread >= calibration.MIN_SPREAD
    again = json.loads(cli(*base).stdout)["prediction"]
    if kept.contended:
        assert not again["calibrated"] and "run with --calibrate" in again["why_not"]
    else:
        assert again["calibrated"] and again["calibration"]["measured_at"] == kept.measured_at


def test_a_failed_decode_is_a_one_line_calibration_error(tmp_path):
    if calibration.engine_version() is None:
        pytest.skip("llama-cpp-python is not installed")
    (tmp_path / "broken.gguf").write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(calibration.CalibrationError, match=r"llama\.cpp failed decoding broken\.gguf"):
        calibration.time_decode(tmp_path / "broken.gguf", 1, 0, 2, timeout_s=60)
