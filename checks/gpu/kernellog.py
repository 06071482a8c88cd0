"""The kernel log: where it is (log files, dmesg, the journal), and the one mapping of its driver
events to codes that both the live check and `analyze` use."""

from __future__ import annotations

from dataclasses import dataclass

from decode_doctor.engine import Check, Code, Context, Finding, JSONValue
from decode_doctor.i18n import N_, _

from .codes import GPU010, GPU011, GPU012, GPU014
from .nvidia import scan_kernel_log
from .xid import XidEvent, xid_events
from .xid import finding as xid_finding

# event kind (nvidia.KERNEL_PATTERNS) → the code that reports it and how it is worded; Xid 79 is an
# off-bus event too, and the other Xids are GPU018 (xid.finding)
KERNEL_EVENTS: dict[str, tuple[Code, str]] = {
    "off-bus": (GPU014, N_("The kernel log says: {text}.")),
    "api-mismatch": (GPU011, N_("The kernel log says: {text} Reboot or reload the module.")),
    "no-adapter": (
        GPU012,
        N_("The kernel log says: {text} (another driver such as nouveau holds the GPU, or it is unsupported)."),
    ),
}
XID_OFF_BUS = 79


def event_finding(check: Check, kind: str, text: str, suffix: str = "", evidence: dict[str, JSONValue] | None = None) -> Finding | None:
    """The finding for one kernel-log event, worded the same live and pasted."""
    if kind not in KERNEL_EVENTS:
        return None
    code, wording = KERNEL_EVENTS[kind]
    message = _(wording, text=text.rstrip(".")) + suffix
    return check.finding(code, message, evidence=dict(evidence or {}))


KERNEL_LOGS = ("/var/log/kern.log", "/var/log/syslog", "/var/log/messages")
JOURNAL = "/var/log/journal"
LOG_TAIL = 2 << 20


@dataclass(frozen=True)
class KernelLogs:
    texts: list[tuple[str, str]]  # (source, text)
    unread: str | None = None  # why the kernel's driver events could not be read: not judged on a GPU host


def kernel_logs(ctx: Context) -> KernelLogs:
    """(source, text) for each kernel log there is: the log files' newest lines, and on a live host
    dmesg and the journal's kernel messages; a node agent (--same-host) reads the host's journal
    with journalctl --directory. Where none could be read on a host being judged, or a log file is
    unreadable, says why (the Xids are then not judged, never a clean bill)."""
    texts: list[tuple[str, str]] = []
    unreadable: list[str] = []
    for log in KERNEL_LOGS:
        try:
            text = ctx.read_tail(log, limit=LOG_TAIL)
        except PermissionError:
            unreadable.append(log)
            continue
        if text:
            texts.append((log, current_boot(text)))
    journal = ctx.host_path(JOURNAL)
    commands: list[list[str]] = []
    if ctx.live_host:
        commands = [["dmesg"], ["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "-n", "50000"]]
    elif ctx.same_host and journal.is_dir():
        commands = [["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "-n", "50000", f"--directory={journal}"]]
    for argv in commands:
        if ctx.which(argv[0]):
            record = ctx.run(argv, timeout_s=10)
            if record.ok and record.stdout:
                texts.append((" ".join(argv[:2]), record.stdout[-(4 << 20) :]))
    why = None
    if unreadable and not texts:  # kern.log, syslog and messages repeat each other: one read is enough
        why = _("{logs}: permission denied", logs=", ".join(unreadable))
    elif not texts and (ctx.live_host or ctx.same_host):
        if ctx.same_host and journal.is_dir() and not ctx.which("journalctl"):
            why = _("the host keeps its kernel log in the systemd journal ({path}), and journalctl is not installed here", path=journal)
        elif ctx.same_host:
            why = _("no kernel log under {root}/var/log (mount the host's /var/log read-only)", root=ctx.root)
        else:
            why = _("no kernel log file, and neither dmesg nor journalctl could be read (run as root or in the adm group)")
    return KernelLogs(texts, why)


BOOT_MARKERS = ("kernel: Linux version ", "] Linux version ")


def current_boot(text: str) -> str:
    """The log from the current boot on: what follows the last boot's first line ("kernel: Linux version …").
    A log without one began after the boot (rotated since) or holds only its newest lines: all of it is this boot's.
    An Xid of an earlier boot is history, not a GPU that is failing now."""
    at = max(text.rfind(marker) for marker in BOOT_MARKERS)
    if at < 0:
        return text
    return text[text.rfind("\n", 0, at) + 1 :]


def kernel_events(texts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    events: list[tuple[str, str]] = []
    for _source, text in texts:
        for event in scan_kernel_log(text):
            if event not in events:
                events.append(event)
    return events


def kernel_xids(texts: list[tuple[str, str]]) -> tuple[str, list[XidEvent]]:
    """The Xid events of the one log that holds the most: kern.log, syslog and dmesg repeat each
    other, so adding them up would count each event twice."""
    best: tuple[str, list[XidEvent]] = ("", [])
    for source, text in texts:
        events = xid_events(text.splitlines())
        if len(events) > len(best[1]):
            best = (source, events)
    return best


def kernel_findings(check: Check, texts: list[tuple[str, str]], earlier: list[Finding]) -> list[Finding]:
    """The live check's findings from the kernel logs: the GPU off the bus (also Xid 79), Xids
    (GPU018), no adapter probed and an API mismatch (added to nvidia-smi's own GPU011 when there
    is one, rather than reported twice)."""
    events = kernel_events(texts)
    source, xids = kernel_xids(texts)
    found: list[Finding] = []
    by_kind: dict[str, list[str]] = {}
    for kind, text in events:
        by_kind.setdefault(kind, []).append(text)
    off_bus = by_kind.get("off-bus", []) + [e.text for e in xids if e.number == XID_OFF_BUS]
    if off_bus:
        found.append(_event(check, "off-bus", off_bus))
    xid = xid_finding(check, xids, _("The kernel log ({source})", source=source), {"source": source})
    if xid:
        found.append(xid)
    earlier_codes = {f.code for f in earlier}
    if by_kind.get("no-adapter") and not earlier_codes & {GPU010.code, GPU012.code}:
        found.append(_event(check, "no-adapter", by_kind["no-adapter"]))
    mismatch = by_kind.get("api-mismatch", [])
    if mismatch and GPU011.code not in earlier_codes:
        found.append(_event(check, "api-mismatch", mismatch))
    elif mismatch:
        for i, finding in enumerate(earlier):
            if finding.code == GPU011.code:
                earlier[i] = check.finding(
                    GPU011,
                    finding.message + _(" Kernel log: {line}", line=mismatch[-1]),
                    evidence={**finding.evidence, "kernel_log": mismatch[-5:]},
                )
    return found


def _event(check: Check, kind: str, texts: list[str]) -> Finding:
    finding = event_finding(check, kind, texts[-1], evidence={"kernel_log": texts[-5:]})
    assert finding is not None
    return finding
