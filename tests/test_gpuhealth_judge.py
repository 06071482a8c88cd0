"""The GPU health judge on readings built by hand: each condition gives its code with the field values as
evidence, the healthy and by-design cases give nothing, and what a reading cannot show is not judged."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from decode_doctor.checks.gpuhealth.contract import GpuHealthFacts, HealthState
from decode_doctor.checks.gpuhealth.judge import judge
from decode_doctor.checks.gpuhealth.reading import (
    ClockEvent,
    Clocks,
    ComputeMode,
    GpuProcess,
    GpuReading,
    HostReading,
    MemoryFaults,
    NvLink,
    PcieLink,
    Topology,
)

HEALTHY = GpuReading(
    index=0,
    name="NVIDIA H100 80GB HBM3",
    uuid="GPU-1",
    bus_id="00000000:17:00.0",
    utilization_pct=100,
    persistence=True,
    compute_mode=ComputeMode.DEFAULT,
    mig_enabled=False,
    pcie=PcieLink(gen_current=5, gen_max=5, width_current=16, width_max=16, slot_gen_max=5, slot_width_max=16, replays=9),
    clocks=Clocks(
        events=frozenset(),
        memory_mhz=2619,
        max_memory_mhz=2619,
        power_limit_w=700.0,
        default_power_limit_w=700.0,
    ),
    memory=MemoryFaults(ecc_enabled=True, uncorrected_volatile=0, uncorrected_aggregate=0, remap_pending=False, remap_failure=False),
    nvlinks=tuple(NvLink(n, active=True) for n in range(18)),
    fabric_state="Completed",
    fabric_status="Success",
    processes=(),
)


def codes(*gpus: GpuReading, **host: object) -> list[str]:
    return [v.code.code for v in judge(HostReading("test", gpus=gpus, **host)).verdicts]  # type: ignore[arg-type]


def test_a_healthy_gpu_gives_nothing():
    judgement = judge(HostReading("test", gpus=(HEALTHY,)))
    assert judgement.verdicts == [] and judgement.unjudged == []


@pytest.mark.parametrize(
    ("changed", "code"),
    [
        ({"pcie": replace(HEALTHY.pcie, width_current=8)}, "GPH001"),
        ({"pcie": replace(HEALTHY.pcie, gen_current=3)}, "GPH002"),
        ({"pcie": replace(HEALTHY.pcie, replays=52_000)}, "GPH003"),
        ({"pcie": replace(HEALTHY.pcie, replay_rollovers=1)}, "GPH003"),
        (
            {"clocks": replace(HEALTHY.clocks, events=frozenset({ClockEvent.HW_SLOWDOWN, ClockEvent.HW_THERMAL}), temperature_c=92)},
            "GPH010",
        ),
        ({"clocks": replace(HEALTHY.clocks, events=frozenset({ClockEvent.HW_POWER_BRAKE}))}, "GPH010"),
        ({"clocks": replace(HEALTHY.clocks, events=frozenset({ClockEvent.SW_THERMAL}))}, "GPH011"),
        ({"clocks": replace(HEALTHY.clocks, power_limit_w=400.0, events=frozenset({ClockEvent.SW_POWER_CAP}))}, "GPH012"),
        ({"clocks": replace(HEALTHY.clocks, memory_mhz=1593)}, "GPH013"),
        ({"clocks": replace(HEALTHY.clocks, applications_graphics_mhz=1005, default_applications_graphics_mhz=1410)}, "GPH014"),
        ({"memory": replace(HEALTHY.memory, uncorrected_volatile=3, uncorrected_aggregate=3)}, "GPH020"),
        ({"memory": replace(HEALTHY.memory, uncorrected_aggregate=2)}, "GPH021"),
        ({"memory": replace(HEALTHY.memory, retired_pages_pending=True, retired_pages_dbe=2)}, "GPH022"),
        ({"memory": replace(HEALTHY.memory, remap_pending=True, remapped_uncorrectable=1)}, "GPH023"),
        ({"memory": replace(HEALTHY.memory, remap_failure=True)}, "GPH024"),
        ({"persistence": False}, "GPH030"),
        ({"compute_mode": ComputeMode.EXCLUSIVE_PROCESS}, "GPH031"),
        ({"compute_mode": ComputeMode.PROHIBITED}, "GPH031"),
        ({"compute_mode": ComputeMode.EXCLUSIVE_THREAD}, "GPH031"),
        ({"compute_mode": ComputeMode.EXCLUSIVE_THREAD}, "GPH031"),
        ({"mig_enabled": True}, "GPH032"),
        ({"mig_enabled": False, "mig_pending": True}, "GPH032"),
        ({"processes": (GpuProcess(4121, "python3", 22 * 1024),)}, "GPH033"),
        ({"nvlinks": (NvLink(0, active=True), NvLink(1, active=False))}, "GPH040"),
        ({"fabric_state": "In Progress"}, "GPH041"),
        ({"fabric_status": "Failure"}, "GPH041"),
    ],
)
def test_each_condition_gives_its_code_with_the_values(changed, code):
    gpu = replace(HEALTHY, **changed)
    (verdict,) = judge(HostReading("test", gpus=(gpu,))).verdicts
    assert verdict.code.code == code
    assert verdict.evidence["gpu"] == 0 and verdict.evidence["uuid"] == "GPU-1"
    assert verdict.message.startswith("GPU 0 (NVIDIA H100 80GB HBM3): ")


def test_an_idle_gen1_link_is_power_saving_and_a_board_wired_x8_is_not_downtrained():
    idle = replace(HEALTHY, utilization_pct=0, pcie=replace(HEALTHY.pcie, gen_current=1))
    x8_slot = replace(HEALTHY, pcie=replace(HEALTHY.pcie, width_current=8, slot_width_max=8))
    x8_board = replace(HEALTHY, pcie=replace(HEALTHY.pcie, width_current=8, width_max=8, slot_width_max=16))
    gen4_slot = replace(HEALTHY, pcie=replace(HEALTHY.pcie, gen_current=4, slot_gen_max=4))
    assert codes(idle, x8_slot, x8_board, gen4_slot) == []
    assert judge(HostReading("test", gpus=(idle,))).unjudged == []


def test_a_slower_link_without_utilization_is_not_judged_rather_than_guessed():
    unknown = replace(HEALTHY, utilization_pct=None, pcie=replace(HEALTHY.pcie, gen_current=1))
    between = replace(HEALTHY, utilization_pct=30, pcie=replace(HEALTHY.pcie, gen_current=1))
    for gpu in (unknown, between):
        judgement = judge(HostReading("test", gpus=(gpu,)))
        assert judgement.verdicts == []
        (item,) = judgement.unjudged
        assert "PCIe generation under load" in item.what and "Gen1 of Gen5" in item.why


def test_a_narrow_link_with_the_slot_unknown_says_so():
    gpu = replace(HEALTHY, pcie=replace(HEALTHY.pcie, width_current=8, slot_width_max=None))
    (verdict,) = judge(HostReading("test", gpus=(gpu,))).verdicts
    assert verdict.code.code == "GPH001" and "slot's width is not in this reading" in verdict.message
    assert verdict.severity is not None and verdict.severity.value == "info"  # it may be the slot's design
    assert verdict.severity is not None and verdict.severity.value == "info"  # it may be the slot's design


def test_clocks_below_max_only_matter_while_busy_and_a_default_power_limit_is_no_finding():
    idle = replace(HEALTHY, utilization_pct=0, clocks=replace(HEALTHY.clocks, memory_mhz=405))
    geforce_p2 = replace(HEALTHY, name="NVIDIA GeForce RTX 4090", clocks=replace(HEALTHY.clocks, memory_mhz=10251, max_memory_mhz=10501))
    capping = replace(HEALTHY, clocks=replace(HEALTHY.clocks, events=frozenset({ClockEvent.SW_POWER_CAP})))
    assert codes(idle, geforce_p2, capping) == []


def test_persistence_off_is_a_finding_only_on_linux_data_center_gpus():
    off = replace(HEALTHY, persistence=False)
    geforce = replace(off, name="NVIDIA GeForce RTX 3090")
    assert codes(geforce) == []
    assert codes(off, windows=True) == []
    assert codes(*(replace(off, index=n, name="NVIDIA A100-SXM4-80GB") for n in range(8))) == ["GPH030"] * 8


def test_an_unknown_field_is_never_a_fault():
    blank = GpuReading(index=0, name="NVIDIA A100-SXM4-80GB")
    assert codes(blank) == []


def test_nvlinks_down_count_only_where_the_topology_or_the_board_uses_them():
    pcie = replace(HEALTHY, name="NVIDIA H100 PCIe")
    bridge_unused = replace(pcie, nvlinks=tuple(NvLink(n, active=False) for n in range(4)))
    judgement = judge(HostReading("test", gpus=(bridge_unused,)))
    assert judgement.verdicts == [] and "no topology" in judgement.unjudged[0].why  # a card's links depend on its bridges
    topology = Topology({(0, 1): "NV18"})
    assert codes(bridge_unused, topology=topology) == ["GPH040"]
    twelve_of_eighteen = replace(pcie, nvlinks=tuple(NvLink(n, active=n < 12) for n in range(18)))
    assert codes(twelve_of_eighteen, topology=Topology({(0, 1): "NV12"})) == []  # two bridges: 12 links by design
    switched = replace(HEALTHY, nvlinks=tuple(NvLink(n, active=n != 5) for n in range(18)))
    hgx = Topology({(0, peer): "NV18" for peer in range(1, 8)})  # every peer over all 18 links
    assert codes(switched, topology=hgx) == ["GPH040"] and codes(replace(switched, nvlinks=HEALTHY.nvlinks), topology=hgx) == []
    assert codes(switched) == ["GPH040"]  # an SXM module: every link is wired


def test_gpus_missing_from_the_bus_and_an_nvswitch_fabric_without_its_manager():
    buses = ("00000000:17:00.0", "00000000:b5:00.0")
    (verdict,) = judge(HostReading("test", gpus=(HEALTHY,), pci_gpus=buses)).verdicts
    assert verdict.code.code == "GPH042" and verdict.evidence["missing"] == ["00000000:b5:00.0"]
    hidden = judge(HostReading("test", gpus=(HEALTHY,), pci_gpus=buses, visible_devices="0"))
    assert hidden.verdicts == [] and "hides some" in hidden.unjudged[0].why
    assert codes(HEALTHY, nvswitches=4, fabric_manager_running=False) == ["GPH041"]
    assert codes(HEALTHY, nvswitches=4, fabric_manager_running=None) == []


def test_the_facts_give_each_gpu_the_state_its_worst_condition_needs():
    from decode_doctor.checks.gpuhealth.check import facts_of

    pending = replace(HEALTHY, index=1, uuid="GPU-2", memory=replace(HEALTHY.memory, remap_pending=True))
    failed = replace(HEALTHY, index=2, uuid="GPU-3", memory=replace(HEALTHY.memory, remap_pending=True, remap_failure=True))
    hot = replace(HEALTHY, index=3, uuid="GPU-4", clocks=replace(HEALTHY.clocks, events=frozenset({ClockEvent.SW_THERMAL})))
    mig = replace(HEALTHY, index=4, uuid="GPU-5", mig_enabled=True)
    reading = HostReading("NVML", gpus=(HEALTHY, pending, failed, hot, mig))
    facts = facts_of(reading, judge(reading))
    assert [g.state for g in facts.gpus] == [
        HealthState.HEALTHY,
        HealthState.RESET,
        HealthState.RMA,
        HealthState.DEGRADED,
        HealthState.HEALTHY,
    ]
    assert facts.gpus[2].conditions == ("GPH023", "GPH024")
    assert GpuHealthFacts.from_dict(json.loads(json.dumps(facts.to_dict()))) == facts  # as merge and diff read a report
    (states, conditions) = facts.metrics()
    assert sum(s.value for s in states.samples) == 5  # one state each
    assert {s.labels["code"] for s in conditions.samples} == {"GPH023", "GPH024", "GPH011", "GPH032"}


def test_the_decode_budget_leaves_out_memory_other_processes_hold_and_does_not_size_a_mig_gpu(tmp_path):
    from decode_doctor.checks.gpu.contract import GpuDevice, GpuFacts
    from decode_doctor.checks.gpuhealth.contract import GpuHealth

    from .support.harness import run_check
    from .support.modelgen import qwen2_7b

    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    stack = GpuFacts(
        driver="590.48.01",
        source="NVML",
        devices=(GpuDevice(0, "NVIDIA H100 80GB HBM3", 81559, theoretical_gbps=3352.0), GpuDevice(1, "NVIDIA H100 80GB HBM3", 81559)),
    )
    health = GpuHealthFacts(
        "NVML", (GpuHealth(0, "NVIDIA H100 80GB HBM3", "GPU-1", ("GPH033",), 22528, False), GpuHealth(1, None, None, ("GPH032",), 0, True))
    )
    run = run_check("decode-budget", models=(model,), facts=[stack, health], options={"bandwidth": 3000.0})
    (entry,) = run.facts.models
    gpu = entry.budgets[0]
    assert gpu.device == "cuda:0" and gpu.capacity_bytes == (81559 - 22528) << 20 and gpu.held_bytes == 22528 << 20
    assert "cuda:0: " in run.facts.summary()[0] and "(other processes hold 23.6 GB)" in run.facts.summary()[0]
    (item,) = run.ctx.unjudged
    assert item.what == "the decode budget on cuda:1" and "MIG is enabled" in item.why and item.cause == "GPH032"
