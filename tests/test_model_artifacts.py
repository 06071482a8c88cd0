"""The model-artifacts check: downloads, context and position encoding, precision, tokenizer and
generation, paths. Built from the published configs of public models (tests/support/published.py)
and broken variants of them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .support.harness import run_app, run_check, run_fix
from .support.modelgen import hf_cache, llama_gguf, write_gguf, write_safetensors
from .support.published import NAMES, write_model

ZEROS_3GIB_SHA256 = "305b66a59d15b252092fbda9d09711230c429f351897cbd430e7b55a35fd3b97"  # sha256 of 3 GiB of zeros


def artifacts(*models: Path, **options):
    return run_check("model-artifacts", models=models, options=options)


def codes(run) -> list[str]:
    return sorted(f.code for f in run.findings)


@pytest.mark.parametrize("name", NAMES)
def test_a_clean_published_model_gives_no_finding(name, tmp_path):
    run = artifacts(write_model(name, tmp_path / name))
    assert run.findings == []
    (summary,) = run.facts.models
    assert summary.chat_template and summary.eos_ids and summary.trained_context


# --- downloads ----------------------------------------------------------------------------------


def test_a_missing_shard(tmp_path):
    model = write_model("Qwen2-7B-Instruct", tmp_path / "q")
    (model / "model-00002-of-00002.safetensors").unlink()
    (finding,) = artifacts(model).findings
    assert finding.code == "MDL001" and "names model-00002-of-00002.safetensors, which is missing" in finding.message


def test_a_truncated_shard(tmp_path):
    model = write_model("Mistral-7B-Instruct-v0.3", tmp_path / "m")
    shard = model / "model-00001-of-00002.safetensors"
    os.truncate(shard, shard.stat().st_size - 4096)
    (finding,) = artifacts(model).findings
    assert finding.code == "MDL002" and "truncated" in finding.message


def test_overlapping_offsets_gaps_and_bad_json_are_malformed(tmp_path):
    model = write_model("Phi-3-mini-4k-instruct", tmp_path / "p", shards=1)
    shard = model / "model.safetensors"

    def rewrite(header: dict) -> None:
        raw = json.dumps(header).encode()
        raw += b" " * (-len(raw) % 8)
        data_end = max(e["data_offsets"][1] for k, e in header.items() if k != "__metadata__")
        with open(shard, "wb") as handle:
            handle.write(len(raw).to_bytes(8, "little") + raw)
            handle.truncate(8 + len(raw) + data_end)

    header = {"a": {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]}, "b": {"dtype": "F16", "shape": [4], "data_offsets": [4, 12]}}
    rewrite(header)
    (finding,) = artifacts(model).findings
    assert finding.code == "MDL003" and "overlaps the tensor before it" in finding.message
    header["b"]["data_offsets"] = [16, 24]
    rewrite(header)
    (finding,) = artifacts(model).findings
    assert finding.code == "MDL003" and "leaves a gap of 8 bytes" in finding.message
    shard.write_bytes((16).to_bytes(8, "little") + b"{not json at all")
    (finding,) = artifacts(model).findings
    assert finding.code == "MDL003" and "not valid JSON" in finding.message


def test_a_truncated_gguf(tmp_path):
    gguf = llama_gguf(tmp_path / "m.gguf")
    os.truncate(gguf, gguf.stat().st_size // 2)
    (finding,) = artifacts(gguf).findings
    assert finding.code == "MDL004" and "truncated" in finding.message


def _cache(tmp_path: Path, name: str, revision: str = "0123456789abcdef0123456789abcdef01234567") -> tuple[Path, Path]:
    return hf_cache(tmp_path / "hub", f"org/{name}", write_model(name, tmp_path / "source" / name), revision)


def test_a_hugging_face_cache_with_a_truncated_shard_a_missing_blob_and_an_unfinished_download(tmp_path):
    repo, snapshot = _cache(tmp_path, "Qwen2-7B-Instruct")
    first = (snapshot / "model-00001-of-00002.safetensors").resolve()
    os.truncate(first, first.stat().st_size - 1)
    (snapshot / "model-00002-of-00002.safetensors").resolve().unlink()
    (repo / "blobs" / f"{'ab' * 32}.incomplete").write_bytes(b"\0" * 4096)
    run = artifacts(repo)
    assert codes(run) == ["MDL002", "MDL005", "MDL006"]
    by_code = {f.code: f for f in run.findings}
    assert by_code["MDL006"].path == str(snapshot / "model-00002-of-00002.safetensors")
    assert by_code["MDL002"].fix.params.commands == (
        f"huggingface-cli download org/Qwen2-7B-Instruct model-00001-of-00002.safetensors --revision {snapshot.name}",
    )
    assert list(run.facts.damaged) == [str(repo)] and {p.split(":")[0] for p in run.facts.damaged[str(repo)]} == {
        "MDL002",
        "MDL005",
        "MDL006",
    }
    # the snapshot directory itself is the same model
    assert codes(artifacts(snapshot)) == ["MDL002", "MDL005", "MDL006"]


def test_the_budget_leaves_a_damaged_download_to_this_check(tmp_path):
    _, snapshot = _cache(tmp_path, "Qwen2-7B-Instruct")
    (snapshot / "model-00002-of-00002.safetensors").resolve().unlink()
    outcome = run_app("model-artifacts", "decode-budget", models=(snapshot,), options={"bandwidth": 50})
    assert sorted(f.code for f in outcome.report.findings) == ["MDL006"]


def test_redownload_is_shown_never_run(tmp_path):
    repo, snapshot = _cache(tmp_path, "Phi-3-mini-4k-instruct")
    (snapshot / "model-00002-of-00002.safetensors").resolve().unlink()
    _, said = run_fix("model-artifacts", models=(repo,), state_dir=tmp_path / "state")
    assert "MDL006 cannot be applied by decode-doctor; run these commands yourself:" in said.text
    assert (
        f"    huggingface-cli download org/Phi-3-mini-4k-instruct model-00002-of-00002.safetensors --revision {snapshot.name}" in said.lines
    )


def test_verify_hashes_catches_a_flipped_byte_in_a_file_of_several_gigabytes(tmp_path):
    repo, snapshot = _cache(tmp_path, "Phi-3-mini-4k-instruct")
    for path in snapshot.iterdir():  # the JSON blobs carry their real sha256; the shards' blob names are made up
        if path.suffix == ".safetensors":
            path.unlink()
    (snapshot / "model.safetensors.index.json").unlink()
    run = artifacts(repo, verify_hashes=True)
    assert run.findings == [] and run.facts.models[0].verified == 4
    (snapshot / "original").mkdir()
    blob = repo / "blobs" / ZEROS_3GIB_SHA256  # named by the sha256 of 3 GiB of zeros, with one byte flipped
    with open(blob, "wb") as handle:
        handle.truncate(3 << 30)
        handle.seek(2 << 30)
        handle.write(b"\x01")
    os.symlink(f"../../../blobs/{ZEROS_3GIB_SHA256}", snapshot / "original" / "consolidated.00.pth")
    (finding,) = artifacts(repo, verify_hashes=True).findings
    assert finding.code == "MDL007" and finding.path == str(snapshot / "original" / "consolidated.00.pth")
    assert finding.evidence["expected"] == ZEROS_3GIB_SHA256


def test_verify_hashes_reads_local_dir_download_metadata(tmp_path):
    import hashlib

    model = write_model("Mistral-7B-Instruct-v0.3", tmp_path / "m", shards=1)
    meta = model / ".cache" / "huggingface" / "download"
    meta.mkdir(parents=True)
    config = (model / "config.json").read_bytes()
    (meta / "config.json.metadata").write_text(f"abc123\n{hashlib.sha256(config).hexdigest()}\n1700000000.0\n")
    assert artifacts(model, verify_hashes=True).findings == []
    (model / "config.json").write_bytes(config.replace(b"32768", b"32769", 1))
    assert [f.code for f in artifacts(model, verify_hashes=True).findings] == ["MDL007"]


# --- context and position encoding ---------------------------------------------------------------


def test_a_context_beyond_the_trained_one(tmp_path):
    llama = write_model("Meta-Llama-3-8B-Instruct", tmp_path / "l")
    (finding,) = artifacts(llama, context=16384).findings
    assert finding.code == "MDL010" and "beyond the 8,192 tokens" in finding.message
    assert artifacts(llama, context=8192).findings == []
    qwen = write_model("Qwen2-7B-Instruct", tmp_path / "q")
    assert [f.code for f in artifacts(qwen, context=131072).findings] == ["MDL010"]

    def yarn(spec):
        spec["config"]["rope_scaling"] = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}

    stretched = write_model("Qwen2-7B-Instruct", tmp_path / "q-yarn", edit=yarn)
    assert artifacts(stretched, context=131072).findings == []
    deepseek = write_model("DeepSeek-V2-Lite-Chat", tmp_path / "d")
    assert artifacts(deepseek, context=163840).findings == []


@pytest.mark.parametrize(
    ("scaling", "text"),
    [
        ({"factor": 4.0}, "it names no type"),
        ({"type": "yarn", "rope_type": "linear", "factor": 2.0}, "rope_type and type disagree"),
        ({"type": "quantum", "factor": 2.0}, "type 'quantum' is not one engines know"),
        ({"type": "linear", "factor": "abc"}, "factor is 'abc'"),
        ({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 65536}, "original_max_position_embeddings 65,536 is above"),
    ],
)
def test_an_inconsistent_rope_scaling(tmp_path, scaling, text):
    model = write_model("Qwen2-7B-Instruct", tmp_path / "q", edit=lambda spec: spec["config"].update(rope_scaling=scaling))
    (finding,) = artifacts(model).findings
    assert finding.code == "MDL011" and text in finding.message


def test_rope_theta_differs_between_config_and_gguf(tmp_path):
    model = write_model("Meta-Llama-3-8B-Instruct", tmp_path / "l", shards=1)
    metadata = {"general.architecture": "llama", "llama.context_length": 8192, "llama.rope.freq_base": 10000.0}
    write_gguf(model / "model.Q4_K_M.gguf", metadata, {"token_embd.weight": ("Q4_K", [4096, 256])})
    (finding,) = artifacts(model).findings
    assert finding.code == "MDL012" and "rope_theta 500000" in finding.message and "freq_base is 10000" in finding.message


def test_a_sliding_window_larger_than_the_context(tmp_path):
    model = write_model("Mistral-7B-Instruct-v0.3", tmp_path / "m", edit=lambda spec: spec["config"].update(sliding_window=65536))
    (finding,) = artifacts(model).findings
    assert finding.code == "MDL013"


# --- precision -----------------------------------------------------------------------------------


def test_torch_dtype_against_the_stored_dtype(tmp_path):
    def fp16(spec):
        spec["config"]["torch_dtype"] = "float16"
        spec["stored"] = "BF16"

    (finding,) = artifacts(write_model("Meta-Llama-3-8B-Instruct", tmp_path / "l", edit=fp16)).findings
    assert finding.code == "MDL020" and "overflow" in finding.message


def test_quantization_config_against_the_tensors(tmp_path):
    def gptq(spec):
        spec["config"]["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": 128}

    (finding,) = artifacts(write_model("Qwen2-7B-Instruct", tmp_path / "q", edit=gptq)).findings
    assert finding.code == "MDL020" and "says gptq" in finding.message
    (finding,) = artifacts(write_model("DeepSeek-V3", tmp_path / "d", edit=lambda s: s["config"].pop("quantization_config"))).findings
    assert finding.code == "MDL020" and "no quantization_config" in finding.message


def test_a_kv_cache_the_engine_does_not_have(tmp_path):
    gguf = llama_gguf(tmp_path / "m.gguf")  # no eos: a finding of its own, not this test's
    assert [f.code for f in artifacts(gguf, kv_dtype="fp8").findings] == ["MDL021", "MDL030"]
    assert [f.code for f in artifacts(gguf, kv_dtype="int8").findings] == ["MDL030"]
    model = write_model("Qwen2-7B-Instruct", tmp_path / "q")
    assert [f.code for f in artifacts(model, kv_dtype="int4").findings] == ["MDL021"]
    assert artifacts(model, kv_dtype="fp8").findings == []


def test_shards_of_different_dtypes(tmp_path):
    model = write_model("Meta-Llama-3-8B-Instruct", tmp_path / "l")
    write_safetensors(
        model / "model-00002-of-00002.safetensors", {"model.norm.weight": ("F16", [4096]), "lm_head.weight": ("F16", [128256, 4096])}
    )
    (finding,) = artifacts(model).findings
    assert finding.code == "MDL022" and "model-00001-of-00002.safetensors BF16" in finding.message


# --- tokenizer and generation ---------------------------------------------------------------------


def test_an_eos_the_tokenizer_does_not_define(tmp_path):
    model = write_model("Phi-3-mini-4k-instruct", tmp_path / "p", edit=lambda s: s["generation"].update(eos_token_id=[32000, 40000]))
    (finding,) = artifacts(model).findings
    assert finding.code == "MDL030" and "stops at 40000, which the tokenizer (32,011 ids) does not define" in finding.message


def test_a_pad_or_bos_the_tokenizer_does_not_define(tmp_path):
    model = write_model("Qwen2-7B-Instruct", tmp_path / "q", edit=lambda s: s["generation"].update(pad_token_id=152000))
    (finding,) = artifacts(model).findings
    assert finding.code == "MDL031" and "pad_token_id 152000 is not a token of the tokenizer (151,646 ids)" in finding.message


def test_no_eos_at_all(tmp_path):
    def strip(spec):
        spec["generation"].pop("eos_token_id")
        spec["config"].pop("eos_token_id")
        spec["tokenizer"]["eos"] = None

    (finding,) = artifacts(write_model("Mistral-7B-Instruct-v0.3", tmp_path / "m", edit=strip)).findings
    assert finding.code == "MDL030" and "names an end-of-sequence token" in finding.message


def test_the_early_llama_3_instruct_release_runs_past_the_end_of_a_turn(tmp_path):
    model = write_model("Meta-Llama-3-8B-Instruct", tmp_path / "l", edit=lambda s: s["generation"].update(eos_token_id=128001))
    (finding,) = artifacts(model).findings
    assert finding.code == "MDL035" and "<|eot_id|> (128009) is not among generation_config.json's eos_token_id [128001]" in finding.message


def test_a_chat_model_without_a_chat_template(tmp_path):
    model = write_model("gemma-2-9b-it", tmp_path / "g", edit=lambda s: s.update(chat_template=False))
    (finding,) = artifacts(model).findings
    assert finding.code == "MDL032"


def test_vocab_size_against_the_embedding_and_the_tokenizer(tmp_path):
    model = write_model("Qwen2-7B-Instruct", tmp_path / "q")
    config = json.loads((model / "config.json").read_text())
    config["vocab_size"] = 151936
    (model / "config.json").write_text(json.dumps(config))
    (finding,) = artifacts(model).findings
    assert finding.code == "MDL033" and "vocab_size is 151,936, the embedding matrix has 152,064 rows" in finding.message
    grown = write_model("Phi-3-mini-4k-instruct", tmp_path / "p", edit=lambda s: s["tokenizer"].update(size=32100))
    (finding,) = artifacts(grown).findings
    assert finding.code == "MDL033" and "ids up to 32,099, beyond config.json's vocab_size 32,064" in finding.message


def test_a_tokenizer_json_that_does_not_parse(tmp_path):
    model = write_model("Mistral-7B-Instruct-v0.3", tmp_path / "m")
    text = (model / "tokenizer.json").read_text()
    (model / "tokenizer.json").write_text(text[: len(text) // 2])
    (finding,) = artifacts(model).findings
    assert finding.code == "MDL034"


# --- paths ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["my model", "模型"])
def test_a_path_with_spaces_or_non_ascii(tmp_path, name):
    (finding,) = artifacts(write_model("Phi-3-mini-4k-instruct", tmp_path / name)).findings
    assert finding.code == "MDL040"


def test_reading_a_20_gb_directory_reads_headers_only(tmp_path):
    """Without --verify-hashes the check reads headers and small JSON files: count the bytes (rchar)."""
    model = write_model("Qwen2-7B-Instruct", tmp_path / "q")
    big = {f"blob.{i}": ("BF16", [1024, 1024, 1024]) for i in range(10)}  # 10 × 2 GiB, sparse
    write_safetensors(model / "extra.safetensors", big)
    index = json.loads((model / "model.safetensors.index.json").read_text())
    index["weight_map"].update(dict.fromkeys(big, "extra.safetensors"))
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    (model / "tokenizer.json").write_text('{"model": {"type": "BPE", "vocab": {}}}')  # a real one is 7 MB

    def rchar() -> int:
        return int(next(line for line in Path("/proc/self/io").read_text().splitlines() if line.startswith("rchar")).split()[1])

    before = rchar()
    run = artifacts(model)
    read = rchar() - before
    assert run.facts.models[0].weight_bytes > 20 * 1024**3
    assert read < 2 * 1024 * 1024


def test_hashing_skips_holes_and_gives_the_same_digest(tmp_path, monkeypatch):
    import errno
    import hashlib

    from decode_doctor.models import layout

    path = tmp_path / "sparse.bin"
    with open(path, "wb") as handle:
        handle.truncate(40 << 20)
        for offset in (0, 9 << 20, (40 << 20) - 5):
            handle.seek(offset)
            handle.write(b"data!")
    expected = hashlib.sha256(path.read_bytes()).hexdigest()
    progress = layout.HashProgress(path.stat().st_size, lambda text: None)
    assert layout.digest(path, "sha256", progress) == expected and progress.done == 40 << 20
    git = hashlib.sha1(b"blob %d\0" % (40 << 20) + path.read_bytes()).hexdigest()
    assert layout.digest(path, "git-sha1", layout.HashProgress(0, lambda text: None)) == git

    def no_seek_data(fd, position, how):
        raise OSError(errno.EINVAL, "not supported")

    monkeypatch.setattr(layout.os, "lseek", no_seek_data)
    assert layout.digest(path, "sha256", layout.HashProgress(0, lambda text: None)) == expected
