"""Times llama.cpp's decode of a GGUF, in a process of its own (an engine crash or hang ends only
this child): `python -m decode_doctor.models.llamatimer MODEL THREADS DEPTH TOKENS [PROMPT] [SECONDS]`.

The prompt of DEPTH tokens is evaluated first: in batches (PROMPT "batched", the default, as a server
evaluates a prompt) or one token at a time ("one-token": llama.cpp's decode path only, for an engine
whose batched kernel crashes on this CPU); then single-token steps, each timed by the wall clock,
every one at the same depth (the cache rewound to the prompt before each, so a step's time is the
time at DEPTH, not at DEPTH plus the steps before it): at least TOKENS of them and at least SECONDS of
them (0.5 s by default; a small model's 48 steps last 70 ms, too short a window to repeat itself),
at most MAX_STEPS, after WARMUP_S of untimed steps. A progress line goes out as each phase starts ({"phase": "loaded", "buffers": …}, then
"prompt", then "steps"), so a parent whose child died by a signal knows where, and what the weights
were loaded into. The last line is one JSON object: each step's seconds, what the rest of the host
did over the whole run (engine.hostload), and the buffers llama.cpp reported loading the weights into
(its repacked copies included)."""

from __future__ import annotations

import ctypes
import json
import os
import re
import sys
import time
from importlib.metadata import version

BUFFER = re.compile(r"(\S+) model buffer size\s*=\s*([0-9.]+) MiB")
PROMPTS = ("batched", "one-token")
MAX_STEPS = 4096
WARMUP_S = 0.1


def _phase(name: str, **values: object) -> None:
    print(json.dumps({"phase": name, **values}), flush=True)


def main(argv: list[str]) -> int:
    from decode_doctor.engine.hostload import Window

    model, threads, depth, tokens = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    prompt = argv[4] if len(argv) > 4 else "batched"
    seconds = float(argv[5]) if len(argv) > 5 else 0.5
    if prompt not in PROMPTS:
        print(json.dumps({"error": f"unknown prompt mode {prompt}"}), flush=True)
        return 2
    window = Window()  # the whole run: a window of a second or more, where a jiffy is a small error
    import llama_cpp

    buffers: dict[str, float] = {}

    def log(level: int, text: bytes, user_data: object) -> None:
        match = BUFFER.search(text.decode(errors="replace"))
        if match:
            buffers[match.group(1)] = buffers.get(match.group(1), 0.0) + float(match.group(2)) * 2**20

    callback = llama_cpp.llama_log_callback(log)
    llama_cpp.llama_log_set(callback, ctypes.c_void_p())
    llm = llama_cpp.Llama(model_path=model, n_ctx=depth + 16, n_threads=threads, n_threads_batch=threads, n_batch=512, verbose=True)
    _phase("loaded", buffers=buffers)
    steps = [3 + (i * 7919) % 997 for i in range(depth + 1)]  # fixed, ordinary token ids
    _phase("prompt", tokens=depth + 1, mode=prompt)
    if prompt == "batched":
        llm.eval([1, *steps[:depth]])
    else:
        for token in [1, *steps[:depth]]:
            llm.eval([token])
    _phase("steps")
    at = depth + 1  # the prompt's tokens: each step rewinds to here (Llama.eval drops the cache past n_tokens)
    warm_until = time.perf_counter() + WARMUP_S
    while True:  # untimed: first-touch of every buffer, the threads woken
        llm.n_tokens = at
        llm.eval([steps[depth]])
        if time.perf_counter() >= warm_until:
            break
    times: list[float] = []
    timed_until = time.perf_counter() + seconds
    while len(times) < MAX_STEPS and (len(times) < tokens or time.perf_counter() < timed_until):
        llm.n_tokens = at
        started = time.perf_counter()
        llm.eval([steps[depth]])
        times.append(time.perf_counter() - started)
    load = window.close(time.process_time())
    print(
        json.dumps(
            {
                "times": times,
                "threads": threads,
                "depth": depth,
                "prompt": prompt,
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
