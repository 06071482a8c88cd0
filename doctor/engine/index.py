"""The registry's index: what is known of the built-in checks and fixers without importing them.

`decode-doctor check --select swappiness` should import the swappiness package and nothing of the
other features; selection, `check --help` (the checks' flags), `explain` and the binding of fixes to
fixers only need plain data about every check. That data is generated from a full import of the
built-in checks and fixers (registry.build, every contract verified) into data/index.json, shipped
with the package (pyproject's package-data takes every data/*.json), and kept in sync by
tests/test_registry_index.py:

    python -m decode_doctor.engine.index --write    # regenerate after changing a check or a fixer
    python -m decode_doctor.engine.index --check    # exit 1 when the file is out of date

The index is a cache the registry verifies as it uses it: a check package imported on demand must
define exactly the checks its entries describe, the modules under checks/ and fixers/ must be the
ones indexed, and every module the full import loads must still be installed; otherwise the registry
is built the full way (registry.build), as it was before the index. Plugins (entry points) are never
in the index: with any installed, the registry is built the full way too.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.machinery
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Generic, TypeAlias, TypedDict, TypeVar, cast

from .check import Check
from .facts import Facts
from .findings import Applicability
from .fixer import Fixer
from .options import Flag, Options
from .plugins import plugins_declared
from .registry import CHECK_GROUP, FIXER_GROUP, CheckInfo, Claim, Registry, T, build
from .registry import _defined_in as defined_in
from .registry import _import_feature as registry_import_feature

VERSION = 1
PATH = Path(__file__).resolve().parent / "data" / "index.json"
ROOTS = ("decode_doctor.checks", "decode_doctor.fixers", "decode_doctor")  # most specific first
COMMAND = "python -m decode_doctor.engine.index --write"
SUFFIXES = tuple(importlib.machinery.all_suffixes())

JSON: TypeAlias = "bool | int | float | str | list[JSON] | dict[str, JSON] | None"


class FlagEntry(TypedDict):
    field: str
    flag: dict[str, JSON]  # every field of its engine.options.Flag but parse (tuples as lists)
    parse: str | None  # the parse function's name (what a usage error calls the value); None: none
    default: JSON


class OptionsEntry(TypedDict):
    type: str  # ref() of the options type
    flags: list[FlagEntry]


class NeedsEntry(TypedDict):
    platforms: list[str]
    inputs: list[str | dict[str, str]]  # an input's name, or {"option": ref, "field": name}
    exclusive: bool


CheckEntry = TypedDict(
    "CheckEntry",
    {
        "name": str,
        "class": str,
        "package": str,
        "description": str,
        "codes": list[list[str | bool]],  # [code, severity, title, declares a fix]
        "retired": dict[str, str],
        "options": OptionsEntry | None,
        "needs": NeedsEntry,
        "publishes": str | None,
        "reads": list[str],
        "timeout_s": float,
    },
)
FixerEntry = TypedDict("FixerEntry", {"name": str, "class": str, "package": str, "claims": dict[str, str], "takes": list[str]})


class Index(TypedDict):
    version: int
    generated_by: str
    errors: list[str]
    modules: list[str]
    files: list[str]
    checks: list[CheckEntry]
    fixers: list[FixerEntry]


K = TypeVar("K")
V = TypeVar("V")


def ref(obj: type) -> str:
    """A class's place: "module:qualname"."""
    return f"{obj.__module__}:{obj.__qualname__}"


def resolve(place: str) -> object:
    """The object at a place ref() wrote (importing its module)."""
    module, _, qualname = place.partition(":")
    obj: object = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _plain(value: object) -> object:
    """value as JSON holds it (tuples as lists), so an entry made now compares with one read back."""
    return json.loads(json.dumps(value))


