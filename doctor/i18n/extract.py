"""Babel extractors for what plain gettext calls cannot mark.

`codes`: a feature's codes.py defines each code as Code(...) or FixableCode[...](...) with its
explanation in keyword arguments; every section is a message in the context "CODE section" (what
explanation() looks up), so the catalog holds every explanation without a marker at any definition.
Referenced from babel.cfg as decode_doctor.i18n.extract:codes.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

SECTIONS = ("title", "what", "why", "fix_by_hand", "example", "fix_safety")


def sections(code: Any) -> Iterator[tuple[str, str]]:
    """(section, English) of a Code's explanation, the empty ones left out."""
    for section in SECTIONS:
        text = getattr(code, section, "")
        if isinstance(text, str) and text:
            yield section, text


def _module_name(path: str) -> str:
    """decode_doctor.checks.<feature>.codes for checks/<feature>/codes.py (its package-dir mapping)."""
    parts = Path(path).resolve().with_suffix("").parts
    root = max(i for i, part in enumerate(parts) if part in ("checks", "fixers", "doctor"))
    head = "decode_doctor" if parts[root] == "doctor" else f"decode_doctor.{parts[root]}"
    return ".".join((head, *parts[root + 1 :]))


def codes(
    fileobj: IO[bytes], keywords: Mapping[str, Any], comment_tags: Collection[str], options: Mapping[str, Any]
) -> Iterator[tuple[int, str, tuple[str, str], list[str]]]:
    """Babel's extractor protocol: each section of each code the module defines, as a pgettext
    message. The module is imported (a codes.py holds constants only), so sections built from shared
    phrases (f-strings) are extracted as the user reads them."""
    from decode_doctor.engine.findings import Code

    module = importlib.import_module(_module_name(fileobj.name))
    tree = ast.parse(fileobj.read())
    lines = {t.id: node.lineno for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
    for name, value in vars(module).items():
        if isinstance(value, Code):
            for section, text in sections(value):
                yield lines.get(name, 1), "pgettext", (f"{value.code} {section}", text), []


def command_texts() -> Iterator[str]:
    """Every help text of decode-doctor's command line: the group's, each command's one-liner, help
    and options' help (core and feature commands alike)."""
    from decode_doctor.cli.main import CORE, cli, feature_commands

    yield from (text for text in (cli.help,) if text)
    commands = [cli.get_command(None, name) for name in CORE]  # type: ignore[arg-type]
    commands += list(feature_commands().values())
    for command in commands:
        if command is None:
            continue
        for text in (command.help, command.short_help):
            if text:
                yield text
        for param in command.params:
            text = getattr(param, "help", None)
            if text:
                yield text


def cli_help(
    fileobj: IO[bytes], keywords: Mapping[str, Any], comment_tags: Collection[str], options: Mapping[str, Any]
) -> Iterator[tuple[Any, ...]]:
    """Babel's extractor protocol, for doctor/cli/main.py: every help text, in the context "cli", and
    the file's own _() messages (a file gets one extraction method, so the Python one is run here too)."""
    from babel.messages.extract import extract_python

    seen = set()
    for raw in command_texts():
        text = inspect.cleandoc(raw)  # the key clihelp.help_text looks up
        if text not in seen:
            seen.add(text)
            yield 1, "pgettext", ("cli", text), []
    fileobj.seek(0)
    yield from extract_python(fileobj, keywords, comment_tags, dict(options))  # type: ignore[arg-type]


def xid_catalog(
    fileobj: IO[bytes], keywords: Mapping[str, Any], comment_tags: Collection[str], options: Mapping[str, Any]
) -> Iterator[tuple[int, str, str, list[str]]]:
    """Babel's extractor protocol, for checks/gpu/data/xid-catalog.json: the next steps decode-doctor
    wrote for NVIDIA's catalog (its buckets' actions, and the notes' own steps), which the Xid
    finding's message shows. NVIDIA's own words (mnemonic, meaning) are quoted as they are."""
    import json

    data = json.loads(fileobj.read())
    seen = set()
    texts = [action for _, action in data["buckets"].values()] + [step.lstrip("+") for _, step in data["notes"].values()]
    for text in texts:
        if text and text not in seen:
            seen.add(text)
            yield 1, "gettext", text, []


def gpu_table(
    fileobj: IO[bytes], keywords: Mapping[str, Any], comment_tags: Collection[str], options: Mapping[str, Any]
) -> Iterator[tuple[int, str, str, list[str]]]:
    """Babel's extractor protocol, for doctor/models/data/gpus.json: each device's memory note, which
    estimate shows under the plan."""
    import json

    data = json.loads(fileobj.read())
    notes = {row["memory_note"] for row in data["devices"] if isinstance(row, dict) and row.get("memory_note")}
    for note in sorted(notes):
        yield 1, "gettext", note, []


def cuda_table(
    fileobj: IO[bytes], keywords: Mapping[str, Any], comment_tags: Collection[str], options: Mapping[str, Any]
) -> Iterator[tuple[int, str, str, list[str]]]:
    """Babel's extractor protocol, for checks/gpu/data/cuda-drivers.json: its note on PTX, which the
    driver finding's message shows."""
    import json

    data = json.loads(fileobj.read())
    if isinstance(data.get("ptx_effect"), str):
        yield 1, "gettext", data["ptx_effect"], []


def engine_failures(
    fileobj: IO[bytes], keywords: Mapping[str, Any], comment_tags: Collection[str], options: Mapping[str, Any]
) -> Iterator[tuple[int, str, str, list[str]]]:
    """Babel's extractor protocol, for checks/enginefailures/data/engine-failures.json: each known
    failure's title and its workarounds' words, which the engine-failures finding shows."""
    import json

    data = json.loads(fileobj.read())
    seen: set[str] = set()
    for row in data.get("failures", []):
        for text in [row.get("title"), *(w.get("text") for w in row.get("workarounds", []))]:
            if isinstance(text, str) and text and text not in seen:
                seen.add(text)
                yield 1, "gettext", text, []
