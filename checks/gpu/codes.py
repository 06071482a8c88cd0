"""The gpu feature's codes, each with its explanation in fixed sections."""

from __future__ import annotations

from decode_doctor.engine import Code, Severity

DRIVER_FIX = "Install the NVIDIA driver for this GPU (ubuntu-drivers install, or the distribution's nvidia-driver package), then reboot."


GPU010 = Code(
    "GPU010",
    "nvidia-smi cannot talk to the NVIDIA driver",
    Severity.ERROR,
    what="nvidia-smi says it couldn't communicate with the NVIDIA driver: the kernel module is not loaded (not installed, blocked by "
    "Secure Boot, or nouveau holds the GPU).",
    why="No CUDA program can use the GPU; inference falls back to the CPU or fails at start.",
    fix_by_hand=f"{DRIVER_FIX} Check `lsmod | grep nvidia`, `mokutil --sb-state` and `dmesg | grep -i nvrm`.",
    example='nvidia-smi prints "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver" after a kernel upgrade '
    "left the module unbuilt.",
)

GPU011 = Code(
    "GPU011",
    "NVIDIA driver and library versions do not match",
    Severity.ERROR,
    what='"Failed to initialize NVML: Driver/library version mismatch": the user-space libraries were upgraded but the old kernel module '
    'is still loaded (the kernel log says "API mismatch").',
    why="NVML, CUDA and nvidia-container-cli all refuse to start until they match: every GPU workload on the host is down.",
    fix_by_hand="Reboot; or, with no GPU process running, reload the module: sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && "
    "sudo "
    "modprobe nvidia.",
    example='"Failed to initialize NVML: Driver/library version mismatch" after apt upgraded the driver to 550.127 while 550.90 is '
    "still loaded.",
)

GPU012 = Code(
    "GPU012",
    "The NVIDIA driver finds no GPU",
    Severity.ERROR,
    what='nvidia-smi prints "No devices were found": the driver is loaded but no GPU is bound to it (unsupported GPU for this driver '
    "branch, GPU passed to a VM, or a failed probe).",
    why="No CUDA device is visible to inference servers.",
    fix_by_hand="Check `lspci -nn | grep -i nvidia` and the kernel log; install a driver branch that supports the GPU.",
    example='nvidia-smi prints "No devices were found"; the kernel log says "NVRM: No NVIDIA graphics adapter probed!" because nouveau '
    "holds the GPU.",
)

GPU013 = Code(
    "GPU013",
    "nvidia-smi reports an Unknown Error for a GPU",
    Severity.ERROR,
    what='"Unable to determine the device handle for GPU …: Unknown Error": the driver lost the GPU (power, thermal, PCIe or hardware '
    "fault).",
    why="That GPU cannot run work; jobs scheduled on it fail.",
    fix_by_hand="Look for Xid errors in the kernel log, reseat or power-cycle the node, and check cooling and power.",
    example='"Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error" on one GPU of eight.',
)

GPU014 = Code(
    "GPU014",
    "A GPU has fallen off the bus",
    Severity.ERROR,
    what='The kernel log says the GPU "has fallen off the bus and is not responding to commands".',
    why="The GPU is gone until a reset or reboot; this is usually power, thermal, riser or hardware trouble, and recurs.",
    fix_by_hand="Reboot (or nvidia-smi -r for that GPU); check power supply, cooling and PCIe seating; report repeated events to the "
    "vendor.",
    example='The kernel log says "NVRM: Xid (PCI:0000:06:00): 79, pid=1932, GPU has fallen off the bus."',
)

GPU015 = Code(
    "GPU015",
    "An NVIDIA GPU is present but nvidia-smi is not installed",
    Severity.WARNING,
    what="The PCI bus shows an NVIDIA display controller, but there is no nvidia-smi (and no NVML): the proprietary driver is probably "
    "not installed.",
    why="Without the driver, CUDA cannot use the GPU.",
    fix_by_hand=DRIVER_FIX,
    example="lspci shows an NVIDIA 3D controller (0x10de) at 0000:01:00.0, but neither nvidia-smi nor NVML is installed.",
)

