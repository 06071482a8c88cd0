"""A small HTTP/1.1 client over asyncio streams, for one job: timing a streamed completion token by
token. Hand-written rather than a general library so that the moment each byte arrives is the
moment recorded, and so that every limit holds against a hostile or broken server: headers, lines,
events and bodies are size-limited, a stall ends the request, and nothing waits without a deadline.
Only the endpoint given is ever contacted."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from decode_doctor.i18n import N_, os_reason, said
from decode_doctor.i18n import reason as reason_of
from decode_doctor.i18n.labels import Labelled

MAX_HEADER_BYTES = 64 << 10
MAX_LINE_BYTES = 1 << 20  # one SSE line, one chunk-size line
MAX_BODY_BYTES = 8 << 20  # a non-streamed answer (/metrics, /tokenize, an error page)
MAX_EVENTS_SLACK = 64  # events beyond 4 per requested token are a runaway server


class ClientError(Exception):
    """A request that did not give a usable answer; the message says what happened, for a report,
    and the kind groups it (connect, http-429, http-5xx, stall, timeout, dropped, malformed, no-done,
    runaway, server-error)."""

    def __init__(self, message: str, kind: str = "error"):
        super().__init__(message)
        self.kind = kind


class TokenSource(Labelled):
    """Where a response's output tokens were counted from."""

    USAGE = "usage", N_("the server's usage block")
    CHUNKS = "chunks", N_("one per stream chunk")  # a server without usage in its stream
    MIXED = "mixed", N_("the usage block for some requests, stream chunks for others")
    NONE = "none", N_("no response to count them from")


@dataclass(frozen=True)
class Endpoint:
    scheme: str
    host: str
    port: int
    base_path: str  # "/v1"
    api_key: str | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, url: str, api_key: str | None = None) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(said('"{url}" is not an http(s):// URL', url=url))
        port = parts.port or (443 if parts.scheme == "https" else 80)
        path = parts.path.rstrip("/") or "/v1"
        return cls(parts.scheme, parts.hostname, port, path, api_key)

    @property
    def label(self) -> str:
        """The endpoint as reports show it: no credentials, whatever the URL carried."""
        return f"{self.origin}{self.base_path}"

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return self.origin + path

    def path(self, name: str) -> str:
        """A path under the API base (/v1/chat/completions), or at the server root (/metrics)."""
        return name if name.startswith("/") else f"{self.base_path}/{name}"


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class Record:
    """One streamed request."""

    started: float = 0.0  # perf_counter when the request was sent
    ttft: float | None = None  # seconds to the first content token
    e2e: float | None = None  # seconds to the end of the stream
    gaps: list[float] = field(default_factory=list)  # between successive content chunks
    chunks: int = 0  # chunks that carried content
    usage_output: int | None = None  # completion_tokens as the server counted them
    usage_prompt: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    kind: str | None = None  # the error's kind (ClientError.kind); "cancelled" when the run was stopped
    status: int | None = None
    done: bool = False  # [DONE] received
    engine_timings: dict[str, float] = field(default_factory=dict)  # llama.cpp's "timings", when sent

    @property
    def output_tokens(self) -> int:
        return self.usage_output if self.usage_output is not None else self.chunks

    @property
    def tokens_from(self) -> TokenSource:
        return TokenSource.USAGE if self.usage_output is not None else TokenSource.CHUNKS

    @property
    def tpot(self) -> float | None:
        """(E2E − TTFT) / (output tokens − 1): the first token excluded."""
        if self.error or self.ttft is None or self.e2e is None or self.output_tokens < 2:
            return None
        return (self.e2e - self.ttft) / (self.output_tokens - 1)


async def _connect(endpoint: Endpoint, timeout: float) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    context = ssl.create_default_context() if endpoint.scheme == "https" else None
    try:
        return await asyncio.wait_for(asyncio.open_connection(endpoint.host, endpoint.port, ssl=context, limit=MAX_LINE_BYTES), timeout)
    except (OSError, asyncio.TimeoutError) as exc:
        reason = said("timed out") if isinstance(exc, asyncio.TimeoutError) else os_reason(exc)
        raise ClientError(said("cannot connect to {origin}: {reason}", origin=endpoint.origin, reason=reason), "connect") from None


