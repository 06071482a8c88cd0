"""Serving plans: sizes from config.json alone against the published counts, KV per architecture
worked out by hand, two plans worked out by hand, the engine command lines against the engines'
flag lists, units, and the device that is not there."""

from __future__ import annotations

import json
import shlex

import pytest

from decode_doctor.checks.planning import serve
from decode_doctor.engine.units import parse_bytes, parse_rate
from decode_doctor.models.architecture import from_config
from decode_doctor.models.hardware import lookup
from decode_doctor.models.modelfiles import ModelInfo, apply_config, read_model
from decode_doctor.models.plan import kv_shard, make_plan
from decode_doctor.models.sizing import sizing

from .support.engine_rules import flags
from .support.harness import cli, run_check
from .support.published import ACTIVE, CONFIGS, PARAMETERS

GIB = 1 << 30


def config_only(name: str) -> ModelInfo:
    info = ModelInfo(f"/models/{name}", "config-only")
    apply_config(info, CONFIGS[name])
    return info


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_config_alone_gives_the_published_parameter_count(name):
    published, _source = PARAMETERS[name]
    arch = from_config(CONFIGS[name])
    assert arch.params_total == pytest.approx(published, rel=0.01)
    if name in ACTIVE:  # model cards round the active count: "12.9B", "3.3B"
        assert arch.params_active == pytest.approx(ACTIVE[name][0], rel=0.02)


def test_sliding_window_mla_and_hybrid_caches_by_hand():
    # Mistral 7B v0.1: every layer keeps at most 4,096 tokens of 2 × 8 KV heads × 128 dims
    mistral = sizing(config_only("Mistral-7B-v0.1"))
    assert mistral.kv_bytes(8192, "fp16") == 32 * (2 * 8 * 128) * 4096 * 2 == 536_870_912
    assert mistral.kv_bytes(2048, "fp16") == 32 * (2 * 8 * 128) * 2048 * 2
    # Gemma 2 9B: 21 local layers (window 4,096) alternate with 21 global ones
    gemma = sizing(config_only("gemma-2-9b-it"))
    assert gemma.kv_bytes(8192, "fp16") == (21 * 4096 * 4096 + 21 * 4096 * 8192) * 2 == 2_113_929_216
    # Gemma 3 1B: 4 global layers of 26 (every sixth), the others a 512-token window
    gemma3 = sizing(config_only("gemma-3-1b-it"))
    assert [layer.window for layer in gemma3.cache].count(None) == 4
    assert gemma3.kv_bytes(4096, "fp16") == (4 * 512 * 4096 + 22 * 512 * 512) * 2
    # DeepSeek-V2-Lite: MLA caches one 512 + 64 latent per layer and token
    lite = sizing(config_only("DeepSeek-V2-Lite-Chat"))
    assert lite.kv_bytes_per_token("bf16") == 27 * 576 * 2 == 31_104
    # Jamba: 4 attention layers of 32 cache K and V; 28 Mamba layers keep d_inner × (d_conv − 1 + d_state)
    jamba = sizing(config_only("Jamba-v0.1"))
    state = 28 * (8192 * 3 + 8192 * 16) * 2
    assert state == 8_716_288
    assert jamba.kv_bytes_per_token("fp16") == 4 * (2 * 8 * 128) * 2 == 16_384
    assert jamba.kv_bytes(8192, "fp16") == 16_384 * 8192 + state
    # Qwen2 names a window but switches it off
    assert sizing(config_only("Qwen2-7B-Instruct")).kv_bytes(65536, "fp16") == 28 * 1024 * 65536 * 2


