"""Plans a deploying user can act on: the architectures served in 2026 sized from their public
config.json (fixtures/models/configs/, sources in fixtures/SOURCES.md) against the published totals
and KV worked out by hand; no speed, "fits" or command from a partial size; one verdict rule for the
verdict, the limits, the sweep and the knobs; and command lines vLLM and llama.cpp accept, checked
with the engines' own rules (tests/support/engine_rules.py)."""

from __future__ import annotations

import json
import re
import shlex
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from decode_doctor.checks.planning import serve
from decode_doctor.models.architecture import from_config
from decode_doctor.models.dtypes import KV_DTYPE_BYTES
from decode_doctor.models.hardware import lookup, names
from decode_doctor.models.modelfiles import ModelInfo, apply_config
from decode_doctor.models.plan import Planner, make_plan, valid_tensor_sizes
from decode_doctor.models.sizing import sizing
from decode_doctor.models.storage import Storage, vllm_storage

from .support.engine_rules import llama_server_refusals, vllm_refusals
from .support.harness import cli
from .support.modelgen import llama_gguf
from .support.published import CONFIGS, PUBLISHED

GIB = 1 << 30
CONFIG_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "models" / "configs"


def published(name: str) -> dict[str, Any]:
    path = CONFIG_DIR / f"{name}.json"
    if path.exists():
        return json.loads(path.read_text())  # Python's json reads NaN and Infinity, as transformers does
    return CONFIGS.get(name) or PUBLISHED[name]["config"]


def config_only(name: str, config: dict[str, Any] | None = None) -> ModelInfo:
    info = ModelInfo(f"/models/{name}", "config-only")
    apply_config(info, config or published(name))
    return info


def model_dir(tmp: Path, name: str, config: dict[str, Any] | None = None, text: str | None = None) -> Path:
    directory = tmp / name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(text if text is not None else json.dumps(config or published(name)))
    return directory


NEW = (
    "gpt-oss-20b",
    "gpt-oss-120b",
    "Nemotron-H-8B-Base-8K",
    "Llama-4-Scout-17B-16E-Instruct",
    "Qwen3-Next-80B-A3B-Instruct",
    "GLM-4.5-Air",
)

# name → (published total, what it counts, where it is published); checkpoint: the total includes the
# multi-token-prediction layers the checkpoint holds (params_mtp), which serving does not load
TOTALS = {
    "gpt-oss-20b": (20.91e9, "model", "OpenAI, gpt-oss model card (arXiv 2508.10925), Table 1: 20.91B total, 3.61B active"),
    "gpt-oss-120b": (116.83e9, "model", "the same table: 116.83B total, 5.13B active"),
    "Nemotron-H-8B-Base-8K": (8.1e9, "model", "huggingface.co/nvidia/Nemotron-H-8B-Base-8K: 8.1B params (safetensors)"),
    "Llama-4-Scout-17B-16E-Instruct": (109e9, "model", "Meta's model card: 17B active, 109B total (vision encoder included)"),
    "Qwen3-Next-80B-A3B-Instruct": (
        81.3e9,
        "checkpoint",
        "huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct: 81.3B params (safetensors, mtp.* included)",
    ),
    "GLM-4.5-Air": (110e9, "checkpoint", "huggingface.co/zai-org/GLM-4.5-Air: 110B params (safetensors, its MTP layer included)"),
}
ACTIVE_WITHOUT_EMBEDDING = {"gpt-oss-20b": 3.61e9, "gpt-oss-120b": 5.13e9}  # as OpenAI counts them: no input table


@pytest.mark.parametrize("name", NEW)
def test_current_architectures_match_the_published_totals(name):
    total, counts, _source = TOTALS[name]
    arch = from_config(published(name))
    counted = arch.params_total + (arch.params_mtp if counts == "checkpoint" else 0)
    assert abs(counted - total) / total < 0.005, (name, counted, total)
    if name in ACTIVE_WITHOUT_EMBEDDING:
        assert arch.params_active - arch.params_embedding == pytest.approx(ACTIVE_WITHOUT_EMBEDDING[name], rel=0.02)
    # the model cards' rounder figures hold too: Qwen3-Next "80B in total", Scout "17B active"
    if name == "Qwen3-Next-80B-A3B-Instruct":
        assert arch.params_total == 79_674_391_296 and abs(arch.params_total - 80e9) / 80e9 < 0.005
    if name == "Llama-4-Scout-17B-16E-Instruct":
        assert arch.params_active == pytest.approx(17e9, rel=0.02) and arch.params_vision == 871_932_416


