"""Every `vllm serve` line `decode-doctor estimate` prints, checked by vLLM itself.

    python benchmarks/bench_vllm_lines.py [--vllm 0.33.0] [--env DIR] [--quick] [--out FILE]

Installs the named vLLM into a scratch virtual environment (once; pip fetches it and everything it
needs, several GB), then, for a corpus of public config.json files (the ones the tests use, and the
Qwen models with the YaRN block their model cards tell users to add) × GPU models × scenarios (one
GPU, a node of eight, two nodes at the model's longest context), asks `estimate` for its plan and
hands every vLLM line it prints, one per node, to vLLM's own validation: `make_arg_parser` and
`validate_parsed_serve_args`, then `EngineArgs.create_engine_config` (ModelConfig with its derived
max_model_len, ParallelConfig with its world-size rule, CacheConfig, the model classes' own config
updates such as Nemotron-H's SSM state type). vLLM runs here without a GPU: a test double of NVML
(tests/support/nvml/libnvidia-ml.c) presents a node of eight of the plan's GPUs, and a stub of the
CUDA driver (generated from the entry points vLLM's extensions import) answers "no device" to the
calls that are never made while configuring. The plans `estimate` refuses are put to vLLM too, and its
answer printed beside the tool's. The table at the end is what the README quotes.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # tests/support: the public configs and the NVML double

GPUS = ("H100-SXM", "H200-SXM", "A100-SXM-80GB", "L40S", "L4", "RTX 4090", "B200")
SCENARIOS = (("one GPU", 1, 8192, 16), ("a node of 8", 8, 32768, 32), ("two nodes of 8", 16, None, 8))
REFUSALS = (3, 6)  # tensor-parallel sizes that break some models' rules: the tool's refusals, put to vLLM
YARN = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}  # Qwen's model cards, "Processing Long Texts"

WORKER = r"""
import json, os, shlex, sys, traceback
os.environ.setdefault("HF_HUB_OFFLINE", "1")
from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.engine.arg_utils import EngineArgs

