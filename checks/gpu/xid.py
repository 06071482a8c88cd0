"""NVIDIA Xid events in kernel logs, and NVIDIA's Xid catalog: what each one means, its likely cause
and the next step. Lines are read one at a time with plain string operations (no pattern runs across
lines), so a hostile log costs time linear in its size."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from decode_doctor.engine import Check, Finding, Severity
from decode_doctor.i18n import _, localized, said, sentences

from .codes import GPU018

MAX_LINE = 4096
MAX_GROUPS = 256  # distinct Xid numbers kept; more is not a real log

# how a bucket's action weighs on a decode server: "gpu" needs the GPU reset or the node rebooted
URGENCY = {"gpu": 3, "report": 2, "application": 1, "info": 0}


@dataclass(frozen=True)
class CatalogEntry:
    number: int
    mnemonic: str
    meaning: str
    immediate: str
    investigatory: str
    cause: str
    action_parts: tuple[str, ...]  # what to do now: its sentences as the catalog file has them, each a message (extract.xid_catalog)
    follow_up: str  # what to do when it recurs ("" when nothing more)
    urgency: str  # gpu, report, application, info

    @property
    def action(self) -> str:
        return " ".join(self.action_parts)

    @property
    def next_step(self) -> str:
        return f"{self.action} {self.follow_up}".strip()

    @property
    def unused(self) -> bool:
        return self.meaning == "Unused"


@dataclass(frozen=True)
class XidEvent:
    number: int
    device: str  # PCI address as the driver prints it ("0000:01:00")
    time: str | None  # the line's own timestamp, as written
    line: int  # 1-based line number in the text
    text: str  # the message from "NVRM: Xid" on


@dataclass
class XidGroup:
    number: int
    count: int = 0
    devices: list[str] = field(default_factory=list)
    first: XidEvent | None = None
    last: XidEvent | None = None

    def add(self, event: XidEvent) -> None:
        self.count += 1
        if event.device not in self.devices and len(self.devices) < 64:
            self.devices.append(event.device)
        self.first = self.first or event
        self.last = event


@cache
def catalog_data() -> dict[str, Any]:
    return json.loads(resources.files(__package__ or __name__).joinpath("data/xid-catalog.json").read_text(encoding="utf-8"))


@cache
def catalog() -> dict[int, CatalogEntry]:
    data = catalog_data()
    buckets, notes = data["buckets"], data["notes"]
    entries = {}
    for number, mnemonic, meaning, immediate, investigatory in data["xids"]:
        cause, extra = notes.get(str(number), ["", ""])
        parts: tuple[str, ...] = (buckets[immediate][1],)
        follow_up = ""
        step = buckets[investigatory][1]
        if investigatory and investigatory != immediate and not investigatory.startswith(("IGNORE", "N/A")):
            follow_up = step if step.startswith("When") else "If it recurs: " + step[0].lower() + step[1:]
        # a note's next step replaces the buckets' words, or with a leading "+" comes after them
        if extra.startswith("+"):
            parts += (extra[1:],)
        elif extra:
            parts, follow_up = (extra,), ""
        meaning = " ".join(meaning.split())
        entries[number] = CatalogEntry(
            number,
            " / ".join(mnemonic.split(" /\n")),
            meaning,
            immediate,
            investigatory,
            cause or f"{meaning} ({mnemonic.split()[0]}).",
            parts,
            follow_up,
            buckets[immediate][0],
        )
    return entries


def source_url() -> str:
    return str(catalog_data()["source"]["url"])


def parse_xid(line: str) -> tuple[str, int, int] | None:
    """(device, Xid number, offset of "NVRM") for an "NVRM: Xid (…): N" line, in the old
    "Xid (0000:01:00): N, …" and the newer "Xid (PCI:0000:01:00): N, pid=…, …" formats."""
    start = line.find("NVRM: Xid (")
    if start < 0:
        return None
    open_at = start + len("NVRM: Xid (")
    close_at = line.find("):", open_at, open_at + 48)
    if close_at < 0:
        return None
    device = line[open_at:close_at]
    if device.startswith("PCI:"):
        device = device[4:]
    if not device or any(c not in "0123456789abcdefABCDEF:." for c in device):
        return None
    digits = line[close_at + 2 : close_at + 10].lstrip(" ").split(",", 1)[0].strip()
    if not digits.isdecimal() or len(digits) > 4:
        return None
    return device, int(digits), start


def line_time(prefix: str) -> str | None:
    """The timestamp a log line starts with: "[Fri Aug 30 11:43:09 2024]" (dmesg -T), "[ 1843.30]"
    (seconds since boot), "May 10 22:25:01 host" (syslog, any language's month), an ISO time
    (journalctl -o short-iso), or "[2026-04-22T21:30:51Z]" inside a collector's prefix."""
    prefix = prefix.strip()
    if not prefix:
        return None
    bracket = prefix.find("[")
    if bracket >= 0:
        end = prefix.find("]", bracket)
        inner = prefix[bracket + 1 : end].strip() if end > bracket else ""
        if inner and (inner[0].isdecimal() or inner[:3].lower() in {"mon", "tue", "wed", "thu", "fri", "sat", "sun"}):
            syslog = _syslog_time(prefix[:bracket])
            return syslog or (inner if not _is_uptime(inner) else said("{seconds} s after boot", seconds=inner))
    return _syslog_time(prefix) or _iso_time(prefix)


def _is_uptime(text: str) -> bool:
    return text.replace(".", "", 1).isdecimal()


def _syslog_time(prefix: str) -> str | None:
    words = prefix.split()
    # "May", "kwi", "Mär": any language's abbreviated month, the day, then HH:MM:SS
    month, day, clock = [*words, "", "", ""][:3]
    if month.isalpha() and len(month) <= 5 and day.isdecimal() and len(day) <= 2 and clock.count(":") == 2:
        return " ".join(words[:3])
    return _iso_time(prefix)


def _iso_time(prefix: str) -> str | None:
    first = prefix.split(maxsplit=1)[0] if prefix.split() else ""
    if len(first) >= 19 and first[:4].isdecimal() and first[4] == "-" and first[10] in "T ":
        return first
    return None


def xid_events(lines: Iterable[str]) -> list[XidEvent]:
    """Every Xid line, in order. Continuation lines ("      NVRM: …") belong to the line above."""
    events = []
    for number, line in enumerate(lines, start=1):
        line = line[:MAX_LINE]
        parsed = parse_xid(line)
        if parsed is None:
            continue
        device, xid, start = parsed
        events.append(XidEvent(xid, device, line_time(line[:start]), number, " ".join(line[start:].split())))
    return events


def group(events: Iterable[XidEvent]) -> list[XidGroup]:
    """One group per Xid number, with its count, GPUs and first and last event; in number order."""
    groups: dict[int, XidGroup] = {}
    for event in events:
        if event.number not in groups and len(groups) >= MAX_GROUPS:
            continue
        groups.setdefault(event.number, XidGroup(event.number)).add(event)
    return [groups[number] for number in sorted(groups)]


def recovery_action(text: str) -> str | None:
    """Xid 154's new recovery action: "… changed from 0x0 (None) to 0x1 (GPU Reset Required)"."""
    at = text.rfind(" to ")
    if at < 0:
        return None
    tail = text[at + 4 :]
    opened, closed = tail.find("("), tail.find(")")
    return tail[opened + 1 : closed].strip() or None if 0 <= opened < closed else None


def level(item: XidGroup) -> str:
    """How urgent the action this Xid asks for is; Xid 154 by the recovery action its line names."""
    if item.number == 154 and item.last and (action := recovery_action(item.last.text)):
        return "info" if action.lower() == "none" else "gpu"
    entry = catalog().get(item.number)
    return entry.urgency if entry else "report"


def urgency(groups: Iterable[XidGroup]) -> str:
    """The most urgent action any of these Xids asks for."""
    return max((level(item) for item in groups), key=URGENCY.__getitem__, default="info")


def finding(check: Check, events: list[XidEvent], where: str, cite: dict[str, Any]) -> Finding | None:
    """GPU018 for every Xid but 79: per Xid its count, GPUs, first and last time, meaning and next step
    from NVIDIA's catalog; an error when one asks for a GPU reset or a reboot."""
    groups = [item for item in group(events) if item.number != 79]
    if not groups:
        return None
    severity = {"gpu": Severity.ERROR, "report": Severity.WARNING, "application": Severity.WARNING}.get(urgency(groups), Severity.INFO)
    ranked = sorted(groups, key=lambda item: (-URGENCY[level(item)], item.number))
    causes = caused_by(event for event in events if event.number == 45)
    shown = [summary(item, causes if item.number == 45 else None) for item in ranked[:6]]
    more = _("And {count} more Xid numbers (in the evidence).", count=len(ranked) - 6) if len(ranked) > 6 else ""
    message = sentences(_("{where} holds NVIDIA Xid errors.", where=where), *shown, more)
    evidence = {**cite, "xids": [describe(item) for item in ranked[:32]]}
    return check.finding(GPU018, message, evidence=evidence, severity=severity)


def describe(item: XidGroup) -> dict[str, Any]:
    """The catalog's facts and the log's facts for one Xid, for a finding's evidence."""
    entry = catalog().get(item.number)
    first, last = item.first, item.last
    described: dict[str, Any] = {
        "xid": item.number,
        "count": item.count,
        "gpus": item.devices,
        "first": {"line": first.line, "time": first.time, "text": first.text[:300]} if first else None,
        "last": {"line": last.line, "time": last.time, "text": last.text[:300]} if last else None,
    }
    if entry is None:
        described["catalog"] = f"not in NVIDIA's Xid catalog as decode-doctor carries it ({source_url()}); look it up there"
        return described
    described.update(
        mnemonic=entry.mnemonic,
        meaning=entry.meaning,
        cause=entry.cause,
        next_step=entry.next_step,
        immediate_action=entry.immediate,
        investigatory_action=" ".join(entry.investigatory.split()),
        source=source_url(),
    )
    if item.number == 154 and last and (action := recovery_action(last.text)):
        described["recovery_action"] = action
    return described


def caused_by(events: Iterable[XidEvent]) -> list[int]:
    """The earlier Xids that Xid 45 lines name: "… caused by previous Xid 149"."""
    found: set[int] = set()
    for event in events:
        at = event.text.find("caused by previous Xid ")
        digits = event.text[at + 23 : at + 27].split(",")[0].split()[0] if at >= 0 else ""
        if digits.isdecimal():
            found.add(int(digits))
    return sorted(found)


def summary(item: XidGroup, causes: list[int] | None = None) -> str:
    """ "Xid 48 ×2 on 0000:01:00 (Double Bit ECC Error), May 10 22:25:01 → May 10 22:30:00: what to do." """
    entry = catalog().get(item.number)
    gpus = ", ".join(item.devices[:4]) + (_(" and {count} more", count=len(item.devices) - 4) if len(item.devices) > 4 else "")
    head = _("Xid {number} ×{count} on {gpus}", number=item.number, count=item.count, gpus=gpus)
    if entry is None:
        meaning = _(" (not in NVIDIA's catalog as decode-doctor carries it)")
    else:
        meaning = _(" (unused in NVIDIA's catalog)") if entry.unused else _(' ("{meaning}")', meaning=entry.meaning.split(" -- ")[0])
    if causes:
        meaning += _(", caused by Xid {numbers}", numbers=", ".join(map(str, causes)))
    times = ""
    if item.first and item.first.time:
        last_time = item.last.time if item.last else None
        first_time = localized(item.first.time)
        span = f"{first_time} → {localized(last_time)}" if last_time and item.count > 1 and last_time != item.first.time else first_time
        times = _(", {time}", time=span)
    step = sentences(*(_(part) for part in entry.action_parts)) if entry else _("Look it up in NVIDIA's Xid catalog.")
    if item.number == 154 and item.last and (action := recovery_action(item.last.text)):
        step = _("The driver now asks for: {action}.", action=action)
    return _("{head}{meaning}{times}: {step}", head=head, meaning=meaning, times=times, step=step)