def test_gpt_oss_weights_are_sized_from_mxfp4_and_its_kv_from_layer_types():
    small, large = sizing(config_only("gpt-oss-20b")), sizing(config_only("gpt-oss-120b"))
    # the experts' matrices: 32 values in 16 bytes plus a one-byte scale; all else (biases too) bf16
    matrices = 24 * 32 * (2880 * 5760 + 2880 * 2880)
    assert small.weights_bytes == (20_914_757_184 - matrices) * 2 + matrices * 17 / 32 == 13_761_264_768
    assert small.weights_bytes / GIB == pytest.approx(12.8, abs=0.05)  # the published checkpoint: 12.8 GiB
    assert large.weights_bytes / GIB == pytest.approx(60.8, abs=0.05)  # and 60.8 GiB
    # 12 full layers keep every token, 12 a 128-token window: 2 × 8 KV heads × 64 dims, 2 bytes
    assert small.kv_bytes(8192, "fp16") == 12 * 2048 * 8192 + 12 * 2048 * 128 == 204_472_320  # not 402.7 MB
    assert small.kv_bytes(131072, "fp16") == 12 * 2048 * 131072 + 12 * 2048 * 128
    assert large.kv_bytes(8192, "fp16") == 18 * 2048 * 8192 + 18 * 2048 * 128
    assert small.kv_bytes_by_kind("fp16") == {"sliding": 12 * 2048, "full": 12 * 2048}
    # a GGUF of gpt-oss: llama.cpp's own pattern (sliding first, alternating)
    info = ModelInfo("/models/gpt-oss.gguf", "gguf", architecture="gpt-oss", layers=24, kv_heads=8, head_dim=64, sliding_window=128)
    info.weight_bytes, info.bytes_by_dtype = 12_000_000_000, {"MXFP4": 12_000_000_000}
    assert sizing(info).kv_bytes(8192, "fp16") == small.kv_bytes(8192, "fp16")


def test_hybrid_linear_attention_chunked_and_glm_caches_by_hand():
    nemotron = sizing(config_only("Nemotron-H-8B-Base-8K"))
    # 4 attention layers of 52 (the pattern's *), 8 KV heads × 128; 24 Mamba-2 layers each keep a
    # convolution window of (8192 + 2 × 8 groups × 128) × 3 and a 128 heads × 64 × 128 state
    state = 24 * ((8192 + 2 * 8 * 128) * 3 + 128 * 64 * 128)
    assert nemotron.state_elements == state and nemotron.kv_bytes_per_token("fp16") == 4 * 2 * 8 * 128 * 2 == 16_384
    assert nemotron.kv_bytes(8192, "fp16") == 16_384 * 8192 + state * 2
    scout = sizing(config_only("Llama-4-Scout-17B-16E-Instruct"))
    # every fourth layer (no_rope_layers 0) attends to everything, the other 36 within 8,192-token chunks
    assert [layer.kind for layer in scout.cache].count("full") == 12
    assert scout.kv_bytes(32768, "fp16") == (12 * 2048 * 32768 + 36 * 2048 * 8192) * 2
    nxt = sizing(config_only("Qwen3-Next-80B-A3B-Instruct"))
    # 12 gated-attention layers of 48 (2 KV heads × 256); 36 Gated DeltaNet layers: conv (2 × 2048 + 4096) × 3, 32 × 128 × 128
    assert nxt.kv_bytes_per_token("bf16") == 12 * 2 * 2 * 256 * 2
    assert nxt.state_elements == 36 * ((2 * 2048 + 4096) * 3 + 32 * 128 * 128)
    glm = sizing(config_only("GLM-4.5-Air"))
    assert glm.kv_bytes_per_token("bf16") == 46 * 2 * 8 * 128 * 2 == 188_416
    assert any("multi-token-prediction" in note for note in glm.notes)


def test_a_config_with_infinity_is_read_as_transformers_reads_it(tmp_path):
    """Nemotron-H's published config.json holds `"time_step_limit": [0.0, Infinity]`."""
    text = (CONFIG_DIR / "Nemotron-H-8B-Base-8K.json").read_text()
    assert "Infinity" in text
    model = model_dir(tmp_path, "nemotron", text=text)
    proc = cli("estimate", "--model", str(model), "--gpu", "L4", "--context", "8192", "--format", "json")
    assert proc.exit_code == 0, proc.stderr
    # vLLM (an L4 plan's first engine) keeps the convolution state in bf16 and the SSM state in float32
    assert proc.json()["sizing"]["state_bytes_per_sequence"] == 24 * ((8192 + 2048) * 3 * 2 + 128 * 64 * 128 * 4)
    nan = model_dir(
        tmp_path,
        "nan",
        text=json.dumps({**published("Meta-Llama-3-8B-Instruct"), "num_hidden_layers": 1})[:-1] + ', "num_hidden_layers": NaN}',
    )
    refused = cli("estimate", "--model", str(nan), "--gpu", "L4")
    assert refused.exit_code == 2 and "num_hidden_layers is `NaN`, not a whole number" in refused.stderr


SPEED = re.compile(r"\d[\d,.]* tok/s")


def _nothing_from_a_partial_size(proc: Any) -> None:
    shown = "\n".join(line for line in proc.stdout.splitlines() if not line.startswith("rule"))
    assert proc.exit_code == 1, proc.stdout
    assert not SPEED.search(shown), shown
    assert "fits" not in shown.replace("does not fit", ""), shown
    assert "vllm serve" not in shown and "llama-server -m" not in shown


