"""Value objects shared by the engine, the checks, the fixers and the reports."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .facts import Facts

JSONValue = Any


class Severity(str, enum.Enum):
    """The one severity order of the tool: error > warning > info."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return _RANK[self.value]


_RANK = {"info": 1, "warning": 2, "error": 3}
FAIL_ON_LEVELS = ("info", "warning", "error", "never")


def fails(severity: Severity, fail_on: str) -> bool:
    """Whether a finding of this severity makes the run fail under --fail-on."""
    return fail_on != "never" and severity.rank >= _RANK[fail_on]


class State(str, enum.Enum):
    PASSED = "passed"
    FINDINGS = "findings"
    SKIPPED = "skipped"
    TIMED_OUT = "timed out"
    CRASHED = "crashed"


class Applicability(str, enum.Enum):
    """How far a fix may be trusted (ruff's fix safety); declared by the fixer that claims a code."""

    SAFE = "safe"  # applied by --fix after confirmation
    UNSAFE = "unsafe"  # applied by --fix --unsafe-fixes only
    DISPLAY_ONLY = "display-only"  # the tool prints the commands; a person runs them


@dataclass(frozen=True)
class Code:
    """A stable finding code with its explanation in fixed sections (DCGM/ruff style)."""

    code: str
    title: str
    severity: Severity
    what: str  # what it means
    why: str  # why it matters for LLM decode
    fix_by_hand: str  # how to fix it by hand
    example: str = ""
    # What the automatic fix does and how safe it is; empty: no automatic fix. A code with this text
    # must be claimed by exactly one fixer (checked when the registry loads).
    fix_safety: str = ""
    # Rows of the environment table this code speaks about ("memory", "kernel"): a finding with it
    # marks those rows as judged.
    concerns: tuple[str, ...] = ()

    @property
    def declares_fix(self) -> bool:
        return bool(self.fix_safety)


@dataclass(frozen=True)
class FixRef:
    """What a finding tells its fixer: a one-line summary and plain-data params.

    The check sets summary and params; the engine fills in which fixer claims the code and with
    which applicability, so a check can never disagree with its fixer.
    """

    summary: str
    params: dict[str, JSONValue] = field(default_factory=dict)
    fixer: str | None = None
    applicability: Applicability | None = None

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "fixer": self.fixer,
            "summary": self.summary,
            "applicability": self.applicability.value if self.applicability else None,
            "params": self.params,
        }


@dataclass(frozen=True)
class Finding:
    code: str
    check: str
    severity: Severity
    title: str
    message: str
    evidence: dict[str, JSONValue] = field(default_factory=dict)
    path: str | None = None
    fix: FixRef | None = None
    # Evidence keys whose values may hold secrets; reports redact them.
    sensitive: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "code": self.code,
            "check": self.check,
            "severity": self.severity.value,
            "title": self.title,
            "message": self.message,
            "evidence": self.evidence,
            "path": self.path,
            "fix": self.fix.to_dict() if self.fix else None,
            "sensitive": list(self.sensitive),
        }


@dataclass(frozen=True)
class CommandRecord:
    """One command a check ran, kept as evidence for the report."""

    argv: tuple[str, ...]
    exit_code: int | None
    duration_s: float
    stdout: str
    stderr: str
    timed_out: bool = False
    error: str | None = None  # e.g. "not found on PATH"
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.error is None

    def excerpt(self, limit: int = 2000) -> str:
        text = self.stdout if self.stdout.strip() else self.stderr
        return text if len(text) <= limit else text[:limit] + "\n…"

    def to_dict(self, limit: int | None = None) -> dict[str, JSONValue]:
        data = asdict(self)
        data["argv"] = list(self.argv)
        data["duration_s"] = round(self.duration_s, 4)
        if limit is not None:
            for key in ("stdout", "stderr"):
                if len(data[key]) > limit:
                    data[key] = data[key][:limit] + "\n…"
                    data["truncated"] = True
        return data


@dataclass
class CheckResult:
    check: str
    state: State
    duration_s: float
    findings: list[Finding] = field(default_factory=list)
    reason: str | None = None  # why skipped / timed out / crashed
    error: str | None = None  # traceback text of a crash, shown with --debug
    commands: list[CommandRecord] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # host files the check read
    facts: Facts | None = None  # what the check learned, typed (see engine.facts)
