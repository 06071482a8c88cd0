"""The GPU stack check against captured nvidia-smi outputs, fake tools and fake torch builds."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from decode_doctor.checks.gpu.nvidia import build_for_driver, classify_smi_failure, judge, parse_smi_text, parse_smi_xml, scan_kernel_log

from .conftest import FIXTURES, run_dd
from .support.fakes import FAKES, fake_tool, fake_torch, printing
from .support.harness import run_app, run_check

NV = FIXTURES / "nvidia"


@pytest.fixture(autouse=True)
def no_nvml_of_this_machine(monkeypatch):
    """The test hosts stand for this machine (their fake tools run), but this machine's own NVML must
    not answer for them: a GPU machine's would. The forked checks inherit the stand-in."""
    from decode_doctor.checks.gpu import nvidia

    monkeypatch.setattr(nvidia, "probe_nvml", lambda: None)


# file → (driver, highest CUDA, GPUs listed): read off each capture by hand
XML_EXPECTED = {
    "a100-sxm4-80gb-mig-driver-535.54.03-v12.xml": ("535.54.03", "12.2", 1),
    "a10g-driver-515.105.01-v11.xml": ("515.105.01", "11.7", 1),
    "dual-rtx-a5000-driver-590.44.01-v13.xml": ("590.44.01", "13.1", 2),
    "dual-rtx2070-driver-590.44.01-v13.xml": ("590.44.01", "13.1", 2),
    "dual-rtx2080-driver-590.44.01-v13.xml": ("590.44.01", "13.1", 2),
    "grid-p4-1q-vgpu-driver-513.46-v11.xml": ("513.46", "11.6", 1),
    "gt1030-driver-470.74-v11.xml": ("470.74", "11.4", 1),
    "gtx-1070ti-partial-v10.xml": (None, None, 1),
    "gtx-1660ti-driver-418.43-v10.xml": ("418.43", "10.1", 1),
    "quadro-p2000-driver-525.125.06-v12.xml": ("525.125.06", "12.0", 1),
    "quadro-p400-driver-418.43-v10.xml": ("418.43", "10.1", 1),
    "rtx-pro-6000-blackwell-maxq-driver-590.44.01-v13.xml": ("590.44.01", "13.1", 1),
    "rtx3060-driver-570.124.04-v12.xml": ("570.124.04", "12.8", 1),
    "rtx3080-driver-595.58.03-v13.xml": ("595.58.03", "13.2", 1),
    "rtx3080-windows-driver-536.40-v12.xml": ("536.40", "12.2", 1),
    "rtx3090-driver-525.147.05-v12.xml": ("525.147.05", "12.0", 1),
    "rtx3090-driver-590.44.01-v13.xml": ("590.44.01", "13.1", 1),
    "rtx4000-sff-ada-driver-595.84-v13.xml": ("595.84", "13.2", 1),
    "tesla-t4-driver-515.105.01-v11.xml": ("515.105.01", "11.7", 1),
}


def test_every_xml_capture_is_known():
    assert sorted(p.name for p in (NV / "nvidia-smi-q-x").iterdir()) == sorted(XML_EXPECTED)


@pytest.mark.parametrize("name", sorted(XML_EXPECTED))
def test_xml_captures_parse_to_their_driver_and_cuda(name):
    info = parse_smi_xml((NV / "nvidia-smi-q-x" / name).read_text())
    assert (info.driver_version, info.cuda_version, len(info.devices)) == XML_EXPECTED[name]
    assert all(d.name for d in info.devices)


def test_xml_details_across_generations():
    mig = parse_smi_xml((NV / "nvidia-smi-q-x/a100-sxm4-80gb-mig-driver-535.54.03-v12.xml").read_text())
    assert mig.devices[0].mig_mode == "Enabled" and mig.devices[0].memory_mib == 81920
    assert mig.notes == ("attached_gpus says 4 but the output lists 1",)
    t4 = parse_smi_xml((NV / "nvidia-smi-q-x/tesla-t4-driver-515.105.01-v11.xml").read_text())
    assert (t4.devices[0].architecture, t4.devices[0].max_mem_clock_mhz) == ("Turing", 5001)
    assert t4.devices[0].theoretical_gbps is None  # no bus width in the XML: unknown, not guessed


