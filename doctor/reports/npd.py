"""node-problem-detector's custom plugin contract: one line of at most 80 bytes on stdout and an exit
code NPD reads as the condition's status (0 ok, 1 problem, 2 unknown).

A problem is what a node condition should say about the node: an error finding, or a GPU that needs
a reset or an RMA (whatever its findings' severity). A run that saw no problem but left something
unjudged is unknown, never ok: NPD then keeps the condition Unknown rather than clearing it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..engine.findings import Severity
from ..i18n import _
from .view import ReportView

MAX_BYTES = 80  # NPD's max_output_length: it cuts longer output mid-character
HEALTH_STATE = "decode_doctor_gpu_health_state"
ELLIPSIS = "…"


class Status(enum.IntEnum):
    OK = 0
    PROBLEM = 1
    UNKNOWN = 2


@dataclass(frozen=True)
class PluginResult:
    status: Status
    message: str


def _gpus_in(view: ReportView, state: str) -> list[str]:
    """The indexes of the GPUs whose health state is `state`, from the metrics the run declared."""
    gpus = [
        sample.labels.get("gpu", "")
        for metric in view.metrics
        if metric.name == HEALTH_STATE
        for sample in metric.samples
        if sample.labels.get("state") == state and sample.value == 1
    ]
    return sorted({g for g in gpus if g}, key=lambda g: (len(g), g))


def fitted(text: str, limit: int = MAX_BYTES) -> str:
    """One line of at most `limit` UTF-8 bytes, cut on a character and marked when cut."""
    line = " ".join(text.split())
    if len(line.encode()) <= limit:
        return line
    room = limit - len(ELLIPSIS.encode())
    while len(line.encode()) > room:
        line = line[:-1]
    return line.rstrip() + ELLIPSIS


def judge(view: ReportView) -> PluginResult:
    parts = []
    rma, reset = _gpus_in(view, "rma"), _gpus_in(view, "reset")
    if rma:
        parts.append(_("GPU {gpus} needs an RMA", gpus=",".join(rma)))
    if reset:
        parts.append(_("GPU {gpus} needs a reset", gpus=",".join(reset)))
    errors = sorted({f.code for f in view.findings if f.severity is Severity.ERROR})
    if errors:
        parts.append(_("errors: {codes}", codes=",".join(errors)))
    if parts:
        return PluginResult(Status.PROBLEM, fitted(_("; ").join(parts)))
    if not view.complete:
        unjudged = sorted({r.check for r in view.results if not r.complete})
        if unjudged:
            return PluginResult(Status.UNKNOWN, fitted(_("no error seen; not judged: {checks}", checks=",".join(unjudged))))
        return PluginResult(Status.UNKNOWN, fitted(_("no error seen; a check did not load")))
    return PluginResult(Status.OK, fitted(_("no error finding; no GPU needs a reset or RMA")))
