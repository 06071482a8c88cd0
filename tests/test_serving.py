"""Live decode measurement: the streaming client against a fault server, `bench` end to end, the
server diagnosis on recorded /metrics of real engines, and a real engine (llama-cpp-python's
server on a random-weight GGUF)."""

from __future__ import annotations

import asyncio
import json
import math
import signal
import subprocess
import sys
import time
from importlib import resources

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decode_doctor.checks.serving import diagnosis, engines, promtext
from decode_doctor.checks.serving.check import Serving
from decode_doctor.checks.serving.client import Endpoint, Record, StreamLimits, stream
from decode_doctor.checks.serving.facts import BenchRun, Ceiling, PromptSummary
from decode_doctor.checks.serving.judge import judge as judge_verdicts
from decode_doctor.checks.serving.load import LoadPlan, run_level
from decode_doctor.checks.serving.stats import Dist, knee, parse_slo, percentile, summarise

from .conftest import FIXTURES
from .support.faultserver import FaultServer
from .support.harness import cli
from .support.llamaserver import available, llama_server

SERVING = FIXTURES / "serving"
SECRET = "sk-decodedoctortestkey0123456789abcdef"


def judge(bench: BenchRun, ceiling: Ceiling | None, engine: str | None = None) -> list:
    """The judgement's verdicts, each also made into the serving check's finding as a run makes it
    (the code gate counts the codes checks emit)."""
    verdicts = judge_verdicts(bench, ceiling, engine)
    Serving()._findings(verdicts, "http://127.0.0.1:8000")
    return verdicts


def capture(name: str) -> engines.Snapshot:
    return engines.snapshot(promtext.parse((SERVING / name).read_bytes()))


def codes(report: dict) -> list[str]:
    return [f["code"] for f in report["findings"]]


@pytest.fixture(scope="module")
def schema():
    return json.loads(resources.files("decode_doctor.schema").joinpath("report-v2.schema.json").read_text())


# --- the server's own metrics, recorded from real engines ------------------------------------------


def test_each_engine_is_read_from_its_recorded_metrics():
    sglang = capture("sglang-llama31-8b-loaded.prom")
    assert (sglang.engine, sglang.kv_usage, sglang.running, sglang.waiting) == ("SGLang", 0.28, 162.0, 2826.0)
    assert sglang.itl is not None and sglang.itl.count == 7400757 and sglang.ttft.count == 11008
    vllm = capture("vllm-v0-qwen25-coder-1.5b-idle.prom")
    assert (vllm.engine, vllm.kv_usage, vllm.preemptions, vllm.prompt_tokens, vllm.generation_tokens) == ("vLLM", 0.0, 0.0, 148.0, 955.0)
    v1 = capture("vllm-v1-0.10.0-glm45.excerpt.prom")  # V1: kv_cache_usage_perc with an engine="0" label
    assert v1.engine == "vLLM" and v1.kv_usage == pytest.approx(9.7501e-06)
    llama = capture("llamacpp-np2-under-load.prom")
    assert (llama.engine, llama.running, llama.waiting, llama.prompt_tokens) == ("llama.cpp", 2.0, 20.0, 212.0)
    slots = engines.slots_from(json.loads((SERVING / "llamacpp-np2-slots-under-load.json").read_text()))
    assert slots == engines.Slots(total=2, busy=2, n_ctx=1024)


def test_histogram_quantiles_follow_prometheus():
    # sglang's TPOT histogram: the median falls in (0.075, 0.1], the p99 in (0.5, 0.75]
    itl = capture("sglang-llama31-8b-loaded.prom").itl
    assert 0.075 < itl.quantile(0.5) <= 0.1 and 0.5 < itl.quantile(0.99) <= 0.75
    flat = engines.Histogram(((0.1, 0.0), (0.2, 10.0), (math.inf, 10.0)), 10.0, 1.5)
    assert flat.quantile(0.5) == pytest.approx(0.15) and flat.mean == 0.15
    assert engines.Histogram(((0.1, 0.0), (math.inf, 5.0)), 5.0, 9.0).quantile(0.5) is None  # only "above 0.1 s" is known
    later = engines.Histogram(((0.1, 4.0), (0.2, 14.0), (math.inf, 14.0)), 14.0, 2.0)
    assert later.since(flat).buckets == ((0.1, 4.0), (0.2, 4.0), (math.inf, 4.0))


