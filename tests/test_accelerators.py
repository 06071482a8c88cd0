"""AMD GPUs, Jetson power modes and Rockchip NPU drivers (issue 18), from real captures."""

from __future__ import annotations

import json

import pytest

from decode_doctor.checks.accelerators import amd, jetson, rknpu

from .conftest import FIXTURES
from .support.fakes import fake_tool, printing
from .support.harness import cli, run_check

ACC = FIXTURES / "accelerators"


@pytest.mark.parametrize(
    ("name", "gpu", "memory_mib", "gfx", "driver", "bandwidth"),
    [
        ("rocm-smi-json-rx7900xt-gfx1100.json", "Radeon RX 7900 XT", 20464, "gfx1100", None, "GDDR"),
        ("amd-smi-static-mi350x-gfx950.txt", "AMD Instinct MI350X", None, "gfx950", "6.18.3", "HBM"),
        ("amd-smi-static-phoenix3-780m-pve.txt", "Phoenix3", None, None, "7.0.14-17-pve", None),
    ],
)
def test_amd_tools_give_name_memory_arch_driver_and_bandwidth_class(name, gpu, memory_mib, gfx, driver, bandwidth):
    (found,) = amd.parse((ACC / "amd" / name).read_text())
    assert (found.name, found.memory_mib, found.gfx, found.driver) == (gpu, memory_mib, gfx, driver)
    assert found.bandwidth_class == bandwidth if bandwidth is None else (found.bandwidth_class or "").startswith(bandwidth)
    report = cli("analyze", str(ACC / "amd" / name), "--format", "json").json()
    assert next(iter(report["facts"].values()))["amd"][0]["name"] == gpu and report["findings"] == []


def test_amd_smi_json_in_both_shapes_and_na_values():
    item = {
        "gpu": 0,
        "asic": {"market_name": "AMD Instinct MI300X", "target_graphics_version": "gfx942"},
        "vram": {"type": "HBM3", "size": {"value": 196592, "unit": "MB"}},
        "driver": {"version": "N/A"},
    }
    for text in (json.dumps([item]), json.dumps({"gpu_data": [item]})):
        (gpu,) = amd.parse(text)
        assert (gpu.memory_mib, gpu.driver, gpu.bandwidth_class[:3]) == (196592, None, "HBM")
    for bad in ("{", "[1, 2]", '{"system": {}}', "GPU: 0\n    ASIC:\n        MARKET_NAME: N/A\n"):
        with pytest.raises(ValueError):
            amd.parse(bad)


@pytest.mark.parametrize(
    ("name", "codes", "mode"),
    [
        ("jetson-clocks-show-nano-5w-before-after.txt", ["ACC010"], "5W"),  # the second report: clocks pinned
        ("jetson-clocks-show-orin-nano-super-25w.txt", ["ACC010", "ACC011"], "25W"),
        ("jetson-clocks-show-nano-maxn-unlocked.txt", ["ACC011"], "MAXN"),
        ("nvpmodel-q-thor-maxn.txt", [], "MAXN"),
    ],
)
def test_jetson_power_mode_and_clocks(name, codes, mode):
    report = cli("analyze", str(ACC / "jetson" / name), "--format", "json").json()
    assert [f["code"] for f in report["findings"]] == codes
    assert next(iter(report["facts"].values()))["jetson"]["mode"] == mode
    lines = (ACC / "jetson" / name).read_text().splitlines()
    for finding in report["findings"]:
        assert lines[finding["evidence"]["line"] - 1].startswith("NV Power Mode:")


def test_the_orin_memory_clock_figures():
    power = jetson.parse((ACC / "jetson/jetson-clocks-show-orin-nano-super-25w.txt").read_text())
    assert power.emc == jetson.Clock(204_000_000, 3_199_000_000, 2_133_000_000) and power.emc_locked is False
    assert not power.maximum_mode and jetson.parse("NV Power Mode: MAXN_SUPER\n2\n").maximum_mode


@pytest.mark.parametrize(
    ("name", "version", "severity"),
    [
        ("debugfs-version-v0.9.3-liontron-d3588.txt", "0.9.3", "warning"),
        ("debugfs-version-v0.9.6-rock5b.txt", "0.9.6", "warning"),
        ("rkllm-driver-too-low-0.8.2-nanopc-t6.txt", "0.8.2", "warning"),
    ],
)
def test_rknpu_driver_versions(name, version, severity):
    report = cli("analyze", str(ACC / "rknpu" / name), "--format", "json").json()
    (finding,) = report["findings"]
    assert (finding["code"], finding["severity"], finding["evidence"]["version"]) == ("ACC020", severity, version)
    assert rknpu.find_version("[drm] Initialized rknpu 0.9.8 20240828 for fdab0000.npu on minor 1")[0] == "0.9.8"
    assert rknpu.find_version("RKNPU driver: v0.9.x") is None


