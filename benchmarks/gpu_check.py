"""The prepared script for a machine with an NVIDIA GPU and PyTorch (no network): the GPU facts, the
GPU bandwidth probe and a random-weight Llama-shape decode, each beside what `estimate` plans.

    python benchmarks/gpu_check.py [--out DIR] [--gpu NAME] [--budget-s 420] [--dry-run]

1. `decode-doctor check --select gpu,bandwidth,gpu-health --format json` (the NVML path with the
   `gpu` extra; the bandwidth check copies a buffer on each GPU with PyTorch): out/check.json.
   Then the GPU health feature's live reading (NVML and sysfs, as `check` takes it) printed whole,
   judged, and read again during a few seconds of matmuls and host→device copies on GPU 0 (PyTorch,
   else CuPy, else no load), so that the PCIe generation and utilization are seen busy:
   out/health.json.
2. A Llama-shape decode with random fp16 weights, written for the purpose: two sizes (1.1B and
   6.7B parameters), batch 1 and 8, a static KV cache of CONTEXT tokens decoded from position
   DEPTH, each step timed after synchronising the device; the median of STEPS steps.
3. For each row, `decode-doctor estimate` on a config.json of the same shape, for the datasheet
   GPU (--gpu NAME) and for this GPU (--device cuda:0, its measured bandwidth): the ceiling's step
   time, and measured ÷ ceiling.
Everything is written under --out (results.json, summary.txt, check.json, health.json, the configs);
the run stops starting new rows past --budget-s (the whole must end within 8 minutes). Without a GPU
(no CUDA device to PyTorch) it says so after step 1 and exits 0.

To take it to a lent machine with nothing installed: `pip wheel . -w wheelhouse` here (the
project's pure-Python dependencies as wheels), carry `wheelhouse/`, and there
`pip install --no-index --find-links wheelhouse decode-doctor[gpu]` before this script.

--dry-run: on a CPU with numpy in place of PyTorch, tiny shapes, the datasheet estimate only: the
same steps and files, in seconds, so that CI proves the script before a device is lent. Its
figures say nothing about any GPU.
"""

from __future__ import annotations

import argparse
import enum
import json
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from decode_doctor.models.randomgguf import Shape

CONTEXT = 4096
DEPTH = 2048
STEPS = 40
LOAD_S = 4.0  # seconds of load during which the GPU health reading is taken again


