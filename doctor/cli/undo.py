"""`decode-doctor undo [RUN]`: replay a fix run's journal backwards (app.undo)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..app.flags import click_options
from ..app.guard import echo, guarded
from ..app.output import shown
from ..i18n import _, localized, reason
from .common import CONTEXT
from .options import UndoOptions


@click.command(context_settings=CONTEXT)
@click.argument("run_id", required=False)
@click_options(UndoOptions)
def undo(run_id: str | None, **params: Any) -> None:
    """Roll back the last fix run (or RUN_ID) to byte-identical originals."""
    from ..engine.paths import default_state_dir

    options = UndoOptions.from_values(params)
    given = options.state_dir is not None
    state_dir = options.state_dir or default_state_dir()
    guarded(False, lambda: _undo(run_id, state_dir, given, options.list_only, options.force))


def _undo(run_id: str | None, state_dir: Path, given: bool, list_only: bool, force: bool) -> int:
    from ..app import undo as app_undo

    if given:
        if not state_dir.exists() and not state_dir.is_symlink() and state_dir.parent.is_dir():
            raise click.BadParameter(
                _("{path} does not exist: no fix run was journaled there, so there is nothing to undo", path=state_dir),
                param_hint="--state-dir",
            )
        state_dir.stat()  # unreachable (EACCES): one line from guarded, not a claim that it is missing
        if not state_dir.is_dir():
            raise click.BadParameter(
                _("{path} is not a directory: no fix run was journaled there", path=state_dir), param_hint="--state-dir"
            )
    if list_only:
        runs = app_undo.runs(state_dir)
        if not runs:
            echo(_("No fix runs in {path}.", path=state_dir))
        for run in runs:
            actions = _("{count} action(s)", count=run.actions)
            status = localized(run.status)
            echo(shown(f"{run.run_id}  {run.started}  {actions}  {status}  {' '.join(run.argv)}"))
        return 0
    try:
        result = app_undo.undo(app_undo.UndoRequest(state_dir, run_id, force))
    except (app_undo.UndoError, app_undo.LockBusy) as exc:
        echo(_("decode-doctor undo: {error}", error=localized(reason(exc))), err=True)
        return 2
    echo(_("Undo of fix run {run}:", run=result.run_id))
    for target, status in result.outcomes:
        echo(shown("    " + _("{target}: {status}", target=target, status=localized(status))))
    if result.conflicts:
        echo(
            _(
                "Some targets changed after the fix and were left alone; the originals are in the run's backups/. Use --force to "
                "restore them anyway."
            )
        )
        return 1
    return 0
