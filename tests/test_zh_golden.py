"""Golden Chinese outputs of every command (issue 38): check, explain, list, estimate, bench, analyze,
report, fix and undo, merge and diff, each as a user runs it on the fixtures, kept under
tests/golden/zh/ and read line by line by a native reader when they change.

Each output is also counted: no Latin word outside codes, commands, flags, paths, units, identifiers,
quoted evidence and the terms the glossary keeps in English (tests/support/latin.py).

DD_UPDATE_GOLDEN=1 rewrites the files; read the diff as a Chinese engineer would before committing.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import FIXTURES, REPO, run_dd
from .support.latin import choices, english_words

GOLDEN = Path(__file__).resolve().parent / "golden" / "zh"
HOSTS = FIXTURES / "hosts"
CONFIGS = FIXTURES / "models" / "configs"
LOGS = FIXTURES / "serving" / "logs"


def _normal(text: str, tmp: Path) -> str:
    """What changes between runs made the same: temporary paths, times, run ids, ages."""
    text = text.replace(str(tmp), "<tmp>").replace(str(REPO), "<repo>")
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:\+00:00|Z)?", "<time>", text)
    text = re.sub(r"\d{8}T\d{6}Z(?:-[0-9a-f]{6})?", "<run>", text)
    return re.sub(r"(?<=\s)\d+ 秒(?=\s)", "N 秒", text)


def _zh(tmp: Path, *args: str, env: dict[str, str] | None = None) -> str:
    (tmp / "bin").mkdir(exist_ok=True)  # no tool of this machine on PATH
    result = run_dd("--lang", "zh-CN", *args, env={"PATH": str(tmp / "bin"), "COLUMNS": "100", **(env or {})}, cwd=REPO)
    return result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr else "") + f"\n[exit {result.returncode}]\n"


def _model(tmp: Path, name: str) -> Path:
    directory = tmp / "models" / name
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(CONFIGS / f"{name}.json", directory / "config.json")
    return directory


def _check(tmp: Path) -> str:
    return "".join(
        f"$ check --root {host} {' '.join(extra)}\n" + _zh(tmp, "check", "--root", f"fixtures/hosts/{host}", *extra)
        for host, extra in (
            # never the bandwidth check: it measures this machine, and a busy one says so (BW003)
            ("swap60-rhel7", ("--select", "swappiness,docker,gpu,nvidia-container,accelerators")),
            ("gpu-node-xid", ("--select", "gpu,swappiness")),
            ("jetson-nano", ("--select", "gpu,swappiness,accelerators")),
            ("container-ro", ("--select", "swappiness,docker")),
            ("swap60-rhel7", ("--select", "swappiness", "--fix", "--dry-run")),
        )
    )


def _explain(tmp: Path) -> str:
    from decode_doctor import i18n
    from decode_doctor.cli.info import explanation_lines
    from decode_doctor.engine.registry import load

    registry = load()
    i18n.use("zh-CN")
    try:
        return "\n\n".join(
            "\n".join(explanation_lines(spec, cls.name, registry.fixable(code))) for code, (spec, cls) in registry.codes().items()
        )
    finally:
        i18n.use("en")


def _list(tmp: Path) -> str:
    return _zh(tmp, "list")


def _estimate(tmp: Path) -> str:
    runs = (
        ("gpt-oss-120b", ("--gpu", "H200", "--context", "131072", "--concurrency", "16")),
        ("Qwen3-Next-80B-A3B-Instruct", ("--gpu", "H100-SXM", "--gpus", "16", "--context", "262144")),
        ("GLM-4.5-Air", ("--gpu", "L4")),
    )
    return "".join(
        f"$ estimate {name} {' '.join(extra)}\n" + _zh(tmp, "estimate", "--model", str(_model(tmp, name)), *extra) for name, extra in runs
    )


def _analyze(tmp: Path) -> str:
    pasted = [*sorted(LOGS.glob("*.log")), *sorted((FIXTURES / "nvidia" / "collect-env").glob("*.txt"))]
    return "".join(f"$ analyze {path.name}\n" + _zh(tmp, "analyze", str(path.relative_to(REPO))) for path in pasted)


def _bench_run(tmp: Path) -> str:
    """A bench against a server that streams four tokens 20 ms apart: its figures vary, its words do not."""
    from .support.faultserver import FaultServer

    with FaultServer() as server:
        out = _zh(tmp, "bench", "--endpoint", server.url, "--concurrency", "1,2", "--requests", "2", "--output-tokens", "4", "--no-metrics")
        return out.replace(server.url, "<server>")


def _bench(tmp: Path) -> str:
    refused = _zh(tmp, "bench", "--endpoint", "http://127.0.0.1:9/v1")
    run = _bench_run(tmp)
    # the lines whose words and numbers do not depend on timing
    steady = [line for line in run.splitlines() if line.startswith(("serving：bench", "serving：未与", "serving：没有可比较", "SRV005"))]
    return "$ bench (nothing listens)\n" + refused + "$ bench (a server that streams)\n" + "\n".join(steady) + "\n"


def _report(tmp: Path) -> str:
    out = _zh(tmp, "report", "--root", "fixtures/hosts/swap60-rhel7", "--select", "swappiness,docker", "-o", str(tmp / "bundle.tar.gz"))
    shutil.unpack_archive(tmp / "bundle.tar.gz", tmp / "bundle", "gztar")
    markdown = next((tmp / "bundle").glob("*/report.md")).read_text()
    markdown = re.sub(r"(?m)^```json\n.*?^```\n", "```json\n…\n```\n", markdown, flags=re.DOTALL)
    markdown = re.sub(r"\| \d+\.\d+ s \|", "| N s |", markdown)  # how long each check took
    # this machine's own versions and CPU (a --root report still names the interpreter it ran in)
    markdown = re.sub(r"(?m)^\| (CPU|Python|[\w. -]+（本 Python）) \| [^|]* \|", r"| \1 | <this-machine> |", markdown)
    return out + "\n--- report.md ---\n" + markdown


def _fix_and_undo(tmp: Path) -> str:
    host = tmp / "host"
    shutil.copytree(HOSTS / "swap60-rhel7", host)
    state = ("--state-dir", str(tmp / "state"))
    fixed = _zh(tmp, "check", "--root", str(host), "--select", "swappiness", "--fix", "--yes", *state)
    undone = _zh(tmp, "undo", *state)
    again = _zh(tmp, "undo", *state)
    return f"$ check --fix --yes\n{fixed}$ undo\n{undone}$ undo (nothing left)\n{again}"


def _merge_and_diff(tmp: Path) -> str:
    reports = []
    # node-02 twice: healthy, then with a GPU fallen off the bus
    for name, host, select in (
        ("node-01", "swap60-rhel7", "swappiness,docker"),
        ("node-02", "gpu-node", "gpu,swappiness"),
        ("node-02", "gpu-node-xid", "gpu,swappiness"),
    ):
        path = tmp / f"{len(reports)}.json"
        run_dd(
            "check",
            "--root",
            f"fixtures/hosts/{host}",
            "--select",
            select,
            "--host-name",
            name,
            "--format",
            "json",
            "-o",
            str(path),
            cwd=REPO,
        )
        reports.append(path)
    return (
        "$ diff node-02 node-02\n"
        + _zh(tmp, "diff", str(reports[1]), str(reports[2]))
        + "$ merge node-01 node-02\n"
        + _zh(tmp, "merge", str(reports[0]), str(reports[2]))
    )


def _help(tmp: Path) -> str:
    commands = ("", "check", "list", "explain", "report", "diff", "merge", "agent", "undo", "analyze", "npd", "estimate", "bench")
    return "".join(
        f"$ {command} --help\n" + _zh(tmp, *([command] if command else []), "--help", env={"COLUMNS": "80"}) for command in commands
    )


def _plans(tmp: Path) -> str:
    """A plan of every fixture architecture on an 8-GPU node, and one that does not fit a small CPU host."""
    out = ""
    for config in sorted(CONFIGS.glob("*.json")):
        extra = ("--gpu", "H100-SXM", "--gpus", "8", "--context", "131072", "--concurrency", "32")
        out += f"$ estimate {config.stem} {' '.join(extra)}\n" + _zh(tmp, "estimate", "--model", str(_model(tmp, config.stem)), *extra)
    small = ("--bandwidth", "40", "--memory", "16", "--threads", "2")
    return (
        out
        + "$ estimate gpt-oss-20b --bandwidth 40 --memory 16\n"
        + _zh(tmp, "estimate", "--model", str(_model(tmp, "gpt-oss-20b")), *small)
    )


def _node_agent(tmp: Path) -> str:
    """The agent's one run and node-problem-detector's line, on a node whose GPU fell off the bus."""
    node = ("--root", "fixtures/hosts/gpu-node-xid", "--select", "gpu,gpu-health,swappiness")
    (tmp / "textfile").mkdir()
    agent = _zh(tmp, "agent", *node, "--once", "--textfile-directory", str(tmp / "textfile"))
    return "$ agent --once\n" + agent + "$ npd\n" + _zh(tmp, "npd", *node)


def _errors(tmp: Path) -> str:
    """What a user meets when a command is given something wrong."""
    runs = (
        ("agent", "--interval", "5x"),
        ("estimate", "--model", str(tmp / "nowhere")),
        ("estimate", "--model", "fixtures", "--gpus", "x"),
        ("check", "--select", "nosuch"),
        ("check", "--textfile-dir", "x"),
        ("diff", "README.md", "README.md"),
        ("undo", "--state-dir", str(tmp / "no-state")),
        ("explain", "NOPE001"),
        ("bench", "--endpoint", "ftp://x"),
    )
    return "".join(f"$ {' '.join(args)}\n" + _zh(tmp, *args) for args in runs)


COMMANDS: dict[str, Callable[[Path], str]] = {
    "help": _help,
    "check": _check,
    "explain": _explain,
    "list": _list,
    "estimate": _estimate,
    "analyze": _analyze,
    "bench": _bench,
    "report": _report,
    "fix-undo": _fix_and_undo,
    "merge-diff": _merge_and_diff,
    "plans": _plans,
    "agent-npd": _node_agent,
    "errors": _errors,
}


@pytest.mark.parametrize("command", COMMANDS)
def test_the_chinese_output_of_each_command_matches_its_golden_and_has_no_stray_english(command, tmp_path):
    text = _normal(COMMANDS[command](tmp_path), tmp_path)
    golden = GOLDEN / f"{command}.txt"
    if os.environ.get("DD_UPDATE_GOLDEN") or not golden.exists():
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    stray = english_words(re.sub(r"(?m)^(\$ |\[stderr\]|\[exit).*$", "", text), extra=choices(text))
    assert not stray, f"English a person reads in {command}'s Chinese output: {dict(stray)}"
    assert text == golden.read_text(), f"{golden.name} differs; python tests/support/regenerate.py rewrites it (read the diff)"


def test_a_whole_bench_run_in_chinese_has_no_stray_english(tmp_path):
    run = _bench_run(tmp_path)
    assert "TTFT p50" in run and not english_words(re.sub(r"(?m)^(\[stderr\]|\[exit).*$", "", run)), run


def test_the_counter_sees_english_and_lets_codes_commands_paths_and_evidence_pass():
    assert dict(english_words("SWAP001 警告：the host is busy，详情见 /etc/sysctl.conf")) == {"the": 1, "host": 1, "is": 1, "busy": 1}
    allowed = '用 `vllm serve --max-num-seqs 8` 启动；vLLM 报 "CUDA out of memory"；KV Cache 已用 94.0%；32 GiB；平移（context shift）'
    assert not english_words(allowed)
