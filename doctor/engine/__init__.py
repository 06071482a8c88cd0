"""The engine: the check and fixer contracts, the context a check reads the host through, typed facts,
the command runner, the registry and the runner that executes checks. It names no check.

Checks and fixers import what they need from here.
"""

from .check import INPUTS, Analysis, Check, Needs, Reads, SkipCheck
from .context import Context
from .facts import Board, Chart, EnvRow, Facts, HtmlBlock, Metric, Sample, Series, device_with_memory
from .findings import (
    AcceptedGap,
    Applicability,
    Code,
    CommandRecord,
    CommandsParams,
    Finding,
    FixableCode,
    FixParams,
    FixRef,
    JSONValue,
    NoParams,
    NotJudged,
    Severity,
)
from .fixer import Fixer
from .options import OptionRef, Options, OptionValues, option

__all__ = [
    "INPUTS",
    "AcceptedGap",
    "Analysis",
    "Applicability",
    "Board",
    "Chart",
    "Check",
    "Code",
    "CommandRecord",
    "CommandsParams",
    "Context",
    "EnvRow",
    "Facts",
    "Finding",
    "FixParams",
    "FixRef",
    "FixableCode",
    "Fixer",
    "HtmlBlock",
    "JSONValue",
    "Metric",
    "Needs",
    "NoParams",
    "NotJudged",
    "OptionRef",
    "OptionValues",
    "Options",
    "Reads",
    "Sample",
    "Series",
    "Severity",
    "SkipCheck",
    "device_with_memory",
    "option",
]
