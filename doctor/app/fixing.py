"""The --fix dialogue: plan, preview, check privileges, confirm, apply, re-check.

It speaks through an injected Dialogue, so it runs the same in the CLI and in a test.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..engine.findings import Applicability, Finding
from ..engine.paths import default_state_dir
from ..fixes.actions import FixPlan
from ..fixes.journal import FixStatus, LockBusy, apply_plans, note
from ..i18n import _, localized, reason
from ..reports.report import FixSummary
from .requests import Dialogue, FixRequest
from .service import Outcome, recheck


@dataclass
class Plans:
    to_apply: list[FixPlan] = field(default_factory=list)
    to_show: list[FixPlan] = field(default_factory=list)  # display-only: commands for a person


def plan_fixes(outcome: Outcome, findings: list[Finding], unsafe: bool, dialogue: Dialogue) -> Plans:
    """Plans for the findings. A fixer that cannot plan is said, not raised: the others go on."""
    plans = Plans()
    for finding in findings:
        assert finding.fix is not None and finding.fix.fixer is not None
        fixer_cls = outcome.registry.fixers[finding.fix.fixer]
        applicability = finding.fix.applicability
        if applicability is Applicability.UNSAFE and not unsafe:
            dialogue.say(
                _(
                    "{code}: the fix is marked unsafe ({summary}); pass --unsafe-fixes to apply it",
                    code=finding.code,
                    summary=finding.fix.summary,
                )
            )
            continue
        try:
            plan = fixer_cls().plan(finding, outcome.ctx)
        except Exception as exc:
            dialogue.say(
                _("{code}: could not plan the fix: {error}", code=finding.code, error=type(exc).__name__ + ": " + localized(reason(exc)))
            )
            continue
        if not plan.actions:
            dialogue.say(_("{code}: nothing left to change", code=finding.code))
            continue
        (plans.to_show if applicability is Applicability.DISPLAY_ONLY else plans.to_apply).append(plan)
    return plans


def _shell(plans: list[FixPlan], dialogue: Dialogue) -> None:
    for plan in plans:
        for action in plan.actions:
            dialogue.say("    " + action.shell().replace("\n", "\n    "))


def fix(outcome: Outcome, request: FixRequest, dialogue: Dialogue) -> Outcome:
    """Previews and (unless dry_run) applies the fixes for the outcome's findings; returns the outcome
    after the re-check, with report.fixes saying what happened."""
    summary = FixSummary()
    outcome.report.fixes = summary
    findings = outcome.report.fixable()
    if not findings:
        dialogue.say(_("Nothing to fix."))
        return outcome
    plans = plan_fixes(outcome, findings, request.unsafe, dialogue)
    for plan in plans.to_show:
        dialogue.say(_("{code} cannot be applied by decode-doctor; run these commands yourself:", code=plan.finding.code))
        _shell([plan], dialogue)
    if not plans.to_apply:
        return outcome
    dialogue.say(_("Planned fixes ({count}):", count=len(plans.to_apply)))
    for plan in plans.to_apply:
        dialogue.say(plan.preview())
    if request.dry_run:
        dialogue.say(_("Dry run: nothing was changed."))
        return outcome
    if not all(action.permitted() for plan in plans.to_apply for action in plan.actions):
        dialogue.say(_("This process cannot write the targets (it needs root, or the filesystem is read-only); nothing was changed."))
        dialogue.say(_("Run them as root (sudo decode-doctor check --fix), or run these commands yourself:"))
        _shell(plans.to_apply, dialogue)
        return outcome
    if not request.yes:
        if not dialogue.interactive:
            dialogue.say(_("Not applying: confirming needs a terminal. Pass --yes to apply, or --dry-run to only preview."))
            return outcome
        if not dialogue.confirm(_("Apply {count} fix(es)?", count=len(plans.to_apply))):
            dialogue.say(_("Nothing was changed."))
            return outcome
    meta = {"argv": list(outcome.request.argv), "root": str(outcome.ctx.root)}
    try:
        result = apply_plans(plans.to_apply, request.state_dir, meta, on_step=request.on_step)
    except LockBusy as exc:
        dialogue.say(_("Not applying: {why}. Try again when it has finished.", why=localized(reason(exc))))
        return outcome
    for item in result.outcomes:
        dialogue.say(_("{code}: {target}: {status}", code=item.code, target=item.shown, status=localized(item.said)))
    undo_hint = f"decode-doctor undo {result.run_id}"
    if request.state_dir != default_state_dir():
        undo_hint += f" --state-dir {request.state_dir}"
    dialogue.say(_("Fix run {run} recorded in {folder}. Undo with: {hint}", run=result.run_id, folder=result.run_dir, hint=undo_hint))
    summary.applied, summary.run_id, summary.outcomes = True, result.run_id, result.outcomes
    scope = {Path(plan.finding.path) for plan in plans.to_apply if plan.finding.path}
    scope |= {path for plan in plans.to_apply for action in plan.actions for path in action.touched()}
    checked = recheck(outcome, {plan.finding.check for plan in plans.to_apply}, scope)
    note(result.run_dir, {"type": "recheck", "scope": len(scope), "paths": sorted(map(str, scope))[:100], "judged": checked.judged})
    after = checked.outcome
    refused = {(o.code, o.shown): o.said for o in result.outcomes if o.status is not FixStatus.APPLIED}
    _say_rechecked(plans.to_apply, {(f.code, f.path) for r in after.report.results for f in r.findings}, dialogue, summary, refused)
    return after


SHOWN_FAILURES = 20


def _say_rechecked(
    applied: list[FixPlan],
    still: set[tuple[str, str | None]],
    dialogue: Dialogue,
    summary: FixSummary,
    refused: dict[tuple[str, str], str],
) -> None:
    """What the re-check says: resolved codes counted, each fix that did not take effect named (failed).
    A fix that was refused or failed is never "resolved", even when the re-check no longer sees its
    finding (its directory became a link the check does not follow)."""
    resolved: Counter[str] = Counter()

    def not_applied(plan: FixPlan) -> str | None:
        shown = {getattr(action, "shown", str(action.path)) for action in plan.actions}
        return next((refused[(plan.finding.code, s)] for s in shown if (plan.finding.code, s) in refused), None)

    failed = [plan.finding for plan in applied if (plan.finding.code, plan.finding.path) in still or not_applied(plan)]
    for plan in applied:
        if (plan.finding.code, plan.finding.path) not in still and not not_applied(plan):
            resolved[plan.finding.code] += 1
    dialogue.say(_("After the fix:"))
    for code, count in sorted(resolved.items()):
        dialogue.say(
            "    " + (_("{code}: resolved ({count:,} findings)", code=code, count=count) if count > 1 else _("{code}: resolved", code=code))
        )
    why = {id(plan.finding): not_applied(plan) for plan in applied}
    for finding in failed[:SHOWN_FAILURES]:
        where = f" ({finding.path})" if finding.path else ""
        reason = why.get(id(finding))
        said = _("not applied ({reason})", reason=reason) if reason else _("still present after the fix")
        dialogue.say("    " + _("{code}: FAILED: {said}{where}", code=finding.code, said=said, where=where))
    if len(failed) > SHOWN_FAILURES:
        dialogue.say("    " + _("… and {count:,} more still present", count=len(failed) - SHOWN_FAILURES))
    summary.resolved, summary.still_present = sum(resolved.values()), len(failed)
