"""Discovers checks and fixers: built-ins from their packages, plugins from entry points.

The engine never names a check: whatever module lands in checks/ (or registers the entry point
group) is found here.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from dataclasses import dataclass, field
from importlib import metadata
from types import ModuleType
from typing import Any, Generic, TypeVar

from .check import Check
from .fix import Fixer
from .model import Code

CHECK_GROUP = "decode_doctor.checks"
FIXER_GROUP = "decode_doctor.fixers"

T = TypeVar("T")


@dataclass
class Loaded(Generic[T]):
    items: dict[str, type[T]] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # plugins that failed to load, said once


def _classes_in(module: ModuleType, base: type[T]) -> list[type[T]]:
    return [
        obj
        for _, obj in inspect.getmembers(module, inspect.isclass)
        if issubclass(obj, base) and obj is not base and obj.__module__ == module.__name__ and "name" in vars(obj)
    ]


def _load(package: str, group: str, base: type[T]) -> Loaded[T]:
    loaded: Loaded[T] = Loaded()

    def add(cls: type[T], origin: str) -> None:
        name = cls.name  # type: ignore[attr-defined]
        if name in loaded.items:
            loaded.errors.append(f"{origin}: {base.__name__.lower()} name {name!r} already taken by {loaded.origins[name]}")
            return
        loaded.items[name] = cls
        loaded.origins[name] = origin

    pkg = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module_name = f"{package}.{info.name}"
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # a broken module must not take the CLI down
            loaded.errors.append(f"{module_name}: {type(exc).__name__}: {exc}")
            continue
        for cls in _classes_in(module, base):
            add(cls, "builtin")
    for entry in metadata.entry_points(group=group):
        try:
            obj: Any = entry.load()
        except Exception as exc:
            loaded.errors.append(f"plugin {entry.name} ({entry.value}): {type(exc).__name__}: {exc}")
            continue
        origin = f"plugin {entry.dist.name if entry.dist else entry.value}"
        classes = _classes_in(obj, base) if inspect.ismodule(obj) else [obj]
        for cls in classes:
            if inspect.isclass(cls) and issubclass(cls, base):
                add(cls, origin)
            else:
                loaded.errors.append(f"plugin {entry.name}: {cls!r} is not a {base.__name__} subclass")
    return loaded


_checks: Loaded[Check] | None = None
_fixers: Loaded[Fixer] | None = None


def checks() -> Loaded[Check]:
    global _checks
    if _checks is None:
        _checks = _load("decode_doctor.checks", CHECK_GROUP, Check)
        _check_code_clashes(_checks)
    return _checks


def fixers() -> Loaded[Fixer]:
    global _fixers
    if _fixers is None:
        _fixers = _load("decode_doctor.fixers", FIXER_GROUP, Fixer)
    return _fixers


def _check_code_clashes(loaded: Loaded[Check]) -> None:
    owner: dict[str, str] = {}
    for name, cls in list(loaded.items.items()):
        for spec in cls.codes:
            if spec.code in owner and owner[spec.code] != name:
                loaded.errors.append(f"check {name!r}: code {spec.code} already belongs to {owner[spec.code]!r}")
            owner.setdefault(spec.code, name)


def all_codes() -> dict[str, tuple[Code, type[Check]]]:
    return {spec.code: (spec, cls) for cls in checks().items.values() for spec in cls.codes}


def fixer_for(name: str) -> type[Fixer] | None:
    return fixers().items.get(name)
