"""A model repository as evidence (issue 28): short files decided with their siblings, never against
their own bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decode_doctor.checks.encodings.readings import family_of
from decode_doctor.checks.encodings.siblings import Sibling, decide_with_siblings
from decode_doctor.checks.encodings.textenc import decide

from .support.harness import run_check
from .support.textcorpus import CS, HU, JA, KO_LONG, LATIN, PL, RU, TR, ZH, ZH_TW

GBK_PATH_CONFIG = json.dumps({"_name_or_path": "D:\\模型\\vit-base-patch16-224", "model_type": "vit"}, ensure_ascii=False, indent=2)


def _repository(root: Path, encoding: str, text: str) -> None:
    """Three files a repository holds, long enough to be decided on their own."""
    root.mkdir(parents=True, exist_ok=True)
    files = {
        "tokenizer_config.json": json.dumps(
            {"chat_template": "{% for m in messages %}" + text + "{% endfor %}", "eos_token": "</s>"}, ensure_ascii=False
        ),
        "dataset_info.json": json.dumps({"description": text[:20], "citation": text[5:25]}, ensure_ascii=False),
        "chat_template.jinja": "{{ '" + text[:30] + "' }}\n",
    }
    for name, content in files.items():
        (root / name).write_bytes(content.encode(encoding))


def _by_name(findings) -> dict[str, object]:
    return {Path(f.path).name: f for f in findings if f.path}


@pytest.mark.parametrize(
    ("encoding", "text", "name", "short"),
    [
        ("gbk", ZH, "classes.txt", "猫\n狗\n"),
        ("big5", ZH_TW, "classes.txt", "貓\n狗\n"),
        ("shift_jis", JA, "labels.txt", "猫\n犬\n"),
        ("gbk", ZH, "config.json", GBK_PATH_CONFIG),
        ("gbk", ZH, "vocab.txt", "\n".join(f"tok{i}" for i in range(135_000)) + "\n的\n"),
    ],
)
def test_a_short_file_is_converted_with_the_evidence_of_its_siblings(tmp_path, encoding, text, name, short):
    root = tmp_path / "model"
    _repository(root, encoding, text)
    data = short.encode(encoding)
    (root / name).write_bytes(data)
    assert decide(data, Path(name).suffix).status == "ambiguous"  # alone it is refused
    finding = _by_name(run_check("encodings", models=(root,)).findings)[name]
    assert finding.code == "ENC001", finding.message
    assert data.decode(finding.evidence["encoding"]) == short
    assert family_of(finding.evidence["encoding"]) == family_of(encoding)
    assert "decided with the evidence of 3 sibling file(s)" in finding.message


def test_a_file_whose_own_bytes_say_another_encoding_is_not_converted_with_the_siblings(tmp_path):
    """A Big5 file in a GBK repository: the siblings never overrule its own evidence."""
    root = tmp_path / "model"
    _repository(root, "gbk", ZH)
    for name, text in (("a.txt", "這是一個"), ("b.txt", "設定檔"), ("c.txt", "繁體中文")):
        (root / name).write_bytes(text.encode("big5"))
    found = _by_name(run_check("encodings", models=(root,)).findings)
    for name, text in (("a.txt", "這是一個"), ("b.txt", "設定檔"), ("c.txt", "繁體中文")):
        finding = found[name]
        if finding.code == "ENC001":
            assert (root / name).read_bytes().decode(finding.evidence["encoding"]) == text
        else:
            assert finding.code == "ENC002"


def test_a_file_decided_narrowly_in_another_family_is_refused_and_names_its_siblings(tmp_path):
    root = tmp_path / "model"
    _repository(root, "gbk", ZH)
    other = ("Привет, это модель. " * 1).encode("cp1251")
    (root / "notes.txt").write_bytes(other)
    verdict = decide(other, ".txt")
    found = _by_name(run_check("encodings", models=(root,)).findings)["notes.txt"]
    if verdict.status == "convert" and verdict.margin is not None and verdict.margin < 20:
        assert found.code == "ENC002" and "sibling file(s) read confidently as gbk" in found.message
    else:  # decided by its own strong evidence, or refused alone: never turned into GBK
        assert found.code in ("ENC001", "ENC002")
        if found.code == "ENC001":
            assert family_of(found.evidence["encoding"]) == "cp1251"


def test_a_refusal_says_why_the_siblings_did_not_decide_and_which_bytes(tmp_path):
    """Modèle beside French cp1252 files: cp1250 reads it as Modčle, letters of the same script, so the
    file's own bytes must choose; they lean by under a bit, and the refusal names the one byte."""
    root = tmp_path / "fr"
    root.mkdir()
    (root / "README.txt").write_bytes(LATIN.encode("cp1252"))
    (root / "notes.txt").write_bytes(LATIN[::-1].encode("cp1252"))
    data = json.dumps({"model_name": "Modèle de base"}, ensure_ascii=False).encode("cp1252")
    (root / "config.json").write_bytes(data)
    finding = _by_name(run_check("encodings", models=(root,)).findings)["config.json"]
    assert finding.code == "ENC002"
    assert "read confidently as cp1252 (README.txt, notes.txt) do not decide it" in finding.message
    assert "letters of one script" in finding.message
    assert "Undecided bytes: e8 at byte 19 (line 1)." in finding.message
    assert finding.evidence["siblings"] == "cp1252"


