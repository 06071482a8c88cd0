"""Discovers checks and fixers, and holds them to their contracts when they load.

Built-in checks are the feature packages under checks/ (a package's checks are the Check
subclasses defined in its modules, every one of which is imported but commands.py, which is the
CLI's), built-in fixers the modules under fixers/; plugins register the entry-point groups below.
The engine never names a check. Loading verifies:
- every code belongs to one check; a code that offers a fix (FixableCode) says how safe it is;
- options are typed (engine.options): one options type per check, flags and field names one
  namespace (a flag two checks declare is an error, not first-wins), and every input and option a
  check names in its needs exists;
- each facts type has one publisher, and every type a check reads (Needs.reads) has one;
- the fix contract: every code that declares a fix is claimed by exactly one fixer, that fixer
  takes the params type the code declares, and a fixer claims only codes that exist and declare one.
What breaks a contract is left out and named in `errors`, shown by `list` and every report.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import sys
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

from ..i18n import joined, said
from .check import INPUTS, Check
from .facts import Facts
from .features import command_modules
from .findings import Applicability, Code, Finding, FixableCode, FixParams
from .fixer import Fixer
from .options import Flag, OptionRef, Options

if TYPE_CHECKING:
    from .index import Lazy

CHECK_GROUP = "decode_doctor.checks"
FIXER_GROUP = "decode_doctor.fixers"
CHECKS_PACKAGE = "decode_doctor.checks"
FIXERS_PACKAGE = "decode_doctor.fixers"

T = TypeVar("T")


@dataclass(frozen=True)
class Claim:
    fixer: str
    applicability: Applicability


@dataclass(frozen=True)
class CheckInfo:
    """What selection and the command line need of a check, known without importing it (engine.index)."""

    name: str
    codes: tuple[str, ...]
    retired: Mapping[str, str]
    flags: tuple[tuple[str, Flag, object], ...] = ()  # (field name, its flag, its default), as Options.flags() gives


@dataclass
class Registry:
    checks: MutableMapping[str, type[Check]] = field(default_factory=dict)
    fixers: MutableMapping[str, type[Fixer]] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)  # "check:NAME" / "fixer:NAME" → builtin / plugin …
    errors: list[str] = field(default_factory=list)
    claims: dict[str, Claim] = field(default_factory=dict)  # code → the fixer that acts on it
    publishers: MutableMapping[type[Facts], str] = field(default_factory=dict)  # facts type → the check that publishes it
    # load()'s registry: checks and fixers imported on demand from the index (engine.index); None: all imported
    lazy: Lazy | None = field(default=None, repr=False, compare=False)

    def codes(self) -> dict[str, tuple[Code, type[Check]]]:
        return {spec.code: (spec, cls) for cls in self.checks.values() for spec in cls.codes}

    def publisher(self, kind: type[Facts]) -> type[Check] | None:
        name = self.publishers.get(kind)
        return self.checks.get(name) if name else None

    def fixable(self, code: str) -> Applicability | None:
        claim = self.claims.get(code)
        return claim.applicability if claim else None

    def resolve(self, finding: Finding) -> Finding:
        """The finding with its fix bound to the fixer that claims its code (dropped if none does)."""
        if finding.fix is None:
            return finding
        claim = self.claims.get(finding.code)
        if claim is None:
            return replace(finding, fix=None)
        return replace(finding, fix=replace(finding.fix, fixer=claim.fixer, applicability=claim.applicability))

    def _indexed(self) -> Lazy | None:
        return self.lazy if self.lazy is not None and self.lazy.full is None else None

    def names(self) -> list[str]:
        """The checks' names in the registry's order, importing none."""
        lazy = self._indexed()
        return list(lazy.entries) if lazy is not None else list(self.checks)

    def catalog(self) -> list[CheckInfo]:
        """Each check's name, codes, retired codes and flags, importing none (from the index)."""
        lazy = self._indexed()
        if lazy is not None:
            return lazy.catalog()
        return [
            CheckInfo(cls.name, tuple(c.code for c in cls.codes), cls.retired, tuple(cls.options.flags()) if cls.options else ())
            for cls in self.checks.values()
        ]

    def owner(self, code: str) -> str | None:
        """The name of the check that declares the code, importing none."""
        return next((info.name for info in self.catalog() if code in info.codes), None)

    def option_values(self, values: Mapping[str, object]) -> tuple[Options, ...]:
        """The checks' typed options given anything in values (a command line's parameters by field
        name): one instance per options type, importing only the types that were given a value."""
        found: list[Options] = []
        lazy = self._indexed()
        declared = [cls.options for cls in self.checks.values() if cls.options is not None] if lazy is None else []
        for kind in lazy.options_given(values) if lazy is not None else declared:
            value = kind.from_values({name: values.get(name) for name in kind.names() if name in values})
            if value.given():
                found.append(value)
        return tuple(found)

    def subset(self, classes: Iterable[type[Check]]) -> Registry:
        """A run's registry: these checks and, transitively, those whose facts they read (a re-check
        runs them), with every claim and the errors shared; itself when everything is imported."""
        if self._indexed() is None:
            return self
        wanted: dict[str, type[Check]] = {}
        pending = list(classes)
        while pending:
            cls = pending.pop()
            if cls.name in wanted:
                continue
            wanted[cls.name] = cls
            for reads in cls.needs.reads:
                publisher = self.publisher(reads.facts)
                if publisher is not None:
                    pending.append(publisher)
        checks = {name: wanted[name] for name in self.names() if name in wanted}
        publishers = {cls.facts_type: name for name, cls in checks.items() if cls.facts_type is not None}
        return Registry(checks, self.fixers, self.origins, self.errors, self.claims, publishers)


