"""What the commands that run checks share: their options, turning them into a RunRequest, the
progress line and the fix dialogue on a terminal. The error contract (app.guard) and the render
path (app.output) are the application layer's."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ..app.choices import FAIL_ON_LEVELS, INCOMPLETE_HELP, INCOMPLETE_POLICIES
from ..engine.config import ConfigError, load_config, split_selectors
from ..i18n import _, localized, reason

CONTEXT = {"help_option_names": ["-h", "--help"]}


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
        line = _("checking ({done} done): {running}", done=self.done, running=", ".join(self.running)) if self.running else ""
        if self.detail and self.running:
            line = f"{line} — {self.detail}"
        width = shutil.get_terminal_size((100, 20)).columns - 1
        sys.stderr.write("\r\033[K" + line[:width])
        sys.stderr.flush()

    def clear(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


class TerminalDialogue:
    """The fix dialogue on stdout (or stderr when stdout carries data), confirming on a terminal."""

    def __init__(self, stream: Any, interactive: bool):
        self.stream = stream
        self.interactive = interactive

    def say(self, text: str) -> None:
        from ..app.output import shown, terminal_safe

        click.echo(terminal_safe(shown(text)), file=self.stream)  # a file name that is not UTF-8: its bytes as \xNN

    def confirm(self, question: str) -> bool:
        return click.confirm(question, default=False)


class Parsed(click.ParamType):
    """A check option's parse function as click's type: its ValueError is the usage error, said in the
    user's language (click's own wrapper would print str(exc), the English)."""

    def __init__(self, parse: Callable[[str], object]) -> None:
        self.parse = parse
        self.name = getattr(parse, "__name__", "value").removeprefix("parse_")  # parse_rate: RATE

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return self.parse(value)
        except ValueError as exc:
            from ..i18n import localized, reason

            self.fail(localized(reason(exc)), param, ctx)


class RunCommand(click.Command):
    """A command that runs checks: its own options, then the options the checks declare (Check.options,
    typed dataclasses). A check's flag that is already one of the command's is left out and reported as
    a load error; two checks sharing a flag never load (registry)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from ..engine.registry import load

        registry = load()
        taken = {"-h", "--help", "--lang", *(flag for param in self.params for flag in (*param.opts, *param.secondary_opts))}
        self.check_fields: set[str] = set()
        for cls in registry.checks.values():
            if cls.options is None:
                continue
            for name, flag, default in cls.options.flags():
                if flag.flag in taken:
                    message = _("check {file}: option {flag} is one of decode-doctor's own; left out", file=repr(cls.name), flag=flag.flag)
                    if message not in registry.errors:
                        registry.errors.append(message)
                    continue
                kind = click.Choice(flag.choices) if flag.choices else (Parsed(flag.parse) if flag.parse else None)
                self.params.append(
                    click.Option(
                        [flag.flag, name],
                        multiple=flag.multiple,
                        is_flag=flag.is_flag,
                        default=default,  # click 8.3+ reads an option without one as taking an optional value
                        type=None if flag.is_flag else kind,
                        metavar=flag.metavar,
                        help=f"{flag.help} [{cls.name}]",
                    )
                )
                self.check_fields.add(name)