def test_one_file_is_no_repository(tmp_path):
    root = tmp_path / "model"
    root.mkdir()
    (root / "dataset_info.json").write_bytes(json.dumps({"description": ZH}, ensure_ascii=False).encode("gbk"))
    (root / "classes.txt").write_bytes("猫\n狗\n".encode("gbk"))
    assert _by_name(run_check("encodings", models=(root,)).findings)["classes.txt"].code == "ENC002"


def sibling_files(text: str, encoding: str) -> list[Sibling]:
    """Three JSON files of text in encoding, kept when their own evidence decided them by ≥ 20 bits."""
    found = []
    for index, piece in enumerate((text, text[10:] + text[:10], text[::-1])):
        data = json.dumps({"description": piece}, ensure_ascii=False).encode(encoding)
        verdict = decide(data, ".json")
        if verdict.status == "convert" and verdict.encoding and (verdict.margin or 0) >= 20:
            sibling = Sibling.of(f"s{index}.json", data, verdict.encoding)
            if sibling is not None:
                found.append(sibling)
    return found


@pytest.mark.parametrize(
    ("target", "encoding", "siblings", "sibling_encoding", "why"),
    [
        ("uťou", "iso8859_2", RU, "cp1251", "a shape no word has"),  # » between two letters
        ("语言模型", "gbk", RU, "koi8_r", "a shape no word has"),  # сОятдёпм: a capital inside a small word
        ("ěl ď", "iso8859_2", RU, "cp1251", "a shape no word has"),  # мl: two alphabets in one word
        ("żółć g", "cp1250", RU, "cp1251", "a letter the sibling files' language does not use"),  # ї in Russian
        ("модель", "cp1251", ZH, "gbk", "common characters of"),  # 祛: GB2312 level 2
        ("же", "cp1251", ZH_TW, "big5", "common characters of"),  # 緪: Big5's less frequent characters
        ("этих", "cp1251", ZH_TW, "big5", "wider codec"),  # a character only HKSCS has
        ("누햎", "utf-8", KO_LONG, "euc_kr", None),  # (UTF-8: decided before siblings are asked)
    ],
)
def test_the_files_own_bytes_veto_a_reading_no_text_has(target, encoding, siblings, sibling_encoding, why):
    data = json.dumps({"description": target}, ensure_ascii=False).encode(encoding)
    if why is None:
        assert decide(data, ".json").status != "ambiguous"
        return
    judged = decide_with_siblings(data, ".json", sibling_files(siblings, sibling_encoding))
    assert judged.verdict is None and why in judged.why.english(), judged.why


SAMPLES = [(ZH, "gbk"), (ZH_TW, "big5"), (JA, "shift_jis"), (JA, "euc_jp"), (KO_LONG, "euc_kr"), (HU, "cp1250"), (HU, "iso8859_2"),
           (CS, "iso8859_2"), (PL, "cp1250"), (TR, "cp1254"), (RU, "cp1251"), (RU, "koi8_r"), (LATIN, "cp1252")]  # fmt: skip
_SIBLINGS = {}


def _cached_siblings(text: str, encoding: str) -> list[Sibling]:
    if (text, encoding) not in _SIBLINGS:
        _SIBLINGS[(text, encoding)] = sibling_files(text, encoding)
    return _SIBLINGS[(text, encoding)]


