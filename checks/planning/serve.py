"""Engine command lines that respect a plan's limits, ready to paste. Each names the engine version
whose flags it uses; tests check every flag against that version's list (fixtures/engines/) and every
vLLM line against the rules of vLLM's own configuration checks (tests/support/engine_rules.py), which
benchmarks/bench_vllm_lines.py proves against the named vLLM itself.

A command stores the caches as its engine does (storage.py: vLLM's fp8 or per-token-head int8/int4
with their scales, its SSM state type per model; llama.cpp's q8_0 or q4_0, its float32 recurrent
state), and its limits are worked out again for that storage. A plan across nodes gets one line per
node; a plan that cannot start gets none."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from decode_doctor.i18n import said
from decode_doctor.models.info import ModelFormat
from decode_doctor.models.plan import UTILIZATION, DeploymentPlan, Fit, make_plan, valid_tensor_sizes
from decode_doctor.models.sizing import Sizing
from decode_doctor.models.storage import Storage, llama_storage, vllm_storage

VLLM_VERSION = said(
    "vLLM {version}: its `vllm serve` arguments and configuration checks (proven by benchmarks/bench_vllm_lines.py)", version="0.33.0"
)
LLAMA_SERVER_VERSION = said("llama-server as of {commit}", commit="ggml-org/llama.cpp@00dc805")
HEAD_ADDRESS = "$HEAD_IP"  # node 0's address, which every node of a multi-node plan reaches; set on each node


@dataclass(frozen=True)
class Command:
    engine: str
    version: str
    argv: tuple[str, ...]
    notes: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    node: int = 0  # this line's node rank, of `nodes`
    nodes: int = 1
    context: int = 0  # the context each sequence is served with, and
    concurrency: int = 0  # the sequences at once: what the line's own flags say, for the text that names them

    @property
    def line(self) -> str:
        """The line to paste: every word quoted for the shell, but the head address expanded from the environment."""
        prefix = "".join(f"{name}={shlex.quote(value)} " for name, value in self.env)
        return prefix + " ".join(f'"{word}"' if word == HEAD_ADDRESS else shlex.quote(word) for word in self.argv)


def limits(plan: DeploymentPlan) -> tuple[int, int, list[str]] | None:
    """The context and concurrency to serve with: the ones asked for when they fit, else the nearest
    the plan allows (fewer sequences at the same context, or a shorter context); None when not even
    one sequence of one token fits (the plan cannot start)."""
    notes: list[str] = []
    context, concurrency = plan.context, plan.concurrency
    if plan.fit in (Fit.FITS, Fit.TIGHT) or plan.max_context is None:
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
    if plan.max_context_alone and plan.max_context_alone >= 1:
        notes.append(
            said(
                "one sequence at a time, capped at {max_context:,} tokens: neither {concurrency} at a shorter context nor fewer at "
                "{context:,} tokens fit",
                max_context=plan.max_context_alone,
                concurrency=concurrency,
                context=context,
            )
        )
        return plan.max_context_alone, 1, notes
    return None


def _replanned(plan: DeploymentPlan, storage: Storage) -> tuple[DeploymentPlan, list[str]]:
    """The plan again with the caches stored as the engine stores them, when that changes the bytes."""
    if storage.same_bytes(plan.storage):
        return plan, []
    again = make_plan(plan.sizing, plan.hardware, plan.context, plan.concurrency, plan.kv_dtype, plan.gpus, plan.gpus_per_node, storage)
    notes: list[str] = []
    if storage.kv_element_bytes != plan.storage.kv_element_bytes or storage.kv_slot_bytes != plan.storage.kv_slot_bytes:
        notes.append(
            said(
                "{engine} stores a {kv_dtype} KV cache as {cache} ({bits:g} bits per element{scales}): its limits are worked out for it",
                engine=storage.engine,
                kv_dtype=plan.kv_dtype,
                cache=storage.kv_cache,
                bits=storage.kv_element_bytes * 8,
                scales=said(", {count} bytes of scales per head and token", count=storage.kv_slot_bytes) if storage.kv_slot_bytes else "",
            )
        )
    if plan.sizing.state_elements and (storage.conv_bytes, storage.ssm_bytes) != (plan.storage.conv_bytes, plan.storage.ssm_bytes):
        notes.append(storage.ssm_reason)
    return again, notes


def _context_for_vllm(plan: DeploymentPlan, size: Sizing) -> tuple[int, list[str], list[str]]:
    """(the context vLLM can serve, extra argv, notes): its derived maximum, raised to a YaRN length the
    config asks for with --hf-overrides (vLLM takes max_position_embeddings as already scaled)."""
    derived = size.engine_max_context
    if not derived or plan.context <= derived:
        return plan.context, [], []
    if size.yarn_context and size.yarn_context > derived:
        served = min(plan.context, size.yarn_context)
        override = json.dumps({"max_position_embeddings": size.yarn_context}, separators=(",", ":"))
        note = said(
            "--hf-overrides raises max_position_embeddings to {yarn:,}: config.json's YaRN scaling ({how}) reaches it, but vLLM "
            "takes max_position_embeddings ({derived:,}) as the already-scaled maximum and refuses a longer --max-model-len",
            yarn=size.yarn_context,
            how=size.rope_note,
            derived=derived,
        )
        notes = [note]
        if plan.context > size.yarn_context:
            notes.append(
                said(
                    "--max-model-len {served:,}, not {context:,}: the YaRN scaling reaches no further", served=served, context=plan.context
                )
            )
        return served, ["--hf-overrides", override], list(notes)
    note = said(
        "--max-model-len {derived:,}, not {context:,}: vLLM derives a maximum of {derived:,} from config.json "
        "({engine_max_source}) and refuses to start above it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; past the trained "
        "length quality falls apart without a RoPE scaling (--hf-overrides '{{\"rope_scaling\": …}}')",
        derived=derived,
        context=plan.context,
        engine_max_source=size.engine_max_source,
    )
    return derived, [], [note]


def vllm(plan: DeploymentPlan, model: str) -> list[Command]:
    """One `vllm serve` line per node (none when the plan cannot start): node 0 first, the others headless."""
    size = plan.sizing
    storage = vllm_storage(plan.kv_dtype, size.family, size.config_ssm_dtype)
    planned, notes = _replanned(plan, storage)
    served, extra, context_notes = _context_for_vllm(plan, size)
    notes += context_notes
    if served != plan.context:
        planned = make_plan(size, plan.hardware, served, plan.concurrency, plan.kv_dtype, plan.gpus, plan.gpus_per_node, storage)
    limited = limits(planned)
    if limited is None:
        return []
    context, concurrency, capped = limited
    notes += capped
    layout = plan.layout
    argv = ["vllm", "serve", model, "--max-model-len", str(context), "--max-num-seqs", str(concurrency)]
    argv += ["--gpu-memory-utilization", f"{UTILIZATION:.2f}", "--tensor-parallel-size", str(layout.tensor)]
    if storage.kv_cache != "auto":
        argv += ["--kv-cache-dtype", storage.kv_cache]
    argv += extra
    if layout.pipeline == 1:
        return [Command("vllm", VLLM_VERSION, tuple(argv), tuple(notes), context=context, concurrency=concurrency)]
    argv += ["--pipeline-parallel-size", str(layout.pipeline), "--nnodes", str(layout.pipeline)]
    notes.append(
        said(
            "{nodes} nodes of {tensor} GPUs, one pipeline stage each: run line N on node N, node 0 first (vLLM's multiprocessing "
            "backend: no Ray); HEAD_IP is node 0's address that the others reach (export HEAD_IP=… on every node), the model at "
            "the same path on every node",
            nodes=layout.pipeline,
            tensor=layout.tensor,
        )
    )
    lines = []
    for node in range(layout.pipeline):
        words = [*argv, "--node-rank", str(node), "--master-addr", HEAD_ADDRESS] + (["--headless"] if node else [])
        lines.append(
            Command(
                "vllm",
                VLLM_VERSION,
                tuple(words),
                tuple(notes) if node == 0 else (),
                node=node,
                nodes=layout.pipeline,
                context=context,
                concurrency=concurrency,
            )
        )
    return lines


def llama_server(plan: DeploymentPlan, model: str, threads: int | None) -> Command | None:
    """llama-server's -c is the whole KV pool, shared by its -np slots: context × slots."""
    if plan.layout.pipeline > 1:
        return None  # llama-server serves from one node (its RPC backend across nodes is not planned here)
    storage = llama_storage(plan.kv_dtype)
    kv = storage.kv_cache
    planned, notes = _replanned(plan, storage)
    limited = limits(planned)
    if limited is None:
        return None
    context, concurrency, capped = limited
    notes += capped
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
    return Command("llama-server", LLAMA_SERVER_VERSION, tuple(argv), tuple(notes), context=context, concurrency=concurrency)


def commands(plan: DeploymentPlan, model: str, threads: int | None = None) -> list[Command]:
    """The lines to serve this plan with; none when the plan's size is unknown (a command from a
    partial size would be a guess) or when it cannot start (not one sequence fits)."""
    if plan.fit is Fit.UNKNOWN or plan.sizing.weights_bytes is None or not plan.sizing.cache:
        return []
    found: list[Command] = []
    if (
        plan.hardware.is_gpu
        and plan.sizing.format is not ModelFormat.GGUF
        and plan.layout.tensor in valid_tensor_sizes(plan.sizing, plan.layout.tensor)
    ):
        found += vllm(plan, model)
    llama = llama_server(plan, model, threads)
    return found + ([llama] if llama is not None else [])
