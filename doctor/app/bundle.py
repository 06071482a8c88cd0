"""`report`: run the checks and write a ticket-ready support bundle (or one redacted file), with the
leak self-check before a byte is written and the --redact-hosts mapping kept on this machine."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.registry import Registry
from ..engine.runner import Progress
from ..engine.writes import replace_output
from ..reports.bundle import LeakError, build_bundle, write_bundle
from ..reports.environment import host_rows
from ..reports.formats import BUNDLE, Use, get
from ..reports.redact import Redactor
from ..reports.render import rendered
from ..reports.textsafe import to_bytes
from ..reports.view import judging_codes
from . import service
from .requests import RunRequest

CPUINFO = "import json, cpuinfo; print(json.dumps(cpuinfo.get_cpu_info()))"

__all__ = ["BundleRequest", "BundleResult", "LeakError", "write_report"]


@dataclass(frozen=True)
class BundleRequest:
    run: RunRequest
    output: Path  # a directory (the bundle gets its own name there) or a file path
    state_dir: Path  # where the --redact-hosts mapping is kept
    fmt: str = BUNDLE  # a name of reports.formats.choices(Use.SINGLE)
    redact: bool = True
    redact_hosts: bool = False


@dataclass(frozen=True)
class BundleResult:
    written: Path
    files: int
    findings: int
    unjudged: int  # checks that reached no verdict
    mapping: Path | None  # the --redact-hosts mapping, on this machine only


def _cpu_unnamed() -> bool:
    """Whether /proc/cpuinfo lacks a model name (ARM boards): only then is py-cpuinfo, which samples
    the clock for about a second, worth its subprocess."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            return "model name" not in handle.read(1 << 20)
    except OSError:
        return True


def write_report(request: BundleRequest, registry: Registry | None = None, progress: Progress | None = None) -> BundleResult:
    """Runs the checks and writes the bundle (or one file); raises LeakError, and writes nothing, when a
    secret would remain after redaction; UnknownFormat, before any check runs, for a format `report`
    does not write."""
    fmt = get(request.fmt, Use.SINGLE)
    # this machine's CPU describes the judged host only on it (or --same-host): another host's files say theirs
    this_machine = request.run.same_host or request.run.root.resolve() == Path("/")
    # py-cpuinfo samples the clock for about a second: let it run in its own process beside the checks
    cpu_probe = (
        subprocess.Popen([sys.executable, "-c", CPUINFO], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if this_machine and _cpu_unnamed()
        else None
    )
    outcome = service.run(request.run, registry, progress=progress)
    cpu: dict[str, Any] = {"count": os.cpu_count(), "arch": platform.machine()} if this_machine else {}
    if cpu_probe is not None:
        try:
            cpu = json.loads(cpu_probe.communicate(timeout=10)[0] or "{}")
        except (subprocess.TimeoutExpired, ValueError):
            cpu_probe.kill()
    redactor = Redactor(enabled=request.redact, hosts=request.redact_hosts)
    codes = judging_codes(outcome.registry.codes(), outcome.report)
    bundle, view = build_bundle(outcome.report, outcome.ctx, host_rows(outcome.ctx, cpu), redactor, codes)
    if fmt.name != BUNDLE:  # one file: the format's bundle member, or its report from the bundle's view, redacted alike
        if fmt.member is not None:
            bundle.files = {fmt.file_name: bundle.files[fmt.file_name]}
        else:
            bundle.files = {fmt.file_name: to_bytes(redactor.text(rendered(view, fmt.name)))}
        bundle.name = f"{bundle.name}-{fmt.file_name}"
    output = request.output
    if fmt.name == BUNDLE:
        written = write_bundle(bundle, redactor, output)
    else:
        problems = redactor.leaks(bundle.files)
        if problems:
            raise LeakError(problems)
        written = output / bundle.name if output.is_dir() and not output.is_symlink() else output
        replace_output(written, next(iter(bundle.files.values())))  # never through a link, FIFO or device
    mapping = None
    if request.redact_hosts and redactor.local_mapping():
        mapping = request.state_dir / "redaction" / f"{bundle.name}.json"
        mapping.parent.mkdir(parents=True, exist_ok=True)
        replace_output(mapping, json.dumps(redactor.local_mapping(), indent=2).encode(), mode=0o600)
    report = outcome.report
    return BundleResult(written, len(bundle.files), len(report.findings), len(report.incomplete()), mapping)
