"""The --fix dialogue: plan, preview, check privileges, confirm, apply, re-check."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import click

from . import registry
from .context import Context
from .engine import run_checks
from .fix import Plan
from .journal import LockBusy, apply_plans, default_state_dir
from .model import Applicability, CheckResult, Finding
from .report import Report


@dataclass
class FixRequest:
    enabled: bool = False
    dry_run: bool = False
    yes: bool = False
    unsafe: bool = False
    state_dir: Path = field(default_factory=default_state_dir)


@dataclass
class FixOutcome:
    summary: dict[str, Any]
    rechecked: list[CheckResult] = field(default_factory=list)


def plan_fixes(findings: list[Finding], ctx: Context, unsafe: bool, say: Any) -> tuple[list[Plan], list[Plan]]:
    """Plans for the findings: (to apply, to display only). Problems are said, not raised."""
    to_apply, to_show = [], []
    for finding in findings:
        ref = finding.fix
        assert ref is not None
        fixer_cls = registry.fixer_for(ref.fixer)
        if fixer_cls is None:
            say(f"{finding.code}: no fixer named {ref.fixer!r} is installed; skipped")
            continue
        if ref.applicability is Applicability.UNSAFE and not unsafe:
            say(f"{finding.code}: the fix is marked unsafe ({ref.summary}); pass --unsafe-fixes to apply it")
            continue
        try:
            plan = fixer_cls().plan(finding, ctx)
        except Exception as exc:  # a fixer that cannot plan must not stop the others
            say(f"{finding.code}: could not plan the fix: {type(exc).__name__}: {exc}")
            continue
        if not plan.actions:
            say(f"{finding.code}: nothing left to change")
            continue
        (to_show if ref.applicability is Applicability.DISPLAY_ONLY else to_apply).append(plan)
    return to_apply, to_show


def run_fixes(report: Report, ctx: Context, request: FixRequest, out: TextIO, tty: bool) -> FixOutcome:
    def say(text: str = "") -> None:
        click.echo(text, file=out)

    summary: dict[str, Any] = {"applied": False, "run_id": None, "outcomes": []}
    findings = report.fixable()
    if not findings:
        say("Nothing to fix.")
        return FixOutcome(summary)
    plans, shown = plan_fixes(findings, ctx, request.unsafe, say)
    for plan in shown:
        say(f"{plan.finding.code} cannot be applied by decode-doctor; run these commands yourself:")
        for action in plan.actions:
            say("    " + action.shell().replace("\n", "\n    "))
    if not plans:
        return FixOutcome(summary)
    say(f"Planned fixes ({len(plans)}):")
    for plan in plans:
        say(plan.preview())
    if request.dry_run:
        say("Dry run: nothing was changed.")
        return FixOutcome(summary)
    blocked = [action for plan in plans for action in plan.actions if not action.permitted()]
    if blocked:
        say("This process cannot write the targets (it needs root, or the filesystem is read-only); nothing was changed.")
        say("Run them as root (sudo decode-doctor check --fix), or run these commands yourself:")
        for plan in plans:
            for action in plan.actions:
                say("    " + action.shell().replace("\n", "\n    "))
        return FixOutcome(summary)
    if not request.yes:
        if not tty:
            say("Not applying: confirming needs a terminal. Pass --yes to apply, or --dry-run to only preview.")
            return FixOutcome(summary)
        if not click.confirm(f"Apply {len(plans)} fix(es)?", default=False):
            say("Nothing was changed.")
            return FixOutcome(summary)
    meta = {"argv": sys.argv[1:], "root": str(ctx.root)}
    try:
        result = apply_plans(plans, request.state_dir, meta)
    except LockBusy as exc:
        say(f"Not applying: {exc}. Try again when it has finished.")
        return FixOutcome(summary)
    for outcome in result.outcomes:
        say(f"{outcome.code}: {outcome.shown}: {outcome.status}")
    undo_hint = f"decode-doctor undo {result.run_id}"
    if request.state_dir != default_state_dir():
        undo_hint += f" --state-dir {request.state_dir}"
    say(f"Fix run {result.run_id} recorded in {result.run_dir}. Undo with: {undo_hint}")
    summary = {
        "applied": True,
        "run_id": result.run_id,
        "outcomes": [{"code": o.code, "target": o.shown, "status": o.status} for o in result.outcomes],
    }
    # re-run the fixed checks and what they read facts from, so nothing stale is judged again
    loaded = registry.checks().items
    fixed_checks = {plan.finding.check for plan in plans}
    pending = list(fixed_checks)
    while pending:
        for dependency in loaded[pending.pop()].needs.after:
            if dependency in loaded and dependency not in fixed_checks:
                fixed_checks.add(dependency)
                pending.append(dependency)
    classes = [cls for name, cls in loaded.items() if name in fixed_checks]
    rechecked = run_checks(classes, ctx)
    still = {(f.code, f.path) for r in rechecked for f in r.findings}
    say("After the fix:")
    for plan in plans:
        key = (plan.finding.code, plan.finding.path)
        say(f"    {plan.finding.code}: {'still present' if key in still else 'resolved'}")
    return FixOutcome(summary, rechecked)