GPU016 = Code(
    "GPU016",
    "nvidia-smi hangs",
    Severity.ERROR,
    what="nvidia-smi did not answer within its time limit.",
    why="A hung nvidia-smi is itself a symptom: the driver is stuck (a GPU in a bad state, a kernel module waiting on hardware); CUDA "
    "programs will hang the same way.",
    fix_by_hand="Look at the kernel log for Xid or fallen-off-the-bus messages; reset the GPU (nvidia-smi -r) or reboot.",
    example="nvidia-smi -q -x gives no answer within 15 s while the kernel log holds Xid 119 (GSP timeout).",
)

GPU017 = Code(
    "GPU017",
    "nvidia-smi output could not be read",
    Severity.WARNING,
    what="nvidia-smi -q -x ran but printed something that is not its XML report.",
    why="decode-doctor cannot judge the driver; a broken or mismatched nvidia-smi binary is a symptom too.",
    fix_by_hand="Run nvidia-smi -q yourself and attach the output to the ticket.",
    example="nvidia-smi -q -x exits 0 but prints a truncated document that ends inside <gpu>.",
)

GPU018 = Code(
    "GPU018",
    "The kernel log holds NVIDIA Xid errors",
    Severity.WARNING,
    what='NVRM: Xid lines in dmesg or the journal (the old "Xid (0000:01:00): N" and the newer "Xid (PCI:…): N, pid=…, name=…" '
    "formats), counted per Xid with the GPUs and the first and last time. Each Xid is looked up in NVIDIA's Xid catalog for its "
    "meaning, likely cause and next step. Xid 79 (fallen off the bus) is GPU014.",
    why="Some Xids are an application's own fault (13, 31, 43, 45), others mean the GPU needs a reset or the node a reboot (46, 48, "
    "62, 64, 74, 95, 109, 119, 120, 154); a decode server on such a GPU stalls or dies. The finding is an error when any Xid "
    "asks for a GPU reset or a reboot.",
    fix_by_hand="Do the next step the finding gives for each Xid; NVIDIA's catalog "
    "(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) has the full resolution buckets. Attach the cited "
    "kernel log lines to the ticket.",
    example="The journal holds 14 × Xid 31 (MMU fault, the application's) and 2 × Xid 48 (double-bit ECC error: reset the GPU) on GPU "
    "0000:07:00.",
)

GPU020 = Code(
    "GPU020",
    "The CUDA toolkit needs a newer driver",
    Severity.ERROR,
    what="The installed CUDA toolkit (nvcc, /usr/local/cuda*/version.json) is newer than the driver fully supports.",
    why="Under minor-version compatibility (same major version) programs built with it run with a limited feature set, and PTX it "
    "generates fails to JIT on the older driver (cudaErrorUnsupportedPtxVersion); across major versions nothing it builds runs.",
    fix_by_hand="Upgrade the driver to the version named in the finding, or install the toolkit matching the driver.",
    example="CUDA toolkit 12.8 (nvcc) on driver 535.183: minor-version compatibility runs it with a limited feature set, and PTX it "
    "generates fails to JIT.",
)

GPU021 = Code(
    "GPU021",
    "PyTorch's CUDA build and the driver",
    Severity.ERROR,
    what="The PyTorch wheel was built for a CUDA version that this driver cannot run, or runs only through minor-version compatibility.",
    why='An incompatible pair fails at the first CUDA call ("The NVIDIA driver on your system is too old"), and '
    "torch.cuda.is_available() returns False.",
    fix_by_hand="Upgrade the driver to the version named in the finding, or install the PyTorch build named there (pip install torch "
    "--index-url "
    "https://download.pytorch.org/whl/cu118).",
    example="PyTorch 2.7.0+cu128 on driver 470.256, which supports CUDA ≤ 11.4: torch.cuda.is_available() is False.",
)

GPU022 = Code(
    "GPU022",
    "PyTorch is a CPU-only build on a GPU host",
    Severity.ERROR,
    what="torch/version.py says cuda = None: this PyTorch has no CUDA support.",
    why="Inference runs on the CPU, orders of magnitude slower at decode, with no error message.",
    fix_by_hand="Install a CUDA build: pip install torch --index-url https://download.pytorch.org/whl/cu124 (pick the build the driver "
    "supports).",
    example="pip install torch on an H100 host installed 2.5.1+cpu: torch/version.py says cuda = None.",
)

