"""decode-doctor analyze: texts a customer pasted, judged like a live check (issue 18)."""

from __future__ import annotations

import json
import os

import pytest

from .conftest import FIXTURES
from .support.harness import cli

NV = FIXTURES / "nvidia"
TABLES = sorted((NV / "nvidia-smi-table").glob("*.txt"))


@pytest.mark.parametrize("table", TABLES, ids=[t.stem for t in TABLES])
def test_a_plain_table_gives_driver_cuda_gpus_and_memory(table):
    report = cli("analyze", str(table), "--format", "json").json()
    facts = report["facts"][f"gpu ({table.name})"]
    expected_driver = table.stem.split("driver-")[1].split("-")[0]
    assert facts["driver"] == expected_driver and facts["cuda"] and facts["source"] == "nvidia-smi table"
    assert facts["devices"] and all(d["name"] and d["memory_mib"] for d in facts["devices"])
    assert [f for f in report["findings"] if f["check"].startswith("gpu ")] == []  # the GPUs' health is gpu-health's to say


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("couldnt-communicate-with-driver.txt", "GPU010"),
        ("driver-library-version-mismatch.txt", "GPU011"),
        ("no-devices-were-found.txt", "GPU012"),
        ("unable-to-determine-device-handle-2024-no-space.txt", "GPU013"),
        ("gpu-is-lost-2021.txt", "GPU014"),
        ("dmesg-gpu-fallen-off-bus-570.158.01.txt", "GPU014"),
        ("dmesg-xid-79-only-new-format.txt", "GPU014"),
        ("nvidia-smi-command-not-found-bash.txt", "GPU015"),
        ("dmesg-api-mismatch-515.48.07-vs-510.73.05.txt", "GPU011"),
        ("dmesg-no-adapter-probed-nouveau.txt", "GPU012"),
        ("dmesg-xid-119-gsp-timeout-535.txt", "GPU018"),
    ],
)
def test_each_error_text_gives_its_code_citing_the_line(name, code):
    report = cli("analyze", str(NV / "nvidia-smi-errors" / name), "--format", "json").json()
    found = {f["code"]: f for f in report["findings"]}
    assert code in found, found.keys()
    assert found[code]["evidence"]["source"] == name and found[code]["evidence"]["line"] >= 1


def test_xml_and_q_text_are_recognised_by_content_not_name(tmp_path):
    xml = next((NV / "nvidia-smi-q-x").glob("*.xml"))
    renamed = tmp_path / "paste.log"
    renamed.write_bytes(xml.read_bytes())
    facts = next(iter(cli("analyze", str(renamed), "--format", "json").json()["facts"].values()))
    assert facts["source"] == "nvidia-smi -q -x" and facts["driver"]


def test_stdin_unknown_text_and_fifos(tmp_path):
    from click.testing import CliRunner

    from decode_doctor.cli.main import cli as group

    table = TABLES[0].read_text()
    result = CliRunner().invoke(group, ["analyze", "-", "--format", "json"], input=table)
    assert result.exit_code == 0 and json.loads(result.stdout)["facts"]
    (tmp_path / "notes.txt").write_text("hello\n")
    unknown = cli("analyze", str(tmp_path / "notes.txt"))
    assert unknown.exit_code == 2 and "no check reads this kind of text" in unknown.stderr
    os.mkfifo(tmp_path / "pipe")
    fifo = cli("analyze", str(tmp_path / "pipe"))
    assert fifo.exit_code == 2 and "FIFO" in fifo.stderr


def test_a_pasted_docker_pull_error_names_what_the_mirror_answered(tmp_path):
    report = cli("analyze", str(FIXTURES / "oci-referrers/error-messages-referrers-decode-failures.txt"), "--format", "json").json()
    (finding,) = report["findings"]
    assert finding["code"] == "REF001" and finding["evidence"]["line"] == 1
    (tmp_path / "pull.txt").write_text("Error response from daemon: failed to decode referrers index: EOF\n")
    assert [f["code"] for f in cli("analyze", str(tmp_path / "pull.txt"), "--format", "json").json()["findings"]] == ["REF002"]


ENVS = NV / "collect-env"


