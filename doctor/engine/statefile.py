"""Small JSON lists of records kept in the state directory (bandwidth figures, calibrations), and the
host identity they are kept under:
read with a size limit, each record a dataclass (an entry that does not fit one is skipped),
appended and written atomically (a kill leaves the old file or the new, never a torn one or a
temporary file), the oldest dropped past a count."""

from __future__ import annotations

import json
import math
import os
import platform
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

from decode_doctor.i18n import Said, literal, said

from ..i18n import os_reason
from .files import open_regular
from .writes import locked, replace_output

R = TypeVar("R", bound="DataclassInstance")

READ_LIMIT = 1 << 20
FUTURE_SLACK_S = 300  # a record's time may run this far ahead of the clock (another host's, a clock step)


@runtime_checkable
class SelfChecked(Protocol):
    """A record kind with its own check beyond its fields' (read_state): why a record is unusable, or None."""

    def problem(self) -> Said | None: ...


@dataclass(frozen=True)
class StateRead(Generic[R]):
    """A state file as read: its usable records, each entry it ignored with the reason, and whether the
    file as a whole could not be read (unreadable, not a regular file, too large, not a JSON list)."""

    records: list[R] = field(default_factory=list)
    ignored: list[Said] = field(default_factory=list)
    unusable: bool = False

    @property
    def clean(self) -> bool:
        return not self.ignored and not self.unusable


def read_json(path: Path, limit: int = READ_LIMIT) -> object | Said | None:
    """The JSON value in path; None when there is no file; a Said when it cannot be used (a FIFO, a
    device, a directory or a link is never opened for reading; a file past limit is not parsed)."""
    try:
        with open_regular(path, follow=False) as handle:
            raw = handle.read(limit + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return said("{path}: {error}", path=path, error=os_reason(exc))
    if len(raw) > limit:
        return said("{path} is larger than {amount} MiB; not read", path=path, amount=limit >> 20)
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return said("{path} is not JSON ({error})", path=path, error=str(exc)[:80])


def _read_list(path: Path) -> list[object] | Said | None:
    """The JSON list in path (read_json), or why there is none."""
    data = read_json(path)
    if data is None or isinstance(data, Said):
        return data
    if not isinstance(data, list):
        return said("{path} does not hold a list of records", path=path)
    return data


def _field_problem(name: str, kind: object, value: object, now: float) -> Said | None:
    """What is wrong with one field's value for its declared type (str, int, float): numbers finite,
    not negative, not absurdly large; times not in the future."""
    if kind in ("int", "float"):
        if isinstance(value, bool) or not isinstance(value, int | float) or (kind == "int" and not isinstance(value, int)):
            return said("{name} is not a number ({value})", name=name, value=literal(json.dumps(value)[:40]))
        if not -1e15 <= value <= 1e15 or not math.isfinite(value) or value < 0:  # a 400-digit int: no float
            return said("{name} is {value}, not a plausible figure", name=name, value=literal(repr(value)[:40]))
        if (name.endswith("_at") or name.endswith("_since")) and value > now + FUTURE_SLACK_S:
            return said("{name} is in the future", name=name)
    elif kind == "str" and (not isinstance(value, str) or len(value) > 4096):
        return said("{name} is not a string", name=name)
    return None


def read_state(path: Path, kind: type[R]) -> StateRead[R]:
    """The entries of path as kind (a dataclass whose str, int and float fields are checked: finite, not
    negative, times not in the future; a kind may add its own check, problem()); each entry that does
    not fit is ignored with the reason."""
    data = _read_list(path)
    if data is None:
        return StateRead()
    if isinstance(data, Said):
        return StateRead(ignored=[data], unusable=True)
    declared = {f.name: f.type for f in fields(kind)}
    records: list[R] = []
    ignored: list[Said] = []
    now = time.time()
    for number, entry in enumerate(data, start=1):
        problem: Said | None = None if isinstance(entry, dict) else said("not an object")
        if isinstance(entry, dict):
            problem = next((p for k, v in entry.items() if k in declared and (p := _field_problem(k, declared[k], v, now))), None)
        record = None
        if problem is None and isinstance(entry, dict):
            try:
                record = kind(**{key: value for key, value in entry.items() if key in declared})
            except (TypeError, ValueError, AttributeError) as exc:
                problem = said("{error}", error=str(exc)[:120])
        if record is not None and problem is None:
            problem = record.problem() if isinstance(record, SelfChecked) else None
        if problem is not None or record is None:
            ignored.append(said("{path}, record {number}: ignored: {why}", path=path, number=number, why=problem or said("unreadable")))
            continue
        records.append(record)
    return StateRead(records, ignored)


def read_records(path: Path, kind: type[R]) -> list[R]:
    """The usable entries of path as kind (read_state's records)."""
    return read_state(path, kind).records


def write_list(path: Path, entries: list[dict[str, object]]) -> None:
    """entries replaced whole (writes.replace_output: a link at path is replaced, a FIFO or device refused)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_output(path, json.dumps(entries, indent=1).encode(), mode=0o600)


def keep_aside(path: Path) -> Path | None:
    """path renamed beside itself (NAME.kept-UTC) so that nothing it held is lost to the next write;
    None when there is nothing there."""
    if not os.path.lexists(path):
        return None
    aside = path.with_name(f"{path.name}.kept-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}")
    os.replace(path, aside)
    return aside


def append_record(path: Path, record: R, kind: type[R], keep: int) -> None:
    """record appended to path's records, the oldest dropped past keep, written atomically; a file with
        an entry it could not use is kept aside first (keep_aside), never silently overwritten; under the
    store's lock (writes.locked: StoreBusy, an OSError, past its bounded wait)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path):  # two writers each replacing the list they read would lose the other's record
        read = read_state(path, kind)
        if not read.clean:
            keep_aside(path)
        write_list(path, [asdict(r) for r in [*read.records, record][-keep:]])


def age_text(seconds: float) -> str:
    """How long ago, as the records say it: "just now", "3.2 h ago", "4.0 days ago"."""
    hours = seconds / 3600
    if hours < 0.05:
        return said("just now")
    return said("{hours:.1f} h ago", hours=hours) if hours < 48 else said("{days:.1f} days ago", days=hours / 24)


def host_id() -> str:
    """This machine as its records name it: its node name and CPU model ("gpu-node-1/AMD EPYC 9654")."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle.read(READ_LIMIT).splitlines():
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{platform.node()}/{model or platform.machine()}"
