"""`nvidia-smi -q` (text, whole or pasted fragments) and `-q -x` (XML) read into a HostReading: every capture under
fixtures/gpuhealth/q-text and q-xml (real ones from public sources, and hand-made fragments for the issue's cases;
fixtures/SOURCES.md) gives the GPUs it lists with the values read off each file by hand, and judge() finds in it what
a person reading the file would expect: nothing more. Hostile inputs are refused or read in linear time."""

from __future__ import annotations

import random
from functools import reduce
from typing import Any

import pytest

from decode_doctor.checks.gpuhealth.judge import judge
from decode_doctor.checks.gpuhealth.reading import ClockEvent, ComputeMode, GpuProcess, GpuReading, HostReading
from decode_doctor.checks.gpuhealth.smiquery import MAX_INPUT, TEXT_KIND, XML_KIND, parse_q_text, parse_q_xml

from .conftest import FIXTURES

TEXT = FIXTURES / "gpuhealth" / "q-text"
XML = FIXTURES / "gpuhealth" / "q-xml"
IDLE = frozenset({ClockEvent.IDLE})

# file → (GPUs listed, the findings expected as (code, GPU), {GPU: {field path: value read off the file}}).
# GPH001 where a link runs narrower than the GPU's max and the slot's width is not in the capture (the judge says so
# in its message); GPH030 for persistence off on a Linux data-center GPU; GPH033 for memory other processes hold
# (display servers included: the judge counts every process holding memory).
TEXT_EXPECTED: dict[str, tuple[int, list[tuple[str, int]], dict[int, dict[str, Any]]]] = {
    # GPU 1 (9E:00.0) really shows Remapped Rows Pending: Yes with one correctable remap: a reset is due
    "a100-sxm4-x4-driver-555.42.02-thamada.txt": (
        4,
        [("GPH023", 1)],
        {
            0: {
                "name": "NVIDIA A100-SXM4-80GB",
                "bus_id": "00000000:68:00.0",
                "line": 8,
                "pcie.gen_current": 4,
                "pcie.gen_max": 4,
                "pcie.slot_gen_max": 5,  # Host Max
                "pcie.width_current": 16,
                "pcie.width_max": 16,
                "persistence": True,
                "clocks.power_limit_w": 500.0,
                "clocks.applications_graphics_mhz": 1140,
                "clocks.default_applications_graphics_mhz": 1140,
                "memory.uncorrected_volatile": 0,
                "memory.remap_pending": False,
            },
            1: {"line": 225, "bus_id": "00000000:9e:00.0", "memory.remap_pending": True, "memory.remapped_correctable": 1},
            3: {"line": 659, "bus_id": "00000000:d4:00.0"},
        },
    ),
    # the example: an idle H100, healthy
    "h100-80gb-hbm3-driver-590.48.01-idle.txt": (
        1,
        [],
        {
            0: {
                "line": 9,
                "pcie.gen_current": 5,
                "pcie.gen_max": 5,
                "pcie.width_current": 16,
                "pcie.width_max": 16,
                "pcie.slot_gen_max": None,  # Host Max: N/A
                "pcie.replays": 9,
                "pcie.replay_rollovers": 0,
                "persistence": True,
                "compute_mode": ComputeMode.DEFAULT,
                "mig_enabled": False,
                "utilization_pct": 0,
                "memory_total_mib": 81559,
                "memory_used_mib": 0,
                "memory.ecc_enabled": True,
                "memory.uncorrected_volatile": 0,
                "memory.uncorrected_aggregate": 0,
                "memory.retired_pages_pending": None,  # N/A on Hopper
                "memory.remap_pending": False,
                "memory.remap_failure": False,
                "clocks.events": IDLE,
                "clocks.memory_mhz": 2619,
                "clocks.max_memory_mhz": 2619,
                "clocks.max_graphics_mhz": 1980,
                "clocks.applications_graphics_mhz": None,  # "Requested functionality has been deprecated"
                "clocks.power_limit_w": 700.0,
                "clocks.default_power_limit_w": 700.0,
                "clocks.power_draw_w": 69.62,  # Instantaneous Power Draw (no plain "Power Draw" in this report)
                "clocks.temperature_c": 41,
                "fabric_state": "Completed",
                "fabric_status": "Success",
                "processes": (),
            }
        },
    ),
    # MIG on: GPH032; utilization is N/A in MIG mode; the MIG devices' own FB and ECC blocks are not the GPU's
    "h100-mig-driver-590.48.01-idle.txt": (
        1,
        [("GPH032", 0)],
        {0: {"mig_enabled": True, "mig_pending": True, "utilization_pct": None, "memory_total_mib": 81559, "memory_used_mib": 59}},
    ),
    "h100-nvl-x2-driver-550.54.14-thamada.txt": (
        2,
        [],
        {0: {"name": "NVIDIA H100 NVL", "pcie.gen_current": 5, "clocks.power_limit_w": 310.0}, 1: {"bus_id": "00000000:ae:00.0"}},
    ),
    "h100-sxm-x8-driver-565.57.01-thamada.txt": (
        8,
        [],
        {0: {"pcie.replays": 7, "fabric_state": "Completed"}, 7: {"bus_id": "00000000:db:00.0", "line": 1576}},
    ),
    "h200-driver-590.48.01-idle.txt": (1, [], {0: {"name": "NVIDIA H200", "memory_total_mib": 143771, "persistence": True}}),
    "h200-mig-driver-590.48.01-idle.txt": (1, [("GPH032", 0)], {0: {"mig_enabled": True}}),
    # x8 of the GPU's x16 at Gen1 while idle: the width is a finding (the slot's is not shown), the idle Gen1 is not
    "l4-driver-550.90.07-thamada.txt": (
        1,
        [("GPH001", 0)],
        {0: {"pcie.width_current": 8, "pcie.width_max": 16, "pcie.gen_current": 1, "pcie.gen_max": 4, "utilization_pct": 0}},
    ),
    "l40s-driver-550.127.05-thamada.txt": (1, [], {0: {"pcie.gen_current": 1, "pcie.gen_max": 4, "clocks.power_limit_w": 350.0}}),
    # busy (100 %) at Gen4 of 4 and x16, but persistence Disabled on an L40S
    "l40s-driver-595.80-idle.txt": (1, [("GPH030", 0)], {0: {"persistence": False, "utilization_pct": 100, "pcie.gen_current": 4}}),
    # GeForce: persistence off is left alone; gnome-shell (173 MiB) and Xwayland (3 MiB) hold memory
    "rtx2080super-driver-610.57.04-idle.txt": (
        1,
        [("GPH033", 0)],
        {
            0: {
                "persistence": False,
                "processes": (GpuProcess(1720, "/usr/bin/gnome-shell", 173), GpuProcess(4556, "/usr/bin/Xwayland", 3)),
                "memory.uncorrected_volatile": None,  # N/A: no ECC on this board
            }
        },
    ),
    # Windows (WDDM): persistence N/A, process memory "Not available in WDDM driver model"
    "rtx2080super-windows-driver-591.86-idle.txt": (1, [], {0: {"persistence": None, "pcie.gen_current": 3, "bus_id": "00000000:0c:00.0"}}),
    "rtx3090-driver-560.35.03-thamada.txt": (2, [], {1: {"bus_id": "00000000:81:00.0", "line": 215, "persistence": True}}),
    "rtx4080super-driver-595.71.05-idle.txt": (1, [("GPH033", 0)], {0: {"persistence": False, "memory_total_mib": 16376}}),
    # hand-made (fixtures/SOURCES.md): the cases
    "hand-made-a100-sxm4-80gb-remap-pending-fragment.txt": (
        1,
        [("GPH023", 0)],
        {0: {"line": 1, "name": "NVIDIA A100-SXM4-80GB", "memory.remap_pending": True, "memory.corrected_volatile": 2}},
    ),
    "hand-made-a100-sxm4-80gb-x8-persistence-off-head.txt": (
        8,
        [("GPH030", n) for n in range(8)],
        {7: {"bus_id": "00000000:bd:00.0", "mig_enabled": False}},
    ),
    # 3 DRAM uncorrectable since the driver loaded; the lifetime count adds 1 SRAM SEC-DED
    "hand-made-h100-ecc-dram-uncorrectable-ecc.txt": (
        1,
        [("GPH020", 0)],
        {0: {"memory.uncorrected_volatile": 3, "memory.uncorrected_aggregate": 4, "memory.corrected_volatile": 14}},
    ),
    "hand-made-h100-fabric-in-progress-fragment.txt": (1, [("GPH041", 0)], {0: {"fabric_state": "In Progress", "fabric_status": None}}),
    "hand-made-h100-hw-slowdown-performance.txt": (
        1,
        [("GPH010", 0)],
        {0: {"clocks.events": frozenset({ClockEvent.HW_SLOWDOWN, ClockEvent.HW_THERMAL}), "name": None}},
    ),
    # x8 of x16 at 100 %: GPH001; Gen4 of the GPU's 4 (the host does 5) is no GPH002
    "hand-made-l40s-link-x8-busy-pci-utilization.txt": (
        1,
        [("GPH001", 0)],
        {0: {"pcie.width_current": 8, "pcie.width_max": 16, "pcie.gen_current": 4, "pcie.slot_gen_max": 5, "utilization_pct": 100}},
    ),
    # an older driver's layouts: the power cap lowered to 150 of 250 W and active (GPH012), 2 double-bit errors in the
    # lifetime, none since load (GPH021), a page retirement pending (GPH022), python3 holding 15311 MiB (GPH033)
    "hand-made-tesla-p100-driver-390-old-layout.txt": (
        1,
        [("GPH012", 0), ("GPH021", 0), ("GPH022", 0), ("GPH033", 0)],
        {
            0: {
                "clocks.events": frozenset({ClockEvent.SW_POWER_CAP}),
                "clocks.power_limit_w": 150.0,  # Enforced Power Limit
                "clocks.default_power_limit_w": 250.0,
                "clocks.power_draw_w": 148.21,
                "memory.ecc_enabled": True,  # "Ecc Mode"
                "memory.uncorrected_volatile": 0,
                "memory.uncorrected_aggregate": 2,  # Double Bit Total
                "memory.corrected_aggregate": 5,  # Single Bit Total
                "memory.retired_pages_dbe": 2,
                "memory.retired_pages_pending": True,  # "Pending : Yes"
                "pcie.replays": 0,  # "Replays since reset"
                "pcie.replay_rollovers": None,
                "utilization_pct": 98,
            }
        },
    ),
    "hand-made-tesla-t4-windows-tcc.txt": (1, [], {0: {"persistence": False, "processes": ()}}),
}

