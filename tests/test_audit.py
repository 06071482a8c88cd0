"""The coverage audit (issue 24): for each check and command, an input it cannot judge, and the proof
that the verdict is "not judged" or an error, never "Ready" and never exit 0. The README's audit table
is generated from AUDIT (DD_UPDATE_README=1 rewrites it)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import FIXTURES
from .support.fakes import fake_tool
from .support.faultserver import FaultServer
from .support.harness import cli

README = Path(__file__).resolve().parents[1] / "README.md"
TABLE_START = "<!-- audit table: generated from tests/test_audit.py -->"
TABLE_END = "<!-- end of audit table -->"


@dataclass(frozen=True)
class Case:
    check: str  # the check or command
    given: str  # the input it cannot judge
    command: str  # as the README shows it
    exit_code: int
    verdict: str  # what the user reads
    build: Callable[[Path], tuple[list[str], dict[str, str]]]  # tmp dir → (arguments, environment)
    shows: tuple[str, ...] = ()  # found in the JSON's not_judged list, findings or check states


def nan_config(tmp: Path) -> tuple[list[str], dict[str, str]]:
    model = tmp / "nan-model"
    model.mkdir()
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "num_attention_heads": 4}
    text = json.dumps(config)[:-1] + ', "num_hidden_layers": NaN, "max_position_embeddings": 2048, "vocab_size": 1000}'
    (model / "config.json").write_text(text)
    return ["check", "--select", "decode-budget", "--model", str(model), "--bandwidth", "10GB/s"], {}


def broken_links(tmp: Path) -> Path:
    model = tmp / "links"
    model.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (model / name).symlink_to(tmp / "gone" / name)
    return model


def artifacts_of_links(tmp: Path) -> tuple[list[str], dict[str, str]]:
    return ["check", "--select", "model-artifacts", "--model", str(broken_links(tmp))], {}


def encodings_of_links(tmp: Path) -> tuple[list[str], dict[str, str]]:
    return ["check", "--select", "encodings", "--model", str(broken_links(tmp))], {}


def empty_dataset(tmp: Path) -> tuple[list[str], dict[str, str]]:
    dataset = tmp / "dataset"
    dataset.mkdir()
    (dataset / "a.jpg").symlink_to(tmp / "gone.jpg")
    return ["check", "--select", "images", "--images", str(dataset)], {}


def no_swappiness(tmp: Path) -> tuple[list[str], dict[str, str]]:
    root = tmp / "host"
    shutil.copytree(FIXTURES / "hosts/swap60-rhel7", root)
    (root / "proc/sys/vm/swappiness").unlink()
    return ["check", "--select", "swappiness", "--root", str(root)], {}


def hung_gpu_probe(tmp: Path) -> tuple[list[str], dict[str, str]]:
    env = fake_tool(tmp / "bin", "nvidia-smi", "sleep 30")
    fake_tool(tmp / "bin", "dmesg", "exit 1")
    root = tmp / "host"
    root.mkdir()
    return ["check", "--select", "gpu", "--root", str(root), "--same-host", "--timeout", "1.5"], env  # its nvidia-smi is this PATH's


def gpus_without_torch(tmp: Path) -> tuple[list[str], dict[str, str]]:
    root = tmp / "host"
    shutil.copytree(FIXTURES / "hosts/swap60-rhel7", root)
    (root / "proc/driver/nvidia/gpus/0000:01:00.0").mkdir(parents=True)
    return ["check", "--select", "bandwidth", "--root", str(root), "--same-host"], {"PYTHONNOUSERSITE": "1"}


def another_hosts_files(tmp: Path) -> tuple[list[str], dict[str, str]]:
    return ["check", "--select", "bandwidth", "--root", str(FIXTURES / "hosts/swap60-rhel7")], {}


def pasted_llama_log(tmp: Path) -> tuple[list[str], dict[str, str]]:
    return ["analyze", str(FIXTURES / "serving/logs/llamacpp-issue10547-truncated.log")], {}


def no_docker(tmp: Path) -> tuple[list[str], dict[str, str]]:
    return ["check", "--select", "docker"], {"DOCKER_HOST": f"unix://{tmp}/no-docker.sock"}


AUDIT = (
    Case(
        "decode-budget",
        'a config.json with `"num_hidden_layers": NaN`',
        "check --select decode-budget --model DIR",
        3,
        "not judged: the decode budget (model-artifacts found MDL003), the finding shown",
        nan_config,
        ("MDL003", "decode budget"),
    ),
    Case(
        "model-artifacts",
        "a model directory of broken links",
        "check --select model-artifacts --model DIR",
        3,
        "MDL006 errors; not judged: context, precision and tokenizer agreement, its weights",
        artifacts_of_links,
        ("MDL006", "context, precision and tokenizer agreement", "its weights"),
    ),
    Case(
        "encodings",
        "a model directory of broken links",
        "check --select encodings --model DIR",
        3,
        "not judged: each link (not followed out of the tree), the directory (no text file)",
        encodings_of_links,
        ("not followed", "no text file under it"),
    ),
    Case(
        "images",
        "a dataset whose only image is a broken link",
        "check --select images --images DIR",
        3,
        "not judged: the dataset (no image file under it)",
        empty_dataset,
        ("IMG015", "no image file under it"),
    ),
    Case(
        "swappiness",
        "a host without /proc/sys/vm/swappiness",
        "check --select swappiness --root DIR",
        3,
        "not judged: vm.swappiness (the tunable is missing)",
        no_swappiness,
        ("swappiness",),
    ),
    Case(
        "gpu",
        "an nvidia-smi that never answers",
        "check --select gpu --timeout 1.5",
        3,
        "timed out while running nvidia-smi: the verdict is incomplete",
        hung_gpu_probe,
        ("timed out", "nvidia-smi"),
    ),
    Case(
        "bandwidth",
        "NVIDIA GPUs, and no PyTorch or CuPy to copy on them",
        "check --select bandwidth",
        3,
        "CPU measured; not judged: the GPUs' memory bandwidth",
        gpus_without_torch,
        ("the GPUs' memory bandwidth",),
    ),
    Case(
        "bandwidth",
        "another host's files (`--root` without `--same-host`)",
        "check --select bandwidth --root DIR",
        3,
        "not judged: the memory bandwidth (another host's files); this machine's is never measured in its place",
        another_hosts_files,
        ("the memory bandwidth", "another host's files"),
    ),
    Case(
        "docker", "no Docker daemon at the socket", "check --select docker", 1, "DKR003: the daemon is not running", no_docker, ("DKR003",)
    ),
    Case(
        "analyze",
        "a pasted llama-server log",
        "analyze server.log",
        3,
        "SRV007 from its slot lines; not judged: KV-cache pressure and queueing (a log does not show them)",
        pasted_llama_log,
        ("SRV007", "KV-cache pressure and queueing"),
    ),
)

SERVING_AUDIT = (
    ("serving", "a `/metrics` page without a KV gauge (llama.cpp)", "check --select serving --endpoint URL", 3,
     "not judged: KV-cache pressure (no llamacpp:kv_cache_usage_ratio); the values read are shown"),
    ("serving", "SGLang capacity gauges only", "check --select serving --endpoint URL", 3,
     "not judged: KV-cache pressure, queueing, preemption"),
    ("serving", "a line of 1 MiB carrying `vllm:num_requests_waiting`", "check --select serving --endpoint URL", 3,
     "not judged: queueing (the line was dropped)"),
    ("serving", "a server that accepts and never answers", "check --select serving --endpoint URL", 1,
     "SRV006 (error) after one 5 s timeout"),
    ("bench", "a server without `/metrics`", "bench --endpoint URL", 3, "SRV005, and not judged: the server's own diagnosis"),
)  # fmt: skip


@pytest.mark.parametrize("case", AUDIT, ids=[f"{c.check}: {c.given}" for c in AUDIT])
def test_an_input_a_check_cannot_judge_is_never_ready(case, tmp_path):
    args, env = case.build(tmp_path)
    result = cli(*args, "--format", "json", env=env)
    report = result.json()
    assert result.exit_code == case.exit_code, (result.exit_code, result.stdout[-2000:], result.stderr)
    assert report["summary"]["verdict"] == "incomplete" or any(f["severity"] == "error" for f in report["findings"])
    said = json.dumps([report["not_judged"], report["findings"], report["results"]])
    assert all(word in said for word in case.shows), (case.shows, said[:3000])
    text = cli(*args, env=env).stdout
    assert "Ready" not in text, text


@pytest.mark.parametrize(
    ("metrics", "exit_code"),
    [
        ((FIXTURES / "serving/llamacpp-np2-under-load.prom").read_text(), 3),
        ((FIXTURES / "serving/sglang-early-capacity-only.excerpt.prom").read_text(), 3),
        ('vllm:num_requests_running{m="x"} 1\nvllm:num_requests_waiting{m="' + "x" * (1 << 20) + '"} 7\n', 3),
    ],
    ids=["no KV gauge", "capacity only", "1 MiB line"],
)
def test_a_metrics_page_it_cannot_judge_is_never_ready(metrics, exit_code):
    with FaultServer(metrics=metrics) as server:
        result = cli("check", "--select", "serving", "--endpoint", server.url)
    assert result.exit_code == exit_code and "Ready" not in result.stdout and "not judged" in result.stdout


def audit_table() -> str:
    rows = [(c.check, c.given, c.command, c.exit_code, c.verdict) for c in AUDIT] + list(SERVING_AUDIT)
    lines = ["| Check or command | Given | Command | Exit | What the user reads |", "|---|---|---|---|---|"]
    lines += [f"| {check} | {given} | `decode-doctor {command}` | {code} | {verdict} |" for check, given, command, code, verdict in rows]
    return "\n".join(lines) + "\n"


def test_the_readme_audit_table_is_this_files():
    text = README.read_text()
    start = text.index("\n", text.index(TABLE_START)) + 1
    end = text.index(TABLE_END)
    if os.environ.get("DD_UPDATE_README"):
        README.write_text(text[:start] + audit_table() + text[end:])
        text = README.read_text()
        end = text.index(TABLE_END)
    assert text[start:end] == audit_table(), "the README's audit table drifted: python tests/support/regenerate.py rewrites it"


def test_what_a_pulled_in_check_could_not_judge_is_not_the_selected_verdict(tmp_path):
    """--select decode-budget pulls in model-artifacts; a GBK tokenizer_config.json leaves its chat template
    unknown, which is model-artifacts' coverage, not the budget's: the budget is judged, exit 0."""
    from .test_cli_contract import tiny_config

    model = tiny_config(tmp_path / "m")
    (model / "tokenizer_config.json").write_bytes('{"chat_template": "{{ messages }}", "描述": "模型"}'.encode("gbk"))
    budget = cli("check", "--select", "decode-budget", "--model", str(model), "--bandwidth", "10GB/s", "--format", "json")
    assert budget.exit_code == 0 and budget.json()["not_judged"] == [], budget.stdout[-1500:]
    artifacts = cli("check", "--select", "model-artifacts", "--model", str(model), "--format", "json")
    (unjudged,) = artifacts.json()["not_judged"]
    assert artifacts.exit_code == 3 and "chat template" in unjudged["what"]
