"""The GPU health check live: NVML through the test double of libnvidia-ml.so.1 (under the real
nvidia-ml-py, in a decode-doctor process of its own), sysfs from fixture host trees. Each condition the
double can show is reported on its GPU alone, a healthy GPU gives nothing, and another host's files
never load NVML."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import FIXTURES, run_dd
from .support.nvml import build_double

X8 = FIXTURES / "hosts/gpu-health-x8"
H200 = "NVIDIA H200|143771|{bus}|GPU-{index}|{util}"


@pytest.fixture(scope="module")
def nvml(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The double built twice: as a current driver's library, and as one before 535 (-DOLD_DRIVER)."""
    return {
        "current": build_double(tmp_path_factory.mktemp("nvml-current")),
        "old": build_double(tmp_path_factory.mktemp("nvml-old"), "-DOLD_DRIVER"),
    }


def gpus(*utilization: int, buses: tuple[str, ...] | None = None) -> str:
    buses = buses or tuple(f"00000000:{0x10 + i:02X}:00.0" for i in range(len(utilization)))
    return ";".join(H200.format(bus=bus, index=i, util=util) for i, (bus, util) in enumerate(zip(buses, utilization, strict=True)))


def check(
    tmp_path: Path,
    library: Path,
    root: Path,
    *,
    gpu_spec: str,
    health: str = "",
    same_host: bool = True,
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    """`check --select gpu-health` on root as a node agent runs it (--same-host), NVML the double's."""
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "LD_LIBRARY_PATH": str(library),
        "DD_NVML_GPUS": gpu_spec,
        "DD_NVML_HEALTH": health,
        "DD_NVML_TRACE": str(tmp_path / "nvml-trace"),
        "NVIDIA_VISIBLE_DEVICES": "all",
        **(extra or {}),
    }
    args = ["check", "--root", str(root), *(["--same-host"] if same_host else []), "--select", "gpu-health", "--format", "json"]
    proc = run_dd(*args, env=env)
    assert proc.stdout.lstrip().startswith("{"), proc.stderr[-2000:]
    return json.loads(proc.stdout)


def by_gpu(report: dict[str, Any]) -> dict[int | None, list[str]]:
    found: dict[int | None, list[str]] = {}
    for finding in report["findings"]:
        found.setdefault(finding["evidence"].get("gpu"), []).append(finding["code"])
    return found


def result(report: dict[str, Any]) -> dict[str, Any]:
    (only,) = [r for r in report["results"] if r["check"] == "gpu-health"]
    return only


def nvml_loaded(tmp_path: Path) -> bool:
    return (tmp_path / "nvml-trace").exists()


# one GPU per condition, each on its own: (utilization %, the double's health record, the code it must give)
CONDITIONS = {
    "healthy, busy": (100, "", None),
    "healthy, idle": (0, "", None),
    "x8 of x16": (100, "width=8", "GPH001"),
    "Gen3 of Gen5 at 100 %": (100, "gen=3", "GPH002"),
    "PCIe replays": (100, "replays=5000", "GPH003"),
    "HW slowdown bit": (100, "events=0x8", "GPH010"),
    "SW thermal slowdown": (100, "events=0x20", "GPH011"),
    "power limit lowered": (100, "power_limit=500", "GPH012"),
    "memory clock low while busy": (100, "mem=1593", "GPH013"),
    "application clocks locked low": (100, "app_gfx=1200", "GPH014"),
    "DBE volatile": (0, "dbe_volatile=2,dbe_aggregate=2", "GPH020"),
    "DBE in the lifetime only": (0, "dbe_aggregate=3", "GPH021"),
    "retired pages pending": (0, "retired_dbe=2,retired_pending=1", "GPH022"),
    "remap pending": (0, "remap_unc=1,remap_pending=1", "GPH023"),
    "remap failed": (0, "remap_failure=1", "GPH024"),
    "persistence off": (0, "persistence=0", "GPH030"),
    "compute mode exclusive": (0, "compute=3", "GPH031"),
    "MIG enabled": (0, "mig=1,mig_pending=1", "GPH032"),
    "processes holding memory": (0, "procs=4242:8192+4243:512", "GPH033"),
    "NVLink inactive": (0, "nvlink_down=0x4", "GPH040"),
    "fabric in progress": (0, "fabric_state=2", "GPH041"),
}