@pytest.mark.parametrize(
    ("name", "torch", "cuda", "driver", "gpus", "cudnn"),
    [
        ("a100-sxm4-40gb-torch1.12.1-cu113-driver-470.129.06-complete.txt", "1.12.1+cu113", "11.3", "470.129.06", 1, None),
        ("h100-x8-torch2.3.0-cu121-driver-550.54.15-vllm.partial.txt", "2.3.0+cu121", "12.1", "550.54.15", 8, "8.9.7"),
        ("h100-x8-torch2.5.1-cu124-driver-550.90.07.partial.txt", "2.5.1+cu124", "12.4", "550.90.07", 8, "8.9.7"),
        ("h100-torch2.9.1-cu126-driver-580.126.09-runpy-warning.partial.txt", "2.9.1+cu126", "12.6", "580.126.09", 1, None),
        (
            "vllm-collect-env-sectioned-rtx5090-xeon6530-2socket-torch2.10.0-cu128-driver-590.48.01-complete.txt",
            "2.10.0+cu128",
            "12.8",
            "590.48.01",
            1,
            "9.8.0",
        ),
    ],
)
def test_collect_env_gives_the_torch_build_driver_gpus_and_cudnn(name, torch, cuda, driver, gpus, cudnn):
    report = cli("analyze", str(ENVS / name), "--format", "json").json()
    facts = next(iter(report["facts"].values()))
    assert (facts["torch"]["version"], facts["torch"]["cuda"], facts["driver"]) == (torch, cuda, driver)
    assert len(facts["devices"]) == gpus and all(d["name"].startswith("NVIDIA") for d in facts["devices"])
    assert facts["torch"]["cudnn"] == cudnn and facts["source"] == "collect_env"
    assert all(f["code"] not in ("GPU020", "GPU021") for f in report["findings"])  # each pair here works


def test_vllm_collect_env_names_the_vllm_version():
    name = "vllm-collect-env-sectioned-rtx5090-xeon6530-2socket-torch2.10.0-cu128-driver-590.48.01-complete.txt"
    facts = next(iter(cli("analyze", str(ENVS / name), "--format", "json").json()["facts"].values()))
    assert facts["notes"] == ["vLLM 0.18.1rc1.dev203+g97d19197b"]
    assert [t["version"] for t in facts["toolkits"]] == ["12.8.93"]


@pytest.mark.parametrize(
    ("name", "codes", "words"),
    [
        ("h100-pcie-torch2.0.1-cu117-sm90-incompatible-driver-535.104.12.partial.txt", ["GPU025", "GPU023"], "sm_90"),
        ("torch-error-driver-too-old-runtimeerror-found-10010.txt", ["GPU021"], "CUDA ≤ 10.1"),
        ("torch-error-driver-too-old-assertion-found-10000.txt", ["GPU021"], "CUDA ≤ 10.0"),
        ("amd-rx6700xt-rocm-host-torch2.5.1-cuda-wheels-spanish-lscpu.txt", ["GPU026"], "no NVIDIA driver"),
        ("a100-sxm4-40gb-torch1.12.1-cu113-driver-470.129.06-complete.txt", ["GPU023"], "PyTorch 1.12.1+cu113 is below 2.0"),
        ("rocm-device66a1-torch1.7.0a0.partial.txt", ["GPU023"], "1.7.0a0"),
    ],
)
def test_collect_env_and_torch_errors_give_their_codes_citing_lines(name, codes, words):
    report = cli("analyze", str(ENVS / name), "--format", "json").json()
    assert [f["code"] for f in report["findings"]] == codes
    assert words in report["findings"][0]["message"]
    lines = (ENVS / name).read_text().splitlines()
    for finding in report["findings"]:
        assert lines[finding["evidence"]["line"] - 1].strip().startswith(finding["evidence"]["text"][:40].strip())


def test_a_gpu_line_without_a_colon_is_kept_not_a_crash():
    """Found by benchmarks/fuzz.py: "GPU models and configuration: GPU 0" raised IndexError."""
    from decode_doctor.checks.gpu.collect_env import parse_collect_env

    assert parse_collect_env("GPU models and configuration: GPU 0\nGPU 1: NVIDIA A10\n").gpus == ["GPU 0", "NVIDIA A10"]
    assert parse_collect_env("cuDNN version: /usr/lib/libcudnn.so.\n").cudnn is None  # a path cut after "so."


def test_every_check_that_reads_pasted_text_says_what_it_reads():
    """The refusal lists what is read from the checks themselves; the CLI names no check."""
    from decode_doctor.engine.check import Check
    from decode_doctor.engine.registry import load

    readers = [cls for cls in load().checks.values() if cls.analyze.__func__ is not Check.analyze.__func__]
    assert {cls.name for cls in readers} >= {"gpu", "accelerators", "referrers"}
    assert all(cls.pasted for cls in readers)
