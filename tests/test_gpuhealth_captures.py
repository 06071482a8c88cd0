"""Pasted GPU captures other than `nvidia-smi -q`: the --query-gpu and --query-compute-apps CSVs, the
default table, `nvlink -s`, `topo -m` and `lspci -vv`, each read into a HostReading, and the dispatcher
that recognises them (alone or several in one paste) and merges what they show.

Every real capture under fixtures/gpuhealth/{csv,table,topo,nvlink,lspci,mixed} is read, and judge()
on it must give exactly the findings a person reading that file would raise (written per file, with
why); the synthetic cases are the conditions the real files do not show. Hostile texts never raise
and never give more than the bounds allow.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from decode_doctor.checks.gpuhealth import captures
from decode_doctor.checks.gpuhealth.captures import read_capture, segments
from decode_doctor.checks.gpuhealth.check import GpuHealthCheck
from decode_doctor.checks.gpuhealth.judge import judge
from decode_doctor.checks.gpuhealth.lspci import parse_lspci
from decode_doctor.checks.gpuhealth.pasted import MAX_GPUS, MAX_TEXT_CHARS, bounded_lines, bus_id
from decode_doctor.checks.gpuhealth.reading import ClockEvent, ComputeMode, HostReading
from decode_doctor.checks.gpuhealth.smicsv import COMPUTE_APPS, QUERY_GPU, parse_query_csv
from decode_doctor.checks.gpuhealth.smilinks import parse_nvlink_status, parse_topo
from decode_doctor.checks.gpuhealth.smitable import parse_table

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gpuhealth"


def read(kind: str, name: str) -> str:
    return (FIXTURES / kind / name).read_text(encoding="utf-8")


def found(reading: HostReading) -> list[tuple[str, int | None]]:
    """(code, GPU index) of every verdict, in judge's order."""
    return [(v.code.code, v.gpu.index if v.gpu is not None else None) for v in judge(reading).verdicts]


def folder(kind: str) -> list[str]:
    return sorted(path.name for path in (FIXTURES / kind).iterdir() if path.is_file())


# ------------------------------------------------------------------ the default table

# file: (GPUs, findings a reader raises from the table alone, why)
TABLES: dict[str, tuple[int, list[tuple[str, int | None]], str]] = {
    "a100-sxm4-x4-driver-555.42.02-thamada.txt": (4, [], "persistence On, MIG Disabled, ECC 0, no processes"),
    "a30-mig-3-instances-driver-535.183.01.txt": (1, [("GPH030", 0), ("GPH032", 0)], "A30 (data center) with persistence Off; MIG Enabled"),
    "a40-x10-driver-550.127.05-thamada.txt": (10, [], "ten idle A40s, persistence On"),
    "b300-sxm6-x7-driver-610.57.04-kmd-umd-header.txt": (7, [], "seven B300s; whether an eighth is missing is not in the table"),
    "h100-80gb-hbm3-driver-590.48.01-idle.txt": (1, [], "idle, persistence On"),
    "h100-80gb-hbm3-driver-590.48.01-load.txt": (1, [("GPH033", 0)], "memhog and gpu_burn hold 19.3 GiB"),
    "h100-mig-driver-590.48.01-idle.txt": (1, [("GPH032", 0)], "MIG Enabled"),
    "h100-mig-driver-590.48.01-load.txt": (1, [("GPH032", 0), ("GPH033", 0)], "MIG Enabled; three processes hold memory"),
    "h100-nvl-x2-driver-550.54.14-thamada.txt": (2, [], "two idle H100 NVL, persistence On"),
    "h100-sxm-x8-driver-565.57.01-thamada.txt": (8, [], "eight idle H100 SXM"),
    "h200-driver-590.48.01-idle.txt": (1, [], "idle"),
    "h200-driver-590.48.01-load.txt": (1, [("GPH033", 0)], "gpu_burn and memhog hold memory"),
    "h200-mig-driver-590.48.01-idle.txt": (1, [("GPH032", 0)], "MIG Enabled"),
    "h200-mig-driver-590.48.01-load.txt": (1, [("GPH032", 0), ("GPH033", 0)], "MIG Enabled; processes hold memory"),
    "l4-driver-550.90.07-thamada.txt": (1, [], "idle L4; the table shows no link width"),
    "l40s-driver-550.127.05-thamada.txt": (1, [], "idle L40S, persistence On"),
    "l40s-driver-595.80-idle.txt": (1, [("GPH030", 0)], "L40S (data center) with persistence Off"),
    "l40s-driver-595.80-load.txt": (1, [("GPH030", 0), ("GPH033", 0)], "persistence Off; two ffmpeg hold 1.2 GiB"),
    "rtx2080super-driver-610.57.04-idle.txt": (1, [("GPH033", 0)], "GeForce: persistence Off is no finding; gnome-shell holds 173 MiB"),
    "rtx2080super-driver-610.57.04-load.txt": (1, [("GPH033", 0)], "gnome-shell, Xwayland and ffmpeg hold memory; no clocks in a table"),
    "rtx2080super-windows-driver-591.86-idle.txt": (1, [], "Windows (WDDM): no persistence; processes show no memory (N/A)"),
    "rtx2080super-windows-driver-591.86-load.txt": (1, [], "Windows: processes listed with N/A memory"),
    "rtx3090-driver-560.35.03-thamada.txt": (2, [], "two idle RTX 3090"),
    "rtx4080super-driver-595.71.05-idle.txt": (1, [("GPH033", 0)], "KDE processes hold memory"),
    "rtx4080super-driver-595.71.05-load.txt": (1, [("GPH033", 0)], "KDE and ffmpeg hold memory; P2 is no finding without clocks"),
    "rtx4090-driver-550.127.05-thamada.txt": (8, [], "eight idle RTX 4090"),
    "rtx6000ada-x8-driver-550.127.05-thamada.txt": (8, [], "eight idle RTX 6000 Ada"),
}