def test_each_condition_the_double_shows_is_reported_on_its_gpu_and_a_healthy_gpu_gives_nothing(nvml, tmp_path):
    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "hosts/gpu-h200", root, symlinks=True)  # the driver's /proc, no /sys: the bus is not read
    (root / "proc/4242").mkdir(parents=True)
    (root / "proc/4242/comm").write_text("vllm\n")
    labels = list(CONDITIONS)
    spec = gpus(*(CONDITIONS[label][0] for label in labels))
    report = check(tmp_path, nvml["current"], root, gpu_spec=spec, health=";".join(CONDITIONS[label][1] for label in labels))
    found = by_gpu(report)
    for index, label in enumerate(labels):
        expected = CONDITIONS[label][2]
        assert found.get(index, []) == ([expected] if expected else []), label
    assert None not in found  # nothing about the node
    facts = report["facts"]["gpu-health"]
    assert facts["source"] == "NVML" and len(facts["gpus"]) == len(labels)
    held = next(f for f in report["findings"] if f["code"] == "GPH033")
    assert held["evidence"]["held_mib"] == 8704
    assert {(p["pid"], p["name"]) for p in held["evidence"]["processes"]} == {(4242, "vllm"), (4243, "pid 4243")}  # no /proc/4243: its pid
    slow = next(f for f in report["findings"] if f["code"] == "GPH010")
    assert slow["evidence"]["events"] == ["hw_slowdown"] and slow["evidence"]["temperature_c"] == 34
    link = next(f for f in report["findings"] if f["code"] == "GPH002")["evidence"]
    assert (link["gen_current"], link["gen_max"], link["utilization_pct"]) == (3, 5, 100)
    fabric = next(f for f in report["findings"] if f["code"] == "GPH041")["evidence"]
    assert fabric["fabric_state"] == "In Progress" and "fabric_status" not in fabric  # a status means nothing before Completed
    states = {g["index"]: g for g in facts["gpus"]}
    assert states[labels.index("processes holding memory")]["held_mib"] == 8704
    assert states[labels.index("MIG enabled")]["mig"] is True and states[0]["mig"] is False and states[0]["held_mib"] == 0


def test_healthy_gpus_on_their_bus_pass_with_their_facts_published(nvml, tmp_path):
    spec = gpus(100, 0, buses=("00000000:19:00.0", "00000000:3B:00.0"))  # gpu-node's two NVIDIA functions
    report = check(tmp_path, nvml["current"], FIXTURES / "hosts/gpu-node", gpu_spec=spec)
    assert report["findings"] == [] and report["not_judged"] == []
    assert result(report)["state"] == "passed" and report["summary"]["exit_code"] == 0
    facts = report["facts"]["gpu-health"]
    assert facts["source"] == "NVML" and [(g["index"], g["uuid"], g["conditions"]) for g in facts["gpus"]] == [
        (0, "GPU-0", []),
        (1, "GPU-1", []),
    ]
    assert nvml_loaded(tmp_path)


def test_a_downtrained_link_is_judged_against_its_slot_and_a_board_narrow_by_design_is_not(nvml, tmp_path):
    """gpu-health-x8: GPU 01:00.0 x8 under an x16 port (downtrained), 41:00.0 x8 under an x8 port."""
    spec = gpus(100, 100, buses=("00000000:01:00.0", "00000000:41:00.0"))
    report = check(tmp_path, nvml["current"], X8, gpu_spec=spec, health="width=8;width=8")
    assert by_gpu(report) == {0: ["GPH001"]}
    (finding,) = report["findings"]
    assert finding["evidence"] | {"width_current": 8, "width_max": 16, "slot_width_max": 16} == finding["evidence"]
    assert "the GPU and its slot both do x16" in finding["message"]