def _defined_in(module: ModuleType, base: type[T]) -> list[type[T]]:
    """Subclasses of base defined in module or its submodules (a feature package), with a name."""
    prefix = module.__name__
    found: list[type[T]] = []
    modules = [m for n, m in list(sys.modules.items()) if m is not None and (n == prefix or n.startswith(prefix + "."))]
    for candidate in modules:
        for _, obj in inspect.getmembers(candidate, inspect.isclass):
            if obj in found or not issubclass(obj, base) or obj is base or "name" not in vars(obj):
                continue
            if obj.__module__ == prefix or obj.__module__.startswith(prefix + "."):
                found.append(obj)
    return sorted(found, key=lambda cls: cls.__module__ + "." + cls.__qualname__)


def _import_feature(name: str, errors: list[str]) -> ModuleType | None:
    """A feature package (or fixer module) with every module in it but commands.py; None, and the
    error named, when one does not import."""
    try:
        module = importlib.import_module(name)
        for sub in pkgutil.iter_modules(getattr(module, "__path__", [])):
            if not sub.name.startswith("_") and sub.name != "commands":
                importlib.import_module(f"{name}.{sub.name}")
    except Exception as exc:  # a broken module must not take the CLI down
        errors.append(said("{module}: {kind}: {error}", module=name, kind=type(exc).__name__, error=str(exc)))
        return None
    return module


def _discover(package: str, group: str, base: type[T], errors: list[str], plugins: bool = True) -> list[tuple[type[T], str]]:
    from importlib import metadata

    found: list[tuple[type[T], str]] = []
    pkg = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = _import_feature(f"{package}.{info.name}", errors)
        if module is not None:
            found.extend((cls, "builtin") for cls in _defined_in(module, base))
    for entry in metadata.entry_points(group=group) if plugins else ():
        try:
            obj: object = entry.load()
        except Exception as exc:
            errors.append(
                said(
                    "plugin {plugin} ({value}): {kind}: {error}",
                    plugin=entry.name,
                    value=entry.value,
                    kind=type(exc).__name__,
                    error=str(exc),
                )
            )
            continue
        origin = f"plugin {entry.dist.name if entry.dist else entry.value}"
        classes = _defined_in(obj, base) if inspect.ismodule(obj) else [obj]
        for cls in classes:
            if inspect.isclass(cls) and issubclass(cls, base):
                found.append((cls, origin))
            else:
                errors.append(said("plugin {plugin}: {cls} is not a {base} subclass", plugin=entry.name, cls=repr(cls), base=base.__name__))
    return found


