"""`undo`: replay a fix run's journal backwards, and list the runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..fixes.journal import LockBusy, RunInfo, UndoError, list_runs, undo_run

__all__ = ["LockBusy", "RunInfo", "UndoError", "UndoRequest", "UndoResult", "runs", "undo"]


@dataclass(frozen=True)
class UndoRequest:
    state_dir: Path
    run_id: str | None = None  # None: the last run
    force: bool = False  # restore over files changed after the fix


@dataclass(frozen=True)
class UndoResult:
    run_id: str
    outcomes: list[tuple[str, str]]  # (target, what happened)

    @property
    def conflicts(self) -> bool:
        return any(status.startswith("conflict") for _, status in self.outcomes)


def runs(state_dir: Path) -> list[RunInfo]:
    return list_runs(state_dir)


def undo(request: UndoRequest) -> UndoResult:
    """Raises UndoError or LockBusy with a message for the person."""
    run_id, outcomes = undo_run(request.state_dir, request.run_id, force=request.force)
    return UndoResult(run_id, outcomes)
