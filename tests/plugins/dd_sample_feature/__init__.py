"""A feature added by files alone (an installed plugin): a check with typed facts that give an
environment row, a Prometheus metric and an HTML row, and (fixer.py) its fixer. Registered through
the entry-point groups decode_doctor.checks and decode_doctor.fixers by the tests."""

from __future__ import annotations

from dataclasses import dataclass

from decode_doctor.engine import Check, Context, EnvRow, Facts, Finding, FixableCode, FixRef, HtmlBlock, Metric, NoParams, Sample, Severity

CONF = "/etc/sample-feature.conf"
WANTED = "batching = on\n"

SAMPLE001 = FixableCode[NoParams](
    "SAMPLE001",
    "Batching is off",
    Severity.WARNING,
    what="The sample feature's configuration turns batching off.",
    why="Without batching every sequence decodes alone.",
    fix_by_hand=f"Write `{WANTED.strip()}` to {CONF}.",
    params=NoParams,
    fix_safety="Safe: rewrites the file; journaled and undoable.",
)


@dataclass(frozen=True)
class SampleFacts(Facts):
    setting: str

    def environment(self) -> list[EnvRow]:
        return [EnvRow("sample batching", self.setting, ("SAMPLE",))]

    def metrics(self) -> list[Metric]:
        return [Metric("decode_doctor_sample_batching", "1 when batching is on.", (Sample({}, float(self.setting == "on")),))]

    def html(self) -> list[HtmlBlock]:
        return [HtmlBlock("Sample feature", (("batching", self.setting),))]


class SampleCheck(Check):
    name = "sample"
    description = "a feature added by a plugin"
    codes = (SAMPLE001,)
    facts_type = SampleFacts

    def run(self, ctx: Context) -> list[Finding]:
        text = ctx.read_text(CONF) or ""
        setting = "on" if text == WANTED else "off"
        ctx.publish(SampleFacts(setting))
        if setting == "on":
            return []
        return [self.finding(SAMPLE001, f"{CONF} turns batching off.", path=CONF, fix=FixRef("turn batching on", NoParams()))]
