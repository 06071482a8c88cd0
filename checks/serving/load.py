"""The load: a closed-loop concurrency sweep. At each level, that many workers each send a request,
wait for its last token, and send the next, until the level's request count or duration is spent.
Every request is a stream timed token by token (client.stream); a stop (Ctrl-C) cancels what is in
flight, and what had finished stays measured."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from decode_doctor.i18n import said

from .client import Endpoint, Record, StreamLimits, stream

API_PATHS = {"chat": "chat/completions", "completions": "completions"}


@dataclass(frozen=True)
class LoadPlan:
    api: str  # chat or completions
    model: str
    levels: tuple[int, ...]  # concurrency of each level
    requests: tuple[int, ...]  # requests of each level
    duration_s: float  # no new request after this long into a level
    output_tokens: int
    timeout_s: float  # one request, first byte to [DONE]
    ignore_eos: bool = False
    temperature: float | None = None

    @property
    def total_requests(self) -> int:
        return sum(self.requests)

    def limits(self) -> StreamLimits:
        # A stall is told from a slow request by the idle limit, so it must come first.
        return StreamLimits(connect_s=min(10.0, self.timeout_s), idle_s=min(30.0, self.timeout_s / 2), total_s=self.timeout_s)

    def request(self, prompt: str, max_tokens: int | None = None) -> tuple[str, dict[str, Any]]:
        """The API path and body of one streamed request."""
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens or self.output_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        if self.ignore_eos:
            body["ignore_eos"] = True
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return API_PATHS[self.api], body


@dataclass
class LevelRun:
    concurrency: int
    records: list[Record]
    wall_s: float
    stopped: str | None  # "duration" or "interrupted" when the level ended before its request count


Progress = Callable[[int, int, int], None]  # (requests finished at this level, requests planned, failed)


async def run_level(
    endpoint: Endpoint,
    plan: LoadPlan,
    concurrency: int,
    count: int,
    prompts: Sequence[str],
    stop: asyncio.Event,
    progress: Progress = lambda done, total, failed: None,
) -> LevelRun:
    records: list[Record] = []
    path, _ = plan.request("")
    api_path = endpoint.path(path)
    limits = plan.limits()
    next_index = 0
    finished = failed = 0
    started = time.perf_counter()
    deadline = started + plan.duration_s
    ran_out: str | None = None

    async def worker() -> None:
        nonlocal next_index, finished, failed, ran_out
        while not stop.is_set() and next_index < count:
            if time.perf_counter() >= deadline:
                ran_out = "duration"
                return
            index = next_index
            next_index += 1
            _, body = plan.request(prompts[index % len(prompts)])
            record = Record()
            records.append(record)
            await stream(endpoint, api_path, body, limits, record=record)
            finished += 1
            failed += record.error is not None
            progress(finished, count, failed)

    workers = [asyncio.ensure_future(worker()) for _ in range(min(concurrency, count))]
    stopper = asyncio.ensure_future(stop.wait())
    try:
        pending: set[asyncio.Future[Any]] = set(workers)
        while pending:
            done, pending = await asyncio.wait(pending | {stopper}, return_when=asyncio.FIRST_COMPLETED)
            pending.discard(stopper)
            if stopper in done:
                for waiting in pending:
                    waiting.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                ran_out = "interrupted"
                break
    finally:
        stopper.cancel()
        for task in workers:
            task.cancel()
    for record in records:  # a cancelled stream leaves its record without an outcome
        if record.error is None and not record.done and record.e2e is None:
            record.error, record.kind = said("cancelled: the run was stopped"), "cancelled"
    return LevelRun(concurrency, records, time.perf_counter() - started, ran_out)