XML_EXPECTED: dict[str, tuple[int, list[tuple[str, int]], dict[int, dict[str, Any]]]] = {
    # attached_gpus says 4, one <gpu> listed; persistence Disabled on an A100 (GPH030); MIG on (GPH032); remapped rows
    # N/A under MIG
    "a100-sxm4-80gb-mig-driver-535.54.03-v12.xml": (
        1,
        [("GPH030", 0), ("GPH032", 0)],
        {
            0: {
                "line": 8,
                "persistence": False,
                "mig_enabled": True,
                "utilization_pct": None,
                "memory.uncorrected_volatile": 0,
                "memory.remap_pending": None,
                "clocks.events": frozenset(),
                "clocks.applications_graphics_mhz": 1275,
            }
        },
    ),
    # AWS A10G: x8 of x16 (GPH001, the slot unknown), persistence off (GPH030), Xorg 22 MiB (GPH033)
    "a10g-driver-515.105.01-v11.xml": (
        1,
        [("GPH001", 0), ("GPH030", 0), ("GPH033", 0)],
        {
            0: {
                "pcie.width_current": 8,
                "pcie.width_max": 16,
                "persistence": False,
                "memory.remap_pending": False,
                "processes": (GpuProcess(725, "/usr/lib/xorg/Xorg", 22),),
            }
        },
    ),
    "dual-rtx-a5000-driver-590.44.01-v13.xml": (
        2,
        [("GPH033", 0), ("GPH033", 1)],
        {
            0: {"processes": (GpuProcess(100477, "/root/src/llama.cpp/build/bin/llama-server", 22430),), "memory.ecc_enabled": False},
            1: {"line": 868, "bus_id": "00000000:c1:00.0"},
        },
    ),
    # two GeForce boards at x8/x8 of x16 (a consumer board splitting its lanes: the slot's width is not in the XML)
    "dual-rtx2070-driver-590.44.01-v13.xml": (2, [("GPH001", 0), ("GPH001", 1)], {1: {"pcie.width_current": 8, "pcie.slot_gen_max": 3}}),
    "dual-rtx2080-driver-590.44.01-v13.xml": (
        2,
        [("GPH001", 0), ("GPH001", 1)],
        {0: {"pcie.width_current": 8, "clocks.power_draw_w": 1.0}},
    ),
    # a vGPU guest on Windows: no PCIe link, no persistence, processes without names or memory
    "grid-p4-1q-vgpu-driver-513.46-v11.xml": (
        1,
        [],
        {0: {"name": "GRID P4-1Q", "pcie.gen_current": None, "persistence": None, "clocks.events": None}},
    ),
    "gt1030-driver-470.74-v11.xml": (1, [("GPH033", 0)], {0: {"pcie.width_current": 4, "pcie.width_max": 4, "pcie.gen_current": 3}}),
    # trimmed upstream: no driver version, no processes element
    "gtx-1070ti-partial-v10.xml": (1, [], {0: {"line": 4, "processes": None, "pcie.gen_current": 1, "clocks.temperature_c": 39}}),
    # driver 418: clocks_throttle_reasons, power_readings with enforced_power_limit
    "gtx-1660ti-driver-418.43-v10.xml": (
        1,
        [],
        {0: {"line": 7, "name": "Graphics Device", "clocks.events": IDLE, "clocks.power_limit_w": 130.0, "persistence": False}},
    ),
    "quadro-p2000-driver-525.125.06-v12.xml": (1, [("GPH001", 0)], {0: {"pcie.width_current": 8, "pcie.width_max": 16}}),
    "quadro-p400-driver-418.43-v10.xml": (1, [], {0: {"clocks.power_limit_w": None, "clocks.applications_graphics_mhz": 1227}}),
    "rtx-pro-6000-blackwell-maxq-driver-590.44.01-v13.xml": (
        1,
        [("GPH033", 0)],
        {0: {"memory.remap_pending": False, "memory_total_mib": 97887}},
    ),
    # no <power_draw>: instant_power_draw
    "rtx3060-driver-570.124.04-v12.xml": (1, [], {0: {"clocks.power_draw_w": 11.63, "clocks.power_limit_w": 170.0}}),
    # busy at 65 %, memory clock 9251 of 9501 MHz (97 %): no GPH013
    "rtx3080-driver-595.58.03-v13.xml": (1, [], {0: {"utilization_pct": 65, "clocks.memory_mhz": 9251, "clocks.max_memory_mhz": 9501}}),
    # WDDM; a power limit raised above the default (336 of 320 W) is no finding
    "rtx3080-windows-driver-536.40-v12.xml": (
        1,
        [("GPH033", 0)],
        {0: {"persistence": None, "clocks.power_limit_w": 336.0, "clocks.default_power_limit_w": 320.0}},
    ),
    # the power limit set to 200 of a default 350 W
    "rtx3090-driver-525.147.05-v12.xml": (1, [("GPH012", 0)], {0: {"clocks.power_limit_w": 200.0, "clocks.default_power_limit_w": 350.0}}),
    # SW power cap active at idle (P8) is no finding
    "rtx3090-driver-590.44.01-v13.xml": (
        1,
        [],
        {
            0: {
                "clocks.events": frozenset({ClockEvent.SW_POWER_CAP}),
                "pcie.gen_current": 1,
                "pcie.slot_gen_max": 4,
                "clocks.max_memory_mhz": 9751,
            }
        },
    ),
    "rtx4000-sff-ada-driver-595.84-v13.xml": (1, [("GPH033", 0)], {0: {"memory.ecc_enabled": False}}),
    # AWS T4: x8 of x16 (GPH001), persistence off (GPH030), Xorg and python (GPH033); pages retired: none pending
    "tesla-t4-driver-515.105.01-v11.xml": (
        1,
        [("GPH001", 0), ("GPH030", 0), ("GPH033", 0)],
        {
            0: {
                "memory.retired_pages_pending": False,
                "memory.retired_pages_sbe": 0,
                "memory.uncorrected_aggregate": 0,
                "clocks.events": frozenset(),
            }
        },
    ),
}
WINDOWS = {
    "rtx2080super-windows-driver-591.86-idle.txt",
    "hand-made-tesla-t4-windows-tcc.txt",
    "grid-p4-1q-vgpu-driver-513.46-v11.xml",
    "rtx3080-windows-driver-536.40-v12.xml",
}


