"""What one part of the output says agrees with what another part says (issue 51, "wrong in both
languages"): a plan's sentences with its own figures and with the command lines it prints, the
KV-cache window with the layers that keep it, and a check's reason with the check it depends on."""

from __future__ import annotations

import re
import shlex
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from decode_doctor.models.architecture import CacheKind
from decode_doctor.models.sizing import sizing

from .conftest import FIXTURES
from .support.fakes import fake_tool, printing
from .support.harness import cli
from .test_plan_deploy import MODELS, config_only, model_dir, published

# --- a plan's text, its figures and its command lines ----------------------------------------------

# (device, GPUs, context, sequences at once, KV type): plans that fit, plans whose lines lower the
# sequences or the context, plans that cannot start (the nearest that does is printed), two nodes
SCENARIOS = [
    ("H100-SXM", 1, 4096, 1, "fp16"),
    ("H100-SXM", 1, 32768, 32, "fp16"),
    ("H100-SXM", 2, 131072, 64, "fp8"),
    ("H100-SXM", 16, 32768, 16, "fp16"),
    ("L40S", 1, 8192, 8, "fp8"),
    ("L4", 1, 32768, 32, "fp8"),
    ("L4", 1, 131072, 16, "fp16"),
    ("RTX 4090", 2, 4096, 4, "q4_0"),
]


@dataclass
class Line:
    engine: str
    argv: list[str]
    notes: list[str] = field(default_factory=list)

    def value(self, flag: str) -> int | None:
        return int(self.argv[self.argv.index(flag) + 1]) if flag in self.argv else None

    @property
    def served(self) -> tuple[int, int]:
        """(context per sequence, sequences at once) as the line's own flags set them."""
        if self.engine == "vllm":
            return self.value("--max-model-len") or 0, self.value("--max-num-seqs") or 0
        slots = self.value("-np") or 0
        return (self.value("-c") or 0) // max(slots, 1), slots

    @property
    def gpus(self) -> int:
        return (self.value("--tensor-parallel-size") or 1) * (self.value("--pipeline-parallel-size") or 1)


def printed_lines(text: str) -> list[Line]:
    lines: list[Line] = []
    for row in text.splitlines():
        if row.startswith(("  vllm serve ", "  llama-server ")):
            argv = shlex.split(row.replace('"$HEAD_IP"', "10.0.0.1"))
            lines.append(Line(argv[0], argv))
        elif row.startswith("  note: ") and lines:
            lines[-1].notes.append(row[len("  note: ") :])
    return lines


def number(text: str) -> int:
    return int(text.replace(",", ""))


def device_count(text: str) -> int:
    row = next(row for row in text.splitlines() if row.startswith("device "))
    nodes = re.search(r"device\s+(\d+) nodes × (\d+) × ", row)
    if nodes:
        return int(nodes[1]) * int(nodes[2])
    count = re.search(r"device\s+(\d+) × ", row)
    return int(count[1]) if count else 1


def stated_at_most(text: str, context: int) -> int | None:
    found = re.search(rf"at {context:,} tokens, at most ([\d,]+) sequences?", text)
    return number(found[1]) if found else None


def nearest_figures(text: str) -> tuple[int, dict[str, tuple[int, int]]] | None:
    """The nearest plan's sentence: its GPUs, and each engine's (context, sequences); None without one."""
    found = re.search(r"^the nearest plan that starts: (\d+) GPUs, (.*); its command lines follow$", text, re.M)
    if found is None:
        return None
    both = re.fullmatch(r"at ([\d,]+) tokens × ([\d,]+) sequences?", found[2])
    if both:
        return int(found[1]), {"*": (number(both[1]), number(both[2]))}
    each = re.findall(r"([\w-]+(?:, [\w-]+)*) at ([\d,]+) tokens × ([\d,]+) sequences?", found[2])
    assert each, found[0]
    figures = {engine: (number(c), number(n)) for engines, c, n in each for engine in engines.split(", ")}
    return int(found[1]), figures


