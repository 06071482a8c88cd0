"""GPU health as decode feels it: PCIe links, clock events, memory faults, persistence and compute
modes, MIG, NVLink and the NVSwitch fabric, GPUs lost from the bus; judged live through NVML and
sysfs, and from pasted nvidia-smi and lspci captures."""
