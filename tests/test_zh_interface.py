"""The Chinese interface's frame (issue 38): the rerun hint keeps every option wherever it stood, the
language follows the environment as gettext reads it, --help fits 80 columns by display width, the
HTML names CJK fonts."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES, run_dd

HOST = FIXTURES / "hosts" / "swap60-rhel7"


@pytest.mark.parametrize("lang", ["zh-CN", "en"])
@pytest.mark.parametrize("where", ["before the command", "after it"])
def test_the_fix_hint_keeps_root_and_every_option_wherever_it_was_given(lang, where):
    options = ["--root", str(HOST), "--select", "swappiness"]
    argv = ["--lang", lang, "check", *options] if where == "before the command" else ["check", *options, "--lang", lang]
    out = run_dd(*argv).stdout
    assert f"decode-doctor check --root {HOST} --select swappiness --lang {lang} --fix --dry-run" in out, out


@pytest.mark.parametrize(
    ("env", "chinese"),
    [
        ({"DECODE_DOCTOR_LANG": "zh"}, True),
        ({"DECODE_DOCTOR_LANG": "zh_CN.UTF-8"}, True),
        ({"LANGUAGE": "zh_CN:en", "LANG": "en_US.UTF-8"}, True),
        ({"LANGUAGE": "fr:zh", "LANG": "en_US.UTF-8"}, True),
        ({"LANGUAGE": "zh_CN", "LANG": "C"}, False),  # gettext ignores LANGUAGE under the C locale
        ({"LANG": "zh_CN.UTF-8"}, True),
        ({"LANG": "en_US.UTF-8"}, False),
    ],
)
def test_the_language_follows_the_environment_as_gettext_reads_it(env, chinese):
    from decode_doctor import i18n

    assert (i18n.from_environment(env) == i18n.CHINESE) is chinese


def test_a_language_variable_that_names_no_language_is_said_not_silently_ignored():
    clean = {"DECODE_DOCTOR_LANG": "zh-TW", "LANG": "C", "LC_ALL": "", "LANGUAGE": ""}
    result = run_dd("list", env=clean)
    assert "DECODE_DOCTOR_LANG='zh-TW' is not a language decode-doctor speaks (en, zh-CN); ignored" in result.stderr
    assert run_dd("list", env={**clean, "DECODE_DOCTOR_LANG": "zh"}).stderr == ""


@pytest.mark.parametrize("command", ["check", "estimate", "bench", "report", "analyze"])
def test_help_in_chinese_fits_80_columns_and_keeps_check_names_whole(command):
    from decode_doctor.i18n.width import width

    out = run_dd("--lang", "zh-CN", command, "--help", env={"COLUMNS": "80"}).stdout
    lines = out.splitlines()
    assert lines and max(width(line) for line in lines) <= 80, max(lines, key=width)
    assert not any(line.rstrip().endswith(("[decode-", "[model-", "[engine-", " .")) for line in lines)
    assert "[required]" not in out


def test_the_html_report_names_cjk_fonts_before_the_generic_family():
    out = run_dd("--lang", "zh-CN", "check", "--root", str(HOST), "--select", "swappiness", "--format", "html").stdout
    style = out.split("<style>", 1)[1].split("</style>", 1)[0]
    assert "Noto Sans CJK SC" in style and "Microsoft YaHei" in style and style.index("PingFang SC") < style.index("sans-serif;")


def test_prompt_and_endpoint_take_their_glossary_words():
    """提示 is the info severity only: a prompt is 提示词; an endpoint is 端点 (its flag and placeholder stay)."""
    import re

    from babel.messages.pofile import read_po

    from .conftest import REPO

    with open(REPO / "doctor/locale/zh_CN/LC_MESSAGES/decode_doctor.po", "rb") as handle:
        catalog = read_po(handle)
    wrong = []
    for message in catalog:
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        for text in filter(None, strings):
            if any("prompt" in i.lower() for i in ids if i) and re.search("提示(?!词)", text):
                wrong.append(text)
            if re.search(r"(?<![-\w{/])endpoint(?![-\w}])", text):
                wrong.append(text)
    glossary = (REPO / "doctor/locale/GLOSSARY.md").read_text()
    assert "| prompt | 提示词 |" in glossary and "| endpoint | 端点 |" in glossary
    assert wrong == []


def test_errors_the_tool_raises_itself_speak_chinese(tmp_path):
    (tmp_path / "state").mkdir()
    cases = [
        (("check", "--images", str(tmp_path), "--max-pixels", "abc"), "不是整数像素数"),
        (("check", "--images", str(tmp_path), "--loader", "foo"), "未知的加载器"),
        (("bench", "--endpoint", "http://127.0.0.1:9", "--slo", "ttft_p95=fast"), "不是时间值"),
        (("undo", "--state-dir", str(tmp_path / "state")), "没有可回滚的修复"),
        (("bench", "--endpoint", "http://127.0.0.1:9", "--requests", "1", "--concurrency", "1"), "无法连接"),
        (("--version",), "decode-doctor，版本"),
    ]
    for args, words in cases:
        result = run_dd("--lang", "zh-CN", *args)
        said = result.stdout + result.stderr
        assert words in said, (args, said)
        assert not any(english in said for english in ("is not a", "unknown loader", "no fix run", "cannot connect", "version 0")), said


def test_no_line_of_explain_starts_with_closing_punctuation_and_fix_safety_is_a_chinese_word():
    from decode_doctor import i18n
    from decode_doctor.cli.info import explanation_lines
    from decode_doctor.engine.registry import load

    registry = load()
    i18n.use("zh-CN")
    try:
        starts = []
        for code, (spec, cls) in registry.codes().items():
            for line in explanation_lines(spec, cls.name, registry.fixable(code))[1:]:
                if line.strip() and line.strip()[0] in "。，、：；）」』】》":
                    starts.append(f"{code}: {line.strip()[:30]}")
            fixable = registry.fixable(code)
            if fixable is not None:
                text = "\n".join(explanation_lines(spec, cls.name, fixable))
                assert "[safe]" not in text and "[unsafe]" not in text and "[display-only]" not in text, code
        assert starts == []
    finally:
        i18n.use("en")


def test_a_finding_of_a_check_pulled_in_for_its_facts_is_said_not_selected_in_chinese(tmp_path):
    from .test_cli_contract import tiny_config

    model = tiny_config(tmp_path / "m")
    for fmt in ("text", "markdown"):
        out = run_dd(
            "--lang", "zh-CN", "check", "--select", "decode-budget", "--model", str(model), "--root", str(tmp_path), "--format", fmt
        ).stdout
        assert "未选中" in out and "not selected" not in out, out


def test_the_html_fix_column_of_a_finding_without_an_automatic_fix_is_chinese():
    from decode_doctor.engine.registry import load

    out = run_dd("--lang", "zh-CN", "check", "--root", str(FIXTURES / "hosts" / "gpu-node-xid"), "--format", "html").stdout
    english = load().codes()["GPU014"][0].fix_by_hand
    assert "GPU014" in out and english not in out and "重启" in out


def test_the_calques_a_native_reader_named_are_gone():
    import re

    catalog = (FIXTURES.parent / "doctor/locale/zh_CN/LC_MESSAGES/decode_doctor.po").read_text(encoding="utf-8")
    strings = "\n".join(line for line in catalog.splitlines() if not line.startswith(("msgid", "#")))
    assert not re.search(r"以 (\d+|\{\w+\}) 退出", strings)  # 退出码为 N
    for calque in ("读过去", "落后 {score", "适合学习的运行", "（第 {offset} 字节"):
        assert calque not in strings, calque


LOGS = FIXTURES / "serving" / "logs"


def _analyze_zh(name: str) -> str:
    return run_dd("--lang", "zh-CN", "analyze", str(LOGS / name)).stdout


def test_the_word_order_examples_of_the_issue_read_correctly():
    at_limit = _analyze_zh("vllm-v1-at-max-num-seqs.derived.log")
    assert (
        "同时运行的序列为 32 个（上限 32，来源：日志中的 --max-num-seqs），KV Cache 已用 30.0%：瓶颈在序列数上限" in at_limit
        and "个中的" not in at_limit
    )
    default_limit = _analyze_zh("vllm-v0-issue3094.log")
    assert "而运行中的序列只有 2 个（上限 256，来源：vLLM 默认的 --max-num-seqs）" in default_limit
    assert "vLLM 受 KV Cache 容量限制（在 vllm-v0-issue3094.log 第 1 行）" in default_limit and "KV Cache 已用 82.1%" in default_limit
    truncated = _analyze_zh("llamacpp-issue10547-truncated.log")
    assert "收到了 1 个超出槽位容量（每个槽位 4,096 个 token）的提示词" in truncated and "最长的一个有 39,846 个 token。" in truncated
    assert "slot" not in truncated.replace("/slots", "") and "(prompt + output tokens)" not in truncated
    retracted = _analyze_zh("sglang-issue4184-retract.log")
    assert "调低 --max-running-requests、调高 --schedule-conservativeness（如 1.3），或设 --mem-fraction-static 0.9" in retracted
    toolkit = run_dd("--lang", "zh-CN", "explain", "GPU020").stdout
    assert "驱动版本低于 CUDA Toolkit 的要求" in toolkit and "需要更新的驱动" not in toolkit
    collect_env = FIXTURES / "nvidia" / "collect-env" / "a100-sxm4-40gb-torch1.12.1-cu113-driver-470.129.06-complete.txt"
    torch_line = run_dd("--lang", "zh-CN", "analyze", str(collect_env)).stdout
    assert "PyTorch 1.12.1+cu113（CUDA 11.3，cuDNN 未报告），Python 3.10.6" in torch_line and "位于 3.10" not in torch_line


def test_values_the_code_joins_take_chinese_punctuation_and_words(tmp_path):
    model = tmp_path / "gpt-oss-120b"
    model.mkdir()
    (model / "config.json").write_text((FIXTURES / "models" / "configs" / "gpt-oss-120b.json").read_text())
    out = run_dd("--lang", "zh-CN", "estimate", "--model", str(model), "--gpu", "H200").stdout
    assert "（仅配置，mxfp4）" in out and "18 个全注意力层、18 个滑动窗口层" in out
    assert "（未计窗口，即按每层都缓存完整上下文计，fp16：全注意力层 36 KiB，滑动窗口层 36 KiB）" in out
    assert "full 36 KiB" not in out and "sliding" not in out
    assert "H200-SXM（规格表）：150.8 GB，4800 GB/s\n" in out and "权重的 5%" in out and " 5 %" not in out
    listed = run_dd("--lang", "zh-CN", "list").stdout
    assert "【可修复：仅显示命令】" in listed and "display-only" not in listed and "unsafe" not in listed.replace("--unsafe-fixes", "")


def test_a_link_out_of_the_model_tree_is_said_in_chinese(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "shared.json").write_text("{}")
    (model / "tokenizer_config.json").symlink_to(tmp_path / "shared.json")
    out = run_dd("--lang", "zh-CN", "check", "--select", "encodings", "--model", str(model), "--verbose").stdout
    assert "指向扫描树之外" in out and "outside the tree" not in out, out