@pytest.mark.parametrize("name", MODELS)
def test_a_plans_text_agrees_with_its_figures_and_its_command_lines(tmp_path, name):
    """Every plan the plan tests use, on every device of SCENARIOS: the lines printed are for the GPUs the
    text names, at the context and sequences the text names; "no command lines" is never followed by
    lines the text does not say are the nearest plan's."""
    model = model_dir(tmp_path, name)
    for device, gpus, context, concurrency, kv in SCENARIOS:
        args = ("estimate", "--model", str(model), "--gpu", device, "--gpus", str(gpus), "--context", str(context))
        proc = cli(*args, "--concurrency", str(concurrency), "--kv-dtype", kv, "--lang", "en")
        if proc.exit_code == 2:
            continue  # refused before planning (a tensor size the heads do not divide): no plan to read
        where = (name, device, gpus, context, concurrency, kv)
        text = proc.stdout
        lines = printed_lines(text)
        nearest = nearest_figures(text)
        if "no command lines" in text and lines:
            # the lines are the nearest plan's, and the text says so, with the figures they set
            assert nearest is not None, (where, text)
            nearest_gpus, figures = nearest
            assert nearest_gpus > device_count(text), where
            for line in lines:
                assert line.engine == "llama-server" or line.gpus == nearest_gpus, (where, line.argv)
                assert line.served == figures.get(line.engine, figures.get("*")), (where, line.argv, figures)
            continue
        assert nearest is None, where
        for line in lines:
            notes = [note for other in lines if other.engine == line.engine for note in other.notes]  # node 0's line holds them
            if line.engine == "vllm":
                assert line.gpus == device_count(text), (where, line.argv)
            served_context, served_sequences = line.served
            assert 1 <= served_sequences <= concurrency and 1 <= served_context <= context, (where, line.argv)
            if served_sequences < concurrency:  # lowered: a note on that line names the figure it printed
                assert any(f"lowered to {served_sequences}:" in note or "one sequence at a time" in note for note in notes), (
                    where,
                    line.argv,
                    notes,
                )
                if line.engine == "vllm" and served_context == context:  # the plan's own limit, in the limits row
                    assert stated_at_most(text, context) == served_sequences, (where, line.argv)
            if served_context < context:
                assert any(f"{served_context:,}" in note for note in notes), (where, line.argv, notes)


@pytest.mark.parametrize(
    ("name", "device", "kv", "context", "concurrency", "figures"),
    [
        # the plan of issue 51: the nearest plan said "× 32" above a line with --max-num-seqs 26
        ("Llama-4-Scout-17B-16E-Instruct", "H100-SXM", "fp16", 32768, 32, {"vllm": (4, 26), "llama-server": (4, 26)}),
        # vLLM's fp8 and llama.cpp's q8_0 hold different numbers of sequences: each engine its own figure
        ("DeepSeek-V2-Lite-Chat", "L4", "fp8", 32768, 32, {"vllm": (2, 8), "llama-server": (2, 7)}),
    ],
)
def test_the_nearest_plan_names_the_figures_of_the_lines_it_prints_in_both_languages(
    tmp_path, name, device, kv, context, concurrency, figures
):
    model = model_dir(tmp_path, name)
    args = ("estimate", "--model", str(model), "--gpu", device, "--kv-dtype", kv, "--context", str(context))
    english = cli(*args, "--concurrency", str(concurrency), "--lang", "en").stdout
    lines = {line.engine: line for line in printed_lines(english)}
    assert (lines["vllm"].gpus, lines["vllm"].served[1]) == figures["vllm"]
    assert {engine: line.served[1] for engine, line in lines.items()} == {engine: n for engine, (_, n) in figures.items()}
    assert "no command lines: not one sequence fits on 1 GPU, so no engine would start on it" in english
    gpus, stated = nearest_figures(english) or (0, {})
    assert gpus == figures["vllm"][0]
    for engine, line in lines.items():
        assert stated.get(engine, stated.get("*")) == line.served, (engine, stated)
    chinese = cli(*args, "--concurrency", str(concurrency), "--lang", "zh-CN").stdout
    assert "1 张 GPU 的方案没有启动命令" in chinese and "没有启动命令：" not in chinese.replace("方案没有启动命令：", "")
    said = re.search(r"^最接近的可行方案：(\d+) 张 GPU，(.*)；启动命令如下$", chinese, re.M)
    assert said is not None, chinese
    assert int(said[1]) == figures["vllm"][0]
    shown = [(number(c), number(n)) for c, n in re.findall(r"([\d,]+) 个 token × ([\d,]+) 个序列", said[2])]
    assert sorted(set(shown)) == sorted({line.served for line in lines.values()}), (said[0], shown)
    assert f"--max-num-seqs {figures['vllm'][1]}" in chinese


