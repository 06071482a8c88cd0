"""The contracts the registry holds checks and fixers to when they load."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import pytest

from decode_doctor.engine import (
    Applicability,
    Check,
    Code,
    Facts,
    FixableCode,
    Fixer,
    FixParams,
    FixRef,
    Needs,
    OptionRef,
    Options,
    Reads,
    Severity,
    option,
)  # fmt: skip
from decode_doctor.engine.registry import Registry, _add_checks, _add_fixers

from .conftest import PLUGINS, REPO, run_dd


@dataclass(frozen=True)
class Tune(FixParams):
    value: int


@dataclass(frozen=True)
class Other(FixParams):
    path: str


def code(name: str) -> Code:
    return Code(name, "t", Severity.WARNING, "w", "y", "f")


def fixable(name: str, params: type[FixParams] = Tune, safety: str = "Safe: test.") -> FixableCode[Any]:
    return FixableCode(name, "t", Severity.WARNING, "w", "y", "f", params=params, fix_safety=safety)


ALP001 = fixable("ALP001")
ALP002 = code("ALP002")


@dataclass(frozen=True)
class AlphaOptions(Options):
    alpha_level: str | None = option("--alpha-level", "h")


@dataclass(frozen=True)
class BetaOptions(Options):
    level: str | None = option("--alpha-level", "the same flag as alpha's")


class Alpha(Check):
    name = "alpha"
    codes = (ALP001, ALP002)
    options = AlphaOptions


class Beta(Check):
    name = "beta"
    codes = (fixable("BET001"),)
    options = BetaOptions


def make(*fixers: type[Fixer], checks: tuple[type[Check], ...] = (Alpha,)) -> Registry:
    registry = Registry()
    _add_checks(registry, [(cls, "test") for cls in checks])
    _add_fixers(registry, [(cls, "test") for cls in fixers])
    return registry


def fixer(name: str, claims: dict[Any, Applicability], takes: tuple[type[FixParams], ...] = (Tune,)) -> type[Fixer]:
    return type(name.title(), (Fixer,), {"name": name, "claims": claims, "takes": takes})


def test_every_declared_fix_is_claimed_by_exactly_one_fixer():
    registry = make(fixer("alpha", {ALP001: Applicability.SAFE}))
    assert registry.errors == [] and registry.fixable("ALP001") is Applicability.SAFE
    unclaimed = make()
    assert unclaimed.errors == ["check 'alpha': ALP001 declares a fix, but no fixer claims it"]
    twice = make(fixer("one", {ALP001: Applicability.SAFE}), fixer("two", {ALP001: Applicability.UNSAFE}))
    assert "fixer 'two' (test) not loaded: claims ALP001, already claimed by fixer 'one'" in twice.errors
    assert twice.fixable("ALP001") is Applicability.SAFE


def test_a_fixer_claiming_an_undeclared_or_fixless_code_does_not_load():
    registry = make(fixer("alpha", {fixable("ALP01"): Applicability.SAFE, ALP002: Applicability.SAFE}))
    (problem, unclaimed) = registry.errors
    assert "claims ALP01, which no check declares" in problem and "claims ALP002, which declares no fix" in problem
    assert "alpha" not in registry.fixers and unclaimed.endswith("ALP001 declares a fix, but no fixer claims it")


def test_a_fixer_must_take_the_params_type_its_codes_declare():
    wrong = make(fixer("alpha", {ALP001: Applicability.SAFE}, takes=(Other,)))
    assert "fixer 'alpha' (test) not loaded: claims ALP001, whose fix takes Tune, which it does not take" in wrong.errors[0]
    idle = make(fixer("alpha", {ALP001: Applicability.SAFE}, takes=(Tune, Other)))
    assert idle.errors == ["fixer 'alpha' (test) not loaded: takes Other, which no code it claims offers", idle.errors[1]]


def test_a_code_that_offers_a_fix_without_saying_how_safe_is_refused_when_the_registry_loads():
    class Careless(Check):
        name = "careless"
        codes = (fixable("CAR001", safety=""),)

    registry = make(checks=(Careless,))
    assert "careless" not in registry.checks
    assert registry.errors == ["check 'careless' (test) not loaded: CAR001 offers a fix but declares no fix_safety"]


def test_the_fix_is_bound_to_the_claiming_fixer_and_dropped_without_one():
    registry = make(fixer("alpha", {ALP001: Applicability.DISPLAY_ONLY}))
    finding = Alpha().finding(ALP001, "m", fix=FixRef("do it", Tune(1)))
    bound = registry.resolve(finding)
    assert bound.fix is not None
    assert (bound.fix.fixer, bound.fix.applicability, bound.fix.params) == ("alpha", Applicability.DISPLAY_ONLY, Tune(1))
    assert bound.to_dict()["fix"]["params"] == {"value": 1}
    assert make().resolve(finding).fix is None


def test_a_fix_of_the_wrong_kind_is_a_type_error_the_type_checker_reports():
    """mypy rejects both calls (tests/test_typecheck.py runs it over the package); at run time they raise."""
    with pytest.raises(TypeError, match="ALP002 takes no fix"):
        Alpha().finding(ALP002, "m", fix=FixRef("nope", Tune(1)))  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="ALP001 takes no fix of Other"):
        Alpha().finding(ALP001, "m", fix=FixRef("nope", Other("x")))  # type: ignore[arg-type]


@dataclass(frozen=True)
class AlphaFacts(Facts):
    level: int


class Publisher(Check):
    name = "publisher"
    facts_type = AlphaFacts


class Reader(Check):
    name = "reader"
    needs = Needs(reads=(Reads(AlphaFacts),))


def test_facts_are_read_by_type_from_the_one_check_that_publishes_them():
    registry = make(checks=(Publisher, Reader))
    assert registry.errors == [] and registry.publisher(AlphaFacts) is Publisher

    class Second(Check):
        name = "second"
        facts_type = AlphaFacts

    clash = make(checks=(Publisher, Second))
    assert clash.errors == ["check 'second' (test) not loaded: its facts AlphaFacts are already published by 'publisher'"]
    orphan = make(checks=(Reader,))
    assert orphan.errors == ["check 'reader' not loaded: it reads AlphaFacts, which no check publishes"]
    assert "reader" not in orphan.checks


def test_option_flags_are_one_namespace():
    registry = make(fixer("alpha", {ALP001: Applicability.SAFE}), checks=(Alpha, Beta))
    assert "beta" not in registry.checks
    assert "check 'beta' (test) not loaded: option --alpha-level already belongs to 'alpha'" in registry.errors


@dataclass(frozen=True)
class RootedOptions(Options):
    rooted: str | None = option("--root", "takes the core flag")


def test_an_option_that_takes_a_core_flag_is_left_out(monkeypatch):
    """The command's own flags are read from the command itself (no hand-kept list of them)."""
    import click

    from decode_doctor.cli import common
    from decode_doctor.engine import registry as module

    class Rooted(Check):
        name = "rooted"
        options = RootedOptions

    loaded = make(fixer("alpha", {ALP001: Applicability.SAFE}), checks=(Alpha, Rooted))
    monkeypatch.setattr(module, "_loaded", loaded)
    command = common.RunCommand("probe", params=[click.Option(["--root"])], callback=lambda **kw: None)
    assert "check 'rooted': option --root is one of decode-doctor's own; left out" in loaded.errors
    assert "alpha_level" in command.check_fields and "rooted" not in command.check_fields
    assert [p.opts for p in command.params] == [["--root"], ["--alpha-level"]]


