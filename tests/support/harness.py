"""The in-process test harness: one check over a fixture root, the application layer, and the CLI.

Most tests run a check directly (run_check: no fork, no interpreter start), some go through the
application layer (run_app: the real runner, forked checks), and a few drive the CLI in process
(cli). Only what needs a real process (exit by signal, --help imports, another user, a terminal)
starts decode-doctor as a subprocess (conftest.run_dd).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decode_doctor.app import service
from decode_doctor.app.requests import RunRequest
from decode_doctor.engine.commands import CommandRunner
from decode_doctor.engine.context import Context
from decode_doctor.engine.facts import Board, Facts
from decode_doctor.engine.findings import Finding
from decode_doctor.engine.options import Options, OptionValues
from decode_doctor.engine.registry import load

NOWHERE = Path("/nonexistent-decode-doctor-root")


@dataclass
class CheckRun:
    findings: list[Finding]
    facts: Facts | None
    ctx: Context

    def codes(self) -> dict[str, Finding]:
        """The first finding of each code."""
        found: dict[str, Finding] = {}
        for finding in self.findings:
            found.setdefault(finding.code, finding)
        return found

    def by_path(self) -> dict[str | None, set[str]]:
        found: dict[str | None, set[str]] = {}
        for finding in self.findings:
            found.setdefault(finding.path, set()).add(finding.code)
        return found


def typed_options(options: Mapping[str, Any] | Iterable[Options] | None) -> OptionValues:
    """A test's options by field name ({"threads": 2}) as the typed options of the checks that declare
    them; a name no check declares fails the test."""
    if options is None:
        return OptionValues()
    if not isinstance(options, Mapping):
        return OptionValues(tuple(options))
    owners = {name: cls.options for cls in load().checks.values() if cls.options for name in cls.options.names()}
    unknown = sorted(name for name in options if name not in owners)
    assert not unknown, f"no check declares the option(s) {unknown}"
    kinds = {owners[name] for name in options}
    return OptionValues(tuple(kind(**{n: v for n, v in options.items() if owners[n] is kind}) for kind in kinds if kind))


class LiveTree(Context):
    """A host tree that stands for this machine's own root (`--root /`): its files are read under root,
    and, as on the live host, the tools on PATH (a test's fakes), dmesg, journalctl and NVML answer for
    it. A test that runs a host's tools on a fixture tree says so with make_context(live=True)."""

    @property
    def live_host(self) -> bool:
        return True


def make_context(
    root: Path = NOWHERE,
    *,
    models: tuple[Path, ...] = (),
    images: tuple[Path, ...] = (),
    options: Mapping[str, Any] | Iterable[Options] | None = None,
    env: Mapping[str, str] | None = None,
    facts: Iterable[Facts] = (),
    same_host: bool = False,
    live: bool = False,
) -> Context:
    """Without same_host or live the root is another host's files: no tool of this machine is run for
    it. same_host: this machine's filesystem mounted at root (--same-host, a node agent); live: the
    root stands for this machine's own / (LiveTree)."""
    environment = {**os.environ, **(env or {})}
    return (LiveTree if live else Context)(
        root=root,
        same_host=same_host,
        runner=CommandRunner(env=environment),
        env=environment,
        models=models,
        images=images,
        options=typed_options(options),
        facts=Board(facts),
    )


def run_check(name: str, root: Path = NOWHERE, **kw: Any) -> CheckRun:
    """Runs one check in this process; SkipCheck and the check's own exceptions propagate."""
    registry = load()
    ctx = make_context(root, **kw)
    findings = registry.checks[name]().run(ctx) or []
    return CheckRun([registry.resolve(f) for f in findings], ctx.published, ctx)


def run_app(*select: str, root: Path = NOWHERE, env: Mapping[str, str] | None = None, **kw: Any) -> service.Outcome:
    """The application layer as the CLI uses it: selection, the forked runner, the report."""
    if "options" in kw:
        kw["options"] = tuple(typed_options(kw["options"]))
    request = RunRequest(root=root, select=select, env={**os.environ, **(env or {})}, **kw)
    return service.run(request)


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None = field(default=None, repr=False)

    def json(self) -> dict[str, Any]:
        assert self.stdout.lstrip().startswith("{"), self.stdout + self.stderr
        return json.loads(self.stdout)


@contextlib.contextmanager
def _cwd(path: Path | None) -> Iterator[None]:
    if path is None:
        yield
        return
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def cli(*args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> CliResult:
    """decode-doctor's CLI in this process (click's runner): exit code and the two streams."""
    from click.testing import CliRunner

    from decode_doctor.cli.main import cli as group

    runner = CliRunner()
    with _cwd(cwd):
        result = runner.invoke(group, list(args), env={"NO_COLOR": "1", **(env or {})}, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"decode-doctor {shlex.join(args)} raised {result.exception!r}\n{result.stdout}") from result.exception
    return CliResult(result.exit_code, result.stdout, result.stderr, result.exception)


class Recorder:
    """A Dialogue for tests: keeps what was said, answers confirm() with `answer`."""

    def __init__(self, interactive: bool = False, answer: bool = False):
        self.interactive = interactive
        self.answer = answer
        self.lines: list[str] = []

    def say(self, text: str) -> None:
        self.lines.extend(text.splitlines() or [""])

    def confirm(self, question: str) -> bool:
        self.lines.append(f"? {question}")
        return self.answer

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def run_fix(
    *select: str,
    state_dir: Path,
    dry_run: bool = False,
    unsafe: bool = False,
    dialogue: Recorder | None = None,
    on_step: Any = None,
    **run_kw: Any,
) -> tuple[service.Outcome, Recorder]:
    """check --fix --yes through the application layer: (the outcome after the re-check, what was said)."""
    from decode_doctor.app import fixing
    from decode_doctor.app.requests import FixRequest

    dialogue = dialogue or Recorder()
    outcome = run_app(*select, **run_kw)
    request = FixRequest(state_dir, dry_run=dry_run, yes=True, unsafe=unsafe, on_step=on_step)
    return fixing.fix(outcome, request, dialogue), dialogue


def fix_killed_at(step: int, *select: str, state_dir: Path, **run_kw: Any) -> bool:
    """Runs run_fix in a forked child that SIGKILLs itself after journal step `step` (a kill at any
    point, with no cleanup running); True when the kill happened, False when the fix had fewer steps."""
    import signal

    pid = os.fork()
    if pid == 0:
        status = 0
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)

            def on_step(number: int) -> None:
                if number == step:
                    os.kill(os.getpid(), signal.SIGKILL)

            run_fix(*select, state_dir=state_dir, on_step=on_step, **run_kw)
        except BaseException:
            status = 70
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGKILL
        return True
    assert os.WEXITSTATUS(status) == 0, f"the fix failed in the child (status {os.WEXITSTATUS(status)})"
    return False


def chromium_or_skip() -> str:
    """Debian's chromium for the HTML tests: skipped where it is missing, a failure in CI (.ci/run installs it)."""
    import os
    import shutil

    import pytest

    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (.ci/run installs Debian's chromium)")
        pytest.skip("chromium is not installed")
    return found