def test_llama_3_70b_on_two_h100_sxm_at_8192_by_16_by_hand():
    plan = make_plan(sizing(config_only("Meta-Llama-3-70B-Instruct")), lookup("H100-SXM"), 8192, 16, "fp16", gpus=2)
    weights = 70_553_706_496 * 2 / 2  # bf16, split over two
    overhead = GIB + 0.05 * weights
    kv = 80 * (2 * 8 * 128) * 8192 * 2 * 16 / 2  # 8 KV heads: four on each device
    assert plan.weights_per_device == weights and plan.kv_per_device == kv == 21_474_836_480
    assert plan.need_per_device == pytest.approx(weights + overhead + kv)
    usable = 0.9 * 81_559 * (1 << 20)
    assert plan.usable_per_device == pytest.approx(usable)
    assert plan.fit == "does not fit"
    room = usable - weights - overhead
    assert plan.max_concurrency == int(room // (kv / 16)) == 1
    assert plan.max_context == int(room // (80 * 2048 * 2 * 16 / 2)) == 691
    read = (70_553_706_496 - 128_256 * 8192) * 2 / 2 + kv  # the input table is gathered, not read
    assert plan.step.read_bytes == pytest.approx(read)
    assert plan.step.memory_s == pytest.approx(read / 3350e9)
    flops = (2 * 70_553_706_496 * 16 + 4 * 64 * 128 * 8192 * 80 * 16) / 2
    assert plan.step.compute_s == pytest.approx(flops / 989.4e12)
    allreduce = 160 * (2 * (1 / 2) * 8192 * 2 * 16 / 450e9 + 10e-6)
    assert plan.step.allreduce_s == pytest.approx(allreduce)
    assert plan.step.binding == "bandwidth"
    assert plan.step.tps_per_sequence == pytest.approx(1 / (read / 3350e9 + allreduce))
    assert "4 GPUs in tensor parallel (--gpus 4) fit" in plan.knobs


def test_qwen2_7b_on_a_jetson_agx_orin_64gb_by_hand():
    plan = make_plan(sizing(config_only("Qwen2-7B-Instruct")), lookup("Jetson AGX Orin 64GB"), 4096, 1, "fp16")
    weights = 7_615_616_512 * 2
    kv = 28 * (2 * 4 * 128) * 4096 * 2
    assert plan.need_per_device == pytest.approx(weights + GIB + 0.05 * weights + kv)
    assert plan.fit == "fits"
    room = 0.9 * 64 * GIB - weights - GIB - 0.05 * weights
    assert plan.max_concurrency == int(room // kv) == 190
    assert plan.max_context == 32768  # the model's maximum, long before memory runs out
    read = (7_615_616_512 - 152_064 * 3584) * 2 + kv
    assert plan.step.memory_s == pytest.approx(read / 204.8e9)
    assert plan.step.tps_per_sequence == pytest.approx(204.8e9 / read)
    assert any("shares this memory with the CPU" in note for note in plan.notes)


def test_compute_binds_at_high_concurrency_and_bandwidth_at_low():
    """4-bit weights and a small GQA cache on a Jetson (207 FLOPs per byte): at 256 sequences the GPU's
    arithmetic binds before its memory does."""
    info = ModelInfo("/models/qwen2-7b-gptq", "config-only")
    apply_config(info, {**CONFIGS["Qwen2-7B-Instruct"], "quantization_config": {"quant_method": "gptq", "bits": 4}})
    plan = make_plan(sizing(info), lookup("Jetson AGX Orin 64GB"), 1024, 1, "fp8")
    binding = {(row.context, row.concurrency): row.binding for row in plan.sweep}
    assert binding[(1024, 1)] == "bandwidth" and binding[(1024, 256)] == "compute"


def test_kv_is_split_by_heads_but_never_below_one_head_and_mla_is_replicated():
    llama = sizing(config_only("Meta-Llama-3-8B-Instruct"))
    assert kv_shard(llama, 2) == 0.5 and kv_shard(llama, 16) == 1 / 8
    assert kv_shard(sizing(config_only("DeepSeek-V3")), 8) == 1


@pytest.mark.parametrize(
    ("name", "device", "context", "concurrency", "kv", "gpus"),
    [
        ("Meta-Llama-3-70B-Instruct", "H100-SXM", 8192, 16, "fp16", 2),
        ("Meta-Llama-3-70B-Instruct", "H200-SXM", 32768, 8, "fp8", 4),
        ("Qwen2-7B-Instruct", "Jetson AGX Orin 64GB", 4096, 1, "q8_0", 1),
        ("Mixtral-8x7B-v0.1", "L40S", 4096, 4, "int4", 4),
        ("DeepSeek-V3", "H100-SXM", 32768, 16, "fp16", 16),  # two nodes: one line per node
        ("DeepSeek-V3", "H200-SXM", 16384, 32, "fp8", 8),
    ],
)
def test_every_emitted_flag_is_one_the_named_engine_version_has(name, device, context, concurrency, kv, gpus):
    plan = make_plan(sizing(config_only(name)), lookup(device), context, concurrency, kv, gpus)
    lists = {serve.VLLM_VERSION: flags("vllm-serve-flags.txt"), serve.LLAMA_SERVER_VERSION: flags("llama-server-flags.txt")}
    commands = serve.commands(plan, f"/models/{name}", threads=8)
    assert {command.engine for command in commands} == ({"vllm", "llama-server"} if plan.layout.pipeline == 1 else {"vllm"})
    for command in commands:
        allowed = lists[command.version]
        argv = shlex.split(command.line.replace('"$HEAD_IP"', "10.0.0.1"))[2 if command.engine == "vllm" else 1 :]
        for index, word in enumerate(argv):
            if word.startswith("-") and not word.lstrip("-").replace(".", "").isdigit():
                assert word in allowed, (command.engine, word)
                value = argv[index + 1] if index + 1 < len(argv) else None
                if allowed[word]["choices"] is not None:
                    assert value in allowed[word]["choices"], (command.engine, word, value)
        if command.engine == "vllm" and plan.fit == "fits":
            assert argv[argv.index("--max-model-len") + 1] == str(min(context, plan.sizing.engine_max_context or context))
            assert argv[argv.index("--max-num-seqs") + 1] == str(concurrency)
        if command.engine == "llama-server":
            slots = int(argv[argv.index("-np") + 1])
            assert int(argv[argv.index("-c") + 1]) % slots == 0  # the pool is the context times the slots


def test_commands_respect_the_limits_when_the_plan_does_not_fit():
    plan = make_plan(sizing(config_only("Meta-Llama-3-70B-Instruct")), lookup("H100-SXM"), 8192, 16, "fp16", gpus=2)
    (vllm, _) = serve.commands(plan, "/models/llama-70b")
    argv = list(vllm.argv)
    assert argv[argv.index("--max-num-seqs") + 1] == "1" and "--tensor-parallel-size" in argv
    assert any("lowered to 1" in note for note in vllm.notes)


def test_units():
    assert parse_bytes("80GiB") == 80 * GIB and parse_bytes("24GB") == 24 * 10**9 and parse_bytes("24") == 24 * GIB
    assert parse_bytes("512 MiB") == 512 << 20
    assert parse_rate("3.35TB/s") == pytest.approx(3350) and parse_rate("900GB/s") == 900 and parse_rate("204.8") == 204.8
    for bad in ("many", "-3GB", "0"):
        with pytest.raises(ValueError):
            parse_bytes(bad)


def test_estimate_cli_units_table_and_usage_errors(tmp_path):
    model = tmp_path / "llama-70b"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(CONFIGS["Meta-Llama-3-70B-Instruct"]))
    plan = cli(
        "estimate",
        "--model",
        str(model),
        "--gpu",
        "h100 sxm",
        "--gpus",
        "2",
        "--context",
        "8192",
        "--concurrency",
        "16",
        "--format",
        "json",
    )
    assert plan.exit_code == 1 and plan.json()["plan"]["max_concurrency"] == 1  # does not fit: exit 1, with its limits
    given = cli("estimate", "--model", str(model), "--gpu", "H100-SXM", "--memory", "141GiB", "--bandwidth", "4.8TB/s", "--format", "json")
    assert given.json()["device"]["memory_bytes"] == 141 * GIB and given.json()["device"]["bandwidth_gbps"] == pytest.approx(4800)
    text = cli("estimate", "--model", str(model), "--gpu", "B200", "--gpus", "2")
    assert "vllm serve" in text.stdout and "llama-server -m MODEL.gguf" in text.stdout and "rule" in text.stdout
    for args, error in (
        (("--gpu", "TPU v5"), "no device 'TPU v5' in the table"),
        (("--memory", "lots", "--bandwidth", "10"), "Invalid value for '--memory'"),
        (("--bandwidth", "fast"), "Invalid value for '--bandwidth'"),
        (("--gpus", "2"), "--gpus is tensor parallelism across GPUs"),
        (("--device", "cuda:0", "--gpu", "L4"), "give one"),
    ):
        proc = cli("estimate", "--model", str(model), *args)
        assert proc.exit_code == 2 and error in proc.stderr, (args, proc.stderr)


def test_a_device_that_is_not_there_is_a_usage_error(tmp_path):
    model = tmp_path / "qwen"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(CONFIGS["Qwen2-7B-Instruct"]))
    proc = cli("estimate", "--model", str(model), "--device", "cuda:3")
    assert proc.exit_code == 2 and "cuda:3 is not on this host" in proc.stderr and "--gpu NAME" in proc.stderr


def test_a_config_only_directory_never_fits_without_known_weights(tmp_path):
    known = tmp_path / "qwen"
    known.mkdir()
    (known / "config.json").write_text(json.dumps(CONFIGS["Qwen2-7B-Instruct"]))
    sized = sizing(read_model(known))
    assert sized.weights_bytes == 7_615_616_512 * 2 and "the config alone" in sized.weights_source
    mystery = tmp_path / "mystery"
    mystery.mkdir()
    config = {"model_type": "made_up", "num_hidden_layers": 4, "num_attention_heads": 4, "hidden_size": 256, "vocab_size": 100}
    (mystery / "config.json").write_text(json.dumps(config))
    unknown = sizing(read_model(mystery))
    assert unknown.weights_bytes is None and "model_type 'made_up' is not one this sizes" in unknown.weights_source
    plan = make_plan(unknown, lookup("H100-SXM"), 4096, 1)
    assert plan.fit == "unknown" and plan.max_concurrency is None
    proc = cli("estimate", "--model", str(mystery), "--gpu", "H100-SXM")
    shown = "\n".join(line for line in proc.stdout.splitlines() if not line.startswith("rule"))
    assert proc.exit_code == 1 and "fits" not in shown.replace("does not fit", "") and "unknown" in shown
    run = run_check("decode-budget", models=(mystery, known), options={"bandwidth": 100})
    lines = run.facts.summary()
    assert any("mystery" in line and "weights unknown" in line and " fits " not in line for line in lines)
    assert any("qwen" in line and "from the config: no weight files" in line for line in lines)


def test_a_context_past_the_model_maximum_is_noted():
    plan = make_plan(sizing(config_only("Meta-Llama-3-8B-Instruct")), lookup("H100-SXM"), 32768, 1)
    assert any("past the model's 8,192-token maximum" in note for note in plan.notes)
