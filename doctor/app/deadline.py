"""Work a command must be able to stop: run in a forked child with a deadline (engine.workers), its
result sent back over the pipe. A hang or a crash in the work is a one-line error, never a hung or
dead command; Ctrl-C takes the child down with it."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, TypeVar, cast

from ..engine.workers import Child, wait_ready
from ..i18n import _, said

T = TypeVar("T")


class DeadlineExceeded(Exception):
    """The work did not finish in time; the message says what and how long."""


class WorkFailed(Exception):
    """The work died (a signal, memory) or its result could not come back; the message says how."""


def _child(conn: Connection, work: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        payload: tuple[str, Any] = ("ok", work(*args))
    except BaseException as exc:  # raised in the work: the parent raises it again
        payload = ("raised", (exc, traceback.format_exc()))
    try:
        conn.send(payload)
    except Exception as exc:  # unpicklable
        conn.send(("raised", (WorkFailed(_("the result could not be sent back: {exc}", exc=str(exc))), "")))
    conn.close()


def within(seconds: float, what: str, work: Callable[..., T], *args: Any) -> T:
    """work(*args) in a child that is killed (with every process it started) after `seconds`."""
    child = Child.start(_child, work, args, own_group=True)
    child.set_deadline(seconds)
    try:
        while True:
            readable, overdue = wait_ready([child])
            if overdue:
                child.kill()
                raise DeadlineExceeded(_("{what} did not finish within {seconds:g} s and was stopped", what=what, seconds=seconds))
            if readable:
                break
        try:
            kind, value = cast("tuple[str, Any]", child.conn.recv())
        except (EOFError, OSError):
            raise WorkFailed(said("{what} stopped: {how}", what=what, how=child.reap())) from None
        child.reap()
    except BaseException:
        child.kill()
        raise
    if kind == "raised":
        raise value[0]
    result: T = value
    return result
