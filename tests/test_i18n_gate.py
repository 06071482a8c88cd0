"""Every text a person reads passes through the catalog (issue 38): an AST check of the places text
leaves the program for a person — raised exceptions, click's usage errors and parameter failures,
echo/say, progress lines, findings and not-judged reasons — fails on an English sentence written
there unmarked (a literal, an f-string, a concatenation or .format()), and on an exception's text
passed on as str(exc) (which drops the Said it may carry: localized(reason(exc)) keeps it).

A line that is rightly English carries "# untranslated: why" (a programmer's error, text said before
any catalog is loaded); the test lists each so the reasons stay in sight."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("doctor", "checks", "fixers")
# two Latin words with a space or punctuation between: prose, not an identifier such as "vm.swappiness"
PROSE = re.compile(r"[A-Za-z]{2,}[ ,;:!?]+[A-Za-z]{2,}")
# where text leaves for a person: the call's name and the argument positions that are read
SINKS: dict[str, slice] = {
    "echo": slice(0, 1),
    "secho": slice(0, 1),
    "say": slice(0, 1),
    "fail": slice(0, 1),
    "UsageError": slice(0, 1),
    "BadParameter": slice(0, 1),
    "ClickException": slice(0, 1),
    "progress": slice(0, None),
    "report": slice(0, 1),  # a long step's progress line (hashing, measuring)
    "SkipCheck": slice(0, 1),
    "finding": slice(1, 2),
    "not_judged": slice(0, None),
}
READ_KEYWORDS = ("message", "why", "what", "reason", "error", "note")
EXCEPTION_NAMES = ("exc", "error", "err", "e")
UNTRANSLATED = "# untranslated:"


@dataclass(frozen=True)
class Unmarked:
    path: str
    line: int
    where: str
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.where}: {self.text!r}"


def _prose(node: ast.AST) -> str:
    """The English a literal argument writes (empty when it writes none)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if PROSE.search(node.value) else ""
    if isinstance(node, ast.JoinedStr):
        literal = "".join(str(part.value) for part in node.values if isinstance(part, ast.Constant))
        return literal if PROSE.search(literal) else ""
    if isinstance(node, ast.BinOp):
        return _prose(node.left) or _prose(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return _prose(node.func.value)
    return ""


def _system_words(node: ast.AST) -> bool:
    """exc.strerror: the system's English, where os_reason(exc) gives the catalog's words."""
    return isinstance(node, ast.Attribute) and node.attr == "strerror"


def _drops_said(node: ast.AST) -> bool:
    """str(exc) or an f-string with {exc} as the text itself: an exception's words as English whatever
    it carried (as a value inside said() or _() it is evidence, the parser's own words, and stays)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str":
        return bool(node.args) and isinstance(node.args[0], ast.Name) and node.args[0].id in EXCEPTION_NAMES
    if _system_words(node):
        return True
    if isinstance(node, ast.JoinedStr):
        return any(
            isinstance(part, ast.FormattedValue)
            and ((isinstance(part.value, ast.Name) and part.value.id in EXCEPTION_NAMES) or _system_words(part.value))
            for part in node.values
        )
    if isinstance(node, ast.BinOp):
        return _drops_said(node.left) or _drops_said(node.right)
    return False


def _name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _read_arguments(call: ast.Call, positions: slice) -> list[ast.expr]:
    return [*call.args[positions], *(k.value for k in call.keywords if k.arg in READ_KEYWORDS)]


def _sites(tree: ast.AST) -> list[tuple[ast.AST, str, list[ast.expr]]]:
    sites: list[tuple[ast.AST, str, list[ast.expr]]] = []
    raised = {id(node.exc) for node in ast.walk(tree) if isinstance(node, ast.Raise)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            sites.append((node, "raise " + _name(node.exc.func), node.exc.args[:1]))
        elif isinstance(node, ast.Call) and _name(node.func) in SINKS and id(node) not in raised:
            sites.append((node, _name(node.func) + "()", _read_arguments(node, SINKS[_name(node.func)])))
    return sites


def unmarked(path: Path) -> tuple[list[Unmarked], list[Unmarked]]:
    """(unmarked English, lines said untranslated with their reason) in one module."""
    source = path.read_text()
    lines = source.splitlines()
    found: list[Unmarked] = []
    excused: list[Unmarked] = []
    relative = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name
    for node, where, arguments in _sites(ast.parse(source)):
        for argument in arguments:
            text = _prose(argument) or ("str(exc)" if _drops_said(argument) else "")
            if not text:
                continue
            span = lines[node.lineno - 1 : (node.end_lineno or node.lineno)]
            reason = next((line.split(UNTRANSLATED, 1)[1].strip() for line in span if UNTRANSLATED in line), None)
            (excused if reason else found).append(Unmarked(relative, node.lineno, where, reason or text))
    return found, excused


def _modules() -> list[Path]:
    return sorted(p for top in SOURCES for p in (REPO / top).rglob("*.py") if "__pycache__" not in p.parts)


def test_no_user_facing_english_leaves_the_program_unmarked():
    found = [site for path in _modules() for site in unmarked(path)[0]]
    assert not found, "mark these with _(), said() or ngettext() (or '# untranslated: why'):\n" + "\n".join(map(str, found))


def test_every_untranslated_line_gives_its_reason_and_they_stay_few():
    excused = [site for path in _modules() for site in unmarked(path)[1]]
    assert all(len(site.text) >= 10 for site in excused), excused
    assert len(excused) <= 15, "\n".join(map(str, excused))


def test_the_gate_sees_what_it_is_for(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import click\n"
        "def f(exc, name):\n"
        "    raise ValueError(f'{name} is not a model')\n"
        "def g(exc):\n"
        "    raise click.UsageError(str(exc))\n"
        "def h(name):\n"
        "    click.echo('nothing to undo here')\n"
        "def i(name):\n"
        "    raise ValueError(said('{name} is not a model', name=name))\n"
        "def j():\n"
        "    raise KeyError('x has no y')  # untranslated: a programmer's error\n"
        "def k(ctx):\n"
        "    ctx.not_judged('vm.swappiness', _('{path} is gone', path=1))\n"
        "def m(ctx, exc):\n"
        "    ctx.not_judged('x', f'{exc.filename}: {exc.strerror}')\n"
    )
    found, excused = unmarked(sample)
    assert [site.line for site in found] == [3, 5, 7, 15]
    assert [(site.line, site.text) for site in excused] == [(11, "a programmer's error")]
