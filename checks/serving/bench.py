"""`decode-doctor bench`, the work behind the command (commands.py keeps --help light).

The measurement runs here, in the command's process, where Ctrl-C can stop it gently; the judgement
is the serving check's, run through the application layer with the decode-budget check (and the
bandwidth check, unless --bandwidth is given) so that the ceiling is this host's, and rendered like
every other report.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from decode_doctor.checks.bandwidth.contract import BandwidthOptions
from decode_doctor.checks.budget.contract import BudgetAt, BudgetOptions
from decode_doctor.engine.hfcache import cached_snapshot
from decode_doctor.i18n import _, localized, reason, said

from . import engines, prompts, reading
from .check import Measured
from .client import ClientError, Endpoint, stream
from .commands import BenchOptions
from .facts import BenchRun, Peaks, PromptSummary
from .load import LevelRun, LoadPlan, run_level
from .observe import Observer, ServerLoad
from .options import ServingOptions
from .stats import SloTerm, knee, parse_slo, summarise

MAX_LEVELS = 16
MAX_CONCURRENCY = 1024
MAX_TOTAL_REQUESTS = 100_000
MAX_PROMPT_TOKENS = 50_000_000  # the whole prompt set, prepared before the first request
PROMPT_TEXTS_IN_REPORT = 1 << 20  # characters of prompt text the JSON report carries
WATCH_INTERVAL_S = 1.0
FETCH_TIMEOUT_S = 5.0


class Unusable(click.ClickException):
    """The endpoint cannot be measured at all (nothing answers): exit 2, like a usage error."""

    exit_code = 2


class Stop:
    """Ctrl-C: the first stops the run and keeps what was measured, the second leaves at once."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.pressed = 0

    def __call__(self) -> None:
        self.pressed += 1
        if self.pressed == 1:
            click.echo("\n" + _("stopping: finishing the report with what was measured (Ctrl-C again to leave now)"), err=True)
            self.event.set()
        else:
            raise KeyboardInterrupt


def concurrency_levels(text: str) -> tuple[int, ...]:
    levels: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdecimal() or not 1 <= int(part) <= MAX_CONCURRENCY:
            raise click.BadParameter(
                _("{part}: each level is a whole number from 1 to {most}", part=repr(part), most=MAX_CONCURRENCY),
                param_hint="--concurrency",
            )
        if int(part) not in levels:
            levels.append(int(part))
    if not levels or len(levels) > MAX_LEVELS:
        raise click.BadParameter(_("give 1 to {most} levels, e.g. 1,2,4,8", most=MAX_LEVELS), param_hint="--concurrency")
    return tuple(levels)


def _is_local(host: str) -> bool:
    """Whether the server runs on this host (its ceiling is this host's)."""
    if host in ("localhost", "127.0.0.1", "::1") or host.startswith("127."):
        return True
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    import psutil

    mine = {a.address.split("%")[0] for nic in psutil.net_if_addrs().values() for a in nic}
    return bool(addresses & mine)


def model_files(given: Path | None, model_id: str | None) -> tuple[Path | None, str | None]:
    """The served model's files, and where they were found (or why none were)."""
    if given is not None:
        return given, None
    if model_id:
        path = Path(model_id).expanduser()
        if path.is_absolute() and (path.is_file() or (path / "config.json").is_file()):
            return path, None
        cached = cached_snapshot(model_id, os.environ)
        if cached is not None:
            return cached, None
    quoted = f'"{model_id}"'
    return None, said("the served model {model} is not a local path or in the Hugging Face cache: give --model-files", model=quoted)