def check_entry(cls: type[Check]) -> CheckEntry:
    """What the index says of one check."""
    from .findings import FixableCode
    from .options import OptionRef

    options = None
    if cls.options is not None:
        flags = [
            {
                "field": name,
                "flag": {item.name: getattr(flag, item.name) for item in dataclasses.fields(Flag) if item.name != "parse"},
                "parse": getattr(flag.parse, "__name__", "value") if flag.parse is not None else None,
                "default": default,
            }
            for name, flag, default in cls.options.flags()
        ]
        options = {"type": ref(cls.options), "flags": flags}
    inputs = [{"option": ref(i.kind), "field": i.name} if isinstance(i, OptionRef) else i for i in cls.needs.inputs]
    entry = {
        "name": cls.name,
        "class": ref(cls),
        "package": ".".join(cls.__module__.split(".")[:3]),
        "description": cls.description,
        "codes": [[c.code, c.severity.value, c.title, isinstance(c, FixableCode) and c.declares_fix] for c in cls.codes],
        "retired": dict(cls.retired),
        "options": options,
        "needs": {"platforms": list(cls.needs.platforms), "inputs": inputs, "exclusive": cls.needs.exclusive},
        "publishes": ref(cls.facts_type) if cls.facts_type is not None else None,
        "reads": [ref(r.facts) for r in cls.needs.reads],
        "timeout_s": cls.timeout_s,
    }
    return cast("CheckEntry", _plain(entry))


def fixer_entry(cls: type[Fixer]) -> FixerEntry:
    """What the index says of one fixer."""
    claims = {
        getattr(spec, "code", str(spec)): getattr(applicability, "value", str(applicability)) for spec, applicability in cls.claims.items()
    }
    entry = {
        "name": cls.name,
        "class": ref(cls),
        "package": ".".join(cls.__module__.split(".")[:3]),
        "claims": claims,
        "takes": [ref(kind) for kind in cls.takes],
    }
    return cast("FixerEntry", _plain(entry))


def _modules_in(directory: str) -> list[tuple[str, bool]]:
    """(name, is a package) of the modules in a directory, as pkgutil.iter_modules finds them (a
    directory scan, without its per-file work: this runs on every start)."""
    found: dict[str, bool] = {}
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    for item in entries:
        name = item.name
        if item.is_dir():
            if "." not in name and os.path.isfile(os.path.join(item.path, "__init__.py")):
                found[name] = True
            continue
        stem = next((name[: -len(suffix)] for suffix in SUFFIXES if name.endswith(suffix)), None)
        if stem and "." not in stem and stem != "__init__":
            found.setdefault(stem, False)
    return sorted(found.items())


def feature_modules() -> list[str]:
    """The modules the full discovery imports under checks/ and fixers/ (their names), as found now."""
    found: list[str] = []
    for package in ("decode_doctor.checks", "decode_doctor.fixers"):
        root = importlib.import_module(package)
        for path in root.__path__:
            for name, is_package in _modules_in(path):
                if name.startswith("_"):
                    continue
                found.append(f"{package}.{name}")
                if is_package:
                    subs = [sub for sub, _ in _modules_in(os.path.join(path, name)) if not sub.startswith("_") and sub != "commands"]
                    found += [f"{package}.{name}.{sub}" for sub in subs]
    return found


def _root_of(module: str) -> str | None:
    return next((root for root in ROOTS if module == root or module.startswith(root + ".")), None)


def _installed_files() -> list[str]:
    """Every decode_doctor module this process has imported, as "root:relative path" (what the full
    import needs installed: a module removed from an install makes the registry build the full way)."""
    files: set[str] = set()
    roots = {root: Path(next(iter(sys.modules[root].__path__))) for root in ROOTS if root in sys.modules}
    for name, module in list(sys.modules.items()):
        root = _root_of(name)
        where = getattr(module, "__file__", None)
        if root is None or root not in roots or not where:
            continue
        try:
            relative = Path(where).resolve().relative_to(roots[root].resolve())
        except ValueError:
            continue
        files.add(f"{root}:{relative.as_posix()}")
    return sorted(files)


def generate() -> Index:
    """The index, from a full import of the built-in checks and fixers (no plugins). Run it in a fresh
    process (main()): the files it lists are the decode_doctor modules loaded by then."""
    from .features import command_modules

    registry = build(plugins=False)
    command_modules()
    checks = [check_entry(cls) for name, cls in registry.checks.items() if registry.origins["check:" + name] == "builtin"]
    fixers = [fixer_entry(cls) for name, cls in registry.fixers.items() if registry.origins["fixer:" + name] == "builtin"]
    return {
        "version": VERSION,
        "generated_by": COMMAND,
        "errors": [str(error) for error in registry.errors],
        "modules": feature_modules(),
        "files": _installed_files(),
        "checks": checks,
        "fixers": fixers,
    }


