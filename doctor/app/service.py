"""Running checks for a request and turning their results into a Report."""

from __future__ import annotations

import datetime as dt
import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .. import __version__, i18n
from ..engine.check import Check
from ..engine.commands import CommandRunner
from ..engine.config import check_selected, ignored_by
from ..engine.context import Context
from ..engine.facts import Board
from ..engine.files import open_regular
from ..engine.findings import CheckResult, State
from ..engine.options import OptionValues
from ..engine.registry import Registry, load
from ..engine.runner import Progress, run_checks
from ..i18n import said
from ..reports.report import Ignored, Report
from .requests import RequestError, RunRequest


@dataclass
class Outcome:
    request: RunRequest
    report: Report
    ctx: Context
    registry: Registry


HOSTNAME_LIMIT = 256


def host_name(request: RunRequest) -> str:
    """The judged host's name, never a path (it labels metrics and a fleet's rows): as given
    (--host-name: a Kubernetes node's name from the Downward API), else /etc/hostname under --root,
    else this machine's own on the live host; a captured tree without one is its folder's name, and
    a mounted host without one "unknown" (a container's own name is a pod's, not the node's)."""
    if request.host_name:
        return request.host_name
    root = request.root
    if root.resolve() == Path("/"):
        return socket.gethostname()
    try:
        with open_regular(root / "etc/hostname") as handle:
            lines = handle.read(HOSTNAME_LIMIT).decode("utf-8", errors="replace").split()
    except (OSError, ValueError):
        lines = []
    if lines and lines[0].isprintable():
        return lines[0]
    return "unknown" if request.same_host else (root.name or "unknown")


@dataclass(frozen=True)
class Selectors:
    """Selectors sorted out: the ones that name a check, code or prefix; codes retired (→ where their
    data went: a warning, never an error); and ones that match nothing."""

    known: tuple[str, ...]
    retired: dict[str, str]
    unknown: tuple[str, ...]


def _matching(registry: Registry, selector: str) -> list[str]:
    """The checks a selector names, found in the registry's index and then imported: one whose module
    does not import is not loaded, and matches nothing, as when every check is imported up front."""
    named = [info.name for info in registry.catalog() if check_selected([selector], info.name, info.codes)]
    return [name for name in named if name in registry.checks]


def sort_selectors(registry: Registry, selectors: Iterable[str]) -> Selectors:
    retired = {code: why for info in registry.catalog() for code, why in info.retired.items()}
    known, gone, unknown = [], {}, []
    for selector in selectors:
        if _matching(registry, selector):
            known.append(selector)
        elif selector.upper() in retired:
            gone[selector] = retired[selector.upper()]
        else:
            unknown.append(selector)
    return Selectors(tuple(known), gone, tuple(unknown))


def select_checks(registry: Registry, selectors: Iterable[str]) -> list[type[Check]]:
    """The checks the selectors name (only those are imported); every check without a selector."""
    chosen = list(selectors)
    if not chosen:
        return list(registry.checks.values())
    matched = {selector: _matching(registry, selector) for selector in chosen}
    unknown = [selector for selector, names in matched.items() if not names]
    if unknown:
        raise RequestError(
            said("{names} matches no check or code; see `decode-doctor list`", names=", ".join(f'"{name}"' for name in unknown))
        )
    wanted = {name for names in matched.values() for name in names}
    return _in_order(registry, wanted)


def _in_order(registry: Registry, wanted: set[str]) -> list[type[Check]]:
    """The wanted checks (loaded) in the registry's order."""
    return [registry.checks[name] for name in registry.names() if name in wanted and name in registry.checks]


def with_requirements(registry: Registry, classes: list[type[Check]], request: RunRequest) -> list[type[Check]]:
    """The selected checks and, transitively, the checks whose facts they read (Needs.reads), unless
    an option stands in for those facts or the input that needs them is not given. Those run first;
    their own findings are listed as not selected."""
    inputs = {"models": request.models, "images": request.images}
    wanted = {cls.name for cls in classes}
    pending = list(classes)
    while pending:
        for reads in pending.pop().needs.reads:
            publisher = registry.publisher(reads.facts)
            if publisher is None or publisher.name in wanted or not reads.pulls_in(OptionValues(request.options), inputs):
                continue
            wanted.add(publisher.name)
            pending.append(publisher)
    return _in_order(registry, wanted)


def with_dependencies(registry: Registry, names: Iterable[str]) -> list[type[Check]]:
    """The named checks and, transitively, every check whose facts they read (for a re-check, which
    must see the facts the first run saw)."""
    wanted = set(names)
    pending = list(wanted)
    while pending:
        cls = registry.checks.get(pending.pop())
        for reads in cls.needs.reads if cls else ():
            publisher = registry.publisher(reads.facts)
            if publisher is not None and publisher.name not in wanted:
                wanted.add(publisher.name)
                pending.append(publisher.name)
    return _in_order(registry, wanted)


