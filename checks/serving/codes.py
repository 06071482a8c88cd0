"""The serving feature's codes, each with its explanation in fixed sections."""

from __future__ import annotations

from decode_doctor.engine import Code, Severity

LIV001 = Code(
    code="LIV001",
    title="Decode at concurrency 1 reaches less than half of this host's ceiling",
    severity=Severity.WARNING,
    what="One sequence decodes at under 50 % of the tokens/s the memory bandwidth allows for this model "
    "(bandwidth ÷ bytes read per token, the decode-budget check's ceiling).",
    why="Decode is memory-bound: a healthy engine reaches 60–85 % of the ceiling at concurrency 1. Far below it, "
    "time goes elsewhere: CPU overhead per token (Python, sampling, detokenizing), a debug or eager-mode build, "
    "too few or too many CPU threads, weights that do not sit on the device measured, or a busy host.",
    fix_by_hand="Compare the engine's own per-token time (llama.cpp timings, vLLM's inter-token histogram) with "
    "the measured TPOT; turn on CUDA graphs (drop vLLM --enforce-eager), set llama.cpp -t to the physical cores, "
    "check that every layer is offloaded (-ngl 99), and run the bench on an otherwise idle host.",
    example="decode at concurrency 1 reaches 31 % of this host's ceiling: 12.4 of 40.2 tok/s (TPOT p50 80.6 ms against 24.9 ms).",
)

LIV002 = Code(
    code="LIV002",
    title="TPOT swings: p99 is more than twice p50",
    severity=Severity.WARNING,
    what="At some concurrency, the slowest 1 % of requests decode each token more than twice as slowly as the typical one.",
    why="Users feel the slow tail as stutter. Under concurrency the usual cause is prefills (new prompts) sharing "
    "decode steps with running sequences, or preemption when the KV cache runs out.",
    fix_by_hand="Read the server findings (SRV002 preemption, SRV004 prefill interference) for the flag that helps: "
    "chunked prefill with a smaller token budget per step, or fewer concurrent sequences.",
    example="TPOT swings from 21 ms (p50) to 88 ms (p99) at concurrency 8, 4.2×.",
)

LIV003 = Code(
    code="LIV003",
    title="TTFT has a long tail",
    severity=Severity.WARNING,
    what="TTFT p99 is more than three times its p50, and at least 200 ms above it.",
    why="A request that waits in the server's queue, or behind other prompts' prefills, starts late; the user sees nothing.",
    fix_by_hand="Look for queueing (SRV003): more sequences per batch if the KV cache allows, more replicas, or "
    "a lower concurrency per replica; long prompts benefit from chunked prefill.",
    example="TTFT at concurrency 4: p50 180 ms, p99 2,400 ms: one request in a hundred waits 2.4 s for its first token.",
)

LIV004 = Code(
    code="LIV004",
    title="Requests failed or timed out",
    severity=Severity.WARNING,
    what="Some requests ended without a complete stream: an HTTP error (429, 5xx), a stall, a dropped "
    "connection, malformed SSE, a stream without [DONE] or cut off without a finish_reason, or the per-request timeout.",
    why="Failed requests are not timed, so the percentiles describe only the survivors; a server that fails under "
    "load is not ready, whatever its latency. At 5 % or more this is an error.",
    fix_by_hand="The evidence lists the failures by kind with one message each. 429s mean a rate limit or a full "
    "queue (raise it, or lower the concurrency); 5xx and drops are in the server's log; stalls point at a hung engine.",
    example="9 of 64 requests failed (6 × timeout, 3 × http-503).",
)

LIV005 = Code(
    code="LIV005",
    title="The server ignores max_tokens",
    severity=Severity.WARNING,
    what="A response carried more tokens than the request's max_tokens allowed.",
    why="A client cannot bound a request's cost or latency on such a server, and its output-token counts "
    "(and this bench's TPOT) do not mean what they say.",
    fix_by_hand="Check the server's version and any proxy between it and the client that rewrites requests; "
    "vLLM, SGLang, TGI and llama.cpp all honour max_tokens.",
    example="12 responses carried more than the 128 tokens max_tokens allowed.",
)

LIV006 = Code(
    code="LIV006",
    title="Responses ended before max_tokens",
    severity=Severity.INFO,
    what="Some responses stopped at an end-of-sequence token before the requested output length.",
    why="The load was lighter than planned and TPOT is averaged over fewer tokens; a sweep whose outputs differ in "
    "length compares unlike things.",
    fix_by_hand="Pass --ignore-eos (vLLM, SGLang and llama.cpp accept it) so that every request runs to max_tokens.",
    example="41 of 64 responses ended before 256 tokens (the model chose to stop): run with --ignore-eos for a full-length load.",
)