def test_every_real_table_has_an_expectation():
    assert folder("table") == sorted(TABLES)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_each_real_table_is_read_and_judged_as_a_reader_would(name):
    gpus, expected, why = TABLES[name]
    text = read("table", name)
    reading = parse_table(text)
    assert reading is not None and reading.kind == "nvidia-smi table"
    assert len(reading.gpus) == gpus
    assert found(reading) == expected, why
    assert read_capture(text) == reading  # the dispatcher recognises it alone
    lines = text.splitlines()
    for gpu in reading.gpus:  # each GPU's line is its first row, naming its bus id
        assert gpu.line is not None and bus_id(lines[gpu.line - 1].split("|")[2].split()[0]) == gpu.bus_id


def test_table_values_are_the_ones_printed():
    load = parse_table(read("table", "h100-80gb-hbm3-driver-590.48.01-load.txt"))
    assert load is not None and load.driver_version == "590.48.01" and not load.windows
    (gpu,) = load.gpus
    assert (gpu.index, gpu.name, gpu.bus_id, gpu.persistence) == (0, "NVIDIA H100 80GB HBM3", "00000000:00:09.0", True)
    assert (gpu.utilization_pct, gpu.memory_used_mib, gpu.memory_total_mib, gpu.compute_mode) == (100, 19818, 81559, ComputeMode.DEFAULT)
    assert (gpu.clocks.power_draw_w, gpu.clocks.power_limit_w, gpu.clocks.default_power_limit_w, gpu.clocks.temperature_c) == (
        629,
        700,
        None,
        59,
    )
    assert (gpu.memory.ecc_enabled, gpu.memory.uncorrected_volatile, gpu.mig_enabled) == (True, 0, False)
    assert [(p.pid, p.name, p.used_mib) for p in gpu.processes or ()] == [
        (11327, "/root/tools/memhog", 2566),
        (11328, "/root/tools/memhog", 1542),
        (11345, "./gpu_burn", 15690),
    ]
    b300 = parse_table(read("table", "b300-sxm6-x7-driver-610.57.04-kmd-umd-header.txt"))
    assert b300 is not None and b300.driver_version == "610.57.04"  # driver 610's "KMD Version"
    assert [g.bus_id for g in b300.gpus][3:5] == ["00000001:1a:00.0", "00000001:69:00.0"]
    assert all(g.processes == () for g in b300.gpus)  # "No running processes found"
    mig = parse_table(read("table", "a30-mig-3-instances-driver-535.183.01.txt"))
    assert mig is not None
    (a30,) = mig.gpus
    # MIG: the ECC cell says "On" (counts are per instance) and utilization N/A: shown as not shown
    assert (a30.memory.ecc_enabled, a30.memory.uncorrected_volatile, a30.utilization_pct, a30.mig_enabled) == (True, None, None, True)
    windows = parse_table(read("table", "rtx2080super-windows-driver-591.86-load.txt"))
    assert windows is not None and windows.windows
    (geforce,) = windows.gpus
    assert (geforce.name, geforce.persistence, geforce.clocks.power_draw_w) == ("NVIDIA GeForce RTX 2080 ...", None, 97)
    assert geforce.processes is not None and len(geforce.processes) == 12 and all(p.used_mib is None for p in geforce.processes)
    assert geforce.processes[0].name == "C:\\Windows\\System32\\dwm.exe"
    no_ecc = parse_table(read("table", "rtx4090-driver-550.127.05-thamada.txt"))
    assert no_ecc is not None and no_ecc.gpus[0].memory.ecc_enabled is False  # "Off"


OLD_TABLE = """\
Mon Mar 30 11:05:12 2015
+------------------------------------------------------+
| NVIDIA-SMI 346.46     Driver Version: 346.46         |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  Tesla K80           Off  | 0000:05:00.0     Off |                    2 |
| N/A   39C    P0    58W / 149W |   1055MiB / 11519MiB |     97%   E. Process |
+-------------------------------+----------------------+----------------------+
|   1  Tesla K80           Off  | 0000:06:00.0     Off |                    0 |
| N/A   31C    P8    N/A /  N/A |     55MiB / 11519MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID  Type  Process name                               Usage      |
|=============================================================================|
|    0     21312    C   python train.py                               1000MiB |
+-----------------------------------------------------------------------------+
"""


def test_a_346_era_table_without_mig_row_or_instance_columns():
    reading = parse_table(OLD_TABLE)
    assert reading is not None and reading.driver_version == "346.46"
    first, second = reading.gpus
    assert (first.bus_id, first.persistence, first.memory.uncorrected_volatile, first.compute_mode) == (
        "00000000:05:00.0",
        False,
        2,
        ComputeMode.EXCLUSIVE_PROCESS,
    )
    assert (first.clocks.power_draw_w, first.clocks.power_limit_w, first.mig_enabled) == (58, 149, None)
    assert (second.clocks.power_draw_w, second.clocks.power_limit_w) == (None, None)  # "N/A /  N/A"
    assert [(p.pid, p.name, p.used_mib) for p in first.processes or ()] == [(21312, "python train.py", 1000)]
    assert second.processes == ()
    assert found(reading) == [("GPH020", 0), ("GPH030", 0), ("GPH031", 0), ("GPH033", 0), ("GPH030", 1)]


# ------------------------------------------------------------------ --query-gpu / --query-compute-apps CSV

