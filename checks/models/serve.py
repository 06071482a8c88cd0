"""Engine command lines that respect a plan's limits, ready to paste. Each names the engine version
whose flags it uses; tests check every flag against that version's list (fixtures/engines/) and every
vLLM line against vLLM's own configuration checks (tests/support/engine_rules.py).

A command uses the cache type its engine has (vLLM: fp8 for any 8- or 4-bit request; llama.cpp: q8_0
or q4_0, blocks of 32 with a 16-bit scale), and its limits are worked out again for that type."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from decode_doctor.i18n import said

from .dtypes import KV_DTYPE_BYTES
from .plan import UTILIZATION, DeploymentPlan, make_plan, valid_tensor_sizes

VLLM_VERSION = said("vLLM engine arguments as of {commit} (2025; later releases keep these flags)", commit="vllm-project/vllm@001999d2")
LLAMA_SERVER_VERSION = said("llama-server as of {commit}", commit="ggml-org/llama.cpp@00dc805")
VLLM_KV = {"fp16": "auto", "bf16": "auto", "fp32": "auto", "fp8": "fp8", "int8": "fp8", "q8_0": "fp8", "int4": "fp8", "q4_0": "fp8"}
LLAMA_KV = {"fp32": "f32", "fp16": "f16", "bf16": "bf16", "fp8": "q8_0", "int8": "q8_0", "q8_0": "q8_0", "int4": "q4_0", "q4_0": "q4_0"}
# the --kv-dtype whose bytes each engine cache type has, to plan with
VLLM_PLANNED = {"auto": None, "fp8": "fp8"}
LLAMA_PLANNED = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "q8_0": "q8_0", "q4_0": "q4_0"}


@dataclass(frozen=True)
class Command:
    engine: str
    version: str
    argv: tuple[str, ...]
    notes: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    @property
    def line(self) -> str:
        prefix = "".join(f"{name}={shlex.quote(value)} " for name, value in self.env)
        return prefix + shlex.join(self.argv)


def limits(plan: DeploymentPlan) -> tuple[int, int, list[str]]:
    """The context and concurrency to serve with: the ones asked for when they fit, else the nearest
    the plan allows (fewer sequences at the same context, or a shorter context)."""
    notes: list[str] = []
    context, concurrency = plan.context, plan.concurrency
    if plan.fit in ("fits", "tight") or plan.max_context is None:
        return context, concurrency, notes
    if plan.max_concurrency and plan.max_concurrency >= 1:
        notes.append(
            said(
                "sequences at once lowered to {max_concurrency}: {concurrency} do not fit at {context:,} tokens",
                max_concurrency=plan.max_concurrency,
                concurrency=concurrency,
                context=context,
            )
        )
        return context, plan.max_concurrency, notes
    if plan.max_context and plan.max_context >= 1:
        notes.append(
            said(
                "context capped at {max_context:,} tokens: {context:,} do not fit for {concurrency}",
                max_context=plan.max_context,
                context=context,
                concurrency=concurrency,
            )
        )
        return plan.max_context, concurrency, notes
    notes.append(said("the weights do not fit at all: this command will fail until the plan changes"))
    return context, concurrency, notes


def _replanned(plan: DeploymentPlan, kv_dtype: str | None, engine: str, cache: str) -> tuple[DeploymentPlan, list[str]]:
    """The plan again with the cache type the engine will really use, when its size differs."""
    if kv_dtype is None or KV_DTYPE_BYTES[kv_dtype] == KV_DTYPE_BYTES[plan.kv_dtype]:
        return plan, []
    again = make_plan(plan.sizing, plan.hardware, plan.context, plan.concurrency, kv_dtype, plan.gpus, plan.gpus_per_node)
    bits = KV_DTYPE_BYTES[kv_dtype] * 8
    return again, [
        said(
            "{engine} has no {kv_dtype} KV cache: {cache} ({bits:g} bits per element) instead, and its limits worked out for it",
            engine=engine,
            kv_dtype=plan.kv_dtype,
            cache=cache,
            bits=bits,
        )
    ]


def vllm(plan: DeploymentPlan, model: str) -> Command:
    kv = VLLM_KV[plan.kv_dtype]
    planned, notes = _replanned(plan, VLLM_PLANNED[kv], "vLLM", kv)
    size = plan.sizing
    derived = size.engine_max_context
    if derived and plan.context > derived:
        notes.append(
            said(
                "--max-model-len {derived:,}, not {context:,}: vLLM derives a maximum of {derived:,} from config.json "
                "({engine_max_source}) and refuses to start above it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; past the trained "
                "length quality falls apart without a RoPE scaling (--hf-overrides '{{\"rope_scaling\": …}}')",
                derived=derived,
                context=plan.context,
                engine_max_source=size.engine_max_source,
            )
        )
        planned = make_plan(size, plan.hardware, derived, plan.concurrency, planned.kv_dtype, plan.gpus, plan.gpus_per_node)
    context, concurrency, limited = limits(planned)
    notes += limited
    layout = plan.layout
    argv = ["vllm", "serve", model, "--max-model-len", str(context), "--max-num-seqs", str(concurrency)]
    argv += ["--gpu-memory-utilization", f"{UTILIZATION:.2f}", "--tensor-parallel-size", str(layout.tensor)]
    if layout.pipeline > 1:
        argv += ["--pipeline-parallel-size", str(layout.pipeline)]
        notes.append(
            said(
                "{pipeline} nodes of {tensor} GPUs: start a Ray cluster across them first (ray start --head, then ray start "
                "--address on the others) and run this on the head node",
                pipeline=layout.pipeline,
                tensor=layout.tensor,
            )
        )
    if kv != "auto":
        argv += ["--kv-cache-dtype", kv]
    return Command("vllm", VLLM_VERSION, tuple(argv), tuple(notes))


def llama_server(plan: DeploymentPlan, model: str, threads: int | None) -> Command:
    """llama-server's -c is the whole KV pool, shared by its -np slots: context × slots."""
    kv = LLAMA_KV[plan.kv_dtype]
    planned, notes = _replanned(plan, LLAMA_PLANNED[kv], "llama.cpp", kv)
    context, concurrency, limited = limits(planned)
    notes += limited
    path = model if model.endswith(".gguf") else "MODEL.gguf"
    if path == "MODEL.gguf":
        notes.append(said("llama-server reads GGUF: convert {file} first (convert_hf_to_gguf.py)", file=Path(model).name))
    argv = ["llama-server", "-m", path, "-c", str(context * concurrency), "-np", str(concurrency), "-ctk", kv, "-ctv", kv]
    if kv not in ("f16", "f32", "bf16"):
        argv += ["-fa", "on"]  # a quantized V cache needs flash attention
    argv += ["-ngl", "all" if plan.hardware.is_gpu else "0"]
    if plan.gpus > 1:
        argv += ["-sm", "row"]
    if threads and not plan.hardware.is_gpu:
        argv += ["-t", str(threads)]
    argv += ["--host", "127.0.0.1", "--port", "8080"]
    if plan.layout.pipeline > 1:
        notes.append(
            said("llama-server runs on one node: {gpus} GPUs across nodes need its RPC backend (--rpc), not planned here", gpus=plan.gpus)
        )
    return Command("llama-server", LLAMA_SERVER_VERSION, tuple(argv), tuple(notes))


def commands(plan: DeploymentPlan, model: str, threads: int | None = None) -> list[Command]:
    """The lines to serve this plan with; none when the plan's size is unknown (a command from a
    partial size would be a guess)."""
    if plan.fit == "unknown" or plan.sizing.weights_bytes is None or not plan.sizing.cache:
        return []
    found = []
    if plan.hardware.is_gpu and plan.sizing.format != "gguf" and plan.layout.tensor in valid_tensor_sizes(plan.sizing, plan.layout.tensor):
        found.append(vllm(plan, model))
    found.append(llama_server(plan, model, threads))
    return found
