"""The command line. Subcommands load on demand so `decode-doctor --help` stays fast and light.

Core commands are listed here; a feature may add its own by shipping checks/<feature>/commands.py
with a COMMANDS tuple of click commands. That module is imported to list the commands, so what it
imports at its top must be light (click and the engine's light modules: tests/test_startup.py
measures what `--help` imports); the work behind a command is imported inside it.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from pathlib import Path
from typing import Any

import click

from .. import __version__, i18n
from ..app.guard import echo
from ..engine.features import command_modules
from ..i18n import _, clihelp, localized

# name → (module, attribute). The listing's one line is the first sentence of the command's own
# docstring, read from its source without importing it (--help imports no subcommand).
CORE = {
    "check": ("decode_doctor.cli.check", "check"),
    "list": ("decode_doctor.cli.info", "list_checks"),
    "explain": ("decode_doctor.cli.info", "explain"),
    "report": ("decode_doctor.cli.report", "report"),
    "diff": ("decode_doctor.cli.report", "diff"),
    "merge": ("decode_doctor.cli.report", "merge"),
    "agent": ("decode_doctor.cli.agent", "agent"),
    "undo": ("decode_doctor.cli.undo", "undo"),
    "analyze": ("decode_doctor.cli.analyze", "analyze"),
    "npd": ("decode_doctor.cli.npd", "npd"),
}


@functools.cache
def docstring(module_name: str, attribute: str) -> str:
    """A command function's docstring, from its module's source (ast; nothing is imported)."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        return ""
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    found = next((node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == attribute), None)
    return (ast.get_docstring(found) or "") if found is not None else ""


@functools.cache
def feature_commands() -> dict[str, click.Command]:
    """Commands that features ship in checks/<feature>/commands.py (those whose module loaded)."""
    found: dict[str, click.Command] = {}
    for module in command_modules().modules:
        for command in getattr(module, "COMMANDS", ()):
            if command.name not in CORE:
                found[command.name] = command
    return found


def _terminal_safe_error(exc: click.ClickException) -> click.ClickException:
    """A usage error's message with the control characters of a name it quotes escaped (a file named
    with ESC or a right-to-left override must not act on the terminal that shows the error)."""
    from ..app.output import shown, terminal_safe

    object.__setattr__(exc, "message", terminal_safe(shown(exc.message)))  # click declares it Final
    return exc


def _say_version(ctx: click.Context, value: bool) -> None:
    """--version, in the language of the command (click's own version line is English only)."""
    if value and not ctx.resilient_parsing:
        echo(_("{prog}, version {version}", prog="decode-doctor", version=__version__))
        ctx.exit()


class CommandNotLoaded(click.ClickException):
    exit_code = 3  # no verdict was reached, as for a check that crashed


class LazyGroup(click.Group):
    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.ClickException as exc:
            raise _terminal_safe_error(exc) from exc.__cause__

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            raise _terminal_safe_error(exc) from exc.__cause__

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """The language is settled before anything is parsed or printed: --lang anywhere on the line
        (the group's or the command's), else DECODE_DOCTOR_LANG, else the locale."""
        i18n.use(i18n.from_environment(os.environ))
        given = clihelp.lang_in(args)
        if given is not None:
            try:
                i18n.use(given)
            except i18n.UnknownLanguage:
                pass  # the --lang option's own check refuses it, in the usage error's words
        note = i18n.environment_note(os.environ)
        if note is not None and given is None:  # a --lang on the line makes the variable moot
            echo(note, err=True)
        if i18n.chinese() and not i18n.compiled():
            # a source checkout never built: say so once rather than fall back to English unannounced
            echo(  # untranslated: no catalog to say it with
                "decode-doctor: the zh-CN catalog is not compiled (python -m decode_doctor.i18n.compile); printing in English",
                err=True,
            )
        clihelp.point_click_here()
        return super().parse_args(ctx, args)

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return clihelp.translated_params(super().get_params(ctx))

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*CORE, *feature_commands()]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in CORE:
            module_name, attribute = CORE[cmd_name]
            try:
                command = getattr(importlib.import_module(module_name), attribute)
            except Exception as exc:  # an install that lost a module: said, not a traceback
                raise CommandNotLoaded(
                    _(
                        "the command {name} could not load: {module}: {kind}: {error}",
                        name=cmd_name,
                        module=module_name,
                        kind=type(exc).__name__,
                        error=str(exc),
                    )
                ) from exc
        else:
            command = feature_commands().get(cmd_name)
        return clihelp.prepared(command) if command is not None else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, clihelp.first_sentence(clihelp.help_text(docstring(*place)))) for name, place in CORE.items()]
        rows += [(name, clihelp.short_help(command)) for name, command in feature_commands().items()]
        with formatter.section(_("Commands")):
            formatter.write_dl(rows)
        failures = command_modules().errors
        if failures:
            with formatter.section(_("Could not load (their commands are missing)")):
                for failure in failures:
                    formatter.write_text(localized(failure))

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        clihelp.format_help_text(self, ctx, formatter)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=lambda ctx, _param, value: _say_version(ctx, value),
    help="Show the version and exit.",
)
@clihelp.lang_option
def cli() -> None:
    """decode-doctor: checks a host and its model files before LLM inference goes live.

    Findings carry a stable code (`decode-doctor explain CODE`), evidence and, where one exists,
    an automatic fix that can be previewed (--fix --dry-run) and undone (`decode-doctor undo`).
    """


def main(argv: list[str] | None = None) -> None:
    """Click's standalone mode turns Ctrl-C into "Aborted!" and exit 1, the findings code; here it is 130."""
    try:
        code = cli.main(args=argv, prog_name="decode-doctor", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort as exc:
        interrupted = isinstance(exc.__context__, KeyboardInterrupt)
        echo(_("decode-doctor: interrupted") if interrupted else _("decode-doctor: aborted"), err=True)
        sys.exit(130 if interrupted else 1)
    except KeyboardInterrupt:
        echo(_("decode-doctor: interrupted"), err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
