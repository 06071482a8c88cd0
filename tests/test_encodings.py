"""Encodings: detection, conversion without a single silent corruption, undo, kills, links, unreadable files."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decode_doctor.checks.encodings.textenc import Status, decide
from decode_doctor.fixes.journal import UndoError, undo_run

from .conftest import kill_at_step, need_unprivileged, run_dd, tree_digest
from .support.harness import cli, fix_killed_at, run_check
from .support.textcorpus import CS, HU, JA, KO_LONG, LATIN, PL, RU, TR, ZH, ZH_TW, corpus, write_corpus

ENC = ("--select", "encodings")


def check(*args: str, unprivileged: bool = False, **kw):
    if unprivileged:
        return run_dd("check", *ENC, *args, unprivileged=True, **kw)
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
        elif item.expect == "ignored":
            assert codes == set(), item.rel
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
            assert item.expect in ("clean", "never", "ignored", "convert-or-ambiguous"), f"{item.rel} was not converted"
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


def _undecidable_gbk(path: Path) -> bytes:
    """Two hanzi in a large ASCII JSON: GBK, Thai and Cyrillic readings cannot be told apart."""
    data = json.dumps({**{f"token_{i}": i for i in range(300)}, "greeting": "你好"}, ensure_ascii=False).encode("gbk")
    path.write_bytes(data)
    return data


def test_a_refusal_shows_the_readings_side_by_side_and_the_command_that_decides(tmp_path):
    root = tmp_path / "m"
    root.mkdir()
    _undecidable_gbk(root / "config.json")
    report = json.loads(check("--model", str(root), "--format", "json").stdout)
    (finding,) = report["findings"]
    assert finding["code"] == "ENC002" and finding["fix"] is None
    readings = finding["evidence"]["readings"]
    assert readings[0] == {"encoding": "gbk", "language": "Chinese", "words": ["你好"]}
    assert len(readings) >= 2 and all(r["words"] and r["words"] != ["你好"] for r in readings[1:])
    assert "gbk (Chinese): 你好 | " in finding["message"]
    command = finding["evidence"]["decide_with"]
    assert command in finding["message"] and f"{root / 'config.json'}=gbk" in command
    argv = shlex.split(command.split(" (or ")[0])
    assert argv[:2] == ["decode-doctor", "check"]
    applied = check(*argv[2:], "--yes", "--state-dir", str(tmp_path / "s"))
    assert "applied" in applied.stdout, applied.stdout
    assert json.loads((root / "config.json").read_text("utf-8"))["greeting"] == "你好"


def test_from_encoding_never_overrides_a_confident_reading(tmp_path):
    """The Shift_JIS README that `--from-encoding gbk` once turned into "# 儌僨儖偺愢柧"."""
    root = tmp_path / "m"
    root.mkdir()
    readme = "# モデルの説明\n\nこのモデルは日本語の文章を生成します。\n".encode("shift_jis")
    (root / "README.md").write_bytes(readme)
    proc = check("--model", str(root), "--from-encoding", "gbk", "--fix", "--yes", "--state-dir", str(tmp_path / "s"), "--format", "json")
    (finding,) = json.loads(proc.stdout)["findings"]
    assert finding["code"] == "ENC010" and finding["fix"] is None
    assert finding["message"].startswith(f"{root / 'README.md'}: you said gbk; this file reads as cp932 (Japanese)")
    assert "モデルの説明" in finding["message"] and "儌僨儖偺愢柧" in finding["message"]
    assert (root / "README.md").read_bytes() == readme
    # the encoding it does read as is no contradiction: converted
    check("--model", str(root), "--from-encoding", "shift_jis", "--fix", "--yes", "--state-dir", str(tmp_path / "s2"))
    assert (root / "README.md").read_text("utf-8").startswith("# モデルの説明")


def test_from_encoding_on_a_directory_of_mixed_encodings(tmp_path):
    root = tmp_path / "m"
    root.mkdir()
    gbk_config = json.dumps({"description": ZH}, ensure_ascii=False).encode("gbk")
    (root / "config.json").write_bytes(gbk_config)  # decided on its own: GBK
    readme = f"# モデル\n\n{JA}\n".encode("euc_jp")
    (root / "README.md").write_bytes(readme)  # decided on its own: EUC-JP
    undecided = _undecidable_gbk(root / "tokenizer_config.json")
    labels = "id,label\r\n1,hará\r\n".encode("cp1252")
    (root / "labels.csv").write_bytes(labels)  # undecided: cp1252 «hará» (Spanish) or windows-1257 «harį» (Lithuanian), both words
    # one encoding for every undecided file: applied where it fits, reported where it does not
    report = json.loads(check("--model", str(root), "--from-encoding", "gbk", "--format", "json").stdout)
    by_file = {Path(f["path"]).name: f for f in report["findings"]}
    assert by_file["config.json"]["code"] == "ENC001"  # GBK, read so on its own
    assert by_file["tokenizer_config.json"]["code"] == "ENC001" and "--from-encoding gbk" in by_file["tokenizer_config.json"]["message"]
    assert by_file["README.md"]["code"] == "ENC010" and "reads as euc_jp" in by_file["README.md"]["message"]
    assert by_file["labels.csv"]["code"] == "ENC010" and "fails at byte" in by_file["labels.csv"]["message"]
    # file by file: each decision applies to its file only
    state = tmp_path / "state"
    proc = check(
        "--model", str(root),
        "--from-encoding", f"{root / 'labels.csv'}=cp1252",
        "--from-encoding", f"{root / 'tokenizer_config.json'}=gbk",
        "--fix", "--yes", "--state-dir", str(state),
    )  # fmt: skip
    assert "applied" in proc.stdout, proc.stdout
    for name, data, encoding in (
        ("config.json", gbk_config, "gbk"),
        ("README.md", readme, "euc_jp"),
        ("tokenizer_config.json", undecided, "gbk"),
        ("labels.csv", labels, "cp1252"),
    ):
        assert (root / name).read_bytes().decode("utf-8") == data.decode(encoding), name
    assert cli("undo", "--state-dir", str(state)).exit_code == 0
    assert (root / "labels.csv").read_bytes() == labels and (root / "config.json").read_bytes() == gbk_config


def test_from_encoding_usage_errors_are_one_line(tmp_path):
    root = tmp_path / "m"
    root.mkdir()
    _undecidable_gbk(root / "config.json")
    proc = run_dd("check", *ENC, "--model", str(root), "--from-encoding", "klingon")  # the real process, once
    assert proc.returncode == 2 and "Invalid value for '--from-encoding': unknown encoding 'klingon'" in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    for value, error in (
        ("rot13", "'rot13' is not a text encoding"),
        (f"{root / 'nope.json'}=gbk", "nope.json: no such file"),
        ("=gbk", "needs a path before '='"),
    ):
        result = cli("check", *ENC, "--model", str(root), "--from-encoding", value)
        assert result.exit_code == 2 and error in result.stderr, (value, result.stderr)
    (tmp_path / "elsewhere.json").write_text("{}")
    report = json.loads(check("--model", str(root), "--from-encoding", f"{tmp_path / 'elsewhere.json'}=gbk", "--format", "json").stdout)
    assert {f["code"] for f in report["findings"]} == {"ENC002", "ENC011"}


def test_from_encoding_that_does_not_fit_is_refused(tmp_path):
    root = tmp_path / "m"
    root.mkdir()
    (root / "other.json").write_bytes(b'{"a": "' + "中".encode("gbk") + b"\x80" + '文"}'.encode("gbk"))
    refused = json.loads(check("--model", str(root), "--from-encoding", "gbk", "--format", "json").stdout)
    (finding,) = refused["findings"]
    assert finding["code"] == "ENC010" and finding["fix"] is None


def test_explain_enc002_names_the_per_file_decision():
    text = cli("explain", "ENC002").stdout
    assert "--from-encoding PATH=ENCODING" in text and "never to one it reads as another encoding" in text


def test_weights_given_directly_are_not_text(tmp_path):
    weights = tmp_path / "model.Q4_K_M.gguf"
    weights.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(range(256)) * 64)
    report = json.loads(check("--model", str(weights), "--format", "json").stdout)
    assert [(f["code"], f["message"]) for f in report["findings"]] == [
        ("ENC012", f"{weights}: 0 text files under it: no encoding was checked.")  # said, not a silent pass
    ]


def test_sigkill_mid_conversion_leaves_each_file_whole_and_undo_restores_all(tmp_path):
    """In process: the fix runs in a forked child killed after each journal step in turn."""
    texts = {f"f{i}.json": json.dumps({"i": i, "d": ZH}, ensure_ascii=False) for i in range(2)}
    step, seen_kill = 0, 0
    while True:
        step += 1
        root = tmp_path / f"run{step}" / "m"
        root.mkdir(parents=True)
        for name, text in texts.items():
            (root / name).write_bytes(text.encode("gbk"))
        before = tree_digest(root)
        state = tmp_path / f"run{step}" / "state"
        killed = fix_killed_at(step, "encodings", models=(root,), options={"from_encoding": ()}, state_dir=state)
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
    proc = run_dd("check", *ENC, "--model", str(root), "--fix", "--yes", "--state-dir", str(state), env=kill_at_step(3))
    assert proc.returncode == -9
    assert run_dd("undo", "--state-dir", str(state)).returncode == 0
    assert (root / "config.json").read_bytes() == original


def test_unreadable_file_is_a_finding(tmp_path):
    need_unprivileged()
    shared = Path(os.environ.get("TMPDIR", "/tmp")) / f"dd-enc-{os.getpid()}"
    try:
        (shared / "m").mkdir(parents=True)
        shared.chmod(0o755)
        (shared / "m").chmod(0o755)
        (shared / "m" / "config.json").write_text('{"a": 1}')
        (shared / "m" / "secret.json").write_text('{"a": 1}')
        (shared / "m" / "secret.json").chmod(0o000)  # refused to its owner too, once DAC override is gone
        proc = check("--model", str(shared / "m"), "--format", "json", unprivileged=True)
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

    warm = tmp_path / "warm"  # the modules and language models the check loads once are not the weights
    warm.mkdir()
    (warm / "config.json").write_bytes((root / "config.json").read_bytes())
    Encodings().run(Context(models=(warm,)))
    before = rchar()
    findings = Encodings().run(Context(models=(root,)))
    assert [f.code for f in findings] == ["ENC001"]
    assert rchar() - before < 1024 * 1024


@pytest.mark.parametrize("item", [i for i in corpus() if i.expect.startswith("convert")], ids=lambda i: i.rel)
def test_decide_returns_the_true_text_or_refuses(item):
    verdict = decide(item.data, Path(item.rel).suffix)
    if item.expect == "convert":
        assert verdict.status == Status.CONVERT, verdict.reason
    if verdict.status == Status.CONVERT:
        assert verdict.text.lstrip("\ufeff") == item.text
    else:
        assert verdict.status == Status.AMBIGUOUS and len(verdict.readings) >= 2


@settings(derandomize=True, deadline=None, max_examples=200, database=None)
@given(data=st.binary(max_size=512), suffix=st.sampled_from(["", ".json", ".txt", ".py", ".md"]))
def test_decide_never_raises_and_a_conversion_is_a_strict_decode(data, suffix):
    verdict = decide(data, suffix)
    if verdict.status == Status.CONVERT:
        assert data.decode(verdict.encoding) == verdict.text


SAMPLES = [(ZH, "gbk"), (ZH_TW, "big5"), (JA, "shift_jis"), (JA, "euc_jp"), (KO_LONG, "euc_kr"), (HU, "cp1250"), (HU, "iso8859_2"),
           (CS, "iso8859_2"), (PL, "cp1250"), (TR, "cp1254"), (RU, "cp1251"), (RU, "koi8_r"), (LATIN, "cp1252")]  # fmt: skip


@settings(derandomize=True, deadline=None, max_examples=250, database=None)
@given(sample=st.sampled_from(SAMPLES), start=st.integers(0, 60), length=st.integers(4, 60))
def test_any_piece_of_real_text_is_converted_right_or_refused(sample, start, length):
    """A slice of a real sentence, as a config value: never converted to other characters."""
    text, encoding = sample
    piece = text[start : start + length]
    data = json.dumps({"description": piece}, ensure_ascii=False).encode(encoding)
    verdict = decide(data, ".json")
    if verdict.status == Status.CONVERT:
        assert json.loads(verdict.text)["description"] == piece, (verdict.encoding, verdict.reason)


@pytest.mark.parametrize(
    "text",
    ["猫\n狗\n", "这是一个大型语言模型\n请勿修改\n", "이것은 설정 파일\n모델\n", "これは設定\nファイルです\n", "B-人名\nI-人名\nO\n"],
)
@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_bom_holding_only_cjk_is_converted(tmp_path, text, codec):
    """The dotnet-export classes.txt and labels.txt: CJK lines in UTF-16 without a BOM have almost no
    zero bytes (only their line ends), so the zero-lane rule never saw them: they were called binary."""
    verdict = decide(text.encode(codec), ".txt")
    assert (verdict.status, verdict.encoding, verdict.text) == ("convert", codec, text)
    model = tmp_path / "m"
    model.mkdir()
    (model / "classes.txt").write_bytes(text.encode(codec))
    run = run_check("encodings", models=(model,))
    assert [f.code for f in run.findings] == ["ENC001"] and run.findings[0].evidence["encoding"] == codec


@settings(derandomize=True, deadline=None, max_examples=400, database=None)
@given(data=st.binary(min_size=4, max_size=256).filter(lambda d: len(d) % 2 == 0 and d[:2] not in (b"\xff\xfe", b"\xfe\xff")))
def test_random_bytes_of_even_length_are_never_called_utf16(data):
    """Without a BOM, UTF-16 is decided from structure only (line ends at even offsets, a strict decode
    with no control, private-use or unassigned character, one CJK language or mostly ASCII): random
    bytes never pass. (Offline, 10⁶ random strings of 4–64 bytes: none did; before, 6 in 300,000.)"""
    verdict = decide(data, ".txt")
    assert not (verdict.status == Status.CONVERT and str(verdict.encoding).startswith("utf-16")), (data.hex(), verdict.encoding)


def test_odd_length_or_unpaired_is_never_utf16():
    text = "这是一个大型语言模型\n请勿修改\n".encode("utf-16-le")
    assert decide(text[:-1], ".txt").encoding != "utf-16-le"  # odd length
    unpaired = text[:4] + b"\x00\xd8" + text[4:]  # a lone high surrogate
    assert decide(unpaired, ".txt").encoding != "utf-16-le"


def test_a_reading_whose_words_have_no_shape_of_text_is_never_chosen_alone():
    """A Big5 path word "了∼∼∼" read as cp866 gives "дFбубубу" (two alphabets in one word), which
    once won by 17 bits on its own; a reading whose words mostly look like no word cannot win."""
    data = json.dumps({"_name_or_path": "D:\\了∼∼∼\\model", "model_type": "llama"}, ensure_ascii=False).encode("big5")
    verdict = decide(data, ".json")
    assert verdict.status == Status.AMBIGUOUS or data.decode(verdict.encoding) == data.decode("cp950")
