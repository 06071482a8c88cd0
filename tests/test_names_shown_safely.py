"""Names reach a terminal escaped (issue 51): a log's or a model directory's name that holds ESC, BEL,
an OSC 8 hyperlink or a bidirectional mark is shown as \\x1b, \\x07, \\u200f in every line analyze,
estimate and check print, in English and in Chinese, never as the raw character."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .support.harness import cli
from .test_cli_contract import tiny_config

REPO = Path(__file__).resolve().parent.parent
LOG = REPO / "fixtures" / "serving" / "logs" / "vllm-v0-preemption-pr6102.log"
# a colour, a bell and an OSC 8 hyperlink around "link" (a file name holds no "/")
HOSTILE_LOG = "vllm\x1b[31mred\x07bel\x1b]8;;https:x.test\x1b\\link\x1b]8;;\x1b\\.log"
RLM_MODEL = "mo\u200fdel"
LANGUAGES = [(), ("--lang", "zh-CN")]


def _raw(text: str) -> list[str]:
    """The characters a terminal would act on: C0 but newline and tab, DEL, C1, bidi marks and controls."""
    return [
        c
        for c in text
        if (ord(c) < 0x20 and c not in "\n\t")
        or 0x7F <= ord(c) < 0xA0
        or c in "\u061c\u200e\u200f"
        or 0x202A <= ord(c) <= 0x202E
        or 0x2066 <= ord(c) <= 0x2069
    ]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_analyze_shows_a_log_name_with_escapes_escaped(tmp_path, lang):
    log = tmp_path / HOSTILE_LOG
    shutil.copy(LOG, log)
    result = cli(*lang, "analyze", str(log))
    output = result.stdout + result.stderr
    assert result.exit_code in (0, 1, 3), output
    assert "serving" in result.stdout and "\\x07bel" in result.stdout, output
    assert _raw(output) == [], output


@pytest.mark.parametrize("lang", LANGUAGES)
def test_analyze_of_a_missing_file_shows_its_name_escaped(tmp_path, lang):
    result = cli(*lang, "analyze", str(tmp_path / HOSTILE_LOG))
    output = result.stdout + result.stderr
    assert result.exit_code == 2, output
    assert "\\x07bel" in result.stderr, output
    assert _raw(output) == [], output


@pytest.mark.parametrize("lang", LANGUAGES)
def test_estimate_shows_a_model_directory_with_a_right_to_left_mark_escaped(tmp_path, lang):
    empty = tmp_path / "empty" / RLM_MODEL
    empty.mkdir(parents=True)
    refused = cli(*lang, "estimate", "--model", str(empty))
    assert refused.exit_code == 2 and "\\u200f" in refused.stderr, refused.stdout + refused.stderr
    planned = cli(*lang, "estimate", "--model", str(tiny_config(tmp_path / RLM_MODEL)), "--bandwidth", "40", "--memory", "16")
    for result in (refused, planned):
        assert _raw(result.stdout + result.stderr) == [], result.stdout + result.stderr


@pytest.mark.parametrize("lang", LANGUAGES)
def test_check_shows_a_model_directory_with_a_right_to_left_mark_escaped(tmp_path, lang):
    model = tiny_config(tmp_path / RLM_MODEL)
    result = cli(*lang, "check", "--select", "encodings,model-artifacts", "--model", str(model), "--root", str(tmp_path))
    output = result.stdout + result.stderr
    assert "\\u200f" in output, output
    assert _raw(output) == [], output
