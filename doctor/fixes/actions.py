"""Fixes as data: a fixer turns a finding into a Plan of Actions; one executor (journal.py) applies plans.

Every action knows how to describe itself (preview and the equivalent shell commands), what it
must journal before it runs, how to back up what it replaces, how to apply itself, and how to undo
itself from its journal record alone, so `undo` needs nothing but the run directory.
"""

from __future__ import annotations

import difflib
import os
import shlex
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..engine.findings import Finding
from .atomic import TEMP_SUFFIX, UnsafeTarget, atomic_write, fsync_dir, sha256_bytes, sha256_file, write_in_place

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


def existing_ancestor(path: Path) -> Path:
    """The nearest directory at or above path that exists (where a create or rename would land)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


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
        text = self._diff()
        if self.label and self.label != str(self.path):
            text += f"\n(written to {self.path}, the --root copy of {self.label})"
        return text

    def _diff(self) -> str:
        if self.path.is_file():
            old = self.path.read_bytes().decode("utf-8", errors="replace").splitlines(keepends=True)
            new = self.content.decode("utf-8", errors="replace").splitlines(keepends=True)
            diff = list(difflib.unified_diff(old, new, f"a{self.shown}", f"b{self.shown}"))
            if len(diff) > self.max_preview_lines:
                diff = [*diff[: self.max_preview_lines], f"… {len(diff) - self.max_preview_lines} more diff lines\n"]
            text = "".join(line if line.endswith("\n") else line + "\n" for line in diff)
            return text.rstrip("\n") or f"{self.shown}: same lines, {self.path.stat().st_size} → {len(self.content)} bytes"
        body = self.content.decode("utf-8", errors="replace")
        return f"create {self.shown} ({len(self.content)} bytes):\n" + "".join(f"+{line}\n" for line in body.splitlines())

    def shell(self) -> str:
        text = self.content.decode("utf-8", errors="replace")
        return f"sudo tee {shlex.quote(self.shown)} >/dev/null <<'EOF'\n{text.rstrip(chr(10))}\nEOF"

    def permitted(self) -> bool:
        return os.access(existing_ancestor(self.path.parent), os.W_OK) and (not self.path.exists() or os.access(self.path, os.W_OK))

    def intent(self) -> Record:
        if self.path.is_symlink() or (self.path.exists() and not self.path.is_file()):
            raise UnsafeTarget(f"{self.path} is not a regular file; refusing to replace it")
        if self.expected_sha256 is not None and sha256_file(self.path) != self.expected_sha256:
            raise UnsafeTarget(f"{self.shown} changed since it was checked; run the check again")
        top = existing_ancestor(self.path.parent)
        missing = [str(p) for p in [self.path.parent, *self.path.parent.parents] if p != top and top in p.parents]
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
    """Write a kernel tunable (a /proc/sys or /sys file) in place; such files cannot be renamed over.

    path is where to write (under --root when one is given); label is the host path it stands for
    (/proc/sys/vm/swappiness), from which the equivalent shell command is derived.
    """

    kind: ClassVar[str] = "write-tunable"
    path: Path
    value: str
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
        where = f"{self.path} (the --root copy of {self.label})" if self.label and self.label != str(self.path) else self.shown
        return f"write {self.value} to {where} (now {self._current()})"

    def shell(self) -> str:
        if self.shown.startswith("/proc/sys/"):
            key = self.shown[len("/proc/sys/") :].replace("/", ".")
            return f"sudo sysctl -w {key}={shlex.quote(self.value)}"
        return f"echo {shlex.quote(self.value)} | sudo tee {shlex.quote(self.shown)} >/dev/null"

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


def _same_filesystem(a: Path, b: Path) -> bool:
    return a.stat().st_dev == existing_ancestor(b).stat().st_dev


def move_file(src: Path, dst: Path, expected_sha256: str | None = None) -> None:
    """Moves a regular file without ever losing it: rename on one filesystem; across filesystems
    copy to a temp file beside dst, fsync, verify the sha256, rename, fsync, and only then delete src."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists() or dst.is_symlink():
        raise UnsafeTarget(f"{dst} already exists; refusing to overwrite it")
    if _same_filesystem(src, dst.parent):
        try:  # a link never replaces what another run put at dst meanwhile (a rename would)
            os.link(src, dst, follow_symlinks=False)
        except FileExistsError:
            raise UnsafeTarget(f"{dst} already exists; refusing to overwrite it") from None
        except FileNotFoundError:
            raise UnsafeTarget(f"{src} is gone (moved by another run?); nothing was moved") from None
        fsync_dir(dst.parent)
        src.unlink()
        fsync_dir(src.parent)
        return
    try:
        data = src.read_bytes()
    except FileNotFoundError:
        raise UnsafeTarget(f"{src} is gone (moved by another run?); nothing was moved") from None
    digest = sha256_bytes(data)
    if expected_sha256 and digest != expected_sha256:
        raise UnsafeTarget(f"{src} changed since it was checked")
    mode = src.stat().st_mode & 0o7777
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=TEMP_SUFFIX, dir=dst.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        if sha256_file(Path(tmp_name)) != digest:
            raise OSError(f"the copy of {src} in {dst.parent} does not match the original")
        os.link(tmp_name, dst)  # fails, rather than replaces, when dst appeared meanwhile
        os.unlink(tmp_name)
    except FileExistsError:
        Path(tmp_name).unlink(missing_ok=True)
        raise UnsafeTarget(f"{dst} already exists; refusing to overwrite it") from None
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    fsync_dir(dst.parent)
    src.unlink()
    fsync_dir(src.parent)