@pytest.mark.parametrize(
    ("fixture", "expected", "flag"),
    [
        ("sglang-llama31-8b-loaded.prom", ["SRV003", "SRV004"], "--chunked-prefill-size"),
        ("llamacpp-np2-under-load.prom", ["SRV003"], "-np/--parallel"),
        ("vllm-v0-qwen25-coder-1.5b-idle.prom", [], ""),
        ("vllm-v1-0.10.0-glm45.excerpt.prom", [], ""),
        # 5 wait, 31 of vLLM's default 256 run, KV 97 % full: the cache is the limit, not queueing
        ("vllm-v0-qwen25-coder-1.5b-derived-kv-full.prom", ["SRV001", "SRV002"], "--gpu-memory-utilization"),
        ("tgi-documented-names.handmade.prom", ["SRV003"], "--max-batch-total-tokens"),
    ],
)
def test_the_diagnosis_of_each_recorded_server(fixture, expected, flag):
    verdicts = diagnosis.diagnose(capture(fixture))
    assert [v.code.code for v in verdicts] == expected
    assert not flag or any(flag in v.message for v in verdicts)  # the engine's flag that helps


def test_around_a_run_counters_count_what_the_run_added():
    before = capture("vllm-v0-qwen25-coder-1.5b-idle.prom")
    after = capture("vllm-v0-qwen25-coder-1.5b-derived-kv-full.prom")
    during = {v.code.code: v for v in diagnosis.diagnose(after, before, peak_kv=0.5, peak_waiting=0)}
    assert during["SRV002"].evidence["preemptions"] == 12.0 and "during the run" in during["SRV002"].message
    again = diagnosis.diagnose(after, after)  # nothing preempted between two equal readings
    assert "SRV002" not in [v.code.code for v in again]
    slots = engines.slots_from(json.loads((SERVING / "llamacpp-np2-slots-under-load.json").read_text()))
    llama = capture("llamacpp-np2-after-load.prom").with_slots(slots)
    (short,) = diagnosis.diagnose(llama, llama, planned_tokens=1100)
    assert short.code.code == "SRV007" and "1,024 tokens" in short.message


def test_hostile_metrics_text_is_bounded(monkeypatch):
    monkeypatch.setattr(promtext, "MAX_SAMPLES", 1000)
    monkeypatch.setattr(promtext, "MAX_TEXT_BYTES", 100_000)
    long_line = "x" * (promtext.MAX_LINE_CHARS + 10) + " 1\n"
    text = long_line + 'ok{a="b\\"c",d="e\\\\"} 2\nbad{a="unterminated 3\n' + "n 1\n" * 10
    parsed = promtext.parse(text)
    assert parsed.samples[0] == promtext.Sample("ok", (("a", 'b"c'), ("d", "e\\")), 2.0)
    assert parsed.skipped == 2 and len(parsed.samples) == 11
    huge = promtext.parse(b"m 1\n" * (promtext.MAX_SAMPLES + 5))
    assert huge.truncated and len(huge.samples) == promtext.MAX_SAMPLES
    assert promtext.parse(b"a" * (promtext.MAX_TEXT_BYTES + 1)).truncated


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from('ab_:{}="\\ ,\n#0123456789.e+-InfNa'), max_size=400))
def test_any_metrics_text_parses_without_raising(text):
    parsed = promtext.parse(text)
    engines.snapshot(parsed)
    assert parsed.skipped >= 0


# --- statistics and verdicts ----------------------------------------------------------------------


def test_percentiles_interpolate_like_numpy():
    import numpy

    values = sorted([5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0])
    for q in (50, 90, 95, 99):
        assert percentile(values, q) == pytest.approx(numpy.percentile(values, q))
    dist = Dist.of([10.0] * 9 + [100.0])
    assert dist.p50 == 10.0 and dist.p99 == pytest.approx(91.9) and dist.spread == pytest.approx(9.19)


def test_slo_parsing_says_what_is_wrong():
    (ttft, tpot) = parse_slo("ttft_p95=800ms, tpot_p99=0.06s")
    assert (ttft.metric, ttft.q, ttft.limit_ms, tpot.limit_ms) == ("ttft", 95, 800.0, 60.0)
    for bad in ("ttft=1s", "ttft_p97=1s", "speed_p95=1s", "ttft_p95=fast", "ttft_p95=-1ms", ""):
        with pytest.raises(ValueError):
            parse_slo(bad)


def record(ttft: float, gap: float, tokens: int, error: str | None = None, kind: str | None = None) -> Record:
    r = Record(started=0.0, ttft=ttft, e2e=ttft + gap * (tokens - 1), gaps=[gap] * (tokens - 1), chunks=tokens, finish_reason="length")
    r.error, r.kind, r.done = error, kind, error is None
    return r


def level(concurrency: int, tpots: list[float], wall: float = 1.0, ttft: float = 0.05, **kw):
    return summarise(concurrency, [record(ttft, t, 16) for t in tpots], wall, 16, **kw)


def test_summaries_count_failures_and_cancellations_without_timing_them():
    records = [record(0.1, 0.02, 16), record(0.1, 0.02, 16, "HTTP 429", "http-429"), record(0.1, 0.02, 3, "cancelled", "cancelled")]
    stats = summarise(2, records, 2.0, 16)
    assert (stats.attempted, stats.ok, stats.cancelled, stats.errors) == (2, 1, 1, {"http-429": 1})
    assert stats.tpot.n == 1 and stats.tpot.p50 == pytest.approx(20.0) and stats.output_tokens == 16
    assert stats.tokens_from == "chunks" and stats.requests_per_s == 0.5


