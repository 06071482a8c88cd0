"""Commands take their options as typed dataclasses, as checks do (engine.options): no `**params: Any`
crosses a module boundary, no option is read by its name as a string, and every flag of the command
line is declared once — one help text, one range — and shared where two commands take it."""

from __future__ import annotations

import ast
import dataclasses
from collections import defaultdict
from pathlib import Path
from typing import Any

import click
import pytest

from .conftest import REPO

SOURCES = (REPO / "doctor", REPO / "checks")
OPTION_LAYER = {REPO / "doctor" / "engine" / "options.py"}  # where a command line's values are read by name

# Flags whose meaning differs from one command to another, each declared once per meaning. Any other
# flag two commands take must be one declaration (same_as, or one options dataclass).
MEANINGS = {
    "--format": "each command offers the formats of its use (reports.formats.Use)",
    "--output": "a report file (check, analyze, bench, merge) or a bundle's directory (report)",
    "-o": "--output's short flag",
    "--timeout": "seconds per check (check), per analysis (analyze), per plan (estimate), per request (bench)",
    "--model": "model files to check (check, repeatable), the model to plan (estimate), the served model's name (bench)",
    "--fail-on": "the run's default comes from its config file (check); merge judges hosts; analyze and bench share one",
    "--state-dir": "what is kept there: fix journals (check, undo), host placeholders (report), bandwidth (estimate)",
    "--quiet": "no line on stderr about: the report (check), each run (agent), the matrix (merge)",
    "-q": "--quiet's short flag",
    "--verbose": "what more is shown: the host's facts (check), every fact and its check (bench)",
    "-v": "--verbose's short flag",
    "--debug": "check's tracebacks include crashed checks; the others share one declaration",
    "--device": "the device to plan for (estimate) or the one the server decodes on (bench)",
    "--endpoint": "a server whose /metrics to diagnose (check, optional) or to measure (bench, required)",
    "--concurrency": "bench sweeps a list of levels (1,2,4,8); check and estimate share the decode budget's one",
}
SHARED = ("--threads", "--bandwidth", "--context", "--kv-dtype", "--target-tps", "--api-key-env", "--incomplete")


# --- no **params, no option read by name -------------------------------------------------------------


