"""Selection and configuration files."""

from __future__ import annotations

import json

from .conftest import FIXTURES, SWAP_ONLY
from .support.harness import cli

SWAP_HOST = str(FIXTURES / "hosts" / "swap60-rhel7")


def test_pyproject_ignore_with_reason_is_counted_not_hidden(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.decode-doctor]\nignore = [{ code = "SWAP001", reason = "swap is the batch tier" }]\nfail-on = '
        '"warning"\n'
    )
    proc = cli("check", *SWAP_ONLY, "--root", SWAP_HOST, "--format", "json", cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert report["findings"] == []
    assert report["summary"]["ignored"] == 1
    assert report["ignored"][0] == {
        "code": "SWAP001",
        "check": "swappiness",
        "selector": "SWAP001",
        "reason": "swap is the batch tier",
        "message": report["ignored"][0]["message"],
    }
    assert proc.exit_code == 0
    text = cli("check", *SWAP_ONLY, "--root", SWAP_HOST, cwd=tmp_path).stdout
    assert "ignored SWAP001 (swap is the batch tier)" in text
    assert "1 ignored" in text


def test_decode_doctor_toml_and_fail_on(tmp_path):
    (tmp_path / "decode-doctor.toml").write_text('select = ["SWAP"]\nfail-on = "warning"\n')
    assert cli("check", "--root", SWAP_HOST, cwd=tmp_path).exit_code == 1


def test_cli_ignore_by_check_name_and_prefix():
    for selector in ("swappiness", "SWAP", "SWAP001"):
        report = json.loads(cli("check", *SWAP_ONLY, "--root", SWAP_HOST, "--ignore", selector, "--format", "json").stdout)
        assert report["findings"] == [] and report["summary"]["ignored"] == 1


def test_select_restricts_findings_to_the_codes_named():
    report = json.loads(cli("check", "--root", SWAP_HOST, "--select", "SWAP004", "--format", "json").stdout)
    assert report["findings"] == []
    assert report["ignored"][0]["selector"] == "not selected"


def test_bad_config_is_a_usage_error(tmp_path):
    (tmp_path / "decode-doctor.toml").write_text('selekt = ["SWAP"]\n')
    proc = cli("check", *SWAP_ONLY, "--root", SWAP_HOST, cwd=tmp_path)
    assert proc.exit_code == 2 and "unknown key(s) selekt" in proc.stderr
    (tmp_path / "decode-doctor.toml").write_text("this is = = not toml")
    proc = cli("check", *SWAP_ONLY, "--root", SWAP_HOST, cwd=tmp_path)
    assert proc.exit_code == 2 and "not valid TOML" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_explicit_config_file(tmp_path):
    config = tmp_path / "ops.toml"
    config.write_text('[tool.decode-doctor]\nfail-on = "info"\n')
    assert cli("check", *SWAP_ONLY, "--root", SWAP_HOST, "--config", str(config)).exit_code == 1
