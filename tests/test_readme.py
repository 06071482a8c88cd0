"""The README cannot drift from the tool: its check table is the registry's, and every command line and
configuration example in it runs here against fixtures (a copied host under --root, generated
models, a Hugging Face cache, a local server) with every state written under the test's own
directory."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from decode_doctor.checks.bandwidth import membw, quiet

from .conftest import FIXTURES, REPO
from .support.fakes import FAKES, vm_dmidecode
from .support.faultserver import FaultServer
from .support.harness import CliResult, cli
from .support.modelgen import hf_cache, llama_gguf, llama_tensors, qwen2_7b, write_hf_model
from .support.published import PUBLISHED

README = REPO / "README.md"
TABLE_START = "<!-- checks table"
TABLE_END = "<!-- end of checks table -->"
# commands that need --root (the copied host), not the live one
ROOTED = ("check", "report", "agent")
QWEN_SHAPE = {
    "model_type": "qwen2",
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 512,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
}


def fenced_blocks(text: str) -> list[tuple[str, list[str]]]:
    """(language, lines) of every fenced block."""
    blocks: list[tuple[str, list[str]]] = []
    language: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("```"):
            if language is None:
                language, lines = line[3:].strip(), []
            else:
                blocks.append((language, lines))
                language = None
        elif language is not None:
            lines.append(line)
    return blocks


def readme_commands() -> list[str]:
    """Every decode-doctor command line of the README's sh and cron blocks, its comment cut off."""
    found = []
    for language, lines in fenced_blocks(README.read_text()):
        for line in lines:
            at = line.find("decode-doctor ")
            if language not in ("sh", "cron") or at < 0 or "pip install" in line:
                continue
            command = line[at:].split(" && ")[0]
            command = re.split(r"\s{2,}#\s", command)[0].strip()
            found.append(command)
    return found


def test_the_checks_table_is_the_registrys():
    from decode_doctor.cli.info import checks_table
    from decode_doctor.engine.registry import load

    text = README.read_text()
    start = text.index("\n", text.index(TABLE_START)) + 1
    end = text.index(TABLE_END)
    table = checks_table(load())
    if os.environ.get("DD_UPDATE_README"):
        README.write_text(text[:start] + table + text[end:])
        text = README.read_text()
        end = text.index(TABLE_END)
    assert text[start:end] == table, "the README's checks table drifted: python tests/support/regenerate.py rewrites it"


@dataclass
class Workspace:
    """Everything the README's commands name, made under one temporary directory."""

    top: Path
    host: Path
    state: Path
    server: FaultServer
    substitutions: dict[str, str]

    def argv(self, command: str) -> list[str]:
        for placeholder, value in self.substitutions.items():
            command = command.replace(placeholder, value)
        expanded: list[str] = []
        for word in shlex.split(command)[1:]:  # without "decode-doctor"
            matches = sorted(self.top.glob(word)) if "*" in word else []
            expanded.extend(str(m) for m in matches) if matches else expanded.append(word)
        if expanded and expanded[0] in ROOTED:  # the host tree stands for this machine, as the README's commands judge it
            expanded += ["--root", str(self.host), "--same-host"]
        if expanded and (expanded[0] == "undo" or "--fix" in expanded):
            expanded += ["--state-dir", str(self.state)]
        return expanded


def _fixed_bandwidth(buffer_bytes: int, budget_s: float = 1.0, threads: int | None = None) -> membw.CpuBandwidth:
    return membw.CpuBandwidth(20.0, 18.0, 0.02, 0.03, threads or 2, buffer_bytes, 3, 0.05, 0.0)


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(membw, "measure_cpu", _fixed_bandwidth)  # the forked checks inherit it: no second of measuring each
    monkeypatch.setattr(quiet, "serving", lambda ctx: None)  # the agent's idle test, whatever else this machine runs
    top = tmp_path / "work"
    top.mkdir()
    (top / "textfile").mkdir()
    host = tmp_path / "host"
    shutil.copytree(FIXTURES / "hosts/swap60-rhel7", host, symlinks=True)
    (host / "var/log").mkdir(parents=True)  # the tree stands for this machine (--same-host), NVML's stand-in an H200: its kernel log
    (host / "var/log/kern.log").write_text("Dec  7 00:00:00 rhel7-node kernel: Linux version 3.10.0-1160.el7.x86_64\n")
    home = tmp_path / "home"
    small = write_hf_model(
        tmp_path / "source", {**QWEN_SHAPE, "hidden_size": 64, "num_hidden_layers": 2}, llama_tensors(2, 64, 4, 2, 128, 512)
    )
    hf_cache(home / ".cache/huggingface/hub", "Qwen/Qwen2-7B-Instruct", small)  # small: --verify-hashes reads every byte
    qwen2_7b(top / "Qwen2-7B", shards=1)
    llama_gguf(top / "llama-3-8b.Q4_K_M.gguf")
    llama_70b = {
        "model_type": "llama",
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "torch_dtype": "bfloat16",
    }
    write_hf_model(top / "Llama-3-70B", llama_70b, {})
    (top / "gpt-oss-120b").mkdir()
    shutil.copy(FIXTURES / "models/configs/gpt-oss-120b.json", top / "gpt-oss-120b/config.json")
    write_hf_model(top / "DeepSeek-V3", PUBLISHED["DeepSeek-V3"]["config"], {})
    shutil.copy(FIXTURES / "nvidia/nvidia-smi-errors/couldnt-communicate-with-driver.txt", top / "nvidia-smi.txt")
    shutil.copy(FIXTURES / "nvidia/kernel-logs/kernel-xid-79-fallen-off-rtx5090.txt", top / "dmesg.txt")
    (top / "hosts").mkdir()
    for name in ("swap60-rhel7", "healthy-server"):
        result = cli("check", "--select", "swappiness", "--root", str(FIXTURES / "hosts" / name), "--format", "json")
        (top / "hosts" / f"{name}.json").write_text(result.stdout)
    shutil.copy(top / "hosts/swap60-rhel7.json", top / "before.json")
    shutil.copy(top / "hosts/healthy-server.json", top / "after.json")
    monkeypatch.syspath_prepend(str(FAKES))  # `estimate --device cuda:0`: NVML's stand-in finds one H200
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)  # whatever an earlier test of this process imported
    monkeypatch.setenv("PATH", vm_dmidecode(tmp_path / "bin")["PATH"])  # this machine as a VM: no DIMMs to rate (BW002 does not apply)
    monkeypatch.chdir(top)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    metrics = (FIXTURES / "serving/vllm-v0-qwen25-coder-1.5b-idle.prom").read_text()
    with FaultServer(metrics=metrics, listed="zero") as server:
        substitutions = {
            "http://127.0.0.1:8000/v1": server.url,
            "~/": f"{home}/",
            "-o /tmp/": f"-o {tmp_path}/",
            "/var/lib/node_exporter/textfile": str(top / "textfile"),
        }
        yield Workspace(top, host, tmp_path / "state", server, substitutions)


