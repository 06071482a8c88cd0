"""A bench run judged: how far decode is from the ceiling, and what users would feel (TPOT swings,
TTFT tails, errors, a server that ignores max_tokens or an SLO that does not hold)."""

from __future__ import annotations

from collections.abc import Sequence

from decode_doctor.i18n import N_, _, localized, pgettext

from .client import TokenSource
from .codes import LIV001, LIV002, LIV003, LIV004, LIV005, LIV006, LIV007, LIV008, LIV009
from .diagnosis import Verdict
from .facts import BenchRun, Ceiling, ms
from .stats import Dist, LevelStats, SloTerm, parse_slo

LOW_REACH = 0.5  # decode at concurrency 1 below half the ceiling
IMPOSSIBLE_REACH = 1.25  # above the ceiling by more than measurement error: the ceiling is not this server's
TPOT_SPREAD = 2.0  # p99 / p50
TTFT_SPREAD = 3.0
TTFT_TAIL_MS = 200.0  # and p99 − p50 at least this
MIN_SAMPLES = 10  # a p99 of fewer requests is the maximum, not a tail
ERROR_RATE = 0.05  # at or above: an error, below: a warning


CUT_OFF_HINTS = {
    "llama-cpp-python": N_(
        "llama-cpp-python's server ends a running answer when another request arrives; "
        "start it with --interrupt_requests False to queue them instead"
    ),
}


def judge(bench: BenchRun, ceiling: Ceiling | None, engine: str | None = None) -> list[Verdict]:
    verdicts = _against_ceiling(bench, ceiling)
    levels = [lv for lv in bench.levels if lv.attempted]
    verdicts += _swings(levels) + _tails(levels) + _failures(levels, engine)
    verdicts += _max_tokens(levels, bench.output_tokens, bench.ignore_eos)
    verdicts += _slo(levels, bench.slo)
    return verdicts


def _against_ceiling(bench: BenchRun, ceiling: Ceiling | None) -> list[Verdict]:
    first = bench.level(1)
    if ceiling is None or first is None or not first.decode_tokens_per_s or first.tpot is None:
        return []
    measured = first.decode_tokens_per_s
    reach = measured / ceiling.tokens_per_s
    evidence = {
        "measured_tokens_per_s": round(measured, 2),
        "tpot_p50_ms": round(first.tpot.p50, 3),
        "ceiling_tokens_per_s": round(ceiling.tokens_per_s, 2),
        "reach": round(reach, 3),
        "device": ceiling.device,
        "bandwidth_gbps": ceiling.bandwidth_gbps,
        "bandwidth_source": ceiling.bandwidth_source,
        "model": ceiling.model,
    }
    if reach > IMPOSSIBLE_REACH:
        message = _(
            "decode at concurrency 1 runs at {measured:,.1f} tok/s, {reach:.1f}× the ceiling of {ceiling:,.1f} tok/s computed for "
            "{model} on {device}: the server is not serving these weights from this memory (another model or quantization, or "
            "another device), so no judgement is made.",
            measured=measured, reach=reach, ceiling=ceiling.tokens_per_s, model=ceiling.model, device=ceiling.device,
        )  # fmt: skip
        return [Verdict(LIV008, message, evidence)]
    if reach < LOW_REACH:
        message = _(
            "decode at concurrency 1 reaches {reach:.0f} % of this host's ceiling: {measured:,.1f} of {ceiling:,.1f} tok/s "
            "(TPOT p50 {tpot} against {floor}).",
            reach=reach * 100, measured=measured, ceiling=ceiling.tokens_per_s, tpot=ms(first.tpot.p50),
            floor=ms(1000 / ceiling.tokens_per_s),
        )  # fmt: skip
        return [Verdict(LIV001, message, evidence)]
    return []