@dataclass(frozen=True)
class WhenOptions(Options):
    model_dir: str | None = option("--model-dir", "a directory")


class Declares(Check):
    name = "declares"
    options = WhenOptions


def test_a_misspelled_option_or_input_is_a_load_error_never_a_silent_not_given():
    """Every option a check names (Reads.unless_option, when_input, Needs.inputs) exists when the
    registry loads, or the check does not load."""

    class Misspelled(Check):
        name = "misspelled"
        needs = Needs(reads=(Reads(AlphaFacts, unless_option=OptionRef(WhenOptions, "model_dri")),))

    class UnknownInput(Check):
        name = "unknown-input"
        needs = Needs(inputs=("modles",))

    class Undeclared(Check):
        name = "undeclared"
        needs = Needs(inputs=(OptionRef(RootedOptions, "rooted"),))

    class Fine(Check):
        name = "fine"
        needs = Needs(inputs=("models", OptionRef(WhenOptions, "model_dir")), reads=(Reads(AlphaFacts, when_input="images"),))

    registry = make(checks=(Alpha, Declares, Publisher, Misspelled, UnknownInput, Undeclared, Fine))
    assert "fine" in registry.checks
    assert {"misspelled", "unknown-input", "undeclared"}.isdisjoint(registry.checks)
    errors = " | ".join(registry.errors)
    assert "names the option WhenOptions.model_dri, which WhenOptions does not have" in errors
    assert "needs the input 'modles', which is none of images, models" in errors
    assert "names the option RootedOptions.rooted, whose type no check declares" in errors


