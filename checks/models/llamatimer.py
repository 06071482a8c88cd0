"""Times llama.cpp's decode of a GGUF, in a process of its own (an engine crash or hang ends only
this child): `python -m decode_doctor.checks.models.llamatimer MODEL THREADS DEPTH TOKENS`.

The prompt of DEPTH tokens is evaluated first (in batches), then TOKENS single-token steps, each
timed by the wall clock. Prints one JSON object: each step's seconds, what the rest of the host did
over the whole run (engine.hostload), and the
buffers llama.cpp reported loading the weights into (its repacked copies included)."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from importlib.metadata import version

BUFFER = re.compile(r"(\S+) model buffer size\s*=\s*([0-9.]+) MiB")


def main(argv: list[str]) -> int:
    from decode_doctor.engine.hostload import Window

    model, threads, depth, tokens = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    window = Window()  # the whole run: a window of a second or more, where a jiffy is a small error
    import llama_cpp

    buffers: dict[str, float] = {}

    def log(level: int, text: bytes, user_data: object) -> None:
        match = BUFFER.search(text.decode(errors="replace"))
        if match:
            buffers[match.group(1)] = buffers.get(match.group(1), 0.0) + float(match.group(2)) * 2**20

    callback = llama_cpp.llama_log_callback(log)
    llama_cpp.llama_log_set(callback, None)
    llm = llama_cpp.Llama(
        model_path=model, n_ctx=depth + tokens + 16, n_threads=threads, n_threads_batch=threads, n_batch=512, verbose=True
    )
    steps = [3 + (i * 7919) % 997 for i in range(depth + tokens + 1)]  # fixed, ordinary token ids
    llm.eval([1, *steps[:depth]])
    llm.eval([steps[depth]])  # one step untimed: first-touch of every buffer
    times: list[float] = []
    for token in steps[depth + 1 : depth + 1 + tokens]:
        started = time.perf_counter()
        llm.eval([token])
        times.append(time.perf_counter() - started)
    load = window.close(time.process_time())
    print(
        json.dumps(
            {
                "times": times,
                "threads": threads,
                "depth": depth,
                "engine_version": version("llama_cpp_python"),
                "buffers": buffers,
                "other_load": load.other_load,
                "foreign_cores": load.foreign_cores,
                "steal": load.steal,
            }
        ),
        flush=True,
    )
    os._exit(0)  # llama.cpp's teardown adds nothing to measure


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
