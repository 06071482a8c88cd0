"""Counts the Latin words of a Chinese output that a person reads as English (issue 38's acceptance):
what is left once codes, commands, flags, paths, units, identifiers, quoted evidence and the terms
the glossary keeps in English are set aside. The kept terms are the glossary's own list
(doctor/locale/GLOSSARY.md, section "Kept in English"), so a new one is a decision written there."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

GLOSSARY = Path(__file__).resolve().parents[2] / "doctor" / "locale" / "GLOSSARY.md"
CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef“”‘’——…]+")
QUOTED = re.compile(r'"[^"]{0,400}"|`[^`]{0,400}`|“[^”]{0,400}”', re.DOTALL)
TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+'-]*")
# what is code, not prose: URLs and anything with a slash (paths, tok/s, I/O), assignments, calls,
# <placeholders>, comments such as "# -*- coding: gbk -*-"
CODE_SPANS = re.compile(r"\w+://\S+|\S*/\S*|\S*\w ?= ?\S+|[\w.]+\([^)]*\)|<[^>\s]+>|#.*$|\w[\w.-]*:[\dA-Z]\S*")
# an English gloss after its Chinese rendering: 平移（context shift）
GLOSS = re.compile(r"(?<=[\u4e00-\u9fff])（[a-z][a-z -]*）")
CODE = re.compile(r"[A-Z]{2,5}\d{3}")
UNITS = frozenset({"s", "ms", "B", "KB", "KiB", "MB", "MiB", "GB", "GiB", "TB", "TiB", "tok", "W", "x", "TFLOP", "bit"})


def kept_terms(glossary: Path = GLOSSARY) -> tuple[frozenset[str], frozenset[str]]:
    """(terms, commands) the glossary keeps in English: "- terms: a, b" and "- commands: c, d" lines
    of its "Kept in English" section."""
    terms: set[str] = set()
    commands: set[str] = set()
    section = glossary.read_text().split("## Kept in English", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        for name, into in (("- terms:", terms), ("- commands:", commands)):
            if line.startswith(name):
                into.update(word.strip() for word in line[len(name) :].split(",") if word.strip())
    return frozenset(terms) | check_names(), frozenset(commands)


def check_names() -> frozenset[str]:
    """Every built-in check's name (a name is an identifier the output quotes, never translated): read from
    the registry's generated index, so a new check needs no line in the glossary."""
    index = GLOSSARY.parents[1] / "engine" / "data" / "index.json"
    return frozenset(str(check["name"]) for check in json.loads(index.read_text())["checks"])


def _identifier(token: str) -> bool:
    """A code, an acronym, a file or key name, a version: not a word a person reads as English."""
    return bool(
        CODE.fullmatch(token)
        or re.fullmatch(r"[A-Z][A-Z0-9]+s?|[A-Za-z]", token)  # GPU, NVML, OCI, CPUs; a placeholder letter (N)
        or re.search(r"[\d_]|\.[a-z]|[a-z][A-Z]", token)  # head_dim, config.json, v0.9, sm_90, 2xx, camel case
    )


def choices(text: str) -> frozenset[str]:
    """The values an option takes, as --help lists them ([text|json], en|zh-CN): a description may name them."""
    return frozenset(word for listed in re.findall(r"[\w.-]+(?:\|[\w.-]+)+", text) for word in listed.split("|"))


def english_words(text: str, extra: frozenset[str] = frozenset()) -> Counter[str]:
    """The Latin words of text outside what is allowed, with how often each occurs."""
    terms, commands = kept_terms()
    allowed = terms | commands | UNITS | extra
    found: Counter[str] = Counter()
    text = GLOSS.sub(" ", QUOTED.sub(" ", text))
    for line in text.splitlines():
        if re.match(r"\s*(\+|\$ )", line):  # a file's content in a fix preview, a shell line
            continue
        for run in CJK.split(line):  # the stretches of Latin text between Chinese characters
            run = CODE_SPANS.sub(" ", run)
            tokens = TOKEN.findall(re.sub(r"(?<!\w)--?\w[\w-]*(?: [a-z]+\b(?! [a-z]))?|(?<!\w)[~.]\S*", " ", run))  # flags, their values
            if tokens and tokens[0] in commands:  # a command with its arguments
                continue
            for token in tokens:
                bare = token.strip(".'-+")
                if bare and re.search("[A-Za-z]", bare) and not _identifier(bare) and bare not in allowed and bare.lower() not in allowed:
                    found[bare] += 1
    return found