CSVS: dict[str, tuple[str, int, list[tuple[str, int | None]], str]] = {
    "a100-x8-driver-570.133.20-name-memtotal-driver-noheader.csv": (QUERY_GPU, 8, [], "names only: nothing to judge"),
    "b300-x7-driver-610.57.04-driver_version-name-compute_cap.csv": (QUERY_GPU, 7, [], "driver, name, compute capability"),
    "h100-80gb-hbm3-driver-590.48.01-query-compute-apps-load.csv": (COMPUTE_APPS, 1, [("GPH033", 0)], "memhog and gpu_burn"),
    "h100-80gb-hbm3-driver-590.48.01-query-gpu-all-fields-idle.csv": (QUERY_GPU, 1, [], "Gen5 x16, persistence Enabled, no events"),
    "h100-mig-driver-590.48.01-query-compute-apps-load.csv": (COMPUTE_APPS, 1, [("GPH033", 0)], "processes in MIG instances"),
    "h100-mig-driver-590.48.01-query-gpu-all-fields-idle.csv": (QUERY_GPU, 1, [("GPH032", 0)], "mig.mode.current Enabled"),
    "h200-driver-590.48.01-query-compute-apps-load.csv": (COMPUTE_APPS, 1, [("GPH033", 0)], "gpu_burn holds 27.6 GiB"),
    "h200-driver-590.48.01-query-gpu-all-fields-idle.csv": (QUERY_GPU, 1, [], "idle, healthy"),
    "h200-mig-driver-590.48.01-query-compute-apps-load.csv": (COMPUTE_APPS, 1, [("GPH033", 0)], "processes in MIG instances"),
    "h200-mig-driver-590.48.01-query-gpu-all-fields-idle.csv": (QUERY_GPU, 1, [("GPH032", 0)], "MIG Enabled"),
    "l40s-driver-595.80-query-compute-apps-load.csv": (COMPUTE_APPS, 1, [("GPH033", 0)], "two ffmpeg"),
    "l40s-driver-595.80-query-gpu-all-fields-idle.csv": (QUERY_GPU, 1, [("GPH030", 0)], "L40S persistence Disabled; 100 % at Gen4 of 4"),
    "rtx2080super-driver-610.57.04-query-compute-apps-load.csv": (COMPUTE_APPS, 1, [("GPH033", 0)], "two ffmpeg"),
    "rtx2080super-driver-610.57.04-query-gpu-all-fields-idle.csv": (QUERY_GPU, 1, [], "Gen1 of 3 at 0 % and P8: power saving"),
    "rtx2080super-windows-driver-591.86-query-compute-apps-load.csv": (COMPUTE_APPS, 1, [], "used memory [N/A] on Windows"),
    "rtx2080super-windows-driver-591.86-query-gpu-all-fields-idle.csv": (QUERY_GPU, 1, [], "WDDM: no persistence mode"),
    "rtx4080super-driver-595.71.05-query-compute-apps-load.csv": (COMPUTE_APPS, 1, [("GPH033", 0)], "kwin and ffmpeg"),
    "rtx4080super-driver-595.71.05-query-gpu-all-fields-idle.csv": (QUERY_GPU, 1, [], "Gen1 of 4 at 0 %: power saving"),
}


def test_every_real_csv_has_an_expectation():
    assert folder("csv") == sorted(CSVS)


@pytest.mark.parametrize("name", sorted(CSVS))
def test_each_real_csv_is_read_and_judged_as_a_reader_would(name):
    kind, gpus, expected, why = CSVS[name]
    text = read("csv", name)
    reading = parse_query_csv(text)
    assert reading is not None and reading.kind == kind
    assert len(reading.gpus) == gpus
    assert found(reading) == expected, why
    assert judge(reading).unjudged == []
    assert read_capture(text) == reading


def test_all_fields_csv_values():
    reading = parse_query_csv(read("csv", "h100-80gb-hbm3-driver-590.48.01-query-gpu-all-fields-idle.csv"))
    assert reading is not None and reading.driver_version == "590.48.01"
    (gpu,) = reading.gpus
    assert (gpu.index, gpu.bus_id, gpu.uuid, gpu.line) == (0, "00000000:00:09.0", "GPU-00000000-0000-0000-0000-000000000000", 2)
    link = gpu.pcie
    assert (link.gen_current, link.gen_max, link.width_current, link.width_max, link.slot_gen_max, link.replays) == (
        5,
        5,
        16,
        16,
        None,
        None,
    )
    clocks = gpu.clocks
    assert clocks.events == frozenset({ClockEvent.IDLE})
    assert (clocks.memory_mhz, clocks.max_memory_mhz, clocks.graphics_mhz, clocks.max_graphics_mhz) == (2619, 2619, 345, 1980)
    assert (clocks.power_limit_w, clocks.default_power_limit_w, clocks.power_draw_w, clocks.temperature_c) == (700, 700, 69.85, 41)
    assert clocks.applications_graphics_mhz is None  # "[Requested functionality has been deprecated]"
    faults = gpu.memory
    assert (faults.ecc_enabled, faults.uncorrected_volatile, faults.uncorrected_aggregate, faults.remap_pending) == (True, 0, 0, False)
    assert faults.retired_pages_pending is None  # [N/A] on Hopper
    assert (gpu.fabric_state, gpu.fabric_status, gpu.persistence, gpu.mig_enabled) == ("Completed", "Success", True, False)
    geforce = parse_query_csv(read("csv", "rtx2080super-driver-610.57.04-query-gpu-all-fields-idle.csv"))
    assert geforce is not None
    link = geforce.gpus[0].pcie
    assert (link.gen_current, link.gen_max, link.slot_gen_max) == (1, 3, 4)  # gpumax 3, hostmax 4
    windows = parse_query_csv(read("csv", "rtx2080super-windows-driver-591.86-query-gpu-all-fields-idle.csv"))
    assert windows is not None and windows.windows and windows.gpus[0].persistence is None


