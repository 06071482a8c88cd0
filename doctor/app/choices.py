"""The choices commands offer, light enough for --help: the report formats and the --fail-on levels."""

from __future__ import annotations

from ..engine.findings import FAIL_ON_LEVELS
from ..reports.formats import FORMATS

BUNDLE_FORMATS = ("bundle", *(f for f in FORMATS if f != "text"))  # `report`: a whole bundle, or one redacted file

__all__ = ["BUNDLE_FORMATS", "FAIL_ON_LEVELS", "FORMATS"]
