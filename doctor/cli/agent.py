"""`decode-doctor agent`: the checks on a schedule, written for node_exporter's textfile collector (app.agent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..app.guard import guarded
from ..engine.units import duration
from ..i18n import _, localized, reason
from .common import CONTEXT, RunCommand, run_options, run_request

DEFAULT_INTERVAL = "15m"
QUIET_BANDWIDTH_AGE = 86400.0  # a node agent measures bandwidth at most daily, and only while idle


def _duration(text: str) -> float:
    try:
        return duration(1.0, 7 * 86400.0)(text)
    except ValueError as exc:
        raise click.BadParameter(localized(reason(exc))) from None


@click.command(cls=RunCommand, context_settings=CONTEXT)
@run_options
@click.option(
    "--textfile-directory",
    "directory",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="node_exporter's --collector.textfile.directory: decode_doctor.prom is replaced there atomically after every run.",
)
@click.option(
    "--interval",
    default=DEFAULT_INTERVAL,
    show_default=True,
    metavar="TIME",
    help="How often to run the checks (900, 15m, 1h).",
)
@click.option("--once", is_flag=True, help="Run once and exit with the run's exit code (a Job, or cron).")
@click.option(
    "--json-report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also replace this redacted JSON report after every run (for `decode-doctor merge`).",
)
@click.option("-q", "--quiet", is_flag=True, help="No line per run on stderr; warnings and errors only.")
@click.option(
    "--remove-on-stop",
    is_flag=True,
    help="On SIGTERM or SIGINT, remove the textfile and the JSON report once any write in flight has landed (a DaemonSet: "
    "uninstalling takes the node's series with it).",
)
def agent(**params: Any) -> None:
    """Run the checks every --interval and write node_exporter textfile metrics (a DaemonSet's pod).

    Stops cleanly on SIGTERM. With --same-host and --root /host it judges the node it runs on: files
    under /host, GPUs through NVML. Unless --reuse-bandwidth is given, memory bandwidth is measured
    at most daily and never while the node is serving.
    """
    from ..app import agent as app_agent
    from ..app.output import say

    interval = _duration(params["interval"])
    request = app_agent.AgentRequest(
        run=app_agent.with_defaults(run_request(params), reuse_bandwidth=QUIET_BANDWIDTH_AGE),
        directory=params["directory"],
        interval_s=interval,
        once=params["once"],
        json_report=params["json_report"],
        quiet=params["quiet"],
        remove_on_stop=params["remove_on_stop"],
    )

    def body() -> int:
        try:
            return app_agent.run(request, say)
        except app_agent.AgentError as exc:
            click.echo(_("decode-doctor: {error}", error=exc), err=True)
            return 2

    guarded(params["debug"], body)
