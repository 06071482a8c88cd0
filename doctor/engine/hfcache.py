"""The Hugging Face cache layout, in one place for every feature that reads model files.

The hub cache keeps a repository as models--<org>--<name>/{blobs,refs,snapshots/<revision>}: every
file once, as blobs/<hash>, and snapshots/<revision>/<name> linking to it; refs/main names the
revision `main` resolves to. A user gives the repository directory (the cache's own name for it),
a snapshot directory, or a model id the server reports (org/name).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PREFIXES = ("models--", "datasets--")


@dataclass(frozen=True)
class ModelPlace:
    given: Path
    root: Path  # the directory holding the model's files (a snapshot in the cache), or the file's
    layout: str  # "hf-cache", "directory", "file"
    repo: str | None = None  # org/name, in the cache
    revision: str | None = None
    cache_root: Path | None = None  # models--org--name


def repo_of(cache_root: Path) -> str | None:
    parts = cache_root.name.split("--")
    return "/".join(parts[1:]) if len(parts) >= 3 and parts[0] in ("models", "datasets") else None


def locate(given: Path) -> ModelPlace:
    """Where the model's files are: the snapshot refs/main names (else the newest) for a cache
    repository, the directory or file otherwise."""
    given = Path(os.path.abspath(given))
    if given.is_file():
        return ModelPlace(given, given, "file")
    if given.name.startswith(PREFIXES) and (given / "snapshots").is_dir():
        revision = None
        ref = given / "refs" / "main"
        if ref.is_file():
            with open(ref, "rb") as handle:  # a revision is 40 hex digits: read no more than a line's worth
                revision = handle.read(128).decode("ascii", errors="replace").strip()[:64]
        snapshots = sorted((p for p in (given / "snapshots").iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
        chosen = next((p for p in snapshots if p.name == revision), snapshots[-1] if snapshots else None)
        if chosen is None:
            return ModelPlace(given, given, "hf-cache", repo_of(given), revision, given)
        return ModelPlace(given, chosen, "hf-cache", repo_of(given), chosen.name, given)
    if given.parent.name == "snapshots" and given.parent.parent.name.startswith(PREFIXES):
        cache_root = given.parent.parent
        return ModelPlace(given, given, "hf-cache", repo_of(cache_root), given.name, cache_root)
    return ModelPlace(given, given, "directory")


def link_boundary(given: Path) -> Path:
    """How far links may lead from a model's files: a cache snapshot links into ../../blobs, inside
    its models--*/ directory; elsewhere, the tree given."""
    parts = given.parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] == "snapshots" and parts[i - 1].startswith(PREFIXES):
            return Path(*parts[:i])
    return given


def hub_dir(env: Mapping[str, str]) -> Path:
    """$HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"])
    home = env.get("HF_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache", "huggingface")
    return Path(home) / "hub"


def cached_snapshot(model_id: str, env: Mapping[str, str]) -> Path | None:
    """A model id's local snapshot (org/name → models--org--name/snapshots/<rev>) holding a config.json:
    the revision refs/main names, else the newest."""
    if "/" not in model_id or model_id.count("/") > 1 or ".." in model_id.split("/"):
        return None
    repository = hub_dir(env) / ("models--" + model_id.replace("/", "--"))
    try:
        place = locate(repository) if repository.is_dir() else None
    except OSError:
        return None
    if place is None or place.root == repository or not (place.root / "config.json").is_file():
        return None
    return place.root
