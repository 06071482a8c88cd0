"""What the serving check reads in a pasted text (decode-doctor analyze): a vLLM, SGLang or llama.cpp
server log, or a captured SSE stream. The log's stats lines become the same readings the live check
takes from /metrics and are judged by the same diagnosis; every finding cites its line, and what the
text cannot show is reported as not judged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from decode_doctor.engine import Analysis, Check, Code, Finding, NotJudged, Severity
from decode_doctor.i18n import N_, _, ngettext, sentences

from .codes import LIV004, LIV005, LIV009, LIV011, SRV001, SRV002, SRV007
from .diagnosis import Verdict, diagnose, with_flag
from .engines import Snapshot, spec_named
from .facts import Peaks, ServingFacts
from .logtext import Cited, ServerLog, StatsLine, read_log
from .ssetext import NO_LIMIT, Transcript, read_transcript

READS = N_(
    "vLLM's stats, preemption and startup lines, SGLang's batch and retraction lines, llama-server's slot lines, "
    "a captured SSE stream (curl -N)"
)
SLOT_FLAG = N_("-c/--ctx-size = --parallel × (prompt + output tokens)")


def evidence(source: str, at: Cited, **values: Any) -> dict[str, Any]:
    return {"source": source, "line": at.line, "text": at.text, **values}


def _where(source: str, at: Cited) -> str:
    return _("{source}, line {line}", source=source, line=at.line)


@dataclass(frozen=True)
class Judged:
    verdict: Verdict
    at: StatsLine
    seen: int  # stats lines that gave this verdict


def _snapshot(log: ServerLog, stat: StatsLine) -> Snapshot:
    spec = spec_named(log.engine)
    default = spec.default_max_running if spec else None
    limit, source = (log.limit[0], "log") if log.limit else (default, "default")
    return Snapshot(
        engine=log.engine,
        kv_usage=stat.kv_usage,
        running=stat.running,
        waiting=stat.waiting,
        max_running=float(limit) if limit else None,
        limit_source=source if limit else None,
    )


def _pressure(stat: StatsLine) -> tuple[float, float]:
    """Which moment to cite: the most requests waiting, then the fullest cache."""
    return stat.waiting or 0.0, stat.kv_usage or 0.0


def judge_stats(log: ServerLog, source: str) -> list[Judged]:
    by_code: dict[str, list[tuple[StatsLine, Verdict]]] = {}
    for stat in log.stats:
        when = _("at {source}", source=_where(source, stat.at))
        for verdict in diagnose(_snapshot(log, stat), when=when):
            by_code.setdefault(verdict.code.code, []).append((stat, verdict))
    judged = []
    for hits in by_code.values():
        stat, verdict = max(hits, key=lambda hit: _pressure(hit[0]))
        judged.append(Judged(verdict, stat, len(hits)))
    return judged


def _stats_findings(check: Check, log: ServerLog, source: str) -> list[Finding]:
    findings = []
    limit_note = _(" (the limit, {limit:,.0f}, is from line {line})", limit=log.limit[0], line=log.limit[1].line) if log.limit else ""
    capacity = (
        _(" Its KV cache at startup (line {line}): {text}.", line=log.capacity[-1].line, text=log.capacity[-1].text[-120:])
        if log.capacity
        else ""
    )
    for item in judge_stats(log, source):
        verdict = item.verdict
        seen = _(" Seen in {seen:,} of {count:,} stats lines", seen=item.seen, count=len(log.stats)) if len(log.stats) > 1 else ""
        seen = _("{seen}{limit_note}.", seen=seen, limit_note=limit_note) if seen or limit_note else ""
        extra = capacity if verdict.code is SRV001 else ""
        values = {k: v for k, v in verdict.evidence.items() if k != "engine"}
        cite = evidence(source, item.at.at, engine=log.engine, stats_lines=len(log.stats), seen=item.seen, **values)
        findings.append(check.finding(verdict.code, verdict.message + seen + extra, evidence=cite))
    return findings


def _preemption(check: Check, log: ServerLog, source: str) -> Finding | None:
    at = log.first_preemption
    if at is None:
        return None
    if log.engine == "vLLM":
        what = _("vLLM preempted sequences: its cumulative count reached {preemptions:,.0f}", preemptions=log.preemptions)
    else:
        what = _("SGLang retracted {preemptions:,.0f} running request(s) when the KV cache ran out", preemptions=log.preemptions)
    message = with_flag(
        SRV002,
        log.engine,
        _("{what} (first at {source}): their KV cache was dropped and recomputed.", what=what, source=_where(source, at)),
    )
    return check.finding(SRV002, message, evidence=evidence(source, at, preemptions=log.preemptions, engine=log.engine))


def _sized(held: int | None, known: str, unknown: str, **values: Any) -> str:
    """The sentence written for a known slot size or the one for an unknown size (both whole, marked N_)."""
    return _(known, slot_tokens=held, **values) if held else _(unknown, **values)


def _slot_findings(check: Check, log: ServerLog, source: str) -> list[Finding]:
    """llama-server: prompts cut or refused because a slot holds less, and contexts shifted mid-answer.
    Each sentence is written whole for a known and an unknown slot size (never glued from a fragment)."""
    found = []
    held = log.slot_tokens[0] if log.slot_tokens else None
    flag = _(SLOT_FLAG)
    if log.truncated or log.oversized:
        at = (log.oversized[0][2] if log.oversized else None) or log.truncated[0]
        biggest = max((prompt for prompt, _unused, _line in log.oversized), default=None)
        count = max(len(log.truncated), len(log.oversized))
        cut = _sized(
            held,
            N_(
                "llama.cpp was sent {count:,} prompt(s) longer than its slot of {slot_tokens:,} tokens, first at {source}: it cut "
                "them to fit, so the model never saw their start."
            ),
            N_(
                "llama.cpp was sent {count:,} prompt(s) longer than its slot's context, first at {source}: it cut them to fit, so "
                "the model never saw their start."
            ),
            count=count,
            source=_where(source, at),
        )
        largest = _("The largest was {biggest:,} tokens.", biggest=biggest) if biggest else ""
        message = sentences(cut, largest, _("llama.cpp: {flag}.", flag=flag))
        found.append(check.finding(SRV007, message, evidence=evidence(source, at, prompts=count, slot_tokens=held)))
    if log.refused:
        at = log.refused[0]
        refused = _sized(
            held,
            N_(
                "llama.cpp refused {count:,} request(s) larger than its slot of {slot_tokens:,} tokens, first at {source}: the "
                "client got an error."
            ),
            N_("llama.cpp refused {count:,} request(s) larger than its slot's context, first at {source}: the client got an error."),
            count=len(log.refused),
            source=_where(source, at),
        )
        message = sentences(refused, _("llama.cpp: {flag}.", flag=flag))
        found.append(check.finding(SRV007, message, evidence=evidence(source, at, refused=len(log.refused), slot_tokens=held)))
    if log.shifted:
        at = log.shifted[0]
        shifted = _sized(
            held,
            N_(
                "llama.cpp shifted a slot's context {count:,} time(s), first at {source}: an answer outgrew its slot of "
                "{slot_tokens:,} tokens and its oldest tokens were discarded mid-answer."
            ),
            N_(
                "llama.cpp shifted a slot's context {count:,} time(s), first at {source}: an answer outgrew its slot's context "
                "and its oldest tokens were discarded mid-answer."
            ),
            count=len(log.shifted),
            source=_where(source, at),
        )
        message = sentences(shifted, _("llama.cpp: {flag}, or a lower max_tokens.", flag=flag))
        found.append(check.finding(SRV007, message, evidence=evidence(source, at, shifts=len(log.shifted), slot_tokens=held)))
    return found


def _log_coverage(log: ServerLog) -> list[NotJudged]:
    missing = []
    if log.engine == "llama.cpp":
        why = _("a llama-server log does not show them: read its /metrics and /slots with `check --endpoint`")
        missing.append(NotJudged(_("KV-cache pressure and queueing (llama.cpp)"), why))
        if log.slot_tokens is None and not (log.truncated or log.refused or log.shifted):
            missing.append(NotJudged(_("slot size against requests (llama.cpp)"), _("the log shows no request reaching a slot")))
        return missing
    if not log.stats:
        how = _("--disable-log-stats turns them off") if log.engine == "vLLM" else _("they are printed while requests run")
        missing.append(
            NotJudged(
                _("KV-cache pressure and queueing ({engine})", engine=log.engine), _("the log has no periodic stats lines ({how})", how=how)
            )
        )
    if log.engine == "vLLM" and log.v1 and log.first_preemption is None:
        why = _("vLLM V1 does not log preemptions: read vllm:num_preemptions_total with `check --endpoint`")
        missing.append(NotJudged(_("preemption (vLLM)"), why))
    if log.skipped:
        missing.append(NotJudged(_("{skipped:,} line(s) of the log", skipped=log.skipped), _("longer than 16 KiB, not read")))
    return missing


def _log_facts(log: ServerLog, source: str) -> ServingFacts:
    worst = max(log.stats, key=_pressure) if log.stats else None
    peaks = None
    if log.stats:
        peaks = Peaks(
            len(log.stats),
            max((s.kv_usage for s in log.stats if s.kv_usage is not None), default=None),
            max((s.waiting for s in log.stats if s.waiting is not None), default=None),
            max((s.running for s in log.stats if s.running is not None), default=None),
        )
    notes = [ngettext("{count:,} line read", "{count:,} lines read", log.lines)]
    if log.limit:
        notes.append(_("sequence limit {limit:,.0f} (line {line})", limit=log.limit[0], line=log.limit[1].line))
    notes.extend(_("startup, line {line}: {text}", line=at.line, text=at.text[-160:]) for at in log.capacity[:3])
    if log.slot_tokens:
        notes.append(_("slot context {slot_tokens:,} tokens (line {line})", slot_tokens=log.slot_tokens[0], line=log.slot_tokens[1].line))
    return ServingFacts(
        endpoint=source,
        engine=log.engine,
        after=_snapshot(log, worst) if worst else None,
        peaks=peaks,
        origin=_("{engine} log", engine=log.engine),
        pasted=tuple(notes),
    )


def analyze_log(check: Check, log: ServerLog, source: str) -> Analysis:
    findings = _stats_findings(check, log, source) if log.stats else []
    preempted = _preemption(check, log, source)
    findings += [preempted] if preempted else []
    findings += _slot_findings(check, log, source) if log.engine == "llama.cpp" else []
    kind = _("{engine} server log", engine=log.engine)
    return Analysis(findings, _log_facts(log, source), kind=kind, not_judged=_log_coverage(log))


def _transcript_findings(check: Check, transcript: Transcript, source: str) -> list[Finding]:
    findings = []
    if transcript.errors:
        at = transcript.errors[0]
        message = _(
            "The stream carried {count} error event(s), first at {source}: the request failed mid-stream.",
            count=len(transcript.errors),
            source=_where(source, at),
        )
        findings.append(check.finding(LIV004, message, evidence=evidence(source, at, kind="server-error"), severity=Severity.ERROR))
    elif transcript.cut and transcript.last is not None:
        at = transcript.last
        message = _(
            "The stream ends after {content_chunks:,} content chunk(s) with neither a finish_reason nor data: [DONE] (last "
            "event at {source}): the answer was cut off by the server, a proxy or a client timeout.",
            content_chunks=transcript.content_chunks,
            source=_where(source, at),
        )
        findings.append(check.finding(LIV004, message, evidence=evidence(source, at, kind="cut-off"), severity=Severity.ERROR))
    limit, used = transcript.max_tokens, transcript.completion_tokens
    if limit and limit[0] > 0 and used is not None and used > limit[0] and transcript.usage_at:
        where = _where(source, transcript.usage_at)
        message = _(
            "The response carried {used:,} tokens where the request's max_tokens allowed {limit:,} ({where}).",
            used=used,
            limit=limit[0],
            where=where,
        )
        findings.append(
            check.finding(LIV005, message, evidence=evidence(source, transcript.usage_at, max_tokens=limit[0], completion_tokens=used))
        )
    short = _cut_by_length(check, transcript, source)
    findings += [short] if short else []
    if transcript.usage is None and transcript.content_chunks and not transcript.errors and transcript.last is not None:
        message = _(
            "The stream carries no usage block, so its tokens can only be counted as content chunks: ask for "
            '"stream_options": {"include_usage": true}.'
        )
        findings.append(check.finding(LIV009, message, evidence=evidence(source, transcript.last)))
    return findings


SHORT_UNASKED = 1  # without the request, one word or a blank answer: no max_tokens anyone sets for an answer (a probe's 4 is)


def _cut_by_length(check: Check, transcript: Transcript, source: str) -> Finding | None:
    """finish_reason "length" far below what the request allowed (llama.cpp#12137: one token): another
    limit than max_tokens ended it, and the message adds up the tokens that limit must have held."""
    stopped = next((at for reason, at in transcript.finish_reasons if reason == "length"), None)
    if stopped is None or transcript.errors:
        return None
    used = transcript.completion_tokens
    counted = used if used is not None else transcript.content_chunks
    asked = transcript.max_tokens[0] if transcript.max_tokens else None
    if asked is None:
        if counted > SHORT_UNASKED:
            return None
        request = _("the paste carries no request (unless it asked for at most {count:,} tokens, another limit ended it)", count=counted)
    elif asked == NO_LIMIT:
        request = _("where the request set no limit (max_tokens -1 or null)")
    elif counted * 2 < asked:
        request = _("where the request's max_tokens allowed {asked:,}", asked=asked)
    else:
        return None
    prompt = transcript.usage.get("prompt_tokens") if transcript.usage else None
    if prompt is not None:
        held = _(
            "the request held {total:,} tokens ({prompt:,} prompt + {completion:,} completion): a llama-server slot of that many "
            "tokens (-c ÷ --parallel) ends it here",
            total=prompt + counted,
            prompt=prompt,
            completion=counted,
        )
    else:
        held = _("the stream carries no prompt token count, so the slot's share of -c cannot be compared")
    message = _(
        'The stream stopped with finish_reason "length" after {count:,} completion token(s) ({where}), {request}. The limits '
        "that cut a stream short: the max_tokens the server received, llama-server's -n/--n-predict, and the context a "
        "request holds (llama-server gives each of its --parallel slots -c ÷ --parallel tokens; vLLM stops at "
        "--max-model-len); {held}.",
        count=counted,
        where=_where(source, stopped),
        request=request,
        held=held,
    )
    return check.finding(
        LIV011,
        message,
        evidence=evidence(source, stopped, completion_tokens=counted, max_tokens=asked, prompt_tokens=prompt),
    )


def _transcript_facts(transcript: Transcript, source: str) -> ServingFacts:
    notes = [
        ngettext(
            "{count:,} event, {chunks:,} content chunks",
            "{count:,} events, {chunks:,} content chunks",
            transcript.events,
            chunks=transcript.content_chunks,
        )
    ]
    reasons = ", ".join(_("{reason} (line {line})", reason=reason, line=at.line) for reason, at in transcript.finish_reasons[:4])
    notes.append(_("finish reason: {reasons}", reasons=reasons) if reasons else _("no finish reason"))
    if transcript.usage:
        notes.append(_("usage: {counts}", counts=", ".join(f"{k} {v:,}" for k, v in transcript.usage.items())))
    if transcript.max_tokens and transcript.max_tokens[0] == NO_LIMIT:
        notes.append(_("max_tokens: no limit (line {line})", line=transcript.max_tokens[1].line))
    elif transcript.max_tokens:
        notes.append(_("max_tokens {max_tokens:,} (line {line})", max_tokens=transcript.max_tokens[0], line=transcript.max_tokens[1].line))
    if transcript.done:
        notes.append(_("data: [DONE] at line {line}", line=transcript.done.line))
    elif transcript.finish_reasons:
        notes.append(_("no data: [DONE] after the finish reason (a shortened paste, or a server that omits it)"))
    if transcript.malformed:
        notes.append(
            _("{count} data line(s) not JSON, first at line {line}", count=len(transcript.malformed), line=transcript.malformed[0].line)
        )
    return ServingFacts(endpoint=source, model=transcript.model, origin=_("SSE transcript"), pasted=tuple(notes))


def analyze_transcript(check: Check, transcript: Transcript, source: str) -> Analysis:
    return Analysis(_transcript_findings(check, transcript, source), _transcript_facts(transcript, source), kind=_("SSE stream"))


def analyze(check: Check, text: str, source: str) -> Analysis | None:
    """A server log, or an SSE stream (a stream that carries a server's error text is still a stream)."""
    log = read_log(text)
    if log is not None and log.substantive:
        return analyze_log(check, log, source)
    transcript = read_transcript(text)
    if transcript is not None:
        return analyze_transcript(check, transcript, source)
    return analyze_log(check, log, source) if log is not None else None


__all__ = ["READS", "Code", "analyze"]
