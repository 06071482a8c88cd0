"""`decode-doctor check`: run the checks, report, and optionally fix."""

from __future__ import annotations

import datetime as dt
import shutil
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import click

from . import __version__, registry
from .check import Check
from .commands import CommandRunner
from .config import SEVERITY_LEVELS, ConfigError, check_selected, ignored_by, load_config, split_selectors
from .context import Context
from .engine import run_checks
from .fixing import FixRequest, run_fixes
from .journal import default_state_dir
from .model import CheckResult
from .render import FORMATS, render
from .report import Ignored, Report


class Progress:
    """One status line on a terminal's stderr while checks run; silent when not a terminal."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.running: list[str] = []
        self.done = 0
        self.detail = ""

    def __call__(self, event: str, name: str) -> None:
        if not self.enabled:
            return
        if event == "start":
            self.running.append(name)
        elif event == "progress":
            self.detail = name
        else:
            self.running.remove(name)
            self.done += 1
            self.detail = ""
        line = f"checking ({self.done} done): {', '.join(self.running)}" if self.running else ""
        if self.detail and self.running:
            line = f"{line} — {self.detail}"
        width = shutil.get_terminal_size((100, 20)).columns - 1
        sys.stderr.write("\r\033[K" + line[:width])
        sys.stderr.flush()


def _host_name(root: Path) -> str:
    if root.resolve() != Path("/"):
        try:
            return (root / "etc/hostname").read_text().strip() or str(root)
        except OSError:
            return str(root)
    return socket.gethostname()


def _known_selector(selector: str) -> bool:
    return any(check_selected([selector], cls.name, (c.code for c in cls.codes)) for cls in registry.checks().items.values())


def select_checks(select: list[str]) -> list[type[Check]]:
    return [cls for cls in registry.checks().items.values() if check_selected(select, cls.name, (c.code for c in cls.codes))]


def build_report(results: list[CheckResult], select: list[str], ignore: list[str], reasons: dict[str, str], meta: dict[str, Any], fail_on: str) -> Report:
    kept, ignored = [], []
    for result in results:
        for finding in result.findings:
            selector = ignored_by(finding, ignore, select)
            if selector is None:
                kept.append(finding)
            else:
                ignored.append(Ignored(finding, selector, reasons.get(selector)))
    return Report(results, kept, ignored, meta, fail_on, load_errors=list(registry.checks().errors))


def _check_options(func: Any) -> Any:
    """Adds the options that checks declare (Check.options) to the command."""
    seen: set[str] = set()
    for cls in registry.checks().items.values():
        for option in cls.options:
            if option.flag in seen:
                continue
            seen.add(option.flag)
            func = click.option(
                option.flag,
                option.key,
                multiple=option.multiple,
                default=option.default,
                is_flag=option.is_flag,
                type=None if option.is_flag else (click.Choice(option.choices) if option.choices else option.type),
                help=f"{option.help} [{cls.name}]",
            )(func)
    return func


@dataclass
class RunSettings:
    """What every command that runs checks (check, report) was asked for, validated."""

    root: Path
    models: tuple[Path, ...]
    images: tuple[Path, ...]
    selectors: list[str]
    ignores: list[str]
    reasons: dict[str, str]
    fail_on: str
    timeout: float | None
    debug: bool
    options: dict[str, Any]


def run_options(func: Any) -> Any:
    """The options shared by `check` and `report`: what to look at and which checks to run."""
    decorators = [
        click.option("--root", type=click.Path(exists=True, file_okay=False, path_type=Path), default=Path("/"), show_default=True, help="Read /proc, /sys and /etc under this directory (a captured or mounted host)."),
        click.option("--model", "models", multiple=True, type=click.Path(exists=True, path_type=Path), help="A model directory or file to check (repeatable)."),
        click.option("--images", "images", multiple=True, type=click.Path(exists=True, file_okay=False, path_type=Path), help="An image dataset directory to check (repeatable)."),
        click.option("--select", multiple=True, help="Only these codes, code prefixes or check names (comma-separated, repeatable)."),
        click.option("--ignore", multiple=True, help="Leave out these codes, code prefixes or check names (counted, not hidden)."),
        click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="A TOML config file (default: ./decode-doctor.toml or [tool.decode-doctor] in ./pyproject.toml)."),
        click.option("--fail-on", type=click.Choice(SEVERITY_LEVELS), default=None, help="Exit 1 when a finding is at or above this severity [default: error]."),
        click.option("--timeout", type=click.FloatRange(min=0.1), default=None, help="Seconds each check may run (default: each check's own)."),
        click.option("--debug", is_flag=True, help="Show tracebacks of crashed checks and internal errors."),
        _check_options,
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def settings_from(root: Path, models: tuple[Path, ...], images: tuple[Path, ...], select: tuple[str, ...], ignore: tuple[str, ...], config_path: Path | None, fail_on: str | None, timeout: float | None, debug: bool, options: dict[str, Any]) -> RunSettings:
    try:
        config = load_config(config_path, Path.cwd())
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    for flag, values in (("--select", split_selectors(select)), ("--ignore", split_selectors(ignore))):
        unknown = [v for v in values if not _known_selector(v)]
        if unknown:
            raise click.UsageError(f"{flag} {', '.join(unknown)} matches no check or code; see `decode-doctor list`")
    return RunSettings(
        root=root.resolve(), models=tuple(p.resolve() for p in models), images=tuple(p.resolve() for p in images),
        selectors=split_selectors(select) or config.select, ignores=config.ignore + split_selectors(ignore), reasons=config.reasons,
        fail_on=fail_on or config.fail_on or "error", timeout=timeout or config.timeout, debug=debug, options=options,
    )


def collect(settings: RunSettings, show_progress: bool) -> tuple[Report, Context, list[CheckResult]]:
    """Runs the selected checks; the report is built from their results."""
    started = time.time()
    ctx = Context(root=settings.root, runner=CommandRunner(), models=settings.models, images=settings.images, options=settings.options)
    classes = select_checks(settings.selectors)
    if not classes:
        raise click.UsageError(f"the configured select ({', '.join(settings.selectors)}) matches no check; see `decode-doctor list`")
    progress = Progress(show_progress)
    results = run_checks(classes, ctx, timeout_s=settings.timeout, progress=progress)
    if progress.enabled:
        sys.stderr.write("\r\033[K")
    meta = {"started": dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat(timespec="seconds"), "duration_s": round(time.time() - started, 3), "root": str(settings.root), "host": _host_name(settings.root), "argv": sys.argv[1:], "version": __version__}
    return rebuild(settings, results, meta), ctx, results


def rebuild(settings: RunSettings, results: list[CheckResult], meta: dict[str, Any]) -> Report:
    return build_report(results, settings.selectors, settings.ignores, settings.reasons, meta, settings.fail_on)


def guarded(debug: bool, action: Any) -> None:
    """Runs a command body: usage errors stay click's; anything else is an internal error, exit 2."""
    try:
        code = action()
    except (click.exceptions.Exit, click.ClickException):
        raise
    except Exception as exc:
        if debug:
            traceback.print_exc()
        click.echo(f"decode-doctor: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)", err=True)
        sys.exit(2)
    sys.exit(code)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@run_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the report to this file instead of standard output.")
