"""Fixes as data: a fixer turns a finding into a FixPlan of Actions; one executor (journal.py) applies plans.

Every action knows how to describe itself (preview and the equivalent shell commands), what it
must journal before it runs, how to back up what it replaces, how to apply itself, and how to undo
itself from its journal record alone, so `undo` needs nothing but the run directory.

Over 500 lines: the record each action journals is the format `undo` reads back, so every kind's
intent(), apply() and undo() and ACTION_KINDS, the table undo finds a kind by, are read against each
other in one place. MoveFile (with move_file, its manifest and the quarantine tidy-up) is the one
part that could leave, with the Action base in a module of its own.
"""

from __future__ import annotations

import difflib
import os
import secrets
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..engine.findings import Finding
from ..i18n import _, said
from .atomic import (
    TEMP_SUFFIX,
    UnsafeTarget,
    atomic_write,
    atomic_write_at,
    dir_within,
    fsync_dir,
    open_dir_within,
    sha256_bytes,
    sha256_file,
    write_in_place,
)

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

    def touched(self) -> tuple[Path, ...]:
        """The paths this action changes: what the re-check after a fix judges again."""
        return (self.path,)

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

    @staticmethod
    def withdraw(record: Record) -> str | None:
        """Take back what backup() recorded outside the state dir when the change itself was refused
        (UnsafeTarget in apply): None when there is nothing to take back, else what was done."""
        return None


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
    within: Path | None = None  # the scanned tree: written through a handle reached from it without links

    @property
    def shown(self) -> str:
        return self.label or str(self.path)

    def preview(self) -> str:
        text = self._diff()
        if self.label and self.label != str(self.path):
            text += "\n" + _("(written to {path}, the --root copy of {label})", path=self.path, label=self.label)
        return text

    def _diff(self) -> str:
        if self.path.is_file():
            old = self.path.read_bytes().decode("utf-8", errors="replace").splitlines(keepends=True)
            new = self.content.decode("utf-8", errors="replace").splitlines(keepends=True)
            diff = list(difflib.unified_diff(old, new, f"a{self.shown}", f"b{self.shown}"))
            if len(diff) > self.max_preview_lines:
                diff = [*diff[: self.max_preview_lines], _("… {count} more diff lines", count=len(diff) - self.max_preview_lines) + "\n"]
            text = "".join(line if line.endswith("\n") else line + "\n" for line in diff)
            before, after = self.path.stat().st_size, len(self.content)
            same = _("{path}: same lines, {before} → {after} bytes", path=self.shown, before=before, after=after)
            return text.rstrip("\n") or same
        body = self.content.decode("utf-8", errors="replace")
        head = _("create {path} ({size} bytes):", path=self.shown, size=len(self.content))
        return head + "\n" + "".join(f"+{line}\n" for line in body.splitlines())

    def shell(self) -> str:
        text = self.content.decode("utf-8", errors="replace")
        return f"sudo tee {shlex.quote(self.shown)} >/dev/null <<'EOF'\n{text.rstrip(chr(10))}\nEOF"

    def permitted(self) -> bool:
        return os.access(existing_ancestor(self.path.parent), os.W_OK) and (not self.path.exists() or os.access(self.path, os.W_OK))

    def intent(self) -> Record:
        if self.path.is_symlink() or (self.path.exists() and not self.path.is_file()):
            raise UnsafeTarget(said("{path} is not a regular file; refusing to replace it", path=self.path))
        if self.expected_sha256 is not None and sha256_file(self.path) != self.expected_sha256:
            raise UnsafeTarget(said("{shown} changed since it was checked; run the check again", shown=self.shown))
        if self.within is not None:
            os.close(open_dir_within(self.within, self.path.parent))  # refused now rather than mid-run
        top = existing_ancestor(self.path.parent)
        missing = [str(p) for p in [self.path.parent, *self.path.parent.parents] if p != top and top in p.parents]
        return {
            "within": str(self.within) if self.within is not None else None,
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
        if self.within is not None:
            with dir_within(self.within, self.path.parent) as fd:
                atomic_write_at(fd, self.path.name, self.content, mode=None if self.path.exists() else self.create_mode)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        mode = None if self.path.exists() else self.create_mode
        atomic_write(self.path, self.content, mode=mode)

    @staticmethod
    def undo(record: Record, run_dir: Path, force: bool = False) -> str:
        path = Path(record["path"])
        current = sha256_file(path) if not path.is_symlink() else "symlink"
        if current == record["sha256_before"]:
            return said("original")
        if current != record["sha256_after"] and not force:
            return said("conflict: {file} changed after the fix; left as it is", file=record["shown"])
        if record["existed"] and record.get("within"):
            with dir_within(Path(record["within"]), path.parent) as fd:
                atomic_write_at(fd, path.name, (run_dir / record["backup"]).read_bytes(), mode=record["mode"])
        elif record["existed"]:
            backup = run_dir / record["backup"]
            atomic_write(path, backup.read_bytes(), mode=record["mode"], uid=record["uid"], gid=record["gid"])
        else:
            path.unlink(missing_ok=True)
            for directory in record.get("created_dirs", []):
                try:
                    os.rmdir(directory)
                except OSError:
                    break
            return said("removed (the fix had created it)")
        return said("restored")


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
        where = self.shown
        if self.label and self.label != str(self.path):
            where = _("{path} (the --root copy of {label})", path=self.path, label=self.label)
        return _("write {value} to {where} (now {current})", value=self.value, where=where, current=self._current())

    def shell(self) -> str:
        if self.shown.startswith("/proc/sys/"):
            key = self.shown[len("/proc/sys/") :].replace("/", ".")
            return f"sudo sysctl -w {key}={shlex.quote(self.value)}"
        return f"echo {shlex.quote(self.value)} | sudo tee {shlex.quote(self.shown)} >/dev/null"

    def permitted(self) -> bool:
        return os.access(self.path, os.W_OK)

    def intent(self) -> Record:
        if self.path.is_symlink():
            raise UnsafeTarget(said("{path} is a symbolic link; refusing to write through it", path=self.path))
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
            return said("original")
        if current.decode("ascii", errors="replace").strip() != str(record["after"]).strip() and not force:
            return said(
                "conflict: {record} is now {value}; left as it is", record=record["shown"], value=current.strip().decode(errors="replace")
            )
        backup = run_dir / record["backup"]
        original = backup.read_bytes() if backup.exists() else record["before"].encode()
        write_in_place(path, original)
        return said("restored")


def move_file(src: Path, dst: Path, expected_sha256: str | None = None, *, src_dir: int | None = None, dst_dir: int | None = None) -> None:
    """Moves a regular file without ever losing it: a hard link then the unlink on one filesystem;
    across filesystems a copy to a temp file beside dst, fsync, sha256 checked, linked into place, and
    only then src deleted. src_dir / dst_dir are handles on the directories (open_dir_within): names are
    then resolved in them, so a directory swapped for a symbolic link cannot redirect the move."""
    s = src.name if src_dir is not None else str(src)
    d = dst.name if dst_dir is not None else str(dst)
    if dst_dir is None:
        dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.stat(d, dir_fd=dst_dir, follow_symlinks=False)
        raise UnsafeTarget(said("{dst} already exists; refusing to overwrite it", dst=dst))
    except FileNotFoundError:
        pass
    try:
        source = os.stat(s, dir_fd=src_dir, follow_symlinks=False)
    except FileNotFoundError:
        raise UnsafeTarget(said("{src} is gone (moved by another run?); nothing was moved", src=src)) from None
    if not stat.S_ISREG(source.st_mode):
        raise UnsafeTarget(said("{src} is not a regular file now; refusing to move it", src=src))
    target_dev = os.fstat(dst_dir).st_dev if dst_dir is not None else existing_ancestor(dst.parent).stat().st_dev

    def sync(fd: int | None, directory: Path) -> None:
        if fd is not None:
            os.fsync(fd)
        else:
            fsync_dir(directory)

    if source.st_dev == target_dev:
        try:  # a link never replaces what another run put at dst meanwhile (a rename would)
            os.link(s, d, src_dir_fd=src_dir, dst_dir_fd=dst_dir, follow_symlinks=False)
        except FileExistsError:
            raise UnsafeTarget(said("{dst} already exists; refusing to overwrite it", dst=dst)) from None
        except FileNotFoundError:
            raise UnsafeTarget(said("{src} is gone (moved by another run?); nothing was moved", src=src)) from None
        sync(dst_dir, dst.parent)
        os.unlink(s, dir_fd=src_dir)
        sync(src_dir, src.parent)
        return
    fd = os.open(s, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=src_dir)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read()
    digest = sha256_bytes(data)
    if expected_sha256 and digest != expected_sha256:
        raise UnsafeTarget(said("{src} changed since it was checked", src=src))
    tmp = f".{dst.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
    tmp_path = tmp if dst_dir is not None else str(dst.parent / tmp)
    out = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dst_dir)
    try:
        with os.fdopen(out, "wb") as written:
            written.write(data)
            written.flush()
            os.fchmod(written.fileno(), source.st_mode & 0o7777)
            os.fsync(written.fileno())
        check = os.open(tmp_path, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dst_dir)
        with os.fdopen(check, "rb") as handle:
            if sha256_bytes(handle.read()) != digest:
                raise OSError(said("the copy of {src} in {parent} does not match the original", src=src, parent=dst.parent))
        os.link(tmp_path, d, src_dir_fd=dst_dir, dst_dir_fd=dst_dir, follow_symlinks=False)  # fails if dst appeared
        os.unlink(tmp_path, dir_fd=dst_dir)
    except FileExistsError:
        os.unlink(tmp_path, dir_fd=dst_dir)
        raise UnsafeTarget(said("{dst} already exists; refusing to overwrite it", dst=dst)) from None
    except BaseException:
        try:
            os.unlink(tmp_path, dir_fd=dst_dir)
        except FileNotFoundError:
            pass
        raise
    sync(dst_dir, dst.parent)
    os.unlink(s, dir_fd=src_dir)
    sync(src_dir, src.parent)


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
    within: Path | None = None  # the scanned tree holding path: reached through handles, never a link
    shown_reason: str = ""  # the reason in the user's language, for the preview (the journal and manifest keep reason)

    @property
    def shown(self) -> str:
        return str(self.path)

    def preview(self) -> str:
        reason = self.shown_reason or (_(self.reason) if self.reason else "")
        return _("move {path} → {destination}", path=self.path, destination=self.destination) + (
            _(" ({reason})", reason=reason) if reason else ""
        )

    def shell(self) -> str:
        source, target = shlex.quote(str(self.path)), shlex.quote(str(self.destination))
        return f"mkdir -p {shlex.quote(str(self.destination.parent))} && mv -n -- {source} {target}"

    def permitted(self) -> bool:
        return os.access(self.path.parent, os.W_OK) and os.access(existing_ancestor(self.destination.parent), os.W_OK)

    def touched(self) -> tuple[Path, ...]:
        return (self.path, self.destination)

    def intent(self) -> Record:
        if self.path.is_symlink() or not self.path.is_file():
            raise UnsafeTarget(said("{path} is not a regular file; refusing to move it", path=self.path))
        digest = sha256_file(self.path)
        if self.expected_sha256 and digest != self.expected_sha256:
            raise UnsafeTarget(said("{path} changed since it was checked; run the check again", path=self.path))
        if self.destination.exists():
            raise UnsafeTarget(said("{destination} already exists; refusing to overwrite it", destination=self.destination))
        if self.within is not None:
            os.close(open_dir_within(self.within, self.path.parent))
        top = existing_ancestor(self.destination.parent)
        return {
            "within": str(self.within) if self.within is not None else None,
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
            raise UnsafeTarget(said("{path} is gone (moved by another run?); nothing was moved", path=self.path))
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
        if self.within is None:
            move_file(self.path, self.destination, self.expected_sha256)
            return
        with dir_within(self.within, self.path.parent) as fd:
            same_dir = fd if self.destination.parent == self.path.parent else None  # a rename: both names in the handle
            move_file(self.path, self.destination, self.expected_sha256, src_dir=fd, dst_dir=same_dir)

    @staticmethod
    def undo(record: Record, run_dir: Path, force: bool = False) -> str:
        src, dst = Path(record["path"]), Path(record["destination"])
        here, there = src.is_file(), dst.is_file()
        if here and not there:  # never moved (killed before the move, or the move was refused)
            withdrawn = MoveFile.withdraw(record)
            _tidy_quarantine(record)  # killed inside the first move: an empty quarantine, or a manifest with no line
            return said("original ({withdrawn})", withdrawn=withdrawn) if withdrawn else said("original")
        if here and there:  # killed between the copy and the delete of a cross-filesystem move
            if sha256_file(dst) == record["sha256"] == sha256_file(src):
                dst.unlink()
                withdrawn = MoveFile.withdraw(record)
                return said("restored ({withdrawn})", withdrawn=withdrawn) if withdrawn else said("restored")
            return said("conflict: both {src} and {dst} exist and differ; left as they are", src=src, dst=dst)
        if not there:
            return said("conflict: {dst} is gone; cannot restore {src}", dst=dst, src=src)
        if sha256_file(dst) != record["sha256"] and not force:
            return said("conflict: {dst} changed after the move; left as it is", dst=dst)
        if record.get("within"):
            with dir_within(Path(record["within"]), src.parent) as fd:
                move_file(dst, src, dst_dir=fd)
        else:
            move_file(dst, src)
        if record.get("manifest"):
            _append_manifest(Path(record["manifest"]), {"restored": str(src), "from": str(dst), "sha256": record["sha256"]})
        _tidy_quarantine(record)
        return said("restored")

    @staticmethod
    def withdraw(record: Record) -> str | None:
        """A manifest line backup() wrote for a move that did not happen, taken out again: the manifest
        keeps as many lines for this file as there are copies of it in the quarantine (none after a
        kill before the move; one when another run moved it meanwhile), rewritten atomically, and
        removed with the directories this run made when nothing else is left in it."""
        manifest = Path(record["manifest"]) if record.get("manifest") else None
        if manifest is None or not manifest.is_file():
            return None
        try:
            if manifest.stat().st_size > (16 << 20):
                return None
            lines = manifest.read_text(encoding="utf-8").splitlines(keepends=True)
        except (OSError, ValueError):
            return None
        mine = {"original": record["path"], "quarantined": record["destination"], "sha256": record["sha256"]}
        entries = [_entry(line) or {} for line in lines]
        listed = [i for i, e in enumerate(entries) if all(e.get(k) == v for k, v in mine.items())]
        restored = sum(1 for e in entries if e.get("from") == record["destination"] and e.get("sha256") == record["sha256"])
        destination = Path(record["destination"])
        present = 1 if destination.is_file() and sha256_file(destination) == record["sha256"] else 0
        if len(listed) - restored <= present:
            return None
        rest = lines[: listed[-1]] + lines[listed[-1] + 1 :]
        if not rest and not record.get("manifest_existed", True):
            manifest.unlink(missing_ok=True)
            _tidy_quarantine(record)
            return said("its line in {file} withdrawn, and the manifest removed: nothing was moved", file=manifest.name)
        atomic_write(manifest, "".join(rest).encode("utf-8"), mode=0o644)
        return said("its line in {file} withdrawn: this run's move never happened", file=manifest.name)


def _entry(line: str) -> Record | None:
    import json

    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _tidy_quarantine(record: Record) -> None:
    """After the last file of a quarantine this run created went back: remove the manifest (when
    every file it lists was restored) and the directories the move created, if they are empty."""
    manifest = Path(record["manifest"]) if record.get("manifest") else None
    if manifest is not None and manifest.exists() and not record.get("manifest_existed", True):
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
        raise UnsafeTarget(said("a display-only fix is never applied by decode-doctor"))


ACTION_KINDS: dict[str, type[Action]] = {cls.kind: cls for cls in (ReplaceFile, WriteTunable, MoveFile)}


@dataclass
class FixPlan:
    finding: Finding
    description: str
    actions: list[Action]
    notes: list[str] = field(default_factory=list)

    def preview(self) -> str:
        lines = [f"{self.finding.code} {self.description}"]
        for action in self.actions:
            lines.extend("    " + line for line in action.preview().splitlines())
        lines.extend("    " + _("note: {note}", note=note) for note in self.notes)
        return "\n".join(lines)
