"""The command line. Subcommands load on demand so `decode-doctor --help` stays fast and light."""

from __future__ import annotations

import importlib
import sys

import click

from . import __version__

# name → (module, attribute, one-line help); the help is here so --help imports no subcommand.
SUBCOMMANDS = {
    "check": ("decode_doctor.cli_check", "check", "Run the checks; with --fix, preview and apply fixes."),
    "list": ("decode_doctor.cli_info", "list_checks", "List the checks, their codes and which are fixable."),
    "explain": ("decode_doctor.cli_info", "explain", "Explain a finding code: what it means, why, how to fix."),
    "estimate": ("decode_doctor.cli_estimate", "estimate", "Budget a model: memory fit and decode tokens/s ceiling."),
    "report": ("decode_doctor.cli_report", "report", "Write a ticket-ready support bundle with secrets removed."),
    "diff": ("decode_doctor.cli_report", "diff", "What differs between two reports."),
    "merge": ("decode_doctor.cli_report", "merge", "A host × check matrix for a fleet of reports."),
    "undo": ("decode_doctor.cli_undo", "undo", "Roll back the last fix run (or a named one) exactly."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in SUBCOMMANDS:
            return None
        module_name, attribute, _ = SUBCOMMANDS[cmd_name]
        return getattr(importlib.import_module(module_name), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, help_text) for name, (_, _, help_text) in SUBCOMMANDS.items()])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="decode-doctor")
def cli() -> None:
    """decode-doctor: checks a host and its model files before LLM inference goes live.

    Findings carry a stable code (`decode-doctor explain CODE`), evidence and, where one exists,
    an automatic fix that can be previewed (--fix --dry-run) and undone (`decode-doctor undo`).
    """


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="decode-doctor", standalone_mode=True)
    except KeyboardInterrupt:  # pragma: no cover - interactive
        click.echo("interrupted", err=True)
        sys.exit(130)
