"""The NVIDIA GPU stack: driver, CUDA, toolkit, PyTorch and cuDNN, and whether they work together."""

from .check import GpuFacts, GpuStack, Toolkit, TorchBuild
from .nvidia import GpuDevice

__all__ = ["GpuDevice", "GpuFacts", "GpuStack", "Toolkit", "TorchBuild"]