def context_for(request: RunRequest) -> Context:
    env = dict(os.environ if request.env is None else request.env)
    return Context(
        root=request.root,
        same_host=request.same_host,
        runner=CommandRunner(env=env),
        env=env,
        models=request.models,
        images=request.images,
        options=OptionValues(request.options),
        supplied=Board(request.supplied),
    )


def _selected(registry: Registry, select: list[str], check: str) -> bool:
    cls = registry.checks.get(check)
    return cls is None or check_selected(select, check, (code.code for code in cls.codes))


def build_report(request: RunRequest, registry: Registry, results: list[CheckResult], meta: dict[str, Any]) -> Report:
    kept, ignored = [], []
    select, ignore = list(request.select), list(request.ignore)
    results = [replace(r, findings=[registry.resolve(f) for f in r.findings]) for r in results]
    # a check only pulled in for what a selected one reads: its coverage is not the verdict's (what it could
    # not judge that stops a selected check, the selected check says, naming the finding)
    results = [r if _selected(registry, select, r.check) else replace(r, not_judged=[], accepted=[]) for r in results]
    for result in results:
        for finding in result.findings:
            selector = ignored_by(finding, ignore, select)
            if selector is None:
                kept.append(finding)
            else:
                ignored.append(Ignored(finding, selector, request.reasons.get(selector)))
    pulled_in = frozenset(r.check for r in results if not _selected(registry, select, r.check))
    report = Report(
        results,
        kept,
        ignored,
        meta,
        request.fail_on,
        load_errors=list(registry.errors),
        pulled_in=pulled_in,
        verdict_exits=request.verdict_exits,
    )
    report.incomplete_fails = request.incomplete_fails
    return report


def run_meta(started: float, host: str, root: str, argv: Iterable[str]) -> dict[str, Any]:
    """The report's run section (what every command that makes a report says of its run)."""
    return {
        "started": dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat(timespec="seconds"),
        "duration_s": round(max(0.0, time.time() - started), 3),
        "root": root,
        "host": host,
        "argv": list(argv),
        "version": __version__,
        "lang": i18n.current(),  # the language of the messages (codes, keys and values stay as they are)
    }


def run(request: RunRequest, registry: Registry | None = None, progress: Progress | None = None) -> Outcome:
    """Runs the checks the request selects; the Report says what they found."""
    registry = registry or load()
    publishers = [registry.publisher(kind) for kind in request.select_facts]
    if None in publishers:
        missing = [kind.__name__ for kind, cls in zip(request.select_facts, publishers, strict=True) if cls is None]
        raise RequestError(said("no check publishes {facts}", facts=", ".join(missing)))
    classes = select_checks(registry, request.select) if request.select or not publishers else []
    classes += [cls for cls in publishers if cls is not None and cls not in classes]
    if not classes:
        raise RequestError(said("no check is selected; see `decode-doctor list`"))
    classes = with_requirements(registry, classes, request)
    registry = registry.subset(classes)  # the checks of this run, and those whose facts they read: no other is imported
    started = time.time()
    ctx = context_for(request)
    results = run_checks(classes, ctx, timeout_s=request.timeout, progress=progress)
    meta = run_meta(started, host_name(request), str(request.root), request.argv)
    return Outcome(request, build_report(request, registry, results, meta), ctx, registry)


@dataclass
class Recheck:
    outcome: Outcome  # the report after the fix
    judged: dict[str, list[str]]  # check → what it judged again (its facts' summary), for the journal


def recheck(outcome: Outcome, checks: Iterable[str], scope: Iterable[Path] = ()) -> Recheck:
    """Runs the named checks again (and the ones they read facts from) and rebuilds the report.

    With a scope (the paths a fix touched), a scoped check judges only those paths: its findings about
    them are replaced, the rest stand from the first run, and so do its facts."""
    classes = with_dependencies(outcome.registry, checks)
    ctx = context_for(outcome.request)
    paths = frozenset(Path(p) for p in scope)
    ctx.scope = paths or None
    fresh = {r.check: r for r in run_checks(classes, ctx, timeout_s=outcome.request.timeout)}
    results, judged = [], {}
    for before in outcome.report.results:
        after = fresh.get(before.check)
        if after is None:
            results.append(before)
            continue
        judged[before.check] = after.facts.summary() if after.facts is not None else [after.state.value]
        cls = outcome.registry.checks.get(before.check)
        if paths and cls is not None and cls.scoped and not after.state.ended:
            kept = [f for f in before.findings if f.path is None or Path(f.path) not in paths]
            rejudged = [f for f in after.findings if f.path is not None and Path(f.path) in paths]
            merged = kept + rejudged
            after = replace(before, findings=merged, state=State.FINDINGS if merged else State.PASSED, commands=after.commands)
        results.append(after)
    report = build_report(outcome.request, outcome.registry, results, outcome.report.meta)
    report.fixes = outcome.report.fixes
    return Recheck(Outcome(outcome.request, report, ctx, outcome.registry), judged)
