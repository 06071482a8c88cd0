"""The model directories of a --model tree while the encodings check judges it: which directory a
file belongs to, the files each directory's own evidence decided confidently, and the files it
could not decide alone, kept for the second look (Encodings._with_siblings)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from decode_doctor.engine import Finding
from decode_doctor.i18n import N_

from .files import TextFile

if TYPE_CHECKING:
    from .textenc import Readings, Verdict


@dataclass
class Kept:
    """The bytes of undecided files held for the second look, shared by every directory of a tree:
    a file is held while it is at most file_bytes and all of them together at most tree_bytes."""

    file_bytes: int
    tree_bytes: int
    held: int = 0


@dataclass
class Repository:
    """One model directory while its --model tree is judged: who speaks for its encoding, and the
    files it could not decide alone. Paths only, and the bytes of a few small undecided files."""

    directory: Path
    kept: Kept  # bytes kept of undecided files, shared by every directory of the tree
    confident: dict[str, int] = field(default_factory=dict)  # family: files its own evidence decided confidently
    voices: dict[str, list[tuple[TextFile, str]]] = field(default_factory=dict)  # family: the first few of them, with codec
    narrow: list[tuple[TextFile, str, str, float, Finding]] = field(default_factory=list)  # decided alone, by little
    # undecided, with its refusal, and while they are small its bytes and readings (read again otherwise)
    pending: list[tuple[TextFile, Finding, tuple[bytes, Readings] | None]] = field(default_factory=list)

    def note(self, item: TextFile, data: bytes, verdict: Verdict, found: list[Finding]) -> None:
        from .readings import family_of
        from .siblings import CONFIDENT_BITS, SIBLINGS_READ
        from .textenc import Status

        if verdict.status == Status.AMBIGUOUS and found:
            kept = self.kept
            keep = verdict.found is not None and len(data) <= kept.file_bytes and kept.held + len(data) <= kept.tree_bytes
            kept.held += len(data) if keep else 0
            self.pending.append((item, found[0], (data, verdict.found) if keep and verdict.found else None))
            return
        if verdict.status != Status.CONVERT or not verdict.encoding or verdict.margin is None or item.is_link:
            return
        family = family_of(verdict.encoding)
        if family is None:
            return
        if verdict.margin >= CONFIDENT_BITS:
            self.confident[family] = self.confident.get(family, 0) + 1
            if len(self.voices.setdefault(family, [])) < SIBLINGS_READ:
                self.voices[family].append((item, verdict.encoding))
        elif found:
            self.narrow.append((item, verdict.encoding, verdict.language or N_("no known language"), verdict.margin, found[0]))


MODEL_MARKERS = ("config.json", "tokenizer_config.json", "tokenizer.json", "tokenizer.model", "generation_config.json", "model_index.json")


class Repositories:
    """The model directories of one --model tree: a file's repository is the nearest directory above
    it, inside the tree, that holds a config or tokenizer file (a Hugging Face snapshot is one), else
    its own directory. An undecided file keeps its bytes and readings for the second look while it
    is at most keep_file_bytes and all of them together at most keep_tree_bytes; past that it is
    read again."""

    def __init__(self, root: Path, keep_file_bytes: int, keep_tree_bytes: int) -> None:
        self.root = root
        self.trees: dict[Path, Repository] = {}
        self._model: dict[Path, Path | None] = {}  # a directory: the model directory it is in, if any
        self._kept = Kept(keep_file_bytes, keep_tree_bytes)

    def of(self, path: Path) -> Repository:
        directory = self.nearest(path.parent)
        if directory not in self.trees:
            self.trees[directory] = Repository(directory, self._kept)
        return self.trees[directory]

    def nearest(self, directory: Path) -> Path:
        climbed: list[Path] = []
        current = directory
        while True:
            if current in self._model:
                model = self._model[current]
                break
            if any(os.path.lexists(current / marker) for marker in MODEL_MARKERS):
                model = current
                break
            if current == self.root or self.root not in current.parents:
                model = None  # no model directory above it inside the tree
                break
            climbed.append(current)
            current = current.parent
        self._model.update(dict.fromkeys([*climbed, current], model))
        return model or directory

    def shown(self, directory: Path) -> str:
        """The directory as a person names it: relative to the tree, with a trailing slash."""
        relative = directory.relative_to(self.root) if directory != self.root and self.root in directory.parents else None
        return f"{relative}/" if relative is not None else f"{directory.name or directory}/"
