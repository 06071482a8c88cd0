"""CUDA path hygiene (issue 18): several toolkits, stubs on the loader path, nvcc's host compiler,
PyTorch's CUDA against the toolkit a build would use. Host trees under tmp, real files inside."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from decode_doctor.checks.gpu import cudapaths

from .conftest import FIXTURES
from .support.fakes import fake_tool, fake_torch
from .support.harness import make_context, run_check

CUDA = FIXTURES / "nvidia/cuda"
GATE = (CUDA / "host-config/cuda-13.0.88-crt-host_config-gnu-check.h").read_text()


def host_with_two_toolkits(tmp_path: Path) -> Path:
    """CUDA 11.5.2 from its real version.json, and 13.0.88 laid out as NVIDIA's pip wheels install it
    (dist-info, no version.json) with its real GCC gate; /usr/local/cuda → cuda-13.0 (absolute link)."""
    host = tmp_path / "host"
    old = host / "usr/local/cuda-11.5"
    for sub in ("bin", "lib64", "include"):
        (old / sub).mkdir(parents=True)
    shutil.copy(CUDA / "version-json/cuda-11.5.2-version.json", old / "version.json")
    (old / "lib64/libcudart.so.11.0").write_bytes(b"\x7fELF")
    new = host / "usr/local/cuda-13.0"
    for sub in ("bin", "lib", "include/crt", "dist-info/nvidia_cuda_nvcc-13.0.88.dist-info", "lib64/stubs"):
        (new / sub).mkdir(parents=True)
    (new / "include/crt/host_config.h").write_text("/* excerpt */\n" + GATE)
    (new / "bin/nvcc").write_text("#!/bin/sh\n")
    (new / "lib64/stubs/libcuda.so").write_bytes(b"\x7fELF")
    os.symlink("/usr/local/cuda-13.0", host / "usr/local/cuda")
    return host


def gpu_run(tmp_path: Path, host: Path, env: dict[str, str], gcc: str = "12.2.0", torch: tuple | None = None):
    tools = fake_tool(tmp_path / "bin", "g++", f"echo {gcc}")
    tools = {**tools, **fake_tool(tmp_path / "bin", "dmesg", "exit 1")}
    tools = {**tools, **fake_tool(tmp_path / "bin", "journalctl", "exit 1")}
    if torch:
        tools.update(fake_torch(tmp_path / "site", *torch))
    options = {"python": sys.executable} if torch else None  # no GPU here: the torch probe runs when asked
    # the tree stands for this machine (live): its environment and its g++ are the host's
    return run_check("gpu", host, env={**tools, **env, "PATH": env.get("PATH", "") + ":" + tools["PATH"]}, options=options, live=True)


def test_the_gcc_gate_is_read_from_the_toolkits_own_header(tmp_path):
    host = host_with_two_toolkits(tmp_path)
    found = {t.root: (t.version, t.gnu_max) for t in cudapaths.installed(make_context(host))}
    assert found == {"/usr/local/cuda-11.5": ("11.5.2", None), "/usr/local/cuda-13.0": ("13.0.88", 15)}
    assert cudapaths.gnu_limit("#if __GNUC__ > 14\n#error -- unsupported GNU version! gcc versions later than 14\n") == 14
    assert cudapaths.gnu_limit("#if __GNUC__ > 14\n#define X 1\n") is None


def test_symlinks_resolve_inside_the_root_never_on_this_machine(tmp_path):
    host = host_with_two_toolkits(tmp_path)
    ctx = make_context(host)
    assert cudapaths.resolve(ctx, "/usr/local/cuda/bin/nvcc") == "/usr/local/cuda-13.0/bin/nvcc"
    os.symlink("../../../..", host / "usr/local/cuda-13.0/escape")  # climbs above the root: stays at /
    assert cudapaths.resolve(ctx, "/usr/local/cuda-13.0/escape/etc") == "/etc"
    os.symlink("loop", host / "usr/local/loop")
    assert cudapaths.resolve(ctx, "/usr/local/loop/x")  # a loop ends, it does not hang


def test_toolkits_that_disagree_are_named_with_what_picks_each(tmp_path):
    host = host_with_two_toolkits(tmp_path)
    env = {"PATH": "/usr/local/cuda/bin", "CUDA_HOME": "/usr/local/cuda-11.5", "LD_LIBRARY_PATH": "/usr/local/cuda-11.5/lib64"}
    finding = gpu_run(tmp_path, host, env).codes()["GPU027"]
    assert finding.evidence["nvcc on PATH"] == "/usr/local/cuda-13.0"
    assert finding.evidence["build (CUDA_HOME)"] == "/usr/local/cuda-11.5"
    assert finding.evidence["libcudart on LD_LIBRARY_PATH"] == "/usr/local/cuda-11.5"
    assert "/usr/local/cuda-13.0 (13.0.88)" in finding.message and "/usr/local/cuda-11.5 (11.5.2)" in finding.message


def test_one_toolkit_everywhere_is_quiet(tmp_path):
    host = host_with_two_toolkits(tmp_path)
    env = {"PATH": "/usr/local/cuda/bin", "CUDA_HOME": "/usr/local/cuda", "LD_LIBRARY_PATH": "/usr/local/cuda-13.0/lib"}
    (host / "usr/local/cuda-13.0/lib/libcudart.so.13").write_bytes(b"\x7fELF")
    codes = gpu_run(tmp_path, host, env).codes()
    assert not {"GPU027", "GPU028", "GPU029", "GPU031"} & set(codes)


def test_a_missing_cuda_home_is_named(tmp_path):
    host = host_with_two_toolkits(tmp_path)
    finding = gpu_run(tmp_path, host, {"CUDA_HOME": "/usr/local/cuda-12.4"}).codes()["GPU027"]
    assert "CUDA_HOME=/usr/local/cuda-12.4 names a directory that is not there" in finding.message


def test_a_stub_libcuda_on_the_loader_path(tmp_path):
    host = host_with_two_toolkits(tmp_path)
    stubs = "/usr/local/cuda-13.0/lib64/stubs"
    warning = gpu_run(tmp_path, host, {"LD_LIBRARY_PATH": stubs}).codes()["GPU028"]
    assert warning.severity.value == "warning" and warning.evidence == {"where": "LD_LIBRARY_PATH", "directory": stubs}
    (host / "usr/local/cuda-13.0/lib64/stubs/libcuda.so.1").symlink_to("libcuda.so")
    (host / "etc/ld.so.conf.d").mkdir(parents=True)
    (host / "etc/ld.so.conf.d/cuda-stubs.conf").write_text(f"# added by a Dockerfile\n{stubs}\n")
    error = gpu_run(tmp_path, host, {}).codes()["GPU028"]
    assert error.severity.value == "error" and error.evidence["where"] == "/etc/ld.so.conf.d/cuda-stubs.conf"


def test_a_gcc_newer_than_nvcc_accepts(tmp_path):
    host = host_with_two_toolkits(tmp_path)
    env = {"PATH": "/usr/local/cuda/bin"}
    finding = gpu_run(tmp_path, host, env, gcc="16.1.0").codes()["GPU029"]
    assert "GCC 16" in finding.message and "GCC ≤ 15" in finding.message and finding.evidence["gnu_max"] == 15
    assert "GPU029" not in gpu_run(tmp_path, host, env, gcc="15.2.0").codes()


def test_torch_built_for_another_cuda_than_the_build_toolkit(tmp_path):
    host = host_with_two_toolkits(tmp_path)
    env = {"PATH": "/usr/local/cuda/bin", "CUDA_HOME": "/usr/local/cuda-11.5"}
    major = gpu_run(tmp_path, host, env, torch=("2.5.1+cu124", "12.4")).codes()["GPU031"]
    assert major.severity.value == "error" and "refuses a different major version" in major.message
    minor = gpu_run(tmp_path, host, {"PATH": "/usr/local/cuda/bin"}, torch=("2.9.0+cu130", "13.1")).codes()["GPU031"]
    assert minor.severity.value == "info"


def test_a_toolkit_link_is_followed_inside_the_root_only(tmp_path):
    """/usr/local/cuda-x → an absolute path that exists on this machine but not in the root is not read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(CUDA / "version-json/cuda-13.3.1-version-bundled-driver-610.43.02.json", outside / "version.json")
    host = host_with_two_toolkits(tmp_path)
    os.symlink(str(outside), host / "usr/local/cuda-x")
    from decode_doctor.checks.gpu.check import toolkits

    versions = {t.version for t in toolkits(make_context(host, env={"PATH": "/nonexistent"}))}
    assert "13.3.1" not in versions and "11.5.2" in versions
