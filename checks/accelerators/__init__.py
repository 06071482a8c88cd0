"""Accelerators beyond NVIDIA's discrete stack: AMD GPUs (amd-smi, rocm-smi, sysfs), Jetson power
modes and clocks, and Rockchip's NPU driver."""
