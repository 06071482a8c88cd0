"""The fuzzing harness in CI (tests/support/fuzzing.py): a bounded budget of mutated captures per
parser, plus hypothesis-built JSON for the readers of config.json, daemon.json and reports. Any
exception outside a parser's documented refusals fails the test with the input that raised it.
benchmarks/fuzz.py runs the same targets with 10⁵ inputs each."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .support import fuzzing

TARGETS = {target.name: target for target in fuzzing.targets()}
BUDGET = 40  # mutations per target in CI; the benchmark runs 10⁵


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_no_parser_raises_outside_its_refusals(name):
    target = TARGETS[name]
    for data in fuzzing.inputs(target, BUDGET, seed=1):
        exc = fuzzing.run_one(target, data)
        assert exc is None, f"{name}: {fuzzing.describe(exc)} on {data[:200]!r}"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=25,
)
FAMILIES = ["llama", "qwen2", "deepseek_v3", "jamba"]
KEYS = ["num_hidden_layers", "hidden_size", "head_dim", "model_type", "kv_lora_rank", "text_config", "n_shared_experts"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=10), JSON, max_size=8),
    st.sampled_from(["llama", "qwen2", "deepseek_v3", "jamba"]),
)
def test_any_config_json_is_sized_or_refused(config, family):
    target = TARGETS["config.json"]
    config.setdefault("model_type", family)
    exc = fuzzing.run_one(target, json.dumps(config).encode())
    assert exc is None, fuzzing.describe(exc)


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(st.sampled_from(["registry-mirrors", "runtimes", "features", "data-root", "default-runtime"]), JSON, max_size=5))
def test_any_daemon_json_is_read_or_refused(daemon):
    exc = fuzzing.run_one(TARGETS["daemon.json"], json.dumps(daemon).encode())
    assert exc is None, fuzzing.describe(exc)


@settings(max_examples=30, deadline=None)
@given(st.fixed_dictionaries({"schema_version": st.just(2), "findings": JSON, "results": JSON}, optional={"facts": JSON, "run": JSON}))
def test_any_report_is_compared_or_refused(report):
    exc = fuzzing.run_one(TARGETS["reports for diff and merge"], json.dumps(report).encode())
    assert exc is None, fuzzing.describe(exc)


def test_hostile_sizes_are_refused_without_allocating_them(tmp_path):
    """A GGUF claiming 2⁶⁰ tensors or a 2 GB key string, a safetensors header claiming 2⁶⁰ bytes:
    refused from the header, never read or allocated (each would otherwise need gigabytes)."""
    import resource
    import struct

    from decode_doctor.models.modelfiles import ModelFormatError, read_gguf, read_safetensors_header

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cases = {
        "tensors.gguf": b"GGUF" + struct.pack("<IQQ", 3, 1 << 60, 0),
        "string.gguf": b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2 << 30) + b"general.name",
        "array.gguf": b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 4) + b"toks" + struct.pack("<IIQ", 9, 8, 1 << 62),
    }
    for name, data in cases.items():
        with pytest.raises(ModelFormatError):
            read_gguf(fuzzing.Scratch().write(name, data))
    header = struct.pack("<Q", 1 << 60) + b"{}"
    with pytest.raises(ModelFormatError):
        read_safetensors_header(fuzzing.Scratch().write("huge.safetensors", header))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB: nothing near the claims


@pytest.mark.parametrize("name", sorted(name for name, target in TARGETS.items() if target.captures))
def test_every_capture_cut_anywhere_parses_or_refuses(name):
    """Kernel logs (small) cut at every byte, the larger captures at 30 places spread over each
    (benchmarks/fuzz.py cuts every capture at every byte)."""
    target = TARGETS[name]
    step = 1 if name == "kernel log" else max(1, max(map(len, target.seeds)) // 30)
    for data in fuzzing.cuts(target, step):
        exc = fuzzing.run_one(target, data)
        assert exc is None, f"{name}: {fuzzing.describe(exc)} at byte {len(data)}"


def test_a_megabyte_line_is_parsed_in_linear_time():
    import time

    line = b"CUDA Version  : " + b" " * (1 << 20) + b"x\n"
    for name in ("nvidia-smi -q (text)", "nvidia-smi (table)", "kernel log", "nvidia-smi -q -x"):
        started = time.process_time()
        fuzzing.run_one(TARGETS[name], line * 2 + b"| NVIDIA-SMI 1.2  Driver Version: " + b" " * (1 << 20) + b"|\n")
        assert time.process_time() - started < 2, name  # a backtracking pattern takes minutes here
