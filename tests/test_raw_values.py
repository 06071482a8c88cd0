"""No raw program value reaches a sentence (issue 51), in either language.

Two gates. At render time: every placeholder of a message (`_()`, `ngettext()`, `pgettext()`, `said()`)
and every environment row refuse None, a bool, an exception, an Enum's machine value and the words a
program writes for them ("None", "unknown", "absent", "?"), in strict mode — which the test session
turns on for itself and every decode-doctor it starts, so every path any test reaches is held to it.
Over the output: every command on every fixture, in both languages and every report format, is read
for what such a value looks like once printed (None, True, a Python exception's text, `(None MiB)`).
"""

from __future__ import annotations

import enum
import re
import shutil
from pathlib import Path

import pytest

from decode_doctor import i18n
from decode_doctor.engine.facts import EnvRow, device_with_memory
from decode_doctor.engine.findings import State
from decode_doctor.i18n import RawValueInSentence, _, said

from .conftest import FIXTURES, REPO, run_dd

HOSTS = sorted(p.name for p in (FIXTURES / "hosts").iterdir() if p.is_dir())
CHECKS = "gpu,gpu-health,swappiness,docker,nvidia-container,accelerators,referrers,engine-failures"
PASTED = sorted(
    p
    for folder in ("accelerators", "nvidia/nvidia-smi-errors", "nvidia/kernel-logs", "nvidia/collect-env", "serving/logs")
    for p in (FIXTURES / folder).rglob("*")
    if p.is_file() and p.suffix in (".txt", ".log", ".json")
)
CONFIGS = sorted((FIXTURES / "models" / "configs").glob("*.json"))
LANGUAGES = ["en", "zh-CN"]

# what a program value looks like once printed: outside quotes and backticks, as a word of its own
RAW = re.compile(r"(?<![\w\"'`/.=-])(None|True|False|null|NaN)(?![\w\"'`/=-])|\[Errno \d+\]|Traceback \(most recent|<\w+ object at 0x")
CHINESE_RAW = re.compile(r"(?<![\w\"'`/.=-])(absent|unknown|none)(?![\w\"'`/=-])|[（(]\?[ ）)]|\s\?（")


def _raw_in(text: str, language: str) -> list[str]:
    # evidence quoted from a capture stays as the capture has it
    prose = re.sub(r'(?ms)^```.*?^```|`[^`\n]*`|"[^"\n]*"|“[^”\n]*”|<code>.*?</code>|<pre>.*?</pre>', "", text)
    found = [m.group(0) for m in RAW.finditer(prose)]
    if language != "en":
        found += [m.group(0) for m in CHINESE_RAW.finditer(prose)]
    return found


def _run(language: str, *args: str, tmp: Path) -> str:
    (tmp / "bin").mkdir(exist_ok=True)
    result = run_dd("--lang", language, *args, env={"PATH": str(tmp / "bin")}, cwd=REPO)
    output = result.stdout + result.stderr
    assert result.returncode in (0, 1, 3), f"decode-doctor {' '.join(args)} ended {result.returncode}:\n{output}"
    return output


class Colour(enum.Enum):
    RED = "red"


@pytest.mark.parametrize(
    "value",
    [None, True, False, OSError(28, "No space left on device"), Colour.RED, State.PASSED, "None", "unknown", "absent", "?", float("nan")],
    ids=repr,
)
def test_a_program_value_given_to_a_sentence_fails_in_strict_mode(value):
    with pytest.raises(RawValueInSentence, match=r"\{value\}"):
        _("the driver is {value}", value=value)
    with pytest.raises(RawValueInSentence):
        said("the driver is {value}", value=value)


def test_outside_strict_mode_a_program_value_reads_as_words_in_the_language_of_the_command(monkeypatch):
    monkeypatch.delenv(i18n.STRICT_ENV)
    assert _("driver {version}", version=None) == "driver not known"
    i18n.use("zh-CN")
    try:
        assert "None" not in _("driver {version}", version=None) and "未知" in _("driver {version}", version=None)
    finally:
        i18n.use("en")


def test_words_numbers_and_labels_fill_sentences():
    assert _("{state}: {count} GPUs, {share:.0%}", state=State.PASSED.label, count=0, share=0.5) == "passed: 0 GPUs, 50%"


