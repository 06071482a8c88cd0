"""The fuzzing harness: every parser and reader decode-doctor points at input it did not write, each
with the refusals it documents. Inputs are captured fixtures mutated (bytes flipped, cut, repeated,
spliced, numbers made extreme) and, for JSON, values swapped for values of other types. Anything a
target raises outside its refusals is a bug. tests/test_fuzz.py runs a bounded budget in CI;
benchmarks/fuzz.py runs 10⁵ inputs per target with rates, the slowest input and peak memory.
"""

from __future__ import annotations

import atexit
import json
import os
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"

EXTREMES = [
    b"-1", b"0", b"NaN", b"Infinity", b"1e309", b"18446744073709551616", b"9" * 5000, b'"64"', b"[256]", b"{}", b"null",
    b"true", b"\xff\xfe", b"\x00",
]  # fmt: skip
JSON_VALUES: list[Any] = [5, -1, 0, 2**64, 0.5, "x", "", None, True, [], [5], {}, {"a": {}}, "9" * 300]


@dataclass
class Target:
    name: str
    seeds: list[bytes]
    run: Callable[[bytes], Any]
    refusals: tuple[type[BaseException], ...] = ()
    json_seeds: bool = False  # also mutate structurally (values of other types)
    notes: list[str] = field(default_factory=list)
    captures: bool = False  # the seeds are real captures: benchmarks cut each at every byte


EVERY_BYTE_UP_TO = 32 << 10
EDGE = 4 << 10


def cut_positions(seed: bytes, step: int = 1) -> list[int]:
    """Where to cut a capture (a paste that stops anywhere): every step-th byte of one up to 32 KB;
    of a larger one (an -q -x of 90 KB costs seconds per thousand parses) every byte of its first and
    last 4 KB, where headers and closing tags live, and every line end between."""
    step = max(1, step)
    if len(seed) <= EVERY_BYTE_UP_TO or step > 1:
        return list(range(0, len(seed) + 1, step))
    middle = [i + 1 for i in range(EDGE, len(seed) - EDGE) if seed[i] == 0x0A]
    return list(range(EDGE)) + middle + list(range(len(seed) - EDGE, len(seed) + 1))


def cuts(target: Target, step: int = 1) -> Iterator[bytes]:
    """Each captured seed cut at the positions above."""
    for seed in target.seeds:
        for cut in cut_positions(seed, step):
            yield seed[:cut]


def _files(directory: Path, pattern: str = "*") -> list[bytes]:
    return [p.read_bytes() for p in sorted(directory.glob(pattern)) if p.is_file()]


class Scratch:
    """One reused file for readers that take a path."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="dd-fuzz-"))
        atexit.register(shutil.rmtree, self.dir, True)  # nothing left in /tmp after the run

    def write(self, name: str, data: bytes) -> Path:
        path = self.dir / name
        path.write_bytes(data)
        return path


def mutate(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
    """One mutation of data (a few edits stacked)."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(8)
        at = rng.randrange(len(out) + 1)
        if choice == 0 and out:  # flip bytes
            for _ in range(rng.randint(1, 8)):
                out[rng.randrange(len(out))] = rng.randrange(256)
        elif choice == 1:  # cut
            end = min(len(out), at + rng.randint(1, 1 + len(out) // 4))
            del out[at:end]
        elif choice == 2:  # truncate
            del out[at:]
        elif choice == 3 and out:  # repeat a slice
            end = min(len(out), at + rng.randint(1, 64))
            out[at:at] = bytes(out[at:end]) * rng.randint(2, 200)
        elif choice == 4:  # an extreme value where a number was
            digits = [i for i, b in enumerate(out) if 48 <= b <= 57]
            if digits:
                at = rng.choice(digits)
                end = at
                while end < len(out) and 48 <= out[end] <= 57:
                    end += 1
                out[at:end] = rng.choice(EXTREMES)
        elif choice == 5:  # splice another seed
            other = rng.choice(seeds)
            start = rng.randrange(len(other) + 1)
            out[at:at] = other[start : start + rng.randint(1, 512)]
        elif choice == 6:  # random bytes
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 32)))
        else:  # nesting
            out[at:at] = rng.choice([b"[", b"{", b"<a>", b"(", b'"']) * rng.randint(1, 3000)
    return bytes(out)


