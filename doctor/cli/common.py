"""What the commands that run checks share: their options, turning them into a RunRequest, the
progress line and the fix dialogue on a terminal. The error contract (app.guard) and the render
path (app.output) are the application layer's."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..app.flags import click_options, click_type
from ..engine.config import ConfigError, load_config, split_selectors
from ..engine.options import Options
from ..i18n import _, localized, reason

if TYPE_CHECKING:
    from .options import RunOptions

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
        for info in registry.catalog():  # from the registry's index: --help imports no check
            for name, flag, default in info.flags:
                if flag.flag in taken:
                    message = _("check {file}: option {flag} is one of decode-doctor's own; left out", file=repr(info.name), flag=flag.flag)
                    if message not in registry.errors:
                        registry.errors.append(message)
                    continue
                kind = click_type(flag)
                made = click.Option(
                    [flag.flag, name],
                    multiple=flag.multiple,
                    is_flag=flag.is_flag,
                    default=default,  # click 8.3+ reads an option without one as taking an optional value
                    type=kind,
                    metavar=flag.metavar,
                    help=f"{flag.help} [{info.name}]",
                )
                made.declaration = flag  # type: ignore[attr-defined]  # what the check declared (engine.options)
                self.params.append(made)
                self.check_fields.add(name)


def run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The options shared by the commands that run checks (check, report, agent, npd): cli.options.RunOptions."""
    from .options import RunOptions

    return click_options(RunOptions)(func)


def check_options(params: Mapping[str, object]) -> tuple[Options, ...]:
    """The checks' typed options from the command line's parameters (those RunCommand added): one
    instance per options type that was given anything (engine.options). A command's callback calls it
    at once, with its click parameters, and passes on only what it returns."""
    from ..engine.registry import load

    context = click.get_current_context(silent=True)
    fields: set[str] = getattr(context.command, "check_fields", set()) if context is not None else set()
    return load().option_values({name: params.get(name) for name in fields})  # imports only the options types given a value


def _selectors(values: list[str], where: str, retired_note: list[str]) -> list[str]:
    """The selectors that name something: one that matches nothing is a usage error naming where it was
    written; a retired code is a warning (where its data went) and is left out."""
    from ..app.service import sort_selectors
    from ..engine.registry import load

    sorted_out = sort_selectors(load(), values)
    if sorted_out.unknown:
        raise click.UsageError(
            _(
                "{where} {unknown} matches no check or code; see `decode-doctor list`",
                where=where,
                unknown=", ".join(f'"{name}"' for name in sorted_out.unknown),
            )
        )
    for code, why in sorted_out.retired.items():
        retired_note.append(_("{where} {code}: a retired code, left out: {why}", where=where, code=code, why=why))
    return list(sorted_out.known)


def _command_name() -> str | None:
    context = click.get_current_context(silent=True)
    return context.info_name if context is not None else None


def run_request(run: RunOptions, checks: tuple[Options, ...] = ()) -> Any:
    """A RunRequest from the run options and the checks' (check_options), and the config file they may
    name; usage errors raise, and retired codes named in the options or the config file are said on stderr."""
    from ..app.requests import RunRequest, command_argv

    try:
        config = load_config(run.config_path, Path.cwd())
    except ConfigError as exc:
        raise click.UsageError(localized(reason(exc))) from None
    notes: list[str] = []
    flags_select = _selectors(split_selectors(run.select), "--select", notes)
    flags_ignore = _selectors(split_selectors(run.ignore), "--ignore", notes)
    config_select = _selectors(config.select, f"{config.source}: select", notes) if config.source else []
    config_ignore = _selectors(config.ignore, f"{config.source}: ignore", notes) if config.source else []
    for note in notes:
        click.echo(_("decode-doctor: warning: {note}", note=note), err=True)
    if (split_selectors(run.select) and not flags_select) or (config.select and not config_select and not flags_select):
        raise click.UsageError(_("the selection names only retired codes: nothing is left to run"))
    return RunRequest(
        root=run.root.resolve(),
        same_host=run.same_host,
        host_name=_host_name(run.host_name),
        models=tuple(p.resolve() for p in run.models),
        images=tuple(p.resolve() for p in run.images),
        select=tuple(flags_select or config_select),
        ignore=tuple(config_ignore + flags_ignore),
        reasons=config.reasons,
        fail_on=run.fail_on or config.fail_on or "error",
        incomplete_fails=run.incomplete == "fail",
        timeout=run.timeout or config.timeout,
        options=checks,
        argv=command_argv(_command_name()),
    )


def _host_name(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    name = value.strip()
    if len(name) > 253 or not name.isprintable() or "/" in name:
        raise click.BadParameter(_("{value} is not a host name", value=repr(name[:80])), param_hint="--host-name")
    return name