def test_text_outputs_including_driver_610():
    kmd = parse_smi_text((NV / "nvidia-smi-q-text/rtx2080super-driver-610.57.04-idle.txt").read_text())
    assert (kmd.driver_version, kmd.cuda_version) == ("610.57.04", "13.3")
    h200 = parse_smi_text((NV / "nvidia-smi-q-text/h200-driver-590.48.01-idle.txt").read_text())
    assert (h200.driver_version, h200.cuda_version, h200.devices[0].name, h200.devices[0].memory_mib) == (
        "590.48.01",
        "13.1",
        "NVIDIA H200",
        143771,
    )
    mig = parse_smi_text((NV / "nvidia-smi-q-text/h100-mig-driver-590.48.01-idle.txt").read_text())
    assert mig.devices[0].mig_mode == "Enabled"


def test_failure_outputs_classify():
    expected = {
        "couldnt-communicate-with-driver.txt": "no-driver",
        "driver-library-version-mismatch.txt": "version-mismatch",
        "driver-library-version-mismatch-with-nvml-version-570.txt": "version-mismatch",
        "nvidia-container-cli-nvml-version-mismatch.txt": "version-mismatch",
        "no-devices-were-found.txt": "no-devices",
        "unable-to-determine-device-handle-2015-with-space.txt": "unknown-error",
        "unable-to-determine-device-handle-2024-no-space.txt": "unknown-error",
        "nvidia-smi-command-not-found-bash.txt": "missing",
    }
    for name, kind in expected.items():
        assert classify_smi_failure((NV / "nvidia-smi-errors" / name).read_text()) == kind, name
    kernel = {
        "dmesg-api-mismatch-515.48.07-vs-510.73.05.txt": "api-mismatch",
        "dmesg-api-mismatch-named-client-595.84-vs-595.80.txt": "api-mismatch",
        "syslog-api-mismatch-535.54.03-vs-530.30.02-rsyslog-escaped.txt": "api-mismatch",
        "dmesg-gpu-fallen-off-bus-570.158.01.txt": "off-bus",
        "dmesg-no-adapter-probed-nouveau.txt": "no-adapter",
    }
    for name, kind in kernel.items():
        assert kind in {k for k, _ in scan_kernel_log((NV / "nvidia-smi-errors" / name).read_text())}, name


def test_compatibility_rules():
    verdict = judge("12.4", "470.57.02", "PyTorch 2.5.1 built for CUDA 12.4")
    assert verdict.level == "incompatible"
    assert verdict.message == "PyTorch 2.5.1 built for CUDA 12.4 needs driver >= 525.60.13 (minor-version compatibility) — found 470.57.02"
    assert build_for_driver("470.57.02") == "11.8"
    assert judge("12.4", "530.30.02", "x").level == "minor-compat"
    assert judge("12.4", "550.54.14", "x").level == "ok"
    assert judge("13.3.1", "590.48.01", "x").level == "minor-compat"
    assert judge("11.8", "450.80.02", "x").level == "minor-compat"
    assert judge("11.8", "450.36.06", "x").level == "incompatible"
    assert judge("12.8", "570.26", "x").level == "ok"
    assert judge("12.8.1", "570.26", "x").level == "minor-compat"


def gpu_env(tmp_path: Path, smi: str | None, torch: tuple | None = None, nvcc: str | None = None) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    env = fake_tool(bin_dir, "dmesg", "exit 1")
    env = fake_tool(bin_dir, "journalctl", "exit 1")  # the host tree stands for this machine: never its own kernel log
    if smi is not None:
        env = fake_tool(bin_dir, "nvidia-smi", smi)
    if nvcc is not None:
        env = fake_tool(bin_dir, "nvcc", nvcc)
    if torch is not None:
        env.update(fake_torch(tmp_path / "site", *torch))
    return env