def mutate_json(rng: random.Random, data: bytes) -> bytes | None:
    """A value somewhere in the document replaced by one of another type (structure-aware)."""
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        return None
    slots: list[tuple[Any, Any]] = []

    def walk(node: Any, depth: int) -> None:
        if depth > 30:
            return
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            slots.append((node, key))
            walk(value, depth + 1)

    walk(document, 0)
    if not slots:
        return None
    for _ in range(rng.randint(1, 3)):
        node, key = rng.choice(slots)
        node[key] = rng.choice(JSON_VALUES)
    try:
        return json.dumps(document).encode()
    except (ValueError, TypeError, RecursionError):
        return None


def inputs(target: Target, count: int, seed: int = 0) -> Iterator[bytes]:
    """The seeds themselves, then count mutations of them (deterministic for a seed)."""
    rng = random.Random(f"{target.name}:{seed}")
    yield from target.seeds
    for _ in range(count):
        base = rng.choice(target.seeds)
        if target.json_seeds and rng.random() < 0.5:
            mutated = mutate_json(rng, base)
            if mutated is not None:
                yield mutated
                continue
        yield mutate(rng, base, target.seeds)


# --- the targets ---------------------------------------------------------------------------------


def targets() -> list[Target]:
    scratch = Scratch()
    return [
        _nvidia_xml(),
        _nvidia_text(),
        _nvidia_table(),
        _kernel_log(),
        _collect_env(),
        _accelerators(),
        _daemon_json(scratch),
        _docker_answers(),
        _referrers(),
        _safetensors(scratch),
        _gguf(scratch),
        _model_config(scratch),
        _model_directory(scratch),
        _gguf_through_the_checks(scratch),
        _torch_probe(scratch),
        _config_file(scratch),
        _config_file_structured(scratch),
        _encodings(),
        _image_headers(),
        _reports(scratch),
        _prometheus(),
        _sse(),
        _server_logs(),
        _calibration_state(scratch),
        _bandwidth_state(scratch),
    ]


def _nvidia_xml() -> Target:
    from decode_doctor.checks.gpu.nvidia import parse_smi_xml

    return Target(
        "nvidia-smi -q -x",
        _files(FIXTURES / "nvidia/nvidia-smi-q-x"),
        lambda d: parse_smi_xml(d.decode("utf-8", "replace")),
        (ValueError,),
        captures=True,
    )


def _nvidia_text() -> Target:
    from decode_doctor.checks.gpu.nvidia import classify_smi_failure, parse_smi_text

    seeds = _files(FIXTURES / "nvidia/nvidia-smi-q-text") + _files(FIXTURES / "nvidia/nvidia-smi-errors")

    def run(data: bytes) -> Any:
        text = data.decode("utf-8", "replace")
        classify_smi_failure(text)
        return parse_smi_text(text)

    return Target("nvidia-smi -q (text)", seeds, run, (ValueError,), captures=True)


def _nvidia_table() -> Target:
    from decode_doctor.checks.gpu.table import parse_smi_table

    seeds = _files(FIXTURES / "nvidia/nvidia-smi-table")
    return Target("nvidia-smi (table)", seeds, lambda d: parse_smi_table(d.decode("utf-8", "replace")), (ValueError,), captures=True)


def _kernel_log() -> Target:
    from decode_doctor.checks.gpu.nvidia import scan_kernel_log
    from decode_doctor.checks.gpu.xid import describe, group, urgency, xid_events

    errors = FIXTURES / "nvidia/nvidia-smi-errors"
    seeds = _files(errors, "*mesg*") + _files(errors, "syslog*") + _files(FIXTURES / "nvidia/kernel-logs")

    def run(data: bytes) -> Any:
        text = data.decode("utf-8", "replace")
        groups = group(xid_events(text.splitlines()))
        return scan_kernel_log(text), urgency(groups), [describe(item) for item in groups]

    return Target("kernel log", seeds, run, captures=True)


def _collect_env() -> Target:
    from decode_doctor.checks.gpu.collect_env import parse_collect_env, torch_errors

    def run(data: bytes) -> Any:
        text = data.decode("utf-8", "replace")
        return parse_collect_env(text), torch_errors(text.splitlines())

    return Target("collect_env", _files(FIXTURES / "nvidia/collect-env"), run, captures=True)