def test_compute_apps_csv_values_and_a_headerless_csv_read_only_where_columns_tell():
    apps = parse_query_csv(read("csv", "rtx4080super-driver-595.71.05-query-compute-apps-load.csv"))
    assert apps is not None
    (gpu,) = apps.gpus
    assert (gpu.name, gpu.bus_id, gpu.line) == ("NVIDIA GeForce RTX 4080 SUPER", "00000000:01:00.0", 2)
    assert [(p.pid, p.name, p.used_mib) for p in gpu.processes or ()] == [
        (2165, "/usr/bin/kwin_wayland", 25),
        (5022, "ffmpeg", 503),
        (5021, "ffmpeg", 360),
    ]
    assert gpu.utilization_pct is None and gpu.persistence is None
    names = parse_query_csv(read("csv", "a100-x8-driver-570.133.20-name-memtotal-driver-noheader.csv"))
    assert names is not None and names.driver_version == "570.133.20"
    assert {g.name for g in names.gpus} == {"NVIDIA A100-SXM4-80GB"} and [g.index for g in names.gpus] == list(range(8))
    assert all(g.memory_total_mib is None for g in names.gpus)  # "81920 MiB" could be total, used or free: not read


@pytest.mark.parametrize(
    "text",
    [
        "0, 100 %, 45\n1, 0 %, 40\n",  # numbers only: nothing says which column is what
        "11327, /root/tools/memhog, 2566 MiB\n",  # noheader compute apps
        'Field "clocks.foo" is not a valid field to query.\n',
        "timestamp, gpu_bus_id, pid, gpu_utilization [%], max_memory_usage [MiB]\n",  # accounted apps: not read
        "",
    ],
)
def test_a_csv_whose_columns_cannot_be_told_is_not_read(text):
    assert parse_query_csv(text) is None


def test_query_names_aliases_units_and_crlf():
    text = (
        "index, name, clocks.mem, clocks.max.mem, utilization.gpu, pcie.link.gen.current, pcie.link.gen.max, "
        'clocks_throttle_reasons.hw_slowdown, clocks_throttle_reasons.sw_thermal_slowdown\r\n0, "NVIDIA GeForce RTX 4090, rev b", '
        "5001, 10501, 100, 4, 4, Active, Not Active\r\n"
    )
    reading = parse_query_csv(text)  # nounits; a name with a comma, quoted; old throttle names
    assert reading is not None
    (gpu,) = reading.gpus
    assert gpu.name == "NVIDIA GeForce RTX 4090, rev b"
    assert (gpu.clocks.memory_mhz, gpu.clocks.max_memory_mhz, gpu.clocks.events) == (5001, 10501, frozenset({ClockEvent.HW_SLOWDOWN}))
    assert found(reading) == [("GPH010", 0), ("GPH013", 0)]


def csv_gpu(**fields: str) -> str:
    header = ["index", "name", *fields]
    return ", ".join(header) + "\n" + ", ".join(["0", "NVIDIA H100 80GB HBM3", *fields.values()]) + "\n"


@pytest.mark.parametrize(
    ("fields", "expected", "why"),
    [
        (
            {
                "utilization.gpu [%]": "0 %",
                "pcie.link.gen.current": "1",
                "pcie.link.gen.max": "5",
                "pcie.link.width.current": "16",
                "pcie.link.width.max": "16",
            },
            [],
            "an idle Gen1 link at 0 % is power saving",
        ),
        (
            {"utilization.gpu [%]": "100 %", "pcie.link.gen.current": "3", "pcie.link.gen.max": "5", "pcie.link.gen.hostmax": "5"},
            [("GPH002", 0)],
            "Gen3 of Gen5 (host Gen5 too) while busy",
        ),
        (
            {"utilization.gpu [%]": "100 %", "pcie.link.gen.current": "4", "pcie.link.gen.gpumax": "5", "pcie.link.gen.hostmax": "4"},
            [],
            "Gen4 where the host does Gen4 only",
        ),
        (
            {"utilization.gpu [%]": "100 %", "pcie.link.width.current": "8", "pcie.link.width.max": "8"},
            [],
            "a board whose own max is x8",
        ),
        (
            {"clocks_event_reasons.active": "0x0000000000000048", "temperature.gpu": "91"},
            [("GPH010", 0)],
            "HW slowdown + HW thermal from the mask",
        ),
        ({"enforced.power.limit [W]": "400.00 W", "power.default_limit [W]": "700.00 W"}, [("GPH012", 0)], "power limit lowered"),
        (
            {"clocks.applications.graphics [MHz]": "1005 MHz", "clocks.default_applications.graphics [MHz]": "1410 MHz"},
            [("GPH014", 0)],
            "locked",
        ),
        (
            {"ecc.errors.uncorrected.volatile.total": "3", "ecc.errors.uncorrected.aggregate.total": "3"},
            [("GPH020", 0)],
            "uncorrectable since load",
        ),
        ({"retired_pages.pending": "Yes", "retired_pages.dbe": "2"}, [("GPH022", 0)], "pages pending"),
        ({"remapped_rows.pending": "Yes", "remapped_rows.failure": "Yes"}, [("GPH023", 0), ("GPH024", 0)], "remap pending and failed"),
        ({"persistence_mode": "Disabled", "compute_mode": "Exclusive_Process"}, [("GPH030", 0), ("GPH031", 0)], "settings"),
        ({"mig.mode.current": "Disabled", "mig.mode.pending": "Enabled"}, [("GPH032", 0)], "MIG pending a reset"),
        ({"fabric.state": "In Progress", "fabric.status": "N/A"}, [("GPH041", 0)], "fabric not ready"),
        ({"persistence_mode": "[N/A]", "ecc.errors.uncorrected.volatile.total": "[N/A]"}, [], "N/A is never a fault"),
    ],
)
def test_synthetic_csv_conditions(fields, expected, why):
    reading = parse_query_csv(csv_gpu(**fields))
    assert reading is not None
    assert found(reading) == expected, why


