"""--root without --same-host judges another host's files, and only them: no tool on this machine's PATH
is run, no socket of this machine is asked, nothing is measured here, and none of this machine's facts
(its nvcc, its Docker Engine, its memory bandwidth, its NVML, its environment, its hostname) lands in
the report under that host's name. What only the live host could answer is "not judged (another host's
files)" or does not apply.

Every tool a check could reach for is a fake on PATH that leaves a marker when run; Docker's socket
and a loopback registry mirror are listeners that record every connection; the probes that run in
Python (the bandwidth measurement, NVML) are replaced by ones that leave a marker. A run with
--same-host, which keeps asking this machine, proves the markers work.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from decode_doctor.checks.bandwidth import membw, quiet
from decode_doctor.checks.gpu import nvidia

from .conftest import FIXTURES
from .support.fakes import fake_tool
from .support.harness import cli

HOSTS = sorted(p.name for p in (FIXTURES / "hosts").iterdir() if p.is_dir())
NVCC_VERSION = "99.7.4242"  # what this machine's fake nvcc says: never a toolkit of the judged host
READ_GBPS = 123.456  # what this machine's fake bandwidth probe measures
TOOLS = (
    "nvcc", "docker", "dockerd", "dmidecode", "nvidia-smi", "nvidia-ctk", "g++", "gcc", "dmesg", "journalctl", "amd-smi",
    "rocm-smi", "nvpmodel", "jetson_clocks", "llama-server", "fake-python",
)  # fmt: skip
CUDA = FIXTURES / "nvidia/cuda"


@contextmanager
def listener(family: socket.AddressFamily, address: str | tuple[str, int]) -> Iterator[tuple[object, list[str]]]:
    """A socket that records each connection and closes it: (its address, the connections)."""
    server = socket.socket(family, socket.SOCK_STREAM)
    server.bind(address)
    server.listen(16)
    server.settimeout(0.05)
    seen: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            seen.append("connected")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname(), seen
    finally:
        stop.set()
        thread.join(2)
        server.close()


def everything_host(tmp_path: Path, mirror: str) -> Path:
    """gpu-node-xid with more to tempt a check into asking this machine: Docker installed (its binaries
    and a daemon.json naming a mirror on the host's own loopback), nvidia-smi installed, two CUDA
    toolkits (13.0 with its GCC gate), SMBIOS tables, and a Jetson release file."""
    root = tmp_path / "everything"
    shutil.copytree(FIXTURES / "hosts/gpu-node-xid", root, symlinks=True)
    (root / "usr/bin").mkdir(parents=True)
    for name in ("docker", "dockerd", "nvidia-smi"):
        (root / "usr/bin" / name).write_text("#!/bin/sh\nexit 0\n")
    (root / "etc/docker").mkdir(parents=True)
    (root / "etc/docker/daemon.json").write_text(json.dumps({"registry-mirrors": [mirror]}))
    old = root / "usr/local/cuda-11.5"
    for sub in ("bin", "lib64"):
        (old / sub).mkdir(parents=True)
    shutil.copy(CUDA / "version-json/cuda-11.5.2-version.json", old / "version.json")
    (old / "lib64/libcudart.so.11.0").write_bytes(b"\x7fELF")
    new = root / "usr/local/cuda-13.0"
    for sub in ("bin", "include/crt"):
        (new / sub).mkdir(parents=True)
    (new / "include/crt/host_config.h").write_text((CUDA / "host-config/cuda-13.0.88-crt-host_config-gnu-check.h").read_text())
    (new / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": "13.0.88"}}))
    os.symlink("/usr/local/cuda-13.0", root / "usr/local/cuda")
    (root / "sys/firmware/dmi/tables").mkdir(parents=True)
    return root


@pytest.fixture
def this_machine(tmp_path, monkeypatch):
    """This machine, rigged: every tool a marker-leaving fake on PATH, Docker's socket and a loopback
    mirror that record connections, the Python-level probes marker-leaving; an environment that names
    toolkit paths (CUDA_HOME, LD_LIBRARY_PATH) a host's files could match."""
    marks = tmp_path / "marks"
    marks.mkdir()
    bin_dir = tmp_path / "bin"
    for tool in TOOLS:
        said = f"Cuda compilation tools, release 99.7, V{NVCC_VERSION}" if tool == "nvcc" else f"{tool} of this machine 13.0.4242"
        fake_tool(bin_dir, tool, f"touch '{marks}/{tool}'\necho '{said}'")

    def marking(name, result):
        def probe(*args, **kwargs):
            (marks / name).touch()  # the checks run in forked children: a file, not a variable, says it ran
            return result

        return probe

    monkeypatch.setattr(
        membw, "measure_cpu", marking("measure_cpu", membw.CpuBandwidth(READ_GBPS, READ_GBPS, 0.01, 0.01, 2, 1 << 26, 3, 0.1, 0.0))
    )
    monkeypatch.setattr(membw, "measure_gpus", marking("measure_gpus", []))
    monkeypatch.setattr(membw, "nvml_theoretical", marking("nvml_theoretical", {}))
    monkeypatch.setattr(nvidia, "probe_nvml", marking("probe_nvml", None))
    monkeypatch.setattr(quiet, "_busy_gpus", marking("busy_gpus", []))
    monkeypatch.setattr(quiet, "serving", marking("serving", None))
    with (
        listener(socket.AF_UNIX, str(tmp_path / "docker.sock")) as (_, docker_calls),
        listener(socket.AF_INET, ("127.0.0.1", 0)) as (mirror_address, mirror_calls),
    ):
        env = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "DOCKER_HOST": f"unix://{tmp_path / 'docker.sock'}",
            "DOCKER_CONFIG": str(tmp_path / "docker-config"),
            "CUDA_HOME": "/usr/local/cuda-11.5",
            "LD_LIBRARY_PATH": "/usr/local/cuda-11.5/lib64",
            "NVCC_CCBIN": str(bin_dir / "g++"),
        }
        host, port = mirror_address  # type: ignore[misc]
        yield {
            "env": env,
            "marks": marks,
            "python": str(bin_dir / "fake-python"),
            "docker": docker_calls,
            "mirror": mirror_calls,
            "mirror_url": f"http://{host}:{port}",
        }


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def assert_nothing_of_this_machine(report: dict, rig: dict) -> None:
    assert sorted(p.name for p in rig["marks"].iterdir()) == [], "this machine was asked"
    assert rig["docker"] == [] and rig["mirror"] == [], "a socket of this machine was connected to"
    assert [r["commands"] for r in report["results"] if r["commands"]] == [], "a command ran"
    assert not [r for r in report["results"] if r["state"] == "crashed"], report["results"]
    text = json.dumps(report)
    for own in (NVCC_VERSION, "99.7", str(READ_GBPS), "of this machine", "CUDA_HOME", "LD_LIBRARY_PATH", "nvcc on PATH"):
        assert own not in text, own
    hostname = socket.gethostname()
    assert hostname not in set(_strings(report)) and report["run"]["host"] != hostname
    if len(hostname) >= 6:
        assert hostname not in text
    assert "bandwidth" not in report["facts"]
    assert "measured" not in json.dumps(report["environment"])


