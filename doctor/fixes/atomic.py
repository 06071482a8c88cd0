"""Crash-safe file primitives: temp file in the same directory, fsync, rename, fsync the directory."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


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


def atomic_write(path: Path, data: bytes, *, mode: int | None = None, uid: int | None = None, gid: int | None = None) -> None:
    """Replaces path with data; keeps the old mode and owner unless told otherwise."""
    if path.is_symlink():
        raise UnsafeTarget(f"{path} is a symbolic link; refusing to replace it")
    try:
        old = path.stat()
    except FileNotFoundError:
        old = None
    if old is not None:
        mode = old.st_mode & 0o7777 if mode is None else mode
        uid = old.st_uid if uid is None else uid
        gid = old.st_gid if gid is None else gid
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".dd-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), 0o644 if mode is None else mode)
            if uid is not None and gid is not None and (uid, gid) != (os.geteuid(), os.getegid()):
                os.fchown(handle.fileno(), uid, gid)
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(path.parent)


def write_in_place(path: Path, data: bytes) -> None:
    """For kernel tunables (/proc/sys): procfs files cannot be renamed over, only rewritten."""
    if path.is_symlink():
        raise UnsafeTarget(f"{path} is a symbolic link; refusing to write through it")
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, data)
        try:
            os.fsync(fd)
        except OSError:  # procfs does not support fsync; the write itself is the commit
            pass
    finally:
        os.close(fd)
