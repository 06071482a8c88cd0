"""Encodings: detection, conversion without a single silent corruption, undo, kills, links, unreadable files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from decode_doctor.checks.encodings.textenc import decide
from decode_doctor.cli.check import KILL_AT_ENV
from decode_doctor.fixes.journal import UndoError, undo_run

from .conftest import python_for, run_dd, tree_digest
from .support.harness import cli, fix_killed_at
from .support.textcorpus import ZH, corpus, write_corpus

ENC = ("--select", "encodings")


def check(*args: str, user: str | None = None, **kw):
    if user:
        return run_dd("check", *ENC, *args, user=user, **kw)
    return cli("check", *ENC, *args, **kw)


def findings_by_path(report: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for finding in report["findings"]:
        out.setdefault(finding["path"], []).append(finding)
    return out


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "model"
    items = write_corpus(root, outside=tmp_path / "elsewhere")
    return root, items


def test_every_item_gets_the_right_verdict(tree):
    root, items = tree
    report = json.loads(check("--model", str(root), "--format", "json").stdout)
    found = findings_by_path(report)
    for item in items:
        codes = {f["code"] for f in found.get(str(root / item.rel), [])}
        if item.expect == "clean":
            assert codes == set(), item.rel
        elif item.expect == "convert":
            assert codes == {"ENC001"}, (item.rel, codes)
        elif item.expect == "convert-or-ambiguous":
            assert codes in ({"ENC001"}, {"ENC002"}), (item.rel, codes)
        elif item.expect == "bom":
            assert codes == {"ENC006"}, item.rel
    expected_never = {
        "mixed/config.json": "ENC003",
        "truncated/utf8.txt": "ENC004",
        "truncated/gbk.txt": "ENC004",
        "binary/config.json": "ENC009",
        "binary/vocab.txt": "ENC009",
        "binary/tokenizer.json": "ENC009",
        "code/modeling_custom.py": "ENC005",
    }
    for rel, code in expected_never.items():
        assert {f["code"] for f in found[str(root / rel)]} == {code}, rel
        assert all(f["fix"] is None for f in found[str(root / rel)])
    links = found[str(root / "links/config.json")]
    assert [f["code"] for f in links] == ["ENC007"] and "outside the tree" in links[0]["message"]
    inside = found[str(root / "links/inside.json")]  # the same file as gbk/config.json: reported once, as a link
    assert [f["code"] for f in inside] == ["ENC007"] and "checked at its own path" in inside[0]["message"]
    assert found[str(root / "gbk/config.json")][0]["fix"] is not None
    mixed = found[str(root / "mixed/config.json")][0]
    assert mixed["evidence"]["lines"]["utf-8"] == [5]
    big = found[str(root / "large/merges.txt")][0]
    assert big["evidence"]["first_bad_line"] == 80_001  # past chardet's 200 KB default window


def test_fix_converts_with_zero_silent_corruptions_and_undo_is_byte_identical(tree, tmp_path):
    root, items = tree
    (root / "gbk/config.json").chmod(0o640)
    before = tree_digest(root)
    outside_before = tree_digest(tmp_path / "elsewhere")
    state = tmp_path / "state"
    proc = check("--model", str(root), "--fix", "--yes", "--state-dir", str(state))
    assert "applied" in proc.stdout, proc.stdout + proc.stderr
    converted = 0
    for item in items:
        now = (root / item.rel).read_bytes()
        if now == item.data:
            assert item.expect in ("clean", "never", "convert-or-ambiguous"), f"{item.rel} was not converted"
            continue
        converted += 1
        assert item.expect in ("convert", "convert-or-ambiguous", "bom"), f"{item.rel} must never change"
        assert now.decode("utf-8") == item.text, f"silent corruption in {item.rel}"
        assert not now.startswith(b"\xef\xbb\xbf")
        if b"\r\n" in item.text.encode():
            assert now.count(b"\r\n") == item.text.count("\r\n")
    assert converted >= sum(1 for i in items if i.expect in ("convert", "bom"))
    assert (root / "gbk/config.json").stat().st_mode & 0o777 == 0o640
    assert tree_digest(tmp_path / "elsewhere") == outside_before  # never written through the link
    undo = cli("undo", "--state-dir", str(state))
    assert undo.exit_code == 0, undo.stdout + undo.stderr
    assert tree_digest(root) == before


def test_from_encoding_forces_a_strict_decode(tmp_path):
    root = tmp_path / "m"
    root.mkdir()
    (root / "config.json").write_bytes(json.dumps({"greeting": "你好"}, ensure_ascii=False).encode("gbk"))
    report = json.loads(check("--model", str(root), "--format", "json").stdout)
    assert report["findings"][0]["code"] == "ENC002" and "pass --from-encoding" in report["findings"][0]["message"]
    forced = json.loads(check("--model", str(root), "--from-encoding", "gbk", "--format", "json").stdout)
    assert forced["findings"][0]["code"] == "ENC001"
    check("--model", str(root), "--from-encoding", "gbk", "--fix", "--yes", "--state-dir", str(tmp_path / "s"))
    assert json.loads((root / "config.json").read_text("utf-8")) == {"greeting": "你好"}
    (root / "other.json").write_bytes(b'{"a": "' + "中".encode("gbk") + b"\x80" + '文"}'.encode("gbk"))
    refused = json.loads(check("--model", str(root), "--from-encoding", "gbk", "--format", "json").stdout)
    (finding,) = [f for f in refused["findings"] if f["path"].endswith("other.json")]
    assert finding["code"] == "ENC010" and finding["fix"] is None


def test_sigkill_mid_conversion_leaves_each_file_whole_and_undo_restores_all(tmp_path):
    """In process: the fix runs in a forked child killed after each journal step in turn."""
    texts = {f"f{i}.json": json.dumps({"i": i, "d": ZH}, ensure_ascii=False) for i in range(4)}
    step, seen_kill = 0, 0
    while True:
        step += 1
        root = tmp_path / f"run{step}" / "m"
        root.mkdir(parents=True)
        for name, text in texts.items():
            (root / name).write_bytes(text.encode("gbk"))
        before = tree_digest(root)
        state = tmp_path / f"run{step}" / "state"
        killed = fix_killed_at(step, "encodings", models=(root,), options={"from_encoding": None}, state_dir=state)
        for name, text in texts.items():
            data = (root / name).read_bytes()
            assert data in (text.encode("gbk"), text.encode("utf-8")), f"step {step}: {name} is neither original nor converted"
        if not killed:
            assert not list(root.glob(".*.dd-tmp"))
            break
        seen_kill += 1
        try:
            undo_run(state)
        except UndoError:  # killed before any action was journaled
            pass
        assert tree_digest(root) == before, f"step {step}"
    assert seen_kill == 1 + 4 * len(texts) + 1


def test_sigkill_from_the_cli_mid_conversion(tmp_path):
    """The CLI sample: the real process killed after the first backup, then `undo`."""
    root = tmp_path / "m"
    root.mkdir()
    original = json.dumps({"d": ZH}, ensure_ascii=False).encode("gbk")
    (root / "config.json").write_bytes(original)
    state = tmp_path / "state"
    proc = run_dd("check", *ENC, "--model", str(root), "--fix", "--yes", "--state-dir", str(state), env={KILL_AT_ENV: "3"})
    assert proc.returncode == -9
    assert run_dd("undo", "--state-dir", str(state)).returncode == 0
    assert (root / "config.json").read_bytes() == original


def test_unreadable_file_is_a_finding(tmp_path):
    if python_for("nobody") is None:
        pytest.skip("no Python that user nobody can run with this checkout's packages")
    shared = Path(os.environ.get("TMPDIR", "/tmp")) / f"dd-enc-{os.getpid()}"
    try:
        (shared / "m").mkdir(parents=True)
        shared.chmod(0o755)
        (shared / "m").chmod(0o755)
        (shared / "m" / "config.json").write_text('{"a": 1}')
        (shared / "m" / "secret.json").write_text('{"a": 1}')
        (shared / "m" / "secret.json").chmod(0o600)
        proc = check("--model", str(shared / "m"), "--format", "json", user="nobody")
        report = json.loads(proc.stdout)
        (finding,) = report["findings"]
        assert finding["code"] == "ENC008" and "Permission denied" in finding["message"]
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_weights_are_never_read(tmp_path):
    from decode_doctor.checks.encodings.check import Encodings
    from decode_doctor.engine import Context

    root = tmp_path / "m"
    root.mkdir()
    (root / "config.json").write_bytes(json.dumps({"d": ZH}, ensure_ascii=False).encode("gbk"))
    for name in ("model.safetensors", "pytorch_model.bin", "model.gguf"):
        with open(root / name, "wb") as handle:
            handle.truncate(7 * 1024**3)

    def rchar() -> int:
        return int(next(line for line in Path("/proc/self/io").read_text().splitlines() if line.startswith("rchar")).split()[1])

    before = rchar()
    findings = Encodings().run(Context(models=(root,)))
    assert [f.code for f in findings] == ["ENC001"]
    assert rchar() - before < 1024 * 1024


@pytest.mark.parametrize("item", [i for i in corpus() if i.expect == "convert"], ids=lambda i: i.rel)
def test_decide_returns_the_true_text(item):
    verdict = decide(item.data, Path(item.rel).suffix)
    assert verdict.status == "convert"
    assert verdict.text.lstrip("\ufeff") == item.text


def test_hugging_face_cache_snapshot_links_into_its_blobs(tmp_path):
    repo = tmp_path / "hub" / "models--org--name"
    (repo / "blobs").mkdir(parents=True)
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    blob = repo / "blobs" / "0f1e2d"
    blob.write_bytes(json.dumps({"description": ZH}, ensure_ascii=False).encode("gbk"))
    os.symlink("../../blobs/0f1e2d", repo / "snapshots/abc123/config.json")
    report = json.loads(check("--model", str(repo / "snapshots/abc123"), "--format", "json").stdout)
    (finding,) = report["findings"]
    assert finding["code"] == "ENC001" and finding["fix"] is None  # checked through the link, never written through it
    assert "a symbolic link: convert its target" in finding["message"]
