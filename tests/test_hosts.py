"""Every fixture host through the host checks, against golden JSON; and the healthy host hears "ready".

Regenerate the golden files after a deliberate change with DD_UPDATE_GOLDEN=1 and read the diff.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from decode_doctor.checks.bandwidth import membw
from decode_doctor.engine import SkipCheck

from .conftest import FIXTURES
from .support.fakes import vm_dmidecode
from .support.harness import cli, run_check

GOLDEN = Path(__file__).resolve().parent / "golden"
HOSTS = sorted(p.name for p in (FIXTURES / "hosts").iterdir() if p.is_dir())
HOST_CHECKS = ("swappiness", "gpu")


def _snapshot(name: str, root: Path, bin_dir: Path) -> dict:
    try:
        run = run_check(name, root, env={"PATH": str(bin_dir)})
    except SkipCheck as skip:
        return {"skipped": str(skip)}
    findings = [
        {
            "code": f.code,
            "severity": f.severity.value,
            "message": f.message,
            "path": f.path,
            "evidence": f.evidence,
            "fix": None if f.fix is None else {"summary": f.fix.summary, "fixer": f.fix.fixer, "applicability": f.fix.applicability.value},
        }
        for f in run.findings
    ]
    return {"findings": findings, "facts": run.facts.to_dict() if run.facts else None}


@pytest.mark.parametrize("host", HOSTS)
def test_fixture_host_matches_its_golden_json(host, tmp_path):
    (tmp_path / "bin").mkdir()  # an empty PATH: no nvidia-smi, nvcc or dmesg of this machine
    got = {name: _snapshot(name, FIXTURES / "hosts" / host, tmp_path / "bin") for name in HOST_CHECKS}
    text = json.dumps(got, indent=2, ensure_ascii=False, sort_keys=True).replace(str(FIXTURES), "<fixtures>") + "\n"
    golden = GOLDEN / f"{host}.json"
    if os.environ.get("DD_UPDATE_GOLDEN") or not golden.exists():
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text(), f"{golden.name} differs; python tests/support/regenerate.py rewrites it (read the diff)"


@pytest.fixture
def quiet_host(monkeypatch, tmp_path):
    """This machine as a quiet neighbour: fixed bandwidth figures, no tools on PATH, no Docker. The
    healthy host's files stand for this machine's (--same-host): its bandwidth is measured here."""
    if os.path.exists("/var/run/docker.sock"):
        pytest.skip("a Docker Engine answers on the default socket here; the healthy host has none")

    def measure_cpu(buffer_bytes, budget_s=1.0, threads=None):
        return membw.CpuBandwidth(21.0, 19.0, 0.02, 0.03, 2, buffer_bytes, 3, 0.05, 0.0)

    monkeypatch.setattr(membw, "measure_cpu", measure_cpu)
    vm_dmidecode(tmp_path / "bin")  # no DIMMs to rate, as on a VM: BW002 does not apply
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    return {"PATH": str(tmp_path / "bin"), "DOCKER_CONFIG": str(tmp_path / "no-docker-config")}


def test_a_healthy_host_prints_one_all_clear_line(quiet_host):
    root = str(FIXTURES / "hosts" / "healthy-server")
    proc = cli("check", "--root", root, "--same-host", env=quiet_host)
    assert proc.exit_code == 0
    from decode_doctor.engine.registry import load

    (line,) = proc.stdout.splitlines()
    ran, skipped = map(int, re.fullmatch(r"Ready: no problems found \((\d+) checks ran, (\d+) did not apply\)\.", line).groups())
    assert ran == 3 and ran + skipped == len(load().checks)  # swappiness, bandwidth and docker judge; every other check is said
    verbose = cli("check", "--root", root, "--same-host", "--verbose", env=quiet_host).stdout
    assert "swappiness: vm.swappiness 1 with 3.0 GiB of swap on /dev/dm-1" in verbose
    assert "bandwidth: Memory read 21.0 GB/s, copy 19.0 GB/s" in verbose
    assert "docker: Docker is not installed" in verbose


def test_a_healthy_host_report_carries_its_facts_under_the_schema(quiet_host):
    from importlib import resources

    import jsonschema

    schema = json.loads(resources.files("decode_doctor.schema").joinpath("report-v2.schema.json").read_text())
    report = cli("check", "--root", str(FIXTURES / "hosts" / "healthy-server"), "--same-host", "--format", "json", env=quiet_host).json()
    jsonschema.Draft202012Validator(schema).validate(report)
    assert report["schema_version"] == 2 and report["findings"] == []
    assert report["facts"]["bandwidth"]["cpu"]["measured"]["read_gbps"] == 21.0
    assert report["facts"]["swappiness"]["persistent_value"] == "1"
    assert report["facts"]["docker"]["installed"] is False
