"""One evaluation of a GGUF by llama.cpp, in a process of its own, for the known-failure probes: an
engine that segfaults takes only this child down, and the parent reads the signal.

    python -m decode_doctor.checks.enginefailures.llamaprobe MODEL MODE THREADS

MODE: "batched" (four tokens in one batch, as a prompt is evaluated: the path llama.cpp's AMX kernel
takes for repacked Q4_0/Q8_0 weights), "batched-no-repack" (the same with the model loaded without
its repacked weight buffers: llama_model_params.use_extra_bufts = False, what llama-server's
--no-repack sets) or "one-token" (the same tokens one at a time, as decode steps). Prints a JSON line
once the model is loaded (the buffers llama.cpp reported loading the weights into: an "AMX" buffer
means the AMX kernel holds them), so a parent whose child crashed still knows them, and a last one
with the result and the llama.cpp build it reported.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import sys

BUFFER = re.compile(r"(\S+) model buffer size\s*=\s*([0-9.]+) MiB")
MODES = ("batched", "batched-no-repack", "one-token")
TOKENS = (1, 5, 9, 13)


def main(argv: list[str]) -> int:
    model, mode, threads = argv[0], argv[1], int(argv[2])
    if mode not in MODES:
        print(json.dumps({"error": f"unknown mode {mode}"}), flush=True)
        return 2
    import llama_cpp

    buffers: dict[str, float] = {}

    def log(level: int, text: bytes, user_data: object) -> None:
        match = BUFFER.search(text.decode(errors="replace"))
        if match:
            buffers[match.group(1)] = buffers.get(match.group(1), 0.0) + float(match.group(2))
        sys.stderr.write(text.decode(errors="replace"))  # the parent keeps the tail: it names the last step before a crash

    callback = llama_cpp.llama_log_callback(log)
    llama_cpp.llama_log_set(callback, ctypes.c_void_p())
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.use_extra_bufts = mode != "batched-no-repack"
    loaded = llama_cpp.llama_model_load_from_file(model.encode(), params)
    if not loaded:
        print(json.dumps({"error": "the model did not load"}), flush=True)
        return 3
    context_params = llama_cpp.llama_context_default_params()
    context_params.n_ctx = 64
    context_params.n_batch = 16
    context_params.n_threads = context_params.n_threads_batch = threads
    context = llama_cpp.llama_init_from_model(loaded, context_params)
    if context is None:
        print(json.dumps({"error": "the context did not initialise"}), flush=True)
        return 3
    print(json.dumps({"phase": "loaded", "buffers": buffers}), flush=True)  # before the evaluation that may crash
    batches = [list(TOKENS)] if mode != "one-token" else [[token] for token in TOKENS]
    for batch in batches:
        tokens = (llama_cpp.llama_token * len(batch))(*batch)
        status = llama_cpp.llama_decode(context, llama_cpp.llama_batch_get_one(tokens, len(batch)))
        if status != 0:
            print(json.dumps({"error": f"llama_decode returned {status}", "buffers": buffers}), flush=True)
            return 4
    print(
        json.dumps({"ok": True, "mode": mode, "buffers": buffers, "system": llama_cpp.llama_print_system_info().decode(errors="replace")})
    )
    sys.stdout.flush()
    ctypes.CDLL(None).fflush(None)
    os._exit(0)  # llama.cpp's teardown adds nothing to the verdict


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
