"""The choices commands offer, light enough for --help: the output formats of each use (from the one
registry, reports.formats: `choices(Use.X)` is what a --format option offers), the --fail-on levels
and the --incomplete policies."""

from __future__ import annotations

from ..engine.findings import FAIL_ON_LEVELS
from ..reports.formats import UnknownFormat, Use, choices

INCOMPLETE_POLICIES = ("fail", "ignore")
INCOMPLETE_HELP = (
    "A check that crashed, timed out or could not judge something it was given: exit 3 (fail), or let the findings decide (ignore)."
)
FORMATS = choices(Use.REPORT)  # a run's report: check, analyze
BUNDLE_FORMATS = choices(Use.SINGLE)  # `report`: a whole bundle, or one redacted file

__all__ = ["BUNDLE_FORMATS", "FAIL_ON_LEVELS", "FORMATS", "INCOMPLETE_HELP", "INCOMPLETE_POLICIES", "UnknownFormat", "Use", "choices"]
