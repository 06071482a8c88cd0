"""Crash-safe file primitives: temp file in the same directory, fsync, rename, fsync the directory."""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..i18n import said


class UnsafeTarget(Exception):
    """Raised instead of writing through a symlink or onto something that is not a regular file."""


def sha256_file(path: Path) -> str | None:
    try:
        with open(path, "rb") as handle:
            digest = hashlib.sha256()
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
            return digest.hexdigest()
    except FileNotFoundError:
        return None


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_dir_within(top: Path, directory: Path) -> int:
    """A handle on directory, reached from top one component at a time with O_NOFOLLOW: a component
    swapped for a symbolic link (or a file) since the scan is refused (UnsafeTarget), so a write
    through the handle stays inside the tree that was checked."""
    try:
        parts = directory.relative_to(top).parts
    except ValueError:
        raise UnsafeTarget(said("{directory} is not inside {top}; refusing to write there", directory=directory, top=top)) from None
    flags = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(top, flags)
    for part in parts:
        try:
            child = os.open(part, flags | os.O_NOFOLLOW, dir_fd=fd)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafeTarget(
                    said(
                        "{directory}: {part} is now a symbolic link or not a directory; refusing to write through it",
                        directory=directory,
                        part=part,
                    )
                ) from None
            raise
        os.close(fd)
        fd = child
    return fd


@contextmanager
def dir_within(top: Path, directory: Path) -> Iterator[int]:
    """open_dir_within as a context: the handle is closed however the block ends."""
    fd = open_dir_within(top, directory)
    try:
        yield fd
    finally:
        os.close(fd)


def atomic_write_at(
    dir_fd: int, name: str, data: bytes, *, mode: int | None = None, uid: int | None = None, gid: int | None = None
) -> None:
    """Replaces name in the directory dir_fd with data: a temp file beside it, fsync, rename, fsync the
    directory. Keeps the old mode and owner unless told otherwise; never writes through a link."""
    try:
        old = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):
        raise UnsafeTarget(said("{name} is not a regular file; refusing to replace it", name=name))
    if old is not None:
        mode = old.st_mode & 0o7777 if mode is None else mode
        uid = old.st_uid if uid is None else uid
        gid = old.st_gid if gid is None else gid
    tmp = f".{name}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), 0o644 if mode is None else mode)
            if uid is not None and gid is not None and (uid, gid) != (os.geteuid(), os.getegid()):
                os.fchown(handle.fileno(), uid, gid)
            os.fsync(handle.fileno())
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise
    os.fsync(dir_fd)


def atomic_write(path: Path, data: bytes, *, mode: int | None = None, uid: int | None = None, gid: int | None = None) -> None:
    """atomic_write_at in path's directory."""
    if path.is_symlink():
        raise UnsafeTarget(said("{path} is a symbolic link; refusing to replace it", path=path))
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        atomic_write_at(fd, path.name, data, mode=mode, uid=uid, gid=gid)
    finally:
        os.close(fd)


TEMP_SUFFIX = ".dd-tmp"


def leftover_temps(path: Path) -> list[Path]:
    """Temp files an interrupted atomic_write or move_file of path left beside it."""
    try:
        return sorted(path.parent.glob(f".{glob_escape(path.name)}.*{TEMP_SUFFIX}"))
    except OSError:
        return []


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def _on_kernel_filesystem(path: Path) -> bool:
    """Whether path is a /proc or /sys file (a --root tree's copies are regular files)."""
    resolved = str(path.resolve())
    return resolved.startswith(("/proc/", "/sys/"))


def write_in_place(path: Path, data: bytes) -> None:
    """For kernel tunables (/proc/sys): procfs files cannot be renamed over, only rewritten. A regular
    file standing for one (under --root) is replaced atomically: a kill never leaves it empty."""
    if path.is_symlink():
        raise UnsafeTarget(said("{path} is a symbolic link; refusing to write through it", path=path))
    if not _on_kernel_filesystem(path):
        atomic_write(path, data)
        return
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, data)
        try:
            os.fsync(fd)
        except OSError:  # procfs does not support fsync; the write itself is the commit
            pass
    finally:
        os.close(fd)
