"""The command modules that feature packages ship (checks/<feature>/commands.py), imported with what
failed kept: the CLI lists the commands (and names a module that did not load in --help instead of
dying with it), and the registry adds the same failures to a run's load errors, so a command that did
not load leaves the verdict incomplete rather than missing in silence.

Light on purpose: --help imports it (tests/test_startup.py)."""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..i18n import said

CHECKS_PACKAGE = "decode_doctor.checks"


@dataclass(frozen=True)
class CommandModules:
    modules: tuple[ModuleType, ...]
    errors: tuple[str, ...]  # "decode_doctor.checks.X.commands: ImportError: …", as the registry names its own


@functools.cache
def command_modules() -> CommandModules:
    checks = importlib.import_module(CHECKS_PACKAGE)
    modules: list[ModuleType] = []
    errors: list[str] = []
    for directory in sorted(Path(next(iter(checks.__path__))).iterdir()):
        if not (directory / "commands.py").is_file() or directory.name.startswith("_"):
            continue
        name = f"{CHECKS_PACKAGE}.{directory.name}.commands"
        try:
            modules.append(importlib.import_module(name))
        except Exception as exc:  # a broken feature must not take --help and every other command down with it
            errors.append(said("{module}: {kind}: {error}", module=name, kind=type(exc).__name__, error=str(exc)))
    return CommandModules(tuple(modules), tuple(errors))
