"""click's own words in Chinese (issue 51): every usage error a user meets names its option, speaks
Chinese with Chinese punctuation and leaves no English word of click's."""

from __future__ import annotations

import re

import pytest

from .conftest import run_dd
from .support.latin import english_words

CASES = [
    # (arguments, what the error must say)
    (("estimate", "--model", ".", "--gpus", "0"), "--gpus 的值无效：0 不在 x≥1 的范围内。"),
    (("estimate", "--model", ".", "--gpus", "1.5"), '--gpus 的值无效："1.5" 不是有效的整数。'),
    (("check", "--format", "foo"), '--format 的值无效："foo" 不在可选值之列（"text"、"json"、'),
    (("check", "--root", "/nonexistent-dd"), '--root 的值无效：目录 "/nonexistent-dd" 不存在。'),
    (("check", "--rot", "x"), "没有 --rot 这个选项。您是否想用 --format、--output 或 --root？"),
    (("check", "extra", "more"), '多余的参数："extra"、"more"'),
    (("check", "--root"), "选项 --root 需要 1 个值。"),
    (("analyze",), "缺少参数 FILE…。"),
    (("merge",), "缺少参数 REPORT…。"),
    (("chek",), '没有 "chek" 这个命令。'),
    (("agent", "--interval", "5x"), "--interval 的值无效："),  # raised in the command's body, without its param
]


@pytest.mark.parametrize(("args", "said"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_a_usage_error_is_chinese_and_names_its_option(args, said):
    result = run_dd("--lang", "zh-CN", *args)
    err = result.stderr
    assert result.returncode == 2, (result.returncode, err)
    assert said in err, err
    assert err.startswith(("用法：", "错误：")) and "错误：" in err, err
    assert not re.search(r"[\u4e00-\u9fff）][.:]", err), err  # no ASCII full stop or colon after Chinese
    assert not re.search(r"[。，：] ", err), err  # no space after full-width punctuation
    assert "错误：值无效" not in err and "Usage" not in err and "[OPTIONS]" not in err, err
    assert not english_words(err), (dict(english_words(err)), err)


def test_a_missing_option_ends_with_a_chinese_full_stop():
    import click

    from decode_doctor import i18n
    from decode_doctor.i18n import clihelp

    i18n.use("zh-CN")
    try:
        clihelp.point_click_here()
        option = click.Option(["--model"], required=True)
        ctx = click.Context(click.Command("estimate", params=[option]))
        error = click.MissingParameter(ctx=ctx, param=option)
        assert error.format_message() == "缺少选项 --model。"
        choice = click.Option(["--format"], type=click.Choice(["text", "json"]), required=True)
        assert click.MissingParameter(ctx=ctx, param=choice).format_message() == "缺少选项 --format。可选值：\n\ttext\n\tjson"
        bad = click.BadParameter("'5x' 不是有效的时长", ctx=ctx)
        ctx.params["model"] = "5x"
        assert bad.format_message() == "--model 的值无效：'5x' 不是有效的时长"
        assert click.BadParameter("oops", ctx=ctx).format_message() == "值无效：oops"
    finally:
        i18n.use("en")
    error = click.MissingParameter(ctx=ctx, param=option)
    assert error.format_message() == "Missing option '--model'."  # English stays click's own


def test_type_names_and_lists_in_chinese():
    from decode_doctor import i18n
    from decode_doctor.i18n import clihelp

    i18n.use("zh-CN")
    try:
        assert [clihelp.type_name(n) for n in ("integer", "integer range", "float range", "boolean", "path")] == [
            "整数",
            "整数",
            "数值",
            "布尔值",
            "路径",
        ]
        assert clihelp.quoted("it's") == '"it\'s"' and clihelp.quoted('a"b') == '"a\\"b"'
        assert clihelp.bare_hint("'--a' / '-a'") == "--a / -a"
    finally:
        i18n.use("en")
