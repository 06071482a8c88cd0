"""Decoding a dataset in parallel: a pool of forked workers (engine.workers) fed from a streaming walk.

Each worker limits every file with an alarm; a worker that still overruns (stuck inside a C
decoder) or dies is killed and replaced, and its batch is retried one file at a time, so the one
bad file is found and reported. Memory stays flat: at most one batch per worker is in flight.
"""

from __future__ import annotations

import os
import resource
import signal
from collections import deque
from collections.abc import Callable, Iterator
from itertools import islice
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, cast

from decode_doctor.engine.workers import Child, wait_ready
from decode_doctor.i18n import Said, said

from . import loaders
from .codes import IMG001, IMG011
from .decode import Problem, Settings, inspect_file
from .walk import iter_images

BATCH = 16  # paths per message: one pipe round trip per batch, not per file
SLACK_S = 2.0  # beyond the per-file limits, before a worker counts as stuck
Result = dict[str, Any]


class _FileTimeout(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _FileTimeout()


def _timed_out(path: str, limit: float) -> Result:
    return {
        "path": path,
        "problems": [Problem(IMG011.code, "timed out", said("decoding took longer than {seconds} s", seconds=format(limit, "g"))).__dict__],
    }


def _crashed(path: str, why: Said) -> Result:
    return {"path": path, "problems": [Problem(IMG001.code, "decoder crash", why).__dict__]}


def _worker(conn: Connection, settings: Settings, file_timeout: float) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGALRM, _on_alarm)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)  # libtiff, libpng and OpenCV print their complaints; the verdicts say them
    while True:
        try:
            batch = conn.recv()
        except EOFError:
            break
        if batch is None:
            break
        results = []
        for path in batch:
            try:
                signal.setitimer(signal.ITIMER_REAL, file_timeout)
                result = inspect_file(path, settings)
                signal.setitimer(signal.ITIMER_REAL, 0)
            except _FileTimeout:
                result = _timed_out(path, file_timeout)
            except Exception as exc:  # never let one file stop the worker
                signal.setitimer(signal.ITIMER_REAL, 0)
                result = _crashed(path, Said(f"{type(exc).__name__}: {exc}"))
            results.append(result)
        results[-1]["worker_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        conn.send(results)
    conn.close()


def decode_all(paths: Iterator[Path], jobs: int, settings: Settings, file_timeout: float, on_result: Callable[[Result], None]) -> None:
    """Feeds batches of paths to `jobs` forked workers as they free up; calls on_result per file."""
    loaders.preload(settings.extra_loaders)
    pool = _Pool(iter(paths), settings, file_timeout, on_result)
    pool.workers = [pool.spawn() for _ in range(max(1, jobs))]
    try:
        pool.run()
    finally:
        pool.close()


class _Pool:
    """Forked decoders, each with the batch it was given; a worker that crashes or overruns is
    replaced, its batch retried a file at a time so the culprit alone is reported."""

    def __init__(self, source: Iterator[Path], settings: Settings, file_timeout: float, on_result: Callable[[Result], None]) -> None:
        self.source, self.settings, self.file_timeout, self.on_result = source, settings, file_timeout, on_result
        self.workers: list[Child] = []
        self.batches: dict[Child, list[str]] = {}
        self.retry: deque[str] = deque()

    def spawn(self) -> Child:
        return Child.start(_worker, self.settings, self.file_timeout, duplex=True)

    def feed(self, worker: Child) -> None:
        batch = [self.retry.popleft()] if self.retry else [str(p) for p in islice(self.source, BATCH)]
        if batch:
            self.batches[worker] = batch
            worker.set_deadline(self.file_timeout * len(batch) + SLACK_S)
            worker.conn.send(batch)

    def replace(self, worker: Child, *, timed_out: bool) -> None:
        batch = self.batches.pop(worker)
        worker.kill()
        fresh = self.spawn()
        self.workers[self.workers.index(worker)] = fresh
        if len(batch) > 1:
            self.retry.extend(batch)
        elif timed_out:
            self.on_result(_timed_out(batch[0], self.file_timeout))
        else:
            self.on_result(_crashed(batch[0], said("the decoder crashed on this file")))
        self.feed(fresh)

    def run(self) -> None:
        for worker in self.workers:
            self.feed(worker)
        while self.batches:
            readable, overdue = wait_ready(self.batches)
            for worker in readable:
                try:
                    results = cast("list[Any]", worker.conn.recv())
                except EOFError:
                    self.replace(worker, timed_out=False)
                    continue
                del self.batches[worker]
                for result in results:
                    self.on_result(result)
                self.feed(worker)
            for worker in overdue:
                self.replace(worker, timed_out=True)

    def close(self) -> None:
        for worker in self.workers:
            try:
                worker.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        for worker in self.workers:
            if worker in self.batches:
                worker.kill()
            else:
                worker.reap()


def _count(conn: Connection, dataset: Path) -> None:
    conn.send(sum(1 for _ in iter_images(dataset, [], [])))


def start_counter(dataset: Path) -> Child:
    """A forked process that walks the tree once more, only counting, so progress can show an ETA
    while the decoders stream through it; its answer arrives long before they finish."""
    return Child.start(_count, dataset)