def config(shape: Shape) -> dict[str, Any]:
    """The Hugging Face config.json estimate sizes the shape from."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": shape.hidden,
        "intermediate_size": shape.ffn,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.kv_heads,
        "vocab_size": shape.vocab,
        "max_position_embeddings": CONTEXT,
        "torch_dtype": "float16",
        "tie_word_embeddings": False,
    }


GPU_SHAPES = (("1.1B", Shape(2048, 22, 5632, 32, 4, 32000)), ("6.7B", Shape(4096, 32, 11008, 32, 8, 32000)))
DRY_SHAPES = (("tiny", Shape(128, 2, 256, 4, 2, 512)), ("small", Shape(256, 4, 512, 8, 2, 1024)))


class Backend:
    """PyTorch on the GPU, or numpy on the CPU for the dry run: the few operations a decode step uses."""

    def __init__(self, dry_run: bool) -> None:
        self.dry_run = dry_run
        if dry_run:
            import numpy as np

            self.np = np
            self.rng = np.random.default_rng(0)
            self.dtype = np.float32
        else:
            import torch

            self.torch = torch
            self.device = torch.device("cuda:0")
            torch.manual_seed(0)

    def random(self, *shape: int) -> Any:
        if self.dry_run:
            return (self.rng.standard_normal(shape, dtype=self.np.float32) * 0.02).astype(self.dtype)
        return self.torch.randn(*shape, dtype=self.torch.float16, device=self.device) * 0.02

    def zeros(self, *shape: int) -> Any:
        if self.dry_run:
            return self.np.zeros(shape, dtype=self.dtype)
        return self.torch.zeros(*shape, dtype=self.torch.float16, device=self.device)

    def softmax(self, x: Any) -> Any:
        if self.dry_run:
            e = self.np.exp(x - x.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)
        return self.torch.softmax(x.float(), dim=-1).to(x.dtype)

    def silu(self, x: Any) -> Any:
        return x / (1 + self.np.exp(-x)) if self.dry_run else self.torch.nn.functional.silu(x)

    def norm(self, x: Any) -> Any:
        if self.dry_run:
            return x / self.np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-5)
        return x * self.torch.rsqrt((x.float() ** 2).mean(dim=-1, keepdim=True) + 1e-5).to(x.dtype)

    def sync(self) -> None:
        if not self.dry_run:
            self.torch.cuda.synchronize()

    def name(self) -> str:
        return "numpy on the CPU (dry run)" if self.dry_run else self.torch.cuda.get_device_name(0)


def decode_ms(backend: Backend, shape: Shape, batch: int, steps: int, context: int, depth: int) -> float:
    """Median milliseconds of one decode step: batch sequences at depth, random weights, static cache."""
    b, h, hd, kvh = backend, shape.hidden, shape.head_dim, shape.kv_heads
    layers = [
        {
            "q": b.random(h, h),
            "k": b.random(h, kvh * hd),
            "v": b.random(h, kvh * hd),
            "o": b.random(h, h),
            "gate": b.random(h, shape.ffn),
            "up": b.random(h, shape.ffn),
            "down": b.random(shape.ffn, h),
            "kcache": b.zeros(batch, kvh, context, hd),
            "vcache": b.zeros(batch, kvh, context, hd),
        }
        for _ in range(shape.layers)
    ]
    head = b.random(h, shape.vocab)
    group = shape.heads // kvh
    x = b.random(batch, h)
    times = []
    for step in range(steps + 2):
        position = depth + step
        b.sync()
        started = time.perf_counter()
        for layer in layers:
            y = b.norm(x)
            q = (y @ layer["q"]).reshape(batch, kvh, group, hd)
            layer["kcache"][:, :, position] = (y @ layer["k"]).reshape(batch, kvh, hd)
            layer["vcache"][:, :, position] = (y @ layer["v"]).reshape(batch, kvh, hd)
            keys, values = layer["kcache"][:, :, : position + 1], layer["vcache"][:, :, : position + 1]
            scores = b.softmax((q @ keys.swapaxes(-1, -2) if b.dry_run else q @ keys.transpose(-1, -2)) / hd**0.5)
            attended = (scores @ values).reshape(batch, h)
            x = x + attended @ layer["o"]
            y = b.norm(x)
            x = x + (b.silu(y @ layer["gate"]) * (y @ layer["up"])) @ layer["down"]
        logits = b.norm(x) @ head
        b.sync()
        if step >= 2:  # two warm-up steps
            times.append(time.perf_counter() - started)
        del logits
    return statistics.median(times) * 1000


def estimate_ms(model_dir: Path, batch: int, context: int, device_args: list[str]) -> float | None:
    """The ceiling's step time estimate plans for this shape at this batch and context."""
    argv = [sys.executable, "-m", "decode_doctor", "estimate", "--model", str(model_dir), "--concurrency", str(batch)]
    argv += ["--context", str(context), *device_args, "--format", "json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    try:
        step = json.loads(done.stdout)["plan"]["step"]
        return float(step["step_s"]) * 1000 if step.get("step_s") else None
    except (ValueError, KeyError, TypeError):
        return None


def _jsonable(value: Any) -> Any:
    """json.dumps's default: a reading's frozensets (clock events) and enums."""
    if isinstance(value, frozenset):
        return sorted(value)
    if isinstance(value, enum.Enum):
        return value.value
    return str(value)


def health_now() -> dict[str, Any]:
    """The GPU health feature's live reading of this machine, as `check` takes it, and its judgement."""
    from decode_doctor.checks.gpuhealth.judge import judge
    from decode_doctor.checks.gpuhealth.live import read_live
    from decode_doctor.engine.context import Context

    ctx = Context()
    reading = read_live(ctx)
    if isinstance(reading, str):
        return {"reading": None, "why": reading or "no NVIDIA GPU", "not_judged": [asdict(n) for n in ctx.unjudged]}
    judgement = judge(reading)
    return {
        "reading": asdict(reading),
        "verdicts": [{"code": v.code.code, "message": v.message.text(), "evidence": v.evidence} for v in judgement.verdicts],
        "not_judged": [{"what": u.what.text(), "why": u.why.text()} for u in judgement.unjudged] + [asdict(n) for n in ctx.unjudged],
    }


def _links(health: dict[str, Any]) -> list[dict[str, Any]]:
    gpus = (health.get("reading") or {}).get("gpus", ())
    return [
        {
            "gpu": g["index"],
            "utilization_pct": g["utilization_pct"],
            **{k: g["pcie"][k] for k in ("gen_current", "gen_max", "width_current", "width_max", "slot_gen_max", "slot_width_max")},
        }
        for g in gpus
    ]


def _loader() -> tuple[str, Any] | None:
    """One round of load on GPU 0 (queued, not waited for) and the call that waits for it; None
    without PyTorch or CuPy on a CUDA device."""
    try:
        import torch

        if torch.cuda.is_available():
            a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.float16)
            out, host = torch.empty_like(a), torch.empty(256 << 20, dtype=torch.uint8).pin_memory()
            device = torch.empty(256 << 20, dtype=torch.uint8, device="cuda:0")

            def torch_round() -> None:
                for _ in range(160):
                    torch.matmul(a, a, out=out)
                for _ in range(8):
                    device.copy_(host, non_blocking=True)

            return "PyTorch", (torch_round, torch.cuda.synchronize)
    except ImportError:
        pass
    try:
        import cupy

        m = cupy.random.standard_normal((8192, 8192), dtype=cupy.float32)
        host_buffer = cupy.cuda.alloc_pinned_memory(256 << 20)
        device_buffer = cupy.cuda.alloc(256 << 20)

        def cupy_round() -> None:
            for _ in range(24):
                cupy.matmul(m, m)
            for _ in range(8):
                device_buffer.copy_from_host_async(host_buffer, 256 << 20)

        return "CuPy", (cupy_round, cupy.cuda.runtime.deviceSynchronize)
    except Exception:  # no CuPy, no device, no driver: the reading stays without load
        return None


