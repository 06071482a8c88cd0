"""The decode step of llama.cpp on this CPU, calibrated: time per output token = fixed cost per step
+ weight bytes read × seconds per byte + attention: query work × seconds per unit + cached bytes
read × seconds per cache byte.

The ceiling (bytes ÷ bandwidth) is a bound no run beats; what a user gets is further from it for a
small model than a large one, because every step also pays a fixed cost (threads woken and joined,
graph built, the output sampled), and slower at depth than the cache's bytes alone say, because
attention computes over every cached token. The three constants differ by host, thread count,
kernel path (the weight type: llama.cpp repacks Q4_0 and Q8_0 for AVX-512 and AMX) and engine
version, so they are measured here: random-weight GGUFs of the weight type (models/randomgguf.py), two small
ones and, for a model more than twice the larger's size, a third of about the model's size (up to
XL_MAX_BYTES), decoded by llama-cpp-python at depth 0, the two small ones again at depth DEPTH, each
in a child process (models/llamatimer.py) with what the rest of the host did meanwhile. The weights' time is
the line through those points (between two of them, the line joining them; past the largest, the
last segment's slope), so a 3 GB model is not extrapolated from two under 0.5 GB.

Every run is repeated in passes until two passes agree within AGREE (at most PASSES_MAX), and each
point is the median of its runs. A cloud VM's few percent of steal is its normal state, so nothing is
thrown away for it: the calibration keeps the steal and the other processes' load it saw, and its
interval is as wide as its own measurements say: how far its passes lay apart (half the range of a
run's passes over their median, the largest of any run; the next run lands as the last ones did), at
least MIN_SPREAD, plus the fraction of the host the steal and the other work took.

A llama.cpp that dies by a signal is a crash, said as one (the signal, the phase, the buffer its
weights were repacked into, and where the engine-failures check names known crashes). When the batched
prompt crashes (llama.cpp's AMX kernel on repacked Q4_0/Q8_0), the calibration feeds the
prompt one token at a time instead, which reaches the same cache through the decode path it times,
and says so. Kept per host, engine version, thread count and weight type in the state directory, like
the bandwidth figures.

Attention at depth d has two parts, told apart by the two models' different head layouts (the small
one gives every query head its own key head, the large one shares each among four): query work,
Σ over cached layers of min(d, window) × heads × head dim, and the cache's bytes at d.
"""

from __future__ import annotations

from ..llamacpp import engine_version
from ..randomgguf import WEIGHT_TYPES
from .measure import DEPTH, PASSES_MAX, PASSES_MIN, XL_FROM, CalibrationError, EngineCrash, Run, calibrate, features, time_decode
from .model import ENGINE, MIN_SPREAD, Calibration, ForModel, Prediction, attention_units, bounded, for_model, predict
from .records import CACHE_NAME, MAX_AGE_S, best, ignored, learn, learn_from_run, load, lookup, record, with_drift

__all__ = [
    "CACHE_NAME",
    "DEPTH",
    "ENGINE",
    "MAX_AGE_S",
    "MIN_SPREAD",
    "PASSES_MAX",
    "PASSES_MIN",
    "WEIGHT_TYPES",
    "XL_FROM",
    "Calibration",
    "CalibrationError",
    "EngineCrash",
    "ForModel",
    "Prediction",
    "Run",
    "attention_units",
    "best",
    "bounded",
    "calibrate",
    "engine_version",
    "features",
    "for_model",
    "ignored",
    "learn",
    "learn_from_run",
    "load",
    "lookup",
    "predict",
    "record",
    "time_decode",
    "with_drift",
]  # fmt: skip