def _python_files() -> list[Path]:
    return sorted(p for root in SOURCES for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _is_click_command(function: ast.FunctionDef) -> bool:
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and target.attr in ("command", "group"):
            return True
    return False


def _is_params(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "params"


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef, callbacks: list[ast.FunctionDef]) -> list[str]:
    """A **params that is no click callback's, and a params parameter typed Any (passed on untyped)."""
    found = []
    kwarg = node.args.kwarg
    if kwarg is not None and kwarg.arg == "params":
        annotation = ast.unparse(kwarg.annotation) if kwarg.annotation is not None else ""
        if isinstance(node, ast.FunctionDef) and _is_click_command(node):
            callbacks.append(node)
        else:
            found.append(f"{node.name}(**params: {annotation}) is no click callback")
    for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
        annotation = ast.unparse(arg.annotation) if arg.annotation is not None else ""
        if arg.arg == "params" and "Any" in annotation:
            found.append(f"{node.name}(params: {annotation})")
    return found


def _read_by_name(node: ast.AST) -> str | None:
    """params["x"] or params.get("x")."""
    if isinstance(node, ast.Subscript) and _is_params(node.value) and isinstance(node.slice, ast.Constant):
        return f"params[{node.slice.value!r}]"
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and _is_params(node.func.value)
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        return f"params.get({node.args[0].value!r})"
    return None


def _passed_on(callback: ast.FunctionDef) -> list[ast.AST]:
    """The uses of a callback's params other than turning them into typed options at once."""
    parents = {child: parent for parent in ast.walk(callback) for child in ast.iter_child_nodes(parent)}
    found = []
    for node in ast.walk(callback):
        if not _is_params(node):
            continue
        call = parents.get(node)
        name = ""
        if isinstance(call, ast.Call) and node in call.args:
            name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        if name not in ("from_values", "check_options"):
            found.append(node)
    return found


def _offences(path: Path, base: Path = REPO) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    where = path.relative_to(base)
    found = []
    callbacks: list[ast.FunctionDef] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and path not in OPTION_LAYER:
            found += [f"{where}:{node.lineno}: {offence}" for offence in _signature(node, callbacks)]
        read = _read_by_name(node) if path not in OPTION_LAYER else None
        if read is not None:
            found.append(f"{where}:{getattr(node, 'lineno', 0)}: {read}")
    for callback in callbacks:  # a callback's **params go straight into typed options, and nowhere else
        for node in _passed_on(callback):
            found.append(f"{where}:{getattr(node, 'lineno', 0)}: {callback.name} passes its params on as they are, not as typed options")
    return found


def test_no_command_reads_an_option_by_its_name():
    offences = [offence for path in _python_files() for offence in _offences(path)]
    assert offences == []


def test_the_scan_finds_what_it_forbids(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import click\n"
        "from typing import Any\n"
        "def run(**params: Any) -> None:\n"
        "    print(params['fmt'], params.get('debug'))\n"
        "def render(params: dict[str, Any]) -> None: ...\n"
        "@click.command()\n"
        "def command(**params: Any) -> None:\n"
        "    run(**params)\n"
    )
    offences = [line.split(": ", 1)[1] for line in _offences(sample, tmp_path)]
    assert sorted(offences) == sorted(
        [
            "run(**params: Any) is no click callback",
            "params['fmt']",
            "params.get('debug')",
            "render(params: dict[str, Any])",
            "command passes its params on as they are, not as typed options",
        ]
    )


# --- one declaration per flag ------------------------------------------------------------------------


def _commands() -> dict[str, click.Command]:
    from decode_doctor.cli.main import cli

    context = click.Context(cli)
    found = {}
    for name in cli.list_commands(context):
        command = cli.get_command(context, name)
        assert command is not None, name
        found[name] = command
    return found


def _key(flag: Any, default: object) -> tuple[object, ...]:
    """What makes two declarations the same option: help, range, how the value is read, default."""
    kind = flag.kind.to_info_dict() if isinstance(flag.kind, click.ParamType) else None
    parse = getattr(flag.parse, "__name__", None) if flag.parse is not None else None
    return (flag.help, flag.multiple, flag.is_flag, tuple(flag.choices), flag.metavar, parse, repr(kind), flag.required, default)


def _declarations() -> dict[str, dict[tuple[object, ...], set[str]]]:
    """flag → its declarations (by what they say) → the commands that take each."""
    from decode_doctor.engine.options import Flag

    found: dict[str, dict[tuple[object, ...], set[str]]] = defaultdict(lambda: defaultdict(set))
    undeclared = []
    for name, command in _commands().items():
        for param in command.params:
            if not isinstance(param, click.Option) or set(param.opts) & {"--help", "--lang"}:
                continue
            declared = getattr(param, "declaration", None)
            if not isinstance(declared, Flag):
                undeclared.append(f"{name} {'/'.join(param.opts)}")
                continue
            default = param.default if not isinstance(param.default, (list, tuple)) else tuple(param.default)
            for flag in param.opts:
                found[flag][_key(declared, default)].add(name)
    assert undeclared == [], "click options made by hand, not from an Options dataclass"
    return found


def test_every_flag_is_declared_once():
    """A flag two commands take is one declaration (one help text, one range), unless its meaning
    differs from command to command (MEANINGS, each with its reason)."""
    twice = []
    for flag, declarations in sorted(_declarations().items()):
        if len(declarations) > 1 and flag not in MEANINGS:
            sites = "; ".join(f"{sorted(commands)}: {key[0]!r}" for key, commands in declarations.items())
            twice.append(f"{flag} is declared {len(declarations)} times: {sites}")
    assert twice == []


def test_the_exceptions_are_still_needed():
    declarations = _declarations()
    assert sorted(flag for flag in MEANINGS if len(declarations.get(flag, {})) < 2) == []


@pytest.mark.parametrize("flag", SHARED)
def test_the_checks_flags_are_shared_with_the_commands(flag):
    declarations = _declarations()[flag]
    assert len(declarations) == 1
    (commands,) = declarations.values()
    assert len(commands) > 1


def test_check_estimate_and_bench_take_the_checks_own_declarations():
    from decode_doctor.checks.bandwidth.contract import BandwidthOptions
    from decode_doctor.checks.budget.contract import BudgetOptions
    from decode_doctor.checks.planning.commands import EstimateOptions
    from decode_doctor.checks.serving.commands import BenchOptions

    def flag(kind: Any, name: str) -> object:
        return next(described for field, described, _ in kind.flags() if field == name)

    for name in ("context", "concurrency", "kv_dtype", "target_tps", "bandwidth"):
        assert flag(EstimateOptions, name) is flag(BudgetOptions, name)
    assert flag(EstimateOptions, "threads") is flag(BandwidthOptions, "threads") is flag(BenchOptions, "threads")
    assert flag(BenchOptions, "bandwidth") is flag(BudgetOptions, "bandwidth")


def test_a_commands_options_are_parsed_into_its_dataclass():
    from decode_doctor.app.flags import click_options, same_as
    from decode_doctor.engine.options import Options, option

    @dataclasses.dataclass(frozen=True)
    class Mine(Options):
        count: int = option("--count", "How many.", kind=click.IntRange(1, 9), default=1, show_default=True)
        name: str | None = option("--name", "Who.", short="-n", metavar="NAME")
        tags: tuple[str, ...] = option("--tag", "Tags.", multiple=True, default=())

    seen: list[object] = []

    @click.command()
    @click_options(Mine)
    def command(**params: Any) -> None:
        seen.append(Mine.from_values(params))

    assert [p.opts for p in command.params] == [["--count"], ["-n", "--name"], ["--tag"]]
    assert command.main(["-n", "x", "--tag", "a", "--tag", "b"], standalone_mode=False) is None
    assert seen == [Mine(count=1, name="x", tags=("a", "b"))]
    with pytest.raises(click.BadParameter):
        command.main(["--count", "0"], standalone_mode=False)

    @dataclasses.dataclass(frozen=True)
    class Theirs(Options):
        count: int = same_as(Mine, "count")

    assert [flag for _, flag, _ in Theirs.flags()] == [next(flag for _, flag, _ in Mine.flags())]
    assert Theirs().count == 1