def gpu_check(
    tmp_path: Path,
    smi: str | None,
    root: Path | None = None,
    torch: tuple | None = None,
    nvcc: str | None = None,
    options: dict | None = None,
):
    host = root or (tmp_path / "host")
    host.mkdir(parents=True, exist_ok=True)
    return run_check("gpu", host, env=gpu_env(tmp_path, smi, torch, nvcc), options=options, live=True)  # its tools are the fakes


@pytest.mark.parametrize(
    ("error_file", "code"),
    [
        ("couldnt-communicate-with-driver.txt", "GPU010"),
        ("driver-library-version-mismatch.txt", "GPU011"),
        ("driver-library-version-mismatch-with-nvml-version-570.txt", "GPU011"),
        ("no-devices-were-found.txt", "GPU012"),
        ("unable-to-determine-device-handle-2015-with-space.txt", "GPU013"),
        ("unable-to-determine-device-handle-2024-no-space.txt", "GPU013"),
        ("nvidia-smi-command-not-found-bash.txt", "GPU015"),
        ("gpu-is-lost-2021.txt", "GPU014"),  # "GPU is lost" is a GPU off the bus, not an Unknown Error
    ],
)
def test_each_nvidia_smi_failure_is_its_own_finding(tmp_path, error_file, code):
    found = gpu_check(tmp_path, printing(NV / "nvidia-smi-errors" / error_file, 9, to_stderr=True)).codes()
    assert code in found, found.keys()
    assert found[code].evidence["exit_code"] == 9


@pytest.mark.parametrize(
    ("log_file", "code"),
    [
        ("dmesg-gpu-fallen-off-bus-570.158.01.txt", "GPU014"),
        ("syslog-api-mismatch-535.54.03-vs-530.30.02-rsyslog-escaped.txt", "GPU011"),
        ("dmesg-api-mismatch-named-client-595.84-vs-595.80.txt", "GPU011"),
        ("dmesg-no-adapter-probed-nouveau.txt", "GPU012"),
        ("dmesg-xid-119-gsp-timeout-535.txt", "GPU018"),
    ],
)
def test_kernel_log_events_are_findings(tmp_path, log_file, code):
    host = tmp_path / "host"
    (host / "var/log").mkdir(parents=True)
    shutil.copy(NV / "nvidia-smi-errors" / log_file, host / "var/log/kern.log")
    assert code in gpu_check(tmp_path, printing(NV / "nvidia-smi-q-x/tesla-t4-driver-515.105.01-v11.xml"), root=host).codes()


def test_nvidia_smi_exit_code_9_is_no_driver_whatever_the_wording(tmp_path):
    (tmp_path / "reworded.txt").write_text("NVIDIA-SMI hat versagt: keine Verbindung zum Treiber.\n")  # a translated message
    found = gpu_check(tmp_path, printing(tmp_path / "reworded.txt", 9, to_stderr=True)).codes()
    assert "GPU010" in found and "GPU017" not in found


def test_an_xid_79_line_alone_is_a_gpu_off_the_bus_not_no_gpu(tmp_path):
    host = tmp_path / "host"
    (host / "var/log").mkdir(parents=True)
    shutil.copy(NV / "nvidia-smi-errors/dmesg-xid-79-only-new-format.txt", host / "var/log/kern.log")
    run = gpu_check(tmp_path, "exit 127", root=host)  # nvidia-smi gone with the GPU
    assert "GPU014" in run.codes() and "Xid (PCI:0000:2b:00): 79" in run.codes()["GPU014"].message


def test_xid_counts_in_the_new_format(tmp_path):
    from decode_doctor.checks.gpu.nvidia import scan_kernel_log

    events = scan_kernel_log((NV / "nvidia-smi-errors/dmesg-xid-119-gsp-timeout-535.txt").read_text())
    assert [kind for kind, _ in events] == ["xid"] * 3 and all(": 119, pid=1346198" in text for _, text in events)


