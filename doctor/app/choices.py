"""The choices commands offer, light enough for --help: the report formats, the --fail-on levels and the
--incomplete policies."""

from __future__ import annotations

from ..engine.findings import FAIL_ON_LEVELS
from ..reports.formats import FORMATS

INCOMPLETE_POLICIES = ("fail", "ignore")
INCOMPLETE_HELP = (
    "A check that crashed, timed out or could not judge something it was given: exit 3 (fail), or let the findings decide (ignore)."
)
BUNDLE_FORMATS = ("bundle", *(f for f in FORMATS if f != "text"))  # `report`: a whole bundle, or one redacted file

__all__ = ["BUNDLE_FORMATS", "FAIL_ON_LEVELS", "FORMATS", "INCOMPLETE_HELP", "INCOMPLETE_POLICIES"]