def _problem(command: str, result: CliResult) -> str | None:
    said = result.stdout + result.stderr
    if "Traceback" in said or "internal error" in said or ": crashed —" in said or "timed out after" in said:
        return f"{command}: {said[-600:]}"
    if result.exit_code == 2:
        return f"{command}: exit 2 (a usage error): {said[-400:]}"
    if result.exit_code not in (0, 1):
        return f"{command}: exit {result.exit_code}: {said[-400:]}"
    return None


def test_every_command_line_of_the_readme_runs(workspace: Workspace):
    commands = readme_commands()
    assert len(commands) >= 25  # the Using-it block, the bundle block and the cron line
    problems, results = [], {}
    for command in commands:
        argv = workspace.argv(command)
        result = results[command] = cli(*argv, env={"HOME": os.environ["HOME"], "XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]})
        problem = _problem(command, result)
        if problem:
            problems.append(problem)
    assert problems == [], "\n\n".join(problems)
    cached = next(r for c, r in results.items() if "models--Qwen--Qwen2-7B-Instruct" in c)
    assert "Qwen2-7B-Instruct (safetensors" in cached.stdout and "DEC010" not in cached.stdout, cached.stdout
    on_gpu = next(r for c, r in results.items() if "--device cuda:0" in c)
    assert on_gpu.exit_code == 0 and on_gpu.json()["device"]["name"] == "cuda:0", on_gpu.stdout + on_gpu.stderr
    oss = next(r for c, r in results.items() if "gpt-oss-120b" in c).json()
    assert (
        oss["sizing"]["kv_bytes_per_token_by_kind"] == {"sliding": 18 * 2 * 8 * 64 * 2, "full": 18 * 2 * 8 * 64 * 2}
        and oss["plan"]["fit"] == "fits"
    )
    two_nodes = next(r for c, r in results.items() if "--gpus 16" in c)
    assert "--tensor-parallel-size 8 --pipeline-parallel-size 2" in two_nodes.stdout, two_nodes.stdout
    assert "SWAP001: resolved" in next(r for c, r in results.items() if c.endswith("--fix --yes")).stdout
    assert "Undo of fix run" in next(r for c, r in results.items() if c == "decode-doctor undo").stdout
    top = workspace.top
    assert (top / "r.json").is_file() and (top / "r.html").is_file() and (top / "fleet.html").is_file()
    assert list(top.glob("decode-doctor-*.tar.gz"))  # `report` wrote its bundle where it ran
    assert (top / "textfile/decode_doctor.prom").is_file()


def test_the_configuration_example_runs_and_a_retired_code_is_a_warning_naming_the_file(tmp_path, monkeypatch):
    (toml,) = [lines for language, lines in fenced_blocks(README.read_text()) if language == "toml"]
    config = tmp_path / "decode-doctor.toml"
    config.write_text("\n".join(toml) + "\n")
    monkeypatch.chdir(tmp_path)
    result = cli("check", "--root", str(FIXTURES / "hosts/swap60-rhel7"))
    assert _problem("check with the README's configuration", result) is None
    assert result.exit_code == 1  # fail-on = "warning", and SWAP001 is one
    assert f"warning: {config}: ignore SWAP002: a retired code, left out" in result.stderr
    assert "--ignore" not in result.stderr  # the flag the user never typed is not blamed


def test_the_ready_line_the_readme_quotes_is_what_a_healthy_host_hears():
    text = README.read_text()
    match = re.search(r"A healthy host hears one line: `(Ready: [^`]+)` \(`(decode-doctor [^`]+)`\)", text)
    assert match, "the README quotes the Ready line with the command that prints it"
    line, command = match.groups()
    argv = shlex.split(command)[1:]
    argv[argv.index("--root") + 1] = str(REPO / argv[argv.index("--root") + 1])
    assert cli(*argv).stdout.strip() == line