def test_cuda_version_not_found_is_absent_not_a_version():
    from decode_doctor.checks.gpu.nvidia import parse_smi_text

    text = (NV / "nvidia-smi-q-text/h200-driver-590.48.01-idle.txt").read_text()
    assert parse_smi_text(text).cuda_version is not None
    not_found = "CUDA Version                              : Not Found"  # a vGPU guest without CUDA
    lines = [not_found if line.startswith("CUDA Version") else line for line in text.splitlines()]
    info = parse_smi_text("\n".join(lines))
    assert info.driver_version == "590.48.01" and info.cuda_version is None


def test_api_mismatch_from_the_kernel_log_joins_the_nvidia_smi_finding(tmp_path):
    host = tmp_path / "host"
    (host / "var/log").mkdir(parents=True)
    shutil.copy(NV / "nvidia-smi-errors/dmesg-api-mismatch-515.48.07-vs-510.73.05.txt", host / "var/log/kern.log")
    run = gpu_check(tmp_path, printing(NV / "nvidia-smi-errors/driver-library-version-mismatch.txt", 18, to_stderr=True), root=host)
    (finding,) = [f for f in run.findings if f.code == "GPU011"]
    assert "515.48.07" in finding.message and "510.73.05" in finding.message


def test_hung_nvidia_smi_is_a_finding_within_its_timeout(tmp_path):
    started = time.monotonic()
    run = gpu_check(tmp_path, "sleep 30", options={"nvidia_smi_timeout": 0.5})
    assert time.monotonic() - started < 12  # 0.5 s (and 20× room for a busy machine), never the 30 s sleep
    assert "GPU016" in run.codes()


