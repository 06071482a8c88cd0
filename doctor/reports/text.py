"""The report as text: a rich table on a terminal, plain lines when piped; one all-clear line when
nothing was found (Homebrew's "Your system is ready to brew")."""

from __future__ import annotations

import shlex
from typing import TextIO

from ..engine.findings import Finding, Outcome, Severity, State, Verdict
from ..i18n import _, chinese, localized, ngettext, pgettext, typography
from ..i18n.width import ljust
from .view import ReportView

SHOWN_NOT_JUDGED = 10
# how a terminal shows each severity (a style, not a word: the word is Severity.label); tests/test_states.py: each has one
SEVERITY_STYLES = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def shown_check(name: str) -> str:
    """A check's name as a person reads it: "serving (server.log)" takes full-width parentheses in
    Chinese (the name itself, in JSON and metrics, stays as it is)."""
    if chinese() and name.endswith(")") and " (" in name:
        base, _space, source = name[:-1].partition(" (")
        return f"{base}（{source}）"
    return name


def state_word(value: str) -> str:
    """The word of a state, outcome or verdict held as its stored value (the agent's summary): the
    member's own label (State, Outcome and Verdict of one value share it). An unknown value is an
    error, never shown raw; code that holds the member reads its .label."""
    for kind in (State, Outcome, Verdict):
        member = kind.parse(value)
        if member is not None:
            return member.label
    raise ValueError(f"not a state, an outcome or a verdict: {value!r}")  # untranslated: a programming error


def summary_line(view: ReportView) -> str:
    parts = [
        _("{count} error(s)", count=view.count(Severity.ERROR)),
        _("{count} warning(s)", count=view.count(Severity.WARNING)),
        _("{count} info", count=view.count(Severity.INFO)),
    ]
    if view.ignored:
        parts.append(_("{count} ignored", count=len(view.ignored)))
    # outcomes, not states: a check that passed on what it judged but could not judge the rest is "not judged"
    checks = _(", ").join(_("{count} {state}", count=n, state=Outcome(outcome).label) for outcome, n in view.outcomes().items() if n)
    line = _("{counts} — checks: {checks}", counts=pgettext("between the counts of a summary", "; ").join(parts), checks=checks)
    unjudged = sum(1 for r in view.results if r.state.incomplete)
    if unjudged:
        line += ngettext(
            " — the verdict is incomplete: {count:,} check reached none",
            " — the verdict is incomplete: {count:,} checks reached none",
            unjudged,
        )
    if view.unjudged() or view.load_errors:
        line += _(" — not judged: {what}", what=not_judged_text(view))
    return line


def not_judged_text(view: ReportView, shown: int = 3) -> str:
    """What was not judged, the first few named: "images: /d/a.jpg (permission denied); and 4 more";
    first, what the modules that did not load would have judged (each is named below the summary)."""
    items = view.unjudged()
    named = [_("{check}: {what}", check=shown_check(check), what=item.text()) for check, item in items[:shown]]
    if view.load_errors:
        unloaded = ngettext(
            "what {count:,} module that did not load would judge (named below)",
            "what {count:,} modules that did not load would judge (named below)",
            len(view.load_errors),
        )
        named.insert(0, unloaded)
    return _("; ").join(named) + (_("; and {count:,} more", count=len(items) - shown) if len(items) > shown else "")


# What a hint leaves out of the user's command line: the flags it replaces, and the output flags with
# their values (a hint prints to the terminal).
HINT_DROPS = {"--fix", "--dry-run", "--yes", "-y"}
HINT_DROPS_WITH_VALUE = {"-o", "--output", "--format"}


def rerun_hint(argv: list[str], *flags: str) -> str:
    """The user's own `check` command line with these flags, for a hint (their --model and --select stay)."""
    if not argv or argv[0] != "check":
        return shlex.join(["decode-doctor", "check", *flags])
    kept: list[str] = []
    skip = False
    for arg in argv[1:]:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in HINT_DROPS_WITH_VALUE:
            skip = "=" not in arg
            continue
        if name in HINT_DROPS:
            continue
        kept.append(arg)
    return shlex.join(["decode-doctor", "check", *kept, *flags])


def all_clear(view: ReportView) -> str | None:
    """The one line a healthy run prints, or None when there is something to report. "Ready" only when
    every check judged everything it was given; otherwise what was not judged is named."""
    if view.findings or any(r.state.incomplete for r in view.results):
        return None
    skipped = sum(1 for r in view.results if r.state is State.SKIPPED)
    ran = len(view.results) - skipped
    # what else the parenthesis says: the checks that did not apply and the codes ignored, each only when there are any
    others = "".join(
        (
            _(", {count:,} did not apply", count=skipped) if skipped else "",
            _(", {count} ignored", count=len(view.ignored)) if view.ignored else "",
        )
    )
    if view.unjudged() or view.load_errors:
        return ngettext(
            "No problems in what was judged ({count:,} check ran{ignored}); not judged: {what}.",
            "No problems in what was judged ({count:,} checks ran{ignored}); not judged: {what}.",
            ran, ignored=others, what=not_judged_text(view),
        )  # fmt: skip
    ready = ngettext(
        "Ready: no problems found ({count:,} check ran{others}).",
        "Ready: no problems found ({count:,} checks ran{others}).",
        ran, others=others,
    )  # fmt: skip
    if view.accepted_gaps():  # each with its reason on its own line (notes), or in its own section
        named = _("; ").join(_("{check}: {what}", check=shown_check(check), what=item.what) for check, item in view.accepted_gaps())
        ready += " " + _("Accepted by rule: {what}.", what=named)
    return ready