def dumps(index: Index) -> str:
    return json.dumps(index, indent=1, ensure_ascii=False, sort_keys=False) + "\n"


def read() -> Index | None:
    """The shipped index (None if missing, unreadable or of another version)."""
    try:
        data = json.loads(PATH.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return cast("Index", data) if isinstance(data, dict) and data.get("version") == VERSION else None


def missing_files(index: Index) -> list[str]:
    """The indexed modules no longer installed (a stat each)."""
    roots: dict[str, list[str]] = {}
    for root in ROOTS:
        try:
            roots[root] = list(importlib.import_module(root).__path__)
        except ImportError:
            roots[root] = []
    missing = []
    for item in index.get("files", ()):
        root, _, relative = str(item).partition(":")
        if not any(os.path.isfile(os.path.join(path, relative)) for path in roots.get(root, ())):
            missing.append(item)
    return missing


class LazyParse:
    """A check option's parse function, imported with its options type when a value is given."""

    def __init__(self, options: str, field: str, name: str) -> None:
        self.options = options
        self.field = field
        self.__name__ = name

    def __call__(self, text: str) -> object:
        kind = cast("type[Options]", resolve(self.options))
        parse: Callable[[str], object] | None = next((flag.parse for name, flag, _ in kind.flags() if name == self.field), None)
        return parse(text) if parse is not None else text


class Lazy:
    """What load()'s registry knows from the index (engine.index), and the checks and fixers it imported
    on demand, a feature package at a time. Anything the index cannot answer (a name enumerated, a
    package whose checks differ from their entries) builds the full registry, which it then stands for."""

    def __init__(self, registry: Registry, index: Index) -> None:
        self.registry = registry
        self.entries: dict[str, CheckEntry] = {entry["name"]: entry for entry in index["checks"]}
        self.fixer_entries: dict[str, FixerEntry] = {entry["name"]: entry for entry in index["fixers"]}
        self.published = {publishes: name for name, entry in self.entries.items() if (publishes := entry["publishes"])}
        self.checks: dict[str, type[Check]] = {}
        self.fixers: dict[str, type[Fixer]] = {}
        self.imported: set[str] = set()
        self.full: Registry | None = None
        self._catalog: list[CheckInfo] | None = None

    def complete(self) -> Registry:
        """The full registry (registry.build), built once; load()'s registry answers from it from then on."""
        if self.full is None:
            full = build()
            self.full = full
            self.registry.origins = full.origins
            self.registry.claims = full.claims
            # what the full import says, then what was said since load() (the command line's own, say)
            self.registry.errors[:] = [*full.errors, *(error for error in self.registry.errors if error not in full.errors)]
        return self.full

    def _package(self, package: str, base: type[T], entries: Iterable[object], entry: Callable[[type[T]], object]) -> list[type[T]] | None:
        """The classes of one feature package, imported; None when it differs from the index (then the
        registry is built the full way)."""
        if package in self.imported:
            return []
        self.imported.add(package)
        module = registry_import_feature(package, self.registry.errors)
        if module is None:
            return []
        found = defined_in(module, base)
        return found if [entry(cls) for cls in found] == list(entries) else None

    def check(self, name: str) -> type[Check] | None:
        if self.full is None and name not in self.checks and name in self.entries:
            package = self.entries[name]["package"]
            found = self._package(package, Check, [e for e in self.entries.values() if e["package"] == package], check_entry)
            if found is None:
                self.complete()
            else:
                self.checks.update({cls.name: cls for cls in found})
        return self.full.checks.get(name) if self.full is not None else self.checks.get(name)

    def fixer(self, name: str) -> type[Fixer] | None:
        if self.full is None and name not in self.fixers and name in self.fixer_entries:
            package = self.fixer_entries[name]["package"]
            same = [e for e in self.fixer_entries.values() if e["package"] == package]
            found = self._package(package, Fixer, same, fixer_entry)
            if found is None:
                self.complete()
            else:
                self.fixers.update({cls.name: cls for cls in found})
        return self.full.fixers.get(name) if self.full is not None else self.fixers.get(name)

    def publisher(self, kind: type[Facts]) -> str | None:
        """The name of the check that publishes the facts type (its package imported)."""
        name = self.published.get(ref(kind)) if isinstance(kind, type) else None
        return name if name is not None and self.check(name) is not None else None

    def catalog(self) -> list[CheckInfo]:
        if self._catalog is None:
            infos = []
            for name, entry in self.entries.items():
                options = entry["options"]
                flags: list[tuple[str, Flag, object]] = []
                for item in options["flags"] if options else ():
                    parse = LazyParse(options["type"], item["field"], item["parse"]) if options and item["parse"] else None
                    described = {key: tuple(value) if isinstance(value, list) else value for key, value in item["flag"].items()}
                    flag = Flag(**described, parse=parse)  # type: ignore[arg-type]  # the fields Flag had when the index was made
                    given = item["default"]
                    default = tuple(given) if flag.multiple and isinstance(given, list) else given
                    flags.append((item["field"], flag, default))
                infos.append(CheckInfo(name, tuple(str(code[0]) for code in entry["codes"]), entry["retired"], tuple(flags)))
            self._catalog = infos
        return self._catalog

    def options_given(self, values: Mapping[str, object]) -> list[type[Options]]:
        """The options types with a field given a value other than its default (imported)."""
        kinds: list[type[Options]] = []
        for info, entry in zip(self.catalog(), self.entries.values(), strict=True):
            options = entry["options"]
            for name, flag, default in info.flags:
                value = values.get(name)
                if options is None or value is None or (flag.multiple and not value):
                    continue
                if (tuple(value) if flag.multiple and isinstance(value, Iterable) else value) != default:
                    kinds.append(cast("type[Options]", resolve(options["type"])))
                    break
        return kinds


class LazyMapping(MutableMapping[K, V], Generic[K, V]):
    """A mapping of load()'s registry: a key looked up imports what it names (one feature package);
    anything that enumerates builds the full registry and reads it."""

    def __init__(self, lazy: Lazy, find: Callable[[K], V | None], full: Callable[[Registry], MutableMapping[K, V]]) -> None:
        self.lazy = lazy
        self.find = find
        self.full = full

    def _full(self) -> MutableMapping[K, V]:
        return self.full(self.lazy.complete())

    def __getitem__(self, key: K) -> V:
        found = self.find(key) if self.lazy.full is None else None
        if self.lazy.full is not None:  # built the full way (now, or before)
            return self._full()[key]
        if found is None:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        try:
            self[cast("K", key)]
        except (KeyError, TypeError):
            return False
        return True

    def __iter__(self) -> Iterator[K]:
        return iter(self._full())

    def __len__(self) -> int:
        return len(self._full())

    def __setitem__(self, key: K, value: V) -> None:
        self._full()[key] = value

    def __delitem__(self, key: K) -> None:
        del self._full()[key]


def indexed() -> Registry | None:
    """The registry of the built-in checks from the index, importing none of them; None when the
    index cannot stand for the full import: missing or out of date with the modules installed, or a
    plugin installed (plugins load the full way, and are held to the contract against every check)."""
    index = read()
    if index is None or index.get("errors") or index.get("modules") != feature_modules() or missing_files(index):
        return None
    if plugins_declared((CHECK_GROUP, FIXER_GROUP)):
        return None
    registry = Registry()
    lazy = Lazy(registry, index)
    registry.lazy = lazy
    registry.checks = LazyMapping[str, type[Check]](lazy, lazy.check, lambda full: full.checks)
    registry.fixers = LazyMapping[str, type[Fixer]](lazy, lazy.fixer, lambda full: full.fixers)
    registry.publishers = LazyMapping[type[Facts], str](lazy, lazy.publisher, lambda full: full.publishers)
    registry.origins = {
        **{"check:" + name: "builtin" for name in lazy.entries},
        **{"fixer:" + name: "builtin" for name in lazy.fixer_entries},
    }
    registry.claims = {
        code: Claim(name, Applicability(applicability))
        for name, entry in lazy.fixer_entries.items()
        for code, applicability in entry["claims"].items()
    }
    return registry


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    fresh = dumps(generate())
    if "--write" in args:
        PATH.parent.mkdir(parents=True, exist_ok=True)
        PATH.write_text(fresh, encoding="utf-8")
        print(f"wrote {PATH}")
        return 0
    if "--check" in args:
        current = PATH.read_text(encoding="utf-8") if PATH.is_file() else ""
        if current != fresh:
            print(f"{PATH} is out of date with the checks and fixers: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