def _accelerators() -> Target:
    from decode_doctor.checks.accelerators import amd, jetson, rknpu

    def run(data: bytes) -> Any:
        text = data.decode("utf-8", "replace")
        try:
            gpus = [gpu.bandwidth_class for gpu in amd.parse(text)]
        except ValueError:
            gpus = []
        return gpus, jetson.parse(text), rknpu.find_version(text)

    seeds = [p.read_bytes() for p in sorted((FIXTURES / "accelerators").glob("*/*")) if p.is_file()]
    return Target("amd-smi, rocm-smi, jetson_clocks, rknpu", seeds, run, json_seeds=True, captures=True)


def _daemon_json(scratch: Scratch) -> Target:
    from decode_doctor.checks.docker.daemon_json import read_daemon_json
    from decode_doctor.checks.docker.engine import image_store, mirrors

    from .harness import make_context

    root = scratch.dir / "daemon-host"
    (root / "etc/docker").mkdir(parents=True)
    ctx = make_context(root)

    def run(data: bytes) -> Any:
        (root / "etc/docker/daemon.json").write_bytes(data)
        daemon, _ = read_daemon_json(ctx)
        return image_store({}, daemon), mirrors({}, daemon)

    return Target("daemon.json", _files(FIXTURES / "daemon-json"), run, json_seeds=True)


def _docker_answers() -> Target:
    from decode_doctor.checks.docker.engine import api_version, engine_answers, image_store, mirrors, referrers_exposed

    infos = _files(FIXTURES / "docker-info")
    versions = [d for d in _files(FIXTURES / "docker-version") if d.lstrip().startswith(b"{")]

    def run(data: bytes) -> Any:
        try:
            answer = json.loads(data)
        except (ValueError, RecursionError):
            return None
        version, info = engine_answers(answer, answer)
        store = image_store(info, None)
        return api_version(version), mirrors(info, None), referrers_exposed(version, store), sorted(info.get("Runtimes") or {})

    return Target("Docker Engine /info and /version", infos + versions, run, json_seeds=True)


def _referrers() -> Target:
    from decode_doctor.checks.docker.referrers import Answer, judge_referrers

    index = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []}).encode()
    seeds = [index, b"<html><body>mirror</body></html>", b"", b'{"errors": [{"code": "NOT_FOUND"}]}', index + b"\n{}"]

    def run(data: bytes) -> Any:
        return judge_referrers(Answer(200, "application/vnd.oci.image.index.v1+json", data))

    return Target("referrers answer", seeds, run, json_seeds=True)


def _safetensors(scratch: Scratch) -> Target:
    from decode_doctor.models.modelfiles import ModelFormatError, read_safetensors_header

    from .modelgen import write_safetensors

    path = scratch.dir / "seed.safetensors"
    write_safetensors(path, {"w": ("F16", [4, 4]), "b": ("BF16", [4])}, sparse=False)
    seeds = [path.read_bytes()]

    def run(data: bytes) -> Any:
        return read_safetensors_header(scratch.write("fuzz.safetensors", data))

    return Target("safetensors header", seeds, run, (ModelFormatError,))


def _gguf(scratch: Scratch) -> Target:
    from decode_doctor.models.modelfiles import ModelFormatError, read_gguf

    from .modelgen import llama_gguf

    seeds = [llama_gguf(scratch.dir / "seed.gguf").read_bytes()[:65536]]

    def run(data: bytes) -> Any:
        return read_gguf(scratch.write("fuzz.gguf", data))

    return Target("GGUF header", seeds, run, (ModelFormatError,))


def _model_config(scratch: Scratch) -> Target:
    from decode_doctor.models.architecture import UnknownArchitecture, from_config
    from decode_doctor.models.modelfiles import ModelFormatError, read_hf_directory

    from .published import CONFIGS

    directory = scratch.dir / "model"
    directory.mkdir()

    def run(data: bytes) -> Any:
        (directory / "config.json").write_bytes(data)
        info = read_hf_directory(directory)
        try:
            return from_config(info.config).params_total
        except UnknownArchitecture:
            return None

    seeds = [json.dumps(config).encode() for config in CONFIGS.values()]
    return Target("config.json", seeds, run, (ModelFormatError,), json_seeds=True)


MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json", "model.safetensors.index.json")