# --- the KV-cache window belongs to the layers that keep it ----------------------------------------


def stated_cache(text: str) -> dict[str, tuple[int, set[int]]]:
    """The architecture row's "KV cache in 36 chunked (chunks of 8,192 tokens), 12 full": kind → (layers, windows)."""
    row = next(row for row in text.splitlines() if row.startswith("architecture "))
    segment = row.split("KV cache in ", 1)[1].split("; ", 1)[0]
    items = re.findall(r"(\d+) (\w+)(?: \((?:window|chunks of) ((?:[\d,]+(?:, )?)+) tokens\))?", segment)
    assert items, row
    return {kind: (int(count), {number(w) for w in re.findall(r"\d[\d,]*\d|\d", windows)}) for count, kind, windows in items}


@pytest.mark.parametrize("name", MODELS)
def test_each_window_is_named_beside_the_layers_that_keep_it(tmp_path, name):
    size = sizing(config_only(name))
    proc = cli("estimate", "--model", str(model_dir(tmp_path, name)), "--gpu", "H100-SXM", "--gpus", "8", "--lang", "en")
    if proc.exit_code == 2:
        proc = cli("estimate", "--model", str(model_dir(tmp_path, name)), "--gpu", "H100-SXM", "--lang", "en")
    stated = stated_cache(proc.stdout)
    expected = {
        CacheKind(kind).label: (
            sum(layer.kind == kind for layer in size.cache),
            {layer.window for layer in size.cache if layer.kind == kind and layer.window},
        )
        for kind in {layer.kind for layer in size.cache}
    }
    assert stated == expected, (name, proc.stdout.splitlines()[1])
    assert not stated.get("full", (0, set()))[1] and not stated.get("mla", (0, set()))[1]


HYBRIDS = [name for name in MODELS if name.startswith(("Nemotron-H", "Qwen3-Next"))]


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
@pytest.mark.parametrize("name", HYBRIDS)
def test_a_hybrid_models_layer_note_adds_up_to_its_layers_in_both_languages(tmp_path, name, lang):
    """Nemotron-H's note once said "of 118 layers 10 are attention; the other 54 are Mamba-2" (10 + 54 ≠
    118: the MLP layers were left out, and the Chinese invented "the rest"). Every count the note gives
    adds up to the layers it names, and to the architecture's own count."""
    size = sizing(config_only(name))
    proc = cli("estimate", "--model", str(model_dir(tmp_path, name)), "--gpu", "H100-SXM", "--gpus", "8", "--lang", lang)
    note = next(line for line in proc.stdout.splitlines() if "Mamba" in line or "DeltaNet" in line)
    counts = [int(n) for n in re.findall(r"\d+", note.replace("Mamba-2", "Mamba"))]
    assert size.layers in counts, (lang, note)
    counts.remove(size.layers)
    assert sum(counts) == size.layers, (lang, note)


def test_llama_4_chunks_its_rope_layers_and_its_nope_layers_keep_the_whole_context(tmp_path):
    """Llama 4 Scout's public config.json: attention_chunk_size 8,192 on the layers whose no_rope_layers
    entry is 1 (RoPE, chunked attention), every fourth layer (0: NoPE) attending to the whole context."""
    config = published("Llama-4-Scout-17B-16E-Instruct")
    text = config["text_config"]
    size = sizing(config_only("Llama-4-Scout-17B-16E-Instruct"))
    assert [layer.kind == CacheKind.CHUNKED for layer in size.cache] == [bool(rope) for rope in text["no_rope_layers"]]
    assert {layer.window for layer in size.cache if layer.kind == CacheKind.CHUNKED} == {text["attention_chunk_size"]}
    assert all(layer.window is None for layer in size.cache if layer.kind == CacheKind.FULL)
    per_layer = 2 * text["num_key_value_heads"] * text["head_dim"] * 2  # K and V, fp16
    assert size.kv_bytes(32768, "fp16") == (12 * 32768 + 36 * 8192) * per_layer  # the full layers hold all 32,768
    model = str(model_dir(tmp_path, "Llama-4-Scout-17B-16E-Instruct"))
    english = cli("estimate", "--model", model, "--gpu", "H100-SXM", "--gpus", "8", "--lang", "en").stdout
    assert "KV cache in 36 chunked (chunks of 8,192 tokens), 12 full;" in english
    chinese = cli("estimate", "--model", model, "--gpu", "H100-SXM", "--gpus", "8", "--lang", "zh-CN").stdout
    assert "36 个分块注意力层（每块 8,192 个 token）、12 个全注意力层；" in chinese


