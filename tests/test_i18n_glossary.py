"""The glossary as a test (issue 38): each English term has one Chinese rendering, and the renderings
the glossary rejects (its "rejected" column, and the typography table) appear in no Chinese message.
A rejected entry is a literal, or a regular expression after "re:"."""

from __future__ import annotations

import re
from pathlib import Path

from babel.messages.pofile import read_po

REPO = Path(__file__).resolve().parent.parent
GLOSSARY = REPO / "doctor" / "locale" / "GLOSSARY.md"
CATALOG = REPO / "doctor" / "locale" / "zh_CN" / "LC_MESSAGES" / "decode_doctor.po"


def _chinese_messages() -> list[tuple[str, str]]:
    with CATALOG.open("rb") as handle:
        catalog = read_po(handle)
    found = []
    for message in catalog:
        if not message.id:
            continue
        english = message.id if isinstance(message.id, str) else message.id[0]
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        found.extend((english, text) for text in strings if text)
    return found


def _rejected() -> list[tuple[str, re.Pattern[str]]]:
    """(the glossary row, the pattern) of every rejected rendering."""
    rules = []
    for line in GLOSSARY.read_text().splitlines():
        if not line.startswith("| ") or line.startswith(("| English", "| rejected", "|---")):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        column = cells[2] if len(cells) == 4 else cells[0] if len(cells) == 2 else ""
        for entry in re.findall(r"`([^`]+)`", column):
            pattern = re.compile(entry[3:]) if entry.startswith("re:") else re.compile(re.escape(entry))
            if entry == "slot":
                pattern = re.compile(r"(?<![\w/{-])slots?(?![\w}-])")
            rules.append((cells[0], pattern))
    return rules


def test_the_glossary_has_one_rendering_per_term_and_names_what_it_rejects():
    rows = [line for line in GLOSSARY.read_text().splitlines() if line.startswith("| ") and not line.startswith("| English")]
    english = [line.strip("|").split("|")[0].strip() for line in rows if line.count("|") == 5]
    assert len(english) == len(set(english)), "a term with two rows"
    assert len(_rejected()) >= 20


def test_no_chinese_message_uses_a_rendering_the_glossary_rejects():
    offenders = [
        f"{row}: {pattern.pattern!r} in {text!r}"
        for english, text in _chinese_messages()
        for row, pattern in _rejected()
        if pattern.search(text)
    ]
    assert not offenders, "\n".join(offenders[:30])


def test_prompt_is_never_the_severity_word_and_endpoint_is_chinese():
    for english, text in _chinese_messages():
        if re.search(r"\bprompts?\b", english) and not re.search(r"--\w*prompt|prompt_tokens|{prompt", english):
            assert "提示词" in text or "提示" not in text, (english, text)
        if re.search(r"\bendpoints?\b", english) and not re.search(r"--endpoint|{endpoint}", english):
            assert "endpoint" not in text.replace("--endpoint", "").replace("{endpoint}", ""), (english, text)