def value(gpu: GpuReading, path: str) -> Any:
    return reduce(getattr, path.split("."), gpu)


def findings(reading: HostReading) -> list[tuple[str, int]]:
    return sorted((v.code.code, v.gpu.index if v.gpu is not None else -1) for v in judge(reading).verdicts)


def check(reading: HostReading | None, name: str, expected: tuple[int, list[tuple[str, int]], dict[int, dict[str, Any]]]) -> None:
    count, codes, fields = expected
    assert reading is not None
    assert len(reading.gpus) == count
    assert [gpu.index for gpu in reading.gpus] == list(range(count))
    assert reading.windows is (name in WINDOWS)
    for index, wanted in fields.items():
        assert {path: value(reading.gpus[index], path) for path in wanted} == wanted
    assert findings(reading) == sorted(codes)


def test_every_capture_has_its_expectations_written_down():
    assert sorted(p.name for p in TEXT.iterdir()) == sorted(TEXT_EXPECTED)
    assert sorted(p.name for p in XML.iterdir()) == sorted(XML_EXPECTED)


@pytest.mark.parametrize("name", sorted(TEXT_EXPECTED))
def test_text_captures(name):
    reading = parse_q_text((TEXT / name).read_text(encoding="utf-8"))
    check(reading, name, TEXT_EXPECTED[name])
    assert reading is not None and reading.kind == TEXT_KIND