def host_tree(tmp_path):
    host = tmp_path / "host"
    host.mkdir(parents=True)
    return host


def test_live_amd_gpu_without_kfd_and_with_rocm_smi(tmp_path):
    host = host_tree(tmp_path)
    device = host / "sys/class/drm/card0/device"
    device.mkdir(parents=True)
    for name, value in {"vendor": "0x1002", "class": "0x030000", "device": "0x744c", "mem_info_vram_total": "21458059264"}.items():
        (device / name).write_text(value + "\n")
    (host / "sys/class/drm/renderD128").mkdir()
    (host / "opt/rocm/.info").mkdir(parents=True)
    (host / "opt/rocm/.info/version").write_text("6.2.4-120\n")
    env = fake_tool(tmp_path / "bin", "rocm-smi", printing(ACC / "amd/rocm-smi-json-rx7900xt-gfx1100.json"))
    run = run_check("accelerators", host, env=env, live=True)  # the tree stands for this machine: its rocm-smi is the fake
    assert run.codes()["ACC001"].evidence == {"gpus": ["AMD GPU 0x744c"]}
    assert run.facts.amd[0].name == "Radeon RX 7900 XT" and run.facts.amd_source == "rocm-smi" and run.facts.rocm == "6.2.4"
    (host / "dev").mkdir()
    (host / "dev/kfd").write_text("")  # stands for the device node: only its existence is looked at
    assert "ACC001" not in run_check("accelerators", host, env=env, live=True).codes()


def test_live_jetson_and_rknpu(tmp_path):
    host = host_tree(tmp_path)
    (host / "etc").mkdir()
    (host / "etc/nv_tegra_release").write_text("# R36 (release), REVISION: 4.4\n")
    env = fake_tool(tmp_path / "bin", "jetson_clocks", printing(ACC / "jetson/jetson-clocks-show-orin-nano-super-25w.txt"))
    env = fake_tool(tmp_path / "bin", "nvpmodel", "exit 1")
    run = run_check("accelerators", host, env=env, live=True)
    assert set(run.codes()) == {"ACC010", "ACC011"} and run.facts.jetson.mode == "25W"
    rk = host_tree(tmp_path / "rk")
    (rk / "sys/kernel/debug/rknpu").mkdir(parents=True)
    (rk / "sys/kernel/debug/rknpu/version").write_text("RKNPU driver: v0.9.7\n")
    (rk / "proc/device-tree").mkdir(parents=True)
    (rk / "proc/device-tree/compatible").write_text("radxa,rock-5b\x00rockchip,rk3588\x00")
    run = run_check("accelerators", rk, env=fake_tool(tmp_path / "rkbin", "dmesg", "exit 1"))
    finding = run.codes()["ACC020"]
    assert finding.severity.value == "info" and run.facts.soc == "rk3588" and run.facts.rknpu == "0.9.7"


def test_nothing_there_is_skipped(tmp_path):
    from decode_doctor.engine import SkipCheck

    with pytest.raises(SkipCheck):
        run_check("accelerators", host_tree(tmp_path), env=fake_tool(tmp_path / "bin", "dmesg", "exit 1"))


def test_a_memory_figure_past_any_real_size_is_absent_not_an_overflow():
    """Found by benchmarks/fuzz.py: a 400-digit VRAM size raised OverflowError."""
    (gpu,) = amd.parse('{"card0": {"Card Series": "X", "VRAM Total Memory (B)": "' + "9" * 400 + '"}}')
    assert gpu.memory_mib is None


def test_a_hung_nvpmodel_is_named_in_the_skip_reason(tmp_path):
    from decode_doctor.engine import SkipCheck

    host = host_tree(tmp_path)
    (host / "etc").mkdir()
    (host / "etc/nv_tegra_release").write_text("# R36 (release), REVISION: 4.4\n")
    env = fake_tool(tmp_path / "bin", "nvpmodel", "exit 3")
    with pytest.raises(SkipCheck, match=r"Jetson: nvpmodel -q: exit 3"):
        run_check("accelerators", host, env=env, live=True)