def test_an_environment_row_refuses_a_composed_none_and_a_device_without_memory_says_so():
    with pytest.raises(RawValueInSentence):
        EnvRow("GPU 0", "NVIDIA H200 (None MiB)")
    assert EnvRow("GPU 0", device_with_memory("NVIDIA H200", None)).value == "NVIDIA H200 (memory not reported)"
    assert device_with_memory("NVIDIA H200", 143771) == "NVIDIA H200 (143,771 MiB)"


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("host", HOSTS)
def test_check_on_every_fixture_host_in_every_format_prints_no_raw_value(tmp_path, host, language):
    """The terminal's text, and the bundle's Markdown and HTML (one `report` run writes both)."""
    root = ("--root", f"fixtures/hosts/{host}", "--select", CHECKS)
    outputs = {"text": _run(language, "check", *root, "--verbose", tmp=tmp_path)}
    _run(language, "report", *root, "-o", str(tmp_path / "bundle.tar.gz"), tmp=tmp_path)
    shutil.unpack_archive(tmp_path / "bundle.tar.gz", tmp_path / "bundle", "gztar")
    outputs |= {ext: next((tmp_path / "bundle").glob(f"*/report.{ext}")).read_text() for ext in ("md", "html")}
    for fmt, out in outputs.items():
        assert not _raw_in(out, language), (fmt, _raw_in(out, language), out)


@pytest.mark.parametrize("language", LANGUAGES)
def test_analyze_of_every_pasted_capture_prints_no_raw_value(tmp_path, language):
    """Every capture in one run: analyze judges each file on its own and names it in every line."""
    out = _run(language, "analyze", *(str(path.relative_to(REPO)) for path in PASTED), tmp=tmp_path)
    assert len(PASTED) > 40 and not _raw_in(out, language), (_raw_in(out, language), out)


@pytest.mark.parametrize("language", LANGUAGES)
def test_estimate_of_every_fixture_model_prints_no_raw_value(tmp_path, language):
    for config in CONFIGS:
        model = tmp_path / config.stem
        model.mkdir(exist_ok=True)
        shutil.copy(config, model / "config.json")
        for extra in (
            ("--gpu", "H100-SXM", "--gpus", "8", "--context", "131072", "--concurrency", "32"),
            ("--bandwidth", "40", "--memory", "16"),
        ):
            out = _run(language, "estimate", "--model", str(model), *extra, tmp=tmp_path)
            assert not _raw_in(out, language), (config.stem, _raw_in(out, language), out)


@pytest.mark.parametrize("language", LANGUAGES)
def test_diff_merge_and_report_of_fixture_hosts_print_no_raw_value(tmp_path, language):
    reports = []
    for host in ("gpu-node", "gpu-node-xid", "gpu-h200"):
        path = tmp_path / f"{host}.json"
        run_dd("check", "--root", f"fixtures/hosts/{host}", "--select", CHECKS, "--format", "json", "-o", str(path), cwd=REPO)
        reports.append(path)
    outputs = [
        _run(language, "diff", str(reports[0]), str(reports[1]), tmp=tmp_path),
        _run(language, "diff", str(reports[0]), str(reports[2]), tmp=tmp_path),
        _run(language, "merge", *map(str, reports), tmp=tmp_path),
        _run(language, "merge", "--format", "markdown", *map(str, reports), tmp=tmp_path),
    ]
    _run(language, "report", "--root", "fixtures/hosts/gpu-h200", "--select", CHECKS, "-o", str(tmp_path / "b.tar.gz"), tmp=tmp_path)
    shutil.unpack_archive(tmp_path / "b.tar.gz", tmp_path / "bundle", "gztar")
    outputs += [next((tmp_path / "bundle").glob(f"*/report.{ext}")).read_text() for ext in ("md", "html")]
    for out in outputs:
        assert not _raw_in(out, language), (_raw_in(out, language), out)


def test_the_output_gate_sees_what_a_raw_value_looks_like_and_lets_quoted_evidence_pass():
    assert _raw_in("GPU 0 | NVIDIA H200 (None MiB)", "en") == ["None"]
    assert _raw_in("the run failed: OSError: [Errno 28] No space left on device", "en") == ["[Errno 28]"]
    assert _raw_in("NVIDIA 驱动：absent → 550.54.15；驱动 ?（来自 /proc）", "zh-CN") == ["absent", " ?（"]
    assert not _raw_in('vLLM says "got None for max_tokens"; `--flag=True`; torch.cuda.is_available()', "en")
