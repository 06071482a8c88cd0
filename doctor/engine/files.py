"""Opening files decode-doctor did not create: a FIFO, a device or a socket is refused before any read
can block on it (the open itself does not block: O_NONBLOCK), and links can be refused too."""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path

from ..i18n import N_, _


class NotRegular(OSError):
    """The path is a FIFO, device, socket or directory: never read."""


def kind_of(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return N_("a FIFO")
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return N_("a device")
    if stat.S_ISSOCK(mode):
        return N_("a socket")
    if stat.S_ISDIR(mode):
        return N_("a directory")
    return N_("not a regular file")


def open_regular(path: str | os.PathLike[str], *, follow: bool = True, buffering: int = -1) -> io.BufferedReader | io.FileIO:
    """The file opened for binary reading; NotRegular for anything but a regular file (ELOOP as an
    OSError for a link when follow is False)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(errno.EINVAL, _("{kind}, not a regular file; not read", kind=_(kind_of(mode))), str(path))
        os.set_blocking(fd, True)
        if buffering == 0:
            return io.FileIO(fd, "rb", closefd=True)
        return io.BufferedReader(io.FileIO(fd, "rb", closefd=True), buffer_size=buffering if buffering > 0 else io.DEFAULT_BUFFER_SIZE)
    except BaseException:
        os.close(fd)
        raise


def replace_file(path: Path, data: bytes) -> None:
    """path replaced with data whole or not at all: a temporary file beside it, fsynced, renamed over it
    (a check's own state, such as a quiet bandwidth figure; fixes use fixes.atomic, which also keeps owners)."""
    import tempfile

    try:
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".dd-tmp")
    except OSError as exc:  # named as the file asked for, not the temporary one beside it
        raise type(exc)(exc.errno, exc.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