def test_a_busy_geforce_at_p2_is_no_memory_clock_finding_unless_well_below_max():
    header = "index, name, pstate, utilization.gpu [%], clocks.current.memory [MHz], clocks.max.memory [MHz]\n"
    at_p2 = parse_query_csv(header + "0, NVIDIA GeForce RTX 4090, P2, 100 %, 10251 MHz, 10501 MHz\n")
    held = parse_query_csv(header + "0, NVIDIA GeForce RTX 4090, P2, 100 %, 5001 MHz, 10501 MHz\n")
    assert at_p2 is not None and held is not None
    assert found(at_p2) == []  # 97.6 % of max: CUDA at P2 on GeForce
    assert found(held) == [("GPH013", 0)]


# ------------------------------------------------------------------ topo -m and nvlink -s

TOPOS: dict[str, tuple[int, dict[tuple[int, int], str] | None]] = {
    "b300-x7-nvlink-nv18-driver-610.57.04.txt": (7, {(a, b): "NV18" for a in range(7) for b in range(a + 1, 7)}),
    "h100-80gb-hbm3-driver-590.48.01.txt": (1, {}),
    "h100-mig-driver-590.48.01.txt": (1, {}),
    "h200-driver-590.48.01.txt": (1, {}),
    "h200-mig-driver-590.48.01.txt": (1, {}),
    "l40s-driver-595.80.txt": (1, {}),
    "nccl-1617-h100-x4-nv6-nics.partial.txt": (4, {(a, b): "NV6" for a in range(4) for b in range(a + 1, 4)}),
    "rtx2080super-driver-610.57.04.txt": (1, {}),
    "rtx2080super-windows-driver-591.86.txt": (0, None),  # "ERROR: Option -m is missing its value": not a matrix
    "rtx4080super-driver-595.71.05.txt": (1, {}),
}


def test_every_real_topology_has_an_expectation():
    assert folder("topo") == sorted(TOPOS)


@pytest.mark.parametrize("name", sorted(TOPOS))
def test_each_real_topology_is_read_with_no_finding(name):
    gpus, links = TOPOS[name]
    text = read("topo", name)
    reading = parse_topo(text)
    if links is None:
        assert reading is None and read_capture(text) is None
        return
    assert reading is not None and reading.topology is not None
    assert len(reading.gpus) == gpus and reading.topology.links == links
    assert found(reading) == []  # a topology alone shows no fault
    assert read_capture(text) == reading


def test_old_topology_names_nics_by_device_and_says_soc():
    text = "\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\nGPU0\t X \tSOC\tPHB\t0-11\nGPU1\tSOC\t X \tSOC\t12-23\nmlx5_0\tPHB\tSOC\t X \t\n"
    reading = parse_topo(text)
    assert reading is not None and reading.topology is not None
    assert reading.topology.links == {(0, 1): "SOC"} and [g.index for g in reading.gpus] == [0, 1]
    assert not reading.topology.nvlinked(0)


NVLINKS: dict[str, tuple[int, list[tuple[str, int | None]], str]] = {
    "azhpc-diagnostics-73-v100-sxm2-gpu3-links-3-5-inactive.txt": (1, [("GPH040", 3)], "links 3 and 5 down beside four up"),
    "gpud-1085-b200-gpu2-all-links-inactive.txt": (1, [("GPH040", 2)], "a B200 (an SXM module: every link wired) with none up"),
    "hgx-h100-x8-all-active.synthetic.txt": (8, [], "all 18 links up on every GPU"),
    "hgx-h100-x8-gpu5-links-2-7-inactive.synthetic.txt": (8, [("GPH040", 5)], "GPU 5's links 2 and 7 down"),
    "k8s-test-infra-371-gb200-all-active.partial.txt": (2, [], "all shown links up (cut short by the poster)"),
}


def test_every_nvlink_capture_has_an_expectation():
    assert folder("nvlink") == sorted(NVLINKS)


@pytest.mark.parametrize("name", sorted(NVLINKS))
def test_each_nvlink_capture_is_read_and_judged(name):
    gpus, expected, why = NVLINKS[name]
    text = read("nvlink", name)
    reading = parse_nvlink_status(text)
    assert reading is not None and len(reading.gpus) == gpus
    assert found(reading) == expected, why
    assert read_capture(text) == reading


def test_nvlink_values():
    v100 = parse_nvlink_status(read("nvlink", "azhpc-diagnostics-73-v100-sxm2-gpu3-links-3-5-inactive.txt"))
    assert v100 is not None
    (gpu,) = v100.gpus
    assert (gpu.index, gpu.name, gpu.uuid, gpu.line) == (3, "Tesla V100-SXM2-32GB", None, 3)  # "(UUID: ...)" is no UUID
    assert [(link.link, link.active, link.speed_gbps) for link in gpu.nvlinks or ()] == [
        (0, True, 25.781),
        (1, True, 25.781),
        (2, True, 25.781),
        (3, False, None),
        (4, True, 25.781),
        (5, False, None),
    ]
    gb200 = parse_nvlink_status(read("nvlink", "k8s-test-infra-371-gb200-all-active.partial.txt"))
    assert gb200 is not None and gb200.gpus[0].uuid == "GPU-d1b93026-6d5b-03bd-3a71-f85b47a61bde"
    assert [len(g.nvlinks or ()) for g in gb200.gpus] == [18, 2]
    b200 = parse_nvlink_status(read("nvlink", "gpud-1085-b200-gpu2-all-links-inactive.txt"))
    assert b200 is not None
    assert b200.gpus[0].nvlinks is None and "all links are inActive" in b200.notes[0]
    assert parse_nvlink_status("GPU 0: NVIDIA H100 (UUID: GPU-1)\n\tLink 0: Remote Device 00000000:D5:00.0: Link 0\n") is None  # -R


def test_a_gpu_whose_links_are_all_inactive_is_a_finding():
    reading = read_capture(read("nvlink", "gpud-1085-b200-gpu2-all-links-inactive.txt"))
    assert reading is not None and found(reading) == [("GPH040", 2)]


