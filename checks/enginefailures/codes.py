"""The engine-failures check's codes, each with its explanation in fixed sections."""

from __future__ import annotations

from decode_doctor.engine import Code, Severity

ENG001 = Code(
    "ENG001",
    "The inference engine crashes on this host: a known failure",
    Severity.ERROR,
    what="An entry of decode-doctor's catalog of known engine failures (checks/enginefailures/data/engine-failures.json) applies "
    "to this host's hardware, and its probe (a tiny random-weight model evaluated by the installed engine, in a child "
    "process) crashed here. The finding names the failure, the signal, the weight types affected, the workarounds the same "
    "probe verified on this host, and the public reports.",
    why="The engine dies on its first prompt in production, not in a test: llama-server exits with a segfault, ollama's "
    "runner restarts in a loop, every request fails with a 500.",
    fix_by_hand="Apply a workaround the finding says was verified here (for llama.cpp's AMX crash: --no-repack, or F16/BF16 "
    "weights), or run a build without the failing kernel; follow the reports it names for a fixed release.",
    example="On a Sapphire Rapids VM (AMX_INT8), llama-cpp-python 0.3.36 segfaults evaluating four tokens of a Q4_0 model "
    "whose weights it repacked for AMX; with use_extra_bufts = False the same evaluation succeeds.",
    concerns=("CPU",),
)

ENGINE_FAILURE_CODES = (ENG001,)