@pytest.mark.parametrize("host", HOSTS)
def test_another_hosts_files_hold_nothing_of_this_machine(host, this_machine):
    args = ("check", "--root", str(FIXTURES / "hosts" / host), "--python", this_machine["python"], "--format", "json")
    proc = cli(*args, env=this_machine["env"])
    report = proc.json()
    assert_nothing_of_this_machine(report, this_machine)
    assert proc.exit_code in (0, 1, 3) and report["summary"]["exit_code"] == proc.exit_code
    why = {(item["check"], item["what"]): item["why"] for item in report["not_judged"]}
    assert why[("bandwidth", "the memory bandwidth")].startswith("another host's files (--root without --same-host)")


def test_a_host_with_everything_to_ask_is_judged_from_its_files_alone(tmp_path, this_machine):
    """Docker installed, nvidia-smi installed, CUDA toolkits, SMBIOS tables, a mirror on the host's own
    loopback: each is what the files say or not judged, never this machine's answer."""
    root = everything_host(tmp_path, this_machine["mirror_url"])
    args = ("check", "--root", str(root), "--python", this_machine["python"], "--format", "json")
    proc = cli(*args, env=this_machine["env"])
    report = proc.json()
    assert_nothing_of_this_machine(report, this_machine)
    assert proc.exit_code == 3 and report["summary"]["verdict"] == "incomplete"
    schema = json.loads(resources.files("decode_doctor.schema").joinpath("report-v2.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report)
    unjudged = {(item["check"], item["what"]) for item in report["not_judged"]}
    assert {
        ("bandwidth", "the memory bandwidth"),
        ("docker", "the Docker Engine"),
        ("referrers", f"the mirror {this_machine['mirror_url']}"),
        ("gpu", "PyTorch's CUDA build"),
        ("gpu", "the host compiler against the GCC versions /usr/local/cuda-13.0 accepts (GPU029)"),
    } <= unjudged, unjudged
    docker = report["facts"]["docker"]
    assert docker["installed"] is True and docker["reachable"] is False and docker["endpoint"] is None
    assert docker["mirrors"] == [this_machine["mirror_url"]]
    toolkits = {t["version"]: t["source"] for t in report["facts"]["gpu"]["toolkits"]}
    assert toolkits == {"11.5.2": "/usr/local/cuda-11.5/version.json", "13.0.88": "/usr/local/cuda/version.json"}  # read, never nvcc run
    assert "GPU015" not in {f["code"] for f in report["findings"]}  # nvidia-smi is installed there, whatever this PATH holds
    (environment,) = [row for row in report["environment"] if row["name"] == "Docker Engine"]
    assert environment["value"] == "not asked (another host's files)"


def test_the_jetson_power_mode_of_another_host_is_not_judged(this_machine):
    args = ("check", "--root", str(FIXTURES / "hosts/jetson-nano"), "--select", "accelerators", "--format", "json")
    report = cli(*args, env=this_machine["env"]).json()
    assert_nothing_of_this_machine(report, this_machine)
    (item,) = report["not_judged"]
    assert item["what"] == "the Jetson power mode and clocks" and item["why"].startswith("another host's files")


def test_same_host_keeps_asking_this_machine(tmp_path, this_machine):
    """The contrast that proves the rig: with --same-host (a node agent) the tools, the socket and the
    probes are this machine's and are asked."""
    root = everything_host(tmp_path, this_machine["mirror_url"])
    args = ("check", "--root", str(root), "--same-host", "--select", "gpu,bandwidth,docker", "--format", "json")
    report = cli(*args, env=this_machine["env"]).json()
    ran = {p.name for p in this_machine["marks"].iterdir()}
    assert {"nvidia-smi", "dmidecode", "measure_cpu", "probe_nvml"} <= ran, ran
    assert this_machine["docker"], "the Engine's socket was not asked"
    assert report["facts"]["bandwidth"]["cpu"]["measured"]["read_gbps"] == READ_GBPS


def test_the_support_bundle_of_another_host_carries_nothing_of_this_machine(tmp_path, this_machine):
    """`report`: no command output, no Docker config of this user, and the CPU row from the host's own
    /proc/cpuinfo (its count of processors, the architecture unknown), never this machine's."""
    import platform
    import tarfile

    config = tmp_path / "docker-config"
    config.mkdir()
    (config / "config.json").write_text(json.dumps({"auths": {"registry.this-machine.example": {}}}))
    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "hosts/gpu-node-xid", root, symlinks=True)
    (root / "proc/cpuinfo").write_text("".join(f"processor\t: {n}\nmodel name\t: Host CPU\n\n" for n in range(3)))
    out = tmp_path / "out"
    out.mkdir()
    proc = cli("report", "--root", str(root), "-o", str(out), env={**this_machine["env"], "DOCKER_CONFIG": str(config)})
    bundles = sorted(out.glob("*.tar.gz"))
    assert len(bundles) == 1, proc.stdout + proc.stderr
    with tarfile.open(bundles[0]) as tar:
        files = {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert not [name for name in files if name.startswith("raw/commands/") or name == "raw/docker-config.json"], sorted(files)
    assert b"registry.this-machine.example" not in b"\n".join(files.values())
    report = json.loads(files["report.json"])
    assert_nothing_of_this_machine(report, this_machine)
    (cpu,) = [row["value"] for row in report["environment"] if row["name"] == "CPU"]
    assert cpu == "Host CPU (3 logical CPUs, not read)" and platform.machine() not in cpu