def test_the_knee_is_where_tpot_grows_faster_than_throughput():
    sweep = [level(1, [0.02] * 8, wall=1.0), level(2, [0.021] * 8, wall=0.5), level(4, [0.05] * 8, wall=0.45)]
    found = knee(sweep)
    assert (found.concurrency, found.next_concurrency) == (2, 4)
    assert knee(sweep[:2]) is None


def test_goodput_counts_requests_within_every_slo_term():
    slo = parse_slo("tpot_p95=30ms")
    stats = summarise(1, [record(0.05, 0.02, 16)] * 3 + [record(0.05, 0.05, 16)], 1.0, 16, slo)
    assert stats.good == 3 and stats.slo_met == {"tpot_p95=30ms": False}


def bench_of(levels, output_tokens=16) -> BenchRun:
    prompts = PromptSummary(0, 32, "test", "test prompts", "0" * 64, 1)
    return BenchRun("chat", "m", 32, output_tokens, False, prompts, levels, knee(levels), [], False, 1.0)


def test_decode_is_judged_against_the_ceiling_and_refused_above_it():
    bench = bench_of([level(1, [0.02] * 12)])  # 50 tok/s
    ceiling = Ceiling(200.0, "cpu", 50.0, "measured", 4096, "m")
    (low,) = [v for v in judge(bench, ceiling) if v.code.code in ("LIV001", "LIV008")]
    assert low.code.code == "LIV001" and "25 % of this host's ceiling" in low.message
    assert not [v for v in judge(bench, Ceiling(80.0, "cpu", 50.0, "measured", 4096, "m")) if v.code.code in ("LIV001", "LIV008")]
    (refused,) = [v for v in judge(bench, Ceiling(20.0, "cpu", 50.0, "measured", 4096, "m")) if v.code.code == "LIV008"]
    assert "no judgement is made" in refused.message


def test_swings_and_tails_need_enough_requests():
    swinging = level(4, [0.015] * 10 + [0.085] * 2)
    assert "LIV002" in [v.code.code for v in judge(bench_of([swinging]), None)]
    assert "LIV002" not in [v.code.code for v in judge(bench_of([level(4, [0.015] * 4 + [0.085])]), None)]


# --- the client against a server that misbehaves on cue -------------------------------------------


@pytest.fixture(scope="module")
def fault():
    with FaultServer() as server:
        yield server


