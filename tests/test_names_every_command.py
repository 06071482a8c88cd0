"""Every command shows a name safely (issue 51): a directory, file or host name that holds ESC, BEL, an
OSC 8 hyperlink or a bidirectional override reaches the terminal as \\x1b, \\x07, \\u202e — in every
command that prints a name it was given, in English and in Chinese.

Two gates. Structurally, nothing in the program writes to a terminal except through the one writer
(app.output.echo/say and guard's one-line errors, which escape; the report renderer, whose redactor
escapes for a terminal) — an AST test over every module. At run time, each command is run on inputs
whose names are hostile and its two streams are read for a character a terminal would act on.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from .conftest import FIXTURES, REPO, run_dd
from .test_cli_contract import tiny_config
from .test_names_shown_safely import _raw

HOSTILE = "n\x1b[31mred\x07bel\x1b]8;;https:x.test\x1b\\link\u202eevil"
LANGUAGES = [(), ("--lang", "zh-CN")]
SWAP_HOST = FIXTURES / "hosts" / "swap60-rhel7"

# where the program may write to a stream itself: the writers that escape, progress lines that carry
# no name, and the probes and tools that speak JSON to their parent or to a developer
WRITERS = {
    "doctor/app/output.py",  # echo() and say(): terminal_safe
    "doctor/app/guard.py",  # the one-line errors: terminal_safe
    "doctor/cli/common.py",  # the progress line (check names only) and its own terminal_safe echo
    "checks/serving/bench.py",  # the progress line: levels and counts
    "doctor/models/llamatimer.py",  # a child process: JSON to its parent
    "checks/enginefailures/llamaprobe.py",
    "checks/gpu/torchprobe.py",
    "doctor/i18n/messages.py",  # developer tools
    "doctor/i18n/compile.py",
    "doctor/engine/index.py",
    "doctor/reports/text.py",  # rich, fed by the view the redactor escaped
}


def _writes(tree: ast.AST, source: list[str]) -> list[int]:
    """The lines that write to a stream directly; one marked "no name in it" writes fixed words (a warning in red)."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = ast.unparse(func)
        writes = name in ("click.echo", "print", "sys.stdout.write", "sys.stderr.write", "click.secho")
        if writes and "no name in it" not in source[node.lineno - 1]:
            lines.append(node.lineno)
    return lines


def test_nothing_writes_to_a_terminal_but_the_writers_that_escape():
    found = {}
    for folder in ("doctor", "checks", "fixers"):
        for path in sorted((REPO / folder).rglob("*.py")):
            relative = str(path.relative_to(REPO))
            if relative in WRITERS:
                continue
            text = path.read_text()
            lines = _writes(ast.parse(text, relative), text.splitlines())
            if lines:
                found[relative] = lines
    assert not found, f"write through decode_doctor.app.output.echo (it escapes names), not directly: {found}"


def _run(lang: tuple[str, ...], *args: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> str:
    result = run_dd(*lang, *args, cwd=cwd, env=env)
    output = result.stdout + result.stderr
    assert result.returncode in (0, 1, 2, 3), output
    assert "Traceback" not in output and "internal error" not in output, output
    return output


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    """A tree whose every name a command takes holds HOSTILE: a host, a model, a log, reports, a state dir."""
    base = tmp_path_factory.mktemp("names") / HOSTILE
    shutil.copytree(SWAP_HOST, base / "host")
    tiny_config(base / "model")
    shutil.copy(FIXTURES / "serving" / "logs" / "vllm-v0-preemption-pr6102.log", base / f"{HOSTILE}.log")
    for name in ("a", "b"):
        report = run_dd("check", "--root", str(base / "host"), "--select", "swappiness", "--format", "json")
        (base / f"{name}.json").write_text(report.stdout)
    (base / "state").mkdir()
    return base


@pytest.mark.parametrize("lang", LANGUAGES, ids=["en", "zh-CN"])
def test_every_command_shows_a_hostile_name_escaped(hostile, lang, tmp_path):
    assert json.loads((hostile / "a.json").read_text())["run"]["root"].endswith("host")
    host, model, state = str(hostile / "host"), str(hostile / "model"), str(hostile / "state")
    work = tmp_path / "work"
    shutil.copytree(hostile / "host", work)
    runs = {
        "check": ("check", "--root", host, "--select", "swappiness", "--verbose"),
        "check refused host name": ("check", "--root", host, "--select", "swappiness", "--host-name", HOSTILE),
        "check markdown": ("check", "--root", host, "--select", "swappiness", "--format", "markdown"),
        "check model": ("check", "--select", "encodings,model-artifacts", "--model", model, "--root", host),
        "check missing model": ("check", "--select", "encodings", "--model", str(hostile / "gone"), "--root", host),
        "fix": ("check", "--root", str(work), "--select", "swappiness", "--fix", "--yes", "--state-dir", state),
        "undo list": ("undo", "--list", "--state-dir", state),
        "undo": ("undo", "--state-dir", state),
        "undo missing": ("undo", "--state-dir", str(hostile / "gone")),
        "report": ("report", "--root", host, "--select", "swappiness", "-o", str(tmp_path / f"{HOSTILE}.tar.gz")),
        "diff": ("diff", str(hostile / "a.json"), str(hostile / "b.json")),
        "diff not a report": ("diff", str(hostile / "a.json"), str(hostile / f"{HOSTILE}.log")),
        "merge": ("merge", str(hostile / "a.json"), str(hostile / "b.json")),
        "analyze": ("analyze", str(hostile / f"{HOSTILE}.log")),
        "analyze missing": ("analyze", str(hostile / "gone.log")),
        "estimate": ("estimate", "--model", model, "--bandwidth", "40", "--memory", "16"),
        "estimate missing": ("estimate", "--model", str(hostile / "gone")),
        "agent": ("agent", "--root", host, "--select", "swappiness", "--once", "--textfile-directory", str(hostile / "textfile")),
        "npd": ("npd", "--root", host, "--select", "swappiness"),
        "bench": ("bench", "--endpoint", f"http://127.0.0.1:9/{HOSTILE}"),
    }
    for what, args in runs.items():
        output = _run(lang, *args)
        assert _raw(output) == [], f"{what}: {output!r}"