def test_another_hosts_files_never_load_nvml_and_sysfs_alone_is_judged(nvml, tmp_path):
    report = check(tmp_path, nvml["current"], X8, gpu_spec=gpus(100, 100), health="gen=1;gen=1", same_host=False)
    assert not nvml_loaded(tmp_path)
    assert by_gpu(report) == {0: ["GPH001"]}  # the tree's own link attributes
    assert report["facts"]["gpu-health"]["source"] == "sysfs"
    reasons = {item["what"]: item["why"] for item in report["not_judged"]}
    nvml_only = next(why for what, why in reasons.items() if "(NVML)" in what)
    assert "another host's files" in nvml_only
    assert any("PCIe generation under load" in what for what in reasons)  # 2.5 GT/s and no utilization: not guessed idle

    bare = check(tmp_path, nvml["current"], FIXTURES / "hosts/gpu-node", gpu_spec=gpus(100), same_host=False)
    assert not nvml_loaded(tmp_path) and bare["findings"] == []
    (item,) = bare["not_judged"]
    assert item["what"] == "the NVIDIA GPUs' health" and "another host's files" in item["why"]


def test_nvml_that_fails_while_the_bus_shows_gpus_is_not_judged_and_no_gpu_at_all_skips(nvml, tmp_path):
    failing = check(tmp_path, nvml["current"], FIXTURES / "hosts/gpu-node", gpu_spec=gpus(100), extra={"DD_NVML_FAIL": "1"})
    (item,) = failing["not_judged"]
    assert item["why"] == "NVML did not initialise: Driver Not Loaded" and failing["findings"] == []
    with_links = check(tmp_path, nvml["current"], X8, gpu_spec=gpus(100), extra={"DD_NVML_FAIL": "1"})
    assert by_gpu(with_links) == {0: ["GPH001"]} and with_links["facts"]["gpu-health"]["source"] == "sysfs"
    none = check(tmp_path, nvml["current"], FIXTURES / "hosts/healthy-server", gpu_spec="")
    assert result(none)["state"] == "skipped" and "no NVIDIA GPU" in (result(none)["reason"] or "")


def test_gpus_missing_from_nvml_are_found_unless_the_runtime_hides_them(nvml, tmp_path):
    one = gpus(100, buses=("00000000:19:00.0",))
    report = check(tmp_path, nvml["current"], FIXTURES / "hosts/gpu-node", gpu_spec=one)
    (finding,) = report["findings"]
    assert finding["code"] == "GPH042" and finding["evidence"]["missing"] == ["00000000:3b:00.0"]
    hidden = check(tmp_path, nvml["current"], FIXTURES / "hosts/gpu-node", gpu_spec=one, extra={"NVIDIA_VISIBLE_DEVICES": "0"})
    assert hidden["findings"] == [] and "hides some" in hidden["not_judged"][0]["why"]
    cuda_only = check(tmp_path, nvml["current"], FIXTURES / "hosts/gpu-node", gpu_spec=one, extra={"CUDA_VISIBLE_DEVICES": "0"})
    assert [f["code"] for f in cuda_only["findings"]] == ["GPH042"]  # CUDA's variable hides nothing from NVML