def run_stream(server: FaultServer, model: str, max_tokens: int = 6, idle: float = 0.2) -> Record:
    body = {"model": model, "max_tokens": max_tokens, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    limits = StreamLimits(connect_s=2.0, idle_s=idle, total_s=5.0)
    return asyncio.run(stream(Endpoint.parse(server.url), "/v1/chat/completions", body, limits))


@pytest.mark.parametrize(
    ("mode", "kind", "words"),
    [
        ("stall-after-3", "stall", "stalled: no bytes for 0.2 s after 3 tokens"),
        ("drop-after-3", "dropped", "after 3 tokens"),
        ("malformed", "malformed", "malformed SSE data after 1 tokens"),
        ("no-done", "stall", "no bytes for 0.2 s"),
        ("slow-first-2s", "stall", "no response for 0.2 s after 0 tokens"),
        ("overrun", "runaway", None),
        ("cut-after-3", "cut-off", "cut off after 3 tokens"),
        ("429", "http-429", "HTTP 429: "),
        ("500", "http-5xx", "injected 500"),
    ],
)
def test_every_fault_ends_in_a_clear_error_within_its_limits(fault, mode, kind, words):
    started = time.monotonic()
    result = run_stream(fault, mode, max_tokens=40 if mode == "overrun" else 6)
    if mode == "overrun":  # 80 tokens for 40 asked: within the event budget, so it is LIV005's to judge
        assert result.error is None and result.output_tokens == 80
    else:
        assert result.kind == kind and words in result.error, result.error
    assert time.monotonic() - started < 10  # idle limit 0.2 s: ends, never hangs


def test_a_recorded_llama_cpp_stream_gives_usage_and_the_engine_timings():
    replay = (SERVING / "llamacpp-chat-stream-with-timings.sse").read_bytes()
    with FaultServer(replay=replay) as server:
        result = run_stream(server, "replay")
    assert result.error is None and result.tokens_from == "usage" and result.output_tokens == 4 and result.usage_prompt == 23
    assert result.engine_timings["predicted_per_token_ms"] == pytest.approx(0.26833, rel=1e-4)


def test_a_stream_trickled_a_byte_at_a_time_reads_the_same():
    replay = (SERVING / "llamacpp-chat-stream-with-timings.sse").read_bytes()
    with FaultServer(replay=replay) as server:
        whole, trickled = run_stream(server, "replay"), run_stream(server, "trickle")
    assert trickled.error is None and trickled.output_tokens == whole.output_tokens == 4
    assert trickled.engine_timings == whole.engine_timings and trickled.finish_reason == whole.finish_reason


def test_tpot_is_the_configured_delay(fault):
    plan = LoadPlan("chat", "delay-15ms", (2,), (4,), 60.0, 12, 10.0)
    run = asyncio.run(run_level(Endpoint.parse(fault.url), plan, 2, 4, ["a b c"], asyncio.Event()))
    stats = summarise(2, run.records, run.wall_s, 12)
    # no request ends before its 12th token is due (TPOT itself can read short when a busy machine delays
    # the first token and the server catches up); benchmarks/bench_serving_client.py measures accuracy
    assert stats.ok == 4 and stats.tpot.p50 > 0 and stats.e2e.p50 >= 11 * 15.0


# --- `decode-doctor bench` and `check --endpoint` end to end --------------------------------------


def bench(server: FaultServer, *args: str, env: dict | None = None):
    base = ("bench", "--endpoint", server.url, "--format", "json", "--concurrency", "1,2", "--requests", "4")
    return cli(*base, "--input-tokens", "16", "--output-tokens", "8", *args, env=env)


def test_bench_reports_percentiles_per_level_in_the_versioned_schema(fault, schema):
    result = bench(fault, "--model", "delay-5ms", "--slo", "tpot_p95=50ms", env={"OPENAI_API_KEY": SECRET})
    report = result.json()
    jsonschema.validate(report, schema)
    facts = report["facts"]["serving"]
    levels = facts["bench"]["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 2] and all(lv["ok"] == 4 for lv in levels)
    # The server sends token i at start + i × 5 ms (catching up when late): on a busy machine a late first
    # token shortens TPOT, but no request can end before its 8th token is due.
    assert all(lv["tokens_from"] == "usage" and lv["tpot"]["p50"] > 0 and lv["e2e"]["p50"] >= 7 * 5.0 for lv in levels)
    assert levels[0]["slo_met"] == {"tpot_p95=50ms": True} and levels[0]["good"] == 4
    prompts = facts["bench"]["prompts"]
    assert prompts["method"] == "tokenizer (POST /tokenize)" and prompts["tokens"] == [16] * 8 and len(prompts["texts"]) == 8
    assert facts["ceiling_note"].startswith('the served model "delay-5ms" is not a local path')
    # the fault server has no /metrics: the server's own diagnosis is not judged, so the verdict is incomplete
    assert result.exit_code == 3 and "SRV005" in codes(report) and report["summary"]["verdict"] == "incomplete"
    (unjudged,) = report["not_judged"]
    assert unjudged["check"] == "serving" and "HTTP 404" in unjudged["why"]
    assert f"Bearer {SECRET}" in fault.authorizations and SECRET not in result.stdout + result.stderr


def test_a_failing_server_is_an_error_finding_and_exit_1(fault):
    result = bench(fault, "--model", "500", "--incomplete", "ignore")  # no /metrics: exit 1 for the failures alone
    report = result.json()
    (failed,) = [f for f in report["findings"] if f["code"] == "LIV004"]
    assert failed["severity"] == "error" and "8 of 8 requests failed (8 HTTP 5xx)" in failed["message"]
    assert result.exit_code == 1


def test_a_stalling_server_ends_within_the_timeout(fault):
    started = time.monotonic()
    result = bench(fault, "--model", "stall-after-2", "--timeout", "1", "--concurrency", "2", "--requests", "2")
    (failed,) = [f for f in result.json()["findings"] if f["code"] == "LIV004"]
    assert "2 stalled" in failed["message"] and time.monotonic() - started < 30


def test_html_report_has_the_charts_and_no_script(fault, tmp_path):
    out = tmp_path / "bench.html"
    result = bench(fault, "--model", "delay-2ms", "--format", "html", "-o", str(out), "--no-metrics")
    page = out.read_text()
    assert result.exit_code == 0 and "<h2>Live decode: TTFT</h2>" in page and "<h2>Live decode: TPOT</h2>" in page
    assert page.count("<svg") >= 2 and "<script" not in page


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--concurrency", "0"), "each level is a whole number from 1 to 1024"),
        (("--concurrency", "1,x"), "'x'"),
        (("--slo", "ttft_p95=soon"), "is not a time"),
        (("--endpoint", "ftp://host/v1"), "is not an http(s):// URL"),
        (("--bandwidth", "fast"), "is not a bandwidth"),
        (("--requests", "100000", "--concurrency", "1,2"), "at most 100,000"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(fault, args, words):
    result = cli("bench", "--endpoint", fault.url, *args)
    assert result.exit_code == 2 and words in result.stderr and "Traceback" not in result.stderr


def test_an_unreachable_endpoint_is_one_line_and_exit_2():
    with FaultServer() as server:
        url = server.url
    result = cli("bench", "--endpoint", url, "--concurrency", "1", "--requests", "1")
    assert result.exit_code == 2 and "cannot connect" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("metrics", "slots", "expected"),
    [
        ("llamacpp-np2-under-load.prom", "llamacpp-np2-slots-under-load.json", ["SRV003"]),
        ("sglang-llama31-8b-loaded.prom", None, ["SRV003", "SRV004"]),
        (None, None, ["SRV005"]),
    ],
)
def test_check_endpoint_reads_the_server_alone(metrics, slots, expected):
    text = (SERVING / metrics).read_text() if metrics else None
    slots_text = (SERVING / slots).read_text() if slots else None
    with FaultServer(metrics=text, slots=slots_text) as server:
        result = cli("check", "--select", "serving", "--endpoint", server.url, "--format", "json")
    report = result.json()
    assert codes(report) == expected and server.requests <= 3  # /v1/models, /metrics (and /slots): no load
    facts = report["facts"]["serving"]
    assert facts["bench"] is None and (facts["after"] is None) == (metrics is None)


def check_endpoint(server: FaultServer, *args: str):
    return cli("check", "--select", "serving", "--endpoint", server.url, "--format", "json", *args)


def test_kv_capacity_is_the_limit_when_few_run_while_requests_wait_and_the_cache_is_full():
    # vllm-project/vllm#3094's own stats line (2 running, 3 pending, GPU KV cache 82.1 %) served as /metrics
    with FaultServer(metrics=(SERVING / "vllm-issue3094-as-metrics.derived.prom").read_text()) as server:
        report = check_endpoint(server).json()
    (kv,) = [f for f in report["findings"] if f["code"] == "SRV001"]
    assert "SRV003" not in codes(report)  # not queueing advice: the cache, not --max-num-seqs, holds them back
    assert "2 of 256 (vLLM's default --max-num-seqs)" in kv["message"] and "82.1%" in kv["message"]
    for knob in ("--gpu-memory-utilization", "--max-model-len", "--kv-cache-dtype fp8", "replicas"):
        assert knob in kv["message"]
    assert "a higher --max-num-seqs would change nothing" in kv["message"]


def test_at_the_sequence_limit_with_room_in_the_cache_the_advice_is_the_limit():
    at_limit = 'vllm:num_requests_running{model_name="m"} 256\nvllm:num_requests_waiting{model_name="m"} 40\n'
    at_limit += 'vllm:kv_cache_usage_perc{model_name="m"} 0.4\nvllm:num_preemptions_total{model_name="m"} 0\n'
    (queue,) = diagnosis.diagnose(engines.snapshot(promtext.parse(at_limit)))
    assert queue.code.code == "SRV003" and queue.evidence["at_limit"] is True
    assert "256 of 256" in queue.message and "a higher --max-num-seqs while the KV cache has room" in queue.message
    # around a bench run: the peaks seen while it ran decide, not the reading after it (all requests done)
    idle = engines.snapshot(promtext.parse('vllm:num_requests_running{m="x"} 0\nvllm:num_requests_waiting{m="x"} 0\n'))
    (during,) = diagnosis.diagnose(idle, idle, peak_kv=0.4, peak_waiting=40, peak_running=256)
    assert during.code.code == "SRV003" and during.evidence["at_limit"] and "at the peak" in during.message
    # at the limit and the cache full (vllm-project/vllm#6737: 247 running, 740 pending, 99.7 %): not a higher limit
    full = engines.snapshot(
        promtext.parse("vllm:num_requests_running 247\nvllm:num_requests_waiting 740\nvllm:gpu_cache_usage_perc 0.997\n")
    )
    verdicts = {v.code.code: v for v in diagnosis.diagnose(full)}
    assert "a higher limit alone would not help" in verdicts["SRV003"].message and "SRV001" in verdicts


@pytest.mark.parametrize(
    ("fixture", "unjudged"),
    [
        ("llamacpp-np2-under-load.prom", {"KV-cache pressure (llama.cpp)"}),  # this llama-server has no KV gauge
        ("sglang-early-capacity-only.excerpt.prom", {"KV-cache pressure (SGLang)", "queueing (SGLang)", "preemption (SGLang)"}),
        ("tgi-documented-names.handmade.prom", {"KV-cache pressure (TGI)"}),
    ],
)
def test_a_metrics_page_without_the_gauges_is_not_judged_and_never_ready(fixture, unjudged):
    with FaultServer(metrics=(SERVING / fixture).read_text()) as server:
        result = check_endpoint(server)
        text = check_endpoint(server, "--format", "text").stdout
    report = result.json()
    assert result.exit_code == 3 and report["summary"]["verdict"] == "incomplete"
    assert unjudged <= {item["what"] for item in report["not_judged"]}
    assert ("Ready" not in text and "No problems in what was judged" in text) or report["findings"]


def test_early_sglang_names_and_tgis_are_read_as_what_they_are():
    early = capture("sglang-early-names.excerpt.prom")
    assert (early.engine, early.running, early.waiting, early.max_running, early.kv_usage) == ("SGLang", 0.0, 0.0, 4097.0, 0.01)
    tgis = capture("tgis-adapter-names.handmade.prom")
    assert tgis.engine == "TGIS" and (tgis.running, tgis.waiting) == (16.0, 6.0)
    (queue,) = diagnosis.diagnose(tgis)
    assert "TGI:" not in queue.message and "--max-batch-total-tokens" not in queue.message  # no TGI flags for TGIS


def test_a_dropped_line_carrying_a_used_gauge_is_reported():
    huge = 'vllm:num_requests_waiting{model_name="' + "m" * (1 << 20) + '"} 7\n'
    metrics = 'vllm:num_requests_running{model_name="m"} 1\nvllm:kv_cache_usage_perc{model_name="m"} 0.1\n' + huge
    metrics += 'vllm:num_preemptions_total{model_name="m"} 0\n'
    snap = engines.snapshot(promtext.parse(metrics))
    assert snap.lost == ("vllm:num_requests_waiting",)
    with FaultServer(metrics=metrics) as server:
        result = check_endpoint(server)
    report = result.json()
    (item,) = report["not_judged"]
    assert item["what"] == "queueing (vLLM)" and "vllm:num_requests_waiting was dropped" in item["why"] and result.exit_code == 3


@pytest.mark.parametrize(("answers", "words"), [("hang", "accepts connections but answered neither"), ("errors", "HTTP 503")])
def test_a_server_that_hangs_or_answers_errors_is_an_error(answers, words):
    started = time.monotonic()
    with FaultServer(answers=answers) as server:
        result = check_endpoint(server)
    (finding,) = result.json()["findings"]
    assert finding["code"] == "SRV006" and finding["severity"] == "error" and words in finding["message"]
    assert result.exit_code == 1 and time.monotonic() - started < 9  # one 5 s timeout for both requests, not two


def test_the_values_read_are_shown_in_text_markdown_and_html(tmp_path):
    with FaultServer(metrics=(SERVING / "vllm-issue3094-as-metrics.derived.prom").read_text()) as server:
        text = check_endpoint(server, "--format", "text", "--verbose").stdout
        markdown = check_endpoint(server, "--format", "markdown").stdout
        check_endpoint(server, "--format", "html", "-o", str(tmp_path / "r.html"))
    page = (tmp_path / "r.html").read_text()
    for shown in (text, markdown, page):
        assert "KV cache in use 82.1%" in shown.replace("</th><td>", " ") and "2 of 256" in shown and "waiting" in shown


def test_check_endpoint_says_when_nothing_answers():
    with FaultServer() as server:
        url = server.url
    report = cli("check", "--select", "serving", "--endpoint", url, "--format", "json").json()
    (finding,) = report["findings"]
    assert finding["code"] == "SRV006" and "cannot connect" in finding["message"]


def test_ctrl_c_stops_and_reports_what_was_measured(tmp_path):
    with FaultServer() as server:
        argv = [sys.executable, "-m", "decode_doctor", "bench", "--endpoint", server.url, "--model", "delay-20ms"]
        argv += ["--concurrency", "1,2", "--requests", "200", "--output-tokens", "10", "--format", "json"]
        argv += ["--input-tokens", "8"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
        deadline = time.monotonic() + 60
        while server.completions < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    bench_facts = json.loads(out)["facts"]["serving"]["bench"]
    assert bench_facts["interrupted"] is True and bench_facts["levels"][0]["ok"] >= 1
    assert b"stopping: finishing the report" in err


# --- a real engine ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    reason = available()
    if reason:
        pytest.skip(reason)
    with llama_server(tmp_path_factory.mktemp("engine")) as server:
        yield server


def test_a_real_engine_is_measured_at_concurrency_1_and_2_and_judged(engine):
    result = cli(
        "bench", "--endpoint", engine.url, "--concurrency", "1,2", "--requests", "4", "--input-tokens", "24",
        "--output-tokens", "16", "--bandwidth", "20GB/s", "--format", "json",
    )  # fmt: skip
    report = result.json()
    facts = report["facts"]["serving"]
    assert facts["engine"] == "llama-cpp-python" and facts["model"] == str(engine.model)
    levels = facts["bench"]["levels"]
    assert [(lv["concurrency"], lv["ok"]) for lv in levels] == [(1, 4), (2, 4)]
    assert all(lv["tpot"]["p50"] > 0 and lv["ttft"]["p50"] > 0 for lv in levels)
    assert facts["bench"]["prompts"]["method"] == "tokenizer (POST /extras/tokenize)"
    assert facts["ceiling"]["device"] == "cpu" and facts["ceiling"]["bandwidth_source"] == "given"  # the served id is the GGUF path
    assert {"LIV009", "SRV005"} <= set(codes(report)) and "LIV004" not in codes(report)


def test_bench_compares_decode_with_the_calibrated_prediction_and_names_a_forced_gap(engine, tmp_path, monkeypatch):
    """The server runs llama.cpp with 1 thread; this host's calibration, written here for 4 threads
    (more than this 2-core host can give the server: its Python thread streams beside the decoding
    thread, so a 1-thread server can show 1.6 cores) and the served F32 weights, says 10 s per
    token, so the gap is forced whatever this machine's speed and however a busy host bunches the
    stream's chunks (which can make a measured TPOT far lower than the engine's step). bench prints
    prediction, measurement and error, and names the cause it observed: the server's process used
    fewer cores than the four calibrated."""
    from decode_doctor.engine.statefile import host_id
    from decode_doctor.models import calibration

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    version = calibration.engine_version()
    assert version is not None
    forced = calibration.Calibration(
        host_id(), "llama.cpp", version, 4, "F32", 10.0, 0.0, 0.0, 0.0, 0.05, time.time(), source="calibrate"
    )  # fmt: skip
    calibration.record(tmp_path / "decode-doctor", forced)
    result = cli(
        "bench", "--endpoint", engine.url, "--concurrency", "1", "--requests", "4", "--input-tokens", "24",
        "--output-tokens", "16", "--bandwidth", "20GB/s", "--threads", "4", "--format", "json",
    )  # fmt: skip
    report = result.json()
    predicted = report["facts"]["serving"]["prediction"]
    assert predicted["threads"] == 4 and predicted["weight_type"] == "F32" and predicted["measured_ms"] > 0
    assert abs(predicted["error"]) > 0.15 and predicted["predicted_ms"] == 10_000
    assert predicted["server_cores"] is not None and predicted["server_cores"] < 3.5
    assert predicted["busy_threads"] is not None and predicted["busy_threads"] < 4  # counted thread by thread
    (gap,) = [f for f in report["findings"] if f["code"] == "LIV010"]
    assert "of the server's threads were busy" in gap["message"] and "the calibration is for 4 threads" in gap["message"]
    assert "it runs with fewer" in gap["message"]
    text = cli(
        "bench", "--endpoint", engine.url, "--concurrency", "1", "--requests", "2", "--input-tokens", "24",
        "--output-tokens", "8", "--bandwidth", "20GB/s", "--threads", "4",
    ).stdout  # fmt: skip
    # the cause it names is this run's own (two short requests can keep all four threads busy, or meet other work):
    # the first run above pins the thread count; here the text must carry prediction, measurement and a cause
    assert "predicted TPOT" in text and "measured p50" in text and "  gap: " in text, text
    assert "the server while decoding: " in text and "busy thread(s)" in text, text
    assert "calibration not learned: " in text and calibration.load(tmp_path / "decode-doctor") == [forced], text


def test_a_bench_fit_to_learn_from_teaches_the_hosts_calibration(engine, tmp_path, monkeypatch):
    """The calibration written here is for the server's one thread and its F32 weights; the limits on
    a gap and on other load are lifted (each is tested alone), so what decides is what bench saw of
    the real server: its busy threads, counted thread by thread, the calibrated one (and at most one
    more: the server's own loop streaming the tokens). Then the measurement is kept
    as the newest calibration with source "bench", and the next bench compares with it."""
    from decode_doctor.checks.serving import predicted as predicted_module
    from decode_doctor.engine.statefile import host_id
    from decode_doctor.models import calibration
    from decode_doctor.models.calibration import model as calibration_model

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setattr(predicted_module, "LEARN_LIMIT", float("inf"))
    monkeypatch.setattr(predicted_module, "CONTENDED_CORES", float("inf"))
    monkeypatch.setattr(predicted_module, "CONTENDED_STEAL", float("inf"))
    monkeypatch.setattr(calibration_model, "CONTENDED_CORES", float("inf"))  # the learned record keeps the run's load
    monkeypatch.setattr(calibration_model, "CONTENDED_STEAL", float("inf"))
    state = tmp_path / "decode-doctor"
    version = calibration.engine_version()
    assert version is not None
    used = calibration.Calibration(host_id(), "llama.cpp", version, 1, "F32", 0.01, 0.0, 0.0, 0.0, 0.05, time.time() - 60)
    calibration.record(state, used)
    argv = ("bench", "--endpoint", engine.url, "--concurrency", "1", "--requests", "4", "--input-tokens", "24", "--output-tokens", "16")
    report = cli(*argv, "--bandwidth", "20GB/s", "--threads", "1", "--format", "json").json()
    check = report["facts"]["serving"]["prediction"]
    assert check["predicted_ms"] == 10.0 and check["source"] == "calibrate" and check["server_cores"] is not None
    records = calibration.load(state)
    if not 1 <= check["busy_threads"] <= 2:  # the server's work not seen thread by thread (starved beside busy work): said
        assert check["learned"] == "not learned: the server did not run the calibrated 1 thread(s)" and records == [used]
        return
    assert check["learned"].startswith("learned: this host's calibration (llama.cpp") and "kept with its source (bench)" in check["learned"]
    learned = records[-1]
    assert len(records) == 2 and learned.source == "bench" and engine.url in learned.basis
    assert learned.fixed_s == pytest.approx(check["measured_ms"] / 1000, rel=1e-6)
    again = cli(*argv, "--bandwidth", "20GB/s", "--threads", "1").stdout
    assert "learned from a live bench at 1 thread(s) for F32" in again, again


def test_the_measured_tpot_matches_the_engines_own_timing(engine):
    from decode_doctor.engine.hostload import Window

    plan = LoadPlan("completions", str(engine.model), (1,), (4,), 60.0, 24, 60.0, temperature=0.0)
    before = len(engine.timings())
    window = Window()
    own = time.process_time()
    run = asyncio.run(run_level(Endpoint.parse(engine.url), plan, 1, 4, ["the cat and the dog"], asyncio.Event()))
    load = window.close(time.process_time() - own)  # the server's own CPU counts as foreign here: it is another process
    timings = engine.timings()[before:]
    assert len(timings) == 4 and all(r.error is None and r.output_tokens == 24 for r in run.records)
    for measured, timed in zip(run.records, timings, strict=True):
        engine_ms = timed.decode_ms_per_token
        client_ms = measured.tpot * 1000
        # llama-cpp-python's Python server spends about 0.45 ms per chunk (pydantic, SSE) outside the
        # engine's perf counters, most of this tiny model's TPOT (0.63 ms measured against 0.17 ms of
        # decode); it may also flush several chunks at once (seen on a quiet host too: 0.49 ms read
        # against 1.63 ms), so one request's TPOT can read lower than the engine's, never much higher.
        # What always holds: the stream ends after the decoding; and when nothing but the server and
        # this client ran (two cores at most, no steal), the client adds at most that per-chunk overhead.
        assert measured.e2e * 1000 >= 0.9 * timed.eval_ms, (measured.e2e, timed.eval_ms)
        if load.foreign_cores < 1.5 and load.steal < 0.02:
            assert client_ms <= 1.25 * engine_ms + 0.5, (client_ms, engine_ms, load)


def test_the_judgement_names_a_ttft_tail_an_ignored_max_tokens_early_stops_and_a_missed_slo():
    tail = summarise(4, [record(0.05, 0.02, 16)] * 10 + [record(0.9, 0.02, 16)] * 2, 1.0, 16)
    found = {v.code.code: v for v in judge(bench_of([tail]), None)}
    assert "LIV003" in found and "p99 900 ms" in found["LIV003"].message.replace(",", "")
    overrun = summarise(1, [record(0.05, 0.02, 20)] * 3, 1.0, 16)  # 20 tokens where max_tokens said 16
    early = summarise(2, [record(0.05, 0.02, 8)] * 3, 1.0, 16)  # the model chose to stop at 8
    found = {v.code.code: v for v in judge(bench_of([overrun, early]), None)}
    assert "3 response(s) carried more than the 16 tokens" in found["LIV005"].message
    assert found["LIV006"].evidence == {"early": 3, "ok": 6, "max_tokens": 16} and "--ignore-eos" in found["LIV006"].message
    slo = parse_slo("tpot_p95=30ms")
    fast = summarise(1, [record(0.05, 0.02, 16)] * 4, 1.0, 16, slo)
    slow = summarise(2, [record(0.05, 0.05, 16)] * 4, 1.0, 16, slo)
    prompts = PromptSummary(0, 32, "test", "test prompts", "0" * 64, 1)
    run = BenchRun("chat", "m", 32, 16, False, prompts, [fast, slow], knee([fast, slow]), ["tpot_p95=30ms"], False, 1.0)
    (missed,) = [v for v in judge(run, None) if v.code.code == "LIV007"]
    assert "fails at concurrency 2 on latency: TPOT p95 50.0 ms > 30.0 ms; it holds up to concurrency 1" in missed.message
    # fast enough, but requests failed: the message says the failures were the cause, and that latency held
    slo = parse_slo("ttft_p95=800ms,tpot_p95=60ms")
    failing = summarise(2, [record(0.035, 0.0007, 16)] * 6 + [record(0.0, 0.0, 0, "HTTP 500", "http-5xx")] * 2, 1.0, 16, slo)
    run = BenchRun("chat", "m", 32, 16, False, prompts, [failing], None, ["ttft_p95=800ms", "tpot_p95=60ms"], False, 1.0)
    (missed,) = [v for v in judge(run, None) if v.code.code == "LIV007"]
    assert "on failed requests: 2 of 8" in missed.message and "within it: TTFT p95 35.0 ms, TPOT p95 0.70 ms" in missed.message
    assert missed.evidence["cause"] == "failures" and "latency:" not in missed.message