def result_notes(view: ReportView, verbose: bool) -> list[str]:
    """Checks that timed out or crashed, and what each could not judge, always; those that did not
    apply, with --verbose."""
    lines = []
    for result in view.results:
        if result.state.ended and (verbose or result.state is not State.SKIPPED):
            lines.append(
                _(
                    "{check}: {state} — {reason}",
                    check=shown_check(result.check),
                    state=result.state.label,
                    reason=result.reason,
                )
            )
            if result.error:
                lines.extend("    " + line for line in result.error.rstrip().splitlines())
        lines.extend(_("{check}: accepted — {what}", check=shown_check(result.check), what=item.text()) for item in result.accepted)
        shown = result.not_judged if verbose else result.not_judged[:SHOWN_NOT_JUDGED]
        lines.extend(_("{check}: not judged — {what}", check=shown_check(result.check), what=item.text()) for item in shown)
        if len(result.not_judged) > len(shown):
            more = len(result.not_judged) - len(shown)
            lines.append(_("{check}: not judged — and {count:,} more (--verbose lists them)", check=shown_check(result.check), count=more))
    return lines


def fact_lines(view: ReportView, verbose: bool) -> list[str]:
    return [
        _("{check}: {fact}", check=shown_check(line.check), fact=line.text) for line in view.fact_lines if verbose or line.shown_by_default
    ]


def footer(view: ReportView) -> list[str]:
    lines = []
    fixable = view.fixable()
    if fixable:
        argv = list(view.meta.get("argv") or [])
        preview, apply = rerun_hint(argv, "--fix", "--dry-run"), rerun_hint(argv, "--fix")
        lines.append(
            _("{count} fixable: preview with `{preview}`, apply with `{apply}`.", count=len(fixable), preview=preview, apply=apply)
        )
    if view.findings:
        lines.append(_("Details: decode-doctor explain {code}", code=view.findings[0].code))
    lines.extend(_("could not load: {error}", error=localized(error)) for error in view.load_errors)
    return lines


def fix_label(finding: Finding) -> str:
    if finding.fix is None:
        return ""
    return finding.fix.applicability.fixable if finding.fix.applicability else _("fixable")


def _finding_line(f: Finding) -> str:
    label = fix_label(f)
    message = _("{message} [{label}]", message=f.message, label=label) if label else f.message
    return f"{f.code:<9} {ljust(f.severity.label, 8)} {ljust(shown_check(f.check), 14)} {message}"


def _ignored_lines(view: ReportView) -> list[str]:
    return [
        (_("ignored {code} (not selected)", code=i.code) if i.selector == NOT_SELECTED else _("ignored {code}", code=i.code))
        + (_(" by {selector}", selector=i.selector) if i.selector not in (i.code, NOT_SELECTED) else "")
        + (f" ({i.reason})" if i.reason else "")
        for i in view.ignored
    ]


NOT_SELECTED = "not selected"  # engine.config's selector for a finding of a check pulled in for its facts


def plain_text(view: ReportView, verbose: bool = False) -> str:
    lines = [_finding_line(f) for f in view.findings]
    lines.extend(fact_lines(view, verbose))
    lines.extend(result_notes(view, verbose))
    lines.extend(_ignored_lines(view))
    clear = all_clear(view)
    lines.append(clear or summary_line(view))
    lines.extend(footer(view))
    return typography.normalize("\n".join(lines) + "\n")


def rich_text(view: ReportView, stream: TextIO, verbose: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=typography.stream(stream), highlight=False)
    styles = SEVERITY_STYLES
    if view.findings:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        for column in (_("Code"), _("Severity"), _("Check"), _("Finding"), _("Fix")):
            table.add_column(column, overflow="fold")
        for f in view.findings:
            table.add_row(f.code, f"[{styles[f.severity]}]{f.severity.label}[/]", f.check, f.message, fix_label(f))
        console.print(table)
    for line in fact_lines(view, verbose):
        console.print(line, markup=False)
    for line in result_notes(view, verbose):
        console.print(line, markup=False)
    for line in _ignored_lines(view):
        console.print(line, markup=False, style="dim")
    clear = all_clear(view)
    if clear:
        console.print(clear, markup=False, style="bold green" if view.complete else "bold yellow")
    else:
        console.print(summary_line(view), markup=False, style="bold")
    for line in footer(view):
        console.print(line, markup=False)
