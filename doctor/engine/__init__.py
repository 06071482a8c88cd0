"""The engine: the check and fixer contracts, the context a check reads the host through, typed facts,
the command runner, the registry and the runner that executes checks. It names no check.

Checks and fixers import what they need from here.
"""

from .check import Analysis, Check, Needs, Option, SkipCheck
from .context import Context
from .facts import Chart, EnvRow, Facts, HtmlBlock, Metric, Sample, Series
from .findings import Applicability, Code, CommandRecord, Finding, FixRef, Severity
from .fixer import Fixer

__all__ = [
    "Analysis",
    "Applicability",
    "Chart",
    "Check",
    "Code",
    "CommandRecord",
    "Context",
    "EnvRow",
    "Facts",
    "Finding",
    "FixRef",
    "Fixer",
    "HtmlBlock",
    "Metric",
    "Needs",
    "Option",
    "Sample",
    "Series",
    "Severity",
    "SkipCheck",
]