def run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The options shared by `check` and `report`: what to look at and which checks to run."""
    path = click.Path(exists=True, path_type=Path)
    directory = click.Path(exists=True, file_okay=False, path_type=Path)
    decorators: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
        click.option(
            "--root",
            type=directory,
            default=Path("/"),
            show_default=True,
            help="Read /proc, /sys and /etc under this directory (a captured or mounted host).",
        ),
        click.option(
            "--same-host",
            is_flag=True,
            help="--root is this machine's own filesystem mounted elsewhere (a node agent in a container): NVML, "
            "nvidia-smi and the other tools on PATH, Docker's socket and the bandwidth probe judge that host too. "
            "Without it only the files under --root are judged.",
        ),
        click.option(
            "--host-name",
            envvar="DECODE_DOCTOR_HOST_NAME",
            metavar="NAME",
            help="The host's name in the report and metrics (on Kubernetes: the node's, from the Downward API) "
            "[default: /etc/hostname under --root].",
        ),
        click.option("--model", "models", multiple=True, type=path, help="A model directory or file to check (repeatable)."),
        click.option("--images", "images", multiple=True, type=directory, help="An image dataset directory to check (repeatable)."),
        click.option("--select", multiple=True, help="Only these codes, code prefixes or check names (comma-separated, repeatable)."),
        click.option("--ignore", multiple=True, help="Leave out these codes, code prefixes or check names (counted, not hidden)."),
        click.option(
            "--config",
            "config_path",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="A TOML config file (default: ./decode-doctor.toml or [tool.decode-doctor] in ./pyproject.toml).",
        ),
        click.option(
            "--fail-on",
            type=click.Choice(FAIL_ON_LEVELS),
            default=None,
            help="Exit 1 when a finding is at or above this severity [default: error].",
        ),
        click.option(
            "--incomplete",
            type=click.Choice(INCOMPLETE_POLICIES),
            default="fail",
            show_default=True,
            help=INCOMPLETE_HELP,
        ),
        click.option(
            "--timeout", type=click.FloatRange(min=0.1), default=None, help="Seconds each check may run (default: each check's own)."
        ),
        click.option("--debug", is_flag=True, help="Show tracebacks of crashed checks and internal errors."),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def check_options(params: dict[str, Any]) -> tuple[Any, ...]:
    """The checks' typed options from the command line's parameters (those RunCommand added): one
    instance per options type that was given anything (engine.options)."""
    from ..engine.registry import load

    context = click.get_current_context(silent=True)
    fields: set[str] = getattr(context.command, "check_fields", set()) if context is not None else set()
    found = []
    for cls in load().checks.values():
        if cls.options is None:
            continue
        value = cls.options.from_values({name: params.get(name) for name in cls.options.names() if name in fields})
        if value.given():
            found.append(value)
    return tuple(found)


def _selectors(values: list[str], where: str, retired_note: list[str]) -> list[str]:
    """The selectors that name something: one that matches nothing is a usage error naming where it was
    written; a retired code is a warning (where its data went) and is left out."""
    from ..app.service import sort_selectors
    from ..engine.registry import load

    sorted_out = sort_selectors(load(), values)
    if sorted_out.unknown:
        raise click.UsageError(
            _("{where} {unknown} matches no check or code; see `decode-doctor list`", where=where, unknown=", ".join(sorted_out.unknown))
        )
    for code, why in sorted_out.retired.items():
        retired_note.append(_("{where} {code}: a retired code, left out: {why}", where=where, code=code, why=why))
    return list(sorted_out.known)


def _command_name() -> str | None:
    context = click.get_current_context(silent=True)
    return context.info_name if context is not None else None


def run_request(params: dict[str, Any]) -> Any:
    """A RunRequest from the run options (and the config file they may name); usage errors raise, and
    retired codes named in the options or the config file are said on stderr."""
    from ..app.requests import RunRequest, command_argv

    try:
        config = load_config(params["config_path"], Path.cwd())
    except ConfigError as exc:
        raise click.UsageError(localized(reason(exc))) from None
    notes: list[str] = []
    flags_select = _selectors(split_selectors(params["select"]), "--select", notes)
    flags_ignore = _selectors(split_selectors(params["ignore"]), "--ignore", notes)
    config_select = _selectors(config.select, f"{config.source}: select", notes) if config.source else []
    config_ignore = _selectors(config.ignore, f"{config.source}: ignore", notes) if config.source else []
    for note in notes:
        click.echo(_("decode-doctor: warning: {note}", note=note), err=True)
    if (split_selectors(params["select"]) and not flags_select) or (config.select and not config_select and not flags_select):
        raise click.UsageError(_("the selection names only retired codes: nothing is left to run"))
    return RunRequest(
        root=params["root"].resolve(),
        same_host=params["same_host"],
        host_name=_host_name(params["host_name"]),
        models=tuple(p.resolve() for p in params["models"]),
        images=tuple(p.resolve() for p in params["images"]),
        select=tuple(flags_select or config_select),
        ignore=tuple(config_ignore + flags_ignore),
        reasons=config.reasons,
        fail_on=params["fail_on"] or config.fail_on or "error",
        incomplete_fails=params.get("incomplete", "fail") == "fail",
        timeout=params["timeout"] or config.timeout,
        options=check_options(params),
        argv=command_argv(_command_name()),
    )


def _host_name(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    name = value.strip()
    if len(name) > 253 or not name.isprintable() or "/" in name:
        raise click.BadParameter(_("{value} is not a host name", value=repr(name[:80])), param_hint="--host-name")
    return name


def output_request(params: dict[str, Any], verbose: bool | None = None) -> Any:
    from ..app.output import OutputRequest

    return OutputRequest(
        fmt=params["fmt"],
        output=params.get("output"),
        verbose=params.get("verbose", False) if verbose is None else verbose,
        debug=params.get("debug", False),
        quiet=params.get("quiet", False),
    )
