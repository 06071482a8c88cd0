"""Xid events from real kernel logs, judged with NVIDIA's Xid catalog (issue 18)."""

from __future__ import annotations

import shutil

import pytest

from decode_doctor.checks.gpu import xid

from .conftest import FIXTURES
from .support.harness import cli
from .test_gpu import gpu_check

LOGS = FIXTURES / "nvidia/kernel-logs"
ERRORS = FIXTURES / "nvidia/nvidia-smi-errors"
# the Xids issue 18 names as actionable, beside the rest of the published catalog
ACTIONABLE = (13, 31, 32, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109, 119, 120, 154)


def test_the_catalog_gives_meaning_cause_next_step_and_source_for_each_actionable_xid():
    table = xid.catalog()
    assert len(table) == 172 and xid.source_url().startswith("https://docs.nvidia.com/deploy/xid-errors/")
    for number in ACTIONABLE:
        entry = table[number]
        assert entry.meaning and entry.cause and entry.next_step and entry.urgency in xid.URGENCY, number
    assert table[48].urgency == "gpu" and table[13].urgency == "application" and table[63].urgency == "info"
    assert "Unused" in table[61].meaning and "older GPUs" in table[61].cause  # pre-Ampere only


def test_old_and_new_line_formats_and_every_timestamp_style():
    old = (LOGS / "syslog-xid-13-old-format-2012.txt").read_text().splitlines()
    (event,) = xid.xid_events(old)
    assert (event.number, event.device, event.time, event.line) == (13, "0000:03:00", "May 10 22:25:01", 2)
    times = {
        "dmesg-ctime-xid-13x3-109-gpud.txt": "Fri Aug 30 11:43:09 2024",
        "dmesg-xid-44-31-2015.txt": "94.573839 s after boot",
        "journal-xid-38-109-polish-month-590.txt": "kwi 15 07:56:59",
        "talos-kern-xid-154-gsp-reset-required.txt": "2026-04-22T21:30:51.870495804Z",
        "kernel-xid-45-caused-by-149-145-8gpu.txt": None,
    }
    for name, expected in times.items():
        first = xid.xid_events((LOGS / name).read_text().splitlines())[0]
        assert first.time == expected, name
    assert xid.line_time("2026-03-01T12:41:30+0100 host kernel: ") == "2026-03-01T12:41:30+0100"


@pytest.mark.parametrize(
    ("name", "counts", "severity", "words"),
    [
        ("dmesg-ctime-xid-13x3-109-gpud.txt", {13: 3, 109: 1}, "error", "Context Switch Timeout"),
        ("syslog-xid-13-old-format-2012.txt", {13: 1}, "warning", "compute-sanitizer"),
        ("journal-xid-38-109-polish-month-590.txt", {38: 1, 109: 5}, "error", "kwi 15 07:56:59"),
        ("talos-kern-xid-154-gsp-reset-required.txt", {154: 1}, "error", "The driver now asks for: GPU Reset Required"),
        ("kernel-xid-45-caused-by-149-145-8gpu.txt", {45: 7}, "info", "caused by Xid 145, 149"),
        ("dmesg-xid-44-31-2015.txt", {31: 1, 44: 1}, "warning", "GPU memory page fault"),
    ],
)
def test_analyze_counts_each_xid_with_its_catalog_entry(name, counts, severity, words):
    report = cli("analyze", str(LOGS / name), "--format", "json").json()
    (finding,) = [f for f in report["findings"] if f["code"] == "GPU018"]
    assert finding["severity"] == severity and words in finding["message"]
    assert {x["xid"]: x["count"] for x in finding["evidence"]["xids"]} == counts
    for item in finding["evidence"]["xids"]:
        assert item["first"]["line"] <= item["last"]["line"] and item["source"].startswith("https://docs.nvidia.com/")
        assert item["meaning"] and item["next_step"]
    assert finding["evidence"]["line"] == min(x["first"]["line"] for x in finding["evidence"]["xids"])