def _append_manifest(manifest: Path, entry: Record) -> None:
    """One JSON line per quarantine move (and per undo of one), fsynced."""
    import datetime as dt
    import json

    manifest.parent.mkdir(parents=True, exist_ok=True)
    entry = {**entry, "time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    fd = os.open(manifest, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        # ensure_ascii: a file name that is not UTF-8 is kept exactly (as \udcXX escapes), never a failure
        os.write(fd, (json.dumps(entry) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class MoveFile(Action):
    """Move a file (to a quarantine directory, or to a corrected name), optionally noting it in a manifest."""

    kind: ClassVar[str] = "move-file"
    path: Path
    destination: Path
    reason: str = ""
    manifest: Path | None = None  # a JSON-lines manifest to append to (quarantine)
    expected_sha256: str | None = None

    @property
    def shown(self) -> str:
        return str(self.path)

    def preview(self) -> str:
        return f"move {self.path} → {self.destination}" + (f" ({self.reason})" if self.reason else "")

    def shell(self) -> str:
        source, target = shlex.quote(str(self.path)), shlex.quote(str(self.destination))
        return f"mkdir -p {shlex.quote(str(self.destination.parent))} && mv -n -- {source} {target}"

    def permitted(self) -> bool:
        return os.access(self.path.parent, os.W_OK) and os.access(existing_ancestor(self.destination.parent), os.W_OK)

    def intent(self) -> Record:
        if self.path.is_symlink() or not self.path.is_file():
            raise UnsafeTarget(f"{self.path} is not a regular file; refusing to move it")
        digest = sha256_file(self.path)
        if self.expected_sha256 and digest != self.expected_sha256:
            raise UnsafeTarget(f"{self.path} changed since it was checked; run the check again")
        if self.destination.exists():
            raise UnsafeTarget(f"{self.destination} already exists; refusing to overwrite it")
        top = existing_ancestor(self.destination.parent)
        return {
            "created_dirs": [str(p) for p in [self.destination.parent, *self.destination.parent.parents] if top in p.parents],
            "manifest_existed": bool(self.manifest and self.manifest.exists()),
            "path": str(self.path),
            "shown": self.shown,
            "destination": str(self.destination),
            "sha256": digest,
            "size": self.path.stat().st_size,
            "reason": self.reason,
            "manifest": str(self.manifest) if self.manifest else None,
        }

    def backup(self, backup_path: Path) -> None:
        """Nothing is overwritten: the file itself is what moves. The manifest is written here,
        before the move, so a quarantined file is never without its record."""
        if not self.path.is_file():
            raise UnsafeTarget(f"{self.path} is gone (moved by another run?); nothing was moved")
        if self.manifest is None:
            return
        _append_manifest(
            self.manifest,
            {
                "original": str(self.path),
                "quarantined": str(self.destination),
                "size": self.path.stat().st_size,
                "sha256": sha256_file(self.path),
                "reason": self.reason,
            },
        )

    def apply(self) -> None:
        move_file(self.path, self.destination, self.expected_sha256)

    @staticmethod
    def undo(record: Record, run_dir: Path, force: bool = False) -> str:
        src, dst = Path(record["path"]), Path(record["destination"])
        here, there = src.is_file(), dst.is_file()
        if here and not there:
            return "original"
        if here and there:  # killed between the copy and the delete of a cross-filesystem move
            if sha256_file(dst) == record["sha256"] == sha256_file(src):
                dst.unlink()
                return "restored"
            return f"conflict: both {src} and {dst} exist and differ; left as they are"
        if not there:
            return f"conflict: {dst} is gone; cannot restore {src}"
        if sha256_file(dst) != record["sha256"] and not force:
            return f"conflict: {dst} changed after the move; left as it is"
        move_file(dst, src)
        if record.get("manifest"):
            _append_manifest(Path(record["manifest"]), {"restored": str(src), "from": str(dst), "sha256": record["sha256"]})
        _tidy_quarantine(record)
        return "restored"


def _tidy_quarantine(record: Record) -> None:
    """After the last file of a quarantine this run created went back: remove the manifest (when
    every file it lists was restored) and the directories the move created, if they are empty."""
    manifest = Path(record["manifest"]) if record.get("manifest") else None
    if manifest is not None and not record.get("manifest_existed", True):
        try:
            if manifest.stat().st_size > (16 << 20):
                return
            import json

            entries = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines() if line.strip()]
        except (OSError, ValueError):
            return
        moved = sum(1 for e in entries if isinstance(e, dict) and "quarantined" in e)
        restored = sum(1 for e in entries if isinstance(e, dict) and "restored" in e)
        if moved != restored:
            return
        manifest.unlink(missing_ok=True)
    for directory in record.get("created_dirs", []):  # deepest first
        try:
            os.rmdir(directory)
        except OSError:
            break


@dataclass(frozen=True)
class ShowCommands(Action):
    """A display-only fix: commands a person runs; the executor never applies it."""

    kind: ClassVar[str] = "show-commands"
    commands: tuple[str, ...]
    path: Path = Path("/")

    def preview(self) -> str:
        return "\n".join(f"$ {command}" for command in self.commands)

    def shell(self) -> str:
        return "\n".join(self.commands)

    def permitted(self) -> bool:
        return True

    def intent(self) -> Record:
        raise UnsafeTarget("a display-only fix is never applied by decode-doctor")


ACTION_KINDS: dict[str, type[Action]] = {cls.kind: cls for cls in (ReplaceFile, WriteTunable, MoveFile)}


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
