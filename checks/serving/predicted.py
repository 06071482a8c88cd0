"""Decode at concurrency 1 against this host's calibrated prediction (the models feature's
DecodePrediction, from the decode budget), what explains a gap of more than GAP, and what the run
teaches the calibration: a run fit to learn from (a server on this host using the calibrated thread
count, nothing else busy, within LEARN_LIMIT of the prediction) is kept as the host's newest
calibration for that engine, with its source."""

from __future__ import annotations

import time
from pathlib import Path

from decode_doctor.checks.budget.contract import DecodePrediction
from decode_doctor.engine.hostload import CONTENDED_CORES, CONTENDED_STEAL
from decode_doctor.i18n import _, localized, ngettext, said
from decode_doctor.models.calibration.records import learn_from_run

from .codes import LIV010
from .diagnosis import Verdict
from .facts import BenchRun, PredictionCheck, ms
from .observe import ServerLoad

GAP = 0.15  # beyond this the prediction and the measurement disagree
LEARN_LIMIT = 0.5  # a larger gap is a different deployment (model, threads, engine build), not the host's drift
CHUNK_COST_S = 1.5e-3  # a gap smaller than this per token, on a fast step, is the server's own per-chunk cost


def against_prediction(
    bench: BenchRun,
    predicted: DecodePrediction | None,
    load: ServerLoad | None,
    threads: int | None,
    learn_into: Path | None = None,
    endpoint: str = "",
) -> PredictionCheck | None:
    """The comparison; with learn_into (a state directory), the run's lesson kept in this host's
    calibration records when it is fit to learn from."""
    first = bench.level(1)
    if predicted is None or first is None or first.tpot is None or not first.tpot.p50:
        return None
    measured_s = first.tpot.p50 / 1000
    error = measured_s / predicted.tpot_s - 1
    causes = _causes(predicted, measured_s, error, load, threads) if abs(error) > GAP else ()
    learned = ""
    if learn_into is not None:
        why_not = _unfit_to_learn(predicted, error, load, threads)
        if why_not:
            learned = said("not learned: {why_not}", why_not=why_not)
        else:
            assert load is not None  # _unfit_to_learn says so without one
            basis = (
                f"bench of {endpoint or 'a server on this host'} at depth {predicted.depth:,}: TPOT p50 {measured_s * 1e3:.3f} ms "
                f"against {predicted.tpot_s * 1e3:.3f} ms predicted by the {predicted.source} record of "
                f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(predicted.calibrated_at))}"
            )
            key = (predicted.engine_version, predicted.threads, predicted.weight_type, predicted.calibrated_at)
            learned = learn_from_run(learn_into, key, measured_s, predicted.tpot_s, load.foreign_cores, load.steal, basis)
    return PredictionCheck(
        predicted_ms=predicted.tpot_s * 1000,
        low_ms=predicted.low_s * 1000,
        high_ms=predicted.high_s * 1000,
        measured_ms=first.tpot.p50,
        error=error,
        engine=predicted.engine,
        engine_version=predicted.engine_version,
        threads=predicted.threads,
        weight_type=predicted.weight_type,
        depth=predicted.depth,
        server_cores=load.server_cores if load else None,
        foreign_cores=load.foreign_cores if load else None,
        causes=causes,
        busy_threads=load.busy_threads if load else None,
        source=predicted.source,
        learned=learned,
    )


def _unfit_to_learn(predicted: DecodePrediction, error: float, load: ServerLoad | None, threads: int | None) -> str:
    """Why this run must not change the calibration, or "" when it may."""
    if load is None or load.server_cores is None:
        return said("the server's process was not seen on this host, so its thread count is unknown")
    if load.foreign_cores >= CONTENDED_CORES or load.steal >= CONTENDED_STEAL:
        return said(
            "the host was busy during the run ({foreign_cores:.2f} cores of other work, {steal:.0%} stolen)",
            foreign_cores=load.foreign_cores,
            steal=load.steal,
        )
    if _other_threads(load, predicted.threads) or (threads is not None and threads != predicted.threads):
        return said("the server did not run the calibrated {threads} thread(s)", threads=predicted.threads)
    if predicted.bounded:
        return said("the prediction was raised to the bandwidth ceiling, so the calibration's own figure was not what was compared")
    if abs(error) > LEARN_LIMIT:
        return said("a gap of {error:+.0%} is another deployment (model, threads or engine build), not this host's drift", error=error)
    return ""


