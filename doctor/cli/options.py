"""The core commands' options, each command's as one typed dataclass (engine.options): the click
callback turns click's parameters into them at once and passes only those on. A flag two commands
share is declared once — here, in app.flags, or in the feature contract that owns its meaning — and
taken with same_as()."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from ..app.choices import FAIL_ON_LEVELS
from ..app.flags import DIFF_FORMATS, FLEET_FORMATS, INFO_FORMATS, REPORT_FORMATS, SINGLE_FORMATS, SharedOptions, same_as
from ..engine.options import Options, option

EXISTING = click.Path(exists=True, path_type=Path)
A_DIRECTORY = click.Path(file_okay=False, path_type=Path)
AN_EXISTING_DIRECTORY = click.Path(exists=True, file_okay=False, path_type=Path)
AN_EXISTING_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
A_FILE = click.Path(dir_okay=False, path_type=Path)
A_PATH = click.Path(path_type=Path)


@dataclass(frozen=True)
class RunOptions(Options):
    """The options of every command that runs checks (check, report, agent, npd): what to look at and
    which checks to run."""

    root: Path = option(  # noqa: RUF009 (a field specifier, as dataclasses.field)
        "--root",
        "Read /proc, /sys and /etc under this directory (a captured or mounted host).",
        kind=AN_EXISTING_DIRECTORY,
        default=Path("/"),
        show_default=True,
    )
    same_host: bool = option(
        "--same-host",
        "--root is this machine's own filesystem mounted elsewhere (a node agent in a container): NVML, "
        "nvidia-smi and the other tools on PATH, Docker's socket and the bandwidth probe judge that host too. "
        "Without it only the files under --root are judged.",
        is_flag=True,
        default=False,
    )
    host_name: str | None = option(
        "--host-name",
        "The host's name in the report and metrics (on Kubernetes: the node's, from the Downward API) "
        "[default: /etc/hostname under --root].",
        envvar="DECODE_DOCTOR_HOST_NAME",
        metavar="NAME",
    )
    models: tuple[Path, ...] = option(
        "--model", "A model directory or file to check (repeatable).", multiple=True, kind=EXISTING, default=()
    )
    images: tuple[Path, ...] = option(
        "--images", "An image dataset directory to check (repeatable).", multiple=True, kind=AN_EXISTING_DIRECTORY, default=()
    )
    select: tuple[str, ...] = option(
        "--select", "Only these codes, code prefixes or check names (comma-separated, repeatable).", multiple=True, default=()
    )
    ignore: tuple[str, ...] = option(
        "--ignore", "Leave out these codes, code prefixes or check names (counted, not hidden).", multiple=True, default=()
    )
    config_path: Path | None = option(  # noqa: RUF009 (a field specifier, as dataclasses.field)
        "--config",
        "A TOML config file (default: ./decode-doctor.toml or [tool.decode-doctor] in ./pyproject.toml).",
        kind=AN_EXISTING_FILE,
    )
    fail_on: str | None = option(
        "--fail-on", "Exit 1 when a finding is at or above this severity [default: error].", choices=FAIL_ON_LEVELS
    )
    incomplete: str = same_as(SharedOptions, "incomplete")
    timeout: float | None = option("--timeout", "Seconds each check may run (default: each check's own).", kind=click.FloatRange(min=0.1))
    debug: bool = option("--debug", "Show tracebacks of crashed checks and internal errors.", is_flag=True, default=False)


@dataclass(frozen=True)
class CheckOptions(Options):
    """`check`'s own options, after the run options."""

    fmt: str = option(
        "--format",
        "Every format but text (this terminal's) has secrets redacted, as `report` does; host names stay (report --redact-hosts).",
        choices=REPORT_FORMATS,
        default="text",
        show_default=True,
    )
    output: Path | None = option(  # noqa: RUF009 (a field specifier, as dataclasses.field)
        "--output", "Write the report to this file instead of standard output.", short="-o", kind=A_FILE
    )
    verbose: bool = option(
        "--verbose",
        "Also show what the checks learned about the host (drivers, bandwidth, versions).",
        short="-v",
        is_flag=True,
        default=False,
    )
    quiet: bool = option(
        "--quiet", "With -o: no line on stderr saying where the report went (cron mails nothing).", short="-q", is_flag=True, default=False
    )
    fix: bool = option("--fix", "Preview the fixes for the findings, then apply them after confirmation.", is_flag=True, default=False)
    dry_run: bool = option("--dry-run", "With --fix: only preview, change nothing.", is_flag=True, default=False)
    yes: bool = option("--yes", "With --fix: apply without asking (for scripts).", short="-y", is_flag=True, default=False)
    unsafe_fixes: bool = option("--unsafe-fixes", "With --fix: also apply fixes marked unsafe.", is_flag=True, default=False)
    state_dir: Path | None = option(  # noqa: RUF009 (a field specifier, as dataclasses.field)
        "--state-dir", "Where fix journals and backups live [default: $XDG_STATE_HOME/decode-doctor].", kind=A_DIRECTORY
    )


