"""Image files under a dataset, streamed (a directory stack, never the whole list); links reported,
never followed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from decode_doctor.i18n import os_reason

IMAGE_SUFFIXES = {
    ".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".gif", ".webp", ".bmp", ".dib", ".tif", ".tiff", ".heic", ".heif", ".avif", ".tga", ".ico"
}  # fmt: skip


def iter_images(root: Path, links: list[str], appledouble: list[str], unlisted: list[tuple[str, str]] | None = None) -> Iterator[Path]:
    """Image files under root, streaming (a directory stack, never the whole list): links reported,
    not followed; ._* files and directories named like images set aside; directories that cannot be
    listed go to unlisted (path, why)."""
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            entries = os.scandir(directory)
        except OSError as exc:
            if unlisted is not None:
                unlisted.append((str(directory), os_reason(exc)))
            continue
        with entries:
            for entry in entries:
                if entry.is_symlink():
                    links.append(entry.path)
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                    continue
                suffix = os.path.splitext(entry.name)[1].lower()
                if suffix not in IMAGE_SUFFIXES or not entry.is_file(follow_symlinks=False):
                    continue
                if entry.name.startswith("._"):
                    appledouble.append(entry.path)
                    continue
                yield Path(entry.path)


def scoped_images(root: Path, scope: frozenset[Path] | None) -> Iterator[Path]:
    """The files of scope that are images under root: what a re-check after a fix judges again.
    Links are never followed, and a file moved away (quarantined) is simply not there."""
    for path in sorted(scope or ()):
        if root not in path.parents or path.suffix.lower() not in IMAGE_SUFFIXES or path.name.startswith("._"):
            continue
        try:
            if path.is_symlink() or not path.is_file():
                continue
        except OSError:
            continue
        yield path
