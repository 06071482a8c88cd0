"""Value objects shared by the engine, the checks, the fixers and the reports."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Generic, TypeAlias, TypeVar

from ..i18n import N_, _
from ..i18n.labels import Labelled

if TYPE_CHECKING:
    from .facts import Facts

# What a report's JSON holds: evidence, facts as dicts, fix params. Sequence and Mapping (read-only,
# covariant) so that a list[str] or a dict of ints is one without a copy.
JSONValue: TypeAlias = "str | int | float | bool | Sequence[JSONValue] | Mapping[str, JSONValue] | None"


class Severity(Labelled):
    """The one severity order of the tool: error > warning > info. The value is what JSON and the
    metrics' `severity` label hold; the label is the word a person reads."""

    ERROR = "error", N_("error")
    WARNING = "warning", N_("warning")
    INFO = "info", N_("info")

    @property
    def rank(self) -> int:
        return _RANK[self.value]


_RANK = {"info": 1, "warning": 2, "error": 3}
FAIL_ON_LEVELS = ("info", "warning", "error", "never")


def fails(severity: Severity, fail_on: str) -> bool:
    """Whether a finding of this severity makes the run fail under --fail-on."""
    return fail_on != "never" and severity.rank >= _RANK[fail_on]


class Outcome(Labelled):
    """A check's result as a report states it: its state with the findings the report kept (after
    --ignore and the selection) and what it could not judge. The value is label-safe: it is the
    metrics' `state` label (decode_doctor_check_state) and the report's results[].outcome; the label
    is the word every format shows. Each State has the Outcome of its name (State.outcome)."""

    PASSED = "passed", N_("passed")  # judged everything it was given, no finding kept
    FINDINGS = "findings", N_("with findings")  # at least one finding kept
    NOT_JUDGED = "not_judged", N_("not judged")  # no finding kept, and something it was given could not be judged
    ACCEPTED_GAP = "accepted_gap", N_("accepted by rule")  # no finding kept; what it could not judge fully its documented rule accepts
    NOT_SELECTED = "not_selected", N_("not selected")  # ran only for facts a selected check reads; its own verdict is not the run's
    SKIPPED = "skipped", N_("skipped")  # did not apply
    TIMED_OUT = "timed_out", N_("timed out")
    CRASHED = "crashed", N_("crashed")

    @property
    def incomplete(self) -> bool:
        """Whether a check with this outcome makes the run's verdict incomplete: it reached no verdict
        (timed out, crashed) or could not judge something it was given. The one definition: the
        reports, the metrics, merge, the dashboard's regex and the JSON schema's tests read it."""
        return self in (Outcome.NOT_JUDGED, Outcome.TIMED_OUT, Outcome.CRASHED)

    @property
    def ended(self) -> bool:
        """Whether the check ended before a verdict of its own (did not apply, ran out of time, crashed):
        then its state is its outcome, whatever it found, and the text notes it with its reason."""
        return self in (Outcome.SKIPPED, Outcome.TIMED_OUT, Outcome.CRASHED)


class State(Labelled):
    """How a check's run ended, as the report's results[].state holds it. The values are report schema
    v2's ("timed out", with a space, stays); everything else — the word a person reads, whether it
    makes the verdict incomplete, the metrics' label — is the Outcome of the same name's (State.outcome),
    so a state's words and properties are written once, on Outcome."""

    PASSED = "passed"
    FINDINGS = "findings"
    SKIPPED = "skipped"
    TIMED_OUT = "timed out"
    CRASHED = "crashed"

    @property
    def outcome(self) -> Outcome:
        """The Outcome of this state's name: a timed-out check's is timed_out (label-safe)."""
        return Outcome[self.name]

    @property
    def label(self) -> str:
        return self.outcome.label

    @property
    def english(self) -> str:
        return self.outcome.english

    @property
    def incomplete(self) -> bool:
        """Whether ending in this state makes the run's verdict incomplete (Outcome.incomplete)."""
        return self.outcome.incomplete

    @property
    def ended(self) -> bool:
        """Whether the check ended before a verdict of its own (Outcome.ended)."""
        return self.outcome.ended


class Verdict(Labelled):
    """The run's verdict: ready only when every check judged everything it was given and nothing was kept.
    The value is the report's summary.outcome and the metrics' `verdict` label."""

    READY = "ready", N_("ready")
    FINDINGS = "findings", N_("with findings")
    INCOMPLETE = "incomplete", N_("incomplete")

    @property
    def incomplete(self) -> bool:
        """Whether the verdict is incomplete: something went unjudged (the run is not known to be ready)."""
        return self is Verdict.INCOMPLETE

    @property
    def exit_code(self) -> int:
        """The exit code this verdict gives (under a --fail-on other than never; findings: those at or
        above it): 0 ready, 1 findings, 3 incomplete."""
        return {Verdict.READY: 0, Verdict.FINDINGS: 1, Verdict.INCOMPLETE: 3}[self]

    @classmethod
    def of(cls, complete: bool, findings: bool) -> Verdict:
        """The verdict of a run: incomplete unless complete, else findings when any was kept, else ready."""
        if not complete:
            return cls.INCOMPLETE
        return cls.FINDINGS if findings else cls.READY


