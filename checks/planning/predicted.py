"""llama.cpp's calibrated time per output token for a plan on this CPU (decode_doctor.models.calibration)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from decode_doctor.i18n import _, localized, reason, said
from decode_doctor.models import calibration
from decode_doctor.models.calibration import Calibration, Prediction
from decode_doctor.models.info import ModelInfo
from decode_doctor.models.plan import (
    DeploymentPlan,
)
from decode_doctor.models.sizing import Sizing

from .devices import state_dir_of

if TYPE_CHECKING:
    from .commands import EstimateOptions


@dataclass(frozen=True)
class Predicted:
    """llama.cpp's time per output token on this CPU at depth 0 and at the planned context, from this
    host's calibration (calibration.py), or why there is none."""

    calibration: Calibration | None
    at_start: Prediction | None
    at_context: Prediction | None
    why_not: str = ""
    ceilings_s: tuple[float, float] = (0.0, 0.0)  # the ceiling's step time at the start and at the context
    weight_bytes: float = 0.0  # read per token by the model predicted
    ignored: tuple[str, ...] = ()  # calibration records in the state directory that could not be used, and why

    def rows(self) -> list[tuple[str, str]]:
        unused = [("note", localized(why)) for why in self.ignored]
        if self.calibration is None or self.at_start is None or self.at_context is None:
            return [("predicted", _("not predicted: {why}", why=localized(self.why_not))), *unused]
        start, end, cal = self.at_start, self.at_context, self.calibration

        def at(p: Prediction) -> str:
            bound = _(", at the ceiling") if p.bounded else ""
            return _("{ms:.2f} ms ±{spread:.0%} ({tps:.1f} tok/s{bound})", ms=p.tpot_s * 1e3, spread=p.spread, tps=p.tps, bound=bound)

        beside = ""
        if all(self.ceilings_s):
            beside = _("; ceiling {start:.1f} and {end:.1f} tok/s", start=1 / self.ceilings_s[0], end=1 / self.ceilings_s[1])
        predicted = _(
            "time per output token with llama.cpp {start} at the start of a sequence, {end} at {depth:,} tokens, "
            "the interval from {interval}{beside}",
            start=at(start), end=at(end), depth=end.depth, interval=localized(cal.interval_text()), beside=beside,
        )  # fmt: skip
        rows = [
            ("predicted", predicted),
            ("calibration", _("{calibration}; rerun with --calibrate", calibration=localized(cal.describe()))),
        ]
        if cal.crash:
            rows.append(
                (
                    "note",
                    _(
                        "{crash}: calibrated with the prompt fed one token at a time; a server on this host crashes on its first "
                        "prompt until it takes a workaround (decode-doctor check --select engine-failures names the verified "
                        "ones), and a workaround that changes the weights' kernel (--no-repack) changes this speed too",
                        crash=localized(cal.crash),
                    ),
                )
            )
        if self.weight_bytes and cal.points and self.weight_bytes > calibration.XL_FROM * cal.largest_bytes:
            rows.append(
                (
                    "note",
                    _(
                        "extrapolated: this model reads {model_gb:.2f} GB per token, the calibration's largest model {largest_gb:.2f} GB "
                        "(--calibrate measures one near this model's size)",
                        model_gb=self.weight_bytes / 1e9,
                        largest_gb=cal.largest_bytes / 1e9,
                    ),
                )
            )
        return rows + unused

    def to_dict(self) -> dict[str, Any]:
        def tpot(p: Prediction | None) -> dict[str, Any] | None:
            return None if p is None else {"depth": p.depth, "tpot_s": p.tpot_s, "low_s": p.low_s, "high_s": p.high_s, "tps": p.tps}

        return {
            "engine": calibration.ENGINE,
            "calibrated": self.calibration is not None,
            "why_not": self.why_not or None,
            "calibration": asdict(self.calibration) if self.calibration else None,
            "at_start": tpot(self.at_start),
            "at_context": tpot(self.at_context),
            "ceiling_s": list(self.ceilings_s) if all(self.ceilings_s) else None,
            "ignored_records": [str(why) for why in self.ignored],
        }


def prediction_for(options: EstimateOptions, model: ModelInfo, size: Sizing, plan: DeploymentPlan) -> Predicted:
    from decode_doctor.app.output import say
    from decode_doctor.engine.workers import usable_cpus

    weight_type = (model.dominant_dtype or "").upper()
    threads = options.threads or usable_cpus()
    state_dir = state_dir_of(options.state_dir)
    found, why = calibration.lookup(state_dir, weight_type, threads, in_estimate=True)
    unused = tuple(calibration.ignored(state_dir))
    if options.calibrate and calibration.engine_version() and weight_type in calibration.WEIGHT_TYPES:
        try:
            found = calibration.calibrate(threads, weight_type, state_dir, say, target_bytes=size.read_bytes(1))
        except (calibration.CalibrationError, OSError) as exc:
            return Predicted(None, None, None, said("the calibration failed: {error}", error=reason(exc)), ignored=unused)
    if found is None:
        return Predicted(None, None, None, why, ignored=unused)
    bandwidth = plan.hardware.bandwidth_gbps
    start = calibration.for_model(size, weight_type, threads, plan.kv_dtype, 0, bandwidth, found)
    end = calibration.for_model(size, weight_type, threads, plan.kv_dtype, plan.context, bandwidth, found)
    return Predicted(
        found,
        start.prediction,
        end.prediction,
        ceilings_s=(start.ceiling_s, end.ceiling_s),
        weight_bytes=size.read_bytes(1) or 0.0,
        ignored=unused,
    )
