"""The bench client's accuracy and headroom, against the fault server in its own process.

    python benchmarks/bench_serving_client.py [--delay-ms 20] [--tokens 100] [--rounds 2]

Accuracy: the server sends a token every --delay-ms, scheduled from the request's start (no drift);
the client's TPOT p50 must be within ±2 % of it at concurrency 1 and 64. Headroom: against the
same server with no delay, the client must stream at least 5,000 tokens/s. The baseline, measured in
the same run, is a bare asyncio reader that only counts bytes: what the server and the loopback give
without any parsing; the client's ratio to it says how much the client itself costs. Also prints the
client's own CPU time per streamed token (time.process_time of this process; the server runs in
another), beside what the kernel charges a loop that only sleeps as often: at a 20 ms pace that
wakeup, not the parsing, dominates the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from decode_doctor.checks.serving.client import Endpoint
from decode_doctor.checks.serving.load import LoadPlan, run_level

REPO = Path(__file__).resolve().parent.parent
SERVER = REPO / "tests" / "support" / "faultserver.py"
PROMPT = "one two three four five six seven eight"


def start_server() -> tuple[subprocess.Popen[str], int]:
    server = subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    return server, int(server.stdout.readline())


def plan(model: str, concurrency: int, requests: int, tokens: int) -> LoadPlan:
    return LoadPlan("chat", model, (concurrency,), (requests,), duration_s=600, output_tokens=tokens, timeout_s=120)


async def client_level(port: int, model: str, concurrency: int, requests: int, tokens: int):
    endpoint = Endpoint.parse(f"http://127.0.0.1:{port}/v1")
    cpu, wall = time.process_time(), time.perf_counter()
    run = await run_level(endpoint, plan(model, concurrency, requests, tokens), concurrency, requests, [PROMPT], asyncio.Event())
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    failed = [record.error for record in run.records if record.error]
    if failed:
        raise SystemExit(f"{len(failed)} requests failed, first: {failed[0]}")
    streamed = sum(record.chunks for record in run.records)
    tpots = sorted(record.tpot for record in run.records if record.tpot is not None)
    return statistics.median(tpots), streamed / wall, cpu / streamed


async def raw_level(port: int, concurrency: int, requests: int, tokens: int) -> float:
    """Tokens/s of a reader that sends the same requests and only counts the bytes back."""
    body = json.dumps({"model": "zero", "max_tokens": tokens, "stream": True, "messages": [{"role": "user", "content": PROMPT}]}).encode()
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    remaining = requests

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head + body)
            while await reader.read(1 << 16):
                pass
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return requests * tokens / (time.perf_counter() - started)


async def idle_wakeups(count: int, delay_s: float) -> float:
    """CPU seconds per wakeup of a loop that only sleeps: what this kernel charges for waking at all."""
    cpu = time.process_time()
    for _ in range(count):
        await asyncio.sleep(delay_s)
    return (time.process_time() - cpu) / count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--tokens", type=int, default=100, help="output tokens per request")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    server, port = start_server()
    model = f"delay-{args.delay_ms:g}ms"
    try:
        idle = asyncio.run(idle_wakeups(200, args.delay_ms / 1000))
        print(f"baseline: a loop that only sleeps {args.delay_ms:g} ms is charged {idle * 1e6:.1f} µs CPU per wakeup")
        for round_no in range(1, args.rounds + 1):
            print(f"round {round_no}")
            for concurrency in (1, 64):
                requests = max(8, 2 * concurrency)
                p50, rate, cpu = asyncio.run(client_level(port, model, concurrency, requests, args.tokens))
                error = (p50 * 1000 - args.delay_ms) / args.delay_ms
                verdict = "ok" if abs(error) <= 0.02 else "OVER ±2 %"
                print(
                    f"  accuracy  c={concurrency:<3} {requests:>3} requests: TPOT p50 {p50 * 1000:7.3f} ms "
                    f"vs {args.delay_ms:g} ms configured ({error:+.2%}, {verdict}); client CPU {cpu * 1e6:5.1f} µs/token"
                )
            for concurrency in (1, 8):
                tokens, requests = 1000, 16
                raw = asyncio.run(raw_level(port, concurrency, requests, tokens))
                _, rate, cpu = asyncio.run(client_level(port, "zero", concurrency, requests, tokens))
                verdict = "ok" if rate >= 5000 else "UNDER 5,000"
                print(
                    f"  headroom  c={concurrency:<3} {requests * tokens:,} tokens: client {rate:8,.0f} tok/s ({verdict}), "
                    f"bare reader {raw:8,.0f} tok/s, ratio {rate / raw:.2f}; client CPU {cpu * 1e6:5.1f} µs/token"
                )
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(10)


if __name__ == "__main__":
    main()
