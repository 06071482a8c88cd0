"""The accelerators feature's codes, each with its explanation in fixed sections."""

from __future__ import annotations

from decode_doctor.engine import Code, Severity

ACC001 = Code(
    "ACC001",
    "An AMD GPU without ROCm's kernel interface",
    Severity.WARNING,
    what="amdgpu's sysfs lists an AMD GPU, but /dev/kfd (the ROCm compute interface) is not there: the amdgpu driver runs "
    "without compute support, or the container was started without --device /dev/kfd.",
    why="ROCm, PyTorch's ROCm build, vLLM and llama.cpp's HIP backend see no GPU; inference falls back to the CPU or Vulkan.",
    fix_by_hand="Load amdgpu with compute (a ROCm-supported kernel or amdgpu-dkms); in a container pass --device /dev/kfd "
    "--device /dev/dri and add the render and video groups.",
    example="An MI210 in amdgpu's sysfs (vendor 0x1002, 64 GiB of VRAM) on a host whose container was started without --device "
    "/dev/kfd: rocm-smi lists the GPU, torch.cuda.is_available() says False.",
)

ACC010 = Code(
    "ACC010",
    "Jetson is below its maximum power mode",
    Severity.WARNING,
    what="nvpmodel reports a power mode other than MAXN (or MAXN_SUPER): the mode caps the CPU cores online, the GPU clock and on "
    "some modules the memory (EMC) clock.",
    why="Decode on a Jetson is bound by memory bandwidth and the GPU clock: a 5 W, 15 W or 25 W mode gives a fraction of the "
    "tokens/s the board can reach.",
    fix_by_hand="sudo nvpmodel -q --verbose lists the modes; sudo nvpmodel -m <ID of MAXN or MAXN_SUPER> (persists across "
    "reboots), within what the power supply and cooling allow.",
    example='nvpmodel -q on a Jetson Orin Nano Super prints "NV Power Mode: 25W" and mode 1, while MAXN_SUPER is mode 2: the GPU and '
    "EMC clocks are capped.",
)

ACC011 = Code(
    "ACC011",
    "Jetson clocks are left to scale (jetson_clocks not applied)",
    Severity.INFO,
    what="jetson_clocks --show reports the GPU or the memory (EMC) clock below its maximum with no override: DVFS lowers them "
    "between requests.",
    why="The first tokens after an idle spell run at low clocks, and benchmarks read lower and noisier than the board delivers.",
    fix_by_hand="sudo jetson_clocks pins CPU, GPU and EMC at the mode's maximum (sudo jetson_clocks --restore undoes it); keep the fan on.",
    example='jetson_clocks --show on an AGX Orin: "EMC MinFreq=204000000 MaxFreq=3199000000 CurrentFreq=2133000000": the memory clock '
    "scales down between decode steps.",
)

ACC020 = Code(
    "ACC020",
    "The Rockchip NPU driver is older than RKLLM needs",
    Severity.WARNING,
    what='The rknpu kernel driver is older than 0.9.7, the oldest RKLLM accepts (its runtime warns "Your rknpu driver version is '
    'too low, please upgrade to 0.9.7"); or older than 0.9.8, the driver airockchip/rknn-llm ships for current releases.',
    why="LLMs converted with current RKLLM fail to load or run on the NPU; decode falls back to the CPU.",
    fix_by_hand="The driver is part of the board's kernel: install the vendor's or Armbian's newer kernel, or rebuild it with "
    "rknpu_driver_0.9.8 from airockchip/rknn-llm.",
    example='The kernel log says "RKNPU driver: v0.9.6" while RKLLM\'s runtime warns "rknpu driver version is too low, please upgrade '
    'to 0.9.7".',
)

CODES = (ACC001, ACC010, ACC011, ACC020)