def _model_directory(scratch: Scratch) -> Target:
    """Every JSON file a model directory holds, driven through the checks that read them (the
    artifacts and budget checks, the estimate's sizing and plan), not only the parsers. An input is
    one JSON object of file name → document (mutated structurally or as bytes); an input that is not
    such an object is written as config.json."""
    from decode_doctor.models.hardware import lookup
    from decode_doctor.models.modelfiles import ModelFormatError, read_model
    from decode_doctor.models.plan import make_plan
    from decode_doctor.models.sizing import sizing

    from .harness import run_check
    from .published import PUBLISHED

    directory = scratch.dir / "model-dir"
    directory.mkdir()
    seeds = []
    for spec in PUBLISHED.values():
        tokens = {str(i): {"content": t, "special": True} for t, i in spec["tokenizer"]["special"].items()}
        documents = {
            "config.json": spec["config"],
            "generation_config.json": spec["generation"],
            "tokenizer_config.json": {"added_tokens_decoder": tokens, "eos_token": spec["tokenizer"]["eos"], "chat_template": "{{ x }}"},
            "tokenizer.json": {
                "model": {"vocab": {"a": 0, "b": 1}},
                "added_tokens": [{"id": i, "content": t} for t, i in spec["tokenizer"]["special"].items()],
            },
            "model.safetensors.index.json": {"metadata": {}, "weight_map": {"lm_head.weight": "model-00001-of-00002.safetensors"}},
        }
        seeds.append(json.dumps(documents).encode())
    device = lookup("H100-SXM")

    def run(data: bytes) -> Any:
        for name in MODEL_FILES:
            (directory / name).unlink(missing_ok=True)
        try:
            documents = json.loads(data)
        except (ValueError, RecursionError):
            documents = None
        if isinstance(documents, dict) and all(isinstance(k, str) for k in documents):
            for name, document in documents.items():
                if name in MODEL_FILES:
                    try:
                        (directory / name).write_text(json.dumps(document))
                    except (ValueError, TypeError, RecursionError):
                        (directory / name).write_bytes(data)
        else:
            (directory / "config.json").write_bytes(data)
        run_check("model-artifacts", models=(directory,), options={"context": 32768, "kv_dtype": "fp8"})
        run_check("decode-budget", models=(directory,), options={"bandwidth": 100.0})
        try:
            size = sizing(read_model(directory))
        except ModelFormatError:
            return None
        if size.cache:
            return make_plan(size, device, 4096, 8, "fp16", 2).fit
        return None

    return Target("model directory through the checks", seeds, run, json_seeds=True)


def _gguf_through_the_checks(scratch: Scratch) -> Target:
    """GGUF headers (metadata sizes included) through the artifacts and budget checks and a plan."""
    from decode_doctor.models.hardware import lookup
    from decode_doctor.models.modelfiles import ModelFormatError, read_model
    from decode_doctor.models.plan import make_plan
    from decode_doctor.models.sizing import sizing

    from .harness import run_check
    from .modelgen import llama_gguf

    seeds = [llama_gguf(scratch.dir / f"seed{n}.gguf", layers=n).read_bytes()[:65536] for n in (2, 4)]
    path = scratch.dir / "through.gguf"
    device = lookup("L4")

    def run(data: bytes) -> Any:
        path.write_bytes(data)
        run_check("model-artifacts", models=(path,))
        run_check("decode-budget", models=(path,), options={"bandwidth": 100.0})
        try:
            size = sizing(read_model(path))
        except ModelFormatError:
            return None
        return make_plan(size, device, 4096, 4).fit if size.cache else None

    return Target("GGUF through the checks", seeds, run)


def _torch_probe(scratch: Scratch) -> Target:
    """What the --python probe prints, and the torch/version.py it points at, through probe_torch."""
    from decode_doctor.checks.gpu.options import GpuOptions
    from decode_doctor.checks.gpu.torchprobe import probe_torch
    from decode_doctor.engine.context import Context
    from decode_doctor.engine.findings import CommandRecord
    from decode_doctor.engine.options import OptionValues

    torch_dir = scratch.dir / "site" / "torch"
    torch_dir.mkdir(parents=True)
    line = json.dumps({"python": "/usr/bin/python3", "torch_dir": str(torch_dir), "cudnn": "9.1.0"})
    version = b"__version__ = '2.5.1+cu124'\ncuda: Optional[str] = '12.4'\nhip = None\ngit_version = 'abc'\n"
    seeds = [
        line.encode() + b"\n---\n" + version,
        b"warning: x\n" + line.encode() + b"\n---\n" + b"__version__ = '2.5.1+cpu'\ncuda = None\n",
    ]

    class Runner:
        output = ""

        def run(self, argv: Any, **kw: Any) -> CommandRecord:
            return CommandRecord(tuple(argv), 0, 0.01, self.output, "")

    runner = Runner()

    def run(data: bytes) -> Any:
        printed, _, file = data.partition(b"\n---\n")
        runner.output = printed.decode("utf-8", "replace")
        (torch_dir / "version.py").write_bytes(file)
        ctx = Context(runner=runner, options=OptionValues((GpuOptions(python="/usr/bin/python3"),)))  # type: ignore[arg-type]
        return probe_torch(ctx)

    return Target("--python probe output and torch/version.py", seeds, run, captures=False)