@pytest.mark.parametrize("name", sorted(XML_EXPECTED))
def test_xml_captures(name):
    reading = parse_q_xml((XML / name).read_text(encoding="utf-8"))
    check(reading, name, XML_EXPECTED[name])
    assert reading is not None and reading.kind == XML_KIND


def test_driver_versions():
    assert parse_q_text((TEXT / "h100-80gb-hbm3-driver-590.48.01-idle.txt").read_text(encoding="utf-8")).driver_version == "590.48.01"  # type: ignore[union-attr]
    # 610 marks "Driver Version" deprecated (a bracketed note) and adds "KMD Version"
    assert parse_q_text((TEXT / "rtx2080super-driver-610.57.04-idle.txt").read_text(encoding="utf-8")).driver_version == "610.57.04"  # type: ignore[union-attr]
    assert parse_q_xml((XML / "gtx-1660ti-driver-418.43-v10.xml").read_text(encoding="utf-8")).driver_version == "418.43"  # type: ignore[union-attr]
    assert parse_q_xml((XML / "gtx-1070ti-partial-v10.xml").read_text(encoding="utf-8")).driver_version is None  # type: ignore[union-attr]
    assert parse_q_text((TEXT / "hand-made-h100-fabric-in-progress-fragment.txt").read_text(encoding="utf-8")).driver_version is None  # type: ignore[union-attr]


