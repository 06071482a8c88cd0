"""A running OpenAI-compatible server: with `decode-doctor bench`, its measured TTFT/TPOT judged against
this host's decode ceiling; with `check --endpoint URL`, its own /metrics judged without loading it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from decode_doctor.engine import Check, Code, Context, Finding, Needs, Option, Severity

from . import reading
from .client import Endpoint
from .diagnosis import Verdict, diagnose
from .facts import BenchRun, Ceiling, Peaks, ServingFacts
from .judge import ERROR_RATE, judge

LIV001 = Code(
    code="LIV001",
    title="Decode at concurrency 1 reaches less than half of this host's ceiling",
    severity=Severity.WARNING,
    what="One sequence decodes at under 50 % of the tokens/s the memory bandwidth allows for this model "
    "(bandwidth ÷ bytes read per token, the decode-budget check's ceiling).",
    why="Decode is memory-bound: a healthy engine reaches 60–85 % of the ceiling at concurrency 1. Far below it, "
    "time goes elsewhere: CPU overhead per token (Python, sampling, detokenizing), a debug or eager-mode build, "
    "too few or too many CPU threads, weights that do not sit on the device measured, or a busy host.",
    fix_by_hand="Compare the engine's own per-token time (llama.cpp timings, vLLM's inter-token histogram) with "
    "the measured TPOT; turn on CUDA graphs (drop vLLM --enforce-eager), set llama.cpp -t to the physical cores, "
    "check that every layer is offloaded (-ngl 99), and run the bench on an otherwise idle host.",
)
LIV002 = Code(
    code="LIV002",
    title="TPOT swings: p99 is more than twice p50",
    severity=Severity.WARNING,
    what="At some concurrency, the slowest 1 % of requests decode each token more than twice as slowly as the typical one.",
    why="Users feel the slow tail as stutter. Under concurrency the usual cause is prefills (new prompts) sharing "
    "decode steps with running sequences, or preemption when the KV cache runs out.",
    fix_by_hand="Read the server findings (SRV002 preemption, SRV004 prefill interference) for the flag that helps: "
    "chunked prefill with a smaller token budget per step, or fewer concurrent sequences.",
)
LIV003 = Code(
    code="LIV003",
    title="TTFT has a long tail",
    severity=Severity.WARNING,
    what="TTFT p99 is more than three times its p50, and at least 200 ms above it.",
    why="A request that waits in the server's queue, or behind other prompts' prefills, starts late; the user sees nothing.",
    fix_by_hand="Look for queueing (SRV003): more sequences per batch if the KV cache allows, more replicas, or "
    "a lower concurrency per replica; long prompts benefit from chunked prefill.",
)
LIV004 = Code(
    code="LIV004",
    title="Requests failed or timed out",
    severity=Severity.WARNING,
    what="Some requests ended without a complete stream: an HTTP error (429, 5xx), a stall, a dropped "
    "connection, malformed SSE, a stream without [DONE] or cut off without a finish_reason, or the per-request timeout.",
    why="Failed requests are not timed, so the percentiles describe only the survivors; a server that fails under "
    "load is not ready, whatever its latency. At 5 % or more this is an error.",
    fix_by_hand="The evidence lists the failures by kind with one message each. 429s mean a rate limit or a full "
    "queue (raise it, or lower the concurrency); 5xx and drops are in the server's log; stalls point at a hung engine.",
)
LIV005 = Code(
    code="LIV005",
    title="The server ignores max_tokens",
    severity=Severity.WARNING,
    what="A response carried more tokens than the request's max_tokens allowed.",
    why="A client cannot bound a request's cost or latency on such a server, and its output-token counts "
    "(and this bench's TPOT) do not mean what they say.",
    fix_by_hand="Check the server's version and any proxy between it and the client that rewrites requests; "
    "vLLM, SGLang, TGI and llama.cpp all honour max_tokens.",
)
LIV006 = Code(
    code="LIV006",
    title="Responses ended before max_tokens",
    severity=Severity.INFO,
    what="Some responses stopped at an end-of-sequence token before the requested output length.",
    why="The load was lighter than planned and TPOT is averaged over fewer tokens; a sweep whose outputs differ in "
    "length compares unlike things.",
    fix_by_hand="Pass --ignore-eos (vLLM, SGLang and llama.cpp accept it) so that every request runs to max_tokens.",
)
LIV007 = Code(
    code="LIV007",
    title="The latency SLO is not met",
    severity=Severity.WARNING,
    what="At some concurrency, a percentile named in --slo is above its limit (or requests failed).",
    why="The deployment cannot serve that many concurrent users within the promised latency.",
    fix_by_hand="Serve at most the concurrency where the SLO still holds (the message names it) per replica, or "
    "lower TPOT: a smaller or quantized model, fp8 KV cache, a faster device, or tensor parallelism.",
)
LIV008 = Code(
    code="LIV008",
    title="Decode runs faster than the ceiling computed for it: not judged",
    severity=Severity.WARNING,
    what="The measured decode speed at concurrency 1 is more than 1.25× the ceiling computed from the given model files and bandwidth.",
    why="No engine beats the memory system, so the inputs are not the server's: another model, quantization or "
    "speculative decoding on the server, or another device than the one measured. Judging against them would mislead.",
    fix_by_hand="Pass --model-files with the files the server loaded, --device for the device it runs on, or "
    "--bandwidth for that device's bandwidth.",
)
LIV009 = Code(
    code="LIV009",
    title="Output tokens counted from stream chunks",
    severity=Severity.INFO,
    what="The server sent no usage in its stream, so each content chunk counted as one token.",
    why="Engines that put several tokens in one chunk (stream intervals, speculative decoding) make TPOT look slower than it is.",
    fix_by_hand="Use a server that honours stream_options.include_usage (vLLM, SGLang, llama.cpp, TGI do).",
)
SRV001 = Code(
    code="SRV001",
    title="KV-cache pressure",
    severity=Severity.WARNING,
    what="The engine's KV cache was at least 90 % full (vLLM kv_cache_usage_perc, SGLang token_usage, llama.cpp kv_cache_usage_ratio).",
    why="A full KV cache means new sequences wait, or running ones are preempted and recomputed: latency jumps.",
    fix_by_hand="The message names the engine's flags: more memory for the KV cache, an fp8 KV cache, a shorter "
    "maximum context, or fewer concurrent sequences.",
)
SRV002 = Code(
    code="SRV002",
    title="The engine preempted sequences",
    severity=Severity.WARNING,
    what="The engine dropped running sequences' KV cache to admit others (vLLM num_preemptions, SGLang retractions).",
    why="Each preempted sequence recomputes its prompt and output later: wasted work and TPOT spikes for that user.",
    fix_by_hand="Admit fewer sequences at once (vLLM --max-num-seqs, SGLang --max-running-requests) or give the KV cache more memory.",
)
SRV003 = Code(
    code="SRV003",
    title="Requests queue in the server",
    severity=Severity.WARNING,
    what="Requests waited before running (vLLM num_requests_waiting, SGLang num_queue_reqs, TGI queue_size, "
    "llama.cpp requests_deferred), or their mean queue time was 100 ms or more.",
    why="Queue time is added to TTFT; the server runs fewer sequences at once than it is sent.",
    fix_by_hand="Raise the engine's concurrent-sequence limit if the KV cache has room (the message names the "
    "flag; for llama.cpp, more --parallel slots), else add replicas.",
)
SRV004 = Code(
    code="SRV004",
    title="Prefill interference: decode steps wait behind prompts",
    severity=Severity.WARNING,
    what="The engine's inter-token latency p99 is at least 4× its p50 while prompts were being prefilled.",
    why="A step that prefills a long prompt makes every running sequence wait for it: users see a stall mid-answer.",
    fix_by_hand="Split prompts into smaller chunks per step: vLLM --max-num-batched-tokens with chunked prefill, "
    "SGLang --chunked-prefill-size, TGI --max-batch-prefill-tokens, llama.cpp smaller -b/-ub.",
)
SRV005 = Code(
    code="SRV005",
    title="The server's metrics cannot be read",
    severity=Severity.INFO,
    what="GET /metrics did not answer with Prometheus metrics of a known engine.",
    why="Without the engine's own counters, KV-cache pressure, preemption and queueing cannot be told apart from the outside.",
    fix_by_hand="Enable the engine's metrics (SGLang --enable-metrics, llama-server --metrics; vLLM and TGI serve "
    "them by default) on the same port as the API.",
)
SRV006 = Code(
    code="SRV006",
    title="The endpoint does not answer",
    severity=Severity.ERROR,
    what="Neither the model list nor /metrics could be fetched from the endpoint.",
    why="Nothing can be measured or diagnosed, and clients will fail the same way.",
    fix_by_hand="Check the URL (scheme, host, port and the /v1 base), that the server is up and listening on "
    "that address, and any firewall or proxy between.",
)
SRV007 = Code(
    code="SRV007",
    title="A llama.cpp slot holds fewer tokens than one request needs",
    severity=Severity.WARNING,
    what="llama-server divides its context (-c) among its --parallel slots; each slot holds less than one request's prompt plus output.",
    why="Requests are cut short or refused with a context error, and the bench measures the wrong thing.",
    fix_by_hand="Start llama-server with -c at least --parallel × (prompt + output tokens).",
)


@dataclass(frozen=True)
class Measured:
    """What `decode-doctor bench` measured, handed to the check to judge (ctx.options["serving_measured"])."""

    endpoint: str
    engine: str | None
    model: str | None
    bench: BenchRun
    before: Any  # engines.Snapshot | None
    after: Any
    peaks: Peaks | None
    metrics_note: str | None
    ceiling_note: str | None
    device: str | None  # judge against this device of the decode budget


class Serving(Check):
    name = "serving"
    description = "a running server: bench results judged against the ceiling, its own /metrics diagnosed"
    codes = (LIV001, LIV002, LIV003, LIV004, LIV005, LIV006, LIV007, LIV008, LIV009)
    codes += (SRV001, SRV002, SRV003, SRV004, SRV005, SRV006, SRV007)
    needs = Needs(inputs=("endpoint",), after=("decode-budget",))
    options = (
        Option("--endpoint", "An OpenAI-compatible server (http://host:port/v1) whose /metrics to diagnose.", metavar="URL"),
        Option(
            "--api-key-env",
            "The environment variable holding the server's API key [default: OPENAI_API_KEY].",
            default="OPENAI_API_KEY",
            metavar="VAR",
        ),
    )
    timeout_s = 30.0
    facts_type = ServingFacts

    def run(self, ctx: Context) -> list[Finding]:
        measured = ctx.options.get("serving_measured")
        if isinstance(measured, Measured):
            return self._judge_bench(ctx, measured)
        return self._read_alone(ctx)

    def _findings(self, verdicts: list[Verdict], path: str) -> list[Finding]:
        findings = []
        for verdict in verdicts:
            severity = None
            if verdict.code == "LIV004" and verdict.evidence.get("rate", 0) >= ERROR_RATE:
                severity = Severity.ERROR
            findings.append(self.finding(verdict.code, verdict.message, evidence=verdict.evidence, path=path, severity=severity))
        return findings

    def _judge_bench(self, ctx: Context, measured: Measured) -> list[Finding]:
        ceiling, note = ceiling_from(ctx, measured.device)
        note = measured.ceiling_note or note
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
        )
        ctx.publish(facts)
        verdicts = judge(measured.bench, ceiling, measured.engine)
        if measured.after is not None:
            peaks = measured.peaks
            planned = measured.bench.input_tokens + measured.bench.output_tokens
            verdicts += diagnose(
                measured.after,
                measured.before,
                peak_kv=peaks.kv_usage if peaks else None,
                peak_waiting=peaks.waiting if peaks else None,
                planned_tokens=planned,
            )
        elif measured.metrics_note:
            verdicts.append(Verdict("SRV005", f"{measured.endpoint}: {measured.metrics_note}.", {"endpoint": measured.endpoint}))
        return self._findings(verdicts, measured.endpoint)

    def _read_alone(self, ctx: Context) -> list[Finding]:
        url = str(ctx.options.get("endpoint"))
        key = ctx.env.get(str(ctx.options.get("api_key_env") or "OPENAI_API_KEY")) or None
        try:
            endpoint = Endpoint.parse(url, api_key=key)
        except ValueError as exc:
            ctx.publish(ServingFacts(endpoint=url, metrics_note=str(exc)))
            return [self.finding("SRV006", f"{exc}.", evidence={"endpoint": url}, path=url)]
        label = endpoint.label
        result = asyncio.run(reading.read(endpoint, timeout=5.0))
        ctx.publish(ServingFacts(endpoint=label, engine=result.engine, model=result.model, after=result.snapshot, metrics_note=result.note))
        if not result.reachable:
            return [self.finding("SRV006", f"{label}: {result.note}.", evidence={"endpoint": label}, path=label)]
        if result.snapshot is None or result.snapshot.engine == "unknown":
            note = result.note or "GET /metrics answered with metrics of no engine decode-doctor knows"
            return [self.finding("SRV005", f"{label}: {note}.", evidence={"endpoint": label}, path=label)]
        return self._findings(diagnose(result.snapshot), label)


def ceiling_from(ctx: Context, device: str | None) -> tuple[Ceiling | None, str | None]:
    """The decode ceiling of the served model from the decode-budget check's facts (one model, read
    by attribute: the models feature's names are its own)."""
    budget = ctx.facts.get("decode-budget")
    entries = getattr(budget, "models", None) or []
    if not entries:
        return None, "no model files (give --model-files, or serve a model whose id is a local path)"
    entry = entries[0]
    name = device or (entry.judged[0] if entry.judged else None)
    chosen = next((b for b in entry.budgets if b.device == name), None)
    if chosen is None:
        known = ", ".join(b.device for b in entry.budgets)
        return None, f"no device {name} on this host (it has {known})"
    if not chosen.tps_per_sequence or not chosen.bandwidth_gbps:
        return None, f"no bandwidth for {chosen.device} (give --bandwidth)"
    ceiling = Ceiling(
        tokens_per_s=chosen.tps_per_sequence,
        device=chosen.device,
        bandwidth_gbps=chosen.bandwidth_gbps,
        bandwidth_source=chosen.bandwidth_source,
        context=chosen.context,
        model=entry.model.name,
    )
    return ceiling, None
