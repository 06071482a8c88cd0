"""The fix executor: journal every action before doing it, back up, apply, and undo from the journal.

Order for each action, each step fsynced before the next:
  1. journal an "intent" record (what will change, the sha256 before and after);
  2. back up the original into the run's backups/ directory;
  3. apply the action atomically;
  4. journal "done".
A SIGKILL between any two steps leaves the target either original or complete, and undo decides
which from the sha256 values, so it restores byte-identical originals in every case. Tests prove
it by injecting on_step, which is called after every step and may kill the process there.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..i18n import N_, reason, said
from ..i18n.labels import Labelled
from .actions import ACTION_KINDS, FixPlan
from .atomic import TEMP_SUFFIX, UnsafeTarget, fsync_dir, leftover_temps

StepHook = Callable[[int], None]  # called with the step number after each journaled step


class LockBusy(Exception):
    pass


class UndoError(Exception):
    pass


@contextmanager
def state_lock(state_dir: Path) -> Iterator[None]:
    """One fix or undo at a time per state directory; a second one refuses instead of interleaving."""
    state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(state_dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            raise LockBusy(
                said("another decode-doctor fix or undo is running on {state_dir} (pid {holder})", state_dir=state_dir, holder=holder)
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


class Journal:
    def __init__(self, path: Path):
        self.path = path

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def read(self) -> list[dict[str, Any]]:
        records = []
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        for line in text.splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:  # a torn last line from a kill mid-write
                break
        return records


def note(run_dir: Path, record: dict[str, Any]) -> None:
    """Adds a record to a finished run's journal (what the re-check after it judged); undo reads past it."""
    Journal(run_dir / "journal.jsonl").append({**record, "at": _now()})


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def runs_dir(state_dir: Path) -> Path:
    return state_dir / "runs"


class FixStatus(Labelled):
    """What became of one fix action."""

    APPLIED = "applied", N_("applied")
    FAILED = "failed", N_("failed")
    ROLLED_BACK = "rolled back", N_("rolled back")


@dataclass
class ActionOutcome:
    code: str
    shown: str
    status: FixStatus
    detail: str = ""  # why it failed

    @property
    def said(self) -> str:
        """The status as a person reads it ("failed: PermissionError: …")."""
        if self.detail:
            return said("{status}: {detail}", status=said(self.status.english), detail=self.detail)
        return said(self.status.english)  # the label is a catalog message (N_ where FixStatus defines it)

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "target": self.shown, "status": str(self.said)}


@dataclass
class ApplyResult:
    run_id: str
    run_dir: Path
    outcomes: list[ActionOutcome] = field(default_factory=list)


def apply_plans(plans: Sequence[FixPlan], state_dir: Path, meta: dict[str, Any], on_step: StepHook | None = None) -> ApplyResult:
    steps = 0

    def step() -> None:
        nonlocal steps
        steps += 1
        if on_step is not None:
            on_step(steps)

    with state_lock(state_dir):
        run_id = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)
        run_dir = runs_dir(state_dir) / run_id
        (run_dir / "backups").mkdir(parents=True)
        fsync_dir(run_dir.parent)
        journal = Journal(run_dir / "journal.jsonl")
        journal.append({"type": "run", "run_id": run_id, "started": _now(), **meta})
        fsync_dir(run_dir)
        step()
        result = ApplyResult(run_id, run_dir)
        seq = 0
        for plan in plans:
            done_in_plan: list[dict[str, Any]] = []
            for action in plan.actions:
                seq += 1
                record: dict[str, Any] = {}
                try:
                    record = {
                        "type": "intent",
                        "seq": seq,
                        "kind": action.kind,
                        "code": plan.finding.code,
                        "backup": f"backups/{seq}",
                        **action.intent(),
                    }
                    journal.append(record)
                    step()
                    action.backup(run_dir / record["backup"])
                    step()
                    action.apply()
                    step()
                    journal.append({"type": "done", "seq": seq})
                    step()
                except Exception as exc:  # roll this plan back; other plans go on
                    journal.append({"type": "failed", "seq": seq, "error": f"{type(exc).__name__}: {exc}"})
                    # UnsafeTarget is raised before the action touches anything: undoing it could only
                    # undo what another run did to the same path.
                    this = [record] if record.get("type") == "intent" and not isinstance(exc, UnsafeTarget) else []
                    if record.get("type") == "intent":
                        withdrawn = ACTION_KINDS[record["kind"]].withdraw(record)  # what its backup() recorded
                        if withdrawn:
                            journal.append({"type": "undo", "seq": seq, "result": f"original ({withdrawn})"})
                    for earlier in reversed(done_in_plan + this):
                        status = ACTION_KINDS[earlier["kind"]].undo(earlier, run_dir)
                        journal.append({"type": "undo", "seq": earlier["seq"], "result": status})
                    result.outcomes.append(
                        ActionOutcome(plan.finding.code, getattr(action, "shown", str(action.path)), FixStatus.FAILED, reason(exc))
                    )
                    break
                done_in_plan.append(record)
                result.outcomes.append(ActionOutcome(plan.finding.code, record.get("shown", str(action.path)), FixStatus.APPLIED))
        journal.append({"type": "finished", "finished": _now()})
        step()
        return result