# --- a check's reason agrees with the check it depends on ----------------------------------------


@pytest.fixture(autouse=True)
def no_nvml_of_this_machine(monkeypatch):
    """The host trees stand for this machine (--same-host), but this machine's own NVML must not answer."""
    from decode_doctor.checks.gpu import nvidia

    monkeypatch.setattr(nvidia, "probe_nvml", lambda: None)


def gpu_host(tmp_path: Path, *, dockerd_in_tree: bool, docker_on_path: bool) -> tuple[Path, dict[str, str]]:
    host = tmp_path / "host"
    (host / "etc").mkdir(parents=True)
    if dockerd_in_tree:
        (host / "usr/bin").mkdir(parents=True)
        (host / "usr/bin/dockerd").write_text("")
    bin_dir = tmp_path / "bin"
    fake_tool(bin_dir, "dmesg", "exit 1")
    fake_tool(bin_dir, "journalctl", "exit 1")
    env = fake_tool(bin_dir, "nvidia-smi", printing(FIXTURES / "nvidia/nvidia-smi-q-x/tesla-t4-driver-515.105.01-v11.xml"))
    if docker_on_path:
        env = fake_tool(bin_dir, "docker", "exit 1")
    return host, env


def container_report(host: Path, env: dict[str, str], language: str) -> dict:
    argv = ("check", "--select", "docker,nvidia-container", "--root", str(host), "--same-host", "--format", "json")
    return cli(*argv, "--lang", language, env=env).json()


@pytest.mark.parametrize(
    ("dockerd_in_tree", "docker_on_path", "socket_kind"),
    [
        (False, True, "gone"),  # issue 51: "Docker is not installed" beside DKR003's "not running"
        (True, False, "gone"),
        (True, True, "stale"),  # a socket file nobody listens on: a crashed dockerd
    ],
)
def test_nvidia_container_says_what_the_docker_check_found(tmp_path, dockerd_in_tree, docker_on_path, socket_kind):
    host, env = gpu_host(tmp_path, dockerd_in_tree=dockerd_in_tree, docker_on_path=docker_on_path)
    path = tmp_path / f"{socket_kind}.sock"
    if socket_kind == "stale":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    env["DOCKER_HOST"] = f"unix://{path}"
    for language, not_installed, not_running in (("en", "not installed", "daemon is not running"), ("zh-CN", "未安装", "守护进程未运行")):
        report = container_report(host, env, language)
        docker = report["facts"]["docker"]
        found = {finding["code"]: finding["message"] for finding in report["findings"]}
        assert docker["installed"] and not docker["reachable"] and "DKR003" in found, (language, docker, found)
        assert not_running in found["DKR003"]
        result = next(r for r in report["results"] if r["check"] == "nvidia-container")
        assert result["state"] != "skipped", (language, result["reason"])
        # the runtimes are daemon.json's because the daemon is not running: said as DKR003 says it
        assert not_running in found["CTK003"] and not_installed not in found["CTK003"], (language, found["CTK003"])
        assert docker["endpoint"] in found["CTK003"]


def test_without_docker_both_checks_say_it_is_not_installed(tmp_path):
    host, env = gpu_host(tmp_path, dockerd_in_tree=False, docker_on_path=False)
    (tmp_path / "bin" / "cat").symlink_to(shutil.which("cat") or "/bin/cat")  # the fake nvidia-smi's
    env["PATH"] = str(tmp_path / "bin")  # the fakes alone: no docker of this machine's
    report = container_report(host, {**env, "DOCKER_HOST": ""}, "en")
    docker = report["facts"]["docker"]
    result = next(r for r in report["results"] if r["check"] == "nvidia-container")
    if docker["installed"]:  # this machine's default socket is there, and answers for the tree (--same-host)
        assert result["reason"] != "Docker is not installed"
    else:
        assert (result["state"], result["reason"]) == ("skipped", "Docker is not installed")