GPU023 = Code(
    "GPU023",
    "Below the baseline for LLM inference (CUDA 11.8+, cuDNN 8.6+, PyTorch 2.0+)",
    Severity.WARNING,
    what="A component is older than the baseline the field write-ups assume.",
    why="Serving engines (vLLM, TGI, TensorRT-LLM) and flash attention require at least these versions; older stacks miss fused kernels "
    "and bf16 support.",
    fix_by_hand="Upgrade the component named in the finding.",
    example="PyTorch 1.13.1 with cuDNN 8.5 and CUDA 11.7: below PyTorch 2.0, cuDNN 8.6 and CUDA 11.8.",
)

GPU024 = Code(
    "GPU024",
    "CUDA software is installed but there is no NVIDIA GPU yet",
    Severity.INFO,
    what="No NVIDIA GPU or driver on this host, but a CUDA toolkit or a CUDA build of PyTorch is installed.",
    why="The driver installed with the GPU must be at least what that software needs, or the first run fails with "
    '"CUDA driver version is insufficient for CUDA runtime version".',
    fix_by_hand="Install at least the driver branch named in the finding with the GPU, or pick software built for the driver you "
    "will have.",
    example="A build host without a GPU has CUDA 12.4 and torch 2.5.1+cu124: the GPU it is meant for needs driver ≥ 550.54.14 (≥ "
    "525.60.13 with minor-version compatibility).",
)

GPU025 = Code(
    "GPU025",
    "PyTorch was not built for this GPU's architecture",
    Severity.ERROR,
    what='PyTorch warns "… with CUDA capability sm_NN is not compatible with the current PyTorch installation": the wheel carries no '
    "kernels for this GPU's compute capability (a Hopper sm_90 or Blackwell sm_100/sm_120 GPU with a wheel built for an older CUDA).",
    why='Every CUDA kernel launch fails with "no kernel image is available for execution on the device"; an inference server '
    "does not start or crashes at the first request.",
    fix_by_hand="Install a PyTorch build for a CUDA that knows the GPU: sm_90 (H100/H200) needs CUDA 11.8 or newer wheels, sm_100 and "
    "sm_120 (Blackwell) need cu128 or newer; then check torch.cuda.get_arch_list() lists the capability.",
    example='"NVIDIA H100 80GB HBM3 with CUDA capability sm_90 is not compatible with the current PyTorch installation. The current '
    'PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86."',
)

GPU026 = Code(
    "GPU026",
    "PyTorch reports CUDA unavailable",
    Severity.WARNING,
    what='A pasted collect_env says "Is CUDA available: False" for a PyTorch that is not a ROCm build.',
    why="The serving engine falls back to the CPU or refuses to start; decode on the CPU is one to two orders of magnitude slower.",
    fix_by_hand="With no NVIDIA driver: install it (or, on an AMD GPU, a ROCm build of PyTorch). With a CPU-only PyTorch: install a CUDA "
    "build. With both present: check CUDA_VISIBLE_DEVICES, the container's --gpus flag and the kernel log for Xid errors.",
    example='A pasted collect_env says "Is CUDA available: False" and "Nvidia driver version: Could not collect".',
)

GPU027 = Code(
    "GPU027",
    "CUDA toolkits disagree: PATH, LD_LIBRARY_PATH and CUDA_HOME pick different ones",
    Severity.WARNING,
    what="Several CUDA toolkits are installed and the mechanisms that choose one do not agree: CUDA_HOME (or CUDA_PATH, what "
    "PyTorch's extension builds use), the first nvcc on PATH, and the first libcudart on LD_LIBRARY_PATH; or CUDA_HOME names "
    "a directory that is not there.",
    why="An extension (flash-attn, a vLLM or llama.cpp build) compiles with one toolkit's headers and nvcc, links or loads "
    'another\'s runtime, and fails with undefined symbols or "CUDA driver version is insufficient", or silently uses the old one.',
    fix_by_hand="Pick one toolkit and point all three at it: `export CUDA_HOME=/usr/local/cuda-X.Y; export PATH=$CUDA_HOME/bin:$PATH; "
    "export LD_LIBRARY_PATH=$CUDA_HOME/lib64:$LD_LIBRARY_PATH` (or point /usr/local/cuda at it and use that).",
    example="CUDA_HOME=/usr/local/cuda-12.1, the first nvcc on PATH is /usr/local/cuda-12.4/bin/nvcc, and LD_LIBRARY_PATH starts with "
    "/usr/local/cuda-11.8/lib64.",
)