parser = make_arg_parser(FlexibleArgumentParser(description="decode-doctor's proof"))
print("READY", flush=True)
for raw in sys.stdin:
    job = json.loads(raw)
    saved = {k: os.environ.get(k) for k in job["env"]}
    os.environ.update(job["env"])
    try:
        if job.get("load_rule"):  # what QKVParallelLinear does with the KV heads at model load, with vLLM's own divide()
            from vllm.distributed.utils import divide
            kv, tp = job["load_rule"]["kv"], job["load_rule"]["tp"]
            divide(tp, kv) if tp >= kv else divide(kv, tp)
        args = parser.parse_args(job["argv"])
        if getattr(args, "model_tag", None):
            args.model = args.model_tag
        validate_parsed_serve_args(args)
        config = EngineArgs.from_cli_args(args).create_engine_config()
        answer = {"ok": True, "max_model_len": config.model_config.max_model_len, "kv": config.cache_config.cache_dtype,
                  "ssm": config.cache_config.mamba_ssm_cache_dtype, "backend": str(config.parallel_config.distributed_executor_backend)}
    except SystemExit as exc:
        answer = {"ok": False, "error": f"argparse refused it (exit {exc.code})"}
    except AssertionError as exc:
        answer = {"ok": False, "error": f"at model load: AssertionError: {exc}"}
    except BaseException as exc:
        answer = {"ok": False, "error": f"{type(exc).__name__}: " + " ".join(str(exc).split())[:600]}
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    print(json.dumps({"id": job["id"], **answer}), flush=True)
"""


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def ensure_env(env: Path, version: str) -> Path:
    python = env / "bin" / "python"
    probe = [str(python), "-c", "import importlib.metadata as m; print(m.version('vllm'))"]
    if python.exists() and subprocess.run(probe, capture_output=True, text=True).stdout.strip() == version:
        return python
    say(f"installing vLLM {version} into {env} (several GB, minutes)…")
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", f"vllm=={version}"], check=True)
    return python


def native(env: Path, python: Path) -> Path:
    """The NVML double and a CUDA driver stub, built into env/native."""
    out = env / "native"
    out.mkdir(exist_ok=True)
    compiler = os.environ.get("CC", "cc")
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", "-o", str(out / "libnvidia-ml.so.1"), str(REPO / "tests/support/nvml/libnvidia-ml.c")],
        check=True,
    )
    site = Path(
        subprocess.run(
            [str(python), "-c", "import vllm, os; print(os.path.dirname(os.path.dirname(vllm.__file__)))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    libraries = [*site.joinpath("vllm").glob("*.so"), *site.joinpath("torch/lib").glob("*.so")]
    names: set[str] = set()
    for library in libraries:
        listed = subprocess.run(["nm", "-D", "--undefined-only", str(library)], capture_output=True, text=True).stdout
        names.update(line.split()[-1].split("@")[0] for line in listed.splitlines() if line.split() and line.split()[-1].startswith("cu"))
    driver = site / "triton/backends/nvidia/driver.c"  # triton's launcher, built at import time, links the driver too
    if driver.exists():
        import re

        names.update(word for word in re.findall(r"\bcu[A-Z]\w*", driver.read_text()) if not word.endswith(("_t", "Handle")))
    stub = out / "libcuda.c"
    stub.write_text(
        "/* the CUDA driver with no device: every entry point answers CUDA_ERROR_NO_DEVICE */\n"
        + "".join(f"int {name}(void) {{ return 100; }}\n" for name in sorted(n for n in names if n[2:3].isupper()))
    )
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(out / "libcuda.so.1"), str(stub)], check=True)
    (out / "libcuda.so").unlink(missing_ok=True)
    (out / "libcuda.so").symlink_to("libcuda.so.1")
    return out


def corpus(scratch: Path) -> dict[str, Path]:
    from support.published import CONFIGS, PUBLISHED

    configs: dict[str, dict[str, Any]] = {name: data["config"] for name, data in PUBLISHED.items()}
    configs.update(CONFIGS)
    for path in sorted((REPO / "fixtures/models/configs").glob("*.json")):
        configs[path.stem] = json.loads(path.read_text())
    for name in ("Qwen2.5-7B-Instruct", "Qwen3-30B-A3B"):
        if name in configs:
            configs[f"{name}+YaRN"] = {**configs[name], "rope_scaling": dict(YARN)}
    found = {}
    for name, config in sorted(configs.items()):
        directory = scratch / "models" / name
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "config.json").write_text(json.dumps(config))
        found[name] = directory
    return found


def plan(model: Path, gpu: str, gpus: int, context: int | None, concurrency: int) -> tuple[int, dict[str, Any] | None, str]:
    from click.testing import CliRunner

    from decode_doctor.cli.main import cli

    args = ["estimate", "--model", str(model), "--gpu", gpu, "--gpus", str(gpus), "--concurrency", str(concurrency), "--format", "json"]
    if context is not None:
        args += ["--context", str(context)]
    result = CliRunner().invoke(cli, args, env={"DECODE_DOCTOR_LANG": "en"})
    data = json.loads(result.stdout) if result.stdout.lstrip().startswith("{") else None
    return result.exit_code, data, result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""


def gpus_env(gpu: str) -> str:
    from decode_doctor.models.hardware import lookup

    device = lookup(gpu)
    mib = (device.memory_bytes or 0) >> 20
    return ";".join(f"{device.name}|{mib}|00000000:{0x10 + i:02X}:00.0|GPU-{i}|0" for i in range(8))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm", default="0.33.0")
    parser.add_argument("--env", type=Path, default=Path.home() / ".cache/decode-doctor/vllm-proof")
    parser.add_argument("--quick", action="store_true", help="H100-SXM only, and a third of the corpus")
    parser.add_argument("--out", type=Path, default=None, help="also write the table (Markdown) here")
    options = parser.parse_args()
    env = options.env / options.vllm
    python = ensure_env(env, options.vllm)
    libraries = native(env, python)
    scratch = Path(tempfile.mkdtemp(prefix="dd-vllm-proof-"))
    models = corpus(scratch)
    names = sorted(models)[:: 3 if options.quick else 1]
    gpus = GPUS[:1] if options.quick else GPUS
    started = time.monotonic()
    jobs: list[dict[str, Any]] = []
    refusals: list[dict[str, Any]] = []
    for name in names:
        for gpu in gpus:
            scenarios = [*SCENARIOS, *((f"{n} GPUs", n, 4096, 8) for n in REFUSALS)]
            for label, count, context, concurrency in scenarios:
                longest = 131072 if name.endswith("+YaRN") else None
                _code, data, error = plan(models[name], gpu, count, longest or context, concurrency)
                if data is None:
                    refusals.append({"model": name, "gpu": gpu, "scenario": label, "gpus": count, "tool": error})
                    continue
                lines = [c for c in data["commands"] if c["engine"] == "vllm"]
                nearest = (data.get("nearest") or {}).get("commands") or []
                for command in lines or [c for c in nearest if c["engine"] == "vllm"]:
                    argv = [a if a != "$HEAD_IP" else "10.0.0.1" for a in command["argv"]]
                    category = "two nodes" if command["nodes"] > 1 else "one node"
                    category = f"YaRN, {category}" if "--hf-overrides" in argv else category
                    jobs.append(
                        {
                            "model": name,
                            "gpu": gpu,
                            "scenario": label,
                            "category": category,
                            "line": shlex.join(argv),
                            "argv": argv[2:],
                            "env": dict(command["env"]),
                            "fit": data["plan"]["fit"],
                            "nearest": not lines,
                        }
                    )
    distinct = {job["line"]: job for job in jobs}
    for refusal in refusals:  # the tool's refusals, put to vLLM (its configuration, then QKVParallelLinear's division)
        tensor = min(refusal["gpus"], 8)
        if "whole nodes" in refusal["tool"]:
            continue
        line = f"vllm serve {models[refusal['model']]} --tensor-parallel-size {tensor}"
        config = json.loads((models[refusal["model"]] / "config.json").read_text())
        text = next((config[k] for k in ("text_config", "llm_config") if isinstance(config.get(k), dict)), config)
        kv = text.get("num_key_value_heads") or text.get("num_attention_heads")
        rule = {"kv": kv, "tp": tensor} if kv and not text.get("kv_lora_rank") else None
        distinct.setdefault(
            line,
            {
                "model": refusal["model"],
                "gpu": refusal["gpu"],
                "category": "refused by the tool",
                "line": line,
                "argv": shlex.split(line)[2:],
                "env": {},
                "refusal": refusal,
                "load_rule": rule,
            },
        )
    say(f"{len(jobs)} printed vLLM lines ({len(distinct)} distinct with the refusals) from {len(names)} configs × {len(gpus)} GPUs")
    results = validate(python, libraries, list(distinct.values()))
    report(list(distinct.values()), results, options, time.monotonic() - started)


def validate(python: Path, libraries: Path, jobs: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    by_gpu: dict[str, list[int]] = {}
    for index, job in enumerate(jobs):
        by_gpu.setdefault(job["gpu"], []).append(index)
    answers: dict[int, dict[str, Any]] = {}
    for gpu, indices in by_gpu.items():
        env = {
            **os.environ,
            "LD_LIBRARY_PATH": str(libraries),
            "LIBRARY_PATH": str(libraries),
            "DD_NVML_GPUS": gpus_env(gpu),
            "HF_HUB_OFFLINE": "1",
            "VLLM_LOGGING_LEVEL": "ERROR",
        }
        worker = subprocess.Popen(
            [str(python), "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
        )
        assert worker.stdin and worker.stdout
        while worker.stdout.readline().strip() != "READY":
            if worker.poll() is not None:
                raise SystemExit("the vLLM worker did not start: run it by hand for its traceback")
        for done, index in enumerate(indices, 1):
            job = jobs[index]
            worker.stdin.write(json.dumps({"id": index, "argv": job["argv"], "env": job["env"], "load_rule": job.get("load_rule")}) + "\n")
            worker.stdin.flush()
            answers[index] = json.loads(worker.stdout.readline())
            if done % 25 == 0:
                say(f"  {gpu}: {done}/{len(indices)} checked")
        worker.stdin.close()
        worker.wait()
    return answers


def report(jobs: list[dict[str, Any]], answers: dict[int, dict[str, Any]], options: argparse.Namespace, seconds: float) -> None:
    rows: dict[str, list[int]] = {}
    failures, refusals = [], []
    for index, job in enumerate(jobs):
        answer = answers[index]
        tally = rows.setdefault(job["category"], [0, 0])
        tally[0] += 1
        if job["category"] == "refused by the tool":
            tally[1] += not answer["ok"]
            refusals.append((job, answer))
            continue
        tally[1] += answer["ok"]
        if not answer["ok"]:
            failures.append((job, answer))
    lines = [
        f"vLLM {options.vllm}, checked by `python benchmarks/bench_vllm_lines.py` in {seconds:.0f} s "
        f"(GPUs: {', '.join(GPUS[:1] if options.quick else GPUS)}; scenarios: {', '.join(s[0] for s in SCENARIOS)}, "
        f"and {' and '.join(map(str, REFUSALS))} GPUs)",
        "",
        "| lines | distinct | accepted by vLLM |",
        "|---|---|---|",
    ]
    lines += [f"| {category} | {total} | {good} |" for category, (total, good) in sorted(rows.items()) if category != "refused by the tool"]
    if "refused by the tool" in rows:
        total, refused = rows["refused by the tool"]
        lines.append(
            f"| refused by decode-doctor | {total} | {refused} refused by vLLM too "
            "(its configuration, or QKVParallelLinear at model load) |"
        )
    text = "\n".join(lines) + "\n"
    for job, answer in failures:
        text += f"\nREFUSED by vLLM: {job['line']}\n  {answer['error']}\n"
    for job, answer in refusals:
        verdict = answer.get("error") or "ACCEPTED by vLLM: the tool refused a plan vLLM starts"
        text += f"\ndecode-doctor refused {job['model']} on {job['refusal']['gpus']} GPUs: {job['refusal']['tool']}\n  vLLM: {verdict}\n"
    print(text)
    if options.out:
        options.out.write_text(text)


if __name__ == "__main__":
    main()