def health_step(out: Path, dry_run: bool) -> dict[str, Any]:
    """The live health reading printed, then read again under a short load so the link is seen busy."""
    idle = health_now()
    health: dict[str, Any] = {"idle": idle, "under_load": [], "load": None}
    if idle["reading"] is None:
        print(f"    no GPU health reading: {idle['why']}", flush=True)
    else:
        print(json.dumps(idle["reading"], default=_jsonable, indent=1), flush=True)
        for verdict in idle["verdicts"]:
            print(f"    {verdict['code']}: {verdict['message']}", flush=True)
        for item in idle["not_judged"]:
            print(f"    not judged: {item['what']} ({item['why']})", flush=True)
        loader = None if dry_run else _loader()
        if loader is None:
            print("    no PyTorch or CuPy on a CUDA device: the link is not read under load", flush=True)
        else:
            health["load"], (one_round, wait) = loader
            ends = time.perf_counter() + LOAD_S
            while time.perf_counter() < ends:
                one_round()
                time.sleep(0.3)  # the queued work runs; NVML's utilization covers the last sample period
                busy = health_now()
                health["under_load"].append({"links": _links(busy), "codes": [v["code"] for v in busy.get("verdicts", ())]})
                wait()
            for sample in health["under_load"][-1:]:
                print(f"    under load ({health['load']}): {json.dumps(sample['links'])}", flush=True)
    (out / "health.json").write_text(json.dumps(health, default=_jsonable, indent=1))
    return health


