"""A local OpenAI-compatible server that misbehaves on cue, for what a real engine rarely does on
demand. The request's "model" picks the behaviour:

  delay-20ms       a token every 20 ms, scheduled from the start (no drift)
  zero             tokens as fast as the socket takes them
  stall-after-3    three tokens, then silence with the connection open
  drop-after-3     three tokens, then the connection closed mid-stream
  malformed        a token, then an SSE data line that is not JSON
  no-done          every token, then no [DONE], the connection held open
  slow-first-2s    2 s before the response headers, then normal
  overrun          twice the max_tokens asked for
  cut-after-3      three tokens, then [DONE] with no finish_reason (an answer ended by the server)
  replay           the SSE body the test sets (a recorded engine stream), as it was
  trickle          the same body a byte at a time
  429, 500         that status, with a JSON error body

A whole server can misbehave too (`answers=`): "hang" accepts every connection and never answers;
"errors" answers every request with HTTP 503; "echo-401" refuses every completion with a body that
quotes the bearer key; "redirect" answers the model list with a 307.

It also answers /v1/models, llama.cpp's /tokenize (a token per word), and /metrics and /slots (texts
the test sets; 404 when unset). It runs in a thread with its own event loop;
`with FaultServer() as server: server.url`.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from typing import Any


class FaultServer:
    def __init__(
        self,
        metrics: str | None = None,
        port: int = 0,
        slots: str | None = None,
        replay: bytes = b"",
        listed: str = "delay-20ms",
        answers: str = "normally",
    ):
        self.answers = answers
        self.metrics = metrics
        self.listed = listed  # the model /v1/models names (what a bench without --model asks for)
        self.slots = slots
        self.replay = replay
        self.port = port
        self.requests = 0
        self.authorizations: list[str] = []  # the Authorization header of each request
        self.completions = 0  # streamed completions finished
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._open: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> FaultServer:
        ready = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", self.port))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._loop is not None and self._server is not None

        async def stop() -> None:
            self._server.close()
            for writer in list(self._open):
                writer.close()
            current = asyncio.current_task()
            pending = [task for task in asyncio.all_tasks() if task is not current]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        assert self._thread is not None
        self._thread.join(5)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.add(writer)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            method, path, _ = request_line.split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines if h)}
            body = await reader.readexactly(int(headers.get("content-length", 0)))
            self.requests += 1
            self.authorizations.append(headers.get("authorization", ""))
            await self._route(method, path, json.loads(body) if body else {}, writer)
        except (asyncio.IncompleteReadError, asyncio.CancelledError, ConnectionError, ValueError):  # cancelled: the server stops
            pass
        finally:
            self._open.discard(writer)
            writer.close()

    async def _route(self, method: str, path: str, payload: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        if self.answers == "hang":
            await asyncio.sleep(3600)  # cancelled when the server stops
        if self.answers == "errors":
            return self._reply(writer, 503, b'{"error": "engine is overloaded"}')
        if path == "/metrics":
            if self.metrics is None:
                return self._reply(writer, 404, b'{"detail": "Not Found"}')
            return self._reply(writer, 200, self.metrics.encode(), "text/plain; version=0.0.4")
        if path == "/slots":
            if self.slots is None:
                return self._reply(writer, 404, b'{"detail": "Not Found"}')
            return self._reply(writer, 200, self.slots.encode())
        if path == "/v1/models" and self.answers == "redirect":
            return self._reply(writer, 307, b"", "text/plain")
        if path == "/v1/models":
            return self._reply(writer, 200, json.dumps({"object": "list", "data": [{"id": self.listed, "object": "model"}]}).encode())
        if path == "/tokenize":
            words = re.findall(r"\S+", str(payload.get("content", "")))
            return self._reply(writer, 200, json.dumps({"tokens": list(range(len(words)))}).encode())
        if path not in ("/v1/chat/completions", "/v1/completions"):
            return self._reply(writer, 404, b'{"error": "not found"}')
        if self.answers == "echo-401":  # a server that quotes the bearer key it refused
            key = self.authorizations[-1].removeprefix("Bearer ")
            return self._reply(writer, 401, json.dumps({"error": f"invalid api key: {key}"}).encode())
        await self._complete(path, payload, writer)

    def _reply(self, writer: asyncio.StreamWriter, status: int, body: bytes, kind: str = "application/json") -> None:
        head = f"HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        writer.write(head.encode() + body)

    async def _scripted(self, mode: str, writer: asyncio.StreamWriter) -> bool:
        """The answers that follow a script rather than the token loop: pings for ever, a replayed capture."""
        if mode == "pings":  # SSE comments and nothing else, for ever (cancelled when the server stops)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
            while True:
                writer.write(b": ping\n\n")
                await writer.drain()
                await asyncio.sleep(0.05)
        if mode in ("replay", "trickle"):
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
            pieces = [self.replay[i : i + 1] for i in range(len(self.replay))] if mode == "trickle" else [self.replay]
            for piece in pieces:
                writer.write(piece)
                await writer.drain()
                if mode == "trickle":
                    await asyncio.sleep(0)
            return True
        return False

    async def _complete(self, path: str, payload: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        mode = str(payload.get("model", "zero"))
        if mode in ("429", "500"):
            self._reply(writer, int(mode), json.dumps({"error": {"message": f"injected {mode}"}}).encode())
            return
        if await self._scripted(mode, writer):
            return
        if mode.startswith("slow-first-"):
            await asyncio.sleep(float(mode.removeprefix("slow-first-").removesuffix("s")))
        chat = path.endswith("chat/completions")
        wanted = int(payload.get("max_tokens") or 16)
        count = 2 * wanted if mode == "overrun" else wanted
        prompt = payload.get("messages", [{}])[-1].get("content", "") if chat else payload.get("prompt", "")
        prompt_tokens = len(re.findall(r"\S+", str(prompt)))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        delay = float(mode.removeprefix("delay-").removesuffix("ms")) / 1000 if mode.startswith("delay-") else 0.0
        start = time.perf_counter()
        for index in range(count):
            if mode.startswith("stall-after-") and index == int(mode.rsplit("-", 1)[1]):
                await asyncio.sleep(3600)
            if mode.startswith("drop-after-") and index == int(mode.rsplit("-", 1)[1]):
                writer.transport.abort()
                return
            if mode.startswith("cut-after-") and index == int(mode.rsplit("-", 1)[1]):
                self._event(writer, b"[DONE]")
                writer.write(b"0\r\n\r\n")
                await writer.drain()
                return
            if delay:
                wait = start + index * delay - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
            if mode == "malformed" and index == 1:
                self._event(writer, b"{not json")
                await writer.drain()
                continue
            piece = {"delta": {"content": "tok "}} if chat else {"text": "tok "}
            self._event(writer, json.dumps({"choices": [{"index": 0, **piece, "finish_reason": None}]}).encode())
            await writer.drain()
        final = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
        if (payload.get("stream_options") or {}).get("include_usage"):
            final["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": count, "total_tokens": prompt_tokens + count}
        self._event(writer, json.dumps(final).encode())
        if mode == "no-done":
            await writer.drain()
            await asyncio.sleep(3600)
        self._event(writer, b"[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        self.completions += 1

    @staticmethod
    def _event(writer: asyncio.StreamWriter, data: bytes) -> None:
        frame = b"data: " + data + b"\n\n"
        writer.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")


def main() -> None:
    """Serve in this process until stdin closes (benchmarks run the server beside the client, not in it)."""
    import sys

    with FaultServer() as server:
        print(server.port, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
