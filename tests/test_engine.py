"""The engine: timeouts that really kill, crash isolation, exclusive checks, needs, plugins."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from decode_doctor.engine.context import Context
from decode_doctor.engine.findings import State
from decode_doctor.engine.options import OptionValues
from decode_doctor.engine.runner import run_checks

from .conftest import FIXTURES, PLUGINS, run_dd, sigint_default


@pytest.fixture(scope="module")
def plugins():
    import sys

    sys.path.insert(0, str(PLUGINS))
    try:
        import dd_test_checks

        yield dd_test_checks
    finally:
        sys.path.remove(str(PLUGINS))


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry.name))
    return found


def test_hung_and_crashing_checks_do_not_stop_the_run(plugins):
    ctx = Context(root=FIXTURES / "hosts" / "swap60-rhel7")
    classes = [plugins.SleepsForever, plugins.Raises, plugins.Segfaults, plugins.Quick]
    started = time.monotonic()
    results = {r.check: r for r in run_checks(classes, ctx)}
    elapsed = time.monotonic() - started
    assert results["sleeps-forever"].state is State.TIMED_OUT
    assert "timed out after 0.5 s" in results["sleeps-forever"].reason
    assert results["raises"].state is State.CRASHED
    assert results["raises"].reason == "RuntimeError: probe exploded"
    assert "Traceback" in results["raises"].error
    assert results["segfaults"].state is State.CRASHED
    assert "SIGSEGV" in results["segfaults"].reason
    assert results["quick"].state is State.FINDINGS
    assert results["quick"].findings[0].evidence == {"answer": 42}
    # the 0.5 s timeout (about 0.6 s idle, ceilings here are 20× that), never the 60 s the check sleeps
    assert elapsed < 15


def test_timeout_kills_the_commands_a_check_started(plugins):
    marker = f"1000.{os.getpid()}{time.time_ns() % 10**9}"
    ctx = Context(options=OptionValues((plugins.TestOptions(marker=marker),)))
    (result,) = run_checks([plugins.HungCommand], ctx)
    assert result.state is State.TIMED_OUT
    assert f"while running: sh -c sleep {marker}; echo never" in result.reason
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_with(marker) == []


def test_global_timeout_overrides_each_checks_own(plugins):
    started = time.monotonic()
    (result,) = run_checks([plugins.SleepsForever], Context(), timeout_s=0.3)
    assert result.state is State.TIMED_OUT
    assert time.monotonic() - started < 10


def test_exclusive_checks_run_alone(plugins, tmp_path):
    log = tmp_path / "windows.log"
    ctx = Context(options=OptionValues((plugins.TestOptions(log=str(log)),)))
    run_checks([plugins.Exclusive, plugins.Slowish], ctx)
    windows = {name: (float(a), float(b)) for name, a, b in (line.split() for line in log.read_text().splitlines())}
    (ex_start, ex_end), (sl_start, sl_end) = windows["exclusive"], windows["slowish"]
    assert ex_end <= sl_start or sl_end <= ex_start


def test_unmet_needs_skip_with_the_reason(plugins):
    (result,) = run_checks([plugins.NeedsModel], Context())
    assert result.state is State.SKIPPED
    assert result.reason == "needs --model"
    (result,) = run_checks([plugins.NeedsModel], Context(models=(Path("/tmp"),)))
    assert result.state is State.PASSED


@pytest.fixture
def plugin_env(tmp_path: Path) -> dict[str, str]:
    """A real entry point: a dist-info directory on the path, as an installed plugin has."""
    dist = tmp_path / "site" / "dd_test_plugins-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dd-test-plugins\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[decode_doctor.checks]\ntestchecks = dd_test_checks\n")
    return {"PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(PLUGINS)])}


def test_cli_reports_every_state_through_a_plugin(plugin_env):
    root = FIXTURES / "hosts" / "swap60-rhel7"
    started = time.monotonic()
    proc = run_dd("check", "--root", str(root), "--select", "sleeps-forever,raises,quick,swappiness", "--format", "json", env=plugin_env)
    elapsed = time.monotonic() - started
    assert proc.returncode == 3, proc.stderr  # no verdict from two checks: a CI gate must not pass
    report = json.loads(proc.stdout)
    assert report["summary"]["exit_code"] == 3
    states = {r["check"]: r["state"] for r in report["results"]}
    assert states == {"sleeps-forever": "timed out", "raises": "crashed", "quick": "findings", "swappiness": "findings"}
    assert {f["code"] for f in report["findings"]} == {"TEST001", "SWAP001"}
    assert "Traceback" not in proc.stdout + proc.stderr
    assert elapsed < 30  # interpreter start plus the 0.5 s timeout, not the check's endless sleep


def test_crash_traceback_only_with_debug(plugin_env):
    root = str(FIXTURES / "hosts" / "swap60-rhel7")
    plain = run_dd("check", "--root", root, "--select", "raises", env=plugin_env)
    assert "raises: crashed — RuntimeError: probe exploded" in plain.stdout
    assert "Traceback" not in plain.stdout + plain.stderr
    debug = run_dd("check", "--root", root, "--select", "raises", "--debug", env=plugin_env)
    assert "Traceback" in debug.stdout


def test_list_shows_plugins_with_their_origin(plugin_env):
    proc = run_dd("list", "--format", "json", env=plugin_env)
    checks = {c["check"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["quick"]["origin"] == "plugin dd-test-plugins"
    assert checks["swappiness"]["origin"] == "builtin"
    assert checks["exclusive"]["exclusive"] is True


def test_a_check_runs_after_the_one_it_reads_facts_from(plugins):
    results = {r.check: r for r in run_checks([plugins.Reader, plugins.Publisher], Context())}
    assert results["publisher"].facts == plugins.Answer(42)
    assert results["reader"].findings[0].message == "saw Answer(value=42)"
    # without the publisher selected, the reader still runs and sees nothing
    (alone,) = run_checks([plugins.Reader], Context())
    assert alone.findings[0].message == "saw None"


def test_interrupting_the_run_kills_the_checks_and_their_commands(plugins, tmp_path):
    """Ctrl-C reaches only the foreground process group: the engine must take the checks down itself."""
    import signal
    import subprocess
    import sys

    marker = f"1000.{os.getpid()}{time.time_ns() % 10**9}"
    script = (
        f"import sys; sys.path.insert(0, {str(PLUGINS)!r})\n"
        "import dd_test_checks\n"
        "from decode_doctor.engine.context import Context\n"
        "from decode_doctor.engine.options import OptionValues\n"
        "from decode_doctor.engine.runner import run_checks\n"
        "import os\n"
        "options = OptionValues((dd_test_checks.TestOptions(marker=os.environ['DD_MARKER']),))\n"
        "run_checks([dd_test_checks.HungCommand], Context(options=options), timeout_s=60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], env={**os.environ, "DD_MARKER": marker}, preexec_fn=sigint_default
    )  # not in any command line but the hung one
    deadline = time.monotonic() + 10
    while not _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_with(marker), "the hung command never started"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_with(marker) == []