LIV007 = Code(
    code="LIV007",
    title="The latency SLO is not met",
    severity=Severity.WARNING,
    what="At some concurrency, a percentile named in --slo is above its limit (or requests failed).",
    why="The deployment cannot serve that many concurrent users within the promised latency.",
    fix_by_hand="Serve at most the concurrency where the SLO still holds (the message names it) per replica, or "
    "lower TPOT: a smaller or quantized model, fp8 KV cache, a faster device, or tensor parallelism.",
    example="--slo ttft_p95=800ms,tpot_p95=60ms holds up to concurrency 4 and fails at 8: TTFT p95 1,310 ms.",
)

LIV008 = Code(
    code="LIV008",
    title="Decode runs faster than the ceiling computed for it: not judged",
    severity=Severity.WARNING,
    what="The measured decode speed at concurrency 1 is more than 1.25× the ceiling computed from the given model files and bandwidth.",
    why="No engine beats the memory system, so the inputs are not the server's: another model, quantization or "
    "speculative decoding on the server, or another device than the one measured. Judging against them would mislead.",
    fix_by_hand="Pass --model-files with the files the server loaded, --device for the device it runs on, or "
    "--bandwidth for that device's bandwidth.",
    example="Decode measures 95 tok/s where the ceiling computed for the given files is 40 tok/s: speculative decoding, or another "
    "model is served; not judged.",
)

LIV009 = Code(
    code="LIV009",
    title="Output tokens counted from stream chunks",
    severity=Severity.INFO,
    what="The server sent no usage in its stream, so each content chunk counted as one token.",
    why="Engines that put several tokens in one chunk (stream intervals, speculative decoding) make TPOT look slower than it is.",
    fix_by_hand="Use a server that honours stream_options.include_usage (vLLM, SGLang, llama.cpp, TGI do).",
    example="The server's stream carries no usage block, so output tokens were counted as content chunks.",
)

LIV010 = Code(
    code="LIV010",
    title="Decode differs from this host's calibrated prediction",
    severity=Severity.WARNING,
    what="At concurrency 1 the measured TPOT (p50) is more than 15 % away from the time per token that llama.cpp's "
    "calibration of this host predicts for the served model (estimate --calibrate). The finding names each cause it "
    "observed: the server's process using fewer cores than the calibrated thread count, other processes busy during the "
    "run, a fixed cost per streamed token outside the engine (the server's HTTP and SSE layer), or a server faster than "
    "the calibration allows (another model or weight type served). A run fit to learn from (a server on this host "
    "using the calibrated thread count, nothing else busy, within 50 % of the prediction) is kept as the host's newest "
    'calibration with source "bench", so the next estimate and bench predict what was measured; bench\'s text says '
    "whether the run was learned from, and why not.",
    why="The prediction is what a deployment is planned with; a server far from it is configured differently from the "
    "plan (threads), shares its host, or pays a per-token cost the engine's step does not.",
    fix_by_hand="Act on the cause named: start the server with the calibrated thread count (llama-server --threads N, "
    "llama-cpp-python --n_threads N), move other work off the host, or stream with fewer, larger chunks; if the host "
    "changed, calibrate again (estimate --calibrate).",
    example="TPOT p50 61 ms against 33 ms predicted at 2 threads: the server used about 1.1 cores while decoding.",
)

LIV011 = Code(
    code="LIV011",
    title="A stream stopped at a length limit far below what was asked",
    severity=Severity.WARNING,
    what='A pasted stream ends with finish_reason "length" after fewer than half the tokens its request\'s max_tokens '
    "allowed, after any number of tokens when the request set no limit (max_tokens -1 or null), or after one token or none "
    "when the paste carries no request (one word or a blank answer).",
    why='"length" means a token limit ended the answer, and the request\'s own limit was not reached: another limit was. '
    "A user sees one word or a blank answer (llama.cpp#12137: prompt 43 tokens, completion 1). The limits that cut a "
    "stream short: the request's max_tokens as the server received it (a proxy or client library may rewrite it), the "
    "server's own cap on predicted tokens (llama-server -n/--n-predict), and the context left for the answer: llama-server "
    "divides -c among its --parallel slots, so each request holds at most -c ÷ --parallel tokens, prompt included; vLLM "
    "stops at --max-model-len.",
    fix_by_hand="Compare the request's prompt + completion tokens (the message adds them up) with each limit: raise "
    "llama-server's -c or lower --parallel until -c ÷ --parallel holds a whole request, drop a small -n, and check what "
    "max_tokens the server received (its verbose log shows the request).",
    example='The stream stopped with finish_reason "length" after 1 completion token (line 1), where the request set no '
    "limit (max_tokens -1): the request held 44 tokens (43 prompt + 1 completion).",
)

