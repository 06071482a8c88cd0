"""The README's first quick-start command, as written, on a fresh clone: `pip install .` (not editable,
its dependencies from the index) into a new venv, then `decode-doctor check` on this machine; then the
same installed tool runs --help, estimate, explain, list, agent --once and the Chinese check, and
`pipx install .` where Debian's pipx is installed. Any "could not load", traceback or unexpected exit
code fails it. .ci/run calls it after the tests.

    python3 tests/support/firstrun.py [--working-tree] [--keep]

--working-tree copies the files git would commit (tracked and untracked, not ignored) instead of
cloning HEAD: a change not yet committed, tried the way CI will."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BROKEN = re.compile(r"could not load|Traceback \(most recent call last\)|ModuleNotFoundError|ImportError")


@dataclass(frozen=True)
class Step:
    name: str
    argv: list[str]
    exits: tuple[int, ...] = (0,)


def readme_first_command() -> str:
    """The first sh block under "Quick start", verbatim."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1]
    found = re.search(r"```sh\n(.+?)\n```", section, re.S)
    assert found, "README: no sh block under Quick start"
    return found.group(1).strip()


def clean_env(home: Path) -> dict[str, str]:
    """This machine's environment without the test run's (no PYTHONPATH into the checkout), with a
    state and cache of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "DD_EMITTED_LOG")}
    return {**env, "NO_COLOR": "1", "XDG_STATE_HOME": str(home / "state"), "XDG_CACHE_HOME": str(home / "cache")}


def run(name: str, command: list[str] | str, cwd: Path, env: dict[str, str], exits: tuple[int, ...] = (0,)) -> str:
    shell = isinstance(command, str)
    proc = subprocess.run(command, shell=shell, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    broken = sorted({m.group(0) for m in BROKEN.finditer(out)})
    ok = proc.returncode in exits and not broken
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {proc.returncode}" + (f", {', '.join(broken)}" if broken else ""), flush=True)
    if not ok:
        print(out[-6000:])
        raise SystemExit(1)
    return proc.stdout


def follow_ups(tool: Path, work: Path) -> list[Step]:
    model = work / "gpt-oss-20b"
    model.mkdir(exist_ok=True)
    shutil.copy(REPO / "fixtures" / "models" / "configs" / "gpt-oss-20b.json", model / "config.json")
    textfiles = work / "textfile"
    textfiles.mkdir(exist_ok=True)
    host = str(REPO / "fixtures" / "hosts" / "gpu-node-xid")
    return [
        Step("--help", [str(tool), "--help"]),
        Step("estimate --help", [str(tool), "estimate", "--help"]),
        Step("estimate", [str(tool), "estimate", "--model", str(model), "--gpu", "H100-SXM", "--context", "8192", "--concurrency", "4"]),
        Step("explain GPU020", [str(tool), "explain", "GPU020"]),
        Step("list", [str(tool), "list"]),
        # another host's files: what only a live host can say is not judged there (exit 3); what counts is what loaded
        Step(
            "agent --once (a fixture host)",
            [str(tool), "agent", "--once", "--root", host, "--textfile-directory", str(textfiles)],
            (0, 1, 3),
        ),
        Step("--lang zh-CN check", [str(tool), "--lang", "zh-CN", "check"], (0, 1)),
    ]


def copy_working_tree(target: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True)
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def main(argv: list[str]) -> int:
    work = Path(tempfile.mkdtemp(prefix="dd-firstrun-"))
    try:
        clone = work / "clone"
        if "--working-tree" in argv:
            copy_working_tree(clone)
        else:
            subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        env = clean_env(work)
        command = readme_first_command()
        print(f"README's first command, in a fresh clone: {command}", flush=True)
        run("the README's first command (check on this machine)", command, clone, env, exits=(0, 1))
        tool = clone / ".venv" / "bin" / "decode-doctor"
        for step in follow_ups(tool, work):
            run(step.name, step.argv, work, env, step.exits)
        prom = (work / "textfile").glob("*.prom")
        text = "".join(path.read_text() for path in prom)
        assert re.search(r"^decode_doctor_load_errors\{[^}]*\} 0$", text, re.M), "the agent's textfile: load errors not 0"
        listed = json.loads(run("list --format json", [str(tool), "list", "--format", "json"], work, env))
        print(f"     {len(listed['checks'])} checks loaded: {', '.join(row['check'] for row in listed['checks'])}")
        pipx = shutil.which("pipx")
        if pipx:
            pipx_env = {
                **env,
                "PIPX_HOME": str(work / "pipx"),
                "PIPX_BIN_DIR": str(work / "pipx-bin"),
                "PIPX_MAN_DIR": str(work / "pipx-man"),
            }
            run("pipx install .", [pipx, "install", "."], clone, pipx_env)
            run("pipx's decode-doctor --help", [str(work / "pipx-bin" / "decode-doctor"), "--help"], work, pipx_env)
            run("pipx's decode-doctor list", [str(work / "pipx-bin" / "decode-doctor"), "list"], work, pipx_env)
        else:
            print("skip pipx install .: pipx is not installed here")
        return 0
    finally:
        if "--keep" in argv:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
