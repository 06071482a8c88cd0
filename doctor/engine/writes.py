"""The one writer of what decode-doctor produces (reports, the agent's textfile, state files) and the
lock around a store's read-modify-replace.

The target itself is never opened: a temporary file beside it (O_EXCL | O_NOFOLLOW) is written,
fsynced and renamed over it, so a symbolic link at the path is replaced, never written through, and
nothing can block on a FIFO. What rename would wrongly replace (a FIFO, a device, a socket, a
directory) is refused with the reason, judged by lstat; so is a directory of devices (/dev/stdout)."""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..i18n import Said, _, said
from .files import kind_of

TEMP_SUFFIX = ".dd-tmp"
NAME_MAX = 255
LOCK_WAIT_S = 10.0
LOCK_POLL_S = 0.02
KERNEL_TREES = ("/dev", "/proc", "/sys")
_FLAGS = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)


class RefusedTarget(OSError):
    """The path is not one a file may replace; its message is the one-line reason."""

    def __init__(self, path: Path, why: Said) -> None:
        super().__init__(errno.EINVAL, str(why), str(path))

    def __str__(self) -> str:
        return str(self.strerror)


class StoreBusy(OSError):
    """Another process held a store's lock past the bounded wait."""

    def __init__(self, path: Path, waited_s: float) -> None:
        super().__init__(
            errno.EAGAIN, said("{path} is locked by another process; gave up after {seconds:.0f} s", path=path, seconds=waited_s), str(path)
        )

    def __str__(self) -> str:
        return str(self.strerror)


def _in_kernel_tree(directory: Path) -> bool:
    resolved = str(directory.resolve())
    return any(resolved == top or resolved.startswith(top + "/") for top in KERNEL_TREES)


def _refusal(path: Path, dir_fd: int, name: str) -> Said | None:
    """Why name in dir_fd may not be replaced (lstat: a link is judged as itself), or None."""
    try:
        found = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISREG(found.st_mode) or stat.S_ISLNK(found.st_mode):
        return None
    return said("{path} is {kind}; refusing to write there", path=path, kind=_(kind_of(found.st_mode)))


def replace_output(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """path replaced with data whole or not at all, in bounded time: a temporary file beside it, fsynced,
    renamed over it (a reader never sees half a file; a run that dies leaves the last one). A link at
    path is replaced by the file; a FIFO, device, socket or directory there is refused (RefusedTarget)."""
    name = path.name
    if name in ("", ".", ".."):
        raise RefusedTarget(path, said("{path} is not a file name; refusing to write there", path=path))
    directory = path.parent
    if _in_kernel_tree(directory):
        raise RefusedTarget(
            path, said("{path} is in {directory}, where no report is kept; refusing to write there", path=path, directory=directory)
        )
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:  # named as the file asked for
        raise type(exc)(exc.errno, exc.strerror, str(path)) from None
    try:
        why = _refusal(path, dir_fd, name)
        if why is not None:
            raise RefusedTarget(path, why)
        temporary = f".{name[: NAME_MAX - 32]}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FLAGS, 0o600, dir_fd=dir_fd)
        except OSError as exc:
            raise type(exc)(exc.errno, exc.strerror, str(path)) from None
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fchmod(handle.fileno(), mode)
                os.fsync(handle.fileno())
            why = _refusal(path, dir_fd, name)  # swapped for a FIFO or a directory meanwhile
            if why is not None:
                raise RefusedTarget(path, why)
            os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(temporary, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            raise
        try:
            os.fsync(dir_fd)
        except OSError:  # some filesystems cannot sync a directory; the rename stands
            pass
    finally:
        os.close(dir_fd)


def lock_path(store: Path) -> Path:
    return store.with_name(f".{store.name}.lock")


@contextmanager
def locked(store: Path, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """An exclusive lock for store's read-modify-replace (a lock file beside it, never a link, a FIFO or a
    device); StoreBusy when another process holds it past wait_s."""
    path = lock_path(store)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | _FLAGS, 0o644)
    except PermissionError:  # another user's lock file: a read-only handle locks as well
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RefusedTarget(path, said("{path} is a symbolic link; refusing to lock through it", path=path)) from None
        raise
    try:
        found = os.fstat(fd).st_mode
        if not stat.S_ISREG(found):
            raise RefusedTarget(path, said("{path} is {kind}; refusing to lock it", path=path, kind=_(kind_of(found))))
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
            if time.monotonic() >= deadline:
                raise StoreBusy(store, wait_s)
            time.sleep(LOCK_POLL_S)
        yield
    finally:
        os.close(fd)  # releases the lock