class RunState(Labelled):
    """Where a journaled fix run stands."""

    APPLIED = "applied", N_("applied")
    INTERRUPTED = "interrupted", N_("interrupted")
    UNDONE = "undone", N_("undone")
    NOTHING_APPLIED = "nothing applied", N_("nothing applied")
    PARTLY_UNDONE = "partly undone", N_("partly undone")


@dataclass
class RunInfo:
    run_id: str
    started: str
    actions: int
    state: RunState
    argv: list[str]
    restored: int = 0  # a partly undone run: the steps put back

    @property
    def undoable(self) -> bool:
        return self.state in (RunState.APPLIED, RunState.INTERRUPTED, RunState.PARTLY_UNDONE)

    @property
    def status(self) -> str:
        """The state as a person reads it ("partly undone (2 of 3 restored)")."""
        if self.state is RunState.PARTLY_UNDONE:
            return said("partly undone ({restored} of {count} restored)", restored=self.restored, count=self.actions)
        return said(self.state.english)  # the label is a catalog message (N_ where RunState defines it)


def run_info(run_dir: Path) -> RunInfo:
    records = Journal(run_dir / "journal.jsonl").read()
    head = records[0] if records and records[0].get("type") == "run" else {}
    types = {r.get("type") for r in records}
    intents = [r for r in records if r.get("type") == "intent"]
    undos = [r for r in records if r.get("type") == "undo"]
    restored = 0
    if "undone" in types:
        state = RunState.UNDONE
    elif undos:  # an undo ran and left conflicts: the latest result of each step counts
        latest = {r.get("seq"): str(r.get("result", "")) for r in undos}
        restored = sum(1 for result in latest.values() if not result.startswith("conflict"))
        state = RunState.PARTLY_UNDONE
    elif not intents:
        state = RunState.NOTHING_APPLIED
    elif "finished" in types:
        state = RunState.APPLIED
    else:
        state = RunState.INTERRUPTED
    return RunInfo(run_dir.name, head.get("started", "?"), len(intents), state, head.get("argv", []), restored)


def list_runs(state_dir: Path) -> list[RunInfo]:
    base = runs_dir(state_dir)
    if not base.is_dir():
        return []
    return [run_info(d) for d in sorted(base.iterdir()) if (d / "journal.jsonl").exists()]


def _leftovers(record: dict[str, Any]) -> list[Path]:
    paths = [Path(record[key]) for key in ("path", "destination") if isinstance(record.get(key), str)]
    return [temp for path in paths for temp in leftover_temps(path)]


def undo_run(state_dir: Path, run_id: str | None = None, force: bool = False) -> tuple[str, list[tuple[str, str]]]:
    """Replays a run's journal backwards. Returns the run id and (target, result) pairs."""
    if not state_dir.is_dir():  # never created by undo: a mistyped --state-dir must not look empty
        raise UndoError(said("no state directory {state_dir}: no fix run was journaled there", state_dir=state_dir))
    with state_lock(state_dir):
        runs = list_runs(state_dir)
        if run_id is None:
            candidates = [r for r in runs if r.undoable]
            if not candidates:
                raise UndoError(said("no fix run to undo in {path}", path=state_dir))
            run_id = candidates[-1].run_id
        run_dir = runs_dir(state_dir) / run_id
        if not (run_dir / "journal.jsonl").exists():
            known = ", ".join(r.run_id for r in runs) or "none"
            raise UndoError(said("no fix run {run_id!r} in {state_dir} (known: {known})", run_id=run_id, state_dir=state_dir, known=known))
        journal = Journal(run_dir / "journal.jsonl")
        records = journal.read()
        outcomes: list[tuple[str, str]] = []
        for record in reversed([r for r in records if r.get("type") == "intent"]):
            kind = ACTION_KINDS.get(record["kind"])
            if kind is None:
                outcomes.append((record.get("shown", "?"), said("conflict: unknown action kind {kind}", kind=repr(record["kind"]))))
                continue
            try:
                status = kind.undo(record, run_dir, force)
            except Exception as exc:  # keep going: undo what can be undone, report the rest
                status = said("conflict: {kind}: {error}", kind=type(exc).__name__, error=reason(exc))
            journal.append({"type": "undo", "seq": record["seq"], "result": status})
            outcomes.append((record.get("shown", record.get("path", "?")), status))
            for leftover in _leftovers(record):  # a fix killed inside an atomic write
                leftover.unlink(missing_ok=True)
                outcomes.append((str(leftover), "removed: a temp file an interrupted write left"))
        for leftover in sorted(run_dir.rglob(f"*{TEMP_SUFFIX}")):  # a backup killed before its rename
            leftover.unlink(missing_ok=True)
            outcomes.append((str(leftover), "removed: a temp file an interrupted backup left in the state directory"))
        if not any(s.startswith("conflict") for _, s in outcomes):
            journal.append({"type": "undone", "at": _now()})
        return run_id, outcomes