class Applicability(Labelled):
    """How far a fix may be trusted (ruff's fix safety); declared by the fixer that claims a code."""

    SAFE = "safe", N_("safe")  # applied by --fix after confirmation
    UNSAFE = "unsafe", N_("with --unsafe-fixes")  # applied by --fix --unsafe-fixes only
    DISPLAY_ONLY = "display-only", N_("display-only")  # the tool prints the commands; a person runs them

    @property
    def fixable(self) -> str:
        """One label for a fix wherever it is shown (a finding, list, explain): "fixable", or "fixable:
        unsafe" / "fixable: display-only", in the language of the command."""
        return _("fixable") if self is Applicability.SAFE else _("fixable: {how}", how=self.label)


class FixParams:
    """Base of the typed values a check hands its fixer: a frozen dataclass of plain data per kind of
    action (what to write, where to move a file, which mirror to remove). The check builds it, the
    fixer that claims the code takes it; nothing is parsed back out of a message."""

    def to_dict(self) -> dict[str, JSONValue]:
        return dataclasses.asdict(self) if dataclasses.is_dataclass(self) else {}


@dataclass(frozen=True)
class NoParams(FixParams):
    """The fix needs nothing beyond the finding itself (its path, its code)."""


@dataclass(frozen=True)
class CommandsParams(FixParams):
    """A display-only fix: the commands a person runs (decode-doctor never does), and what they do."""

    description: str
    commands: tuple[str, ...]


P = TypeVar("P", bound=FixParams)
P_co = TypeVar("P_co", bound=FixParams, covariant=True)  # a code or fix of ConvertParams is one of FixParams


@dataclass(frozen=True)
class Code:
    """A stable finding code with its explanation in fixed sections (DCGM/ruff style).

    Codes are module constants in their feature's codes.py; checks emit them by constant
    (self.finding(CODE, ...)), never by a string.
    """

    code: str
    title: str
    severity: Severity
    what: str  # what it means
    why: str  # why it matters for LLM decode
    fix_by_hand: str  # how to fix it by hand
    example: str = ""  # a concrete case: what was seen, what the finding says
    # Rows of the environment table this code speaks about ("memory", "kernel"): a finding with it
    # marks those rows as judged.
    concerns: tuple[str, ...] = ()

    @property
    def declares_fix(self) -> bool:
        return False

    @property
    def fix_text(self) -> str:
        """What the automatic fix does and how safe it is; empty: no automatic fix."""
        return ""

    def __str__(self) -> str:
        return self.code


@dataclass(frozen=True, kw_only=True)
class FixableCode(Code, Generic[P_co]):
    """A code with an automatic fix: the fixer that claims it takes `params` (checked when the
    registry loads), and fix_safety says what the fix does and how safe it is. A finding of this
    code can carry a FixRef[params]; one of a plain Code cannot (the type checker proves it)."""

    params: type[P_co]
    fix_safety: str

    @property
    def declares_fix(self) -> bool:
        return bool(self.fix_safety)

    @property
    def fix_text(self) -> str:
        return self.fix_safety


@dataclass(frozen=True)
class FixRef(Generic[P]):
    """What a finding tells its fixer: a one-line summary and the typed params. Invariant in its params
    (a code is covariant): Check.finding(code, fix=…) then refuses a fix of another code's kind.

    The check sets summary and params; the engine fills in which fixer claims the code and with
    which applicability, so a check can never disagree with its fixer.
    """

    summary: str
    params: P
    fixer: str | None = None
    applicability: Applicability | None = None

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "fixer": self.fixer,
            "summary": self.summary,
            "applicability": self.applicability.value if self.applicability else None,
            "params": self.params.to_dict(),
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
    fix: FixRef[FixParams] | None = None
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


@dataclass(frozen=True)
class NotJudged:
    """Something a check was given, or exists to judge, and could not: no verdict on it, said as such,
    never a pass. cause: the code of the finding that stopped it (a pulled-in check's), if one did."""

    what: str  # "the decode budget of Qwen2-7B", "/data/train/0041.jpg"
    why: str  # "config.json: num_hidden_layers is NaN", "permission denied"
    cause: str | None = None

    def to_dict(self) -> dict[str, JSONValue]:
        return {"what": self.what, "why": self.why, "cause": self.cause}

    def text(self) -> str:
        return _("{what} ({why})", what=self.what, why=self.why)


@dataclass(frozen=True)
class AcceptedGap:
    """What a check judged only in part, by a documented rule that accepts it (a serving node's bandwidth,
    measured under load: a lower bound): said with its reason, named in the metrics, and not a reason for
    an incomplete verdict. gap: a stable, label-safe name of the rule (snake_case)."""

    what: str  # "the memory bandwidth"
    why: str  # "measured under load 2 h ago: 12.3 GB/s is a lower bound…"
    gap: str  # "bandwidth_under_load"

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,62}", self.gap):
            raise ValueError(f"an accepted gap's name is snake_case: {self.gap!r}")  # untranslated: a check author's error

    def to_dict(self) -> dict[str, JSONValue]:
        return {"what": self.what, "why": self.why, "gap": self.gap}

    def text(self) -> str:
        return _("{what} ({why})", what=self.what, why=self.why)


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
    not_judged: list[NotJudged] = field(default_factory=list)  # what it was given and could not judge
    accepted: list[AcceptedGap] = field(default_factory=list)  # judged in part, by a rule that accepts the gap

    @property
    def complete(self) -> bool:
        """Whether the check reached a verdict on everything it was given."""
        return not self.state.incomplete and not self.not_judged
