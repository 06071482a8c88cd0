"""`decode-doctor bench`: live TTFT/TPOT percentiles from a running OpenAI-compatible server.

This module is imported to list `decode-doctor --help`: only click and the application layer's light
choices at its top.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from decode_doctor.app.flags import REPORT_FORMATS, SharedOptions, click_options, same_as
from decode_doctor.checks.bandwidth.contract import BandwidthOptions
from decode_doctor.checks.budget.contract import BudgetOptions
from decode_doctor.engine.options import Options, option

from .options import ServingOptions

BENCH_FORMATS = tuple(f for f in REPORT_FORMATS if f != "prometheus")  # a bench run is a report to read, not a gauge to scrape

EXISTING = click.Path(exists=True, path_type=Path)
A_FILE = click.Path(dir_okay=False, path_type=Path)


@dataclass(frozen=True)
class BenchOptions(Options):
    """bench's options, in --help's order; --bandwidth, --threads and --api-key-env are the checks' own."""

    endpoint: str = option(
        "--endpoint", "The server's OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1.", required=True, default="", metavar="URL"
    )
    model: str | None = option("--model", "The model name to request [default: the first the server lists].")
    model_files: Path | None = option(  # noqa: RUF009 (a field specifier, as dataclasses.field)
        "--model-files",
        "The served model's files (directory or .gguf), for this host's decode ceiling [default: the served id, if a local path].",
        kind=EXISTING,
    )
    api: str = option(
        "--api",
        "The API to send requests to: chat (/v1/chat/completions) or completions (/v1/completions).",
        choices=("chat", "completions"),
        default="chat",
        show_default=True,
    )
    concurrency: str = option("--concurrency", "Concurrency levels to sweep, comma-separated.", default="1,2,4,8", show_default=True)
    input_tokens: int = option("--input-tokens", "Prompt length in tokens.", kind=click.IntRange(1, 131072), default=256, show_default=True)
    output_tokens: int = option(
        "--output-tokens", "max_tokens of each request.", kind=click.IntRange(2, 32768), default=128, show_default=True
    )
    requests: int | None = option(
        "--requests", "Requests per level [default: 4 × concurrency, at least 8].", kind=click.IntRange(1, 100000)
    )
    duration: float = option("--duration", "Seconds per level at most.", kind=click.FloatRange(1, 3600), default=120, show_default=True)
    timeout: float = option("--timeout", "Seconds one request may take.", kind=click.FloatRange(1, 3600), default=120, show_default=True)
    slo: str | None = option("--slo", "Latency targets for goodput, e.g. ttft_p95=800ms,tpot_p95=60ms.", metavar="SLO")
    seed: int = option("--seed", "Seed of the prompt set.", kind=click.IntRange(0), default=0, show_default=True)
    ignore_eos: bool = option(
        "--ignore-eos", "Ask the server to run every request to max_tokens (vLLM, SGLang, llama.cpp).", is_flag=True, default=False
    )
    temperature: float | None = option("--temperature", "Sampling temperature [default: the server's].", kind=click.FloatRange(0, 2))
    bandwidth: float | None = same_as(BudgetOptions, "bandwidth")
    device: str | None = option("--device", "The device the server decodes on, cpu or cuda:N [default: a GPU if there is one].")
    threads: int | None = same_as(BandwidthOptions, "threads")
    api_key_env: str = same_as(ServingOptions, "api_key_env")
    no_metrics: bool = option("--no-metrics", "Do not read the server's /metrics and /slots.", is_flag=True, default=False)
    fmt: str = option("--format", "The output format.", choices=BENCH_FORMATS, default="text", show_default=True)
    output: Path | None = option("--output", "Write the report here.", short="-o", kind=A_FILE)  # noqa: RUF009
    fail_on: str = same_as(SharedOptions, "fail_on")
    incomplete: str = same_as(SharedOptions, "incomplete")
    verbose: bool = option("--verbose", "Show every fact, and which check said what.", short="-v", is_flag=True, default=False)
    debug: bool = same_as(SharedOptions, "debug")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click_options(BenchOptions)
def bench(**params: Any) -> None:
    """Measure TTFT and TPOT percentiles of a running server across concurrency, and judge them.

    Streams requests of a controlled prompt length to the endpoint (and nowhere else), reports
    p50/p90/p95/p99, requests/s, output tokens/s, goodput under --slo and the knee of the sweep, and
    judges decode at concurrency 1 against this host's ceiling for the served model. The server's
    own /metrics are read before, during and after the run. Ctrl-C stops and reports what was measured.

    Exits 1 on findings at --fail-on or above, 3 when the server's own metrics could not be judged
    (--incomplete), 2 on a usage error or an unreachable server, 130 when interrupted.
    """
    from .bench import run

    run(BenchOptions.from_values(params))


COMMANDS = (bench,)
