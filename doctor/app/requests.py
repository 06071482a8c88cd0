"""What the application layer is asked to do, as typed values the CLI (or a test) fills in."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..engine.facts import Facts
from ..engine.options import Options
from ..fixes.journal import StepHook


def command_argv(name: str | None) -> tuple[str, ...]:
    """The command line that made this run, for the report: sys.argv when it is this command's (a
    console script), else just the command's name (called in-process: tests, an embedding program)."""
    args = sys.argv[1:]
    if not name:
        return tuple(args)
    before: list[str] = []  # the group's own options, given before the command (--lang zh-CN)
    for index, arg in enumerate(args):
        if arg == name and (not before or before[-1] != "--lang"):
            return (name, *args[index + 1 :], *before)  # every option kept, after the command where it also parses
        if arg != "--lang" and not arg.startswith("--lang=") and (not before or before[-1] != "--lang"):
            break
        before.append(arg)
    return (name,)


class RequestError(ValueError):
    """A request that cannot be carried out as asked (an unknown selector…); the message is for the user."""


@dataclass(frozen=True)
class RunRequest:
    root: Path = Path("/")
    same_host: bool = False  # root is this machine's filesystem mounted elsewhere (Context.same_host)
    host_name: str | None = None  # the node's name as the orchestrator knows it (--host-name); None: read it
    models: tuple[Path, ...] = ()
    images: tuple[Path, ...] = ()
    select: tuple[str, ...] = ()  # check names, codes or code prefixes; empty: every check (unless select_facts)
    select_facts: tuple[type[Facts], ...] = ()  # also the checks that publish these facts (a command's measurement)
    ignore: tuple[str, ...] = ()
    reasons: Mapping[str, str] = field(default_factory=dict)  # ignore selector → why
    fail_on: str = "error"
    verdict_exits: bool = True  # the command exits with the verdict's code; `report` exits 0 once its bundle is written
    incomplete_fails: bool = True  # a check that crashed, timed out or could not judge an input: exit 3
    timeout: float | None = None  # seconds per check; None: each check's own
    options: tuple[Options, ...] = ()  # the checks' typed options (engine.options), one instance per type given
    env: Mapping[str, str] | None = None  # None: this process's environment
    argv: tuple[str, ...] = ()  # recorded in the report
    supplied: tuple[object, ...] = ()  # typed values a command hands the checks (ctx.supplied.get(T))


@dataclass(frozen=True)
class FixRequest:
    state_dir: Path
    dry_run: bool = False
    yes: bool = False
    unsafe: bool = False
    on_step: StepHook | None = None  # called after each journaled step (kill-injection tests)


class Dialogue(Protocol):
    """How the fix dialogue talks to the person: the CLI gives click's echo and confirm."""

    interactive: bool  # may confirm() ask?

    def say(self, text: str) -> None: ...

    def confirm(self, question: str) -> bool: ...
