"""The swappiness check against captured host trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from decode_doctor.checks.swappiness.sysctl import persistent_setting, proc_sys_read_only
from decode_doctor.engine import Applicability, Context, Severity

from .conftest import FIXTURES
from .support.harness import run_check


def run_on(root: Path):
    return run_check("swappiness", root).findings


def test_high_swappiness_with_swap_is_a_fixable_warning():
    (finding,) = run_on(FIXTURES / "hosts" / "swap60-rhel7")
    assert finding.code == "SWAP001"
    assert finding.severity is Severity.WARNING
    assert finding.evidence["swappiness"] == 60
    assert finding.evidence["swap_total_kib"] == 3145724
    assert finding.evidence["swap_devices"] == ["/dev/dm-1"]
    assert finding.evidence["source"] == "/proc/sys/vm/swappiness"
    assert finding.fix is not None and finding.fix.fixer == "swappiness"
    assert finding.fix.applicability is Applicability.SAFE
    assert "3.0 GiB of swap" in finding.message


def test_no_swap_is_a_fact_not_a_finding():
    run = run_check("swappiness", FIXTURES / "hosts" / "noswap-desktop")
    assert run.findings == []
    assert run.facts.swappiness == 60 and not run.facts.has_swap
    assert run.facts.summary() == ["vm.swappiness 60 with no swap (it has no effect)"]
    assert [(row.name, row.value) for row in run.facts.environment()] == [("vm.swappiness", "60"), ("swap", "no swap")]


def test_read_only_proc_sys_says_so_and_offers_no_fix():
    findings = {f.code: f for f in run_on(FIXTURES / "hosts" / "container-ro")}
    assert set(findings) == {"SWAP003", "SWAP001"}
    assert findings["SWAP001"].fix is None
    assert "on the host" in findings["SWAP001"].message


def test_boot_time_configuration_that_raises_it_again():
    (finding,) = run_on(FIXTURES / "hosts" / "boot-regress")
    assert finding.code == "SWAP004"
    assert finding.path == "/etc/sysctl.d/99-tuning.conf"
    assert finding.evidence["persistent_value"] == "60"


def test_sysctl_precedence_etc_overrides_usr_lib_and_sysctl_conf_comes_last(tmp_path):
    root = tmp_path
    (root / "etc/sysctl.d").mkdir(parents=True)
    (root / "usr/lib/sysctl.d").mkdir(parents=True)
    (root / "usr/lib/sysctl.d/50-a.conf").write_text("vm.swappiness = 30\n")
    (root / "usr/lib/sysctl.d/70-b.conf").write_text("vm.swappiness = 40\n")
    (root / "etc/sysctl.d/70-b.conf").write_text("# masked the vendor file\n")
    ctx = Context(root=root)
    assert persistent_setting(ctx).value == "30"  # /etc/sysctl.d/70-b.conf hides the vendor 70-b
    (root / "etc/sysctl.conf").write_text("vm/swappiness=5\n")
    setting = persistent_setting(ctx)
    assert (setting.value, setting.source) == ("5", "/etc/sysctl.conf")
    assert persistent_setting(ctx, extra_file=("90-x.conf", "vm.swappiness = 1\n")).value == "5"


def test_low_swappiness_passes(host):
    root = host("swap60-rhel7")
    (root / "proc/sys/vm/swappiness").write_text("1\n")
    assert run_on(root) == []


def test_missing_tunable_is_not_a_finding(tmp_path):
    assert run_on(tmp_path) == []


def test_garbage_value_is_a_clear_error(host):
    root = host("swap60-rhel7")
    (root / "proc/sys/vm/swappiness").write_text("sixty\n")
    with pytest.raises(ValueError, match="holds 'sixty', not a number"):
        run_on(root)


def test_mount_table_detection_uses_the_longest_prefix():
    assert proc_sys_read_only(Context(root=FIXTURES / "hosts" / "container-ro"))
    assert not proc_sys_read_only(Context(root=FIXTURES / "hosts" / "swap60-rhel7"))


def test_the_boot_fix_writes_a_file_read_after_the_one_that_raises_it_and_takes_effect(host, state_dir):
    from .support.harness import cli

    root = host("boot-regress")  # 99-tuning.conf sets 60: a 90-… file would be overridden
    proc = cli("check", "--select", "swappiness", "--root", str(root), "--fix", "--yes", "--state-dir", str(state_dir))
    assert proc.exit_code == 0, proc.stdout + proc.stderr
    assert (root / "etc/sysctl.d/zz-decode-doctor.conf").is_file() and not (root / "etc/sysctl.d/90-decode-doctor.conf").exists()
    assert "SWAP004: resolved" in proc.stdout and "FAILED" not in proc.stdout
    assert run_on(root) == []  # the next run offers nothing again


def test_no_boot_fix_is_offered_when_sysctl_conf_is_read_after_every_file(host):
    root = host("boot-regress")
    (root / "etc/sysctl.d/99-tuning.conf").unlink()
    (root / "etc/sysctl.conf").write_text("vm.swappiness = 60\n")
    (finding,) = run_on(root)
    assert finding.code == "SWAP004" and finding.fix is None
    assert "edit /etc/sysctl.conf (vm.swappiness = 1)" in finding.message
