"""Word evidence (checks/encodings/lexicon.py): readings their bytes cannot tell apart, decided by the words
they make in the lexicons of their languages; two real words stay a tie. Every input is real text
encoded here, in the test."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from decode_doctor.checks.encodings import lexicon
from decode_doctor.checks.encodings.readings import compare, readings
from decode_doctor.checks.encodings.textenc import decide
from tests.support.harness import run_check

# the words extra (pip install 'decode-doctor[words]') is part of the test extra; the tests of the
# default install's behaviour and of the lexicon's cost run without it too
needs_words = pytest.mark.skipif(not lexicon.available(), reason="the words extra is not installed")

VOCAB = "\n".join(f"tok{i}" for i in range(20_000))


def _reading(data: bytes, codec: str):
    found, words = readings(data)
    return next(r for r in found if codec in r.codecs), found, words


def _decided_by_words(text: str, encoding: str, rival: str, suffix: str = ".txt") -> dict:
    """The bytes of text in encoding: their bytes alone do not beat the rival reading, their words do,
    and the file is converted to exactly text."""
    data = text.encode(encoding)
    ours, found, words = _reading(data, encoding)
    theirs = next(r for r in found if rival in r.codecs)
    assert not compare(ours, theirs, words).decisive  # the bytes alone: a tie
    evidence = lexicon.compare_words(ours, theirs, words)
    assert evidence.decisive, evidence.why_not()
    assert not lexicon.compare_words(theirs, ours, words).decisive
    verdict = decide(data, suffix)
    assert verdict.status == "convert", verdict.reason
    assert verdict.text == text
    assert verdict.words is not None and "its words do" in verdict.reason
    return evidence.english()


@needs_words
@pytest.mark.parametrize(
    ("text", "encoding", "rival", "word", "non_word"),
    [
        ("Modèle de base\n", "cp1252", "cp1250", "Modèle", "Modčle"),  # French, not Czech/Slovak
        ("El año pasado\n", "cp1252", "cp1257", "año", "ańo"),  # Spanish, not Lithuanian
        ("España\n", "cp1252", "iso8859_4", "España", "Espaņa"),
        ("Ægir\n", "cp1252", "iso8859_3", "Ægir", "Ĉgir"),  # Icelandic, not Turkish/Maltese
        ("það\n", "cp1252", "cp1254", "það", "şağ"),  # Icelandic, not Turkish
        ("þetta\n", "cp1252", "cp1254", "þetta", "şetta"),
        ("Işık\n", "cp1254", "cp1252", "Işık", "Iþýk"),  # Turkish, not Icelandic
        ("Straße\n", "cp1252", "mac_roman", "Straße", "Straﬂe"),  # German
    ],
)
def test_a_latin_word_against_a_non_word_decides(text, encoding, rival, word, non_word):
    evidence = _decided_by_words(text, encoding, rival)
    pairs = [(a["word"], b["word"]) for a, b in evidence["for"]]
    assert (word, non_word) in pairs
    a, b = evidence["for"][pairs.index((word, non_word))]
    assert a["zipf"] >= lexicon.ZIPF_REAL and b["zipf"] == 0.0


@needs_words
def test_the_finding_names_the_words_and_their_frequencies(tmp_path):
    root = tmp_path / "fr"
    root.mkdir()
    (root / "config.json").write_bytes(json.dumps({"model_name": "Modèle de base"}, ensure_ascii=False).encode("cp1252"))
    (finding,) = run_check("encodings", models=(root,)).findings
    assert finding.code == "ENC001", finding.message
    assert finding.evidence["encoding"] == "cp1252"
    assert "«Modèle»: French, Zipf" in finding.message and "«Modčle»: not a word in" in finding.message
    assert finding.evidence["words"]["for"][0][0]["language"] == "fr"


@needs_words
@pytest.mark.parametrize(
    ("text", "encoding", "rival"),
    [
        ("Привет\n", "cp1251", "mac_cyrillic"),  # «ѕривет» is no word
        ("спасибо\n", "koi8_r", "cp1253"),  # Russian, against Greek capitals
    ],
)
def test_a_cyrillic_word_against_a_non_word_decides(text, encoding, rival):
    _decided_by_words(text, encoding, rival)


@needs_words
@pytest.mark.parametrize(
    ("text", "rival"),
    [
        ("中文\n", "cp1251"),  # «ЦРОД»
        ("数据\n", "euc_jp"),  # «方象»: characters the Japanese lexicon holds only one by one
    ],
)
def test_a_short_chinese_word_against_its_cyrillic_or_japanese_reading(text, rival):
    _decided_by_words(text, "gbk", rival)


@needs_words
@pytest.mark.parametrize("rival", ["euc_kr", "koi8_r", "euc_jp"])
def test_a_large_vocab_whose_few_lines_read_as_gbk_and_euc_kr(rival):
    """20,000 ASCII tokens and one Chinese word: GBK against EUC-KR (and KOI8-R, EUC-JP) on four bytes."""
    _decided_by_words(VOCAB + "\n美国\n", "gbk", rival)


@needs_words
@pytest.mark.parametrize(
    ("text", "encoding", "rival"),
    [
        ("poète\n", "cp1252", "cp1250"),  # «počte» is Slovak too
        ("hará\n", "cp1252", "cp1257"),  # «harį» is Lithuanian too
        ("þar\n", "cp1252", "cp1254"),  # «şar» is Turkish too
        ("sýna\n", "cp1252", "cp1254"),  # «sına» is Turkish too
    ],
)
def test_two_real_words_stay_a_tie(text, encoding, rival):
    data = text.encode(encoding)
    ours, found, words = _reading(data, encoding)
    theirs = next(r for r in found if rival in r.codecs)
    evidence = lexicon.compare_words(ours, theirs, words)
    assert evidence.ties and not evidence.decisive
    assert not lexicon.compare_words(theirs, ours, words).decisive
    verdict = decide(data, ".txt")
    assert verdict.status == "ambiguous"
    assert "both readings are words" in verdict.reason  # the refusal says why the words did not decide


@needs_words
def test_a_lead_under_the_margin_stays_refused(monkeypatch):
    monkeypatch.setattr(lexicon, "WORDS_MARGIN", 50.0)
    verdict = decide("Modèle de base\n".encode("cp1252"), ".txt")
    assert verdict.status == "ambiguous"
    assert "lead by Zipf" in verdict.reason


def test_without_the_extra_the_refusal_names_it():
    """The default install: wordfreq cannot be imported, the file is refused as before, and the refusal
    names the extra."""
    script = textwrap.dedent(
        """
        import sys
        class Hidden:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "wordfreq":
                    raise ImportError("hidden")
        sys.meta_path.insert(0, Hidden())
        from decode_doctor.checks.encodings.textenc import decide
        verdict = decide("Modèle de base\\n".encode("cp1252"), ".txt")
        print(verdict.status.value, "|", verdict.reason)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("ambiguous |"), done.stdout + done.stderr
    assert "pip install 'decode-doctor[words]'" in done.stdout


def test_a_clean_tree_never_imports_the_lexicon(tmp_path):
    root = tmp_path / "model"
    root.mkdir()
    (root / "config.json").write_text(json.dumps({"model_name": "Modèle de base", "zh": "中文"}, ensure_ascii=False), encoding="utf-8")
    (root / "vocab.txt").write_text(VOCAB + "\n", encoding="utf-8")
    # a legacy file its bytes decide alone does not need it either
    (root / "README.md").write_bytes(("Привет мир, это модель для русского языка. " * 3).encode("koi8_r"))
    script = textwrap.dedent(
        f"""
        import sys
        from tests.support.harness import run_check
        found = run_check("encodings", models=({str(root)!r},)).findings
        print(sorted(f.code for f in found), "wordfreq" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split()[-1] == "False", done.stdout + done.stderr
