"""Which files of a --model tree are text a loader reads, walking the tree for them, and reading them
with a bound: the encodings check's view of the files, before any judgement of their bytes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decode_doctor.engine.files import open_regular
from decode_doctor.engine.hfcache import link_boundary
from decode_doctor.i18n import _

LOADER_NAMES = {
    "config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
    "tokenizer.json",
    "vocab.txt",
    "merges.txt",
    "chat_template.jinja",
    "preprocessor_config.json",
    "added_tokens.json",
    "vocab.json",
    "processor_config.json",
    "adapter_config.json",
}
TEXT_SUFFIXES = {
    ".json",
    ".jsonl",
    ".yaml",
    ".yml",
    ".txt",
    ".jinja",
    ".csv",
    ".tsv",
    ".ini",
    ".cfg",
    ".toml",
    ".md",
    ".py",
    ".xml",
    ".html",
    ".htm",
    ".srt",
    ".vtt",
}
WEIGHT_SUFFIXES = {
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".gguf",
    ".onnx",
    ".h5",
    ".msgpack",
    ".ckpt",
    ".npz",
    ".npy",
    ".model",
    ".tflite",
    ".pb",
    ".ot",
    ".pkl",
    ".tar",
    ".zip",
    ".gz",
}
SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".ipynb_checkpoints"}
MAX_ANALYSE = 64 << 20  # above this a non-UTF-8 file is reported, not converted
NOT_TEXT_NAMES = {"tokenizer.model", "spiece.model", "sentencepiece.bpe.model"}


@dataclass(frozen=True)
class TextFile:
    path: Path  # the path to report (inside the tree; a link if it is one)
    target: Path  # what to read
    tree: Path
    is_link: bool


def is_text_config(name: str) -> bool:
    lower = name.lower()
    suffix = os.path.splitext(lower)[1]
    return lower in LOADER_NAMES or (suffix in TEXT_SUFFIXES and suffix not in WEIGHT_SUFFIXES)


def is_weights(name: str) -> bool:
    lower = name.lower()
    return lower in NOT_TEXT_NAMES or os.path.splitext(lower)[1] in WEIGHT_SUFFIXES


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def walk(given: Path, on_link_out: Any) -> Iterator[TextFile]:
    """Text config files under given, streaming; links are followed only when they stay in the tree."""
    given = Path(os.path.abspath(given))
    if given.is_file() or (given.is_symlink() and not given.is_dir()):
        if not is_weights(given.name):  # a file named on purpose is text unless it is weights
            yield TextFile(given, given.resolve(), given.parent, given.is_symlink())
        return
    root = link_boundary(given)
    for directory, dirnames, filenames in os.walk(given, followlinks=False):
        base = Path(directory)
        for name in list(dirnames):
            entry = base / name
            if name in SKIP_DIRS:
                dirnames.remove(name)
            elif entry.is_symlink():
                dirnames.remove(name)
                on_link_out(entry, entry.resolve(), _("a link to a directory"))
        for name in sorted(filenames):
            if not is_text_config(name):
                continue
            entry = base / name
            if entry.is_symlink():
                target = entry.resolve()
                if not _inside(target, root):
                    on_link_out(entry, target, _("outside the tree"))
                    continue
                yield TextFile(entry, target, given, True)
            else:
                yield TextFile(entry, entry, given, False)


def read_bounded(target: Path) -> bytes:
    """The file's bytes, at most MAX_ANALYSE + 1 of them (one more says it is larger)."""
    with open_regular(target, follow=False) as handle:  # a FIFO named config.json never blocks the check
        return handle.read(MAX_ANALYSE + 1)


def utf8_stream_ok(target: Path) -> bool:
    """Whether the whole file is UTF-8, read a block at a time (a file too large to judge whole)."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        with open_regular(target, follow=False) as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                decoder.decode(block)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True