@settings(derandomize=True, deadline=None, max_examples=300, database=None)
@given(
    target=st.sampled_from(SAMPLES),
    sibling=st.sampled_from(SAMPLES),
    start=st.integers(0, 40),
    length=st.integers(8, 60),
)
def test_siblings_in_one_encoding_never_convert_a_target_in_another(target, sibling, start, length):
    """The property with repository evidence in play: a piece of real text in one encoding, beside
    three files in another family, is converted to its own text or refused. Pieces holding at least
    five characters beyond ASCII: fewer can be the same bytes as a label of the siblings' own
    language (b"\\xbf\\xc0." is "神." in EUC-JP and "오." in EUC-KR), where a person reads the
    repository's encoding too; bench_encodings_repositories.py counts those."""
    (text, encoding), (sibling_text, sibling_encoding) = target, sibling
    if family_of(encoding) == family_of(sibling_encoding):
        return
    piece = text[start : start + length]
    if sum(ord(c) > 0x7F for c in piece) < 5:
        return
    data = json.dumps({"description": piece}, ensure_ascii=False).encode(encoding)
    alone = decide(data, ".json")
    judged = decide_with_siblings(data, ".json", _cached_siblings(sibling_text, sibling_encoding))
    for verdict in (alone, judged.verdict):
        if verdict is not None and verdict.status == "convert":
            assert json.loads(verdict.text)["description"] == piece, (encoding, sibling_encoding, piece, verdict.encoding)


def test_the_second_look_reads_files_again_when_their_readings_were_not_kept(tmp_path, monkeypatch):
    """Memory stays bounded on a large tree: past KEEP_TREE_BYTES an undecided file is read again
    for its second look, with the same verdict."""
    from decode_doctor.checks.encodings import check

    root = tmp_path / "model"
    _repository(root, "gbk", ZH)
    (root / "classes.txt").write_bytes("猫\n狗\n".encode("gbk"))
    (root / "config.json").write_bytes(GBK_PATH_CONFIG.encode("gbk"))
    kept = {n: (f.code, f.message) for n, f in _by_name(run_check("encodings", models=(root,)).findings).items()}
    monkeypatch.setattr(check, "KEEP_TREE_BYTES", 0)
    again = {n: (f.code, f.message) for n, f in _by_name(run_check("encodings", models=(root,)).findings).items()}
    assert kept == again and kept["classes.txt"][0] == "ENC001" and kept["config.json"][0] == "ENC001"


def test_a_utf8_bom_is_dropped_where_loaders_fail_and_kept_with_the_reason_where_they_do_not(tmp_path):
    root = tmp_path / "model"
    root.mkdir()
    for name, body in (("README.md", b"# Model\n"), ("data.yaml", b"names: [cat, dog]\n"), ("pyproject.toml", b"a = 1\n")):
        (root / name).write_bytes(b"\xef\xbb\xbf" + body)
    run = run_check("encodings", models=(root,))
    assert {Path(f.path).name: f.code for f in run.findings} == {"pyproject.toml": "ENC006"}  # tomllib: "Invalid statement"
    facts = run.facts
    kept = {Path(k.file).name: k.why for k in facts.kept_boms}
    assert kept == {"README.md": "Markdown renderers (CommonMark, GitHub) skip it", "data.yaml": "PyYAML reads it as a byte-order mark"}
    assert any("README.md: UTF-8 with a byte-order mark, left alone" in line for line in facts.summary())


@pytest.mark.parametrize(
    ("text", "superset"),
    [
        ("ภาษาไทยเป็นภาษาที่สวยงาม – “แบบจำลองภาษา” ขนาดใหญ่ สำหรับการประมวลผล", "cp874"),  # not TIS-620's C1 controls
        ("Le modèle « naïve » – “quoted” text, déjà vu, crème brûlée, café.", "cp1252"),  # not latin-1's
    ],
)
def test_bytes_that_are_c1_controls_in_the_standard_read_as_the_windows_superset(text, superset):
    """No model file holds C1 control characters: where TIS-620 or ISO-8859-1 would give them, the
    Windows code page's punctuation is the reading."""
    data = text.encode(superset)
    assert any(0x80 <= b <= 0x9F for b in data)
    verdict = decide(data, ".txt")
    assert verdict.status == "convert" and verdict.encoding == superset and verdict.text == text