def _option_problems(cls: type[Check], flag_owner: dict[str, str], field_owner: dict[str, str], type_owner: dict[type, str]) -> list[str]:
    """What is wrong with a check's options type: not an Options dataclass, a field without a flag,
    a flag, field name or type another check already declares."""
    kind = cls.options
    if kind is None:
        return []
    if not (isinstance(kind, type) and issubclass(kind, Options) and dataclasses.is_dataclass(kind)):
        return [said("its options {kind} are not an Options dataclass", kind=repr(kind))]
    problems: list[str] = []
    if kind in type_owner:
        problems.append(said("its options {kind} already belong to {owner}", kind=kind.__name__, owner=repr(type_owner[kind])))
    described = {name for name, _flag, _default in kind.flags()}
    bare = [f.name for f in dataclasses.fields(kind) if f.name not in described]
    problems += [said("option field {field} has no flag (make it with option())", field=name) for name in bare]
    for name, flag, _default in kind.flags():
        if flag.flag in flag_owner:
            problems.append(said("option {flag} already belongs to {flag_owner}", flag=flag.flag, flag_owner=repr(flag_owner[flag.flag])))
        elif name in field_owner:
            problems.append(said("option field {field} already belongs to {owner}", field=name, owner=repr(field_owner[name])))
    return problems


def _reference_problems(cls: type[Check], declared: dict[type, str]) -> list[str]:
    """Every input and option a check names in its needs (Needs.inputs, Reads.unless_option and
    when_input) must exist: a misspelling is a load error, never a silent "not given"."""
    named: list[str | OptionRef] = list(cls.needs.inputs)
    for reads in cls.needs.reads:
        named += [ref for ref in (reads.unless_option, reads.when_input) if ref is not None]
    problems: list[str] = []
    for ref in named:
        if isinstance(ref, OptionRef):
            if ref.kind not in declared:
                problems.append(said("it names the option {ref}, whose type no check declares", ref=str(ref)))
            elif ref.name not in ref.kind.names():
                problems.append(said("it names the option {ref}, which {kind} does not have", ref=str(ref), kind=ref.kind.__name__))
        elif ref not in INPUTS:
            problems.append(said("it needs the input {name}, which is none of {inputs}", name=repr(ref), inputs=", ".join(sorted(INPUTS))))
    return problems


def _add_checks(registry: Registry, found: list[tuple[type[Check], str]]) -> None:
    code_owner: dict[str, str] = {}
    flag_owner: dict[str, str] = {}
    field_owner: dict[str, str] = {}
    type_owner: dict[type, str] = {}
    for cls, origin in found:
        name = cls.name
        if name in registry.checks:
            registry.errors.append(
                said(
                    "{origin}: check name {name} already taken by {origins}",
                    origin=origin,
                    name=repr(name),
                    origins=registry.origins["check:" + name],
                )
            )
            continue
        clashes: list[str] = [
            said("code {code} already belongs to {code_owner}", code=c.code, code_owner=repr(code_owner[c.code]))
            for c in cls.codes
            if c.code in code_owner
        ]
        clashes += _option_problems(cls, flag_owner, field_owner, type_owner)
        clashes += _code_problems(cls)
        if cls.facts_type is not None and cls.facts_type in registry.publishers:
            clashes.append(
                said(
                    "its facts {name} are already published by {publishers}",
                    name=cls.facts_type.__name__,
                    publishers=repr(registry.publishers[cls.facts_type]),
                )
            )
        if clashes:
            registry.errors.append(
                said("check {name} ({origin}) not loaded: {clashes}", name=repr(name), origin=origin, clashes=joined("; ", clashes))
            )
            continue
        registry.checks[name] = cls
        registry.origins["check:" + name] = origin
        code_owner.update({c.code: name for c in cls.codes})
        if cls.options is not None:
            type_owner[cls.options] = name
            for field_name, flag, _default in cls.options.flags():
                flag_owner[flag.flag] = name
                field_owner[field_name] = name
        if cls.facts_type is not None:
            registry.publishers[cls.facts_type] = name
    for name, cls in list(registry.checks.items()):
        references = _reference_problems(cls, type_owner)
        if references:
            registry.errors.append(said("check {name} not loaded: {problems}", name=repr(name), problems=joined("; ", references)))
            del registry.checks[name]
            continue
        unpublished = [r.facts.__name__ for r in cls.needs.reads if r.facts not in registry.publishers]
        if unpublished:
            registry.errors.append(
                said(
                    "check {name} not loaded: it reads {unpublished}, which no check publishes",
                    name=repr(name),
                    unpublished=", ".join(unpublished),
                )
            )
            del registry.checks[name]


