"""Report contract: JSON against the shipped schema, Markdown, plain text, exit codes, explain, list."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest

from .conftest import FIXTURES, SWAP_ONLY
from .support.harness import cli

SWAP_HOST = str(FIXTURES / "hosts" / "swap60-rhel7")


@pytest.fixture(scope="module")
def schema():
    text = resources.files("decode_doctor.schema").joinpath("report-v2.schema.json").read_text()
    return json.loads(text)


def test_json_report_validates_against_the_shipped_schema(schema):
    proc = cli("check", *SWAP_ONLY, "--root", SWAP_HOST, "--format", "json")
    report = json.loads(proc.stdout)
    jsonschema.Draft202012Validator(schema).validate(report)
    (finding,) = report["findings"]
    assert finding["code"] == "SWAP001" and finding["severity"] == "warning" and finding["check"] == "swappiness"
    assert finding["evidence"]["swappiness"] == 60
    assert report["results"][0]["state"] == "findings"
    assert report["results"][0]["files"][0] == "/proc/sys/vm/swappiness"
    assert report["facts"]["swappiness"]["swappiness"] == 60
    assert finding["fix"]["fixer"] == "swappiness" and finding["fix"]["applicability"] == "safe"
    assert report["run"]["host"] == "rhel7-node"
    assert report["summary"]["warnings"] == 1 and report["summary"]["exit_code"] == 0


def test_schema_rejects_a_broken_report(schema):
    report = json.loads(cli("check", *SWAP_ONLY, "--root", SWAP_HOST, "--format", "json").stdout)
    report["findings"][0]["severity"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(report, schema)


def test_output_file_and_markdown(tmp_path):
    target = tmp_path / "report.md"
    proc = cli("check", *SWAP_ONLY, "--root", SWAP_HOST, "--format", "markdown", "-o", str(target))
    assert proc.stdout == ""
    text = target.read_text()
    assert "| SWAP001 | warning | swappiness |" in text
    assert "### SWAP001: vm.swappiness is high on a host with swap" in text
    assert '"swap_total_kib": 3145724' in text


def test_plain_text_when_piped():
    proc = cli("check", *SWAP_ONLY, "--root", SWAP_HOST)
    assert "\x1b[" not in proc.stdout
    assert proc.stdout.startswith("SWAP001   warning  swappiness")
    assert "1 fixable" in proc.stdout


@pytest.mark.parametrize(("fail_on", "code"), [("error", 0), ("warning", 1), ("info", 1), ("never", 0)])
def test_exit_code_follows_fail_on(fail_on, code):
    assert cli("check", *SWAP_ONLY, "--root", SWAP_HOST, "--fail-on", fail_on).exit_code == code


def test_usage_errors_exit_2():
    assert cli("check", *SWAP_ONLY, "--root", "/no/such/dir").exit_code == 2
    proc = cli("check", "--root", SWAP_HOST, "--select", "NOPE")
    assert proc.exit_code == 2 and '--select "NOPE" matches no check or code' in proc.stderr
    proc = cli("check", "--root", SWAP_HOST, "--select", "swappiness", "--ignore", "SWP001")
    assert proc.exit_code == 2 and '--ignore "SWP001" matches no check or code' in proc.stderr
    assert cli("check", "--dry-run").exit_code == 2


def test_explain_has_every_section():
    proc = cli("explain", "swap001")
    assert proc.exit_code == 0
    for heading in (
        "SWAP001 (warning, check: swappiness)",
        "What it means",
        "Why it matters for LLM decode",
        "How to fix it by hand",
        "Automatic fix",
        "sysctl -w vm.swappiness=1",
    ):
        assert heading in proc.stdout
    unknown = cli("explain", "SWAP999")
    assert unknown.exit_code == 2 and "Did you mean" in unknown.stderr


def test_list_text():
    proc = cli("list")
    assert "swappiness:" in proc.stdout
    assert "SWAP001   warning  vm.swappiness is high on a host with swap  [fixable]" in proc.stdout


def test_every_builtin_code_is_documented_and_unique():
    from decode_doctor.engine.registry import load

    loaded = load()
    assert loaded.errors == []
    seen = set()
    for cls in loaded.checks.values():
        assert cls.name and cls.codes, cls
        for code in cls.codes:
            assert code.code not in seen
            seen.add(code.code)
            assert code.what and code.why and code.fix_by_hand and code.title


def test_a_report_from_every_check_validates(schema, tmp_path, monkeypatch):
    from decode_doctor.checks.bandwidth import membw

    from .support.imagegen import write_dataset
    from .support.modelgen import qwen2_7b
    from .support.textcorpus import write_corpus

    qwen2_7b(tmp_path / "model")
    write_corpus(tmp_path / "model" / "texts")
    write_dataset(tmp_path / "images")
    measured = membw.CpuBandwidth(20.0, 18.0, 0.02, 0.03, 2, 1 << 28, 3, 0.05, 0.0)
    monkeypatch.setattr(membw, "measure_cpu", lambda *args, **kwargs: measured)  # the schema, not a second of measuring
    proc = cli(
        "check",
        "--model",
        str(tmp_path / "model"),
        "--images",
        str(tmp_path / "images"),
        "--root",
        SWAP_HOST,
        "--same-host",  # the fixture stands for this machine: its bandwidth and its Engine (at DOCKER_HOST) are asked
        "--format",
        "json",
        env={"DOCKER_HOST": f"unix://{tmp_path}/none.sock"},
    )
    report = json.loads(proc.stdout)
    jsonschema.Draft202012Validator(schema).validate(report)
    checks = {r["check"] for r in report["results"]}
    from decode_doctor.engine.registry import load

    assert checks == set(load().checks)
    assert {f["check"] for f in report["findings"]} >= {"decode-budget", "encodings", "images", "swappiness", "docker"}
    assert {"bandwidth", "decode-budget", "encodings", "images", "swappiness", "docker"} <= set(report["facts"])


def test_terminal_output_is_a_rich_table_and_honours_no_color(tmp_path):
    import os
    import shutil
    import subprocess
    import sys

    if shutil.which("script") is None:
        pytest.skip("script(1) is needed to give the command a terminal")
    command = f"{sys.executable} -m decode_doctor check --select swappiness --root {SWAP_HOST}"

    def on_terminal(extra_env: dict[str, str]) -> str:
        env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | extra_env | {"TERM": "xterm-256color", "COLUMNS": "160"}
        return subprocess.run(["script", "-qec", command, "/dev/null"], capture_output=True, text=True, env=env, timeout=60).stdout

    coloured = on_terminal({})
    assert "Severity" in coloured and "\x1b[33m" in coloured  # a table, the warning in yellow
    plain = on_terminal({"NO_COLOR": "1"})
    assert "Severity" in plain and "\x1b[33m" not in plain
