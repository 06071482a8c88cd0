"""decode-doctor in Simplified Chinese (issue 29): the language setting, the catalog against the
source (every message translated, placeholders kept), `explain` in both languages, a fixture host's
report in Chinese (text golden, HTML in Chromium at 1280 px), and machine-read output identical in
both languages."""

from __future__ import annotations

import ast
import io
import os
import re
import string
import subprocess
import tokenize
from pathlib import Path

import pytest

from decode_doctor import i18n
from decode_doctor.i18n import width
from decode_doctor.i18n.extract import sections

from .conftest import FIXTURES
from .support.harness import chromium_or_skip, cli

REPOSITORY = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
PO = REPOSITORY / "doctor" / "locale" / "zh_CN" / "LC_MESSAGES" / "decode_doctor.po"
HOST = FIXTURES / "hosts" / "swap60-rhel7"
CHINESE_ENV = {"DECODE_DOCTOR_LANG": "", "LC_ALL": "", "LC_MESSAGES": "", "LANG": "zh_CN.UTF-8"}


def _catalog():
    from babel.messages.pofile import read_po

    with open(PO, "rb") as handle:
        return read_po(handle)


def _string(message) -> str:
    return message.string[0] if isinstance(message.string, tuple) else message.string


def _fields(text: str) -> set[str]:
    """The named placeholders of a str.format template, or the %(name)s ones of click's."""
    if "%(" in text:
        return set(re.findall(r"%\((\w+)\)", text))
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


