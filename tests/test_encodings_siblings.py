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
        assert found.code == "ENC002" and "sibling file(s) of model/ read confidently as gbk" in found.message
    else:  # decided by its own strong evidence, or refused alone: never turned into GBK
        assert found.code in ("ENC001", "ENC002")
        if found.code == "ENC001":
            assert family_of(found.evidence["encoding"]) == "cp1251"


def test_a_refusal_says_why_the_siblings_did_not_decide_and_which_bytes(tmp_path):
    """poète beside French cp1252 files: cp1250 reads it as počte, letters of the same script and a Slovak
    word too, so neither the words nor the siblings decide: the file's own bytes must choose; they lean
    by under two bits, and the refusal names the one byte."""
    root = tmp_path / "fr"
    root.mkdir()
    (root / "README.txt").write_bytes(LATIN.encode("cp1252"))
    (root / "notes.txt").write_bytes(LATIN[::-1].encode("cp1252"))
    data = json.dumps({"model_name": "Le poète"}, ensure_ascii=False).encode("cp1252")
    (root / "config.json").write_bytes(data)
    finding = _by_name(run_check("encodings", models=(root,)).findings)["config.json"]
    assert finding.code == "ENC002"
    assert "read confidently as cp1252 (README.txt, notes.txt) do not decide it" in finding.message
    assert "letters of one script" in finding.message
    assert "Undecided bytes: e8 at byte 21 (line 1)." in finding.message
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


def test_in_a_tree_of_models_each_model_directory_decides_its_own_short_files(tmp_path):
    """/models with a Chinese, a Taiwanese and a Japanese model: the many GBK files next door never
    vote on the Big5 or Shift-JIS model's short files; each is decided by its own directory's files."""
    models = tmp_path / "models"
    _repository(models / "zh-chat", "gbk", ZH)
    for extra in range(4):  # the largest voice of the tree, were the tree one repository
        (models / "zh-chat" / f"notes{extra}.txt").write_bytes((ZH[extra:] + ZH[:extra]).encode("gbk"))
    (models / "zh-chat" / "classes.txt").write_bytes("猫\n狗\n".encode("gbk"))
    for directory, encoding, text, short in (("tw-chat", "big5", ZH_TW, "貓\n狗\n"), ("ja-chat", "shift_jis", JA, "猫\n犬\n")):
        _repository(models / directory, encoding, text)
        (models / directory / "classes.txt").write_bytes(short.encode(encoding))
    found = [f for f in run_check("encodings", models=(models,)).findings if f.path and f.path.endswith("classes.txt")]
    decided = {Path(f.path).parent.name: f for f in found}
    assert set(decided) == {"zh-chat", "tw-chat", "ja-chat"}
    expected = (("zh-chat", "gbk", "猫\n狗\n"), ("tw-chat", "big5", "貓\n狗\n"), ("ja-chat", "shift_jis", "猫\n犬\n"))
    for directory, encoding, short in expected:
        finding = decided[directory]
        assert finding.code == "ENC001", (directory, finding.message)
        assert family_of(finding.evidence["encoding"]) == family_of(encoding)
        assert (models / directory / "classes.txt").read_bytes().decode(finding.evidence["encoding"]) == short
        assert finding.evidence["repository"] == str(models / directory)
        assert f"sibling file(s) of {directory}/ (" in finding.message


def test_a_file_outside_any_model_directory_is_decided_by_its_own_directory_only(tmp_path):
    models = tmp_path / "models"
    _repository(models / "zh-chat", "gbk", ZH)
    loose = models / "labels"
    loose.mkdir()
    (loose / "classes.txt").write_bytes("猫\n狗\n".encode("gbk"))
    finding = _by_name(run_check("encodings", models=(models,)).findings)["classes.txt"]
    assert finding.code == "ENC002"  # the Chinese model beside it does not speak for it
    assert "siblings" not in finding.evidence


@pytest.mark.parametrize(
    ("name", "short"),
    [
        ("labels.jsonl", '{"label": "猫"}\n{"label": "狗"}\n'),
        ("generation.yaml", "greeting: 你好\n"),
        ("special.toml", 'greeting = "你好"\n'),
    ],
)
def test_short_jsonl_yaml_and_toml_files_are_decided_on_their_siblings_by_their_values(tmp_path, name, short):
    root = tmp_path / "model"
    _repository(root, "gbk", ZH)
    data = short.encode("gbk")
    (root / name).write_bytes(data)
    assert decide(data, Path(name).suffix).status == "ambiguous"
    finding = _by_name(run_check("encodings", models=(root,)).findings)[name]
    assert finding.code == "ENC001", finding.message
    assert data.decode(finding.evidence["encoding"]) == short


def test_a_key_that_reads_differently_keeps_a_short_yaml_file_refused(tmp_path):
    root = tmp_path / "model"
    _repository(root, "gbk", ZH)
    (root / "labels.yaml").write_bytes("猫: 1\n狗: 2\n".encode("gbk"))  # the non-ASCII text is a key
    assert _by_name(run_check("encodings", models=(root,)).findings)["labels.yaml"].code == "ENC002"


def test_three_gb2312_words_alone_are_never_converted_to_a_wrong_reading(tmp_path):
    """The repository benchmark's single file: 雨 哭 烦恼 in GB2312 reads as Bulgarian in ISO-8859-5."""
    data = "雨\n哭\n烦恼\n".encode("gb2312")
    (tmp_path / "words.txt").write_bytes(data)
    finding = _by_name(run_check("encodings", models=(tmp_path,)).findings).get("words.txt")
    assert finding is not None
    assert finding.code == "ENC002" or data.decode(finding.evidence["encoding"]) == "雨\n哭\n烦恼\n"
