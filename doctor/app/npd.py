"""node-problem-detector's plugin: a run's outcome judged by NPD's contract (reports.npd)."""

from __future__ import annotations

from ..reports.npd import PluginResult, judge
from ..reports.view import build_view, judging_codes
from .service import Outcome


def plugin_result(outcome: Outcome) -> PluginResult:
    report = outcome.report
    return judge(build_view(report, codes=judging_codes(outcome.registry.codes(), report)))  # codes and indexes only: nothing to redact