def _swings(levels: Sequence[LevelStats]) -> list[Verdict]:
    worst = [(lv, lv.tpot) for lv in levels if lv.tpot and lv.tpot.n >= MIN_SAMPLES and (lv.tpot.spread or 0) > TPOT_SPREAD]
    if not worst:
        return []
    lv, tpot = max(worst, key=lambda item: item[1].spread or 0)
    message = _(
        "TPOT swings from {p50} (p50) to {p99} (p99) at concurrency {concurrency}, {spread:.1f}× (levels: {levels}).",
        p50=ms(tpot.p50), p99=ms(tpot.p99), concurrency=lv.concurrency, spread=tpot.spread or 0,
        levels=", ".join(str(x.concurrency) for x, _d in worst),
    )  # fmt: skip
    evidence = {"concurrency": lv.concurrency, "tpot_p50_ms": round(tpot.p50, 3), "tpot_p99_ms": round(tpot.p99, 3), "samples": tpot.n}
    return [Verdict(LIV002, message, evidence)]


def _tails(levels: Sequence[LevelStats]) -> list[Verdict]:
    def tail(t: Dist | None) -> bool:
        return bool(t and t.n >= MIN_SAMPLES and t.p50 > 0 and t.p99 / t.p50 > TTFT_SPREAD and t.p99 - t.p50 >= TTFT_TAIL_MS)

    worst = [(lv, lv.ttft) for lv in levels if lv.ttft is not None and tail(lv.ttft)]
    if not worst:
        return []
    lv, ttft = max(worst, key=lambda item: item[1].p99 / item[1].p50)
    message = _(
        "TTFT has a long tail at concurrency {concurrency}: p50 {p50}, p99 {p99} ({ratio:.1f}×); one request in a hundred waits "
        "that long for its first token.",
        concurrency=lv.concurrency, p50=ms(ttft.p50), p99=ms(ttft.p99), ratio=ttft.p99 / ttft.p50,
    )  # fmt: skip
    evidence = {"concurrency": lv.concurrency, "ttft_p50_ms": round(ttft.p50, 3), "ttft_p99_ms": round(ttft.p99, 3), "samples": ttft.n}
    return [Verdict(LIV003, message, evidence)]


# a failed request's kind (ClientError.kind, a machine word in the evidence) in words
FAILURE_KINDS = {
    "connect": N_("could not connect"),
    "dropped": N_("connection dropped"),
    "timeout": N_("timed out"),
    "stall": N_("stalled"),
    "malformed": N_("malformed response"),
    "no-done": N_("stream ended without [DONE]"),
    "cut-off": N_("cut off"),
    "server-error": N_("server error"),
    "http-429": N_("HTTP 429 (rate limited)"),
    "http-5xx": N_("HTTP 5xx"),
    "http-4xx": N_("HTTP 4xx"),
    "inet": N_("network error"),
    "cancelled": N_("cancelled"),
    "error": N_("failed"),
}


def _failures(levels: Sequence[LevelStats], engine: str | None) -> list[Verdict]:
    attempted = sum(lv.attempted for lv in levels)
    failed = sum(lv.attempted - lv.ok for lv in levels)
    if not failed:
        return []
    kinds: dict[str, int] = {}
    examples: dict[str, str] = {}
    for lv in levels:
        for kind, count in lv.errors.items():
            kinds[kind] = kinds.get(kind, 0) + count
        for kind, text in lv.error_examples.items():
            examples.setdefault(kind, text)
    by_kind = _(", ").join(
        pgettext("requests that failed in one way", "{count} {kind}", count=count, kind=_(FAILURE_KINDS.get(kind, kind)))
        for kind, count in sorted(kinds.items(), key=lambda item: -item[1])
    )
    first_kind = max(kinds, key=lambda k: kinds[k])
    message = _(
        "{failed} of {attempted} requests failed ({kinds}); for example: {example}",
        failed=failed, attempted=attempted, kinds=by_kind, example=localized(examples.get(first_kind, "")),
    )  # fmt: skip
    if "cut-off" in kinds and engine in CUT_OFF_HINTS:
        message += _(" ({hint})", hint=_(CUT_OFF_HINTS[engine]))
    evidence = {"failed": failed, "attempted": attempted, "kinds": kinds, "examples": examples, "rate": round(failed / attempted, 4)}
    return [Verdict(LIV004, message, evidence)]