GPU028 = Code(
    "GPU028",
    "A CUDA toolkit's libcuda stub is on the library path",
    Severity.ERROR,
    what="A toolkit's lib64/stubs directory (a libcuda.so for linking without a driver) is on LD_LIBRARY_PATH or in "
    "/etc/ld.so.conf.d; with a libcuda.so.1 there it is loaded instead of the driver's.",
    why='CUDA programs then fail at start with "CUDA driver is a stub library" (cudaErrorStubLibrary) or report no GPU, although '
    "the driver works.",
    fix_by_hand="Remove the stubs directory from LD_LIBRARY_PATH and ld.so.conf.d (then run ldconfig); link against stubs with "
    "-L at build time only.",
    example='LD_LIBRARY_PATH=/usr/local/cuda/lib64/stubs:… holds libcuda.so.1: programs fail with "CUDA driver is a stub library".',
)

GPU029 = Code(
    "GPU029",
    "The host compiler is newer than nvcc accepts",
    Severity.ERROR,
    what="The GCC that nvcc would call (NVCC_CCBIN, CUDAHOSTCXX or g++ on PATH) is newer than the toolkit's "
    "include/crt/host_config.h allows.",
    why='Every CUDA extension build (flash-attn, vLLM or llama.cpp from source) stops with "#error -- unsupported GNU '
    'version!"; -allow-unsupported-compiler compiles at the risk of wrong code.',
    fix_by_hand="Install a supported GCC beside it and point nvcc at it (export NVCC_CCBIN=g++-13, or CC/CXX for CMake), or use a "
    "newer CUDA toolkit.",
    example="g++ 14 on the PATH, and CUDA 12.4's include/crt/host_config.h refuses __GNUC__ > 13: every extension build stops with "
    '"unsupported GNU version".',
)

GPU031 = Code(
    "GPU031",
    "PyTorch's CUDA build and the toolkit an extension build would use differ",
    Severity.ERROR,
    what="PyTorch was built with one CUDA version, and the toolkit torch.utils.cpp_extension would compile with (CUDA_HOME, "
    "CUDA_PATH, nvcc on PATH, /usr/local/cuda) is another.",
    why='A different major version makes the build stop with "The detected CUDA version mismatches the version that was used to '
    'compile PyTorch"; a different minor version builds with a warning.',
    fix_by_hand="Point CUDA_HOME at a toolkit with PyTorch's CUDA version (torch.version.cuda), or install the PyTorch build for the "
    "toolkit you have.",
    example="torch 2.4.0+cu121 while CUDA_HOME names a 12.6 toolkit: a flash-attn build compiles against 12.6 (a different minor "
    "version: a warning).",
)

GPU030 = Code(
    "GPU030",
    "NVIDIA Jetson / Tegra board (unified memory)",
    Severity.INFO,
    what="An NVIDIA Tegra board (Jetson): no nvidia-smi; the GPU shares the system RAM with the CPU.",
    why="The decode budget has one memory pool for weights, KV cache and the OS; vm.swappiness and zram matter more, since pages the GPU "
    "needs can be swapped out.",
    fix_by_hand="Budget against total RAM minus the OS, keep swappiness low, and use tegrastats to watch memory.",
    example='/etc/nv_tegra_release says "# R36 (release), REVISION: 4.0" on an NVIDIA Jetson AGX Orin Developer Kit.',
)

CODES = (
    GPU010,
    GPU011,
    GPU012,
    GPU013,
    GPU014,
    GPU015,
    GPU016,
    GPU017,
    GPU018,
    GPU020,
    GPU021,
    GPU022,
    GPU023,
    GPU024,
    GPU025,
    GPU026,
    GPU027,
    GPU028,
    GPU029,
    GPU031,
    GPU030,
)
RETIRED = {"GPU001": "the GPUs and driver are now facts (check --verbose, JSON facts.gpu)"}
