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
from decode_doctor.i18n import N_, _, pgettext, sentences

from .codes import SRV001, SRV002, SRV003, SRV004, SRV007
from .engines import Histogram, Snapshot, family

KV_PRESSURE = 0.90  # KV-cache fraction in use
KV_HIGH = 0.75  # with requests waiting while fewer sequences run than the engine allows: the cache is the limit
AT_LIMIT = 0.9  # running at this share of the engine's sequence limit or more: the limit holds requests back
QUEUE_TIME_S = 0.1  # mean time a request waits before it runs
ITL_SPREAD = 4.0  # inter-token p99 / p50 that says decode steps waited behind something

# Where each diagnosis points, per engine: the knobs that change it
KV_FLAGS = {
    "vLLM": N_("--gpu-memory-utilization 0.95 (more KV blocks), a lower --max-model-len, --kv-cache-dtype fp8, or more replicas"),
    "SGLang": N_("--mem-fraction-static 0.9, --kv-cache-dtype fp8_e5m2, a lower --context-length, or more replicas"),
    "llama.cpp": N_("-c/--ctx-size (it is shared by the --parallel slots), --cache-type-k q8_0 --cache-type-v q8_0, or more replicas"),
    "TGI": N_("--max-batch-total-tokens (the KV budget), a lower --max-total-tokens, or more replicas"),
}
FLAGS: dict[Code, dict[str, str]] = {
    SRV001: KV_FLAGS,
    SRV002: {
        "vLLM": N_("a lower --max-num-seqs, or --gpu-memory-utilization 0.95 for more KV blocks"),
        "SGLang": N_("a lower --max-running-requests, a higher --schedule-conservativeness (1.3), or --mem-fraction-static 0.9"),
    },
    SRV004: {
        "vLLM": N_("--enable-chunked-prefill with a smaller --max-num-batched-tokens (2048)"),
        "SGLang": N_("a smaller --chunked-prefill-size (2048)"),
        "llama.cpp": N_("smaller -b/--batch-size and -ub/--ubatch-size, so a prompt is taken in smaller pieces"),
        "TGI": N_("a lower --max-batch-prefill-tokens"),
    },
    SRV007: {"llama.cpp": N_("-c/--ctx-size = --parallel × (prompt + output tokens)")},
}
# requests wait while the engine runs as many sequences as it may: raise the limit if the KV cache has room
AT_LIMIT_FLAGS = {
    "vLLM": N_("a higher --max-num-seqs while the KV cache has room, else more replicas"),
    "SGLang": N_("a higher --max-running-requests while token_usage has room, else more replicas"),
    "llama.cpp": N_("-np/--parallel N for N slots (and -c N × the context one request needs)"),
    "TGI": N_("a higher --max-concurrent-requests or --max-batch-total-tokens, else more replicas"),
}
# requests wait although neither the sequence limit nor the KV cache binds: the step's token budget or the load itself
BELOW_LIMIT_FLAGS = {
    "vLLM": N_("a larger --max-num-batched-tokens (the tokens one step may take), else more replicas"),
    "SGLang": N_("a larger --chunked-prefill-size or --max-prefill-tokens, else more replicas"),
    "TGI": N_(
        "a higher --max-batch-total-tokens (the KV budget, which TGI's metrics do not show) or --max-batch-prefill-tokens, "
        "else more replicas"
    ),
}
# the engines whose waiting gauge counts only requests no sequence slot could take: waiting means at the limit
WAITS_ONLY_AT_LIMIT = ("llama.cpp",)


def _hinted(message: str, engine: str, flags: dict[str, str]) -> str:
    hint = flags.get(engine)
    return _("{message} {engine}: {hint}.", message=message, engine=engine, hint=_(hint)) if hint else message


@dataclass(frozen=True)
class Verdict:
    code: Code
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)


def with_flag(code: Code, engine: str, message: str) -> str:
    """The message, then the engine's flags that help with this code, when there are any."""
    return _hinted(message, engine, FLAGS[code])


