"""The prepared GPU script (benchmarks/gpu_check.py) passes its own dry run on this CPU: the same
steps and files as on a lent GPU, with numpy in place of PyTorch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_check.py"


def test_the_gpu_script_dry_run_writes_every_result_under_one_folder(tmp_path):
    out = tmp_path / "results"
    done = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    assert results["dry_run"] and results["device"] == "numpy on the CPU (dry run)"
    assert [(row["size"], row["batch"]) for row in results["rows"]] == [("tiny", 1), ("tiny", 8), ("small", 1), ("small", 8)]
    for row in results["rows"]:
        assert row["measured_ms"] > 0 and row["ceiling_ms_datasheet"] > 0 and row["ceiling_ms_this_gpu"] is None
    assert "findings" in json.loads((out / "check.json").read_text())
    for shape in ("tiny", "small"):
        assert json.loads((out / "models" / shape / "config.json").read_text())["model_type"] == "llama"
    assert (out / "summary.txt").read_text().count("ms per step") == 4
