"""Kill injection for the CLI samples, from outside the shipped code: a process started with this
directory on PYTHONPATH and DD_TEST_KILL_AT_STEP=N SIGKILLs itself right after the Nth journaled step
of a fix run (the journal's own on_step hook, which in-process tests pass directly)."""

import os
import signal

_STEP = os.environ.get("DD_TEST_KILL_AT_STEP", "")

if _STEP.isdigit():
    from decode_doctor.fixes import journal

    _apply = journal.apply_plans

    def _kill_after(step: int) -> None:
        if step == int(_STEP):
            os.kill(os.getpid(), signal.SIGKILL)

    def apply_plans(plans, state_dir, meta, on_step=None):  # type: ignore[no-untyped-def]
        return _apply(plans, state_dir, meta, on_step=_kill_after)

    journal.apply_plans = apply_plans
