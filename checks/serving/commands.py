"""`decode-doctor bench`: live TTFT/TPOT percentiles from a running OpenAI-compatible server.

This module is imported to list `decode-doctor --help`: only click and the application layer's light
choices at its top.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from decode_doctor.app.choices import FAIL_ON_LEVELS, FORMATS, INCOMPLETE_HELP, INCOMPLETE_POLICIES

BENCH_FORMATS = tuple(f for f in FORMATS if f != "prometheus")  # a bench run is a report to read, not a gauge to scrape


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--endpoint", required=True, metavar="URL", help="The server's OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1.")
@click.option("--model", default=None, help="The model name to request [default: the first the server lists].")
@click.option(
    "--model-files",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="The served model's files (directory or .gguf), for this host's decode ceiling [default: the served id, if a local path].",
)
@click.option("--api", type=click.Choice(("chat", "completions")), default="chat", show_default=True)
@click.option("--concurrency", default="1,2,4,8", show_default=True, help="Concurrency levels to sweep, comma-separated.")
@click.option("--input-tokens", type=click.IntRange(1, 131072), default=256, show_default=True, help="Prompt length in tokens.")
@click.option("--output-tokens", type=click.IntRange(2, 32768), default=128, show_default=True, help="max_tokens of each request.")
@click.option("--requests", type=click.IntRange(1, 100000), default=None, help="Requests per level [default: 4 × concurrency, at least 8].")
@click.option("--duration", type=click.FloatRange(1, 3600), default=120, show_default=True, help="Seconds per level at most.")
@click.option("--timeout", type=click.FloatRange(1, 3600), default=120, show_default=True, help="Seconds one request may take.")
@click.option("--slo", default=None, metavar="SLO", help="Latency targets for goodput, e.g. ttft_p95=800ms,tpot_p95=60ms.")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True, help="Seed of the prompt set.")
@click.option("--ignore-eos", is_flag=True, help="Ask the server to run every request to max_tokens (vLLM, SGLang, llama.cpp).")
@click.option("--temperature", type=click.FloatRange(0, 2), default=None, help="Sampling temperature [default: the server's].")
@click.option("--bandwidth", default=None, help="Memory bandwidth for the ceiling: 3.35TB/s, 900GB/s [default: measured].")
@click.option("--device", default=None, help="The device the server decodes on, cpu or cuda:N [default: a GPU if there is one].")
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="The server's CPU thread count (llama.cpp): the bandwidth is measured and the calibrated prediction taken at it "
    "[default: one per usable CPU].",
)
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True, metavar="VAR", help="The variable holding the API key.")
@click.option("--no-metrics", is_flag=True, help="Do not read the server's /metrics and /slots.")
@click.option("--format", "fmt", type=click.Choice(BENCH_FORMATS), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write the report here.")
@click.option("--fail-on", type=click.Choice(FAIL_ON_LEVELS), default="error", show_default=True)
@click.option("--incomplete", type=click.Choice(INCOMPLETE_POLICIES), default="fail", show_default=True, help=INCOMPLETE_HELP)
@click.option("-v", "--verbose", is_flag=True, help="Show every fact, and which check said what.")
@click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
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

    run(**params)


COMMANDS = (bench,)
