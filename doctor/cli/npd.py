"""`decode-doctor npd`: the checks once, as node-problem-detector's custom plugin (reports.npd)."""

from __future__ import annotations

from typing import Any

import click

from ..app.guard import echo, guarded
from .common import CONTEXT, RunCommand, check_options, run_options, run_request
from .options import RunOptions


@click.command(cls=RunCommand, context_settings=CONTEXT)
@run_options
def npd(**params: Any) -> None:
    """Run the checks as node-problem-detector's plugin: one line of at most 80 bytes, exit 0 ok, 1 problem, 2 unknown."""
    run = RunOptions.from_values(params)
    request = run_request(run, check_options(params))  # a usage error exits 2, which NPD reads as unknown
    guarded(run.debug, lambda: _run(request))  # so does an internal error


def _run(request: Any) -> int:
    from ..app import service
    from ..app.npd import plugin_result

    result = plugin_result(service.run(request))
    echo(result.message)
    return int(result.status)
