"""A running OpenAI-compatible server: with `decode-doctor bench`, its measured TTFT/TPOT judged against
this host's decode ceiling; with `check --endpoint URL`, its own /metrics judged without loading it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from decode_doctor.checks.budget.contract import Budget, BudgetFacts, DecodePrediction
from decode_doctor.engine import Analysis, Check, Context, Finding, Needs, OptionRef, Reads, Severity
from decode_doctor.engine.paths import default_state_dir
from decode_doctor.i18n import N_, _, localized, reason, said

from . import reading
from .client import Endpoint
from .codes import CODES, LIV004, SRV005, SRV006
from .diagnosis import Verdict, diagnose, unjudged
from .engines import Snapshot
from .facts import BenchRun, Ceiling, Peaks, ServingFacts
from .judge import ERROR_RATE, judge
from .observe import ServerLoad
from .options import ServingOptions
from .pasted import READS, analyze
from .predicted import against_prediction, prediction_verdicts

DIAGNOSIS = N_("the server's own diagnosis (KV-cache pressure, queueing, preemption)")


@dataclass(frozen=True)
class Measured:
    """What `decode-doctor bench` measured, handed to the check to judge (ctx.supplied.get(Measured))."""

    endpoint: str
    engine: str | None
    model: str | None
    bench: BenchRun
    before: Snapshot | None
    after: Snapshot | None
    peaks: Peaks | None
    metrics_note: str | None
    ceiling_note: str | None
    device: str | None  # judge against this device of the decode budget
    metrics_declined: bool = False  # --no-metrics: the user chose not to read them (not a gap in coverage)
    load: ServerLoad | None = None  # the host while concurrency 1 ran (observe.py)
    threads: int | None = None  # --threads: the server's llama.cpp thread count, as the user says it


class Serving(Check):
    name = "serving"
    looks_at = (
        'a running OpenAI-compatible server (`--endpoint URL`; see "Measuring a live server"): the results of `bench` judged — decode '
        "at concurrency 1 against this host's ceiling for the served model, TPOT jitter, TTFT tails, failures and timeouts, a server "
        "that ignores `max_tokens`, an SLO missed — and the server's own Prometheus `/metrics` (vLLM v0 and v1, SGLang, TGI, llama.cpp)"
        " and llama.cpp's `/slots` diagnosed alone or before and after a run: KV-cache pressure, preemption, queueing, prefill "
        "interference, a slot smaller than a request; each finding names the engine flag that helps, and a page without the gauges "
        "a diagnosis needs is *not judged*. `analyze` reads the same from pasted vLLM, SGLang and llama-server logs and captured SSE "
        "streams, citing each line. Facts: the endpoint, the engine, every level's percentiles, the ceiling, the values read"
    )
    description = N_("a running server: bench results judged against the ceiling, its own /metrics diagnosed")
    codes = CODES
    # the served model's ceiling on this host: the decode budget of its files, when they are given
    needs = Needs(inputs=(OptionRef(ServingOptions, "endpoint"),), reads=(Reads(BudgetFacts, when_input="models"),))
    options = ServingOptions
    timeout_s = 30.0
    facts_type = ServingFacts
    pasted = READS

    @classmethod
    def analyze(cls, text: str, source: str) -> Analysis | None:
        return analyze(cls(), text, source)

    def run(self, ctx: Context) -> list[Finding]:
        measured = ctx.supplied.get(Measured)
        if measured is not None:
            return self._judge_bench(ctx, measured)
        return self._read_alone(ctx)

    def _findings(self, verdicts: list[Verdict], path: str) -> list[Finding]:
        findings = []
        for verdict in verdicts:
            severity = None
            if verdict.code is LIV004 and verdict.evidence.get("rate", 0) >= ERROR_RATE:
                severity = Severity.ERROR
            findings.append(self.finding(verdict.code, verdict.message, evidence=verdict.evidence, path=path, severity=severity))
        return findings

    def _judge_bench(self, ctx: Context, measured: Measured) -> list[Finding]:
        ceiling, note = ceiling_from(ctx, measured.device)
        note = measured.ceiling_note or note
        predicted, predicted_note = prediction_from(ctx, measured.device) if ceiling is not None else (None, note)
        state = default_state_dir(ctx.env) if ctx.live_devices else None  # a run on this host teaches this host's records
        against = against_prediction(measured.bench, predicted, measured.load, measured.threads, state, measured.endpoint)
        facts = ServingFacts(
            endpoint=measured.endpoint,
            engine=measured.engine,
            model=measured.model,
            bench=measured.bench,
            ceiling=ceiling,
            ceiling_note=None if ceiling else note,
            before=measured.before,
            after=measured.after,
            peaks=measured.peaks,
            metrics_note=measured.metrics_note,
            prediction=against,
            prediction_note=None if against else predicted_note,
        )
        ctx.publish(facts)
        verdicts = judge(measured.bench, ceiling, measured.engine) + prediction_verdicts(against)
        if measured.after is not None:
            peaks = measured.peaks
            planned = measured.bench.input_tokens + measured.bench.output_tokens
            verdicts += diagnose(
                measured.after,
                measured.before,
                peak_kv=peaks.kv_usage if peaks else None,
                peak_waiting=peaks.waiting if peaks else None,
                peak_running=peaks.running if peaks else None,
                planned_tokens=planned,
            )
            self._coverage(ctx, measured.after)
        elif measured.metrics_note:
            message = _("{endpoint}: {why}.", endpoint=measured.endpoint, why=localized(measured.metrics_note))
            verdicts.append(Verdict(SRV005, message, {"endpoint": measured.endpoint}))
            if not measured.metrics_declined:
                ctx.not_judged(_(DIAGNOSIS), localized(measured.metrics_note))
        return self._findings(verdicts, measured.endpoint)

    @staticmethod
    def _coverage(ctx: Context, snap: Snapshot) -> None:
        for what, why in unjudged(snap):
            ctx.not_judged(_("{what} ({engine})", what=what, engine=snap.engine) if snap.engine != "unknown" else what, why)

    def _read_alone(self, ctx: Context) -> list[Finding]:
        url = str(ctx.option(ServingOptions).endpoint)
        key = ctx.env.get(ctx.option(ServingOptions).api_key_env or "OPENAI_API_KEY") or None
        try:
            endpoint = Endpoint.parse(url, api_key=key)
        except ValueError as exc:
            ctx.publish(ServingFacts(endpoint=url, metrics_note=reason(exc)))
            return [self.finding(SRV006, _("{why}.", why=localized(reason(exc))), evidence={"endpoint": url}, path=url)]
        label = endpoint.label
        result = asyncio.run(reading.read(endpoint, timeout=5.0))
        ctx.publish(ServingFacts(endpoint=label, engine=result.engine, model=result.model, after=result.snapshot, metrics_note=result.note))
        if not result.reachable:
            message = _("{endpoint}: {why}.", endpoint=label, why=localized(result.note or ""))
            return [self.finding(SRV006, message, evidence={"endpoint": label}, path=label)]
        if result.snapshot is None or result.snapshot.engine == "unknown":
            note = localized(result.note or said("GET /metrics answered with metrics of no engine decode-doctor knows"))
            ctx.not_judged(_(DIAGNOSIS), note)
            return [self.finding(SRV005, _("{endpoint}: {why}.", endpoint=label, why=note), evidence={"endpoint": label}, path=label)]
        self._coverage(ctx, result.snapshot)
        return self._findings(diagnose(result.snapshot), label)


def _judged_budget(ctx: Context, device: str | None) -> tuple[Budget | None, str, str | None]:
    """The decode budget of the served model on the judged device (one model, read by attribute: the
    models feature's names are its own), the model's name, or why there is none."""
    budget = ctx.facts.get(BudgetFacts)
    entries = budget.models if budget is not None else []
    if not entries:
        return None, "", "no model files (give --model-files, or serve a model whose id is a local path)"
    entry = entries[0]
    name = device or (entry.judged[0] if entry.judged else None)
    chosen = next((b for b in entry.budgets if b.device == name), None)
    if chosen is None:
        known = ", ".join(b.device for b in entry.budgets)
        return None, entry.model.name, said("no device {name} on this host (it has {known})", name=name, known=known)
    return chosen, entry.model.name, None


def prediction_from(ctx: Context, device: str | None) -> tuple[DecodePrediction | None, str | None]:
    """The calibrated prediction for the served model on the judged device (the decode budget's)."""
    chosen, _, note = _judged_budget(ctx, device)
    if chosen is None:
        return None, note
    if chosen.prediction is None:
        return None, chosen.prediction_note or said(
            "no calibrated prediction for {device} (only a CPU is calibrated)", device=chosen.device
        )
    return chosen.prediction, None


def ceiling_from(ctx: Context, device: str | None) -> tuple[Ceiling | None, str | None]:
    """The decode ceiling of the served model from the decode-budget check's facts."""
    chosen, model_name, note = _judged_budget(ctx, device)
    if chosen is None:
        return None, note
    if not chosen.tps_per_sequence or not chosen.bandwidth_gbps:
        return None, said("no bandwidth for {device} (give --bandwidth)", device=chosen.device)
    ceiling = Ceiling(
        tokens_per_s=chosen.tps_per_sequence,
        device=chosen.device,
        bandwidth_gbps=chosen.bandwidth_gbps,
        bandwidth_source=chosen.bandwidth_source,
        context=chosen.context,
        model=model_name,
    )
    return ceiling, None