def _code_problems(cls: type[Check]) -> list[str]:
    problems: list[str] = []
    for spec in cls.codes:
        if not isinstance(spec, Code):
            problems.append(said("{spec} is not a Code", spec=repr(spec)))
        elif isinstance(spec, FixableCode):
            if not spec.fix_safety.strip():
                problems.append(said("{code} offers a fix but declares no fix_safety", code=spec.code))
            if not (isinstance(spec.params, type) and issubclass(spec.params, FixParams)):
                problems.append(said("{code} declares fix params {params}, not a FixParams type", code=spec.code, params=repr(spec.params)))
    return problems


def _add_fixers(registry: Registry, found: list[tuple[type[Fixer], str]]) -> None:
    codes = registry.codes()
    for cls, origin in found:
        name = cls.name
        problems: list[str] = []
        if name in registry.fixers:
            problems.append(
                said("fixer name {name} already taken by {origins}", name=repr(name), origins=registry.origins["fixer:" + name])
            )
        offered: set[type[FixParams]] = set()
        for spec, applicability in cls.claims.items():
            code = getattr(spec, "code", spec)
            if not isinstance(spec, Code) or code not in codes:
                problems.append(said("claims {code}, which no check declares", code=code))
            elif codes[code][0] != spec or not isinstance(spec, FixableCode) or not spec.declares_fix:
                problems.append(said("claims {code}, which declares no fix (no fix_safety)", code=code))
            elif code in registry.claims:
                problems.append(said("claims {code}, already claimed by fixer {fixer}", code=code, fixer=repr(registry.claims[code].fixer)))
            elif spec.params not in cls.takes:
                problems.append(said("claims {code}, whose fix takes {name}, which it does not take", code=code, name=spec.params.__name__))
            else:
                offered.add(spec.params)
            if not isinstance(applicability, Applicability):
                problems.append(
                    said(
                        "gives {code} the applicability {applicability}, not an Applicability", code=code, applicability=repr(applicability)
                    )
                )
        unused = [kind.__name__ for kind in cls.takes if kind not in offered]
        if unused and not problems:
            problems.append(said("takes {unused}, which no code it claims offers", unused=", ".join(unused)))
        if problems:
            registry.errors.append(
                said("fixer {name} ({origin}) not loaded: {problems}", name=repr(name), origin=origin, problems=joined("; ", problems))
            )
            continue
        registry.fixers[name] = cls
        registry.origins["fixer:" + name] = origin
        registry.claims.update({spec.code: Claim(name, applicability) for spec, applicability in cls.claims.items()})
    for code, (declared, check) in codes.items():
        if declared.declares_fix and code not in registry.claims:
            registry.errors.append(said("check {check}: {code} declares a fix, but no fixer claims it", check=repr(check.name), code=code))


def build(plugins: bool = True) -> Registry:
    """The registry with every check and fixer imported and every contract verified (plugins=False:
    the built-in ones only, as the index holds them)."""
    registry = Registry()
    _add_checks(registry, _discover(CHECKS_PACKAGE, CHECK_GROUP, Check, registry.errors, plugins))
    _add_fixers(registry, _discover(FIXERS_PACKAGE, FIXER_GROUP, Fixer, registry.errors, plugins))
    registry.errors.extend(command_modules().errors)
    return registry


_loaded: Registry | None = None


def load() -> Registry:
    """The registry of this process, built once: from the index (engine.index), its checks and fixers
    imported as they are looked up, or built the full way when the index cannot stand for it."""
    global _loaded
    if _loaded is None:
        from .index import indexed

        _loaded = indexed() or build()
    return _loaded
