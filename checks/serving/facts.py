"""What the serving check learned: a bench run's levels, the ceiling it was judged against, and the
server's own readings; rendered into the report's summary, HTML charts, metrics and `diff` values."""

from __future__ import annotations

from dataclasses import dataclass, field

from decode_doctor.engine import Chart, Facts, HtmlBlock, Metric, Sample, Series
from decode_doctor.i18n import N_, _, localized, ngettext
from decode_doctor.models.hardware import BandwidthSource

from .engines import Snapshot
from .stats import Knee, LevelStats


@dataclass(frozen=True)
class Ceiling:
    """This host's decode ceiling for the served model: one sequence, bandwidth / bytes per token."""

    tokens_per_s: float
    device: str
    bandwidth_gbps: float
    bandwidth_source: BandwidthSource
    context: int
    model: str


@dataclass(frozen=True)
class PredictionCheck:
    """The calibrated prediction of decode at concurrency 1 beside what bench measured, and the
    causes of a gap, each from something observed."""

    predicted_ms: float
    low_ms: float
    high_ms: float
    measured_ms: float  # TPOT p50 at concurrency 1
    error: float  # measured ÷ predicted − 1: positive when slower than predicted
    engine: str
    engine_version: str
    threads: int
    weight_type: str
    depth: int
    server_cores: float | None  # the server's CPU while decoding, in cores (a server on this host)
    foreign_cores: float | None  # other processes' CPU meanwhile
    causes: tuple[str, ...] = ()
    source: str = "calibrate"  # the calibration's: "calibrate", or "bench" when a live run taught it
    learned: str = ""  # what this run taught the host's calibration, or why it taught nothing
    busy_threads: int | None = None  # the server's threads at work while decoding (observe.py)


@dataclass(frozen=True)
class PromptSummary:
    seed: int
    target_tokens: int
    method: str
    description: str
    sha256: str
    count: int
    tokens: list[int | None] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # all of them when small enough, else the first few


@dataclass(frozen=True)
class Peaks:
    readings: int
    kv_usage: float | None
    waiting: float | None
    running: float | None


@dataclass(frozen=True)
class BenchRun:
    api: str
    model: str
    input_tokens: int
    output_tokens: int
    ignore_eos: bool
    prompts: PromptSummary
    levels: list[LevelStats]
    knee: Knee | None
    slo: list[str]
    interrupted: bool
    duration_s: float

    def level(self, concurrency: int) -> LevelStats | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)