SERVING_THREADS = 1  # busy threads beyond the compute threads a server may show: its HTTP loop, streaming tokens


def _other_threads(load: ServerLoad, calibrated: int) -> bool:
    """Whether the server worked with another thread count than the calibrated one: its busy threads
    where they were read (fewer, or more than one beyond the count), else its total CPU below the count."""
    if load.busy_threads is not None:
        return not calibrated <= load.busy_threads <= calibrated + SERVING_THREADS
    return load.server_cores is not None and load.server_cores < calibrated - 0.5


def _causes(predicted: DecodePrediction, measured_s: float, error: float, load: ServerLoad | None, threads: int | None) -> tuple[str, ...]:
    found: list[str] = []
    if load is not None and load.busy_threads is not None and _other_threads(load, predicted.threads):
        found.append(
            said(
                "{busy} of the server's threads were busy while decoding ({server_cores:.1f} cores in all), and the calibration "
                "is for {threads} threads (and one more, the server's own): it runs with {how} (llama-server --threads, "
                "llama-cpp-python --n_threads)",
                busy=load.busy_threads,
                server_cores=load.server_cores or 0.0,
                threads=predicted.threads,
                how=said("fewer") if load.busy_threads < predicted.threads else said("more"),
            )
        )
    elif load is not None and load.busy_threads is None and load.server_cores is not None and load.server_cores < predicted.threads - 0.5:
        found.append(
            said(
                "the server's process used {server_cores:.1f} core(s) while decoding, and the calibration is for {threads} "
                "threads: it runs with fewer (llama-server --threads, llama-cpp-python --n_threads)",
                server_cores=load.server_cores,
                threads=predicted.threads,
            )
        )
    if threads is not None and threads != predicted.threads:
        found.append(
            said(
                "--threads {threads} was given, and the calibration used is for {calibrated}", threads=threads, calibrated=predicted.threads
            )
        )
    if load is not None and (load.foreign_cores >= CONTENDED_CORES or load.steal >= CONTENDED_STEAL):
        found.append(
            said(
                "the host was busy: other processes used {foreign_cores:.2f} cores ({steal:.0%} stolen) during the run",
                foreign_cores=load.foreign_cores,
                steal=load.steal,
            )
        )
    gap = measured_s - predicted.tpot_s
    if error > GAP and 0 < gap < CHUNK_COST_S and predicted.tpot_s < 5e-3:
        found.append(
            said(
                "a fixed cost per streamed token outside the engine: {ms:.2f} ms more than llama.cpp's step, the size of a "
                "server's HTTP and SSE work per chunk (llama-cpp-python's Python server spends about 0.45 ms)",
                ms=gap * 1000,
            )
        )
    if error < -GAP:
        found.append(
            said("faster than the calibration allows: another model or weight type is served, or the calibration ran on a busy host")
        )
    return tuple(found) or (
        said("none observed: no other load, the server's CPU matched the threads; calibrate again (estimate --calibrate)"),
    )


def prediction_verdicts(check: PredictionCheck | None) -> list[Verdict]:
    if check is None or abs(check.error) <= GAP:
        return []
    causes = _("; ").join(localized(cause) for cause in check.causes)
    message = ngettext(
        "decode at concurrency 1: TPOT p50 {measured} against {predicted} predicted by this host's calibration ({engine} {version}, "
        "{threads} thread(s), {weights}), {error:+.0%}. Cause: {causes}.",
        "decode at concurrency 1: TPOT p50 {measured} against {predicted} predicted by this host's calibration ({engine} {version}, "
        "{threads} thread(s), {weights}), {error:+.0%}. Causes: {causes}.",
        len(check.causes),
        measured=ms(check.measured_ms), predicted=ms(check.predicted_ms), engine=check.engine, version=check.engine_version,
        threads=check.threads, weights=check.weight_type, error=check.error, causes=causes,
    )  # fmt: skip
    evidence = {
        "predicted_ms": round(check.predicted_ms, 4),
        "measured_ms": round(check.measured_ms, 4),
        "error": round(check.error, 4),
        "threads": check.threads,
        "server_cores": check.server_cores,
        "foreign_cores": check.foreign_cores,
        "causes": list(check.causes),
    }
    return [Verdict(LIV010, message, evidence)]