def test_an_nvswitch_board_needs_its_fabric_manager_running(nvml, tmp_path):
    root = tmp_path / "hgx"
    shutil.copytree(FIXTURES / "hosts/gpu-node", root, symlinks=True)
    switch = root / "sys/bus/pci/devices/0000:05:00.0"
    switch.mkdir()
    (switch / "vendor").write_text("0x10de\n")
    (switch / "class").write_text("0x068000\n")
    (root / "proc/1234").mkdir()
    (root / "proc/1234/comm").write_text("sshd\n")
    spec = gpus(0, 0, buses=("00000000:19:00.0", "00000000:3B:00.0"))
    stopped = check(tmp_path, nvml["current"], root, gpu_spec=spec)
    (finding,) = stopped["findings"]
    assert finding["code"] == "GPH041" and finding["evidence"] == {"nvswitches": 1, "fabric_manager_running": False}
    assert stopped["facts"]["gpu-health"]["host_conditions"] == ["GPH041"]
    (root / "proc/1235").mkdir()
    (root / "proc/1235/comm").write_text("nv-fabricmanage\n")  # comm keeps 15 characters
    assert check(tmp_path, nvml["current"], root, gpu_spec=spec)["findings"] == []


def test_an_old_drivers_missing_calls_leave_their_fields_unread(nvml, tmp_path):
    """No clocks event reasons (the throttle reasons answer), no remapped rows, no v3 process list."""
    spec = gpus(100, 0, buses=("00000000:19:00.0", "00000000:3B:00.0"))
    report = check(tmp_path, nvml["old"], FIXTURES / "hosts/gpu-node", gpu_spec=spec, health="events=0x8;remap_pending=1,procs=4242:100")
    assert by_gpu(report) == {0: ["GPH010"]}  # GPU 1's pending remap and process are not there to read
    assert [g["held_mib"] for g in report["facts"]["gpu-health"]["gpus"]] == [None, None]  # not read, never 0
    unsupported = check(
        tmp_path, nvml["current"], FIXTURES / "hosts/gpu-node", gpu_spec=spec, health="unsupported=persistence+processes+fabric"
    )
    assert unsupported["findings"] == [] and unsupported["facts"]["gpu-health"]["gpus"][0]["held_mib"] is None


# --- sysfs alone, in this process --------------------------------------------------------------------------


def test_sysfs_links_are_read_only_inside_the_root(tmp_path):
    """A tree whose link is absolute is read under the root (the host's /sys, never this machine's); a
    relative link that climbs out of the root is not followed."""
    from decode_doctor.checks.gpuhealth.sysfs import read_bus
    from decode_doctor.engine.context import Context

    root = tmp_path / "host"
    shutil.copytree(X8, root, symlinks=True)
    devices = root / "sys/bus/pci/devices"
    (devices / "0000:01:00.0").unlink()
    (devices / "0000:01:00.0").symlink_to("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0")
    (devices / "0000:41:00.0").unlink()
    (devices / "0000:41:00.0").symlink_to("../" * 12 + "sys/devices/pci0000:40/0000:40:01.0/0000:41:00.0")
    bus = read_bus(Context(root=root))
    assert bus.pci_gpus == ("00000000:01:00.0",) and bus.nvswitches == 0
    link = (bus.gpus or {})["00000000:01:00.0"]
    assert (link.width_current, link.width_max, link.slot_width_max, link.gen_current, link.gen_max, link.slot_gen_max) == (
        8,
        16,
        16,
        1,
        5,
        5,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0000:3b:00.0", "00000000:3b:00.0"), ("00000000:3B:00.0", "00000000:3b:00.0"), ("0000:3b:00", None), ("x:3b:00.0", None), ("", None)],
)
def test_bus_ids_from_sysfs_and_nvml_meet_in_one_form(text, expected):
    from decode_doctor.checks.gpuhealth.sysfs import canonical_bus_id

    assert canonical_bus_id(text) == expected


@pytest.mark.parametrize(
    ("speed", "generation"),
    [
        ("2.5 GT/s PCIe", 1),
        ("5.0 GT/s PCIe", 2),
        ("8 GT/s", 3),
        ("16.0 GT/s PCIe", 4),
        ("32.0 GT/s PCIe", 5),
        ("Unknown", None),
        ("", None),
    ],
)
def test_link_speeds_as_the_kernel_writes_them_give_the_generation(speed, generation):
    from decode_doctor.checks.gpuhealth.sysfs import generation as of

    assert of(speed) == generation