def test_hung_nvidia_smi_under_the_check_timeout_is_reported_as_timed_out(tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    started = time.monotonic()
    outcome = run_app("gpu", root=host, env=gpu_env(tmp_path, "sleep 30"), timeout=1.5, same_host=True)
    assert time.monotonic() - started < 15
    (result,) = outcome.report.results
    assert result.state.value == "timed out" and "while running: nvidia-smi -q -x" in result.reason


def test_torch_built_for_a_newer_cuda_than_the_driver(tmp_path):
    run = gpu_check(
        tmp_path,
        printing(NV / "nvidia-smi-q-x/gt1030-driver-470.74-v11.xml"),
        torch=("2.5.1+cu124", "12.4", "9.1.0"),
        nvcc=printing(NV / "cuda/nvcc-version/cuda-12.1.66.txt"),
    )
    found = run.codes()
    assert run.facts.summary()[0].startswith("Driver 470.74 (CUDA ≤ 11.4, via nvidia-smi -q -x): GPU 0: NVIDIA GeForce GT 1030")
    assert found["GPU021"].message == (
        "PyTorch 2.5.1+cu124 built for CUDA 12.4 needs driver >= 525.60.13 (minor-version compatibility) — found 470.74: "
        "upgrade the driver to >= 550 or install a cu118 build."
    )
    assert found["GPU021"].evidence["cudnn"] == "9.1.0"
    assert found["GPU020"].severity.value == "error" and "CUDA toolkit 12.1.66" in found["GPU020"].message
    assert run.facts.torch.version == "2.5.1+cu124" and run.facts.toolkits[0].version == "12.1.66"


def test_minor_version_compatibility_warns_with_the_ptx_caveat(tmp_path):
    host = tmp_path / "host"
    (host / "usr/local/cuda-13.3").mkdir(parents=True)
    shutil.copy(NV / "cuda/version-json/cuda-13.3.1-version-bundled-driver-610.43.02.json", host / "usr/local/cuda-13.3/version.json")
    found = gpu_check(
        tmp_path, printing(NV / "nvidia-smi-q-x/rtx3090-driver-590.44.01-v13.xml"), root=host, torch=("2.9.1+cu130", "13.0")
    ).codes()
    assert found["GPU020"].severity.value == "warning"
    assert "minor-version compatibility" in found["GPU020"].message and "cudaErrorUnsupportedPtxVersion" in found["GPU020"].message
    assert "GPU021" not in found  # cu130 on driver 590 is fully supported


def test_cpu_only_torch_and_old_stack_on_a_gpu_host(tmp_path):
    run = gpu_check(tmp_path, printing(NV / "nvidia-smi-q-x/rtx3090-driver-525.147.05-v12.xml"), torch=("2.4.0+cpu", None))
    assert "GPU022" in run.codes()
    old = gpu_check(
        tmp_path / "old", printing(NV / "nvidia-smi-q-x/rtx3090-driver-525.147.05-v12.xml"), torch=("1.12.1+cu113", "11.3", "8.3.2")
    )
    below = old.codes()["GPU023"].message
    assert "PyTorch 1.12.1+cu113 is below 2.0" in below and "cuDNN 8.3.2 is below 8.6" in below and "CUDA 11.3 < 11.8" in below


def test_no_gpu_is_skipped_once(tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}  # no CUDA toolkit either (this machine has one)
    fake_tool(tmp_path / "bin", "dmesg", "exit 1")
    outcome = run_app("gpu", "nvidia-container", root=host, env=env)
    states = {r.check: (r.state.value, r.reason) for r in outcome.report.results}
    assert states["gpu"][0] == "skipped" and "no NVIDIA GPU" in states["gpu"][1]
    assert states["nvidia-container"] == ("skipped", "no NVIDIA GPU")
    assert outcome.report.findings == []


def test_jetson_is_recognised(tmp_path):
    run = gpu_check(tmp_path, None, root=FIXTURES / "hosts/jetson-nano")
    assert "NVIDIA Jetson Nano Developer Kit (/etc/nv_tegra_release: "  # R32 (release), REVISION: 7.1" in run.codes()["GPU030"].message
    assert run.facts.unified_memory is True


def test_nvml_is_the_first_probe(tmp_path):
    """A subprocess: the stand-in pynvml must not be imported into the test process."""
    env = {"PYTHONPATH": str(FAKES), **fake_tool(tmp_path / "bin", "nvidia-smi", "exit 99")}
    proc = run_dd("check", "--select", "gpu", "--format", "json", "--verbose", env=env)
    gpu = json.loads(proc.stdout)["facts"]["gpu"]
    assert (gpu["driver"], gpu["cuda"], gpu["source"]) == ("590.48.01", "13.1", "NVML")
    assert gpu["devices"][0]["name"] == "NVIDIA H200" and gpu["devices"][0]["theoretical_gbps"] == pytest.approx(3352.3, abs=0.1)
    text = run_dd("check", "--select", "gpu", "--verbose", env=env).stdout
    assert "gpu: Driver 590.48.01 (CUDA ≤ 13.1, via NVML): GPU 0: NVIDIA H200 (140 GiB" in text and "3352 GB/s theoretical" in text


def container_host(tmp_path: Path, hooks: tuple[str, ...], daemon_json: str | None, cdi: bool) -> Path:
    host = tmp_path / "host"
    (host / "usr/bin").mkdir(parents=True)
    (host / "usr/bin/dockerd").write_text("")
    for hook in hooks:
        (host / "usr/bin" / hook).write_text("")
    if daemon_json:
        (host / "etc/docker").mkdir(parents=True)
        shutil.copy(FIXTURES / "daemon-json" / daemon_json, host / "etc/docker/daemon.json")
    if cdi:
        (host / "etc/cdi").mkdir(parents=True)
        (host / "etc/cdi/nvidia.yaml").write_text(
            'cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: "0"\n  containerEdits: {}\n- name: all\n  containerEdits: {}\n'
        )
    return host


def container_check(tmp_path: Path, host: Path, smi: str):
    outcome = run_app("gpu", "nvidia-container", root=host, env=gpu_env(tmp_path, smi), same_host=True)  # its nvidia-smi is the fake
    return outcome


def test_container_toolkit_missing_means_gpus_flag_fails(tmp_path):
    host = container_host(tmp_path, (), None, cdi=False)
    outcome = container_check(tmp_path, host, printing(NV / "nvidia-smi-q-x/tesla-t4-driver-515.105.01-v11.xml"))
    found = {f.code: f for f in outcome.report.findings}
    assert 'could not select device driver "" with capabilities: [[gpu]]' in found["CTK001"].message
    assert found["CTK001"].fix.applicability.value == "display-only"
    assert found["CTK002"].fix.params.commands == (
        "sudo apt-get install -y nvidia-container-toolkit",
        "sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml",
    )
    assert found["CTK003"].fix.params.commands == ("sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker",)


def test_display_only_fixes_are_shown_never_applied(tmp_path):
    from .support.harness import run_fix

    host = container_host(tmp_path, (), None, cdi=False)
    before = sorted(p.name for p in host.rglob("*"))
    _, said = run_fix(
        "gpu",
        "nvidia-container",
        root=host,
        env=gpu_env(tmp_path, printing(NV / "nvidia-smi-q-x/tesla-t4-driver-515.105.01-v11.xml")),
        same_host=True,
        state_dir=tmp_path / "state",
    )
    assert "CTK002 cannot be applied by decode-doctor; run these commands yourself:" in said.text
    assert "    sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml" in said.lines
    assert sorted(p.name for p in host.rglob("*")) == before and not (tmp_path / "state").exists()


def test_container_toolkit_ready(tmp_path):
    host = container_host(
        tmp_path,
        ("nvidia-container-runtime-hook", "nvidia-ctk", "nvidia-container-runtime"),
        "nvidia-ctk-configured-args-form.json",
        cdi=True,
    )
    outcome = container_check(tmp_path, host, printing(NV / "nvidia-smi-q-x/tesla-t4-driver-515.105.01-v11.xml"))
    assert not {"CTK001", "CTK002", "CTK003"} & {f.code for f in outcome.report.findings}
    result = next(r for r in outcome.report.results if r.check == "nvidia-container")
    assert result.state.value == "passed"


def test_budget_uses_the_driver_inventory_when_nothing_measured_the_gpu(tmp_path):
    from .support.modelgen import qwen2_7b

    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    gpu = gpu_check(tmp_path, printing(NV / "nvidia-smi-q-x/rtx3090-driver-590.44.01-v13.xml"))
    run = run_check("decode-budget", models=(model,), options={"bandwidth": 936}, facts=[gpu.facts])
    budgets = {b.device: b for b in run.facts.models[0].budgets}
    assert budgets["cuda:0"].capacity_bytes == 24576 << 20
    assert budgets["cuda:0"].fit == "fits" and budgets["cuda:0"].bandwidth_source == "given"


def test_without_a_gpu_the_toolkit_is_reported_with_the_driver_it_will_need(tmp_path):
    host = tmp_path / "host"
    (host / "usr/local/cuda-13.3").mkdir(parents=True)
    shutil.copy(NV / "cuda/version-json/cuda-13.3.1-version-bundled-driver-610.43.02.json", host / "usr/local/cuda-13.3/version.json")
    run = run_check("gpu", host, env={"PATH": str(tmp_path / "empty")})
    (finding,) = [f for f in run.findings if f.code == "GPU024"]
    assert "CUDA toolkit 13.3.1" in finding.message and "needs driver ≥" in finding.message
    assert [t.version for t in run.facts.toolkits] == ["13.3.1"] and run.facts.devices == ()


def test_without_a_gpu_or_cuda_software_the_check_does_not_apply(tmp_path):
    from decode_doctor.engine import SkipCheck

    with pytest.raises(SkipCheck):
        run_check("gpu", tmp_path, env={"PATH": str(tmp_path / "empty")})


def test_smi_xml_that_declares_entities_or_a_dtd_subset_is_refused_never_expanded():
    laughs = '<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
    for text in (laughs + "<nvidia_smi_log>&b;</nvidia_smi_log>", "<!DOCTYPE x [ <!ELEMENT x ANY> ]><nvidia_smi_log/>"):
        with pytest.raises(ValueError, match="declares entities or a DTD subset"):
            parse_smi_xml(text)
    shipped = '<?xml version="1.0" ?><!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd"><nvidia_smi_log></nvidia_smi_log>'
    assert not parse_smi_xml(shipped).devices  # nvidia-smi's own DOCTYPE names a file and declares nothing
