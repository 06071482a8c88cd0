"""Chinese typography as code (issue 51): one normaliser for zh-CN output (doctor/i18n/typography.py),
each rule with the issue's examples, code and quotes left alone, and every Chinese golden already in
its typography."""

from __future__ import annotations

from pathlib import Path

import pytest

from decode_doctor.i18n.typography import normalized, normalized_html

GOLDEN = Path(__file__).resolve().parent / "golden"

RULES = [
    ("坏的 GPU：GPU014, GPU020。", "坏的 GPU：GPU014、GPU020。"),
    ("出现 Xid 145, 149 次", "出现 Xid 145、149 次"),
    ("已知设备：H100-SXM, H100-PCIe, A100", "已知设备：H100-SXM、H100-PCIe、A100"),
    ("完成。 下一句", "完成。下一句"),
    ("请重新加载模块。（x.txt，第 1 行）", "请重新加载模块（x.txt，第 1 行）。"),
    ("其 /metrics（运行期间（1 次读取））", "其 /metrics（运行期间，1 次读取）"),
    ("（窗口内 1.50 个核（0% 被窃取）测得）", "（窗口内 1.50 个核，0% 被窃取，测得）"),
    ("gpu — 未判定", "gpu——未判定"),
    ("驱动版本 >= 580 才行", "驱动版本 ≥ 580 才行"),
    ("上下文 <= 8192 时", "上下文 ≤ 8192 时"),
]
KEPT = [
    "pip install torch>=2.1 即可",  # a version specifier
    '内核日志显示："NVRM: Xid 79, GPU has fallen"。',  # quoted evidence
    "用 `a, b` 运行",  # code
    "hello, world — again",  # no Chinese
    "（Xid 145 (GSP)）",  # half-width brackets inside are evidence
    "| 说明。 | x |",  # a Markdown cell's padding
    "摘要：  3",  # a padded column
    "```\n中文, a, b。 x\n```",  # a code fence
    "……。（完）",  # a parenthetical after the full stop that is not a location
]


@pytest.mark.parametrize(("text", "expected"), RULES)
def test_each_rule(text, expected):
    assert normalized(text) == expected
    assert normalized(expected) == expected


@pytest.mark.parametrize("text", KEPT)
def test_code_quotes_and_english_are_kept(text):
    assert normalized(text) == text


def test_html_text_nodes_only():
    page = '<td title="a, b 中">GPU014, GPU020 出错</td><code>a, b 中</code><p>&quot;a, b&quot; 中 x — 中</p>'
    assert normalized_html(page) == '<td title="a, b 中">GPU014、GPU020 出错</td><code>a, b 中</code><p>&quot;a, b&quot; 中 x——中</p>'


def test_english_is_never_touched():
    from decode_doctor import i18n
    from decode_doctor.i18n.typography import normalize

    i18n.use("en")
    assert normalize("完成。 下一句") == "完成。 下一句"
    i18n.use("zh-CN")
    try:
        assert normalize("完成。 下一句") == "完成。下一句"
    finally:
        i18n.use("en")


@pytest.mark.parametrize("golden", sorted([*GOLDEN.glob("zh/*.txt"), *GOLDEN.glob("zh-CN-*")]), ids=lambda p: p.name)
def test_every_chinese_golden_is_already_in_its_typography(golden):
    text = golden.read_text()
    assert (normalized_html(text) if golden.suffix == ".html" else normalized(text)) == text
