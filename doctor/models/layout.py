"""Where a model's files are: a Hugging Face directory, the Hugging Face cache layout
(models--org--name/{blobs,refs,snapshots/<revision>}) or GGUF files; what a download left
unfinished; and what the hub says each file's hash is.

The cache keeps every file once, as blobs/<hash>, and links snapshots/<revision>/<name> to it; the
blob of a file stored with Git LFS is named after its sha256, any other after its git blob sha1.
`huggingface-cli download --local-dir` leaves .cache/huggingface/download/<name>.metadata with the
commit, the file's etag (the same sha256 or sha1) and a time.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from decode_doctor.engine.files import open_regular
from decode_doctor.engine.hfcache import ModelPlace, locate
from decode_doctor.engine.units import human_bytes

from ..i18n import _, said

__all__ = ["HashProgress", "KnownHash", "ModelPlace", "dangling_links", "digest", "incomplete_files", "known_hashes", "locate", "walk"]

HEX64 = re.compile(r"[0-9a-f]{64}")
HEX40 = re.compile(r"[0-9a-f]{40}")
SKIP_DIRS = {".git", "__pycache__"}
HASH_BLOCK = 1 << 20


def walk(root: Path) -> Iterator[Path]:
    """Every entry below root, links included but never followed."""
    for directory, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        base = Path(directory)
        for name in dirnames:
            if (base / name).is_symlink():
                yield base / name
        for name in filenames:
            yield base / name


def incomplete_files(place: ModelPlace) -> list[Path]:
    """Files an interrupted download left: *.incomplete in the model's tree or its cache's blobs."""
    found = [p for p in walk(place.root) if p.name.endswith(".incomplete")] if place.layout != "file" else []
    if place.cache_root is not None and (place.cache_root / "blobs").is_dir():
        found += sorted(p for p in (place.cache_root / "blobs").iterdir() if p.name.endswith(".incomplete"))
    return found


def dangling_links(place: ModelPlace) -> list[tuple[Path, str]]:
    if place.layout == "file":
        return []
    return [(p, os.readlink(p)) for p in walk(place.root) if p.is_symlink() and not p.exists()]


@dataclass(frozen=True)
class KnownHash:
    path: Path  # the file as the model names it (a snapshot link, or a file in a --local-dir)
    algorithm: str  # "sha256" or "git-sha1"
    expected: str
    source: str  # where the expected value comes from


def known_hashes(place: ModelPlace) -> list[KnownHash]:
    """The files whose content hash the hub told us: cache blob names, and --local-dir metadata."""
    found = []
    if place.layout == "hf-cache":
        for path in walk(place.root):
            if not path.is_symlink():
                continue
            target = Path(os.readlink(path)).name
            if HEX64.fullmatch(target):
                found.append(KnownHash(path, "sha256", target, "the cache's blob name"))
            elif HEX40.fullmatch(target):
                found.append(KnownHash(path, "git-sha1", target, "the cache's blob name"))
    metadata_dir = place.root / ".cache" / "huggingface" / "download"
    if place.layout != "file" and metadata_dir.is_dir():
        for meta in sorted(metadata_dir.rglob("*.metadata")):
            lines = meta.read_text(errors="replace").splitlines()[:3]
            etag = lines[1].strip().strip('"') if len(lines) > 1 else ""
            named = place.root / meta.relative_to(metadata_dir).with_suffix("")
            if HEX64.fullmatch(etag):
                found.append(KnownHash(named, "sha256", etag, said("{name} (the hub's etag)", name=meta.name)))
            elif HEX40.fullmatch(etag):
                found.append(KnownHash(named, "git-sha1", etag, said("{name} (the hub's etag)", name=meta.name)))
    return found


@dataclass
class HashProgress:
    total: int
    report: Callable[[str], None]
    done: int = 0
    started: float = field(default_factory=time.monotonic)
    last: float = 0.0

    def add(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        if now - self.last >= 0.5:
            self.last = now
            rate = self.done / max(now - self.started, 1e-6)
            left = (self.total - self.done) / max(rate, 1.0)
            self.report(
                _(
                    "hashing {done} of {total}, {rate:,.0f} MB/s, {left:,.0f} s left",
                    done=human_bytes(self.done),
                    total=human_bytes(self.total),
                    rate=rate / 1e6,
                    left=left,
                )
            )

    @property
    def mbps(self) -> float:
        return self.done / max(time.monotonic() - self.started, 1e-6) / 1e6


def digest(path: Path, algorithm: str, progress: HashProgress) -> str:
    """The file's sha256, or its git blob sha1 ("blob <size>\\0" then the content).

    Holes of a sparse file are hashed as the zeros they read as, without reading them (SEEK_DATA
    and SEEK_HOLE): the first read of a hole costs the kernel page-cache work for nothing.
    """
    size = path.stat().st_size
    hasher = hashlib.sha256() if algorithm == "sha256" else hashlib.sha1()
    if algorithm == "git-sha1":
        hasher.update(f"blob {size}\0".encode())
    buffer = bytearray(HASH_BLOCK)
    view = memoryview(buffer)
    zeros = memoryview(bytes(HASH_BLOCK))
    with open_regular(path, buffering=0) as handle:
        for start, end, is_data in _extents(handle.fileno(), size):
            if not is_data:
                for offset in range(start, end, HASH_BLOCK):
                    count = min(HASH_BLOCK, end - offset)
                    hasher.update(zeros[:count])
                    progress.add(count)
                continue
            handle.seek(start)
            left = end - start
            while left > 0:
                count = handle.readinto(view[: min(HASH_BLOCK, left)])
                if not count:
                    raise OSError(said("{path} ended early while it was hashed", path=path))
                hasher.update(view[:count])
                progress.add(count)
                left -= count
    return hasher.hexdigest()


def _extents(fd: int, size: int) -> Iterator[tuple[int, int, bool]]:
    """(start, end, holds data) covering [0, size); all data where the filesystem cannot say."""
    if not hasattr(os, "SEEK_DATA"):
        yield 0, size, True
        return
    position = 0
    while position < size:
        try:
            data = os.lseek(fd, position, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # the filesystem cannot say: read it all
                yield position, size, True
                return
            data = size  # ENXIO: only a hole is left
        if data > position:
            yield position, min(data, size), False
        if data >= size:
            return
        try:
            hole = os.lseek(fd, data, os.SEEK_HOLE)
        except OSError:
            hole = size
        yield data, min(hole, size), True
        position = hole