def _count(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def reading_values(snap: Snapshot, peaks: Peaks | None = None, before: Snapshot | None = None) -> list[tuple[str, str]]:
    """What the server's own metrics said, as (name, value) rows, each name marked where it is written
    and translated where it is shown: the gauges now, or their peaks
    during a run; counters since the server started, or what the run added. A value the metrics
    lack says so."""
    kv = peaks.kv_usage if peaks and peaks.kv_usage is not None else snap.kv_usage
    running = peaks.running if peaks and peaks.running is not None else snap.running
    waiting = peaks.waiting if peaks and peaks.waiting is not None else snap.waiting
    limit = _count(snap.max_running)
    if snap.limit_source == "default":
        limit += _(" ({engine}'s default {flag})", engine=snap.engine, flag=snap.limit_flag)
    elif snap.limit_source == "slots":
        limit += _(" (its /slots)")
    absent = _("not in its metrics")
    if running is None:
        sequences = absent
    elif snap.max_running:
        sequences = _("{running} of {limit}", running=_count(running), limit=limit)
    else:
        sequences = _count(running)
    rows = [
        (N_("peak KV cache in use") if peaks else N_("KV cache in use"), absent if kv is None else f"{kv * 100:.1f}%"),
        (N_("peak sequences running") if peaks else N_("sequences running"), sequences),
        (N_("peak requests waiting") if peaks else N_("requests waiting"), absent if waiting is None else _count(waiting)),
    ]
    if snap.preemptions is not None:
        gained = snap.preemptions - before.preemptions if before is not None and before.preemptions is not None else snap.preemptions
        rows.append((N_("preemptions during the run") if before is not None else N_("preemptions since it started"), _count(gained)))
    if snap.queue_time is not None and snap.queue_time.mean is not None:
        queue = snap.queue_time.since(before.queue_time if before else None)
        if queue.mean is not None:
            rows.append((N_("mean queue time"), _("{ms:,.1f} ms over {count:,.0f} requests", ms=queue.mean * 1000, count=queue.count)))
    if snap.slots is not None:
        per_slot = _(", {tokens:,} tokens each", tokens=snap.slots.n_ctx) if snap.slots.n_ctx else ""
        rows.append((N_("slots"), _("{busy} of {total} busy{per_slot}", busy=snap.slots.busy, total=snap.slots.total, per_slot=per_slot)))
    if snap.lost:
        rows.append((N_("lines dropped"), ", ".join(snap.lost)))
    return rows


def ms(value: float | None) -> str:
    """Milliseconds as reports show them: 1,310 ms, 35.7 ms, 0.72 ms; – when unknown."""
    return "–" if value is None else (f"{value:,.0f} ms" if value >= 100 else f"{value:.2f} ms" if value < 10 else f"{value:.1f} ms")


@dataclass(frozen=True)
class ServingFacts(Facts):
    shown_by_default = True
    endpoint: str = ""
    engine: str | None = None
    model: str | None = None
    bench: BenchRun | None = None
    ceiling: Ceiling | None = None
    ceiling_note: str | None = None  # why there is no ceiling
    before: Snapshot | None = None
    after: Snapshot | None = None
    peaks: Peaks | None = None
    metrics_note: str | None = None  # why there is no reading of /metrics
    prediction: PredictionCheck | None = None
    prediction_note: str | None = None  # why there is no prediction to compare with
    origin: str = ""  # where the readings come from when not a live endpoint: "vLLM log", "SSE transcript"
    pasted: tuple[str, ...] = ()  # what a pasted text held beside the readings

    @property
    def reach(self) -> float | None:
        """Decode speed at concurrency 1 as a fraction of the ceiling."""
        first = self.bench.level(1) if self.bench else None
        if first is None or self.ceiling is None or not first.decode_tokens_per_s:
            return None
        return first.decode_tokens_per_s / self.ceiling.tokens_per_s

    def _ceiling_line(self) -> str | None:
        reach, ceiling = self.reach, self.ceiling
        if reach is not None and ceiling is not None:
            return _(
                "decode at concurrency 1 reaches {reach:.0f} % of this host's ceiling ({tps:,.1f} tok/s: "
                "{model} on {device}, {bandwidth:,.0f} GB/s {source})",
                reach=reach * 100, tps=ceiling.tokens_per_s, model=ceiling.model, device=ceiling.device,
                bandwidth=ceiling.bandwidth_gbps, source=ceiling.bandwidth_source.label,
            )  # fmt: skip
        if self.bench and self.ceiling_note:
            return _("not judged against a ceiling: {why}", why=localized(self.ceiling_note))
        return None

    def _prediction_lines(self) -> list[str]:
        p = self.prediction
        if p is None:
            if self.bench and self.prediction_note:
                return [_("no calibrated prediction to compare with: {why}", why=localized(self.prediction_note))]
            return []
        how = _("learned from a live bench") if p.source == "bench" else _("calibrated")
        line = _(
            "predicted TPOT {predicted} ({low}–{high}; {engine} {version} {how} at {threads} thread(s) for {weights}, at {depth:,} "
            "tokens), measured p50 {measured} at concurrency 1: {error:+.0%}",
            predicted=ms(p.predicted_ms), low=ms(p.low_ms), high=ms(p.high_ms), engine=p.engine, version=p.engine_version, how=how,
            threads=p.threads, weights=p.weight_type, depth=p.depth, measured=ms(p.measured_ms), error=p.error,
        )  # fmt: skip
        gaps = ["  " + _("gap: {cause}", cause=localized(cause)) for cause in p.causes]
        seen = []
        if p.busy_threads is not None and p.server_cores is not None:
            seen.append(
                "  "
                + _(
                    "the server while decoding: {busy} busy thread(s) (each at work at least half as much as the busiest), "
                    "{cores:.1f} cores in all",
                    busy=p.busy_threads,
                    cores=p.server_cores,
                )
            )
        return [line, *seen, *gaps, *(["  " + _("calibration {learned}", learned=localized(p.learned))] if p.learned else [])]

    def reading(self) -> list[tuple[str, str]]:
        """The server's own metrics as read: alone, or during a bench run."""
        if self.after is None or self.after.engine == "unknown":
            return []
        return reading_values(self.after, self.peaks, self.before)

    def _reading_line(self) -> str | None:
        rows = self.reading()
        if not rows:
            return None
        if self.origin:
            where = ngettext("its log ({count:,} stats line)", "its log ({count:,} stats lines)", self.peaks.readings) if self.peaks else ""
            where = where or _("the {origin}", origin=self.origin)
        else:
            when = _("now")
            if self.peaks:
                when = _("during the run ({count} readings)", count=self.peaks.readings)
            elif self.bench:
                when = _("at the end of the run")
            where = _("its /metrics {when}", when=when)
        return _("{where}: {values}", where=where, values=_("; ").join(f"{_(name)} {value}" for name, value in rows))

    def summary(self) -> list[str]:
        lines = []
        engine = self.engine or _("engine unknown")
        where = _("{endpoint} ({engine}, model {model})", endpoint=self.endpoint, engine=engine, model=self.model) if self.model else ""
        where = where or f"{self.endpoint} ({engine})"
        bench = self.bench
        reading = self._reading_line()
        if bench is None and self.origin:
            # a pasted text: analyze names its file before every line, so the lines say what it is and what it held
            lines.append(
                _("; ").join([self.origin, *self.pasted]) + (_(": {note}", note=localized(self.metrics_note)) if self.metrics_note else "")
            )
            lines.extend([reading] if reading else [])
            return lines
        if bench is None:
            head = _("server {where}", where=where)
            lines.append(head + (_(": {note}", note=localized(self.metrics_note)) if self.metrics_note else ""))
            lines.extend([f"  {reading}"] if reading else [])
            lines.extend(f"  {note}" for note in self.pasted)
            return lines
        state = _(", interrupted") if bench.interrupted else ""
        lines.append(
            _(
                "bench {where}: {api} API, {prompts}, {tokens} output tokens{state}",
                where=where, api=bench.api, prompts=bench.prompts.description, tokens=bench.output_tokens, state=state,
            )
        )  # fmt: skip
        for lv in bench.levels:
            if lv.attempted == 0:
                continue
            ttft, tpot = lv.ttft, lv.tpot
            errors = _(", {count} failed", count=lv.attempted - lv.ok) if lv.ok < lv.attempted else ""
            goodput = _(", goodput {rate:.2f} req/s", rate=lv.goodput_per_s) if lv.goodput_per_s is not None else ""
            level = _(
                "concurrency {concurrency:>3}: {ok} requests{errors}; TTFT p50 {ttft50} p95 {ttft95} p99 {ttft99}; TPOT p50 {tpot50} "
                "p95 {tpot95} p99 {tpot99}; {rps:.2f} req/s, {tps:,.1f} output tok/s{goodput} (output tokens counted from: {source})",
                concurrency=lv.concurrency, ok=lv.ok, errors=errors, ttft50=ms(ttft.p50 if ttft else None),
                ttft95=ms(ttft.p95 if ttft else None), ttft99=ms(ttft.p99 if ttft else None), tpot50=ms(tpot.p50 if tpot else None),
                tpot95=ms(tpot.p95 if tpot else None), tpot99=ms(tpot.p99 if tpot else None), rps=lv.requests_per_s,
                tps=lv.output_tokens_per_s, goodput=goodput, source=lv.tokens_from.label,
            )  # fmt: skip
            lines.append("  " + level)
        if bench.knee:
            k = bench.knee
            knee = _(
                "knee: from concurrency {start} to {end}, TPOT p95 grows {tpot:.2f}× while throughput grows {throughput:.2f}×",
                start=k.concurrency, end=k.next_concurrency, tpot=k.tpot_growth, throughput=k.throughput_growth,
            )  # fmt: skip
            lines.append(knee)
        elif len([lv for lv in bench.levels if lv.tpot]) > 1:
            lines.append(_("knee: none in this sweep (throughput grew at least as fast as TPOT p95)"))
        ceiling = self._ceiling_line()
        if ceiling:
            lines.append(ceiling)
        lines.extend(self._prediction_lines())
        if reading:
            lines.append(reading)
        return lines

    def html(self) -> list[HtmlBlock]:
        reading = self.reading()
        if self.origin:
            title = _("What the {origin} says", origin=self.origin)
        else:
            title = _("The server's own metrics ({engine})", engine=self.after.engine if self.after else "")
        rows = tuple((_(name), value) for name, value in reading) + tuple(("", note) for note in self.pasted)
        server = [HtmlBlock(title, rows)] if rows else []
        return self._bench_html() + server

    def _bench_html(self) -> list[HtmlBlock]:
        bench = self.bench
        if bench is None or not any(lv.tpot for lv in bench.levels):
            return []
        levels = [lv for lv in bench.levels if lv.ttft or lv.tpot]

        def series(label: str, metric: str, q: int) -> Series:
            points = tuple((float(lv.concurrency), getattr(lv, metric).at(q)) for lv in levels if getattr(lv, metric))
            return Series(label, points)

        concurrency = _("concurrency")
        ttft_chart = Chart(concurrency, "TTFT (ms)", (series("TTFT p50", "ttft", 50), series("TTFT p95", "ttft", 95)), log_x=True)
        tpot_series = [series("TPOT p50", "tpot", 50), series("TPOT p95", "tpot", 95), series("TPOT p99", "tpot", 99)]
        if self.ceiling:
            floor = 1000 / self.ceiling.tokens_per_s
            xs = [float(lv.concurrency) for lv in levels]
            line = Series(_("ceiling ({ms:.2f} ms/token at concurrency 1)", ms=floor), ((min(xs), floor), (max(xs), floor)))
            tpot_series.append(line)
        tpot_chart = Chart(concurrency, "TPOT (ms)", tuple(tpot_series), log_x=True)
        rows = tuple(
            (
                _("concurrency {concurrency}", concurrency=lv.concurrency),
                _(
                    "{ok}/{attempted} ok, TTFT p95 {ttft}, TPOT p95 {tpot}, {tps:,.1f} tok/s",
                    ok=lv.ok,
                    attempted=lv.attempted,
                    ttft=ms(lv.ttft.p95 if lv.ttft else None),
                    tpot=ms(lv.tpot.p95 if lv.tpot else None),
                    tps=lv.output_tokens_per_s,
                ),
            )
            for lv in levels
        )
        ceiling = self._ceiling_line()
        extra = (((_("ceiling"), ceiling),) if ceiling else ()) + ((_("prompts"), bench.prompts.description),)
        return [
            HtmlBlock(_("Live decode: TTFT"), rows + extra, ttft_chart),
            HtmlBlock(_("Live decode: TPOT"), (), tpot_chart),
        ]

    def metrics(self) -> list[Metric]:
        if self.bench is None:
            return []
        found = []
        for metric, name in (("ttft", "time_to_first_token"), ("tpot", "time_per_output_token")):
            samples = tuple(
                Sample({"concurrency": str(lv.concurrency), "quantile": f"0.{q:02d}" if q < 100 else "1"}, getattr(lv, metric).at(q) / 1000)
                for lv in self.bench.levels
                if getattr(lv, metric)
                for q in (50, 90, 95, 99)
            )
            found.append(Metric(f"decode_doctor_bench_{name}_seconds", f"Measured {metric.upper()} by concurrency and quantile.", samples))
        if self.reach is not None:
            found.append(
                Metric("decode_doctor_bench_ceiling_ratio", "Decode at concurrency 1 over the ceiling.", (Sample({}, self.reach),))
            )
        return found

    def compared(self) -> dict[str, str | float]:
        values: dict[str, str | float] = {}
        if self.engine:
            values["serving engine"] = self.engine
        for lv in self.bench.levels if self.bench else []:
            if lv.tpot:
                values[f"TPOT p50 at concurrency {lv.concurrency} (ms)"] = round(lv.tpot.p50, 3)
            if lv.ttft:
                values[f"TTFT p95 at concurrency {lv.concurrency} (ms)"] = round(lv.ttft.p95, 3)
        return values