def test_options_are_read_by_type_with_their_defaults():
    from decode_doctor.engine import Context, OptionValues

    ctx = Context(options=OptionValues((WhenOptions(model_dir="/m"),)))
    assert ctx.option(WhenOptions).model_dir == "/m" and ctx.option(AlphaOptions) == AlphaOptions()
    assert WhenOptions.from_values({"model_dir": None, "other": 1}) == WhenOptions()
    assert OptionValues((WhenOptions(model_dir="/m"),)).value(OptionRef(WhenOptions, "model_dir")) == "/m"


class BadOptions(Options):  # not a dataclass
    pass


@dataclass(frozen=True)
class BareOptions(Options):
    bare: int = 0  # no flag


def test_an_options_type_that_is_no_options_dataclass_does_not_load():
    class Bad(Check):
        name = "bad"
        options = BadOptions

    class Bare(Check):
        name = "bare"
        options = BareOptions

    registry = make(checks=(Bad, Bare))
    assert not registry.checks
    assert any("are not an Options dataclass" in e for e in registry.errors)
    assert any("option field bare has no flag" in e for e in registry.errors)


def test_no_check_reads_options_by_name():
    """The joint is the type: ctx.option(Type).field, never ctx.options["name"]."""
    import re

    offences = []
    for path in [*(REPO / "checks").rglob("*.py"), *(REPO / "fixers").rglob("*.py")]:
        text = path.read_text()
        offences += [f"{path.relative_to(REPO)}" for _ in re.finditer(r"ctx\.options\s*[\[.]", text)]
    assert offences == []


def test_facts_hold_values_never_callables():
    """A fact crosses processes and lands in JSON: no field of a published facts type is a callable."""
    import dataclasses
    import typing
    from collections.abc import Callable

    from decode_doctor.engine.registry import load

    def callable_hint(hint: object) -> bool:
        origin = typing.get_origin(hint)
        return hint is Callable or origin is Callable or any(callable_hint(arg) for arg in typing.get_args(hint))

    offences = []
    for kind in load().publishers:
        hints = typing.get_type_hints(kind)
        seen = {kind}
        pending = [kind]
        while pending:
            current = pending.pop()
            for item in dataclasses.fields(current):
                hint = typing.get_type_hints(current).get(item.name)
                if callable_hint(hint):
                    offences.append(f"{current.__name__}.{item.name}")
                for arg in (hint, *typing.get_args(hint)):
                    if dataclasses.is_dataclass(arg) and isinstance(arg, type) and arg not in seen:
                        seen.add(arg)
                        pending.append(arg)
        del hints
    assert offences == []


def test_builtin_contracts_hold():
    from decode_doctor.engine.registry import load

    registry = load()
    assert registry.errors == []
    declared = {c for c, (spec, _) in registry.codes().items() if spec.declares_fix}
    assert declared == set(registry.claims)


def test_a_broken_fixer_plugin_is_reported_like_a_broken_check_plugin(tmp_path):
    """The fixers entry-point group is loaded, and held to the contract, like the checks group."""
    dist = tmp_path / "site" / "dd_bad-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dd-bad\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[decode_doctor.fixers]\nmissing = dd_no_such_module\nmisspelled = dd_test_fixers\n")
    (tmp_path / "site" / "dd_test_fixers.py").write_text(
        "from decode_doctor.engine import Applicability, Fixer\n"
        "class Misspelled(Fixer):\n    name = 'misspelled'\n    claims = {'SWAP01': Applicability.SAFE}\n"
    )
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(PLUGINS)])}
    errors = json.loads(run_dd("list", "--format", "json", env=env).stdout)["load_errors"]
    assert any(e.startswith("plugin missing (dd_no_such_module): ModuleNotFoundError") for e in errors)
    assert any("fixer 'misspelled' (plugin dd-bad) not loaded: claims SWAP01, which no check declares" in e for e in errors)
