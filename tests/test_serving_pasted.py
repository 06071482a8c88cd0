"""`decode-doctor analyze` on what users paste from servers: vLLM, SGLang and llama.cpp logs and
captured SSE streams from public issues (fixtures/serving/logs, fixtures/serving/sse; sources in
fixtures/SOURCES.md), read into the same codes the live serving check gives, each citing its line."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decode_doctor.checks.serving import logtext, ssetext
from decode_doctor.checks.serving.check import Serving

from .conftest import FIXTURES
from .support.harness import cli

LOGS = FIXTURES / "serving" / "logs"
SSE = FIXTURES / "serving" / "sse"


def analyze(path, *args: str):
    result = cli("analyze", str(path), "--format", "json", *args)
    return result, result.json()


@pytest.mark.parametrize(
    ("fixture", "expected", "words", "exit_code"),
    [
        # vllm-project/vllm#3094: 2 running, 3 pending, KV 82.1 %: the cache is the limit, not --max-num-seqs
        ("vllm-v0-issue3094.log", ["SRV001"], ["--gpu-memory-utilization", "--max-model-len", "--kv-cache-dtype fp8", "line 1"], 0),
        ("vllm-v1-issue43295.log", ["SRV001"], ["43 request(s) wait while 18 of 256", "Seen in 5 of 5"], 3),  # V1: preemption not logged
        # at the limit the log states, with room in the cache: the queueing diagnosis naming the limit
        ("vllm-v1-at-max-num-seqs.derived.log", ["SRV003"], ["32 of 32", "a higher --max-num-seqs"], 3),
        ("vllm-v0-issue11517-startup-and-stats.log", ["SRV003"], ["neither the sequence limit nor the cache binds"], 0),
        ("vllm-v0-issue6737.log", ["SRV001", "SRV003"], ["both the sequence limit and the cache bind"], 0),
        ("vllm-v0-preemption-pr6102.log", ["SRV002"], ["vLLM preempted sequences", "line 1"], 3),  # no stats lines
        ("sglang-issue938.log", ["SRV001"], ["12,279 request(s) wait", "--mem-fraction-static"], 0),
        ("sglang-issue14972.log", ["SRV001"], ["94.0% full"], 0),
        ("sglang-issue4184-retract.log", ["SRV002"], ["retracted 4 running request(s)"], 3),
        ("sglang-issue3909-healthy.log", [], [], 0),
        (
            "llamacpp-issue10547-truncated.log",
            ["SRV007"],
            ["its slot of 4,096 tokens, first at", "The largest was 39,846 tokens.", "line 6"],
            3,
        ),
        ("llamacpp-lemonade346-context-shift.log", ["SRV007"], ["shifted a slot's context 4 time(s)"], 3),
        ("llamacpp-gpustack852-exceeds.log", ["SRV007"], ["refused 1 request(s)", "line 3"], 3),
    ],
)
def test_server_logs_read_into_the_live_checks_codes(fixture, expected, words, exit_code):
    result, report = analyze(LOGS / fixture)
    found = report["findings"]
    assert sorted(f["code"] for f in found) == expected
    text = " ".join(f["message"] for f in found)
    assert all(word in text for word in words), text
    assert all(f["evidence"]["line"] >= 1 and f["evidence"]["source"] == fixture for f in found)  # each cites its line
    assert result.exit_code == exit_code and (report["summary"]["verdict"] == "incomplete") == (exit_code == 3)


def test_the_3094_numbers_give_the_same_diagnosis_pasted_and_live():
    _, pasted = analyze(LOGS / "vllm-v0-issue3094.log")
    (kv,) = pasted["findings"]
    assert "KV-cache capacity is vLLM's limit" in kv["message"] and "would change nothing" in kv["message"]
    assert (kv["evidence"]["kv_usage"], kv["evidence"]["waiting"], kv["evidence"]["running"]) == (0.821, 3.0, 2.0)
    facts = pasted["facts"]["serving (vllm-v0-issue3094.log)"]
    assert facts["origin"] == "vLLM log" and facts["peaks"]["readings"] == 1


@pytest.mark.parametrize(
    ("fixture", "expected", "words"),
    [
        ("vllm-issue35705-cut.sse", ["LIV004", "LIV009"], ["neither a finish_reason nor data: [DONE]", "line 12"]),
        ("vllm-pr19662-stream.sse", ["LIV009"], ["no usage block"]),
    ],
)
def test_a_captured_stream_reads_into_the_live_checks_codes(fixture, expected, words):
    result, report = analyze(SSE / fixture)
    assert sorted(f["code"] for f in report["findings"]) == expected
    text = " ".join(f["message"] for f in report["findings"])
    assert all(word in text for word in words)
    cut = [f for f in report["findings"] if f["code"] == "LIV004"]
    assert result.exit_code == (1 if cut else 0) and all(f["severity"] == "error" for f in cut)


def test_a_complete_stream_with_usage_is_judged_clean():
    result, report = analyze(FIXTURES / "serving" / "llamacpp-chat-stream-with-timings.sse")
    assert report["findings"] == [] and result.exit_code == 0
    notes = report["facts"]["serving (llamacpp-chat-stream-with-timings.sse)"]["pasted"]
    assert "finish reason: length (line 11)" in notes and "data: [DONE] at line 15" in notes


def test_a_stream_over_max_tokens_is_liv005(tmp_path):
    request = '{"model": "m", "max_tokens": 4, "stream": true}\n'
    chunk = {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}
    last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}], "usage": {"prompt_tokens": 3, "completion_tokens": 9}}
    body = request + "".join(f"data: {json.dumps(chunk)}\n\n" for _ in range(9)) + f"data: {json.dumps(last)}\n\ndata: [DONE]\n"
    paste = tmp_path / "stream.txt"
    paste.write_text(body)
    _, report = analyze(paste)
    (over,) = report["findings"]
    assert over["code"] == "LIV005" and "9 tokens where the request's max_tokens allowed 4" in over["message"]


def test_a_log_and_a_stream_in_text_and_html(tmp_path):
    text = cli("analyze", str(LOGS / "vllm-v1-issue43295.log")).stdout
    assert "its log (5 stats lines): peak KV cache in use 98.4%" in text and "not judged — preemption (vLLM)" in text
    out = tmp_path / "r.html"
    cli("analyze", str(LOGS / "vllm-v1-issue43295.log"), "--format", "html", "-o", str(out))
    assert "What the vLLM log says" in out.read_text()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "Avg prompt throughput: 1 tokens/s, Running: ",
                "Pending: ",
                "Waiting: 3 reqs, GPU KV cache usage: ",
                "#running-req: ",
                "Decode batch. ",
                "token usage: 0.",
                "#queue-req: ",
                "n_ctx_slot = ",
                "n_prompt_tokens = ",
                "input truncated",
                "slot context shift",
                "'max_num_seqs': ",
                "#retracted_reqs: ",
                "data: {",
                'data: {"choices": [',
                "data: [DONE]",
                "9,9.9,",
                "%",
                "\n",
                "nan",
                "-1",
                '"max_tokens": ',
            ]
        ),
        max_size=40,
    )
)
def test_any_paste_reads_without_raising(parts):
    text = "".join(parts)
    Serving.analyze(text, "paste.txt")
    logtext.read_log(text)
    ssetext.read_transcript(text)


def test_hostile_pastes_are_bounded():
    deep = "data: " + "[" * 100_000 + "]" * 100_000 + "\n"
    transcript = ssetext.read_transcript(deep + 'data: {"choices": []}\n')
    assert transcript is not None and transcript.malformed and transcript.events == 1
    long_line = "Avg prompt throughput: Running: 1 reqs, GPU KV cache usage: 99% " + "x" * (logtext.MAX_LINE_CHARS + 1)
    log = logtext.read_log(long_line + "\nAvg prompt throughput: 0 tokens/s, Running: 1 reqs, Pending: 0 reqs, GPU KV cache usage: 1.0%\n")
    assert log is not None and log.skipped == 1 and len(log.stats) == 1


def test_a_log_that_quotes_a_stream_is_a_log_and_a_stream_that_quotes_an_error_is_a_stream(tmp_path):
    log = (LOGS / "llamacpp-issue10547-truncated.log").read_text() + 'data: {"choices": [{"delta": {"content": "hi"}}]}\n'
    (tmp_path / "server.log").write_text(log)
    _, report = analyze(tmp_path / "server.log")
    assert [f["code"] for f in report["findings"]] == ["SRV007"]  # its slot lines, not a one-chunk stream
    error = '{"error": {"code": 400, "message": "the request exceeds the available context size", "type": "exceed_context_size_error"}}'
    (tmp_path / "stream.txt").write_text(f"data: {error}\n\n")
    result, report = analyze(tmp_path / "stream.txt")
    (failed,) = report["findings"]
    assert failed["code"] == "LIV004" and "error event" in failed["message"] and result.exit_code == 1