@pytest.mark.parametrize(
    ("label", "edit"),
    [
        ("an unknown model_type", lambda c: {**c, "model_type": "llamaish"}),
        ("a quantization it cannot size", lambda c: {**c, "quantization_config": {"quant_method": "hqq", "nbits": 3}}),
    ],
)
def test_no_speed_fit_or_command_when_the_weights_are_unknown(tmp_path, label, edit):
    model = model_dir(tmp_path, "m", edit(published("Meta-Llama-3-8B-Instruct")))
    _nothing_from_a_partial_size(cli("estimate", "--model", str(model), "--threads", "2", "--bandwidth", "20"))
    _nothing_from_a_partial_size(cli("estimate", "--model", str(model), "--gpu", "H100-SXM"))
    data = cli("estimate", "--model", str(model), "--gpu", "H100-SXM", "--format", "json").json()
    assert data["commands"] == [] and data["plan"]["fit"] == "unknown" and data["plan"]["step"]["tps_per_sequence"] is None
    assert data["sizing"]["weights_bytes"] is None and all(row["tps_total"] is None for row in data["plan"]["sweep"])


@pytest.mark.parametrize(
    ("label", "extra", "why"),
    [
        ("a hybrid pattern", {"hybrid_override_pattern": "M*M*", "num_hidden_layers": 4}, "state-space or linear-attention"),
        (
            "linear-attention layer_types",
            {"layer_types": ["linear_attention", "full_attention"] * 2, "num_hidden_layers": 4},
            "layer_types",
        ),
    ],
)
def test_an_unknown_architecture_whose_cache_cannot_be_known_is_refused_with_the_reason(tmp_path, label, extra, why):
    config = {**published("Meta-Llama-3-8B-Instruct"), "model_type": "newhybrid", **extra}
    proc = cli("estimate", "--model", str(model_dir(tmp_path, "m", config)), "--gpu", "H100-SXM")
    assert proc.exit_code == 2 and "the cache is unknown" in proc.stderr and why in proc.stderr, proc.stderr
    assert not proc.stdout