# --- the language setting -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "en"),
        ({"LANG": "zh_CN.UTF-8"}, "zh-CN"),
        ({"LANG": "zh_SG.UTF-8"}, "zh-CN"),
        ({"LANG": "zh_TW.UTF-8"}, "en"),  # Traditional Chinese is not guessed to be Simplified
        ({"LANG": "zh_HK.UTF-8"}, "en"),
        ({"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),
        ({"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh-CN"),
        ({"DECODE_DOCTOR_LANG": "zh-CN", "LANG": "en_US.UTF-8"}, "zh-CN"),
        ({"DECODE_DOCTOR_LANG": "en", "LANG": "zh_CN.UTF-8"}, "en"),
        ({"DECODE_DOCTOR_LANG": "klingon", "LANG": "zh_CN.UTF-8"}, "zh-CN"),  # a stray value: the locale decides
    ],
)
def test_the_language_comes_from_the_variable_then_the_locale(env, expected):
    assert i18n.from_environment(env) == expected


def test_lang_on_any_command_beats_the_environment_and_a_wrong_one_is_a_usage_error():
    zh = cli("explain", "SWAP001", "--lang", "zh-CN", env={"DECODE_DOCTOR_LANG": "en"})
    assert zh.stdout.startswith("SWAP001（警告，检查：swappiness）：启用了 swap 的主机上 vm.swappiness 偏高")
    en = cli("--lang", "en", "explain", "SWAP001", env=CHINESE_ENV)
    assert en.stdout.startswith("SWAP001 (warning, check: swappiness): vm.swappiness is high on a host with swap")
    wrong = cli("explain", "SWAP001", "--lang", "fr")
    assert wrong.exit_code == 2 and "unknown language 'fr': decode-doctor speaks en and zh-CN" in wrong.stderr


def test_help_and_usage_errors_speak_chinese():
    help_text = cli("check", "--help", env=CHINESE_ENV).stdout
    assert help_text.startswith("用法：") and "check [选项]" in help_text.splitlines()[0] and "运行检查并报告发现的问题。" in help_text
    assert "预览针对问题项的修复，确认后执行。" in help_text and "显示此帮助并退出。" in help_text
    top = cli("--help", env=CHINESE_ENV).stdout
    assert "命令" in top and "解释问题代码：含义、为何重要、如何手动修复。" in top
    error = cli("check", "--bogus", env=CHINESE_ENV)
    assert error.exit_code == 2 and "错误：没有 --bogus 这个选项。" in error.stderr
    assert "用法" not in cli("check", "--help").stdout  # English again in the next command


# --- the catalog --------------------------------------------------------------------------------


def test_every_message_of_the_source_is_translated_with_its_placeholders():
    """The template extracted now from the source (babel.cfg) against the committed .po: every id is
    there and translated (100 %: a missing translation fails), with the same placeholders; the .po
    holds nothing the source no longer says."""
    from decode_doctor.i18n.messages import extract

    template = extract()
    catalog = _catalog()
    missing, empty, mismatched = [], [], []
    for message in template:
        if not message.id:
            continue
        found = catalog.get(message.id, context=message.context)
        if found is None:
            missing.append((message.context, message.id))
            continue
        text = _string(found)
        if not text or found.fuzzy:
            empty.append((message.context, message.id))
            continue
        ids = tuple(message.id) if isinstance(message.id, (tuple, list)) else (message.id,)
        # a plural's one Chinese form may name what either English form names (click passes both)
        allowed = set().union(*(_fields(one) for one in ids))
        if not (any(_fields(one) <= _fields(text) for one in ids) and _fields(text) <= allowed):
            mismatched.append((message.context, ids[0], text))
    assert missing == [], f"not in the .po (run python -m decode_doctor.i18n.messages): {missing[:5]}"
    assert empty == [], f"{len(empty)} message(s) without a Chinese translation, e.g. {empty[:5]}"
    assert mismatched == [], f"placeholders differ: {mismatched[:5]}"
    extracted = {(m.context, m.id if isinstance(m.id, str) else m.id[0]) for m in template if m.id}
    stale = [(m.context, m.id) for m in catalog if m.id and (m.context, m.id if isinstance(m.id, str) else m.id[0]) not in extracted]
    assert stale == [], f"the .po holds messages the source no longer has: {stale[:5]}"


def test_no_message_is_marked_inside_an_f_string():
    """Babel cannot see a _("literal") inside an f-string (Python 3.10/3.11 tokenize it as one string):
    such a message would never reach the catalog. (_(a variable) there is fine: its values are marked
    with N_ where they are defined.)"""
    offenders = []
    for path in [*REPOSITORY.joinpath("doctor").rglob("*.py"), *REPOSITORY.joinpath("checks").rglob("*.py")]:
        tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        for token in tokens:
            if (
                token.type == tokenize.STRING
                and re.match(r"^[rRbB]?[fF]", token.string)
                and re.search(r"\b(_|ngettext|pgettext)\(\s*['\"]", token.string)
            ):
                offenders.append(f"{path.relative_to(REPOSITORY)}:{token.start[0]}")
    assert offenders == []


def test_every_literal_message_reaches_the_catalog():
    """A _("…"), said("…"), N_("…") or ngettext("…") with a literal that extraction missed (a file
    claimed by another Babel method, a message nested where Babel does not look) would print English
    in Chinese output: every such literal is a message id of the template."""
    from decode_doctor.i18n.messages import extract

    ids = {message.id[0] if isinstance(message.id, (tuple, list)) else message.id for message in extract() if message.id}
    missed = []
    for folder in ("doctor", "checks", "fixers"):
        for path in REPOSITORY.joinpath(folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args):
                    continue
                first = node.args[0]
                literal = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""
                if node.func.id in ("_", "said", "N_", "ngettext", "N_plural") and literal and literal not in ids:
                    missed.append(f"{path.relative_to(REPOSITORY)}:{node.lineno} {literal[:60]!r}")
    assert missed == []


def _assigns_and_calls_underscore(function: ast.AST) -> bool:
    """Whether a function both binds the name _ in its own scope (a throwaway `for _, x in …`) and
    calls _(): the binding makes _ local to the whole function, and the call then fails."""
    binds = calls = False
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(
            node,
            (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp),
        ):
            continue  # their own scope
        if isinstance(node, ast.Name) and node.id == "_" and isinstance(node.ctx, ast.Store):
            binds = True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_":
            calls = True
        stack.extend(ast.iter_child_nodes(node))
    return binds and calls


def test_no_function_shadows_the_translation_function():
    offenders = []
    for folder in ("doctor", "checks", "fixers"):
        for path in REPOSITORY.joinpath(folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _assigns_and_calls_underscore(node):
                    offenders.append(f"{path.relative_to(REPOSITORY)}:{node.lineno} {node.name}")
    assert offenders == []


def test_the_glossary_terms_are_used_as_the_glossary_says():
    catalog = "\n".join(_string(m) for m in _catalog() if m.id and _string(m))
    glossary = (REPOSITORY / "doctor" / "locale" / "GLOSSARY.md").read_text()
    for chinese in ("KV Cache", "回滚", "隔离", "解码", "预填充", "首 token 时间", "每输出 token 时间", "显存", "张量并行", "量化"):
        assert chinese in glossary
    for wrong in ("KV缓存", "KV 缓存", "撤销", "撤消"):  # the glossary's word is used, not a synonym
        assert wrong not in catalog, wrong


# --- explain ------------------------------------------------------------------------------------


def test_every_code_explains_in_both_languages_wholly_in_chinese():
    from decode_doctor.cli.info import explanation_lines
    from decode_doctor.engine.registry import load

    registry = load()
    for code, (spec, cls) in registry.codes().items():
        i18n.use("en")
        english = explanation_lines(spec, cls.name, registry.fixable(code))
        i18n.use("zh-CN")
        chinese = explanation_lines(spec, cls.name, registry.fixable(code))
        assert english[0].startswith(f"{code} (") and chinese[0].startswith(f"{code}（")
        assert all(width.width(line) <= 96 or " " not in line.strip() or "`" in line for line in chinese[1:])  # a command stays whole
        assert "尚未全部翻译" not in "\n".join(chinese), code
        for section, text in sections(spec):
            assert i18n.translated(code, section, text), (code, section)
    i18n.use("en")


def test_explain_enc001_prints_every_section_in_chinese():
    out = cli("explain", "ENC001", "--lang", "zh-CN").stdout
    for heading in ("含义", "为什么重要", "示例", "手动修复方法", "自动修复"):
        assert f"\n{heading}\n" in out
    assert "模型文本文件不是 UTF-8（可转换）" in out and "【可修复】" in out
    body = [line for line in out.splitlines()[1:] if line.startswith("  ")]
    assert body and all(re.search(r"[\u4e00-\u9fff]", line) or not re.search(r"[a-z]{4,} [a-z]{4,} [a-z]{4,}", line) for line in body)


# --- a fixture host in Chinese ------------------------------------------------------------------


def _host_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    (tmp_path / "bin").mkdir(exist_ok=True)  # no tool of this machine on PATH
    return {"PATH": str(tmp_path / "bin"), **extra}


def _normalised(text: str) -> str:
    text = text.replace(str(FIXTURES), "<fixtures>")
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", "<started>", text)


def test_check_on_a_fixture_host_prints_findings_hints_and_summary_in_chinese(tmp_path):
    args = ("check", "--root", str(HOST), "--select", "swappiness,gpu")
    result = cli(*args, env=_host_env(tmp_path, **CHINESE_ENV))
    text = _normalised(result.stdout)
    golden = GOLDEN / "zh-CN-swap60-rhel7.txt"
    if os.environ.get("DD_UPDATE_GOLDEN") or not golden.exists():
        golden.write_text(text)
    assert text == golden.read_text(), f"{golden.name} differs; python tests/support/regenerate.py rewrites it (read the diff)"
    assert "vm.swappiness 为 60（高于 10）" in text and "1 个警告" in text and "用 `decode-doctor check" in text
    # the plain table pads by display width: the check's column starts where it does in English (9 + 1 + 8 + 1)
    first = text.splitlines()[0]
    assert width.width(first[: first.index("swappiness")]) == 19


def test_the_chinese_html_report_matches_its_golden_and_says_its_language(tmp_path):
    page = tmp_path / "report.html"
    args = ("check", "--root", str(HOST), "--select", "swappiness,gpu", "--format", "html", "-o", str(page))
    cli(*args, env=_host_env(tmp_path, **CHINESE_ENV))
    html = _normalised(page.read_text())
    html = re.sub(r"<td>\d+\.\d\d s</td>", "<td>… s</td>", html)
    golden = GOLDEN / "zh-CN-swap60-rhel7.html"
    if os.environ.get("DD_UPDATE_GOLDEN") or not golden.exists():
        golden.write_text(html)
    assert html == golden.read_text(), f"{golden.name} differs; python tests/support/regenerate.py rewrites it (read the diff)"
    assert '<html lang="zh-CN">' in html and "<h2>问题项</h2>" in html and "<h2>环境</h2>" in html


def test_json_keys_codes_and_metric_names_are_the_same_in_both_languages(tmp_path):
    args = ("check", "--root", str(HOST), "--select", "swappiness,gpu")
    reports = {}
    for lang in ("en", "zh-CN"):
        reports[lang] = cli(*args, "--format", "json", "--lang", lang, env=_host_env(tmp_path)).json()
    en, zh = reports["en"], reports["zh-CN"]

    def shape(value):
        if isinstance(value, dict):
            return {key: shape(item) for key, item in value.items()}
        if isinstance(value, list):
            return [shape(item) for item in value]
        return type(value).__name__

    assert shape(en) == shape(zh)
    assert [f["code"] for f in en["findings"]] == [f["code"] for f in zh["findings"]]
    assert [f["evidence"] for f in en["findings"]] == [f["evidence"] for f in zh["findings"]]
    assert en["run"]["lang"] == "en" and zh["run"]["lang"] == "zh-CN"
    assert en["findings"][0]["message"] != zh["findings"][0]["message"]  # the message follows the language
    metrics = {}
    for lang in ("en", "zh-CN"):
        out = cli(*args, "--format", "prometheus", "--lang", lang, env=_host_env(tmp_path)).stdout
        metrics[lang] = sorted({line.split("{")[0].split(" ")[0] for line in out.splitlines() if line and not line.startswith("#")})
        metrics[lang + " labels"] = sorted(set(re.findall(r'(\w+)="', out)))
    assert metrics["en"] == metrics["zh-CN"] and metrics["en labels"] == metrics["zh-CN labels"] and metrics["en"]


def test_the_chinese_report_renders_in_chromium_without_overflow_at_1280px(tmp_path):
    chromium = chromium_or_skip()
    from .support.modelgen import qwen2_7b

    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    page = tmp_path / "report.html"
    args = ["--select", "swappiness,decode-budget,gpu", "--model", str(model), "--bandwidth", "51.2", "--format", "html", "-o", str(page)]
    cli("check", "--root", str(HOST), *args, env=_host_env(tmp_path, **CHINESE_ENV))
    assert '<html lang="zh-CN">' in page.read_text()
    harness = tmp_path / "measure.html"
    harness.write_text(
        '<!DOCTYPE html><body style="margin:0"><iframe id="r" src="report.html" style="width:1280px;height:900px;border:0"></iframe>'
        '<script>r.onload=()=>{const d=r.contentDocument.documentElement;document.title="width "+d.scrollWidth+" of "+d.clientWidth}'
        "</script></body>"
    )
    common = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1280,900", "--allow-file-access-from-files", "--virtual-time-budget=5000",
    ]  # fmt: skip
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run([*common, "--dump-dom", harness.as_uri()], capture_output=True, text=True, timeout=120, env=env)
    title = re.search(r"<title>width (\d+) of (\d+)</title>", proc.stdout)
    assert title, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert int(title.group(1)) <= int(title.group(2)) <= 1280  # nothing scrolls sideways
    shot = tmp_path / "report.png"
    subprocess.run([*common, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120, env=env)
    from PIL import Image

    with Image.open(shot) as image:
        assert image.size == (1280, 900)
        colours = image.convert("L").getcolors(maxcolors=1 << 16)
    assert colours is not None and len(colours) > 8  # text was drawn, not a blank page


# --- display width ------------------------------------------------------------------------------


def test_display_width_pads_and_wraps_cjk_text_by_columns():
    assert width.width("警告") == 4 and width.width("warn") == 4 and width.width("KV Cache 占用") == 13
    assert width.ljust("警告", 8) == "警告    " and width.width(width.ljust("提示", 8)) == 8
    lines = width.wrap("模型的配置文件不是 UTF-8 编码：它以 GBK 保存，transformers 读取时会报 UnicodeDecodeError。", 30, "  ")
    assert all(width.width(line) <= 30 for line in lines) and len(lines) > 2
    assert not any(line.strip().startswith(("，", "。", "：")) for line in lines)  # no line starts with closing punctuation
    assert (
        "".join(line.strip() for line in lines).replace(" ", "")
        == "模型的配置文件不是UTF-8编码：它以GBK保存，transformers读取时会报UnicodeDecodeError。"
    )


# --- estimate and bench in Chinese -----------------------------------------------------------


def test_estimate_prints_its_plan_and_sweep_in_chinese_with_aligned_columns(tmp_path):
    from .support.modelgen import qwen2_7b

    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    args = ("estimate", "--model", str(model), "--bandwidth", "50", "--memory", "64GiB", "--state-dir", str(tmp_path / "state"))
    out = cli(*args, "--lang", "zh-CN").stdout
    english = cli(*args).stdout
    rows = out.split("\n\n", 1)[0].splitlines()
    labels = [row.split("  ", 1)[0] for row in rows]
    assert labels[:7] == ["模型", "架构", "权重", "设备", "KV Cache", "单设备内存", "规则"], labels
    starts = {width.width(row) - width.width(row.lstrip(" ")[len(label) :].lstrip(" ")) for row, label in zip(rows, labels, strict=True)}
    assert len(starts) == 1  # every value starts in one display column, whatever its label's width
    assert "需要 " in out and "放得下" in out and "合计解码 tok/s" in out
    sweep = out.split("合计解码 tok/s", 1)[1].splitlines()[1:3]
    assert width.width(sweep[0]) == width.width(sweep[1]) and sweep[0].lstrip().startswith("上下文")
    assert english.split("\n\n", 1)[0].splitlines()[0].startswith("model ")  # English stays as it was
    data = {lang: cli(*args, "--format", "json", "--lang", lang).json() for lang in ("en", "zh-CN")}
    assert data["en"] == data["zh-CN"]  # the plan's JSON does not change with the language


def test_bench_lines_and_the_prediction_read_in_chinese():
    from decode_doctor.checks.serving.facts import PredictionCheck, ServingFacts

    from .test_serving import bench_of, level

    check = PredictionCheck(2.0, 1.9, 2.1, 2.6, 0.3, "llama.cpp", "0.3.36", 2, "Q4_0", 512, 1.9, 0.01, ("the host was busy",), "bench", "")
    facts = ServingFacts(endpoint="http://127.0.0.1:8080/v1", engine="llama-cpp-python", model="m", bench=bench_of([level(1, [0.02] * 12)]))
    facts = ServingFacts(**{**facts.__dict__, "prediction": check})
    i18n.use("zh-CN")
    lines = facts.summary()
    i18n.use("en")
    text = "\n".join(lines)
    assert "bench http://127.0.0.1:8080/v1（llama-cpp-python，模型 m）：" in text
    assert "  并发   1：成功 12 个请求；TTFT p50" in text and "TPOT p50 20.0 ms" in text
    assert "预测 TPOT 2.00 ms（1.90 ms–2.10 ms；llama.cpp 0.3.36，由实测 bench 学习 2 线程、Q4_0 权重" in text
    assert "  差距原因：the host was busy" in text


def test_the_fix_preview_question_apply_and_undo_speak_chinese(tmp_path):
    import shutil

    root = tmp_path / "host"
    shutil.copytree(HOST, root, symlinks=True)
    state = tmp_path / "state"
    before = (root / "proc/sys/vm/swappiness").read_bytes()
    args = ("check", "--root", str(root), "--select", "swappiness", "--state-dir", str(state), "--lang", "zh-CN")
    preview = cli(*args, "--fix", "--dry-run", env=_host_env(tmp_path)).stdout
    assert "计划执行的修复（1 项）：" in preview and "SWAP001 将 vm.swappiness 设为 1（立即生效，重新开机后依然有效）" in preview
    assert "试运行：没有做任何修改。" in preview and "（当前为 60）" in preview
    applied = cli(*args, "--fix", "--yes", env=_host_env(tmp_path)).stdout
    assert "修复日志已保存（运行 ID " in applied and "回滚命令：decode-doctor undo " in applied and "修复后复查：" in applied
    assert "    SWAP001：已解决" in applied
    listed = cli("undo", "--list", "--state-dir", str(state), "--lang", "zh-CN").stdout
    assert "1 个操作" not in listed and "2 个操作" in listed and "已应用" in listed
    undone = cli("undo", "--state-dir", str(state), "--lang", "zh-CN").stdout
    assert undone.startswith("正在回滚修复（运行 ID ") and "已恢复" in undone
    assert (root / "proc/sys/vm/swappiness").read_bytes() == before


def test_bench_judgement_reads_in_chinese_and_keeps_its_evidence():
    from decode_doctor.checks.serving.facts import Ceiling
    from decode_doctor.checks.serving.judge import judge

    from .test_serving import bench_of, level

    bench = bench_of([level(1, [0.02] * 12)])  # 50 tok/s against a 200 tok/s ceiling
    ceiling = Ceiling(200.0, "cpu", 50.0, "measured", 4096, "m")
    english = {v.code.code: v for v in judge(bench, ceiling)}
    i18n.use("zh-CN")
    chinese = {v.code.code: v for v in judge(bench, ceiling)}
    i18n.use("en")
    assert chinese["LIV001"].message == "并发 1 时的解码只达到本机上限的 25%：50.0 / 200.0 tok/s（TPOT p50 20.0 ms，上限对应 5.00 ms）。"
    assert chinese["LIV001"].evidence == english["LIV001"].evidence and "25 % of this host's ceiling" in english["LIV001"].message


def test_chinese_without_a_compiled_catalog_says_so_and_prints_english(monkeypatch):
    monkeypatch.setattr(i18n, "compiled", lambda language=i18n.CHINESE: False)
    monkeypatch.setattr(i18n, "catalog", lambda language: __import__("gettext").NullTranslations())
    result = cli("explain", "SWAP001", "--lang", "zh-CN")
    assert "the zh-CN catalog is not compiled (python -m decode_doctor.i18n.compile); printing in English" in result.stderr
    assert result.stdout.startswith("SWAP001 (warning, check: swappiness)") and result.exit_code == 0


# --- findings whose English stays in the evidence ------------------------------------------------

ENGLISH_RUN = re.compile(r"(?<![-/.\w])[A-Za-z][a-z]+(?:[ ,]+[A-Za-z][a-z]+){3,}")
# words a Chinese line quotes as the source wrote them: a board's model name, the Docker SDK's error, a kernel log line
QUOTED = ("Jetson Nano Developer Kit", "Error while fetching server API version", "NVRM: ")


def _english_runs(text: str) -> list[str]:
    return [m.group(0) for line in text.splitlines() for m in [ENGLISH_RUN.search(line)] if m and not any(q in line for q in QUOTED)]


@pytest.mark.parametrize("host", sorted(p.name for p in (FIXTURES / "hosts").iterdir()))
def test_every_fixture_host_reads_in_chinese_without_english_sentences(host, tmp_path):
    """Findings, not-judged lines, the info lines and the environment table: no run of four English
    words in zh-CN text or Markdown output (flags, paths, codes and quoted source text aside)."""
    env = _host_env(tmp_path)
    for fmt in ("text", "markdown"):
        out = cli("check", "--root", str(FIXTURES / "hosts" / host), "--format", fmt, "-v", "--lang", "zh-CN", env=env)
        body = out.stdout.split("```json")[0] if fmt == "text" else re.sub(r"```json.*?```", "", out.stdout, flags=re.S)
        assert _english_runs(body) == [], (fmt, out.stdout[:2000])


def test_a_pasted_xid_log_is_judged_in_chinese_with_english_evidence():
    log = str(FIXTURES / "nvidia" / "kernel-logs" / "dmesg-ctime-xid-13x3-109-gpud.txt")
    english = cli("analyze", log, "--format", "json", "--lang", "en").json()["findings"]
    chinese = cli("analyze", log, "--format", "json", "--lang", "zh-CN").json()["findings"]
    assert [f["code"] for f in chinese] == [f["code"] for f in english] == ["GPU018"]
    assert chinese[0]["evidence"] == english[0]["evidence"]
    assert "中有 NVIDIA Xid 错误" in chinese[0]["message"] and "复位 GPU" in chinese[0]["message"]
    assert "holds NVIDIA Xid errors" in english[0]["message"]


def test_a_broken_image_is_reported_in_chinese_and_quarantined_with_english_reasons(tmp_path):
    from PIL import Image

    dataset = tmp_path / "images"
    dataset.mkdir()
    Image.new("RGB", (40, 40), "red").save(dataset / "whole.jpg")
    data = (dataset / "whole.jpg").read_bytes()
    (dataset / "cut.jpg").write_bytes(data[: len(data) // 2])
    (dataset / "page.png").write_bytes(b"<html><body>not found</body></html>")
    args = ("check", "--images", str(dataset), "--select", "images", "--format", "json")
    english = {f["path"]: f for f in cli(*args, "--lang", "en").json()["findings"]}
    chinese = {f["path"]: f for f in cli(*args, "--lang", "zh-CN").json()["findings"]}
    page = str(dataset / "page.png")
    assert chinese[page]["evidence"] == english[page]["evidence"]
    assert "HTML 网页，不是图片" in chinese[page]["message"] and "an HTML page, not an image" in english[page]["message"]
    assert english[page]["evidence"]["reasons"][0]["message"].startswith("an HTML page, not an image")
    preview = cli("check", "--images", str(dataset), "--select", "images", "--fix", "--dry-run", "--lang", "zh-CN").stdout
    assert "（不是图片：HTML 网页，不是图片" in preview
    cli("check", "--images", str(dataset), "--select", "images", "--fix", "--yes", "--lang", "zh-CN")
    manifest = (tmp_path / "images.quarantine" / "manifest.jsonl").read_text()
    assert "not an image: an HTML page, not an image" in manifest and "不是图片" not in manifest


def test_estimate_from_a_config_alone_reads_in_chinese_and_its_json_stays_english(tmp_path):
    model = tmp_path / "oss"
    model.mkdir()
    (model / "config.json").write_text((FIXTURES / "models" / "configs" / "gpt-oss-20b.json").read_text())
    args = ("estimate", "--model", str(model), "--bandwidth", "50", "--memory", "17GiB", "--state-dir", str(tmp_path / "state"))
    text = cli(*args, "--lang", "zh-CN").stdout
    assert "仅凭配置" in text and "可选调整" in text and "llama-server 只能加载 GGUF" in text
    assert _english_runs(text.split("llama-server -m")[0]) == []
    english = cli(*args, "--format", "json", "--lang", "en").stdout
    assert cli(*args, "--format", "json", "--lang", "zh-CN").stdout == english
    assert "the config alone" in english
