"""Misbehaving checks for the engine tests; loaded directly or through an entry point."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

from decode_doctor.engine import Check, Code, Facts, Needs, Options, Reads, Severity, option

TEST001 = Code("TEST001", "a test finding", Severity.WARNING, "w", "y", "f")


@dataclass(frozen=True)
class TestOptions(Options):
    """What the engine tests hand these checks (never a command line: the checks load directly)."""

    marker: str = option("--dd-test-marker", "a unique sleep length that names the processes", default="1000.1")
    log: str | None = option("--dd-test-log", "where the exclusive checks log their windows", default=None)


class SleepsForever(Check):
    name = "sleeps-forever"
    codes = ()
    timeout_s = 0.5

    def run(self, ctx):
        while True:
            time.sleep(60)


class Raises(Check):
    name = "raises"

    def run(self, ctx):
        raise RuntimeError("probe exploded")


class Segfaults(Check):
    name = "segfaults"

    def run(self, ctx):
        os.kill(os.getpid(), signal.SIGSEGV)


class HungCommand(Check):
    """Runs a command that never ends, with a command timeout longer than the check's."""

    name = "hung-command"
    timeout_s = 0.5

    def run(self, ctx):
        marker = ctx.option(TestOptions).marker  # a unique sleep length names the processes
        ctx.run(["sh", "-c", f"sleep {marker}; echo never"], timeout_s=1000)
        return []


class Quick(Check):
    name = "quick"
    codes = (TEST001,)

    def run(self, ctx):
        return [self.finding(TEST001, "quick check found something", evidence={"answer": 42})]


def _log_window(ctx, name, seconds):
    log = ctx.option(TestOptions).log
    start = time.monotonic()
    time.sleep(seconds)
    if log:
        with open(log, "a") as handle:
            handle.write(f"{name} {start} {time.monotonic()}\n")


class Exclusive(Check):
    name = "exclusive"
    needs = Needs(exclusive=True)

    def run(self, ctx):
        _log_window(ctx, self.name, 0.3)
        return []


class Slowish(Check):
    name = "slowish"

    def run(self, ctx):
        _log_window(ctx, self.name, 0.3)
        return []


class NeedsModel(Check):
    name = "needs-model"
    needs = Needs(inputs=("models",))

    def run(self, ctx):
        return []


@dataclass(frozen=True)
class Answer(Facts):
    value: int


class Publisher(Check):
    name = "publisher"
    needs = Needs(exclusive=True)
    facts_type = Answer

    def run(self, ctx):
        ctx.publish(Answer(42))
        return []


TEST002 = Code("TEST002", "read a fact", Severity.INFO, "w", "y", "f")


class Reader(Check):
    name = "reader"
    codes = (TEST002,)
    needs = Needs(reads=(Reads(Answer),))

    def run(self, ctx):
        return [self.finding(TEST002, f"saw {ctx.facts.get(Answer)}")]