def test_first_and_last_time_of_a_repeated_xid():
    report = cli("analyze", str(ERRORS / "dmesg-xid-119-gsp-timeout-535.txt"), "--format", "json").json()
    (finding,) = report["findings"]
    (item,) = finding["evidence"]["xids"]
    assert (item["first"]["time"], item["last"]["time"]) == ("Fri Mar  3 04:27:08 2023", "Fri Mar  3 04:28:38 2023")
    assert "Fri Mar  3 04:27:08 2023 → Fri Mar  3 04:28:38 2023" in finding["message"]


def test_an_xid_79_is_the_gpu_off_the_bus_citing_its_own_line():
    report = cli("analyze", str(LOGS / "kernel-xid-79-fallen-off-rtx5090.txt"), "--format", "json").json()
    assert [(f["code"], f["evidence"]["line"]) for f in report["findings"]] == [("GPU014", 3)]
    assert report["findings"][0]["message"].startswith("The kernel log says: NVRM: Xid (PCI:0000:06:00): 79")


def test_an_xid_the_catalog_does_not_have_is_reported_not_dropped():
    line = "kernel: NVRM: Xid (PCI:0000:01:00): 175, pid=4242, name=python3, GSP RPC timeout (DUP_OBJECT)"
    (item,) = xid.group(xid.xid_events([line]))
    assert "not in NVIDIA's Xid catalog" in xid.describe(item)["catalog"] and "not in NVIDIA's catalog" in xid.summary(item)
    assert xid.urgency([item]) == "report"


def test_lines_that_only_look_like_xids_are_not_counted():
    lines = [
        "NVRM: Xid (PCI:0000:01:00): abc, not a number",
        "NVRM: Xid (PCI:zz:01:00): 13, not a PCI address",
        "NVRM: Xid (PCI:0000:01:00): 123456, too many digits",
        "NVRM: Xid (" + "0" * 5000 + "): 13, an address past the line limit",
        "user wrote NVRM: Xid without a device",
    ]
    assert xid.xid_events(lines) == []


def test_the_live_check_counts_the_log_with_most_xids_once(tmp_path):
    host = tmp_path / "host"
    (host / "var/log").mkdir(parents=True)
    shutil.copy(LOGS / "dmesg-ctime-xid-13x3-109-gpud.txt", host / "var/log/kern.log")
    shutil.copy(LOGS / "dmesg-ctime-xid-13x3-109-gpud.txt", host / "var/log/syslog")  # the same events again
    (host / "var/log/messages").write_text((LOGS / "syslog-xid-13-old-format-2012.txt").read_text())
    run = gpu_check(tmp_path, "exit 127", root=host)
    finding = run.codes()["GPU018"]
    assert {x["xid"]: x["count"] for x in finding.evidence["xids"]} == {13: 3, 109: 1}
    assert finding.evidence["source"] == "/var/log/kern.log" and finding.severity.value == "error"


def test_xids_beside_a_hung_nvidia_smi_are_reported(tmp_path):
    """Issue 18: a GSP timeout (119) hangs nvidia-smi; the Xids in the kernel log say why."""
    host = tmp_path / "host"
    (host / "var/log").mkdir(parents=True)
    log = (ERRORS / "dmesg-xid-119-gsp-timeout-535.txt").read_text()
    log += (LOGS / "talos-kern-xid-154-gsp-reset-required.txt").read_text()
    log += (LOGS / "kernel-xid-45-caused-by-149-145-8gpu.txt").read_text()
    (host / "var/log/kern.log").write_text(log)
    found = gpu_check(tmp_path, "sleep 30", root=host, options={"nvidia_smi_timeout": 0.5}).codes()
    assert "GPU016" in found
    xids = {x["xid"]: x["count"] for x in found["GPU018"].evidence["xids"]}
    assert xids == {45: 7, 119: 3, 154: 1} and found["GPU018"].severity.value == "error"
    assert "The driver now asks for: GPU Reset Required" in found["GPU018"].message
