"""A stand-in for torch with one fake CUDA device, for the GPU code paths on machines without one.

Copies take time in proportion to their size at FAKE_GBPS (env DD_FAKE_GPU_GBPS), so the probe's
arithmetic can be checked against a known answer.
"""

from __future__ import annotations

import os

from . import cuda

uint8 = "uint8"
__version__ = "0.0.fake"


class Tensor:
    def __init__(self, size: int, device: str):
        self.size = size
        self.device = device

    def fill_(self, value: int) -> Tensor:
        return self

    def copy_(self, other: Tensor) -> Tensor:
        cuda._clock.advance(2 * other.size / (float(os.environ.get("DD_FAKE_GPU_GBPS", "4000")) * 1e9))
        return self


def empty(size: int, dtype: str = uint8, device: str = "cpu") -> Tensor:
    return Tensor(size, device)


def empty_like(tensor: Tensor) -> Tensor:
    return Tensor(tensor.size, tensor.device)