@click.option("--fix", is_flag=True, help="Preview the fixes for the findings, then apply them after confirmation.")
@click.option("--dry-run", is_flag=True, help="With --fix: only preview, change nothing.")
@click.option("--yes", "-y", is_flag=True, help="With --fix: apply without asking (for scripts).")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix: also apply fixes marked unsafe.")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None, help="Where fix journals and backups live [default: $XDG_STATE_HOME/decode-doctor].")
def check(root: Path, models: tuple[Path, ...], images: tuple[Path, ...], select: tuple[str, ...], ignore: tuple[str, ...], config_path: Path | None, fail_on: str | None, timeout: float | None, debug: bool, fmt: str, output: Path | None, fix: bool, dry_run: bool, yes: bool, unsafe_fixes: bool, state_dir: Path | None, **check_options: Any) -> None:
    """Run the checks and report what they find."""
    if (dry_run or yes or unsafe_fixes) and not fix:
        raise click.UsageError("--dry-run, --yes and --unsafe-fixes go with --fix")
    settings = settings_from(root, models, images, select, ignore, config_path, fail_on, timeout, debug, check_options)
    request = FixRequest(enabled=fix, dry_run=dry_run, yes=yes, unsafe=unsafe_fixes, state_dir=state_dir or default_state_dir())
    guarded(debug, lambda: _run(settings, fmt, output, request))


def _run(settings: RunSettings, fmt: str, output: Path | None, fix: FixRequest) -> int:
    started = time.time()
    report, ctx, results = collect(settings, sys.stderr.isatty() and fmt == "text")
    chat: TextIO = sys.stdout if (fmt == "text" and output is None) else sys.stderr
    if fix.enabled:
        outcome = run_fixes(report, ctx, fix, chat, tty=sys.stdin.isatty())
        if outcome.rechecked:
            by_name = {r.check: r for r in outcome.rechecked}
            results = [by_name.get(r.check, r) for r in results]
            report = rebuild(settings, results, report.meta)
        report.fixes = outcome.summary
    report.meta["duration_s"] = round(time.time() - started, 3)
    if output is not None:
        with open(output, "w", encoding="utf-8") as stream:
            render(report, fmt, stream, tty=False, debug=settings.debug)
        click.echo(f"report written to {output}", err=True)
    else:
        render(report, fmt, sys.stdout, tty=sys.stdout.isatty(), debug=settings.debug)
    return report.exit_code
