"""A real inference engine for the live-measurement tests: llama-cpp-python's OpenAI-compatible
server on the random-weight GGUF tinyllama.py writes, on 127.0.0.1, under supervise.py."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .services import _wait_for, free_port, stop, supervised
from .tinyllama import write_tiny_llama

PERF = re.compile(r"llama_perf_context_print:\s+(prompt eval|eval|total) time =\s+([0-9.]+) ms /\s+([0-9]+) (?:tokens|runs)")


def available() -> str | None:
    """Why the engine cannot run here (None when it can)."""
    for module in ("llama_cpp", "gguf", "uvicorn", "fastapi", "sse_starlette"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install 'llama-cpp-python[server]' gguf)"
    return None


@dataclass(frozen=True)
class Timing:
    """One request as the engine timed it (its verbose llama_perf_context_print lines)."""

    prompt_ms: float
    eval_ms: float
    eval_runs: int
    total_ms: float

    @property
    def decode_ms_per_token(self) -> float:
        """Everything after the prompt, per generated token after the first."""
        return (self.total_ms - self.prompt_ms) / self.eval_runs


@dataclass(frozen=True)
class Engine:
    url: str
    model: Path
    log: Path

    def timings(self) -> list[Timing]:
        found: list[Timing] = []
        current: dict[str, tuple[float, int]] = {}
        for match in PERF.finditer(self.log.read_text(errors="replace")):
            current[match.group(1)] = (float(match.group(2)), int(match.group(3)))
            if match.group(1) == "total" and {"prompt eval", "eval"} <= set(current):
                found.append(Timing(current["prompt eval"][0], current["eval"][0], current["eval"][1], current["total"][0]))
                current = {}
        return found


@contextmanager
def llama_server(directory: Path) -> Iterator[Engine]:
    model = write_tiny_llama(directory / "tiny-llama.gguf")
    port = free_port()
    log = directory / "llama-server.log"
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--n_ctx", "2048", "--n_threads", "1", "--interrupt_requests", "False"]
    proc = supervised(argv, log)
    url = f"http://127.0.0.1:{port}/v1"

    def up() -> bool:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=1) as answer:
                return bool(json.load(answer).get("data"))
        except OSError:
            return proc.poll() is None and False

    try:
        _wait_for(up, 60, "llama-cpp-python's server", log)
        yield Engine(url, model, log)
    finally:
        stop(proc)
