"""The report: what a run found, in one versioned structure (see schema/report-v1.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .model import CheckResult, Finding, Severity, State

SCHEMA_VERSION = 1
SEVERITY_ORDER = (Severity.ERROR, Severity.WARNING, Severity.INFO)
COMMAND_OUTPUT_LIMIT = 8000
FAIL_ON_RANK = {"info": 1, "warning": 2, "error": 3, "never": 99}


@dataclass
class Ignored:
    finding: Finding
    selector: str
    reason: str | None = None


@dataclass
class Report:
    results: list[CheckResult]
    findings: list[Finding]
    ignored: list[Ignored]
    meta: dict[str, Any]
    fail_on: str = "error"
    fixes: dict[str, Any] | None = None
    load_errors: list[str] = field(default_factory=list)

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)

    @property
    def exit_code(self) -> int:
        threshold = FAIL_ON_RANK[self.fail_on]
        return 1 if any(f.severity.rank >= threshold for f in self.findings) else 0

    def states(self) -> dict[str, int]:
        counts = {state.value: 0 for state in State}
        for result in self.results:
            counts[result.state.value] += 1
        return counts

    def sorted_findings(self) -> list[Finding]:
        return sorted(self.findings, key=lambda f: (-f.severity.rank, f.check, f.code, f.path or ""))

    def fixable(self) -> list[Finding]:
        return [f for f in self.findings if f.fix is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "decode-doctor", "version": self.meta.get("version", "")},
            "run": {k: v for k, v in self.meta.items() if k != "version"},
            "summary": {
                "errors": self.count(Severity.ERROR),
                "warnings": self.count(Severity.WARNING),
                "infos": self.count(Severity.INFO),
                "ignored": len(self.ignored),
                "fixable": len(self.fixable()),
                "checks": self.states(),
                "fail_on": self.fail_on,
                "exit_code": self.exit_code,
            },
            "findings": [f.to_dict() for f in self.sorted_findings()],
            "ignored": [
                {"code": i.finding.code, "check": i.finding.check, "selector": i.selector, "reason": i.reason, "message": i.finding.message}
                for i in self.ignored
            ],
            "results": [
                {**r.to_dict(), "commands": [c.to_dict(limit=COMMAND_OUTPUT_LIMIT) for c in r.commands], "files": list(r.files)} for r in self.results
            ],
            "load_errors": list(self.load_errors),
            "fixes": self.fixes,
        }