TOML_KEYS = ("select", "ignore", "fail-on", "timeout", "tool", "other")
TOML_VALUES = (
    "0", "-1", "1e309", "inf", "nan", "true", '"x"', '"warning"', '"never"', "[]", "[1]", '["SWAP"]', "{}", '{code = 5}',
    '[{code = "SWAP001", reason = 3}]', '[{code = "SWAP001"}, "gpu"]', "9" * 400, '"' + "é" * 50 + '"', "1979-05-27T07:32:00Z",
)  # fmt: skip


def _config_file_structured(scratch: Scratch) -> Target:
    """decode-doctor.toml with its keys given values of every TOML type (what byte mutations of a
    valid file rarely reach: `ignore = 0`)."""
    from decode_doctor.engine.config import ConfigError, load_config

    directory = scratch.dir / "cwd-own"
    directory.mkdir()
    rng = random.Random("toml")
    seeds = [
        "\n".join(f"{rng.choice(TOML_KEYS)} = {rng.choice(TOML_VALUES)}" for _ in range(rng.randint(1, 4))).encode() + b"\n"
        for _ in range(200)
    ]

    def run(data: bytes) -> Any:
        (directory / "decode-doctor.toml").write_bytes(data)
        return load_config(None, directory)

    return Target("decode-doctor config (decode-doctor.toml)", seeds, run, (ConfigError,))


def _config_file(scratch: Scratch) -> Target:
    from decode_doctor.engine.config import ConfigError, load_config

    directory = scratch.dir / "cwd"
    directory.mkdir()
    seeds = [
        b'[tool.decode-doctor]\nselect = ["SWAP", "gpu"]\nfail-on = "warning"\ntimeout = 30\n'
        b'ignore = ["SWAP002", { code = "SWAP003", reason = "containers" }]\n',
        b"[tool]\nname = 'x'\n",
    ]

    def run(data: bytes) -> Any:
        (directory / "pyproject.toml").write_bytes(data)
        return load_config(None, directory)

    return Target("decode-doctor config (pyproject.toml)", seeds, run, (ConfigError,))


def _encodings() -> Target:
    from decode_doctor.checks.encodings.textenc import converted_bytes, decide

    text = '{"description": "这是一个大型语言模型的配置文件", "note": "Größe", "jp": "設定ファイル"}'
    seeds = [text.encode("utf-8"), text.encode("gb18030"), "Größe und Maß\n".encode("cp1252"), "設定ファイル".encode("shift_jis")]

    def run(data: bytes) -> Any:
        verdict = decide(data, ".json")
        if getattr(verdict, "encoding", None) and getattr(verdict, "text", None) is not None:
            converted_bytes(verdict, False)
        return verdict

    return Target("encodings detection", seeds, run)


def _image_headers() -> Target:
    from decode_doctor.checks.images.headers import read_header, sniff

    from .imagegen import encode, frames, gif_extents_bomb, picture, webp_canvas_bomb

    image = picture(24, 16)
    seeds = [encode(image, fmt) for fmt in ("PNG", "JPEG", "GIF", "WEBP", "BMP", "TIFF", "ICO", "TGA")]
    seeds += [gif_extents_bomb(), webp_canvas_bomb()]
    animated = frames(3)
    seeds.append(encode(animated[0], "GIF", save_all=True, append_images=animated[1:]))

    def run(data: bytes) -> Any:
        fmt = sniff(data[:64])
        return read_header(fmt, data) if fmt else None

    return Target("image headers", seeds, run)