def _peak(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _percent(value: float) -> str:
    return f"{value * 100:.1f}%"


# where a sequence limit was read: a noun phrase, shown in parentheses after the limit ("256 (vLLM's default …)")
LIMIT_SOURCES = {"default": N_("{engine}'s default {flag}"), "log": N_("its {flag} in the log"), "slots": N_("its slots")}

AREAS = (  # what the diagnosis judges, and the snapshot values each needs (any one of them)
    (N_("KV-cache pressure"), ("kv_usage",)),
    (N_("queueing"), ("waiting", "queue_time")),
    (N_("preemption"), ("preemptions",)),
)


def unjudged(snap: Snapshot) -> list[tuple[str, str]]:
    """(what, why) for each part of the diagnosis this reading cannot support: its series absent from
    the metrics, or their lines dropped, or the answer cut before them."""
    spec = snap.spec
    if spec is None:
        return [(_("the server's own metrics"), _("they are of no engine decode-doctor knows"))]
    found = []
    for area, attributes in AREAS:
        names = tuple(name for attribute in attributes for name in getattr(spec, attribute))
        if area == "preemption" and not names:
            continue  # an engine that never preempts (llama.cpp's slots hold their own context)
        lost = [name for name in snap.lost if family(name) in names]
        not_numbers = [name for name in snap.not_numbers if name in names]
        if not_numbers and all(getattr(snap, attribute) is None for attribute in attributes):
            found.append((_(area), _("{series} is not a number (NaN or Inf) in the metrics", series=not_numbers[0])))
        elif lost:
            dropped = _("the line of {series} was dropped (over 64 KiB, or cut inside its labels), so its value is unknown", series=lost[0])
            found.append((_(area), dropped))
        elif all(getattr(snap, attribute) is None for attribute in attributes):
            if not names:
                why = _("{engine}'s metrics have no series for it", engine=spec.name)
            elif len(names) == 1:
                why = _("no {series} in the metrics", series=names[0])
            else:
                why = _("none of {series} in the metrics", series=", ".join(names))
            found.append((_(area), why))
    if snap.truncated:
        found.append((_("the rest of /metrics"), _("the answer passed 8 MiB or 200,000 samples; series after that point were not read")))
    return found


def diagnose(
    now: Snapshot,
    before: Snapshot | None = None,
    *,
    peak_kv: float | None = None,
    peak_waiting: float | None = None,
    peak_running: float | None = None,
    planned_tokens: int | None = None,
    when: str | None = None,
) -> list[Verdict]:
    """before: the reading taken before a bench run (now: after it); the peaks: what the readings
    taken during the run saw. planned_tokens: prompt + output tokens of one bench request. when: the
    moment the reading describes, for a reading from elsewhere ("at server.log, line 12")."""
    engine = now.engine
    verdicts: list[Verdict] = []
    during = before is not None
    window = when or (_("during the run") if during else _("now"))
    kv = _peak(peak_kv, now.kv_usage)
    waiting = _peak(peak_waiting, now.waiting)
    running = _peak(peak_running, now.running)
    limit = now.max_running
    key = now.limit_source or ""
    source = _(LIMIT_SOURCES[key], engine=engine, flag=now.limit_flag) if key in LIMIT_SOURCES else _("its metrics")
    at_limit = bool(limit and running is not None and running >= AT_LIMIT * limit) or (engine in WAITS_ONLY_AT_LIMIT and bool(waiting))
    # requests wait and the cache is well used while fewer sequences run than the engine allows: the KV
    # cache cannot admit more, so raising the sequence limit would change nothing
    kv_bound = bool(waiting and kv is not None and kv >= KV_HIGH and not at_limit)
    if kv_bound:
        assert kv is not None and waiting is not None
        runs = (
            _("{running:,.0f} of {limit:,.0f} ({source})", running=running, limit=limit, source=source)
            if running is not None and limit
            else pgettext("a count of sequences", "{running:,.0f}", running=running or 0)
        )
        message = _(
            "KV-cache capacity is {engine}'s limit {window}: {waiting:,.0f} request(s) wait while {runs} sequences run and the KV "
            "cache is {kv} full: no more sequences fit in it, so a higher {flag} would change nothing.",
            engine=engine, window=window, waiting=waiting, runs=runs, kv=_percent(kv), flag=now.limit_flag or _("sequence limit"),
        )  # fmt: skip
        evidence = {"kv_usage": round(kv, 4), "waiting": waiting, "running": running, "max_running": limit, "engine": engine}
        verdicts.append(Verdict(SRV001, _hinted(message, engine, KV_FLAGS), evidence))
    elif kv is not None and kv >= KV_PRESSURE:
        message = _(
            "{engine}'s KV cache was {kv} full {window}: new sequences wait or evict others.", engine=engine, kv=_percent(kv), window=window
        )
        verdicts.append(Verdict(SRV001, _hinted(message, engine, KV_FLAGS), {"kv_usage": round(kv, 4), "engine": engine}))

    if now.preemptions is not None:
        gained = now.preemptions - before.preemptions if before is not None and before.preemptions is not None else now.preemptions
        if gained > 0:
            since = _("during the run") if during else _("since the server started")
            message = _(
                "{engine} preempted {gained:,.0f} sequence(s) {when}: their KV cache was dropped and recomputed.",
                engine=engine, gained=gained, when=since,
            )  # fmt: skip
            verdicts.append(Verdict(SRV002, with_flag(SRV002, engine, message), {"preemptions": gained, "engine": engine}))

    queue = now.queue_time.since(before.queue_time if before else None) if now.queue_time else None
    queue_mean = queue.mean if queue else None
    queued = (waiting is not None and waiting > 0) or (queue_mean is not None and queue_mean >= QUEUE_TIME_S)
    if queued and not kv_bound:
        parts = []
        if waiting:
            moment = when or (_("at the peak") if during else _("now"))
            parts.append(_("{waiting:,.0f} request(s) waiting {when}", waiting=waiting, when=moment))
        if queue_mean is not None and queue_mean >= QUEUE_TIME_S:
            parts.append(_("a mean queue time of {ms:,.0f} ms", ms=queue_mean * 1000))
        why, flags = _queue_cause(engine, at_limit, running, limit, source, kv)
        message = sentences(
            _("{engine} queues requests: {parts}; their TTFT includes the wait.", engine=engine, parts=_(" and ").join(parts)), why
        )
        evidence = {"waiting": waiting, "queue_time_mean_s": queue_mean, "running": running, "max_running": limit, "engine": engine}
        evidence["at_limit"] = at_limit
        verdicts.append(Verdict(SRV003, _hinted(message, engine, flags), evidence))

    itl = now.itl.since(before.itl if before else None) if now.itl else None
    verdict = _interference(engine, itl, now, before)
    if verdict:
        verdicts.append(verdict)

    slots = now.slots
    if slots and slots.n_ctx and planned_tokens and planned_tokens > slots.n_ctx:
        message = _(
            "each of llama.cpp's {slots} slot(s) holds {n_ctx:,} tokens, fewer than one request's {planned:,} (prompt + output): "
            "the prompt is cut or the request fails.",
            slots=slots.total, n_ctx=slots.n_ctx, planned=planned_tokens,
        )  # fmt: skip
        evidence = {"slots": slots.total, "slot_n_ctx": slots.n_ctx, "planned_tokens": planned_tokens}
        verdicts.append(Verdict(SRV007, with_flag(SRV007, engine, message), evidence))
    return verdicts


def _queue_cause(
    engine: str, at_limit: bool, running: float | None, limit: float | None, source: str, kv: float | None
) -> tuple[str, dict[str, str]]:
    """Why requests queue, as a whole sentence (each case written out, never glued from clauses), and
    the engine flags that help."""
    n = running or 0
    full = _percent(kv) if kv is not None else None
    if at_limit and not limit:
        why = _("{running:,.0f} ran and every slot was busy.", running=n) if running else _("Every slot was busy.")
        return why, AT_LIMIT_FLAGS
    if at_limit and kv is not None and kv >= KV_HIGH:
        why = _(
            "{running:,.0f} of {limit:,.0f} ({source}) sequences ran and the KV cache is {kv} full: both the sequence limit and the "
            "cache bind, so a higher limit alone would not help.",
            running=n, limit=limit, source=source, kv=full,
        )  # fmt: skip
        more = _("more KV room first: {flags}", flags=_(KV_FLAGS.get(engine, "")))  # the flags end in "or more replicas"
        return why, ({engine: more} if engine in KV_FLAGS else {})
    if at_limit:
        values = {"running": n, "limit": limit, "source": source, "kv": full}
        why = (
            _(
                "{running:,.0f} of {limit:,.0f} ({source}) sequences ran and the KV cache is {kv} full: the sequence limit holds "
                "them back.",
                **values,
            )
            if full
            else _("{running:,.0f} of {limit:,.0f} ({source}) sequences ran: the sequence limit holds them back.", **values)
        )
        return why, AT_LIMIT_FLAGS
    if running is not None and limit:
        values = {"running": n, "limit": limit, "source": source, "kv": full}
        why = (
            _(
                "Only {running:,.0f} of {limit:,.0f} ({source}) sequences ran and the KV cache is {kv} full: neither the sequence "
                "limit nor the cache binds.",
                **values,
            )
            if full
            else _(
                "Only {running:,.0f} of {limit:,.0f} ({source}) sequences ran: neither the sequence limit nor the cache binds.", **values
            )
        )
        return why, BELOW_LIMIT_FLAGS
    # the limit is not in the metrics: which one binds cannot be told
    if not running:
        return "", {}
    why = _("{running:,.0f} ran; the sequence limit is not in the metrics.", running=n)
    flags = (
        {engine: _("if {running:,.0f} is its limit, {flags}", running=n, flags=_(AT_LIMIT_FLAGS[engine]))}
        if engine in AT_LIMIT_FLAGS
        else {}
    )
    return why, flags


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
    message = _(
        "{engine}'s inter-token latency p99 is {p99:,.0f} ms against a p50 of {p50:,.0f} ms ({ratio:.1f}×) while prompts were "
        "being prefilled: decode steps wait behind prefills.",
        engine=engine, p99=p99 * 1000, p50=p50 * 1000, ratio=p99 / p50,
    )  # fmt: skip
    evidence = {"itl_p50_s": round(p50, 5), "itl_p99_s": round(p99, 5), "samples": itl.count, "prompt_tokens": prompts, "engine": engine}
    return Verdict(SRV004, with_flag(SRV004, engine, message), evidence)
