"""Engine command lines that respect a plan's limits, ready to paste. Each names the engine version
whose flags it uses; tests check every flag against that version's list (fixtures/engines/)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from .plan import UTILIZATION, DeploymentPlan

VLLM_VERSION = "vLLM engine arguments as of vllm-project/vllm@001999d2 (2025; later releases keep these flags)"
LLAMA_SERVER_VERSION = "llama-server as of ggml-org/llama.cpp@00dc805"
VLLM_KV = {"fp16": "auto", "bf16": "auto", "fp32": "auto", "fp8": "fp8", "int8": "fp8", "q8_0": "fp8", "int4": "fp8", "q4_0": "fp8"}
LLAMA_KV = {"fp32": "f32", "fp16": "f16", "bf16": "bf16", "fp8": "q8_0", "int8": "q8_0", "q8_0": "q8_0", "int4": "q4_0", "q4_0": "q4_0"}


@dataclass(frozen=True)
class Command:
    engine: str
    version: str
    argv: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def line(self) -> str:
        return shlex.join(self.argv)


def limits(plan: DeploymentPlan) -> tuple[int, int, list[str]]:
    """The context and concurrency to serve with: the ones asked for when they fit, else the nearest
    the plan allows (a shorter context at the same concurrency, or fewer sequences)."""
    notes: list[str] = []
    context, concurrency = plan.context, plan.concurrency
    if plan.fit == "fits" or plan.max_context is None:
        return context, concurrency, notes
    if plan.max_concurrency and plan.max_concurrency >= 1:
        notes.append(f"sequences at once lowered to {plan.max_concurrency}: {concurrency} do not fit at {context:,} tokens")
        return context, plan.max_concurrency, notes
    if plan.max_context and plan.max_context >= 1:
        notes.append(f"context capped at {plan.max_context:,} tokens: {context:,} do not fit for {concurrency}")
        return plan.max_context, concurrency, notes
    notes.append("the weights do not fit at all: this command will fail until the plan changes")
    return context, concurrency, notes


def vllm(plan: DeploymentPlan, model: str) -> Command:
    context, concurrency, notes = limits(plan)
    argv = ["vllm", "serve", model, "--max-model-len", str(context), "--max-num-seqs", str(concurrency)]
    argv += ["--gpu-memory-utilization", f"{UTILIZATION:.2f}", "--tensor-parallel-size", str(plan.gpus)]
    kv = VLLM_KV[plan.kv_dtype]
    if kv != "auto":
        argv += ["--kv-cache-dtype", kv]
        if plan.kv_dtype in ("int4", "q4_0"):
            notes.append("vLLM has no 4-bit KV cache: fp8 instead (the plan counted 4-bit)")
    return Command("vllm", VLLM_VERSION, tuple(argv), tuple(notes))


def llama_server(plan: DeploymentPlan, model: str, threads: int | None) -> Command:
    """llama-server's -c is the whole KV pool, shared by its -np slots: context × slots."""
    context, concurrency, notes = limits(plan)
    path = model if model.endswith(".gguf") else "MODEL.gguf"
    if path == "MODEL.gguf":
        notes.append(f"llama-server reads GGUF: convert {Path(model).name} first (convert_hf_to_gguf.py)")
    kv = LLAMA_KV[plan.kv_dtype]
    argv = ["llama-server", "-m", path, "-c", str(context * concurrency), "-np", str(concurrency), "-ctk", kv, "-ctv", kv]
    if kv not in ("f16", "f32", "bf16"):
        argv += ["-fa", "on"]  # a quantized V cache needs flash attention
    argv += ["-ngl", "all" if plan.hardware.is_gpu else "0"]
    if plan.gpus > 1:
        argv += ["-sm", "row"]
    if threads and not plan.hardware.is_gpu:
        argv += ["-t", str(threads)]
    argv += ["--host", "127.0.0.1", "--port", "8080"]
    return Command("llama-server", LLAMA_SERVER_VERSION, tuple(argv), tuple(notes))


def commands(plan: DeploymentPlan, model: str, threads: int | None = None) -> list[Command]:
    found = []
    if plan.hardware.is_gpu and plan.sizing.format != "gguf":
        found.append(vllm(plan, model))
    found.append(llama_server(plan, model, threads))
    return found
