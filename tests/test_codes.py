"""Codes are constants, every one is explained with an example, and the suite makes every one of them
happen: a code no test emits is a code nobody has seen work."""

from __future__ import annotations

import functools
import os
import re
import warnings

import pytest

from .conftest import REPO

LITERAL = re.compile(r"""["']([A-Z]{2,5}\d{3})["']""")


def _declared() -> dict[str, str]:
    """code → the module that declares it (its codes.py), retired codes included."""
    from decode_doctor.engine.registry import load

    registry = load()
    found = {}
    for code, (_, cls) in registry.codes().items():
        found[code] = cls.__module__
    for cls in registry.checks.values():
        for code in cls.retired:
            found.setdefault(code, cls.__module__)
    return found


@functools.cache
def _declaring_file(code: str) -> str:
    for path in sorted((REPO / "checks").glob("*/codes.py")):
        if re.search(rf"""["']{code}["']""", path.read_text()):
            return str(path.relative_to(REPO))
    return "?"


def test_no_code_is_written_as_a_string_outside_the_module_that_declares_it():
    declared = _declared()
    offences = []
    for root in ("doctor", "checks", "fixers"):
        for path in sorted((REPO / root).rglob("*.py")):
            relative = str(path.relative_to(REPO))
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                for code in LITERAL.findall(line):
                    if code in declared and _declaring_file(code) != relative:
                        offences.append(f"{relative}:{number}: {code}")
    assert offences == []


def test_every_code_has_an_example_and_explain_shows_every_section():
    from decode_doctor.engine.registry import load

    from .support.harness import cli

    missing = [code for code, (spec, _) in load().codes().items() if not spec.example.strip()]
    assert missing == []
    text = cli("explain", "IMG014").stdout
    for section in ("What it means", "Why it matters for LLM decode", "Example", "How to fix it by hand", "Automatic fix"):
        assert f"\n{section}\n" in text


def _with_why(codes: list[str], unprovable: dict[str, str]) -> str:
    return ", ".join(f"{code} (unprovable here: {unprovable[code]})" if code in unprovable else code for code in codes)


def test_every_declared_code_is_emitted_by_some_test(request):
    """Runs last (conftest): only a whole-suite run has given every check its chance. A part of the suite
    proves the codes DD_CODE_GATE_CODES names, and no others (.ci/as-user: the permission tests as
    another user). A code whose only test could not run here (emitted.unprovable) is said, not failed."""
    from decode_doctor.engine.registry import load

    from .support.emitted import emitted, unprovable_here

    config = request.config
    whole = (
        not config.option.keyword and not config.option.markexpr and [str(a) for a in config.args] in ([], ["tests"], [str(REPO / "tests")])
    )
    named = sorted(set(os.environ.get("DD_CODE_GATE_CODES", "").replace(",", " ").split()))
    if not (whole or named) or request.session.testsfailed:
        if os.environ.get("DD_REQUIRE_CODE_GATE"):  # CI: the gate must run, never skip
            pytest.fail("the code gate needs a whole, green run of the suite, or a green part naming its codes (DD_REQUIRE_CODE_GATE)")
        pytest.skip("only a whole, green run of the suite says which codes no test emits (a part names its codes in DD_CODE_GATE_CODES)")
    declared = set(load().codes())
    assert set(named) <= declared, f"DD_CODE_GATE_CODES names undeclared codes: {', '.join(sorted(set(named) - declared))}"
    unprovable, seen = unprovable_here(), emitted()
    if named:  # the run exists to prove these: one it could not is a failure of that run
        never = [code for code in named if code not in seen]
        assert never == [], f"named in DD_CODE_GATE_CODES, but emitted by no test of this run: {_with_why(never, unprovable)}"
        return
    noted = sorted((set(unprovable) & declared) - seen)
    if noted:
        warnings.warn("unprovable here: " + ", ".join(f"{code} ({unprovable[code]})" for code in noted), stacklevel=1)
    never = sorted(declared - seen - set(unprovable))
    assert never == [], f"declared, but emitted by no test: {', '.join(never)}"
