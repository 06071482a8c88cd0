"""The report: what a run found, before it is rendered (renderers read the redacted view, view.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..engine.facts import Facts
from ..engine.findings import CheckResult, Finding, Severity, State, fails
from ..fixes.journal import ActionOutcome, FixStatus

F = TypeVar("F", bound=Facts)

SCHEMA_VERSION = 2


@dataclass
class Ignored:
    finding: Finding
    selector: str
    reason: str | None = None


@dataclass
class FixSummary:
    """What --fix did in this run: whether it applied anything, the run it journaled, each action's
    outcome, and what the re-check found of the findings it was for."""

    applied: bool = False
    run_id: str | None = None
    outcomes: list[ActionOutcome] = field(default_factory=list)
    resolved: int | None = None  # the re-check's count (None: no re-check ran)
    still_present: int | None = None

    @property
    def all_applied(self) -> bool:
        return all(o.status is FixStatus.APPLIED for o in self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"applied": self.applied, "run_id": self.run_id, "outcomes": [o.to_dict() for o in self.outcomes]}
        if self.resolved is not None:
            data["rechecked"] = {"resolved": self.resolved, "still_present": self.still_present}
        return data


@dataclass
class Report:
    results: list[CheckResult]
    findings: list[Finding]
    ignored: list[Ignored]
    meta: dict[str, Any]
    fail_on: str = "error"
    fixes: FixSummary | None = None
    verdict_exits: bool = True  # the command exits with the verdict's code (check, analyze, bench); report: 0 once written
    incomplete_fails: bool = True  # a crashed or timed-out check, or one that could not judge an input, makes the exit code 3
    load_errors: list[str] = field(default_factory=list)
    # checks that ran only for facts a selected check reads (their findings are listed as not selected)
    pulled_in: frozenset[str] = frozenset()

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)

    def incomplete(self) -> list[CheckResult]:
        """The checks whose verdict is incomplete: they crashed, ran out of time, or could not judge
        something they were given."""
        return [r for r in self.results if not r.complete]

    @property
    def complete(self) -> bool:
        """Every check reached a verdict on everything it was given, and every check, fixer and command
        loaded: what a module that failed to load would have judged was not judged."""
        return not self.incomplete() and not self.load_errors

    @property
    def exit_code(self) -> int:
        """0 clean, 1 findings at or above fail_on, 3 a check reached no verdict, could not judge
        something it was given, or did not load (wins over 1: the verdict is incomplete); --fail-on
        never is always 0."""
        if self.fail_on == "never":
            return 0
        if self.incomplete_fails and not self.complete:
            return 3
        if self.fixes and not self.fixes.all_applied:
            return 1  # a fix that was refused or failed: what it was for is not fixed, whatever the re-check saw
        return 1 if any(fails(f.severity, self.fail_on) for f in self.findings) else 0

    def states(self) -> dict[str, int]:
        counts = {state.value: 0 for state in State}
        for result in self.results:
            counts[result.state.value] += 1
        return counts

    def sorted_findings(self) -> list[Finding]:
        return sorted(self.findings, key=lambda f: (-f.severity.rank, f.check, f.code, f.path or ""))

    def fixable(self) -> list[Finding]:
        return [f for f in self.findings if f.fix is not None]

    def facts(self) -> dict[str, Facts]:
        """Each check's facts, by check name, in the order the checks were given."""
        return {r.check: r.facts for r in self.results if r.facts is not None}

    def fact(self, kind: type[F]) -> F | None:
        """The facts of that type a check published in this run (a feature's contract type)."""
        return next((r.facts for r in self.results if isinstance(r.facts, kind)), None)
