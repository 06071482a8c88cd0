"""A captured server-sent-event stream of an OpenAI-compatible completion (`curl -N …` output, a
proxy's log), read event by event: content chunks, finish reasons, usage, errors, and whether it
reached `data: [DONE]`. The request's max_tokens is read when the paste carries the request body
(anywhere outside the data lines; -1 or null: no limit asked). llama-server's verbose log prefixes
each event it sends with "data stream, to_send: "; such lines are read as the events they carry.

Each data line is size-limited before it is parsed, and nesting deeper than JSON completions use is
refused, so a hostile paste costs bounded time and memory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .logtext import Cited, cite, lines_of, number_after

MAX_EVENT_CHARS = 1 << 20
MAX_DEPTH = 32
SERVER_PREFIXES = ("data stream, to_send: ",)  # llama-server --verbose: the events it sends, as logged
NO_LIMIT = -1  # max_tokens -1 (llama.cpp) or null: the request asked for no limit


@dataclass
class Transcript:
    events: int = 0  # data lines that parsed as JSON
    content_chunks: int = 0
    finish_reasons: list[tuple[str, Cited]] = field(default_factory=list)
    usage: dict[str, int] | None = None
    usage_at: Cited | None = None
    errors: list[Cited] = field(default_factory=list)
    malformed: list[Cited] = field(default_factory=list)
    done: Cited | None = None
    last: Cited | None = None  # the last data line
    max_tokens: tuple[int, Cited] | None = None  # from the pasted request; NO_LIMIT for -1 or null
    model: str | None = None
    engine_timings: bool = False  # llama.cpp's "timings"

    @property
    def cut(self) -> bool:
        """Ended with neither a finish reason nor [DONE]: the answer is incomplete."""
        return self.done is None and not self.finish_reasons

    @property
    def completion_tokens(self) -> int | None:
        return self.usage.get("completion_tokens") if self.usage else None


def looks_like_sse(text: str) -> bool:
    head = text[: 1 << 20]
    return "data: {" in head or "data:{" in head


def data_payload(line: str) -> str | None:
    """The payload of an SSE data line ("data: {…}"), also as llama-server's verbose log shows one it
    sent; None for any other line."""
    stripped = line.strip()
    for prefix in SERVER_PREFIXES:
        if stripped.startswith(prefix):
            stripped = stripped[len(prefix) :].lstrip()
            break
    return stripped[5:].strip() if stripped.startswith("data:") else None


def requested_max_tokens(line: str) -> int | None:
    """A request body's max_tokens (or max_completion_tokens) in the line: the number, NO_LIMIT for -1
    or null, None when the line carries neither key."""
    for key in ('"max_tokens":', '"max_completion_tokens":'):
        index = line.find(key)
        if index < 0:
            continue
        rest = line[index + len(key) : index + len(key) + 32].lstrip()
        if rest.startswith(("null", "-1")):
            return NO_LIMIT
        value = number_after(line, key)
        if value:
            return int(value)
    return None


def _depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deep the value nests, stopping at the limit (iterative: no recursion on hostile input)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        if isinstance(item, dict):
            stack.extend((child, level + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, level + 1) for child in item)
    return deepest


def _event(transcript: Transcript, number: int, line: str, payload: str) -> None:
    at = cite(number, line)
    transcript.last = at
    if payload == "[DONE]":
        transcript.done = at
        return
    if len(payload) > MAX_EVENT_CHARS:
        transcript.malformed.append(at)
        return
    try:
        event = json.loads(payload)
    except (ValueError, RecursionError):
        transcript.malformed.append(at)
        return
    if not isinstance(event, dict) or _depth(event) > MAX_DEPTH:
        transcript.malformed.append(at)
        return
    transcript.events += 1
    if "error" in event or event.get("object") == "error":
        transcript.errors.append(at)
        return
    if isinstance(event.get("model"), str):
        transcript.model = transcript.model or event["model"]
    if isinstance(event.get("timings"), dict):
        transcript.engine_timings = True
    usage = event.get("usage")
    if isinstance(usage, dict):
        counts = {key: value for key, value in usage.items() if isinstance(value, int) and not isinstance(value, bool)}
        if counts:
            transcript.usage, transcript.usage_at = counts, at
    for choice in event.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        raw_delta = choice.get("delta")
        delta: dict[str, Any] = raw_delta if isinstance(raw_delta, dict) else {}
        text = delta.get("content") or delta.get("reasoning_content") or choice.get("text")
        if (isinstance(text, str) and text) or delta.get("tool_calls"):
            transcript.content_chunks += 1
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            transcript.finish_reasons.append((reason, at))


def read_transcript(text: str) -> Transcript | None:
    if not looks_like_sse(text):
        return None
    transcript = Transcript()
    for number, line in lines_of(text):
        payload = data_payload(line)
        if payload is not None:
            _event(transcript, number, line, payload)
        elif transcript.max_tokens is None and len(line) <= MAX_EVENT_CHARS:
            asked = requested_max_tokens(line)
            if asked is not None:
                transcript.max_tokens = (asked, cite(number, line))
    return transcript if transcript.events or transcript.done else None