def _request_bytes(endpoint: Endpoint, method: str, path: str, body: bytes | None, accept: str) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        f"Host: {endpoint.host}:{endpoint.port}",
        "User-Agent: decode-doctor",
        f"Accept: {accept}",
        "Connection: close",
    ]
    if endpoint.api_key:
        lines.append(f"Authorization: Bearer {endpoint.api_key}")
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise ClientError(said("response headers larger than {amount} KiB", amount=MAX_LINE_BYTES >> 10), "malformed") from None
    except asyncio.IncompleteReadError:
        raise ClientError(said("the connection closed before the response headers"), "dropped") from None
    if len(head) > MAX_HEADER_BYTES:
        raise ClientError(said("response headers larger than {amount} KiB", amount=MAX_HEADER_BYTES >> 10), "malformed")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdecimal():
        raise ClientError(said("not an HTTP response: {lines}", lines=repr(lines[0][:80])), "malformed")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


async def _body_chunks(reader: asyncio.StreamReader, headers: dict[str, str]) -> AsyncIterator[bytes]:
    """The body's bytes as they arrive: chunked, by Content-Length, or until the server closes."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            try:
                size_line = await reader.readuntil(b"\r\n")
            except (asyncio.LimitOverrunError, asyncio.IncompleteReadError):
                raise ClientError(said("the connection broke inside a chunked body"), "dropped") from None
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ClientError(said("a malformed chunk size: {size_line}", size_line=repr(size_line[:40])), "malformed") from None
            if size == 0:
                return
            if size > MAX_BODY_BYTES:
                raise ClientError(
                    said("a {size:,}-byte chunk, more than {amount} MiB", size=size, amount=MAX_BODY_BYTES >> 20), "malformed"
                )
            try:
                data = await reader.readexactly(size)
                await reader.readexactly(2)
            except asyncio.IncompleteReadError:
                raise ClientError(said("the connection broke inside a chunk"), "dropped") from None
            yield data
    elif "content-length" in headers:
        try:
            remaining = int(headers["content-length"])
        except ValueError:
            raise ClientError(
                said("a malformed Content-Length: {headers}", headers=repr(headers["content-length"][:40])), "malformed"
            ) from None
        while remaining > 0:
            data = await reader.read(min(remaining, 1 << 16))
            if not data:
                raise ClientError(said("the connection closed before the announced Content-Length"), "dropped")
            remaining -= len(data)
            yield data
    else:
        while data := await reader.read(1 << 16):
            yield data


async def fetch(endpoint: Endpoint, method: str, path: str, payload: Any = None, timeout: float = 10.0) -> Response:
    """A small request whose whole answer is read (bounded): /metrics, /tokenize, /v1/models."""
    body = json.dumps(payload).encode() if payload is not None else None

    async def go() -> Response:
        reader, writer = await _connect(endpoint, timeout)
        try:
            writer.write(_request_bytes(endpoint, method, path, body, "*/*"))
            await writer.drain()
            status, headers = await _read_head(reader)
            data = bytearray()
            async for part in _body_chunks(reader, headers):
                data += part
                if len(data) > MAX_BODY_BYTES:
                    raise ClientError(
                        said("{path}: an answer larger than {amount} MiB", path=path, amount=MAX_BODY_BYTES >> 20), "malformed"
                    )
            return Response(status, headers, bytes(data))
        finally:
            writer.close()

    try:
        return await asyncio.wait_for(go(), timeout)
    except asyncio.TimeoutError:
        raise ClientError(said("{path}: no complete answer within {timeout:g} s", path=path, timeout=timeout), "timeout") from None
    except (OSError, ConnectionError) as exc:
        raise ClientError(said("{path}: {error}", path=path, error=str(exc)), "dropped") from None


@dataclass(frozen=True)
class StreamLimits:
    connect_s: float = 10.0
    idle_s: float = 30.0  # no byte for this long is a stall
    total_s: float = 600.0


async def stream(
    endpoint: Endpoint,
    path: str,
    payload: dict[str, Any],
    limits: StreamLimits,
    clock: Callable[[], float] = time.perf_counter,
    record: Record | None = None,
) -> Record:
    """One streamed completion, timed chunk by chunk; every failure ends in record.error, never a hang.

    A caller that may cancel the request passes its own record: cancelled, it holds what arrived."""
    record = record if record is not None else Record()
    record.started = clock()
    request = _Stream(endpoint, path, payload, limits, clock, record)
    try:
        await asyncio.wait_for(request.run(), limits.total_s)
    except ClientError as exc:
        record.error, record.kind = reason_of(exc), exc.kind
        if exc.kind == "dropped" and "tokens" not in (record.error or ""):
            record.error = said("{error} after {chunks} tokens", error=record.error, chunks=record.chunks)
    except asyncio.TimeoutError:
        record.error, record.kind = (
            said("not finished within {total_s:g} s ({chunks} tokens)", total_s=limits.total_s, chunks=record.chunks),
            "timeout",
        )
    except (OSError, ConnectionError) as exc:
        record.error, record.kind = said("connection lost after {chunks} tokens: {error}", chunks=record.chunks, error=str(exc)), "dropped"
    except asyncio.CancelledError:
        record.error, record.kind = said("cancelled: the run was stopped"), "cancelled"
        raise
    finally:
        if request.writer is not None:
            request.writer.close()
    return record


class _Stream:
    """One request's stream, read event by event: the head, then data lines until [DONE]. Bytes that
    carry no data (comments such as ": ping", blank lines) keep the connection alive but not the
    stream: more than idle_s without a data event is a stall, however many comments arrive."""

    def __init__(
        self, endpoint: Endpoint, path: str, payload: dict[str, Any], limits: StreamLimits, clock: Callable[[], float], record: Record
    ) -> None:
        self.endpoint, self.path, self.payload, self.limits, self.clock, self.record = endpoint, path, payload, limits, clock, record
        self.body = json.dumps(payload).encode()
        self.max_events = 4 * int(payload.get("max_tokens") or 256) + MAX_EVENTS_SLACK
        self.last = record.started  # when the last content chunk arrived (TPOT's clock)
        self.last_event = record.started  # when the last data event arrived (the stall's clock)
        self.events = 0
        self.writer: asyncio.StreamWriter | None = None

    async def run(self) -> None:
        reader, self.writer = await _connect(self.endpoint, self.limits.connect_s)
        self.record.started = self.last = self.last_event = self.clock()
        self.writer.write(_request_bytes(self.endpoint, "POST", self.path, self.body, "text/event-stream"))
        await self.writer.drain()
        try:
            status, headers = await asyncio.wait_for(_read_head(reader), self.limits.idle_s)
        except asyncio.TimeoutError:
            raise ClientError(said("stalled: no response for {idle_s:g} s after 0 tokens", idle_s=self.limits.idle_s), "stall") from None
        self.record.status = status
        if status != 200:
            await self._refuse(reader, headers, status)
        await self._read_events(reader, headers)
        self._ended()

    async def _refuse(self, reader: asyncio.StreamReader, headers: dict[str, str], status: int) -> None:
        data = bytearray()
        async for part in _body_chunks(reader, headers):
            data += part
            if len(data) > 4096:
                break
        snippet = data[:200].decode("utf-8", "replace").strip().replace("\n", " ")
        kind = "http-429" if status == 429 else ("http-5xx" if status >= 500 else "http-4xx")
        raise ClientError(
            said("HTTP {status}: {snippet}", status=status, snippet=snippet) if snippet else said("HTTP {status}", status=status), kind
        )

    def _stalled(self) -> ClientError:
        return ClientError(
            said("stalled: no bytes for {idle_s:g} s after {chunks} tokens", idle_s=self.limits.idle_s, chunks=self.record.chunks), "stall"
        )

    async def _read_events(self, reader: asyncio.StreamReader, headers: dict[str, str]) -> None:
        buffer = bytearray()
        chunks = _body_chunks(reader, headers).__aiter__()
        while not self.record.done:
            wait_s = self.limits.idle_s - (self.clock() - self.last_event)
            if wait_s <= 0:
                raise self._stalled()  # bytes kept coming (comments), but no data event for idle_s
            try:
                part = await asyncio.wait_for(chunks.__anext__(), wait_s)
            except StopAsyncIteration:
                return
            except asyncio.TimeoutError:
                raise self._stalled() from None
            buffer += part
            if len(buffer) > MAX_LINE_BYTES:
                raise ClientError(said("an SSE line longer than {amount} MiB", amount=MAX_LINE_BYTES >> 20), "malformed")
            if b"\n" not in part:  # a line trickling in: only the new bytes are searched (linear time)
                continue
            *lines, rest = buffer.split(b"\n")
            buffer = bytearray(rest)
            now = self.clock()
            for raw in lines:
                self._line(bytes(raw.rstrip(b"\r")), now)

    def _line(self, line: bytes, now: float) -> None:
        if not line.startswith(b"data:"):
            return  # blank separators, comments (": ping"), event:/id: fields
        self.events += 1
        self.last_event = now
        if self.events > self.max_events:
            message = said(
                "more than {max_events} events for max_tokens {value}: a runaway stream",
                max_events=self.max_events,
                value=self.payload.get("max_tokens"),
            )
            raise ClientError(message, "runaway")
        event_data = bytes(line[5:].strip())
        if event_data == b"[DONE]":
            self.record.done = True
        elif _take(self.record, event_data, now, self.last):
            self.last = now

    def _ended(self) -> None:
        record = self.record
        record.e2e = self.clock() - record.started
        if not record.done:
            raise ClientError(said("the stream ended without [DONE] after {chunks} tokens", chunks=record.chunks), "no-done")
        if record.finish_reason is None:
            # [DONE] without a finish_reason: the server ended the answer itself (llama-cpp-python does
            # when another request arrives); the user got a truncated reply.
            raise ClientError(
                said("the stream was cut off after {chunks} tokens: [DONE] without a finish_reason", chunks=record.chunks), "cut-off"
            )


def _take(record: Record, data: bytes, now: float, last: float) -> bool:
    """One SSE data payload: a chunk of content (timed: True), the usage, or a malformed event."""
    try:
        event = json.loads(data)
    except (ValueError, RecursionError):
        raise ClientError(
            said("malformed SSE data after {chunks} tokens: {data}", chunks=record.chunks, data=repr(data[:60])), "malformed"
        ) from None
    if not isinstance(event, dict):
        raise ClientError(said("an SSE event that is not a JSON object: {data}", data=repr(data[:60])), "malformed")
    if isinstance(event.get("error"), (dict, str)):
        error = event["error"]
        text = str(error.get("message") if isinstance(error, dict) else error)[:200]
        raise ClientError(said("the server reported an error mid-stream: {text}", text=text), "server-error")
    timings = event.get("timings")
    if isinstance(timings, dict):  # llama.cpp's server: its own prompt and decode timing
        record.engine_timings = {k: float(v) for k, v in timings.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    usage = event.get("usage")
    if isinstance(usage, dict):
        if isinstance(usage.get("completion_tokens"), int):
            record.usage_output = usage["completion_tokens"]
        if isinstance(usage.get("prompt_tokens"), int):
            record.usage_prompt = usage["prompt_tokens"]
    choices = event.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return False
    choice = choices[0]
    delta = choice.get("delta")
    content: object = delta.get("content") if isinstance(delta, dict) else choice.get("text")
    if choice.get("finish_reason"):
        record.finish_reason = str(choice["finish_reason"])
    if not (isinstance(content, str) and content):
        return False
    if record.chunks == 0:
        record.ttft = now - record.started
    else:
        record.gaps.append(now - last)
    record.chunks += 1
    return True