def test_an_inactive_link_where_the_topology_says_nv_is_a_finding_when_merged():
    topo = "        GPU0    GPU1    CPU Affinity\nGPU0     X      NV4     0-15\nGPU1    NV4      X      0-15\n"
    status = (
        "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-a)\n\t Link 0: 25 GB/s\n\t Link 1: <inactive>\n\t Link 2: 25 GB/s\n\t Link 3: 25 GB/s\n"
    )
    status += "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-b)\n" + "".join(f"\t Link {n}: 25 GB/s\n" for n in range(4))
    reading = read_capture(topo + "\n" + status)
    assert reading is not None and reading.kind == "nvidia-smi topo -m + nvidia-smi nvlink -s"
    assert reading.topology is not None and reading.topology.links == {(0, 1): "NV4"}
    assert found(reading) == [("GPH040", 0)]
    pcie_only = read_capture(topo.replace("NV4", "SYS") + "\n" + status.replace("25 GB/s", "<inactive>"))
    assert pcie_only is not None and found(pcie_only) == []  # no NVLink expected: inactive links are no finding


# ------------------------------------------------------------------ lspci -vv

LSPCI: dict[str, tuple[int, int | None, list[tuple[str, int | None]], str]] = {
    "club-3090-1028-rtx3090-gpu-and-upstream-bridge.txt": (1, None, [], "x16 of x16; 2.5 GT/s with nothing saying busy: not judged"),
    "gpu-x8-downgraded-slot-not-shown.synthetic.txt": (1, None, [("GPH001", 0)], "x8 of the GPU's x16, slot unknown: said so"),
    "h100-pcie-x2-gpu1-x8-downgraded-under-x16-port.synthetic.txt": (2, None, [("GPH001", 1)], "x8 under a x16 port"),
    "hgx-h100-nvswitch-x3-lspci-nn-vv-nonroot.partial.txt": (0, 3, [], "three NVSwitches; the fabric manager's state is not in lspci"),
    "hgx-h100-x8-lspci-d10de-4-nvswitches.txt": (8, 4, [], "eight H100 and four NVSwitches, no link lines"),
    "l4-board-x8-by-design-in-x16-port.synthetic.txt": (1, None, [], "the board's own LnkCap is x8"),
    "nforce-mcp61-ethernet-bridge-not-nvswitch.synthetic.txt": (1, None, [], "an MCP Ethernet bridge is no NVSwitch"),
    "rtx4090-x16-in-x4-slot.synthetic.txt": (1, None, [], "x4 is all the slot does"),
}


def test_every_lspci_capture_has_an_expectation():
    assert folder("lspci") == sorted(LSPCI)


@pytest.mark.parametrize("name", sorted(LSPCI))
def test_each_lspci_capture_is_read_and_judged(name):
    gpus, switches, expected, why = LSPCI[name]
    text = read("lspci", name)
    reading = parse_lspci(text)
    assert reading is not None and reading.kind == "lspci -vv"
    assert len(reading.gpus) == gpus and reading.nvswitches == switches
    assert reading.pci_gpus == tuple(g.bus_id for g in reading.gpus)
    assert found(reading) == expected, why
    assert read_capture(text) == reading


def test_lspci_link_values_and_the_port_above():
    reading = parse_lspci(read("lspci", "h100-pcie-x2-gpu1-x8-downgraded-under-x16-port.synthetic.txt"))
    assert reading is not None
    healthy, narrow = reading.gpus
    assert (healthy.bus_id, healthy.name) == ("00000000:17:00.0", "GH100 [H100 PCIe]")
    link = narrow.pcie
    assert (link.gen_current, link.gen_max, link.width_current, link.width_max, link.slot_gen_max, link.slot_width_max) == (
        5,
        5,
        8,
        16,
        5,
        16,
    )
    slot = parse_lspci(read("lspci", "rtx4090-x16-in-x4-slot.synthetic.txt"))
    assert slot is not None
    assert (slot.gpus[0].pcie.width_current, slot.gpus[0].pcie.slot_width_max, slot.gpus[0].pcie.gen_current) == (4, 4, 3)
    named = parse_lspci(read("lspci", "club-3090-1028-rtx3090-gpu-and-upstream-bridge.txt"))
    assert named is not None
    assert (named.gpus[0].pcie.gen_current, named.gpus[0].pcie.gen_max, named.gpus[0].pcie.slot_width_max) == (1, 4, 16)
    (unjudged,) = judge(named).unjudged
    assert "Gen1 of Gen4" in unjudged.why
    nonroot = parse_lspci(read("lspci", "hgx-h100-nvswitch-x3-lspci-nn-vv-nonroot.partial.txt"))
    assert nonroot is not None and nonroot.gpus == () and nonroot.pci_gpus == ()


@pytest.mark.parametrize(("speed", "generation"), [("2.5", 1), ("5", 2), ("8", 3), ("16", 4), ("32", 5), ("64", 6)])
def test_lspci_speeds_are_generations(speed, generation):
    text = f"01:00.0 3D controller: NVIDIA Corporation Device 2901\n\t\tLnkCap:\tPort #0, Speed {speed}GT/s, Width x16\n"
    reading = parse_lspci(text + f"\t\tLnkSta:\tSpeed {speed}GT/s, Width x16\n")
    assert reading is not None and reading.gpus[0].pcie.gen_max == generation == reading.gpus[0].pcie.gen_current


# ------------------------------------------------------------------ several captures in one paste