def cuda_missing() -> str | None:
    """Why the decode rows cannot run here (no PyTorch, no CUDA device); None where they can."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    return None if torch.cuda.is_available() else "PyTorch sees no CUDA device"


def _ms(value: float | None) -> str:
    return "not planned" if value is None else f"{value:.4g} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(f"gpu-results-{time.strftime('%Y%m%d-%H%M%S')}"))
    parser.add_argument("--gpu", default="H200-SXM", help="the datasheet row estimate --gpu plans with")
    parser.add_argument("--budget-s", type=float, default=420.0, help="no new row starts after this many seconds")
    parser.add_argument("--dry-run", action="store_true", help="numpy on the CPU, tiny shapes: the script's own test")
    args = parser.parse_args()
    started = time.perf_counter()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    shapes, context, depth, steps = (DRY_SHAPES, 256, 128, 6) if args.dry_run else (GPU_SHAPES, CONTEXT, DEPTH, STEPS)

    print("1/3 decode-doctor check --select gpu,bandwidth,gpu-health", flush=True)
    check = subprocess.run(
        [sys.executable, "-m", "decode_doctor", "check", "--select", "gpu,bandwidth,gpu-health", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    (out / "check.json").write_text(check.stdout)
    (out / "check.stderr.txt").write_text(check.stderr)
    print("    GPU health, live (NVML and sysfs)", flush=True)
    health = health_step(out, args.dry_run)
    missing = None if args.dry_run else cuda_missing()
    if missing:
        print(f"no GPU to decode on here ({missing}): the decode rows are not run; --dry-run tests the script on a CPU", flush=True)
        (out / "results.json").write_text(
            json.dumps({"dry_run": False, "no_gpu": missing, "check_exit": check.returncode, "rows": []}, indent=1)
        )
        return 0

    print(f"2/3 decode, {len(shapes)} sizes × batch 1 and 8", flush=True)
    backend = Backend(args.dry_run)
    rows: list[dict[str, Any]] = []
    for name, shape in shapes:
        model_dir = out / "models" / name
        model_dir.mkdir(parents=True, exist_ok=True)
        (model_dir / "config.json").write_text(json.dumps(config(shape), indent=1))
        for batch in (1, 8):
            if time.perf_counter() - started > args.budget_s:
                rows.append({"size": name, "batch": batch, "skipped": f"past --budget-s {args.budget_s:g}"})
                continue
            measured = decode_ms(backend, shape, batch, steps, context, depth)
            datasheet = estimate_ms(model_dir, batch, context, ["--gpu", args.gpu])
            local = None if args.dry_run else estimate_ms(model_dir, batch, context, ["--device", "cuda:0"])
            row = {
                "size": name,
                "batch": batch,
                "depth": depth,
                "measured_ms": round(measured, 4),
                "ceiling_ms_datasheet": datasheet,
                "ceiling_ms_this_gpu": local,
                "measured_over_ceiling": round(measured / local, 3) if local else None,
            }
            rows.append(row)
            print(f"    {json.dumps(row)}", flush=True)

    print("3/3 results", flush=True)
    results = {
        "dry_run": args.dry_run,
        "device": backend.name(),
        "host": platform.node(),
        "python": platform.python_version(),
        "datasheet_gpu": args.gpu,
        "shapes": {name: asdict(shape) for name, shape in shapes},
        "context": context,
        "check_exit": check.returncode,
        "health_codes": [v["code"] for v in health["idle"].get("verdicts", ())],
        "health_under_load": health["under_load"],
        "rows": rows,
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
    (out / "results.json").write_text(json.dumps(results, indent=1))
    lines = [f"{results['device']}, {results['elapsed_s']} s"]
    for row in rows:
        if "skipped" in row:
            lines.append(f"{row['size']} batch {row['batch']}: skipped ({row['skipped']})")
        else:
            lines.append(
                f"{row['size']} batch {row['batch']} at depth {depth}: {row['measured_ms']:.3f} ms per step; ceiling "
                f"{_ms(row['ceiling_ms_datasheet'])} ({args.gpu} datasheet), {_ms(row['ceiling_ms_this_gpu'])} (this GPU, measured)"
                + (f", measured ÷ ceiling {row['measured_over_ceiling']}" if row["measured_over_ceiling"] else "")
            )
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
