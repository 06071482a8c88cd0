"""`decode-doctor agent`: the checks on a schedule, written for node_exporter's textfile collector (app.agent)."""

from __future__ import annotations

from typing import Any

import click

from ..app.flags import click_options
from ..app.guard import echo, guarded
from ..engine.units import duration
from ..i18n import _, localized, reason
from .common import CONTEXT, RunCommand, check_options, run_options, run_request
from .options import AgentOptions, RunOptions

DEFAULT_INTERVAL = "15m"
QUIET_BANDWIDTH_AGE = 86400.0  # a node agent measures bandwidth at most daily, and only while idle


def _duration(text: str) -> float:
    try:
        return duration(1.0, 7 * 86400.0)(text)
    except ValueError as exc:
        raise click.BadParameter(localized(reason(exc)), param_hint="--interval") from None


@click.command(cls=RunCommand, context_settings=CONTEXT)
@run_options
@click_options(AgentOptions)
def agent(**params: Any) -> None:
    """Run the checks every --interval and write node_exporter textfile metrics (a DaemonSet's pod).

    Stops cleanly on SIGTERM. With --same-host and --root /host it judges the node it runs on: files
    under /host, GPUs through NVML. Unless --reuse-bandwidth is given, memory bandwidth is measured
    at most daily and never while the node is serving.
    """
    from ..app import agent as app_agent
    from ..app.output import say

    run, options = RunOptions.from_values(params), AgentOptions.from_values(params)
    interval = _duration(options.interval)
    request = app_agent.AgentRequest(
        run=app_agent.with_defaults(run_request(run, check_options(params)), reuse_bandwidth=QUIET_BANDWIDTH_AGE),
        directory=options.directory,
        interval_s=interval,
        once=options.once,
        json_report=options.json_report,
        quiet=options.quiet,
        remove_on_stop=options.remove_on_stop,
    )

    def body() -> int:
        try:
            return app_agent.run(request, say)
        except app_agent.AgentError as exc:
            echo(_("decode-doctor: {error}", error=localized(reason(exc))), err=True)
            return 2

    guarded(run.debug, body)