def _reports(scratch: Scratch) -> Target:
    from decode_doctor.engine.registry import load
    from decode_doctor.reports.compare import ReportError, difference, load_report
    from decode_doctor.reports.fleet import fleet, render_fleet

    from .harness import cli

    hosts = ("swap60-rhel7", "gpu-h200", "boot-regress")
    seeds = [
        cli("check", "--root", str(FIXTURES / "hosts" / h), "--select", "swappiness,gpu", "--format", "json").stdout.encode() for h in hosts
    ]
    checks = load().checks
    baseline = scratch.write("baseline.json", seeds[0])

    def run(data: bytes) -> Any:
        path = scratch.write("fuzz-report.json", data)
        report = load_report(path)
        before = load_report(baseline)
        merged = fleet([("a", before), ("b", report)], 0.0, max_age_s=60.0)
        return difference(before, report, (baseline, path), checks).lines(), [render_fleet(merged, fmt) for fmt in ("text", "json", "html")]

    return Target("reports for diff and merge", seeds, run, (ReportError,), json_seeds=True)


def _prometheus() -> Target:
    from decode_doctor.checks.serving.promtext import parse

    return Target("Prometheus /metrics", _files(FIXTURES / "serving", "*.prom"), parse, (ValueError,))


def _sse() -> Target:
    from decode_doctor.checks.serving.client import ClientError, Record, _take

    seeds = [
        line for line in (FIXTURES / "serving/llamacpp-chat-stream-with-timings.sse").read_bytes().split(b"\n") if line.startswith(b"data:")
    ]

    def run(data: bytes) -> Any:
        record = Record()
        return _take(record, data[5:].strip(), 1.0, 0.5)

    return Target("SSE events", [s for s in seeds if s != b"data: [DONE]"], run, (ClientError,), json_seeds=False)


def _server_logs() -> Target:
    """Pasted vLLM, SGLang and llama-server logs, read and judged as analyze does."""
    from decode_doctor.checks.serving.check import Serving
    from decode_doctor.checks.serving.logtext import read_log
    from decode_doctor.checks.serving.pasted import analyze_log

    check = Serving()

    def run(data: bytes) -> Any:
        log = read_log(data.decode("utf-8", "replace"))
        return analyze_log(check, log, "pasted.log") if log is not None else None

    return Target("pasted server logs", _files(FIXTURES / "serving/logs"), run, captures=True)


def _calibration_state(scratch: Scratch) -> Target:
    """The calibration records of the state directory (statefile.read_state): never raises."""
    import time

    from decode_doctor.engine.statefile import read_state
    from decode_doctor.models.calibration import Calibration

    path = scratch.dir / "calibration.json"
    seed = {
        "host": "h/cpu", "engine": "llama.cpp", "engine_version": "0.3.36", "threads": 2, "weight_type": "F16", "fixed_s": 0.0001,
        "s_per_byte": 3e-11, "s_per_unit": 1e-12, "s_per_kv_byte": 1e-11, "spread": 0.05, "measured_at": time.time() - 60,
        "points": [[1e8, 0.004, 0.01], [3e8, 0.011, 0.02]], "passes": 2, "prompt": "batched",
    }  # fmt: skip

    def run(data: bytes) -> Any:
        path.write_bytes(data)
        return read_state(path, Calibration)

    return Target("calibration records (state file)", [json.dumps([seed, seed]).encode()], run, json_seeds=True)


def _bandwidth_state(scratch: Scratch) -> Target:
    """The quiet bandwidth figures of the state directory (load_quiet): never raises."""
    import time

    from decode_doctor.checks.bandwidth.quiet import STORE, load_quiet

    measured = {
        "read_gbps": 40.0, "copy_gbps": 30.0, "read_spread": 0.01, "copy_spread": 0.01, "threads": 2,
        "buffer_bytes": 1 << 28, "passes": 3, "wall_s": 1.0, "other_load": 0.0,
    }  # fmt: skip
    figure = {"measured_at": time.time() - 60, "machine": "h/cpu/64 GiB", "facts": {"cpu": {"measured": measured}}}

    def run(data: bytes) -> Any:
        (scratch.dir / STORE).write_bytes(data)
        return load_quiet(scratch.dir)

    return Target("bandwidth figures (state file)", [json.dumps({"figures": [figure, figure]}).encode()], run, json_seeds=True)


def run_one(target: Target, data: bytes) -> BaseException | None:
    """The exception a target raised outside its refusals, or None."""
    try:
        target.run(data)
    except target.refusals:
        return None
    except Exception as exc:
        return exc
    return None


def describe(exc: BaseException) -> str:
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    where = f"{os.path.relpath(frame.tb_frame.f_code.co_filename, REPO)}:{frame.tb_lineno}" if frame else "?"
    return f"{type(exc).__name__} at {where}: {str(exc)[:160]}"