def test_windows_process_memory_is_not_shown():
    reading = parse_q_text((TEXT / "rtx2080super-windows-driver-591.86-idle.txt").read_text(encoding="utf-8"))
    assert reading is not None and reading.gpus[0].processes
    assert all(p.used_mib is None and p.pid for p in reading.gpus[0].processes)
    assert reading.gpus[0].processes[0].name == "C:\\Windows\\System32\\dwm.exe"  # split at the first colon only


def test_the_windows_flag_is_what_keeps_persistence_quiet():
    text = (TEXT / "hand-made-tesla-t4-windows-tcc.txt").read_text(encoding="utf-8")
    linux = parse_q_text(text.replace(": TCC", ": N/A"))
    assert linux is not None and not linux.windows
    assert findings(linux) == [("GPH030", 0)]


# --- fragments pasted by hand ----------------------------------------------------------------------

REMAP_BLOCK = """Remapped Rows
    Correctable Error                 : 0
    Uncorrectable Error               : 1
    Pending                           : Yes
    Remapping Failure Occurred        : No
"""


def test_a_block_without_its_gpu_line_is_gpu_0():
    reading = parse_q_text("\n\n" + REMAP_BLOCK)
    assert reading is not None and len(reading.gpus) == 1
    gpu = reading.gpus[0]
    assert (gpu.index, gpu.line, gpu.bus_id, gpu.name) == (0, 3, None, None)
    assert (gpu.memory.remap_pending, gpu.memory.remapped_uncorrectable, gpu.memory.remap_failure) == (True, 1, False)
    verdicts = judge(reading).verdicts
    assert [v.code.code for v in verdicts] == ["GPH023"] and verdicts[0].evidence["remapped_uncorrectable"] == 1


def test_a_block_copied_with_its_indentation_and_tabs():
    indented = "".join("        " + line + "\n" for line in REMAP_BLOCK.splitlines())
    assert parse_q_text(indented).gpus[0].memory.remap_pending is True  # type: ignore[union-attr]
    tabbed = REMAP_BLOCK.replace("    ", "\t").replace("\n", "\r\n")
    assert parse_q_text(tabbed).gpus[0].memory.remap_pending is True  # type: ignore[union-attr]


def test_a_fragment_with_the_gpu_line_and_a_deeper_section_path():
    text = (
        "GPU 0000:3B:00.0\n    PCI\n        GPU Link Info\n            Link Width\n"
        "                Max : 16x\n                Current : 4x\n"
    )
    reading = parse_q_text(text)
    assert reading is not None
    gpu = reading.gpus[0]
    assert (gpu.bus_id, gpu.line, gpu.pcie.width_max, gpu.pcie.width_current) == ("00000000:3b:00.0", 1, 16, 4)


def test_clocks_event_reasons_absent_active_and_not_active():
    shown = "Clocks Event Reasons\n    Idle : Not Active\n    SW Thermal Slowdown : Active\n    HW Slowdown : Not Active\n"
    reading = parse_q_text(shown)
    assert reading is not None and reading.gpus[0].clocks.events == frozenset({ClockEvent.SW_THERMAL})
    assert findings(reading) == [("GPH011", 0)]
    none_active = parse_q_text(shown.replace(": Active", ": Not Active"))
    assert none_active is not None and none_active.gpus[0].clocks.events == frozenset()
    absent = parse_q_text("GPU 00000000:01:00.0\n    Persistence Mode : Enabled\n    Clocks\n        Memory : 405 MHz\n")
    assert absent is not None and absent.gpus[0].clocks.events is None


def test_unavailable_values_are_none():
    text = (
        "GPU 00000000:01:00.0\n    Persistence Mode : [N/A]\n    Compute Mode : [Not Supported]\n"
        "    Utilization\n        Gpu : Unknown Error\n    Clocks\n        Memory : N/A\n"
        "    Applications Clocks\n        Graphics : Requested functionality has been deprecated\n"
    )
    reading = parse_q_text(text)
    assert reading is not None
    gpu = reading.gpus[0]
    assert (gpu.persistence, gpu.compute_mode, gpu.utilization_pct, gpu.clocks.memory_mhz, gpu.clocks.applications_graphics_mhz) == (
        None,
    ) * 5