SRV001 = Code(
    code="SRV001",
    title="KV-cache pressure: the cache limits concurrency",
    severity=Severity.WARNING,
    what="The engine's KV cache was at least 90 % full (vLLM kv_cache_usage_perc, SGLang token_usage, llama.cpp "
    "kv_cache_usage_ratio), or at least 75 % full while requests waited and fewer sequences ran than the engine's limit "
    "(--max-num-seqs, --max-running-requests): then the cache, not the limit, is what holds requests back.",
    why="A full KV cache means new sequences wait, or running ones are preempted and recomputed: latency jumps. Raising "
    "the sequence limit changes nothing while the cache cannot hold more sequences.",
    fix_by_hand="The message names the engine's flags: more memory for the KV cache (vLLM --gpu-memory-utilization), an "
    "fp8 KV cache (--kv-cache-dtype fp8), a shorter maximum context (--max-model-len), or more replicas.",
    example="KV-cache capacity is vLLM's limit now: 3 request(s) wait while 2 of 256 (vLLM's default --max-num-seqs) "
    "sequences run and the KV cache is 82.1% full.",
)

SRV002 = Code(
    code="SRV002",
    title="The engine preempted sequences",
    severity=Severity.WARNING,
    what="The engine dropped running sequences' KV cache to admit others (vLLM num_preemptions, SGLang retractions).",
    why="Each preempted sequence recomputes its prompt and output later: wasted work and TPOT spikes for that user.",
    fix_by_hand="Admit fewer sequences at once (vLLM --max-num-seqs, SGLang --max-running-requests) or give the KV cache more memory.",
    example="vllm:num_preemptions_total rose by 212 during the run: those sequences' KV cache was dropped and recomputed.",
)

SRV003 = Code(
    code="SRV003",
    title="Requests queue in the server",
    severity=Severity.WARNING,
    what="Requests waited before running (vLLM num_requests_waiting, SGLang num_queue_reqs, TGI queue_size, "
    "llama.cpp requests_deferred), or their mean queue time was 100 ms or more.",
    why="Queue time is added to TTFT; the server runs fewer sequences at once than it is sent.",
    fix_by_hand="At the engine's sequence limit with room in the KV cache: raise the limit (vLLM --max-num-seqs, SGLang "
    "--max-running-requests, llama.cpp more --parallel slots). Below the limit with room in the cache: a larger per-step "
    "token budget (vLLM --max-num-batched-tokens). Otherwise, more replicas. The message says which case it is.",
    example="vLLM num_requests_waiting peaked at 23 with 8 running, at --max-num-seqs 8.",
)

SRV004 = Code(
    code="SRV004",
    title="Prefill interference: decode steps wait behind prompts",
    severity=Severity.WARNING,
    what="The engine's inter-token latency p99 is at least 4× its p50 while prompts were being prefilled.",
    why="A step that prefills a long prompt makes every running sequence wait for it: users see a stall mid-answer.",
    fix_by_hand="Split prompts into smaller chunks per step: vLLM --max-num-batched-tokens with chunked prefill, "
    "SGLang --chunked-prefill-size, TGI --max-batch-prefill-tokens, llama.cpp smaller -b/-ub.",
    example="ITL p99 is 9.1 × its p50 while prompts of 8,000 tokens arrive: decode steps wait behind prefill.",
)

SRV005 = Code(
    code="SRV005",
    title="The server's metrics cannot be read",
    severity=Severity.INFO,
    what="GET /metrics did not answer with Prometheus metrics of a known engine.",
    why="Without the engine's own counters, KV-cache pressure, preemption and queueing cannot be told apart from the outside.",
    fix_by_hand="Enable the engine's metrics (SGLang --enable-metrics, llama-server --metrics; vLLM and TGI serve "
    "them by default) on the same port as the API.",
    example="GET /metrics answers 404 (llama-server started without --metrics).",
)

SRV006 = Code(
    code="SRV006",
    title="The endpoint does not answer",
    severity=Severity.ERROR,
    what="Neither the model list nor /metrics could be fetched from the endpoint.",
    why="Nothing can be measured or diagnosed, and clients will fail the same way.",
    fix_by_hand="Check the URL (scheme, host, port and the /v1 base), that the server is up and listening on "
    "that address, and any firewall or proxy between.",
    example="http://127.0.0.1:8000/v1: nothing listens (connection refused).",
)

SRV007 = Code(
    code="SRV007",
    title="A llama.cpp slot holds fewer tokens than one request needs",
    severity=Severity.WARNING,
    what="llama-server divides its context (-c) among its --parallel slots; each slot holds less than one request's prompt plus output.",
    why="Requests are cut short or refused with a context error, and the bench measures the wrong thing.",
    fix_by_hand="Start llama-server with -c at least --parallel × (prompt + output tokens).",
    example="llama-server -c 4096 --parallel 4 gives each slot 1,024 tokens, and the bench sends 1,200-token prompts.",
)

CODES = (
    LIV001, LIV002, LIV003, LIV004, LIV005, LIV006, LIV007, LIV008, LIV009, LIV010, LIV011,
    SRV001, SRV002, SRV003, SRV004, SRV005, SRV006, SRV007,
)  # fmt: skip
