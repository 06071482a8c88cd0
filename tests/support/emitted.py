"""Which finding codes the test suite makes the checks emit.

conftest wraps Check.finding for the whole session: every finding built in this process, or in a
child it forks (the runner's checks, a fix killed mid-run), appends its code to a log file; the CLI
runs that are real processes (conftest.run_dd) add the codes their output names. The last test of a
full run (test_codes.py) reads the log: a declared code no test emits fails it.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

LOG = Path(tempfile.gettempdir()) / f"dd-emitted-{os.getpid()}.log"
CODE = re.compile(r"\b[A-Z]{2,5}\d{3}\b")


def record(codes: Iterable[str]) -> None:
    text = "".join(f"{code}\n" for code in codes)
    if text:
        with open(LOG, "a", encoding="ascii") as handle:  # O_APPEND: forked children write whole lines
            handle.write(text)


def record_output(*texts: str) -> None:
    record({match for text in texts for match in CODE.findall(text or "")})


def install() -> None:
    from decode_doctor.engine.check import Check

    LOG.unlink(missing_ok=True)
    original = Check.finding

    def finding(self: Check, code: Any, message: str, **kwargs: Any) -> Any:
        built = original(self, code, message, **kwargs)
        record([built.code])
        return built

    Check.finding = finding  # type: ignore[method-assign, assignment]

    # the serving feature judges in Verdicts (code, message, evidence) that its check turns into
    # findings one for one; the tests of the judgement build them without a check
    from decode_doctor.checks.serving import diagnosis

    made = diagnosis.Verdict.__init__

    def verdict(self: Any, code: Any, *args: Any, **kwargs: Any) -> None:
        made(self, code, *args, **kwargs)
        record([code.code])

    diagnosis.Verdict.__init__ = verdict  # type: ignore[method-assign]


def emitted() -> set[str]:
    try:
        return set(LOG.read_text(encoding="ascii").split())
    except FileNotFoundError:
        return set()


def remove() -> None:
    LOG.unlink(missing_ok=True)
