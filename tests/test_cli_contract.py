"""The CLI contract under bad input and faults (issue 17): every line a new user hit is a test here.
Options are validated when parsed, exit codes are honest, user errors are one line, Ctrl-C is 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from decode_doctor.engine.findings import CheckResult, Finding, Severity, State
from decode_doctor.reports.report import Report

from .conftest import FIXTURES, PLUGINS, need_unprivileged, run_dd, sigint_default
from .support.harness import cli

RHEL = FIXTURES / "hosts" / "swap60-rhel7"


def tiny_config(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 2048,
    }  # fmt: skip
    (directory / "config.json").write_text(json.dumps(config))
    return directory


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--context", "-5"), "'--context': \"-5\" is out of range"),
        (("--concurrency", "0"), "'--concurrency': \"0\" is out of range"),
        (("--target-tps", "nan"), "'--target-tps': \"nan\" is out of range"),
        (("--jobs", "0"), "'--jobs': \"0\" is out of range"),
        (("--jobs", "-3"), "'--jobs': \"-3\" is out of range"),
        (("--image-timeout", "0"), "'--image-timeout': \"0\" is out of range"),
        (("--max-pixels", "-1"), "'--max-pixels': -1 is not a number of pixels"),
        (("--max-pixels", "0"), "'--max-pixels': 0 is not a number of pixels"),
        (("--threads", "0"), "'--threads': \"0\" is out of range"),
        (("--nvidia-smi-timeout", "-1"), "'--nvidia-smi-timeout': \"-1\" is out of range"),
        (("--from-encoding", "klingon"), "unknown encoding 'klingon'"),
    ],
)
def test_numeric_and_enumerated_options_are_usage_errors_before_any_check_runs(args, words, tmp_path):
    result = cli("check", "--select", "decode-budget", "--model", str(tiny_config(tmp_path / "m")), *args)
    assert result.exit_code == 2 and words in result.stderr, result.stderr
    assert "crashed" not in result.stdout and "Traceback" not in result.stdout + result.stderr


def _report(states: list[State], severities: list[Severity], fail_on: str = "error", incomplete_fails: bool = True) -> Report:
    results = [CheckResult(check=f"c{i}", state=state, duration_s=0.0) for i, state in enumerate(states)]
    findings = [Finding(code="X001", check="c0", severity=s, title="t", message="m") for s in severities]
    report = Report(results, findings, [], {}, fail_on)
    report.incomplete_fails = incomplete_fails
    return report


def test_a_check_without_a_verdict_exits_3_unless_told_otherwise():
    assert _report([State.PASSED], []).exit_code == 0
    assert _report([State.FINDINGS], [Severity.ERROR]).exit_code == 1
    assert _report([State.PASSED, State.CRASHED], []).exit_code == 3
    assert _report([State.TIMED_OUT, State.FINDINGS], [Severity.ERROR]).exit_code == 3  # the verdict is incomplete
    assert _report([State.CRASHED], [], incomplete_fails=False).exit_code == 0  # --incomplete ignore
    assert _report([State.CRASHED], [Severity.ERROR], incomplete_fails=False).exit_code == 1
    assert _report([State.CRASHED], [Severity.ERROR], fail_on="never").exit_code == 0


def test_an_unwritable_output_is_one_line_not_an_internal_error(tmp_path):
    result = cli("check", "--root", str(RHEL), "--select", "swappiness", "-o", str(tmp_path / "nope" / "r.json"))
    assert result.exit_code == 2
    assert "internal error" not in result.stderr and "No such file or directory" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_undo_refuses_a_missing_state_dir_and_never_creates_it(tmp_path):
    missing = tmp_path / "no-such-state"
    result = cli("undo", "--state-dir", str(missing))
    assert result.exit_code == 2 and "--state-dir" in result.stderr and "does not exist" in result.stderr, result.stderr
    assert not missing.exists()


def test_undo_on_a_read_only_state_dir_is_one_line(tmp_path):
    need_unprivileged()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="dd-ro-state-") as top:  # /tmp/pytest-of-root is root's only
        state = Path(top) / "state"
        state.mkdir()
        os.chmod(top, 0o755)
        state.chmod(0o555)
        proc = run_dd("undo", "--state-dir", str(state), unprivileged=True)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert "Permission denied" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_report_exits_0_when_the_bundle_is_written_even_with_errors_in_it(tmp_path):
    empty = tmp_path / "empty-model"
    empty.mkdir()
    result = cli("report", "--root", str(RHEL), "--select", "decode-budget", "--model", str(empty), "--bandwidth", "9", "-o", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert "bundle written to" in result.stderr and "1 finding(s)" in result.stderr


def test_the_fix_hint_keeps_the_users_own_arguments():
    from decode_doctor.reports.text import rerun_hint

    argv = ["check", "--model", "models/qwen gbk", "--format", "json", "-o", "r.json", "--fix", "--select", "encodings"]
    assert rerun_hint(argv, "--fix", "--dry-run") == ("decode-doctor check --model 'models/qwen gbk' --select encodings --fix --dry-run")
    assert rerun_hint([], "--fix") == "decode-doctor check --fix"


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_ctrl_c_during_a_check_exits_130_and_leaves_no_process(tmp_path):
    dist = tmp_path / "site" / "dd_test_plugins-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dd-test-plugins\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[decode_doctor.checks]\ntestchecks = dd_test_checks\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(PLUGINS)]), "NO_COLOR": "1"}
    argv = [sys.executable, "-m", "decode_doctor", "check", "--root", str(RHEL), "--select", "sleeps-forever", "--timeout", "60"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=sigint_default)
    deadline = time.monotonic() + 30
    while not _children(proc.pid) and time.monotonic() < deadline:  # the check runs in a forked worker
        time.sleep(0.05)
    workers = _children(proc.pid)
    assert workers, "the check never started"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in err and "Traceback" not in err
    time.sleep(0.2)
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def test_after_the_fix_counts_what_was_resolved_and_names_each_fix_that_failed():
    from decode_doctor.app.fixing import _say_rechecked
    from decode_doctor.fixes.actions import FixPlan
    from decode_doctor.reports.report import FixSummary

    from .support.harness import Recorder

    def plan(code: str, path: str) -> FixPlan:
        return FixPlan(Finding(code, "images", Severity.ERROR, "t", "m", path=path), "quarantine", [])

    plans = [plan("IMG001", f"/d/{i}.jpg") for i in range(278)] + [plan("SWAP004", "/etc/sysctl.d/99-tuning.conf")]
    dialogue, summary = Recorder(), FixSummary()
    _say_rechecked(plans, {("SWAP004", "/etc/sysctl.d/99-tuning.conf")}, dialogue, summary, {})
    assert dialogue.lines == [
        "After the fix:",
        "    IMG001: resolved (278 findings)",
        "    SWAP004: FAILED: still present after the fix (/etc/sysctl.d/99-tuning.conf)",
    ]
    assert (summary.resolved, summary.still_present) == (278, 1)


def test_previews_under_root_say_where_they_write(host):
    root = host("swap60-rhel7")
    result = cli("check", "--select", "swappiness", "--root", str(root), "--fix", "--dry-run")
    assert f"write 1 to {root}/proc/sys/vm/swappiness (the --root copy of /proc/sys/vm/swappiness)" in result.stdout
    assert (
        f"(written to {root}/etc/sysctl.d/90-decode-doctor.conf, the --root copy of /etc/sysctl.d/90-decode-doctor.conf)" in result.stdout
    )


def test_empty_targets_are_reported_not_passed(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    images = cli("check", "--select", "images", "--images", str(empty))
    assert "IMG015" in images.stdout and "0 images under it" in images.stdout and "Ready" not in images.stdout
    assert f"not judged: images: the dataset {empty} (no image file under it)" in images.stdout and images.exit_code == 3
    text = cli("check", "--select", "encodings", "--model", str(empty))
    assert "ENC012" in text.stdout and "0 text files under it" in text.stdout
    budget = cli("check", "--select", "decode-budget", "--model", str(empty), "--bandwidth", "10GB/s")
    assert "DEC010" in budget.stdout and budget.exit_code == 3  # an error, and a budget that could not be computed


def test_a_selection_pulls_in_the_checks_it_cannot_judge_without(tmp_path, monkeypatch):
    from decode_doctor.app.requests import RunRequest
    from decode_doctor.app.service import with_requirements
    from decode_doctor.checks.budget.contract import BudgetOptions
    from decode_doctor.engine.registry import load

    registry = load()
    names = lambda classes: {cls.name for cls in classes}  # noqa: E731
    budget = [registry.checks["decode-budget"]]
    asked = RunRequest(models=(Path("/m"),))
    assert names(with_requirements(registry, budget, asked)) == {"decode-budget", "bandwidth", "gpu", "gpu-health", "model-artifacts"}
    given = RunRequest(models=(Path("/m"),), options=(BudgetOptions(bandwidth=900.0),))
    assert "bandwidth" not in names(with_requirements(registry, budget, given))  # given: nothing to measure
    assert names(with_requirements(registry, [registry.checks["referrers"]], RunRequest())) == {"referrers", "docker"}
    serving = [registry.checks["serving"]]
    assert names(with_requirements(registry, serving, RunRequest())) == {"serving"}  # no model files: no ceiling to compute
    assert "decode-budget" in names(with_requirements(registry, serving, asked))


def test_markdown_groups_findings_host_first_and_folds_per_file_lists(tmp_path):
    dataset = tmp_path / "ds"
    dataset.mkdir()
    for i in range(3):
        (dataset / f"{i}.jpg").write_bytes(b"not a jpeg")
    result = cli("check", "--root", str(RHEL), "--select", "swappiness,images", "--images", str(dataset), "--format", "markdown")
    table = [line for line in result.stdout.splitlines() if line.startswith("| ") and "Code" not in line]
    assert table[0].startswith("| SWAP001") and table[1].startswith("| IMG002") and "3 findings" in table[1]
    assert result.stdout.count("### IMG002") == 1 and "<details><summary>2 more</summary>" in result.stdout


def test_chart_ticks_fall_on_round_values_and_the_legend_is_outside_the_data():
    import re

    from decode_doctor.engine.facts import Chart, Series
    from decode_doctor.reports.html import nice_ticks, svg_chart

    assert nice_ticks(1.87) == [0, 0.5, 1.0, 1.5, 2.0] and nice_ticks(19624) == [0, 5000, 10000, 15000, 20000]
    assert nice_ticks(0.4) == [0, 0.1, 0.2, 0.3, 0.4] and nice_ticks(0.0) == [0.0, 1.0]
    series = (
        Series("TPOT p50", ((1, 0.2), (2, 0.4))),
        Series("TPOT p95", ((1, 0.3), (2, 1.87))),
        Series("a long ceiling label " * 4, ((1, 1), (2, 1))),
    )
    svg = svg_chart(Chart("concurrency", "TPOT (ms)", series, log_x=True))
    ticks = re.findall(r'text-anchor="end">([^<]*)</text>', svg)
    assert ticks == ["0", "0.5", "1.0", "1.5", "2.0"], ticks  # not 0.468, 0.936 …
    axis = max(float(y) for y in re.findall(r'y1="([\d.]+)" x2="[\d.]+" y2="[\d.]+" stroke="#888"', svg))  # the x axis
    legend = [float(y) for y in re.findall(r'<text x="[\d.]+" y="([\d.]+)" class="legend"', svg)]
    assert len(legend) == 3 and min(legend) > axis + 20  # below the axis and its label, never over a line
    assert len(set(legend)) == 2  # the long label wrapped to a second row


def test_list_names_each_input_by_its_flag_and_ignored_lines_say_the_selector_once():
    listing = cli("list").stdout
    assert "(--images)" in listing and "(--image)" not in listing and "(--model)" in listing
    from decode_doctor.reports.text import _ignored_lines

    class Item:
        def __init__(self, code, selector):
            self.code, self.selector, self.reason = code, selector, None

    class View:
        ignored = [Item("SWAP001", "SWAP001"), Item("SWAP004", "SWAP")]

    assert _ignored_lines(View()) == ["ignored SWAP001", "ignored SWAP004 by SWAP"]


def test_fifos_named_like_model_files_are_refused_not_waited_on(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    os.mkfifo(model / "config.json")
    os.mkfifo(tmp_path / "m.gguf")
    started = time.monotonic()
    estimate = cli("estimate", "--model", str(tmp_path / "m.gguf"), "--bandwidth", "10")
    assert estimate.exit_code == 2 and "a FIFO, not a regular file" in estimate.stderr
    text = cli("check", "--select", "encodings", "--model", str(model))
    assert "ENC008" in text.stdout and "a FIFO" in text.stdout and "timed out" not in text.stdout
    assert time.monotonic() - started < 20  # nothing blocked on a read


def test_a_png_whose_data_inflates_far_past_its_pixels_is_caught_with_flat_memory(tmp_path):
    import struct
    import zlib

    from decode_doctor.checks.images.decode import _png_structure

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    packer = zlib.compressobj(9)
    idat = b"".join(packer.compress(bytes(1 << 20)) for _ in range(64)) + packer.flush()  # 64 MiB of zeros
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
    (problem,) = _png_structure(png)
    assert problem.code == "IMG013" and "decompression bomb" in problem.message.english()


def test_file_names_that_are_not_utf8_are_shown_escaped_quarantined_and_restored(tmp_path):
    dataset = tmp_path / "data"
    dataset.mkdir()
    bad = os.fsdecode(bytes(dataset) + b"/bad\xff.jpg")
    Path(bad).write_bytes(b"not a jpeg")
    for fmt in ("json", "markdown", "html"):
        out = tmp_path / f"r.{fmt}"
        result = cli("check", "--select", "images", "--images", str(dataset), "--format", fmt, "-o", str(out))
        assert result.exit_code == 1 and "internal error" not in result.stderr, result.stderr
        assert ("bad\\\\xff.jpg" if fmt == "json" else "bad\\xff.jpg") in out.read_text(encoding="utf-8")
    paths = [f["path"] for f in json.loads((tmp_path / "r.json").read_text())["findings"]]
    assert paths == [f"{dataset}/bad\\xff.jpg"]
    state = tmp_path / "state"
    fixed = cli("check", "--select", "images", "--images", str(dataset), "--fix", "--yes", "--state-dir", str(state))
    assert "IMG002: resolved" in fixed.stdout and not Path(bad).exists()
    assert cli("undo", "--state-dir", str(state)).exit_code == 0
    assert Path(bad).read_bytes() == b"not a jpeg" and not (tmp_path / "data.quarantine").exists()


@pytest.mark.parametrize("kind", ["images", "encodings"])
def test_a_directory_swapped_for_a_link_after_the_check_is_refused_by_the_fix(tmp_path, kind):
    """Between the scan and the fix (the confirmation prompt is such a window) a scanned sub-directory
    becomes a symbolic link to a directory outside the tree holding a file of the same name and bytes:
    the fix must not convert or quarantine the file outside."""
    import shutil

    from .support.harness import run_fix

    tree, outside = tmp_path / "tree", tmp_path / "outside"
    sub = tree / "sub"
    sub.mkdir(parents=True)
    name, data = ("broken.jpg", b"not a jpeg") if kind == "images" else ("notes.txt", "配置文件说明，请勿修改。\n".encode("gbk"))
    (sub / name).write_bytes(data)
    shutil.copytree(sub, outside)

    def swap(step: int) -> None:
        if step == 2 and (sub / name).exists() and not sub.is_symlink():  # the intent is journaled; now the swap
            shutil.rmtree(sub)
            sub.symlink_to(outside)

    inputs = {"images": (tree,)} if kind == "images" else {"models": (tree,)}
    outcome, dialogue = run_fix(kind, state_dir=tmp_path / "state", on_step=swap, **inputs)
    assert (outside / name).read_bytes() == data, dialogue.text  # untouched
    assert "symbolic link or not a directory" in dialogue.text, dialogue.text
    assert not (tmp_path / "tree.quarantine" / "sub" / name).exists()
    # the re-check no longer sees the file (the link is not followed): still, a refused fix is not "resolved"
    assert ": resolved" not in dialogue.text and "FAILED" in dialogue.text, dialogue.text
    assert outcome.report.exit_code == 1 and outcome.report.fixes.resolved == 0


HOSTILE_CONFIG_VALUES = [
    ("num_hidden_layers", "NaN"), ("head_dim", '"64"'), ("hidden_size", "[256]"), ("max_position_embeddings", "-1"),
    ("kv_lora_rank", '"512a"'), ("n_shared_experts", '"' + "9" * 300 + '"'), ("num_hidden_layers", "18446744073709551616"),
]  # fmt: skip


@pytest.mark.parametrize(("key", "value"), HOSTILE_CONFIG_VALUES)
def test_a_config_value_of_the_wrong_type_is_a_finding_not_a_crash(tmp_path, key, value):
    from .support.harness import run_check

    model = tiny_config(tmp_path / "m")
    text = (model / "config.json").read_text()
    config = json.loads(text)
    config.pop(key, None)
    (model / "config.json").write_text(json.dumps(config)[:-1] + f', "{key}": {value}}}')
    for check in ("decode-budget", "model-artifacts"):
        codes = {f.code for f in run_check(check, models=(model,), options={"bandwidth": 10.0}).findings}
        assert codes & {"DEC010", "DEC011", "MDL003"}, (check, codes)
    result = cli("estimate", "--model", str(model), "--bandwidth", "10")
    assert (result.exit_code == 2 and key in result.stderr) or "not valid JSON" in result.stderr, result.stderr


def test_hostile_host_files_and_answers_are_read_or_refused(tmp_path):
    import shutil

    from decode_doctor.checks.docker.engine import engine_answers, mirrors
    from decode_doctor.checks.docker.referrers import Answer, judge_referrers
    from decode_doctor.checks.gpu.nvidia import judge, parse_torch_version_py, parse_version_json
    from decode_doctor.checks.gpu.torchprobe import _last_json_object

    from .support.harness import run_check

    assert parse_version_json('{"cuda": {"version": {"major": 12}}}') is None
    assert parse_version_json('{"cuda": {"version": "rocm"}}') is None
    assert judge("rocm", "550.54", "PyTorch").level == "unknown"
    assert parse_torch_version_py(b"__version__ = '2.4.0\xff'\ncuda = '12.1'\n".decode("utf-8", "replace"))["cuda"] == "12.1"
    assert _last_json_object('{"torch_dir": "/x", "python": "3.11"}\nWarning: something\n') == {"torch_dir": "/x", "python": "3.11"}
    _version, info = engine_answers({"Platform": "x"}, {"Runtimes": ["runc", "nvidia"], "RegistryConfig": []})
    assert sorted(info["Runtimes"]) == ["nvidia", "runc"] and "RegistryConfig" not in info
    assert mirrors({}, {"registry-mirrors": [5, "https://m.example/"]}) == ["https://m.example"]
    assert judge_referrers(Answer(200, "application/json", b"[" * 100_000))[0].code == "REF003"
    for name, text in (("runtimes", '{"runtimes": 5}'), ("deep", "[" * 100_000 + "]" * 100_000)):
        root = tmp_path / name
        (root / "etc/docker").mkdir(parents=True)
        (root / "etc/docker/daemon.json").write_text(text)
        run_check("docker", root, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    root = tmp_path / "swap"
    shutil.copytree(RHEL, root)
    meminfo = (root / "proc/meminfo").read_text().replace("SwapTotal:       3145724 kB", "SwapTotal:       3145724x kB")
    (root / "proc/meminfo").write_text(meminfo)
    assert {f.code for f in run_check("swappiness", root).findings} == {"SWAP001"}  # /proc/swaps still says swap


@pytest.mark.parametrize(
    "data", [b'[tool.decode-doctor]\nselect = ["\xff"]\n', b"[tool]\ndecode-doctor = 5\n", b"[tool.decode-doctor]\ntimeout = 1e999\n"]
)
def test_a_broken_config_file_is_a_usage_error(tmp_path, data):
    (tmp_path / "pyproject.toml").write_bytes(data)
    result = cli("check", "--select", "swappiness", "--root", str(RHEL), cwd=tmp_path)
    assert result.exit_code == 2 and "pyproject.toml" in result.stderr and "Traceback" not in result.stderr


def test_a_password_setting_in_a_gbk_config_leaves_no_trace_in_a_bundle(tmp_path):
    from .test_report import bundle_files

    model = tmp_path / "model"
    model.mkdir()
    config = {"model_type": "llama", "描述": "这是一个大型语言模型的配置文件，请勿修改。", "api_password": "hunter2-but-longer"}
    (model / "config.json").write_bytes(json.dumps(config, ensure_ascii=False).encode("gbk"))  # quoted by the finding
    out = tmp_path / "out"
    out.mkdir()
    result = cli("report", "--select", "encodings", "--model", str(model), "-o", str(out))
    (bundle,) = out.glob("*.tar.gz")
    files = bundle_files(bundle)
    assert result.exit_code == 0 and any(name.startswith("raw/files") for name in files)
    assert not [name for name, data in files.items() if b"hunter2" in data]
    for fmt in ("json", "markdown", "html"):  # check's own formats are redacted the same way
        assert "hunter2" not in cli("check", "--select", "encodings", "--model", str(model), "--format", fmt).stdout


def test_a_two_gigabyte_config_json_is_refused_with_bounded_memory(tmp_path):
    import resource

    from .support.harness import run_check

    model = tmp_path / "model"
    model.mkdir()
    with open(model / "config.json", "wb") as handle:
        handle.truncate(2 << 30)  # sparse: costs no disk
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    codes = {f.code for f in run_check("decode-budget", models=(model,), options={"bandwidth": 10.0}).findings}
    assert codes & {"DEC010", "DEC011"}, codes
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 400_000  # KiB; the file is 2 GiB


def test_an_unreadable_model_file_is_a_finding_not_a_crash():
    import tempfile

    need_unprivileged()
    with tempfile.TemporaryDirectory(prefix="dd-unreadable-") as top:
        model = tiny_config(Path(top) / "m")
        (model / "tokenizer_config.json").write_text('{"eos_token": "</s>"}')
        os.chmod(top, 0o755)
        model.chmod(0o755)
        (model / "config.json").chmod(0o644)
        (model / "tokenizer_config.json").chmod(0o000)
        proc = run_dd("check", "--select", "encodings,model-artifacts", "--model", str(model), unprivileged=True)
    assert "crashed" not in proc.stdout and "Traceback" not in proc.stdout + proc.stderr, proc.stdout
    assert "tokenizer_config.json: cannot read it (Permission denied)" in proc.stdout
    assert "not judged — " in proc.stdout and proc.returncode == 3  # an error, and a file nothing could judge


def test_a_fix_with_a_read_only_state_dir_is_one_line_and_changes_nothing():
    import shutil
    import tempfile

    child = need_unprivileged()
    with tempfile.TemporaryDirectory(prefix="dd-ro-fix-") as top:
        root, state = Path(top) / "host", Path(top) / "state"
        shutil.copytree(RHEL, root)
        state.mkdir()
        os.chmod(top, 0o755)
        state.chmod(0o555)
        if child.user:  # the host's files are the child's to change; only the state directory refuses
            subprocess.run(["chown", "-R", child.user, str(root)], check=True)
        before = (root / "proc/sys/vm/swappiness").read_text()
        args = ("check", "--select", "swappiness", "--root", str(root), "--fix", "--yes", "--state-dir", str(state))
        proc = run_dd(*args, unprivileged=True)
        assert proc.returncode == 2 and "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert "Permission denied" in proc.stderr and (root / "proc/sys/vm/swappiness").read_text() == before