def test_an_unknown_architecture_gets_its_cache_from_the_fields_that_are_there():
    base = {**published("Meta-Llama-3-8B-Instruct"), "model_type": "newmodel", "num_hidden_layers": 4, "sliding_window": 512}
    typed = sizing(
        config_only("m", {**base, "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]})
    )
    assert [layer.window for layer in typed.cache] == [512, 512, 512, None] and typed.weights_bytes is None
    untyped = sizing(config_only("m", base))  # a window, but not which layers: every layer full, an upper bound
    assert [layer.window for layer in untyped.cache] == [None] * 4
    assert any("upper bound" in note for note in untyped.notes)


# --- one verdict rule ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "device", "gpus", "context", "concurrency", "fits_at_most"),
    [
        ("Qwen3-30B-A3B", "H100-SXM", 1, 8192, 16, 14),  # 78.1 GB needed of 77.0 usable: was "tight", exit 0
        ("Meta-Llama-3-70B-Instruct", "RTX 4090", 8, 8192, 16, 10),  # 25.0 of 23.2 GB per device
    ],
)
def test_need_above_usable_does_not_fit_and_exits_1_with_the_limits_that_do(
    tmp_path, name, device, gpus, context, concurrency, fits_at_most
):
    plan = make_plan(sizing(config_only(name)), lookup(device), context, concurrency, "fp16", gpus)
    assert plan.need_per_device > plan.usable_per_device and plan.fit == "does not fit"
    assert plan.max_concurrency == fits_at_most
    args = ["estimate", "--model", str(model_dir(tmp_path, name)), "--gpu", device, "--gpus", str(gpus)]
    proc = cli(*args, "--context", str(context), "--concurrency", str(concurrency))
    shown = "\n".join(line for line in proc.stdout.splitlines() if not line.startswith("rule"))
    assert proc.exit_code == 1 and "does not fit" in shown and "tight" not in shown
    assert f"at most {fits_at_most} sequences" in proc.stdout


def test_the_sweep_table_and_the_verdict_agree():
    """The table used all of the memory while the verdict used 90 %: 4 sequences at 8,192 showed a speed."""
    plan = make_plan(sizing(config_only("Meta-Llama-3-70B-Instruct")), lookup("H100-SXM"), 8192, 16, "fp16", gpus=2)
    assert plan.max_concurrency == 1
    at = {(row.context, row.concurrency): row for row in plan.sweep}
    assert at[(8192, 1)].fit in ("fits", "tight") and at[(8192, 4)].fit == "does not fit"


MODELS = sorted(set(CONFIGS) | set(NEW) | {"Meta-Llama-3-8B-Instruct", "DeepSeek-V3", "gemma-2-9b-it", "DeepSeek-V2-Lite-Chat"})
DEVICES = [name for name in names() if name not in ("CPU",)]


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(name="Qwen3-Next-80B-A3B-Instruct", device="A10", context=96419, concurrency=61, kv="bf16", gpus=8)  # no knob was offered
@given(
    name=st.sampled_from(MODELS),
    device=st.sampled_from(DEVICES),
    context=st.integers(1, 1 << 18),
    concurrency=st.integers(1, 512),
    kv=st.sampled_from(sorted(KV_DTYPE_BYTES)),
    gpus=st.sampled_from([1, 2, 4, 8, 16]),
)
def test_one_rule_for_the_verdict_the_limits_the_sweep_and_the_knobs(name, device, context, concurrency, kv, gpus):
    size = sizing(config_only(name))
    assume(min(gpus, 8) in valid_tensor_sizes(size))  # the others are refused before planning (next tests)
    hardware = lookup(device)
    plan = make_plan(size, hardware, context, concurrency, kv, gpus)
    usable = plan.usable_per_device
    for row in [plan.step, *plan.sweep]:
        assert (row.fit == "does not fit") == (row.need_bytes > usable), (row.context, row.concurrency)
        assert row.fit != "tight" or 0.95 * usable < row.need_bytes <= usable
    planner = Planner(size, hardware, plan.layout, kv)
    if plan.max_concurrency:  # the most sequences that fit, fit, and one more does not
        assert planner.need(context, plan.max_concurrency) <= usable < planner.need(context, plan.max_concurrency + 1)
    if plan.max_context and plan.max_context < max(size.max_context or 0, context):
        assert planner.need(plan.max_context, concurrency) <= usable < planner.need(plan.max_context + 1, concurrency)
    assert (plan.knobs == []) == (plan.fit in ("fits",))  # knobs only when it does not fit, or only tightly
    for command in serve.commands(plan, f"/models/{name}", threads=8):
        if command.engine == "vllm":
            assert vllm_refusals(command.line.replace('"$HEAD_IP"', "10.0.0.1"), published(name)) == [], command.line
        else:
            assert llama_server_refusals(command.line) == [], command.line


# --- command lines the engine accepts --------------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("kv", ["fp16", "fp8", "q4_0"])
def test_every_emitted_command_passes_the_engines_own_checks(name, kv):
    """One vLLM line per node (two-node plans: node 0, then node 1 headless), llama-server on one node;
    none for a plan that cannot start; every line within the rules vLLM 0.33 checks."""
    size = sizing(config_only(name))
    for device in ("H100-SXM", "L40S", "RTX 4090"):
        for gpus in [g for g in (1, 2, 4, 8, 16) if min(g, 8) in valid_tensor_sizes(size)]:
            for context in (4096, 32768, 131072):
                plan = make_plan(size, lookup(device), context, 8, kv, gpus)
                lines = serve.commands(plan, f"/models/{name}", threads=8)
                if not lines:  # not one sequence fits: no line (estimate prints the nearest plan that starts)
                    assert plan.fit == "does not fit" and not plan.max_concurrency and not plan.max_context_alone, (name, device, gpus)
                    continue
                engines = [c.engine for c in lines]
                nodes = plan.layout.pipeline
                assert engines == (["vllm"] * nodes + ["llama-server"] if nodes == 1 else ["vllm"] * nodes), engines
                for command in lines:
                    if command.engine == "vllm":
                        line = command.line.replace('"$HEAD_IP"', "10.0.0.1")
                        assert vllm_refusals(line, published(name)) == [], (line, command.notes)
                        assert (command.node, command.nodes) == (lines.index(command), nodes)
                    else:
                        assert llama_server_refusals(command.line) == [], command.line


def test_the_engine_rules_refuse_what_vllm_refuses():
    """The rules the tests hold the commands to bite: each line here is one vLLM 0.33 refuses (each seen
    refused by vLLM itself in benchmarks/bench_vllm_lines.py's harness)."""
    llama2, qwen = CONFIGS["Llama-2-7b-hf"], CONFIGS["Qwen2.5-7B-Instruct"]
    assert "must be divisible by tensor parallel size (3)" in " ".join(vllm_refusals("vllm serve m --tensor-parallel-size 3", llama2))
    assert "greater than the derived max_model_len (4096)" in " ".join(vllm_refusals("vllm serve m --max-model-len 8192", llama2))
    assert vllm_refusals("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve m --max-model-len 8192", llama2) == []
    assert vllm_refusals("vllm serve m --max-model-len 131072", qwen)  # 32,768 without a rope_scaling
    assert vllm_refusals("vllm serve m --max-model-len 131072", published("gpt-oss-20b")) == []  # max_position_embeddings 131,072
    # YaRN: 0.33 takes max_position_embeddings as already scaled, so the model cards' block alone does not lift it
    yarn = {**qwen, "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
    assert vllm_refusals("vllm serve m --max-model-len 131072", yarn)
    assert vllm_refusals("vllm serve m --max-model-len 131072 --hf-overrides '{\"max_position_embeddings\":131072}'", yarn) == []
    assert vllm_refusals("vllm serve m --kv-cache-dtype q4_0", llama2) and vllm_refusals("vllm serve m --max-num-seqs many", llama2)
    assert vllm_refusals("vllm serve m --kv-cache-dtype int4_per_token_head", llama2) == []  # 0.33 has 4-bit KV caches
    assert vllm_refusals("vllm serve m --tensor-parallel-size 8", published("Meta-Llama-3-8B-Instruct")) == []
    assert vllm_refusals("vllm serve m --tensor-parallel-size 32", CONFIGS["Qwen2.5-7B-Instruct"])  # 28 heads
    # two nodes: refused without --nnodes ("World size (16) is larger than … GPUs (8) in this node"), started with it
    two = "vllm serve m --tensor-parallel-size 8 --pipeline-parallel-size 2"
    assert "World size (16)" in " ".join(vllm_refusals(two, published("DeepSeek-V3")))
    assert vllm_refusals(two + " --nnodes 2 --node-rank 0 --master-addr 10.0.0.1", published("DeepSeek-V3")) == []
    assert vllm_refusals(two + " --nnodes 2 --node-rank 1 --master-addr 10.0.0.1 --headless", published("DeepSeek-V3")) == []
    assert vllm_refusals(two + " --nnodes 2 --node-rank 1 --master-addr 10.0.0.1", published("DeepSeek-V3"))  # a second API server
    assert "8 is not divisible by 6" in " ".join(vllm_refusals("vllm serve m --tensor-parallel-size 6", published("GLM-4.5-Air")))
    assert llama_server_refusals("llama-server -m x.gguf -c 100 -np 3 -ctk q8_0 -ctv q8_0")  # slots, and no flash attention


def test_gpus_3_on_a_32_head_model_is_refused_with_the_valid_sizes(tmp_path):
    proc = cli("estimate", "--model", str(model_dir(tmp_path, "Meta-Llama-3-8B-Instruct")), "--gpu", "H100-SXM", "--gpus", "3")
    assert proc.exit_code == 2 and "valid sizes up to 8: 1, 2, 4, 8" in proc.stderr
    assert "Total number of attention heads (32) must be divisible by tensor parallel size (3)" in proc.stderr
    nemotron = cli("estimate", "--model", str(model_dir(tmp_path, "Nemotron-H-8B-Base-8K")), "--gpu", "L4", "--gpus", "3")
    assert nemotron.exit_code == 2 and "its 128 Mamba-2 heads" in nemotron.stderr and "its 8 Mamba-2 groups" in nemotron.stderr
    # the KV heads count too: Qwen2.5-7B's 28 heads divide by 7, its 4 KV heads neither divide by 7 nor 7 by them
    assert valid_tensor_sizes(sizing(config_only("Qwen2.5-7B-Instruct"))) == [1, 2, 4]
    assert vllm_refusals("vllm serve m --tensor-parallel-size 7", CONFIGS["Qwen2.5-7B-Instruct"])
    scout = cli("estimate", "--model", str(model_dir(tmp_path, "Llama-4-Scout-17B-16E-Instruct")), "--gpu", "H100-SXM", "--gpus", "5")
    assert scout.exit_code == 2 and "valid sizes up to 8: 1, 2, 4, 8" in scout.stderr
    twelve = cli("estimate", "--model", str(model_dir(tmp_path, "DeepSeek-V3")), "--gpu", "H100-SXM", "--gpus", "12")
    assert twelve.exit_code == 2 and "whole nodes" in twelve.stderr


def test_a_refusal_names_the_rule_that_fails_not_one_that_holds(tmp_path):
    """GLM-4.5-Air's 96 heads divide by 6 and by 3; its 8 KV heads do not (vLLM's configuration accepts
    --tensor-parallel-size 6 and QKVParallelLinear stops the load), so the heads rule is never quoted."""
    for gpus in ("6", "3"):
        proc = cli("estimate", "--model", str(model_dir(tmp_path, "GLM-4.5-Air")), "--gpu", "H100-SXM", "--gpus", gpus)
        assert proc.exit_code == 2 and f'"8 is not divisible by {gpus}"' in proc.stderr and "its 8 KV heads" in proc.stderr
        assert "attention heads (96)" not in proc.stderr


LLAMA_31_405B = {  # meta-llama/Llama-3.1-405B-Instruct
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False, "hidden_size": 16384,
    "intermediate_size": 53248, "max_position_embeddings": 131072, "num_attention_heads": 128, "num_hidden_layers": 126,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "rope_scaling": {
        "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3",
    },
    "vocab_size": 128256, "mlp_bias": False,
}  # fmt: skip


@pytest.mark.parametrize("name", ["DeepSeek-V3", "Llama-3.1-405B"])
def test_gpus_16_plans_two_nodes_tensor_parallel_within_pipeline_across(tmp_path, name):
    config = LLAMA_31_405B if name == "Llama-3.1-405B" else published(name)
    model = model_dir(tmp_path, name, config)
    data = cli("estimate", "--model", str(model), "--gpu", "H100-SXM", "--gpus", "16", "--context", "8192", "--format", "json").json()
    plan = data["plan"]
    assert (plan["tensor_parallel"], plan["pipeline_parallel"]) == (8, 2)
    assert plan["weights_per_device"] == pytest.approx(data["sizing"]["weights_bytes"] / 16)
    assert "InfiniBand" in plan["allreduce"] and plan["step"]["pipeline_s"] > 0
    head, worker = data["commands"]  # one line per node; llama-server serves from one node, so none
    for node, command in enumerate((head, worker)):
        argv = [word if word != "$HEAD_IP" else "10.0.0.1" for word in command["argv"]]
        assert argv[argv.index("--tensor-parallel-size") + 1] == "8" and argv[argv.index("--pipeline-parallel-size") + 1] == "2"
        assert argv[argv.index("--nnodes") + 1] == "2" and argv[argv.index("--node-rank") + 1] == str(node)
        assert (command["node"], command["nodes"]) == (node, 2) and ("--headless" in argv) == (node == 1)
        assert vllm_refusals(shlex.join(argv), config) == []
    assert any("no Ray" in note for note in head["notes"])
    one_node = make_plan(sizing(config_only(name, config)), lookup("H100-SXM"), 8192, 1, "fp16", 16, gpus_per_node=16)
    assert one_node.layout.pipeline == 1 and one_node.step.pipeline_s == 0  # --gpus-per-node 16: one NVLink domain


def test_fp8_weights_are_offered_where_the_gpu_computes_in_fp8():
    plan = make_plan(sizing(config_only("Llama-3.1-405B", LLAMA_31_405B)), lookup("H100-SXM"), 8192, 1, "fp16", 8)
    assert plan.fit == "does not fit"
    fp8 = [knob for knob in plan.knobs if knob.startswith("FP8 weights")]
    assert fp8, plan.knobs
    assert from_config(LLAMA_31_405B).params_total == 405_853_388_800
    assert pytest.approx(50.7, abs=0.1) == 405_853_388_800 / 8 / 1e9  # one byte per weight: 50.7 GB per device of 77 usable
    assert "16 GPUs on 2 nodes of 8 (--gpus 16) fit" in plan.knobs
    a100 = make_plan(sizing(config_only("Llama-3.1-405B", LLAMA_31_405B)), lookup("A100-SXM-80GB"), 8192, 1, "fp16", 8)
    assert not any(knob.startswith("FP8 weights") for knob in a100.knobs)  # an A100 has no FP8


def test_knobs_never_suggest_the_precision_the_weights_already_have(tmp_path):
    gguf = llama_gguf(tmp_path / "llama-70b.Q4_K_M.gguf", layers=80, hidden=8192, heads=64, kv_heads=8, vocab=128, qtype="Q4_K")
    proc = cli("estimate", "--model", str(gguf), "--gpu", "RTX 4090", "--context", "8192", "--format", "json")
    plan = proc.json()["plan"]
    assert proc.exit_code == 1 and plan["fit"] == "does not fit"
    assert not any("4-bit" in knob or "quantize" in knob or "FP8" in knob for knob in plan["knobs"]), plan["knobs"]
    assert any("split them across devices" in knob for knob in plan["knobs"]), plan["knobs"]
    sixteen = make_plan(sizing(config_only("Qwen2-7B-Instruct")), lookup("Jetson Orin Nano 8GB"), 4096, 1)
    assert any("4-bit weights" in knob for knob in sixteen.knobs) and any("quantize them" in knob for knob in sixteen.knobs)


def test_max_model_len_is_one_the_engine_accepts_and_says_why(tmp_path):
    for name, asked, derived in (("Llama-2-7b-hf", 8192, 4096), ("Qwen2.5-7B-Instruct", 131072, 32768), ("gpt-oss-20b", 131072, 131072)):
        plan = make_plan(sizing(config_only(name)), lookup("H200-SXM"), asked, 1)
        (vllm,) = serve.vllm(plan, f"/models/{name}")
        argv = list(vllm.argv)
        assert argv[argv.index("--max-model-len") + 1] == str(derived)
        assert vllm_refusals(vllm.line, published(name)) == []
        said = [note for note in vllm.notes if "refuses to start above it" in note]
        assert bool(said) == (asked > derived), vllm.notes
    proc = cli("estimate", "--model", str(model_dir(tmp_path, "Llama-2-7b-hf")), "--gpu", "H100-SXM", "--context", "8192")
    assert "--max-model-len 4096" in proc.stdout and "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in proc.stdout


YARN = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}  # Qwen's model cards, "Processing Long Texts"


@pytest.mark.parametrize("name", ["Qwen2.5-7B-Instruct", "Qwen3-30B-A3B"])
def test_a_yarn_context_is_served_as_vllm_accepts_it(tmp_path, name):
    """With the rope_scaling block the Qwen model cards add, 131,072 tokens: vLLM 0.33 takes
    max_position_embeddings as already scaled, so the line raises it with --hf-overrides (and the plan no
    longer says "unless RoPE scaling is configured")."""
    config = {**published(name), "rope_scaling": dict(YARN)}
    size = sizing(config_only(name, config))
    assert size.max_context == size.yarn_context == 131072 and size.rope_note == "yarn factor 4 over 32,768"
    plan = make_plan(size, lookup("H200-SXM"), 131072, 4)
    (vllm, _llama) = serve.commands(plan, f"/models/{name}")
    argv = list(vllm.argv)
    assert argv[argv.index("--max-model-len") + 1] == "131072"
    assert json.loads(argv[argv.index("--hf-overrides") + 1]) == {"max_position_embeddings": 131072}
    assert vllm_refusals(vllm.line, config) == [] and any("YaRN scaling" in note for note in vllm.notes)
    assert not any("unless RoPE scaling is configured" in note for note in plan.notes)
    past = make_plan(size, lookup("H200-SXM"), 200000, 1)
    assert any("past the 131,072 tokens its RoPE scaling reaches" in note for note in past.notes)
    (capped, _llama) = serve.commands(past, f"/models/{name}")
    assert "131072" in capped.argv and vllm_refusals(capped.line, config) == []


def test_the_kv_dtype_in_each_command_is_the_one_its_limits_were_worked_out_for():
    """vLLM 0.33 stores a 4-bit request as int4_per_token_head (4 bits, plus an 8-byte scale pair per head
    and token), llama.cpp as q4_0 (blocks of 32 with a 16-bit scale): each line's limits are its own."""
    size = sizing(config_only("Meta-Llama-3-8B-Instruct"))
    plan = make_plan(size, lookup("RTX 4090"), 4096, 32, "q4_0")
    vllm, llama = serve.commands(plan, "/models/llama3-8b")
    argv = list(vllm.argv)
    stored = vllm_storage("q4_0")
    assert argv[argv.index("--kv-cache-dtype") + 1] == "int4_per_token_head"
    assert size.layer_bytes_per_token(size.cache[0], stored) == 2 * 8 * 128 * 0.5 + 8 * 8  # 8 KV heads × (128 × 2 halves + 8 B)
    mine = make_plan(size, lookup("RTX 4090"), 4096, 32, "q4_0", storage=stored)
    assert argv[argv.index("--max-num-seqs") + 1] == str(min(32, mine.max_concurrency))
    assert any("int4_per_token_head (4 bits per element, 8 bytes of scales per head and token)" in note for note in vllm.notes), vllm.notes
    # fp8 asked of llama.cpp: q8_0, 8.5 bits per element, sized as such
    asked = make_plan(size, lookup("RTX 4090"), 4096, 32, "fp8")
    _, llama = serve.commands(asked, "/models/llama3-8b.gguf")
    q8 = make_plan(size, lookup("RTX 4090"), 4096, 32, "q8_0")
    words = list(llama.argv)
    assert words[words.index("-ctk") + 1] == "q8_0" and words[words.index("-np") + 1] == str(min(32, q8.max_concurrency))
    assert q8.max_concurrency < asked.max_concurrency and any("8.5 bits" in note for note in llama.notes)


def test_nemotron_h_keeps_its_ssm_state_as_vllm_does_and_does_not_fit_where_it_seemed_to(tmp_path):
    """vLLM keeps Nemotron-H's SSM state in float32 (NemotronHForCausalLMConfig): the 56B's state is
    912.6 MB per sequence, not 459.6; on 2 × H100 at 8,192 × 32 it needs 80.2 GB of 77.0 (does not fit), at most 26."""
    model = model_dir(tmp_path, "Nemotron-H-56B-Base-8K")
    args = ("estimate", "--model", str(model), "--gpu", "H100-SXM", "--gpus", "2", "--context", "8192", "--concurrency", "32")
    proc = cli(*args, "--format", "json")
    data = proc.json()
    assert proc.exit_code == 1 and data["plan"]["fit"] == "does not fit" and data["plan"]["max_concurrency"] == 26
    assert data["sizing"]["storage"]["ssm_dtype"] == "float32"
    assert round(data["sizing"]["state_bytes_per_sequence"] / 1e6, 1) == 912.6
    assert round(data["plan"]["need_per_device"] / 1e9, 1) == 80.2
    (vllm,) = [c for c in data["commands"] if c["engine"] == "vllm"]
    assert vllm["argv"][vllm["argv"].index("--max-num-seqs") + 1] == "26"
    assert any("SSM state in bfloat16" in knob for knob in data["plan"]["knobs"])  # vLLM's flag that halves it, with its risk
    text = cli(*args).stdout
    assert "SSM state in float32" in text and "at most 26 sequences" in text


def test_a_plan_that_cannot_start_prints_no_line_but_the_nearest_that_does(tmp_path):
    model = model_dir(tmp_path, "Meta-Llama-3-70B-Instruct")
    proc = cli("estimate", "--model", str(model), "--gpu", "L40S", "--context", "8192", "--format", "json")
    data = proc.json()
    assert proc.exit_code == 1 and data["plan"]["fit"] == "does not fit" and data["commands"] == []
    nearest = data["nearest"]
    assert nearest["gpus"] == 4 and nearest["plan"]["fit"] in ("fits", "tight")
    assert [c["engine"] for c in nearest["commands"]] == ["vllm", "llama-server"]
    text = cli("estimate", "--model", str(model), "--gpu", "L40S", "--context", "8192").stdout
    assert "no command lines: not one sequence fits" in text and "the nearest plan that starts: 4 GPUs" in text
    assert "--tensor-parallel-size 4" in text


# --- the JSON ------------------------------------------------------------------------------------------


def test_estimate_json_holds_kv_bytes_per_token_and_follows_its_schema(tmp_path):
    import jsonschema

    schema = json.loads(resources.files("decode_doctor.schema").joinpath("estimate-v1.schema.json").read_text())
    for name, gpu in (("gpt-oss-20b", "H100-SXM"), ("Qwen3-Next-80B-A3B-Instruct", "H200-SXM"), ("Llama-2-7b-hf", "L4")):
        data = cli("estimate", "--model", str(model_dir(tmp_path, name)), "--gpu", gpu, "--kv-dtype", "fp8", "--format", "json").json()
        jsonschema.validate(data, schema)
        sized = data["sizing"]
        growth = sum(layer["elements_per_token"] for layer in sized["cache_layers"] if not layer["window"])  # fp8: one byte
        assert sized["kv_dtype"] == "fp8" and sized["kv_bytes_per_token"] == growth
        assert sized["kv_bytes_per_token_before_windows"] == sum(sized["kv_bytes_per_token_by_kind"].values())
    assert sized["kv_bytes_per_token"] == 32 * 2 * 32 * 128  # Llama 2 7B: 32 layers × K and V × 32 heads × 128
    unknown = model_dir(tmp_path, "mystery", {**published("Meta-Llama-3-8B-Instruct"), "model_type": "mystery"})
    jsonschema.validate(cli("estimate", "--model", str(unknown), "--gpu", "L4", "--format", "json").json(), schema)


def test_the_json_headline_is_growth_per_token_after_the_windows():
    """gpt-oss-20b: 12 full layers grow 24,576 bytes per token (2 × 8 KV heads × 64 × 2 B each); the 12
    sliding layers' 128-token windows are a fixed 3 MiB per sequence beside it. Scout: 12 full layers
    grow 49,152; the 36 chunked layers hold at most 8,192 tokens each."""
    from decode_doctor.checks.planning.render import sizing_dict

    oss = sizing(config_only("gpt-oss-20b"))
    data = sizing_dict(oss, "fp16", Storage.asked("fp16"))
    assert data["kv_bytes_per_token"] == 24_576 and data["kv_bytes_per_token_before_windows"] == 49_152
    assert data["kv_window_bytes_per_sequence"] == 12 * 2048 * 128 == 3_145_728
    scout = sizing_dict(sizing(config_only("Llama-4-Scout-17B-16E-Instruct")), "fp16", Storage.asked("fp16"))
    assert scout["kv_bytes_per_token"] == 49_152 and scout["kv_bytes_per_token_before_windows"] == 196_608
    assert scout["kv_window_bytes_per_sequence"] == 36 * 4096 * 8192


# --- smaller ---------------------------------------------------------------------------------------------


def test_a_config_that_is_a_link_loop_or_names_more_kv_heads_than_heads(tmp_path):
    loop = tmp_path / "loop"
    loop.mkdir()
    (loop / "config.json").symlink_to("config.json")
    proc = cli("estimate", "--model", str(loop), "--gpu", "L4")
    assert proc.exit_code == 2 and "config.json is a link loop" in proc.stderr
    wrong = model_dir(tmp_path, "wrong", {**published("Meta-Llama-3-8B-Instruct"), "num_key_value_heads": 64})
    proc = cli("estimate", "--model", str(wrong), "--gpu", "L4")
    assert proc.exit_code == 2 and "num_key_value_heads 64 does not divide the 32 attention heads" in proc.stderr


def test_a_hybrid_gguf_is_refused_rather_than_sized_as_all_attention(tmp_path):
    """llama.cpp's GGUF of a Mamba-2 hybrid names its ssm.* sizes: the header alone does not say which
    layers cache K and V, so the cache is unknown, never every layer's."""
    from .support.modelgen import write_gguf

    meta = {
        "general.architecture": "nemotron_h", "general.alignment": 32, "nemotron_h.block_count": 4, "nemotron_h.context_length": 8192,
        "nemotron_h.embedding_length": 256, "nemotron_h.attention.head_count": 8, "nemotron_h.attention.head_count_kv": 2,
        "nemotron_h.ssm.state_size": 128, "nemotron_h.ssm.inner_size": 512, "tokenizer.ggml.tokens": [f"t{i}" for i in range(64)],
    }  # fmt: skip
    path = tmp_path / "nemotron-h.Q8_0.gguf"
    write_gguf(path, meta, {"token_embd.weight": ("Q8_0", [256, 64]), "blk.0.ssm_in.weight": ("Q8_0", [256, 1024])})
    proc = cli("estimate", "--model", str(path), "--gpu", "L4")
    assert proc.exit_code == 2 and "state-space or linear-attention" in proc.stderr and not proc.stdout
