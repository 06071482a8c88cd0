"""A stand-in for llama-cpp-python on a Sapphire-Rapids-class CPU whose AMX kernel crashes: loading a
quantized GGUF repacks its weights into an "AMX" buffer (said in the log, as llama.cpp says it), and
evaluating more than one token at once over such weights kills the process with SIGSEGV, as
ggml_backend_amx_mul_mat does on the hosts of llama.cpp#20824. One token at a time decodes; so does a
model loaded with use_extra_bufts = False, and F16 weights. Steps take a time that grows with the
file's size, so the calibration's fit has something to fit. Only for the tests (tests/support/amx on
PYTHONPATH)."""

from __future__ import annotations

import ctypes
import os
import signal
import time

QUANTIZED = ("Q4_0", "Q8_0")
_log = [None]


def llama_log_callback(fn):
    return fn


def llama_log_set(callback, user_data):
    _log[0] = callback


def _say(text: str) -> None:
    if _log[0] is not None:
        _log[0](2, text.encode(), None)


def llama_backend_init() -> None:
    pass


class _Params:
    def __init__(self) -> None:
        self.use_extra_bufts = True
        self.n_ctx = 512
        self.n_batch = 512
        self.n_threads = self.n_threads_batch = 1


def llama_model_default_params() -> _Params:
    return _Params()


def llama_context_default_params() -> _Params:
    return _Params()


class _Model:
    def __init__(self, path: str, repack: bool) -> None:
        self.path, self.size = path, os.path.getsize(path)
        self.quantized = any(kind in os.path.basename(path) for kind in QUANTIZED)
        self.amx = repack and self.quantized
        mib = self.size / 2**20
        _say(f"load_tensors:   CPU_Mapped model buffer size = {mib:.2f} MiB\n")
        if self.amx:
            _say(f"load_tensors:          AMX model buffer size = {mib:.2f} MiB\n")


def llama_model_load_from_file(path: bytes, params: _Params) -> _Model:
    return _Model(path.decode(), params.use_extra_bufts)


def llama_init_from_model(model: _Model, params: _Params) -> _Model:
    return model


llama_token = ctypes.c_int32


def llama_batch_get_one(tokens, n: int):
    return n


def _step(model: _Model, count: int) -> None:
    if count > 1 and model.amx:
        os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(count * (0.0005 + model.size * 4e-11))


def llama_decode(context: _Model, batch: int) -> int:
    _step(context, batch)
    return 0


def llama_print_system_info() -> bytes:
    return b"CPU : AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 |"


class Llama:
    def __init__(self, model_path: str, **options) -> None:
        self.model = _Model(model_path, options.get("use_extra_bufts", True))

    def eval(self, tokens) -> None:
        _step(self.model, len(tokens))
