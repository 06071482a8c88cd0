"""The error contract of every command: usage errors stay click's (exit 2, one line); a path the user
gave that cannot be read or written is one line, exit 2; anything else is an internal error, exit 2,
with the --debug hint; Ctrl-C is 130 and a closed pipe 141."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable

import click

from ..i18n import _, localized, os_reason, reason
from ..reports.textsafe import shown, terminal_safe
from .deadline import DeadlineExceeded, WorkFailed


def echo(text: str, err: bool = False, nl: bool = True) -> None:
    """The one writer of a command's own lines (not its report, which the renderer escapes): a name's
    control and bidirectional characters written \\x1b, \\u202e, never raw; a name that is not UTF-8 as \\xNN."""
    click.echo(terminal_safe(shown(text)), err=err, nl=nl)


def guarded(debug: bool, action: Callable[[], int]) -> None:
    """Runs a command body and exits with its code, or with the contract's code for what it raised."""
    try:
        code = action()
    except (click.exceptions.Exit, click.ClickException):
        raise
    except BrokenPipeError:  # `decode-doctor check | head`: the reader left; say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(141)
    except KeyboardInterrupt:
        echo(_("decode-doctor: interrupted"), err=True)
        sys.exit(130)
    except (DeadlineExceeded, WorkFailed) as exc:
        echo("decode-doctor: " + localized(reason(exc)), err=True)
        sys.exit(2)
    except OSError as exc:
        if debug:
            traceback.print_exc()
        if exc.filename is None:
            echo(
                _(
                    "decode-doctor: internal error: {name}: {exc} (rerun with --debug for the traceback)",
                    name=type(exc).__name__,
                    exc=str(exc),
                ),
                err=True,
            )
        else:  # a path the user gave or owns: unwritable, missing, read-only, full
            target = exc.filename if exc.filename2 is None else f"{exc.filename} → {exc.filename2}"
            echo(_("decode-doctor: {value}: {target}", value=localized(os_reason(exc)), target=target), err=True)
        sys.exit(2)
    except Exception as exc:
        if debug:
            traceback.print_exc()
        echo(
            _("decode-doctor: internal error: {name}: {exc} (rerun with --debug for the traceback)", name=type(exc).__name__, exc=str(exc)),
            err=True,
        )
        sys.exit(2)
    sys.exit(code)
