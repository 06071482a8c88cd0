"""Measured memory bandwidth (CPU and GPU) against the memory's specification."""

from .check import Bandwidth, BandwidthFacts, CpuMemory, memory_spec

__all__ = ["Bandwidth", "BandwidthFacts", "CpuMemory", "memory_spec"]