class Bar:
    """Progress on a terminal's stderr: one line per level, redrawn in place; silent otherwise."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.text = ""

    def show(self, text: str) -> None:
        if not self.enabled:
            return
        import shutil

        width = shutil.get_terminal_size((100, 20)).columns - 1
        self.text = text
        sys.stderr.write("\r\033[K" + text[:width])
        sys.stderr.flush()

    def level(self, concurrency: int, done: int, total: int, failed: int, started: float) -> None:
        cells = 24
        filled = cells * done // max(total, 1)
        failures = _(", {failed} failed", failed=failed) if failed else ""
        bar = "#" * filled + "." * (cells - filled)
        self.show(
            _(
                "concurrency {concurrency}: [{bar}] {done}/{total}{failures}, {seconds:.0f} s",
                concurrency=concurrency,
                bar=bar,
                done=done,
                total=total,
                failures=failures,
                seconds=time.monotonic() - started,
            )
        )

    def clear(self) -> None:
        if self.enabled and self.text:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


@dataclass
class Measurement:
    model: str
    engine: str | None
    prompts: prompts.PromptSet
    runs: list[LevelRun]
    before: engines.Snapshot | None
    after: engines.Snapshot | None
    watch: engines.Watch
    metrics_note: str | None
    interrupted: bool
    started: float
    load: ServerLoad | None = None  # the host while concurrency 1 ran, for a server on this host


async def _calibrator(endpoint: Endpoint, plan: LoadPlan) -> Any:
    async def calibrate(text: str) -> int | None:
        path, body = plan.request(text, max_tokens=1)
        record = await stream(endpoint, endpoint.path(path), body, plan.limits())
        return record.usage_prompt

    return calibrate


async def _watch(endpoint: Endpoint, watch: engines.Watch, stop: asyncio.Event) -> None:
    while not stop.is_set():
        snap, note = await reading.metrics(endpoint, FETCH_TIMEOUT_S)
        if snap is not None:
            watch.add(snap)
        elif note:
            watch.errors.append(note)
        try:
            await asyncio.wait_for(stop.wait(), WATCH_INTERVAL_S)
        except asyncio.TimeoutError:
            pass


async def measure(
    endpoint: Endpoint, options: BenchOptions, levels: tuple[int, ...], counts: tuple[int, ...], stop: asyncio.Event, bar: Bar
) -> Measurement:
    started = time.time()
    try:
        model_id, owner = await reading.models(endpoint, FETCH_TIMEOUT_S)
    except reading.Unreachable as exc:
        raise Unusable(localized(reason(exc))) from None
    model = options.model or model_id
    if not model:
        raise click.ClickException(
            _("{endpoint} lists no model (GET {path}): give --model", endpoint=endpoint.label, path=endpoint.path("models"))
        )
    plan = LoadPlan(
        api=options.api,
        model=model,
        levels=levels,
        requests=counts,
        duration_s=options.duration,
        output_tokens=options.output_tokens,
        timeout_s=options.timeout,
        ignore_eos=options.ignore_eos,
        temperature=options.temperature,
    )
    before, metrics_note = (
        (None, said("not read (--no-metrics)")) if options.no_metrics else await reading.metrics(endpoint, FETCH_TIMEOUT_S)
    )
    engine = before.engine if before is not None and before.engine != "unknown" else owner
    metrics_note = reading.hinted(metrics_note, engine)

    bar.show("checking the endpoint with one request")
    path, body = plan.request("hello", max_tokens=4)
    warmup = await stream(endpoint, endpoint.path(path), body, plan.limits())
    if warmup.kind == "connect":
        raise Unusable(localized(warmup.error) if warmup.error else _("cannot connect"))

    bar.show("preparing prompts")
    tokenizer = await prompts.find_tokenizer(endpoint, model, FETCH_TIMEOUT_S)
    calibrate = await _calibrator(endpoint, plan) if tokenizer is None and warmup.error is None else None
    prompt_set = await prompts.build(
        plan.total_requests, options.input_tokens, options.seed, counter=tokenizer, calibrate=calibrate, progress=bar.show
    )

    watch = engines.Watch()
    load: ServerLoad | None = None
    watching = asyncio.ensure_future(_watch(endpoint, watch, stop)) if before is not None else None
    runs: list[LevelRun] = []
    offset = 0
    try:
        for concurrency, count in zip(levels, counts, strict=True):
            if stop.is_set():
                break
            level_started = time.monotonic()

            def progress(done: int, total: int, failed: int, concurrency: int = concurrency, started: float = level_started) -> None:
                bar.level(concurrency, done, total, failed, started)

            texts = prompt_set.texts[offset : offset + count]
            offset += count
            bar.level(concurrency, 0, count, 0, level_started)
            observer = Observer(endpoint.port) if concurrency == 1 and _is_local(endpoint.host) else None
            runs.append(await run_level(endpoint, plan, concurrency, count, texts, stop, progress))
            if observer is not None:
                load = observer.close()
    finally:
        interrupted = stop.is_set()
        if watching is not None:
            stop.set()
            await asyncio.gather(watching, return_exceptions=True)
    after = None
    if before is not None:
        after, after_note = await reading.metrics(endpoint, FETCH_TIMEOUT_S)
        metrics_note = said("after the run, {note}", note=after_note) if after is None else metrics_note
    bar.clear()
    return Measurement(model, engine, prompt_set, runs, before, after, watch, metrics_note, interrupted, started, load)


def _prompt_summary(prompt_set: prompts.PromptSet) -> PromptSummary:
    texts = list(prompt_set.texts)
    if sum(len(t) for t in texts) > PROMPT_TEXTS_IN_REPORT:
        texts = texts[:8]
    return PromptSummary(
        seed=prompt_set.seed,
        target_tokens=prompt_set.target_tokens,
        method=prompt_set.method,
        description=prompt_set.describe(),
        sha256=prompt_set.digest(),
        count=len(prompt_set.texts),
        tokens=list(prompt_set.tokens),
        texts=texts,
    )


def bench_run(measurement: Measurement, options: BenchOptions, slo: tuple[SloTerm, ...]) -> BenchRun:
    levels = [summarise(r.concurrency, r.records, r.wall_s, options.output_tokens, slo, r.stopped) for r in measurement.runs]
    return BenchRun(
        api=options.api,
        model=measurement.model,
        input_tokens=options.input_tokens,
        output_tokens=options.output_tokens,
        ignore_eos=options.ignore_eos,
        prompts=_prompt_summary(measurement.prompts),
        levels=levels,
        knee=knee(levels),
        slo=[term.label() for term in slo],
        interrupted=measurement.interrupted,
        duration_s=round(time.time() - measurement.started, 3),
    )


def _counts(levels: tuple[int, ...], requests: int | None) -> tuple[int, ...]:
    return tuple(requests if requests else max(8, 4 * c) for c in levels)


def validate(options: BenchOptions) -> tuple[tuple[int, ...], tuple[int, ...], tuple[SloTerm, ...], float | None]:
    levels = concurrency_levels(options.concurrency)
    counts = _counts(levels, options.requests)
    if sum(counts) > MAX_TOTAL_REQUESTS:
        raise click.BadParameter(
            _("{counts:,} requests in all; at most {most:,}", counts=sum(counts), most=MAX_TOTAL_REQUESTS),
            param_hint="--requests",
        )
    if sum(counts) * options.input_tokens > MAX_PROMPT_TOKENS:
        raise click.BadParameter(
            _(
                "{counts:,} prompts of {tokens:,} tokens: at most {most:,} prompt tokens in all",
                counts=sum(counts),
                params=options.input_tokens,
                most=MAX_PROMPT_TOKENS,
            ),
            param_hint="--input-tokens",
        )
    slo: tuple[SloTerm, ...] = ()
    if options.slo:
        try:
            slo = parse_slo(options.slo)
        except ValueError as exc:
            raise click.BadParameter(localized(reason(exc)), param_hint="--slo") from None
    bandwidth = options.bandwidth or None  # parsed by --bandwidth's own declaration (BudgetOptions)
    if options.device and options.device != "cpu" and not options.device.startswith("cuda:"):
        raise click.BadParameter(_("{device}: write cpu or cuda:N", device=repr(options.device)), param_hint="--device")
    return levels, counts, slo, bandwidth


def run(options: BenchOptions) -> None:
    from decode_doctor.app.guard import guarded

    guarded(options.debug, lambda: _run(options))


def _run(options: BenchOptions) -> int:
    levels, counts, slo, bandwidth = validate(options)
    key = os.environ.get(options.api_key_env) or None
    try:
        endpoint = Endpoint.parse(options.endpoint, api_key=key)
    except ValueError as exc:
        raise click.BadParameter(localized(reason(exc)), param_hint="--endpoint") from None
    loop = asyncio.new_event_loop()
    stop = Stop()
    loop.add_signal_handler(signal.SIGINT, stop)  # wakes the loop, unlike a plain signal handler
    bar = Bar(sys.stderr.isatty())
    try:
        measurement = loop.run_until_complete(measure(endpoint, options, levels, counts, stop.event, bar))
    except ClientError as exc:
        raise Unusable(localized(reason(exc))) from None
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        bar.clear()
        loop.close()
    bench = bench_run(measurement, options, slo)
    return report(endpoint, measurement, bench, options, bandwidth, key)


def report(
    endpoint: Endpoint, measurement: Measurement, bench: BenchRun, options: BenchOptions, bandwidth: float | None, key: str | None
) -> int:
    """The serving check judges what was measured, through the application layer: given the served
    model's files, its decode budget (and this host's bandwidth, unless --bandwidth) is pulled in for
    the ceiling; the report is rendered and redacted like every other."""
    from decode_doctor.app import service
    from decode_doctor.app.output import OutputRequest, render_report
    from decode_doctor.app.requests import RunRequest, command_argv

    files, ceiling_note = model_files(options.model_files, measurement.model)
    local = _is_local(endpoint.host)
    if files is not None and not local and not bandwidth:
        ceiling_note = said("the server at {host} is not on this host: give --bandwidth (its device's) to judge", host=endpoint.host)
    elif files is not None and measurement.interrupted and bandwidth is None:
        ceiling_note = said("interrupted before this host's bandwidth was measured: give --bandwidth to judge")
    judged = files is not None and ceiling_note is None
    watch = measurement.watch
    peaks = Peaks(watch.readings, watch.peak_kv_usage, watch.peak_waiting, watch.peak_running) if watch.readings else None
    measured = Measured(
        endpoint=endpoint.label,
        engine=measurement.engine,
        model=measurement.model,
        bench=bench,
        before=measurement.before,
        after=measurement.after,
        peaks=peaks,
        metrics_note=measurement.metrics_note,
        ceiling_note=ceiling_note,
        device=options.device,
        metrics_declined=bool(options.no_metrics),
        load=measurement.load,
        threads=options.threads,
    )
    checks = (
        ServingOptions(endpoint=endpoint.label),
        BudgetOptions(bandwidth=bandwidth),  # --bandwidth means the same to the decode budget: the figure to divide by
        BandwidthOptions(threads=options.threads),  # the bandwidth probe's threads, and so the prediction's
    )
    at = BudgetAt(context=options.input_tokens + options.output_tokens // 2, concurrency=1)  # the mean context while decoding
    request = RunRequest(
        models=(files,) if judged and files is not None else (),
        select=("serving",),
        options=checks,
        supplied=(measured, at),
        fail_on=options.fail_on,
        incomplete_fails=options.incomplete == "fail",
        argv=command_argv("bench"),
    )
    outcome = service.run(request)
    out = OutputRequest(options.fmt, options.output, options.verbose, options.debug, secrets=(key,) if key else ())
    render_report(outcome.report, outcome.registry, out)
    if measurement.interrupted:
        return 130
    return outcome.report.exit_code