def _max_tokens(levels: Sequence[LevelStats], max_tokens: int, ignore_eos: bool) -> list[Verdict]:
    verdicts = []
    over = sum(lv.over_max for lv in levels)
    if over:
        message = _("{over} response(s) carried more than the {max_tokens} tokens max_tokens allowed.", over=over, max_tokens=max_tokens)
        verdicts.append(Verdict(LIV005, message, {"over": over, "max_tokens": max_tokens}))
    early = sum(lv.stopped_early for lv in levels)
    ok = sum(lv.ok for lv in levels)
    if early:
        hint = "" if ignore_eos else _(" --ignore-eos asks vLLM, SGLang and llama.cpp to run every request to max_tokens.")
        message = _(
            "{early} of {ok} responses ended before {max_tokens} tokens (the model chose to stop): the load was lighter than "
            "planned and TPOT is over fewer tokens.{hint}",
            early=early, ok=ok, max_tokens=max_tokens, hint=hint,
        )  # fmt: skip
        verdicts.append(Verdict(LIV006, message, {"early": early, "ok": ok, "max_tokens": max_tokens}))
    chunks = [lv.concurrency for lv in levels if lv.tokens_from in (TokenSource.CHUNKS, TokenSource.MIXED)]
    if chunks:
        message = _(
            "the server sent no usage with its stream (stream_options.include_usage), so output tokens were counted as "
            "content chunks; a server that puts several tokens in one chunk makes TPOT look slower than it is."
        )
        verdicts.append(Verdict(LIV009, message, {"levels": chunks}))
    return verdicts


def _slo(levels: Sequence[LevelStats], terms: Sequence[str]) -> list[Verdict]:
    if not terms:
        return []
    failing = [lv for lv in levels if lv.slo_met and not all(lv.slo_met.values())]
    if not failing:
        return []
    passing = [lv.concurrency for lv in levels if lv.slo_met and all(lv.slo_met.values())]
    first = failing[0]
    over, within = _slo_terms(first, parse_slo(",".join(terms)))
    failed = first.attempted - first.ok
    causes = []
    if over:
        causes.append(_("latency: {terms}", terms=", ".join(over)))
    if failed:
        causes.append(
            _("failed requests: {failed} of {attempted} (a failed request misses every term)", failed=failed, attempted=first.attempted)
        )
    cleared = _("; within it: {terms}", terms=", ".join(within)) if within else ""
    holds = _("it holds up to concurrency {concurrency}", concurrency=max(passing)) if passing else _("it holds at no level measured")
    message = _(
        "the SLO {slo} fails at concurrency {concurrency} on {causes}{cleared}; {holds}.",
        slo=",".join(terms), concurrency=first.concurrency, causes=_(" and on ").join(causes), cleared=cleared, holds=holds,
    )  # fmt: skip
    evidence = {
        "failing": [lv.concurrency for lv in failing],
        "passing": passing,
        "missed_first": ", ".join(label for label, met in first.slo_met.items() if not met),
        "cause": "latency and failures" if over and failed else "latency" if over else "failures",
        "latency_over": over,
        "failed": failed,
    }
    return [Verdict(LIV007, message, evidence)]


def _slo_terms(level: LevelStats, terms: Sequence[SloTerm]) -> tuple[list[str], list[str]]:
    """Each term at this level as measured: ("TTFT p95 912 ms > 800 ms", …) over its limit, and those within."""
    over: list[str] = []
    within: list[str] = []
    for term in terms:
        dist = getattr(level, term.metric, None)
        name = f"{term.metric.upper()} p{term.q}"
        if not isinstance(dist, Dist):
            over.append(_("{name} not measured", name=name))
            continue
        value = dist.at(term.q)
        shown = f"{name} {ms(value)}"
        (over if value > term.limit_ms else within).append(f"{shown} > {ms(term.limit_ms)}" if value > term.limit_ms else shown)
    return over, within