def test_a_ticket_with_the_table_topo_and_nvlink_is_read_as_one_host():
    text = read("mixed", "h100-pcie-x2-nvlink-bridge-driver-555.42.02-table-topo-nvlink.txt")
    assert [kind for kind, _, _ in segments(bounded_lines(text))] == ["table", "topo", "nvlink"]
    reading = read_capture(text)
    assert reading is not None
    assert reading.kind == "nvidia-smi table + nvidia-smi topo -m + nvidia-smi nvlink -s"
    assert reading.driver_version == "555.42.02" and reading.topology is not None and reading.topology.links == {(0, 1): "NV12"}
    assert [(g.index, g.bus_id, g.uuid, g.line) for g in reading.gpus] == [
        (0, "00000000:c2:00.0", "GPU-6968dfc2-d444-d92c-c36b-6abe53445cb9", 10),
        (1, "00000000:d5:00.0", "GPU-9b1446e2-8a89-4cf6-b68c-a98d99e958d3", 14),
    ]
    for gpu in reading.gpus:  # the -R lines before -s are not status
        assert [link.link for link in gpu.nvlinks or () if not link.active] == [4, 5, 10, 11, 16, 17]
        assert sum(1 for link in gpu.nvlinks or () if link.active) == 12
    assert ("GPH030", 0) in found(reading) and ("GPH030", 1) in found(reading)  # H100 PCIe, persistence Off


def test_bridged_h100_pcie_with_twelve_of_eighteen_links_is_as_designed():
    reading = read_capture(read("mixed", "h100-pcie-x2-nvlink-bridge-driver-555.42.02-table-topo-nvlink.txt"))
    assert reading is not None and found(reading) == [("GPH030", 0), ("GPH030", 1)]


def test_a_gpu_lspci_sees_and_the_driver_does_not_is_gph042():
    table = read("table", "a100-sxm4-x4-driver-555.42.02-thamada.txt")
    bus = "\n".join(
        f"{address}:00.0 3D controller: NVIDIA Corporation GA100 [A100 SXM4 80GB] (rev a1)" for address in ("68", "9e", "c2", "d4", "e6")
    )
    reading = read_capture(table + "\n$ lspci | grep -i nvidia\n" + bus + "\n")
    assert reading is not None and reading.kind == "nvidia-smi table + lspci -vv"
    assert len(reading.gpus) == 4 and reading.pci_gpus is not None and len(reading.pci_gpus) == 5
    assert reading.gpus[0].name == "NVIDIA A100-SXM4-80GB"  # the driver's view first; lspci fills only gaps
    (verdict,) = judge(reading).verdicts
    assert verdict.code.code == "GPH042" and verdict.evidence["missing"] == ["00000000:e6:00.0"]


def test_the_table_with_lspci_links_gives_the_link_finding_on_the_driver_gpu():
    table = OLD_TABLE.replace("0000:06:00.0", "0000:65:00.0")
    lspci = read("lspci", "h100-pcie-x2-gpu1-x8-downgraded-under-x16-port.synthetic.txt")
    reading = read_capture(table + "\n" + lspci)
    assert reading is not None
    assert reading.gpus[1].name == "Tesla K80" and reading.gpus[1].pcie.width_current == 8  # matched by bus id
    assert ("GPH001", 1) in found(reading)


def test_query_gpu_then_compute_apps_csv_attach_processes_by_bus_id():
    gpus = "index, name, pci.bus_id, utilization.gpu [%]\n0, NVIDIA L40S, 00000000:01:00.0, 90 %\n1, NVIDIA L40S, 00000000:41:00.0, 0 %\n"
    apps = "pid, process_name, used_gpu_memory [MiB], gpu_bus_id\n4121, python3, 22528 MiB, 00000000:41:00.0\n"
    reading = read_capture(gpus + "\n" + apps)
    assert reading is not None and reading.kind == "nvidia-smi --query-gpu CSV + nvidia-smi --query-compute-apps CSV"
    first, second = reading.gpus
    assert first.processes == ()  # not in the compute-apps list: none
    assert [(p.pid, p.used_mib) for p in second.processes or ()] == [(4121, 22528)]
    assert found(reading) == [("GPH033", 1)]
    empty = read_capture(gpus + "pid, process_name, used_gpu_memory [MiB], gpu_bus_id\n")
    assert empty is not None and all(g.processes == () for g in empty.gpus)


def test_a_q_capture_goes_to_the_q_parsers_and_the_table_before_it(monkeypatch):
    calls: list[tuple[str, str]] = []

    def fake(name: str):
        def parse(text: str) -> HostReading:
            calls.append((name, text.splitlines()[0]))
            return HostReading("nvidia-smi -q", gpus=())

        return parse

    monkeypatch.setattr(captures, "_q_parser", fake)
    q_text = "\n==============NVSMI LOG==============\n\nTimestamp : Mon\nDriver Version : 555.42.02\n"
    table = read("table", "h100-nvl-x2-driver-550.54.14-thamada.txt")
    reading = read_capture(table + q_text)
    assert calls == [("parse_q_text", "==============NVSMI LOG==============")]
    assert reading is not None and reading.kind == "nvidia-smi table + nvidia-smi -q" and len(reading.gpus) == 2
    calls.clear()
    assert read_capture('<?xml version="1.0" ?>\n<nvidia_smi_log>\n</nvidia_smi_log>\n') is not None
    assert calls == [("parse_q_xml", '<?xml version="1.0" ?>')]


def test_without_the_q_module_a_q_capture_is_not_read(monkeypatch):
    monkeypatch.setattr(captures, "_q_parser", lambda name: None)
    assert read_capture("==============NVSMI LOG==============\nDriver Version : 555.42.02\n") is None


def test_analyze_cites_the_paste_and_the_line():
    text = read("table", "l40s-driver-595.80-load.txt")
    analysis = GpuHealthCheck.analyze(text, "ticket.txt")
    assert analysis is not None and analysis.kind == "nvidia-smi table"
    assert [f.code for f in analysis.findings] == ["GPH030", "GPH033"]
    assert all(f.evidence["line"] == 9 and f.evidence["source"] == "ticket.txt" for f in analysis.findings)
    assert GpuHealthCheck.analyze("just some words\n", "x.txt") is None


