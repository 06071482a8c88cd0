"""This host's calibrations, kept in the state directory per host, engine version, thread count and
weight type: read, chosen, extended with a live run's lesson, and compared with the one before."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from decode_doctor.engine.statefile import append_record, host_id, read_records, read_state
from decode_doctor.i18n import Said, said

from ..llamacpp import engine_version
from ..randomgguf import WEIGHT_TYPES
from .model import MIN_SPREAD, Calibration

CACHE_NAME = "calibration.json"
KEEP = 64
MAX_AGE_S = 30 * 24 * 3600  # a kernel path does not drift like a busy host; an engine upgrade is a new key


def lookup(state_dir: Path, weight_type: str, threads: int, in_estimate: bool = False) -> tuple[Calibration | None, str]:
    """This host's reusable calibration for weight_type at threads, or why there is none (in_estimate:
    said to a user of estimate, who calibrates with its --calibrate)."""
    engine = engine_version()
    if engine is None:
        return None, said("llama-cpp-python is not installed, so llama.cpp cannot be calibrated on this host")
    if weight_type not in WEIGHT_TYPES:
        calibrated = ", ".join(WEIGHT_TYPES)
        if weight_type:
            return None, said(
                "llama.cpp is calibrated for {types} weights; these are {weight_type}", types=calibrated, weight_type=weight_type
            )
        return None, said("llama.cpp is calibrated for {types} weights; no weight file tells which type these are", types=calibrated)
    found = best(load(state_dir), host_id(), engine, threads, weight_type)
    if found is None:
        why = said(
            "no calibration of llama.cpp {engine} at {threads} thread(s) for {weight_type} weights on this host",
            engine=engine,
            threads=threads,
            weight_type=weight_type,
        )
        if in_estimate:
            return None, said("{why}: run with --calibrate", why=why)
        return None, said("{why}: run estimate --calibrate", why=why)
    return found, ""


def load(state_dir: Path) -> list[Calibration]:
    return read_records(state_dir / CACHE_NAME, Calibration)


def ignored(state_dir: Path) -> list[Said]:
    """The calibration records this host's state file holds but cannot use, each with the reason."""
    return read_state(state_dir / CACHE_NAME, Calibration).ignored


def record(state_dir: Path, calibration: Calibration) -> None:
    append_record(state_dir / CACHE_NAME, calibration, Calibration, KEEP)


WIDER = 2.0  # a newer calibration wins unless its interval is more than twice the narrowest one's


def best(
    records: list[Calibration], host: str, engine: str, threads: int, weight_type: str, now: float | None = None
) -> Calibration | None:
    """For exactly this host, engine version, thread count and weight type: the newest calibration
    whose interval is at most WIDER × the narrowest one's (a busy hour's calibration does not displace
    a quiet one, and is used, widened, when it is all there is)."""
    fitting = [
        c
        for c in records
        if (c.host, c.engine_version, c.threads, c.weight_type) == (host, engine, threads, weight_type) and 0 <= c.age(now) <= MAX_AGE_S
    ]
    if not fitting:
        return None
    narrowest = min(c.spread for c in fitting)
    return max((c for c in fitting if c.spread <= narrowest * WIDER), key=lambda c: c.measured_at)


def learn(
    state_dir: Path,
    engine_version: str,
    threads: int,
    weight_type: str,
    calibrated_at: float,
    scale: float,
    foreign_cores: float,
    steal: float,
    basis: str,
) -> Calibration | None:
    """A live run's lesson kept: the calibration the prediction came from (found by its key and time),
    every step term scaled by measured ÷ predicted, recorded as a new "bench" record with its basis
    and the run's conditions. None when that calibration is no longer recorded."""
    key = (host_id(), engine_version, threads, weight_type)
    records = load(state_dir)
    used = next((c for c in records if (c.host, c.engine_version, c.threads, c.weight_type, c.measured_at) == (*key, calibrated_at)), None)
    if used is None:
        return None
    result = replace(
        used,
        points=tuple((w, t * scale, h) for w, t, h in used.points),
        fixed_s=used.fixed_s * scale,
        s_per_byte=used.s_per_byte * scale,
        s_per_unit=used.s_per_unit * scale,
        s_per_kv_byte=used.s_per_kv_byte * scale,
        measured_at=time.time(),
        foreign_cores=foreign_cores,
        steal=steal,
        source="bench",
        basis=basis,
    )
    record(state_dir, result)
    return result


def with_drift(result: Calibration, records: list[Calibration]) -> Calibration:
    """The calibration with how far it lies from this host's previous calibration of the same key (the
    same small models: the same weight bytes), half the largest gap at a shared point: a host whose
    calibrations an hour apart differ by 30 % cannot promise better than ±15 %, however well one
    calibration's passes agreed. Its interval takes the larger of that and its own passes' spread."""
    key = (result.host, result.engine_version, result.threads, result.weight_type)
    earlier = [c for c in records if (c.host, c.engine_version, c.threads, c.weight_type) == key and c.source == "calibrate" and c.points]
    previous = max((c for c in earlier if 0 <= result.measured_at - c.measured_at <= MAX_AGE_S), key=lambda c: c.measured_at, default=None)
    if previous is None:
        return result
    gaps = [
        abs(seconds / old - 1)
        for weight_bytes, seconds, _spread in result.points
        for old_bytes, old, _old_spread in previous.points
        if old > 0 and abs(old_bytes / weight_bytes - 1) < 0.01
    ]
    if not gaps:
        return result
    drift = max(gaps) / 2
    return replace(
        result,
        drift=drift,
        drift_since=previous.measured_at,
        spread=max(result.spread, max(MIN_SPREAD, drift) + result.widened),
    )


def learn_from_run(
    state_dir: Path,
    key: tuple[str, int, str, float],
    measured_s: float,
    predicted_s: float,
    foreign_cores: float,
    steal: float,
    basis: str,
) -> str:
    """A live run's lesson kept (learn: the calibration the prediction came from, key = its engine version,
    threads, weight type and time, every step term scaled by measured ÷ predicted), in words: "learned: …",
    or "not learned: …" when that calibration is no longer recorded."""
    engine, threads, weight_type, calibrated_at = key
    scale = measured_s / predicted_s
    kept = learn(state_dir, engine, threads, weight_type, calibrated_at, scale, foreign_cores, steal, basis)
    if kept is None:
        return said("not learned: the calibration this prediction came from is no longer recorded")
    return said(
        "learned: this host's calibration ({engine} {engine_version}, {threads} thread(s), {weight_type}) now predicts "
        "{ms:.2f} ms here (its step terms ×{scale:.2f}), kept with its source (bench)",
        engine=kept.engine,
        engine_version=engine,
        threads=threads,
        weight_type=weight_type,
        ms=measured_s * 1e3,
        scale=scale,
    )