def test_a_mig_device_block_is_not_the_gpu():
    # the older MIG layout: each MIG device with its own FB Memory Usage and ECC, printed before the GPU's own
    text = """GPU 00000000:07:00.0
    Product Name                          : NVIDIA A100-SXM4-80GB
    MIG Mode
        Current                           : Enabled
        Pending                           : Enabled
    MIG Devices
        MIG Device
            Index                         : 0
            ECC Errors
                Volatile
                    SRAM Uncorrectable    : 0
            FB Memory Usage
                Total                     : 9728 MiB
                Used                      : 3 MiB
    FB Memory Usage
        Total                             : 81920 MiB
        Used                              : 512 MiB
    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable            : 2
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 0
"""
    gpu = parse_q_text(text).gpus[0]  # type: ignore[union-attr]
    assert (gpu.memory_total_mib, gpu.memory_used_mib, gpu.memory.uncorrected_volatile) == (81920, 512, 2)


def test_not_a_q_report():
    assert parse_q_text("") is None
    assert parse_q_text("Persistence Mode : Disabled\n") is None  # no section, no GPU line, no report head
    assert parse_q_text("hello: world\n  nested: value\n") is None
    assert parse_q_text((XML / "tesla-t4-driver-515.105.01-v11.xml").read_text(encoding="utf-8")) is None
    for path in sorted((FIXTURES / "nvidia" / "nvidia-smi-table").iterdir()):
        assert parse_q_text(path.read_text(encoding="utf-8")) is None, path.name
    for path in sorted((FIXTURES / "nvidia" / "nvidia-smi-errors").iterdir()):
        assert parse_q_text(path.read_text(encoding="utf-8", errors="replace")) is None, path.name


def test_not_q_x_xml():
    assert parse_q_xml("") is None
    assert parse_q_xml("<html><body>403</body></html>") is None
    assert parse_q_xml("<?xml version='1.0'?><other><gpu id='1'/></other>") is None
    for path in sorted(TEXT.iterdir()):
        assert parse_q_xml(path.read_text(encoding="utf-8")) is None, path.name


# --- the same GPU in both forms --------------------------------------------------------------------

SAME_TEXT = """GPU 00000000:17:00.0
    Product Name                          : NVIDIA A100-SXM4-80GB
    Persistence Mode                      : Disabled
    MIG Mode
        Current                           : Disabled
        Pending                           : Enabled
    PCI
        GPU Link Info
            PCIe Generation
                Max                       : 4
                Current                   : 3
                Host Max                  : 4
            Link Width
                Max                       : 16x
                Current                   : 16x
        Replays Since Reset               : 1200
        Replay Number Rollovers           : 0
    Clocks Event Reasons
        Idle                              : Not Active
        HW Slowdown                       : Active
            HW Power Brake Slowdown       : Active
    FB Memory Usage
        Total                             : 81920 MiB
        Used                              : 4000 MiB
    Compute Mode                          : Exclusive_Process
    Utilization
        Gpu                               : 90 %
    ECC Mode
        Current                           : Enabled
    ECC Errors
        Volatile
            SRAM Correctable              : 1
            SRAM Uncorrectable            : 1
            DRAM Correctable              : 2
            DRAM Uncorrectable            : 0
    Remapped Rows
        Correctable Error                 : 0
        Uncorrectable Error               : 0
        Pending                           : No
        Remapping Failure Occurred        : Yes
    Temperature
        GPU Current Temp                  : 88 C
    GPU Power Readings
        Power Draw                        : 390.50 W
        Current Power Limit               : 400.00 W
        Default Power Limit               : 400.00 W
    Clocks
        Graphics                          : 1410 MHz
        Memory                            : 1215 MHz
    Max Clocks
        Graphics                          : 1410 MHz
        Memory                            : 1593 MHz
    Fabric
        State                             : Completed
        Status                            : Success
    Processes
        Process ID                        : 4242
            Type                          : C
            Name                          : vllm
            Used GPU Memory               : 3990 MiB
"""
SAME_XML = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
    <gpu id="00000000:17:00.0">
        <product_name>NVIDIA A100-SXM4-80GB</product_name>
        <persistence_mode>Disabled</persistence_mode>
        <mig_mode><current_mig>Disabled</current_mig><pending_mig>Enabled</pending_mig></mig_mode>
        <pci>
            <pci_gpu_link_info>
                <pcie_gen><max_link_gen>4</max_link_gen><current_link_gen>3</current_link_gen><max_host_link_gen>4</max_host_link_gen></pcie_gen>
                <link_widths><max_link_width>16x</max_link_width><current_link_width>16x</current_link_width></link_widths>
            </pci_gpu_link_info>
            <replay_counter>1200</replay_counter>
            <replay_rollover_counter>0</replay_rollover_counter>
        </pci>
        <clocks_event_reasons>
            <clocks_event_reason_gpu_idle>Not Active</clocks_event_reason_gpu_idle>
            <clocks_event_reason_hw_slowdown>Active</clocks_event_reason_hw_slowdown>
            <clocks_event_reason_hw_power_brake_slowdown>Active</clocks_event_reason_hw_power_brake_slowdown>
        </clocks_event_reasons>
        <fb_memory_usage><total>81920 MiB</total><used>4000 MiB</used></fb_memory_usage>
        <compute_mode>Exclusive_Process</compute_mode>
        <utilization><gpu_util>90 %</gpu_util></utilization>
        <ecc_mode><current_ecc>Enabled</current_ecc></ecc_mode>
        <ecc_errors>
            <volatile>
                <sram_correctable>1</sram_correctable><sram_uncorrectable>1</sram_uncorrectable>
                <dram_correctable>2</dram_correctable><dram_uncorrectable>0</dram_uncorrectable>
            </volatile>
        </ecc_errors>
        <remapped_rows>
            <remapped_row_corr>0</remapped_row_corr><remapped_row_unc>0</remapped_row_unc>
            <remapped_row_pending>No</remapped_row_pending><remapped_row_failure>Yes</remapped_row_failure>
        </remapped_rows>
        <temperature><gpu_temp>88 C</gpu_temp></temperature>
        <gpu_power_readings>
            <power_draw>390.50 W</power_draw><current_power_limit>400.00 W</current_power_limit>
            <default_power_limit>400.00 W</default_power_limit>
        </gpu_power_readings>
        <clocks><graphics_clock>1410 MHz</graphics_clock><mem_clock>1215 MHz</mem_clock></clocks>
        <max_clocks><graphics_clock>1410 MHz</graphics_clock><mem_clock>1593 MHz</mem_clock></max_clocks>
        <fabric><state>Completed</state><status>Success</status></fabric>
        <processes>
            <process_info><pid>4242</pid><type>C</type><process_name>vllm</process_name><used_memory>3990 MiB</used_memory></process_info>
        </processes>
    </gpu>
