"""Which finding codes the test suite makes the checks emit.

conftest wraps Check.finding for the whole session: every finding built in this process, or in a
child it forks (the runner's checks, a fix killed mid-run), appends its code to a log file; the CLI
runs that are real processes (conftest.run_dd) load emitted_site/sitecustomize.py, which does the
same in them. Only a check's own finding counts: never a code a text merely names. The last test of
a full run (test_codes.py) reads the log: a declared code no test emits fails it.

A test that alone emits a code, and cannot here (it needs a process that file modes bind, and this
machine can start none), skips with pytest.skip(unprovable(code, why)): a sibling log tells the gate
which code this run could not prove and why — a note, neither emitted nor a failure of the suite.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

LOG = Path(tempfile.gettempdir()) / f"dd-emitted-{os.getpid()}.log"
UNPROVABLE = LOG.with_name(f"dd-unprovable-{os.getpid()}.log")  # "CODE<TAB>why" lines, from the test process only


def record(codes: Iterable[str]) -> None:
    text = "".join(f"{code}\n" for code in codes)
    if text:
        with open(LOG, "a", encoding="ascii") as handle:  # O_APPEND: forked children write whole lines
            handle.write(text)


SITE = Path(__file__).resolve().parent / "emitted_site"


def child_env(env: dict[str, str]) -> dict[str, str]:
    """The environment of a decode-doctor process the tests start, recording what its checks emit."""
    path = os.pathsep.join(filter(None, [str(SITE), env.get("PYTHONPATH", "")]))
    return {**env, "DD_EMITTED_LOG": str(LOG), "PYTHONPATH": path}


def install() -> None:
    from decode_doctor.engine.check import Check

    LOG.unlink(missing_ok=True)
    UNPROVABLE.unlink(missing_ok=True)
    LOG.touch()
    LOG.chmod(0o666)  # a run dropped to another user (runuser -u nobody) appends to it too
    original = Check.finding

    def finding(self: Check, code: Any, message: str, **kwargs: Any) -> Any:
        built = original(self, code, message, **kwargs)
        record([built.code])
        return built

    Check.finding = finding  # type: ignore[method-assign, assignment]


def emitted() -> set[str]:
    try:
        return set(LOG.read_text(encoding="ascii").split())
    except FileNotFoundError:
        return set()


def unprovable(code: str, why: str) -> str:
    """Tells the code gate that this run cannot prove `code`, and why; the reason its test skips with."""
    with open(UNPROVABLE, "a", encoding="utf-8") as handle:
        handle.write(f"{code}\t{' '.join(why.split())}\n")
    return f"{code} unprovable here: {why}"


def unprovable_here() -> dict[str, str]:
    """code → why this run could not prove it (unprovable() was called for it)."""
    try:
        lines = UNPROVABLE.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    return {code: why for code, _, why in (line.partition("\t") for line in lines) if why}


def remove() -> None:
    LOG.unlink(missing_ok=True)
    UNPROVABLE.unlink(missing_ok=True)
