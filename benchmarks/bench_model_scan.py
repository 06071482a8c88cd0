"""Model scanning must not depend on weight size: a directory with 20 GB of (sparse) safetensors
against the same configs with no weights, and a GGUF file.

    python benchmarks/bench_model_scan.py [--repeat 50]

Prints the median time of read_model() (the decode budget's reader) for each and the ratio to the
no-weights directory, then the whole model-artifacts check on the 20 GB directory (goal: under
50 ms without --verify-hashes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.modelgen import llama_gguf, qwen2_7b, write_safetensors

from decode_doctor.checks.artifacts.check import ModelArtifacts
from decode_doctor.engine import Context
from decode_doctor.models.modelfiles import read_model, read_safetensors_header


def timed(path: Path, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        read_model(path)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        bare = base / "config-only"
        bare.mkdir()
        (bare / "config.json").write_text((qwen2_7b(base / "src", shards=1) / "config.json").read_text())
        big = qwen2_7b(base / "Qwen2-7B-plus-20GB", shards=4)
        extra = {f"blob.{i}": ("BF16", [1024, 1024, 1024]) for i in range(10)}
        write_safetensors(big / "extra.safetensors", extra)
        index = json.loads((big / "model.safetensors.index.json").read_text())
        index["weight_map"].update(dict.fromkeys(extra, "extra.safetensors"))
        (big / "model.safetensors.index.json").write_text(json.dumps(index))
        tiny = base / "same-headers-no-data"
        tiny.mkdir()
        (tiny / "config.json").write_text((bare / "config.json").read_text())
        for shard in sorted(big.glob("*.safetensors")):
            header = read_safetensors_header(shard)
            write_safetensors(tiny / shard.name, {name: ("BF16", [1]) for name in header if name != "__metadata__"})
        (tiny / "model.safetensors.index.json").write_text((big / "model.safetensors.index.json").read_text())
        gguf = llama_gguf(base / "tiny.gguf", layers=32, hidden=1024, vocab=152064)
        cases = {
            "config.json only": bare,
            "same tensor headers, no data": tiny,
            "Qwen2-7B + 20 GB sparse safetensors": big,
            "GGUF, 32 layers, 152k-token vocab": gguf,
        }
        results = {name: timed(path, args.repeat) for name, path in cases.items()}
        weights = {name: read_model(path).weight_bytes for name, path in cases.items()}
        artifacts = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            ModelArtifacts().run(Context(models=(big,)))
            artifacts.append(time.perf_counter() - started)
    baseline = statistics.median(results["same tensor headers, no data"])
    print(f"{'case':<40} {'weights':>10} {'median':>10} {'× no data':>10}")
    for name, times in results.items():
        median = statistics.median(times)
        print(f"{name:<40} {weights[name] / 1e9:8.1f}GB {median * 1000:8.2f}ms {median / baseline:9.2f}×")
    print(f"model-artifacts check, 20 GB directory: median {statistics.median(artifacts) * 1000:.2f} ms (goal: under 50 ms)")


if __name__ == "__main__":
    main()
