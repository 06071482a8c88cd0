"""Fixes as data: a fixer turns a finding into a Plan of Actions; one executor applies plans.

Every action knows how to describe itself (preview and the equivalent shell commands), what it
must journal before it runs, how to back up what it replaces, how to apply itself, and how to undo
itself from its journal record alone, so `undo` needs nothing but the run directory.
"""

from __future__ import annotations

import difflib
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from .atomic import UnsafeTarget, atomic_write, sha256_bytes, sha256_file, write_in_place
from .model import Finding

if TYPE_CHECKING:
    from .context import Context

Record = dict[str, Any]


class Action:
    kind: ClassVar[str]
    path: Path

    def preview(self) -> str:
        raise NotImplementedError

    def shell(self) -> str:
        """The commands a person with the right privileges would run instead."""
        raise NotImplementedError

    def permitted(self) -> bool:
        raise NotImplementedError

    def intent(self) -> Record:
        """What the journal must hold before anything is touched."""
        raise NotImplementedError

    def backup(self, backup_path: Path) -> None:
        raise NotImplementedError

    def apply(self) -> None:
        raise NotImplementedError

    @staticmethod
    def undo(record: Record, run_dir: Path, force: bool = False) -> str:
        raise NotImplementedError


def _backup_bytes(path: Path, backup_path: Path) -> None:
    if path.exists():
        atomic_write(backup_path, path.read_bytes(), mode=0o600)


def _stat_record(path: Path) -> Record:
    try:
        st = path.stat()
    except FileNotFoundError:
        return {"existed": False, "mode": None, "uid": None, "gid": None}
    return {"existed": True, "mode": st.st_mode & 0o7777, "uid": st.st_uid, "gid": st.st_gid}