@dataclass(frozen=True)
class AgentOptions(Options):
    """`agent`'s own options, after the run options."""

    directory: Path = option(  # noqa: RUF009 (a field specifier, as dataclasses.field)
        "--textfile-directory",
        "node_exporter's --collector.textfile.directory: decode_doctor.prom is replaced there atomically after every run.",
        required=True,
        default=Path(),  # never used: required
        kind=A_DIRECTORY,
    )
    interval: str = option("--interval", "How often to run the checks (900, 15m, 1h).", default="15m", show_default=True, metavar="TIME")
    once: bool = option("--once", "Run once and exit with the run's exit code (a Job, or cron).", is_flag=True, default=False)
    json_report: Path | None = option(  # noqa: RUF009 (a field specifier, as dataclasses.field)
        "--json-report", "Also replace this redacted JSON report after every run (for `decode-doctor merge`).", kind=A_FILE
    )
    quiet: bool = option("--quiet", "No line per run on stderr; warnings and errors only.", short="-q", is_flag=True, default=False)
    remove_on_stop: bool = option(
        "--remove-on-stop",
        "On SIGTERM or SIGINT, remove the textfile and the JSON report once any write in flight has landed (a DaemonSet: "
        "uninstalling takes the node's series with it).",
        is_flag=True,
        default=False,
    )


@dataclass(frozen=True)
class ReportOptions(Options):
    """`report`'s own options, after the run options."""

    output: Path | None = option(  # noqa: RUF009 (a field specifier, as dataclasses.field)
        "--output",
        "A directory (the bundle gets its own name there) or a file path [default: the current directory].",
        short="-o",
        kind=A_PATH,
    )
    fmt: str = option("--format", "A whole bundle, or one redacted file.", choices=SINGLE_FORMATS, default="bundle", show_default=True)
    redact_hosts: bool = option(
        "--redact-hosts",
        "Also replace host names, IP addresses, user names and home paths with stable placeholders (the mapping stays on this machine).",
        is_flag=True,
        default=False,
    )
    no_redact: bool = option(
        "--no-redact", "Write secrets as they are. Only for bundles that never leave this machine.", is_flag=True, default=False
    )
    state_dir: Path | None = option(  # noqa: RUF009 (a field specifier, as dataclasses.field)
        "--state-dir", "Where --redact-hosts keeps its mapping [default: $XDG_STATE_HOME/decode-doctor].", kind=A_DIRECTORY
    )


@dataclass(frozen=True)
class AnalyzeOptions(Options):
    """`analyze`'s options (after its FILE… argument)."""

    fmt: str = option("--format", "The output format.", choices=REPORT_FORMATS, default="text", show_default=True)
    output: Path | None = option("--output", "Write the report to this file.", short="-o", kind=A_FILE)  # noqa: RUF009
    fail_on: str = same_as(SharedOptions, "fail_on")
    incomplete: str = same_as(SharedOptions, "incomplete")
    timeout: float = option("--timeout", "Seconds the analysis may take.", kind=click.FloatRange(min=1), default=120, show_default=True)
    debug: bool = same_as(SharedOptions, "debug")


@dataclass(frozen=True)
class DiffOptions(Options):
    """`diff`'s options (after its BEFORE and AFTER arguments)."""

    fmt: str = option("--format", "The output format.", choices=DIFF_FORMATS, default="text", show_default=True)


@dataclass(frozen=True)
class MergeOptions(Options):
    """`merge`'s options (after its REPORTS… argument)."""

    fmt: str = option("--format", "The output format.", choices=FLEET_FORMATS, default="text", show_default=True)
    output: Path | None = option("--output", "Write the matrix to this file instead of standard output.", short="-o", kind=A_FILE)  # noqa: RUF009
    fail_on: str = option(
        "--fail-on",
        "Exit 1 when a host has a finding at or above this severity (3: a host incomplete or stale wins).",
        choices=FAIL_ON_LEVELS,
        default="error",
        show_default=True,
    )
    max_age: str | None = option(
        "--max-age", "A report older than this (15m, 1h, 1d) is stale: its host counts as not judged.", metavar="TIME"
    )
    quiet: bool = option("--quiet", "With -o: no line on stderr saying where the matrix went.", short="-q", is_flag=True, default=False)


@dataclass(frozen=True)
class UndoOptions(Options):
    """`undo`'s options (after its RUN_ID argument)."""

    state_dir: Path | None = option(  # noqa: RUF009 (a field specifier, as dataclasses.field)
        "--state-dir", "Where fix journals live [default: $XDG_STATE_HOME/decode-doctor].", kind=A_DIRECTORY
    )
    list_only: bool = option("--list", "List the fix runs instead of undoing one.", is_flag=True, default=False)
    force: bool = option("--force", "Restore originals even over files changed after the fix.", is_flag=True, default=False)


@dataclass(frozen=True)
class ListOptions(Options):
    """`list`'s options."""

    fmt: str = option(
        "--format", "The output format (markdown: the README's table).", choices=INFO_FORMATS, default="text", show_default=True
    )
