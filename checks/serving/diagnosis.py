"""The server's own account of itself (its /metrics, and llama.cpp's /slots), judged: KV-cache
pressure, preemption, queueing and prefill interference, each with the engine flag that helps.

A reading alone (`check --endpoint`) is judged on gauges as they are and counters since the server
started; around a bench run, on the peaks seen while it ran and on what the counters and histograms
gained during it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from decode_doctor.engine import Code

from .codes import SRV001, SRV002, SRV003, SRV004, SRV007
from .engines import Histogram, Snapshot

KV_PRESSURE = 0.90  # KV-cache fraction in use
QUEUE_TIME_S = 0.1  # mean time a request waits before it runs
ITL_SPREAD = 4.0  # inter-token p99 / p50 that says decode steps waited behind something

FLAGS: dict[Code, dict[str, str]] = {
    SRV001: {
        "vLLM": "--gpu-memory-utilization 0.95 (more KV blocks), --kv-cache-dtype fp8, a lower --max-model-len or --max-num-seqs",
        "SGLang": "--mem-fraction-static 0.9, --kv-cache-dtype fp8_e5m2, a lower --max-running-requests",
        "llama.cpp": "-c/--ctx-size (it is shared by the --parallel slots), --cache-type-k q8_0 --cache-type-v q8_0",
        "TGI": "--max-batch-total-tokens (the KV budget), a lower --max-total-tokens",
    },
    SRV002: {
        "vLLM": "a lower --max-num-seqs, or --gpu-memory-utilization 0.95 for more KV blocks",
        "SGLang": "a lower --max-running-requests, --schedule-conservativeness 1.3, or --mem-fraction-static 0.9",
    },
    SRV003: {
        "vLLM": "a higher --max-num-seqs if the KV cache has room, else more replicas",
        "SGLang": "a higher --max-running-requests if token_usage has room, else more replicas",
        "llama.cpp": "-np/--parallel N for N slots (and -c N × the context one request needs)",
        "TGI": "a higher --max-batch-total-tokens or --max-concurrent-requests, else more replicas",
    },
    SRV004: {
        "vLLM": "--enable-chunked-prefill with a smaller --max-num-batched-tokens (2048)",
        "SGLang": "a smaller --chunked-prefill-size (2048)",
        "llama.cpp": "smaller -b/--batch-size and -ub/--ubatch-size, so a prompt is taken in smaller pieces",
        "TGI": "a lower --max-batch-prefill-tokens",
    },
    SRV007: {"llama.cpp": "-c/--ctx-size = --parallel × (prompt + output tokens)"},
}


def flag(code: Code, engine: str) -> str:
    return FLAGS.get(code, {}).get(engine, "")


@dataclass(frozen=True)
class Verdict:
    code: Code
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)


def _with_flag(code: Code, engine: str, message: str) -> str:
    hint = flag(code, engine)
    return f"{message} {engine}: {hint}." if hint else message


def _peak(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _percent(value: float) -> str:
    return f"{value * 100:.0f} %"


def diagnose(
    now: Snapshot,
    before: Snapshot | None = None,
    *,
    peak_kv: float | None = None,
    peak_waiting: float | None = None,
    planned_tokens: int | None = None,
) -> list[Verdict]:
    """before: the reading taken before a bench run (now: after it); the peaks: what the readings
    taken during the run saw. planned_tokens: prompt + output tokens of one bench request."""
    engine = now.engine
    verdicts: list[Verdict] = []
    during = before is not None
    window = "during the run" if during else "now"
    kv = _peak(peak_kv, now.kv_usage)
    if kv is not None and kv >= KV_PRESSURE:
        message = f"{engine}'s KV cache was {_percent(kv)} full {window}: new sequences wait or evict others."
        verdicts.append(Verdict(SRV001, _with_flag(SRV001, engine, message), {"kv_usage": round(kv, 4), "engine": engine}))

    if now.preemptions is not None:
        gained = now.preemptions - before.preemptions if before is not None and before.preemptions is not None else now.preemptions
        if gained > 0:
            when = "during the run" if during else "since the server started"
            message = f"{engine} preempted {gained:,.0f} sequence(s) {when}: their KV cache was dropped and recomputed."
            verdicts.append(Verdict(SRV002, _with_flag(SRV002, engine, message), {"preemptions": gained, "engine": engine}))

    waiting = _peak(peak_waiting, now.waiting)
    queue = now.queue_time.since(before.queue_time if before else None) if now.queue_time else None
    queue_mean = queue.mean if queue else None
    if (waiting is not None and waiting > 0) or (queue_mean is not None and queue_mean >= QUEUE_TIME_S):
        parts = []
        if waiting:
            parts.append(f"{waiting:,.0f} request(s) waiting {'at the peak' if during else 'now'}")
        if queue_mean is not None and queue_mean >= QUEUE_TIME_S:
            parts.append(f"a mean queue time of {queue_mean * 1000:,.0f} ms")
        running = f" while {now.running:,.0f} ran" if now.running else ""
        message = f"{engine} queues requests: {' and '.join(parts)}{running}; their TTFT includes the wait."
        evidence = {"waiting": waiting, "queue_time_mean_s": queue_mean, "running": now.running, "engine": engine}
        verdicts.append(Verdict(SRV003, _with_flag(SRV003, engine, message), evidence))

    itl = now.itl.since(before.itl if before else None) if now.itl else None
    verdict = _interference(engine, itl, now, before)
    if verdict:
        verdicts.append(verdict)

    slots = now.slots
    if slots and slots.n_ctx and planned_tokens and planned_tokens > slots.n_ctx:
        message = (
            f"each of llama.cpp's {slots.total} slot(s) holds {slots.n_ctx:,} tokens, fewer than one request's "
            f"{planned_tokens:,} (prompt + output): the prompt is cut or the request fails."
        )
        evidence = {"slots": slots.total, "slot_n_ctx": slots.n_ctx, "planned_tokens": planned_tokens}
        verdicts.append(Verdict(SRV007, _with_flag(SRV007, engine, message), evidence))
    return verdicts


def _interference(engine: str, itl: Histogram | None, now: Snapshot, before: Snapshot | None) -> Verdict | None:
    if itl is None or itl.count < 20:
        return None
    p50, p99 = itl.quantile(0.5), itl.quantile(0.99)
    if not p50 or p99 is None or p99 / p50 < ITL_SPREAD:
        return None
    prompts = None
    if now.prompt_tokens is not None:
        prompts = now.prompt_tokens - (before.prompt_tokens or 0) if before and before.prompt_tokens is not None else now.prompt_tokens
        if prompts <= 0:
            return None  # no prefill ran: the spread has another cause
    message = (
        f"{engine}'s inter-token latency p99 is {p99 * 1000:,.0f} ms against a p50 of {p50 * 1000:,.0f} ms "
        f"({p99 / p50:.1f}×) while prompts were being prefilled: decode steps wait behind prefills."
    )
    evidence = {"itl_p50_s": round(p50, 5), "itl_p99_s": round(p99, 5), "samples": itl.count, "prompt_tokens": prompts, "engine": engine}
    return Verdict(SRV004, _with_flag(SRV004, engine, message), evidence)