@dataclass(frozen=True)
class ReplaceFile(Action):
    """Replace (or create) a regular file atomically, keeping mode and owner."""

    kind: ClassVar[str] = "replace-file"
    path: Path
    content: bytes
    create_mode: int = 0o644
    label: str = ""  # how to show the path (e.g. without the --root prefix)
    expected_sha256: str | None = None  # refuse if the file changed since the plan was made
    max_preview_lines: int = 40

    @property
    def shown(self) -> str:
        return self.label or str(self.path)

    def preview(self) -> str:
        if self.path.is_file():
            old = self.path.read_bytes().decode("utf-8", errors="replace").splitlines(keepends=True)
            new = self.content.decode("utf-8", errors="replace").splitlines(keepends=True)
            diff = list(difflib.unified_diff(old, new, f"a{self.shown}", f"b{self.shown}"))
            if len(diff) > self.max_preview_lines:
                diff = diff[: self.max_preview_lines] + [f"… {len(diff) - self.max_preview_lines} more diff lines\n"]
            text = "".join(line if line.endswith("\n") else line + "\n" for line in diff)
            return text.rstrip("\n") or f"{self.shown}: same lines, {self.path.stat().st_size} → {len(self.content)} bytes"
        body = self.content.decode("utf-8", errors="replace")
        return f"create {self.shown} ({len(self.content)} bytes):\n" + "".join(f"+{line}\n" for line in body.splitlines())

    def shell(self) -> str:
        text = self.content.decode("utf-8", errors="replace")
        return f"sudo tee {shlex.quote(self.shown)} >/dev/null <<'EOF'\n{text.rstrip(chr(10))}\nEOF"

    def permitted(self) -> bool:
        parent = self.path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        return os.access(parent, os.W_OK) and (not self.path.exists() or os.access(self.path, os.W_OK))

    def intent(self) -> Record:
        if self.path.is_symlink() or (self.path.exists() and not self.path.is_file()):
            raise UnsafeTarget(f"{self.path} is not a regular file; refusing to replace it")
        if self.expected_sha256 is not None and sha256_file(self.path) != self.expected_sha256:
            raise UnsafeTarget(f"{self.shown} changed since it was checked; run the check again")
        missing = []
        parent = self.path.parent
        while not parent.exists():
            missing.append(str(parent))
            parent = parent.parent
        return {
            "path": str(self.path),
            "shown": self.shown,
            "sha256_before": sha256_file(self.path),
            "sha256_after": sha256_bytes(self.content),
            "created_dirs": missing,
            "create_mode": self.create_mode,
            **_stat_record(self.path),
        }

    def backup(self, backup_path: Path) -> None:
        _backup_bytes(self.path, backup_path)

    def apply(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        mode = None if self.path.exists() else self.create_mode
        atomic_write(self.path, self.content, mode=mode)

    @staticmethod
    def undo(record: Record, run_dir: Path, force: bool = False) -> str:
        path = Path(record["path"])
        current = sha256_file(path) if not path.is_symlink() else "symlink"
        if current == record["sha256_before"]:
            return "original"
        if current != record["sha256_after"] and not force:
            return f"conflict: {record['shown']} changed after the fix; left as it is"
        if record["existed"]:
            backup = run_dir / record["backup"]
            atomic_write(path, backup.read_bytes(), mode=record["mode"], uid=record["uid"], gid=record["gid"])
        else:
            path.unlink(missing_ok=True)
            for directory in record.get("created_dirs", []):
                try:
                    os.rmdir(directory)
                except OSError:
                    break
        return "restored"


@dataclass(frozen=True)
class WriteTunable(Action):
    """Write a kernel tunable (a /proc/sys file) in place; procfs files cannot be renamed over."""

    kind: ClassVar[str] = "write-tunable"
    path: Path
    value: str
    sysctl_key: str
    label: str = ""

    @property
    def shown(self) -> str:
        return self.label or str(self.path)

    def _current(self) -> str | None:
        try:
            return self.path.read_text().strip()
        except OSError:
            return None

    def preview(self) -> str:
        return f"write {self.value} to {self.shown} (now {self._current()})"

    def shell(self) -> str:
        return f"sudo sysctl -w {self.sysctl_key}={shlex.quote(self.value)}"

    def permitted(self) -> bool:
        return os.access(self.path, os.W_OK)

    def intent(self) -> Record:
        if self.path.is_symlink():
            raise UnsafeTarget(f"{self.path} is a symbolic link; refusing to write through it")
        before = self.path.read_bytes()
        return {
            "path": str(self.path),
            "shown": self.shown,
            "before": before.decode("ascii", errors="replace"),
            "after": self.value,
            "sha256_before": sha256_bytes(before),
        }

    def backup(self, backup_path: Path) -> None:
        _backup_bytes(self.path, backup_path)

    def apply(self) -> None:
        write_in_place(self.path, f"{self.value}\n".encode())

    @staticmethod
    def undo(record: Record, run_dir: Path, force: bool = False) -> str:
        path = Path(record["path"])
        current = path.read_bytes()
        if sha256_bytes(current) == record["sha256_before"] or current.strip() == record["before"].strip().encode():
            return "original"
        if current.decode("ascii", errors="replace").strip() != str(record["after"]).strip() and not force:
            return f"conflict: {record['shown']} is now {current.strip().decode(errors='replace')}; left as it is"
        backup = run_dir / record["backup"]
        original = backup.read_bytes() if backup.exists() else record["before"].encode()
        write_in_place(path, original)
        return "restored"


ACTION_KINDS: dict[str, type[Action]] = {cls.kind: cls for cls in (ReplaceFile, WriteTunable)}


def register_action(cls: type[Action]) -> type[Action]:
    """Lets a fixer module bring its own action kind (e.g. moving files to a quarantine)."""
    ACTION_KINDS[cls.kind] = cls
    return cls


@dataclass
class Plan:
    finding: Finding
    description: str
    actions: list[Action]
    notes: list[str] = field(default_factory=list)

    def preview(self) -> str:
        lines = [f"{self.finding.code} {self.description}"]
        for action in self.actions:
            lines.extend("    " + line for line in action.preview().splitlines())
        lines.extend(f"    note: {note}" for note in self.notes)
        return "\n".join(lines)


class Fixer:
    """Base class: one module in fixers/ per fixer. plan() must not change anything."""

    name: ClassVar[str]
    codes: ClassVar[tuple[str, ...]] = ()

    def plan(self, finding: Finding, ctx: Context) -> Plan:
        raise NotImplementedError