# ------------------------------------------------------------------ hostile input


@pytest.mark.parametrize(
    "text",
    [
        "a" * (MAX_TEXT_CHARS + 1),  # over the limit: refused, not cut
        "a" * (MAX_TEXT_CHARS - 1),  # one 16 MiB line
        os.urandom(1 << 16).decode("latin-1"),  # binary (NULs)
        os.urandom(1 << 16).decode("latin-1").replace("\x00", "x"),  # binary without NULs
        "(" * 100_000 + ")" * 100_000,
        "0000:00:00.0 " + "a:" * 50_000,
        '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;</x>',
        "| NVIDIA-SMI 1 Driver Version: 1 |\n" * 20_000,
        "GPU 0: X (UUID: GPU-1)\n\tLink 99999999: 1e999 GB/s\n\tLink 0: 9999.9999 GB/s\n",
        "\ufeff\u202e\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace") * 1000,
        OLD_TABLE.replace("|                    2 |", "|   " + "9" * 5000 + " |").replace("|    0     21312", "|    \u00b2     21312"),
        "| MIG devices: |\n|====|\n|  " + "7" * 5000 + "    3   0   0  |\n|  \u00b3    3   0   0  |\n",
    ],
)
def test_hostile_texts_never_raise_and_give_nothing_or_a_bounded_reading(text):
    reading = read_capture(text)
    assert reading is None or len(reading.gpus) <= MAX_GPUS
    for parse in (parse_query_csv, parse_table, parse_nvlink_status, parse_topo, parse_lspci):
        result = parse(text[: 1 << 20])
        assert result is None or len(result.gpus) <= MAX_GPUS


def test_many_gpus_are_bounded():
    rows = "".join(f"{n % 1000}, NVIDIA H100, {n // 256:08x}:{n % 256:02x}:00.0\n" for n in range(20_000))
    reading = read_capture("index, name, pci.bus_id\n" + rows)
    assert reading is not None and len(reading.gpus) == MAX_GPUS
    status = "".join(f"GPU {n}: NVIDIA H100 (UUID: GPU-{n})\n\tLink 0: <inactive>\n" for n in range(5_000))
    links = parse_nvlink_status(status)
    assert links is not None and len(links.gpus) == MAX_GPUS
    header = "GPU0 " + " ".join(f"GPU{n}" for n in range(1, 2000)) + " CPU Affinity\n"
    matrix = parse_topo(header + "".join(f"GPU{n} " + " ".join(["NV18"] * 2000) + "\n" for n in range(300)))
    assert matrix is not None and matrix.topology is not None and len(matrix.topology.links) <= 256 * 256
    lspci = parse_lspci("01:00.0 3D controller: NVIDIA Corporation X\n" * 5000)
    assert lspci is not None and len(lspci.gpus) == MAX_GPUS


def test_a_line_past_the_line_limit_is_cut_and_not_read():
    header = "GPU 0: NVIDIA H100 (UUID: GPU-" + "a" * 200_000 + ")"
    assert parse_nvlink_status(header + "\n\tLink 0: <inactive>\n") is None  # the cut header is no GPU line
    reading = parse_table(OLD_TABLE.replace("Tesla K80           Off  | 0000:05", "Tesla K80" + " " * 100_000 + "Off  | 0000:05"))
    assert reading is not None and [g.index for g in reading.gpus] == [1]  # GPU 0's row lost its cells at the cut


def test_a_mig_devices_table_pasted_alone_shows_its_gpus_with_mig_enabled():
    table = read("table", "h100-mig-driver-590.48.01-load.txt").splitlines()
    start = next(n for n, line in enumerate(table) if "MIG devices:" in line) - 1
    end = next(n for n, line in enumerate(table) if "Processes:" in line) - 2
    reading = read_capture("\n".join(table[start:end]) + "\n")
    assert reading is not None and reading.kind == "nvidia-smi table"
    assert [(g.index, g.mig_enabled, g.line) for g in reading.gpus] == [(0, True, 8)]
    assert found(reading) == [("GPH032", 0)]


def test_the_table_and_the_real_q_text_of_one_host_merge_into_one_gpu():
    pytest.importorskip("decode_doctor.checks.gpuhealth.smiquery")
    q_text = FIXTURES / "q-text" / "h100-80gb-hbm3-driver-590.48.01-idle.txt"
    if not q_text.is_file():
        pytest.skip("the -q fixtures are another test's")
    table = read("table", "h100-80gb-hbm3-driver-590.48.01-load.txt")
    reading = read_capture(table + "\n" + q_text.read_text(encoding="utf-8"))
    assert reading is not None and reading.kind == "nvidia-smi table + nvidia-smi -q"
    (gpu,) = reading.gpus
    assert gpu.utilization_pct == 100 and gpu.line == 9  # the table's, pasted first
    assert gpu.pcie.width_max == 16 and gpu.fabric_state is not None  # only -q shows these


def test_an_lspci_vpd_product_name_is_not_a_q_fragment():
    block = read("lspci", "gpu-x8-downgraded-slot-not-shown.synthetic.txt")
    vpd = "\tCapabilities: [48] Vital Product Data\n\t\tProduct Name: NVIDIA A100 PCIe 80GB\n\t\tRead-only fields:\n"
    text = block + vpd
    assert [kind for kind, _, _ in segments(bounded_lines(text))] == ["lspci"]
    reading = read_capture(text)
    assert reading is not None and reading.kind == "lspci -vv" and found(reading) == [("GPH001", 0)]
    fragment = "GPU 00000000:17:00.0\n    Product Name                          : NVIDIA A100-SXM4-80GB\n"
    assert [kind for kind, _, _ in segments(bounded_lines(fragment))] == ["nvidia-smi -q"]