</nvidia_smi_log>
"""


def test_text_and_xml_give_the_same_reading():
    text, xml = parse_q_text(SAME_TEXT), parse_q_xml(SAME_XML)
    assert text is not None and xml is not None
    assert (text.gpus[0].line, xml.gpus[0].line) == (1, 4)
    assert text.gpus[0] == GpuReading(**{**vars(xml.gpus[0]), "line": 1})
    gpu = text.gpus[0]
    assert gpu.clocks.events == frozenset({ClockEvent.HW_SLOWDOWN, ClockEvent.HW_POWER_BRAKE})
    assert (gpu.memory.uncorrected_volatile, gpu.memory.corrected_volatile) == (1, 3)  # SRAM + DRAM
    assert gpu.processes == (GpuProcess(4242, "vllm", 3990),)
    # Gen3 of 4 at 90 %, 1200 replays, hardware slowdown, memory clock 1215 of 1593 MHz busy, Exclusive_Process, MIG
    # pending, SRAM uncorrectable, remap failed, memory held by vllm
    wanted = ["GPH002", "GPH003", "GPH010", "GPH013", "GPH020", "GPH024", "GPH030", "GPH031", "GPH032", "GPH033"]
    assert [code for code, _ in findings(text)] == wanted == [code for code, _ in findings(xml)]


def test_xml_old_ecc_layout_and_retired_pages():
    xml = """<nvidia_smi_log><driver_version>384.81</driver_version><gpu id="0000:04:00.0">
    <product_name>Tesla K80</product_name>
    <ecc_errors><volatile>
        <single_bit><device_memory>3</device_memory><register_file>0</register_file><total>4</total></single_bit>
        <double_bit><device_memory>1</device_memory><register_file>1</register_file><total>2</total></double_bit>
    </volatile><aggregate>
        <single_bit><device_memory>3</device_memory></single_bit>
        <double_bit><device_memory>1</device_memory></double_bit>
    </aggregate></ecc_errors>
    <retired_pages><pending_retirement>Yes</pending_retirement></retired_pages>
    <clocks_throttle_reasons><clocks_throttle_reason_hw_slowdown>Not Active</clocks_throttle_reason_hw_slowdown></clocks_throttle_reasons>
    </gpu></nvidia_smi_log>"""
    reading = parse_q_xml(xml)
    assert reading is not None and reading.driver_version == "384.81"
    faults = reading.gpus[0].memory
    # Double Bit Total (every checked memory) where shown, Device Memory where no total is
    assert (faults.uncorrected_volatile, faults.corrected_volatile, faults.uncorrected_aggregate, faults.corrected_aggregate) == (
        2,
        4,
        1,
        3,
    )
    assert faults.retired_pages_pending is True
    assert reading.gpus[0].clocks.events == frozenset()
    assert findings(reading) == [("GPH020", 0), ("GPH022", 0)]


# --- hostile input ---------------------------------------------------------------------------------


def test_16_mib_of_junk():
    junk = random.Random(48).randbytes(MAX_INPUT).decode("latin-1")
    assert parse_q_text(junk) is None
    assert parse_q_xml(junk) is None
    assert parse_q_text("\n" * MAX_INPUT) is None
    assert parse_q_text("GPU 00000000:01:00.0\n" + "x" * MAX_INPUT) is None  # over the limit: refused whole
    assert parse_q_xml("<nvidia_smi_log>" + " " * MAX_INPUT + "</nvidia_smi_log>") is None


def test_a_1_mb_line_is_skipped():
    text = (
        "GPU 00000000:07:00.0\n    Product Name : "
        + "A" * (1 << 20)
        + "\n"
        + "".join("    " + line + "\n" for line in REMAP_BLOCK.splitlines())
    )
    reading = parse_q_text(text)
    assert reading is not None
    assert (reading.gpus[0].name, reading.gpus[0].memory.remap_pending) == (None, True)


def test_deep_indentation_is_bounded():
    deep = "".join(" " * depth + "Section\n" for depth in range(3000)) + " " * 3000 + "Pending : Yes\n"
    reading = parse_q_text(deep + REMAP_BLOCK)  # the block after the deep run, back at column 0, still reads
    assert reading is not None and reading.gpus[0].memory.remap_pending is True
    sections = "".join("    " * depth + "Remapped Rows\n" for depth in range(20)) + "    " * 20 + "Pending : Yes\n"
    assert parse_q_text(sections) is None  # 20 deep: past the depth read; nothing else in it


def test_many_gpu_lines_are_capped():
    reading = parse_q_text("GPU 00000000:07:00.0\n    Persistence Mode : Disabled\n" * 10_000)
    assert reading is not None and len(reading.gpus) == 64


def test_xml_entities_and_internal_subsets_are_refused_not_expanded():
    laughs = (
        '<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
        '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]><nvidia_smi_log><gpu id="1"><product_name>&c;</product_name></gpu></nvidia_smi_log>'
    )
    assert parse_q_xml(laughs) is None
    external = (
        '<!DOCTYPE nvidia_smi_log [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        '<nvidia_smi_log><gpu id="1"><product_name>&x;</product_name></gpu></nvidia_smi_log>'
    )
    assert parse_q_xml(external) is None
    subset = '<!DOCTYPE nvidia_smi_log [<!ATTLIST gpu id CDATA "00000000:01:00.0">]><nvidia_smi_log><gpu/></nvidia_smi_log>'
    assert parse_q_xml(subset) is None
    # nvidia-smi's own DOCTYPE (an external DTD, never fetched) is fine
    plain = '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd"><nvidia_smi_log><gpu id="00000000:01:00.0"/></nvidia_smi_log>'
    reading = parse_q_xml(plain)
    assert reading is not None and reading.gpus[0].bus_id == "00000000:01:00.0"


def test_truncated_xml_gives_what_was_read_and_never_raises():
    text = (XML / "dual-rtx-a5000-driver-590.44.01-v13.xml").read_text(encoding="utf-8")
    second = text.index('<gpu id="00000000:C1:00.0">')
    cut = parse_q_xml(text[: second + 2000])
    assert cut is not None and len(cut.gpus) == 2
    assert cut.gpus[0] == parse_q_xml(text).gpus[0]  # type: ignore[union-attr]
    assert cut.gpus[1].bus_id == "00000000:c1:00.0" and cut.gpus[1].processes is None
    for end in range(0, len(text), 1777):
        reading = parse_q_xml(text[:end])
        assert reading is None or len(reading.gpus) <= 2


def test_deeply_nested_xml_is_bounded():
    reading = parse_q_xml("<nvidia_smi_log><gpu id='1'>" + "<pci>" * 200_000 + "</pci>" * 200_000 + "</gpu></nvidia_smi_log>")
    assert reading is not None and len(reading.gpus) == 1 and reading.gpus[0].pcie.gen_current is None
    assert parse_q_xml("<nvidia_smi_log>" + "<gpu>" * 100_000) is not None


def test_surrogates_and_nul_do_not_crash():
    assert parse_q_xml("<nvidia_smi_log><gpu id='\udcff'/></nvidia_smi_log>") is None
    assert parse_q_xml("<nvidia_smi_log>\x00</nvidia_smi_log>") is not None
    reading = parse_q_text("Remapped Rows\n    Pending : Yes\x00\udcff\n")
    assert reading is not None and reading.gpus[0].memory.remap_pending is None
