"""Download completeness: shards the index names, safetensors and GGUF headers as their libraries
check them, partial downloads, links to missing blobs, and --verify-hashes."""

from __future__ import annotations

from pathlib import Path

from decode_doctor.i18n import _, said
from decode_doctor.models.files import ModelFormatError, read_config
from decode_doctor.models.ggufheader import read_gguf_header
from decode_doctor.models.layout import HashProgress, dangling_links, digest, incomplete_files, known_hashes
from decode_doctor.models.safetensors import check_shard_name, read_safetensors_header

from .codes import (
    MDL001,
    MDL002,
    MDL003,
    MDL004,
    MDL005,
    MDL006,
    MDL007,
)
from .review import ReviewBase


class IntegrityReview(ReviewBase):
    def integrity(self) -> None:
        place = self.place
        for path in incomplete_files(place):
            size = path.stat().st_size if path.exists() else 0
            self.add(
                MDL005,
                _("{path}: an unfinished download ({size:,} bytes so far).", path=path, size=size),
                path,
                self.redownload(None),
                size=size,
            )
        dangling = {link for link, _target in dangling_links(place)}
        for link, target in dangling_links(place):
            self.add(
                MDL006,
                _("{link} links to {target}, which is missing.", link=link, target=target),
                link,
                self.redownload(link),
                target=target,
            )
        for shard in self._shards(dangling):
            self._safetensors(shard)
        for gguf in self.ggufs():
            try:
                header = read_gguf_header(gguf)
            except ModelFormatError as exc:
                self.add(MDL004, str(exc), gguf, kind=exc.kind)
                continue
            self.gguf = self.gguf or header

    def _shards(self, dangling: set[Path]) -> list[Path]:
        root = self.place.root
        if self.place.layout == "file":
            return [root] if root.suffix == ".safetensors" else []
        index = root / "model.safetensors.index.json"
        if not index.exists():
            return sorted(p for p in root.glob("*.safetensors") if p not in dangling)
        try:
            weight_map = read_config(index).get("weight_map")
            if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
                raise ModelFormatError(said("{name} has no weight_map of tensor names to file names", name=index.name), index)
        except ModelFormatError as exc:
            self.add(MDL003, str(exc), index)
            return sorted(p for p in root.glob("*.safetensors") if p not in dangling)
        shards = []
        try:
            for name in weight_map.values():
                check_shard_name(index, name)
        except ModelFormatError as exc:
            self.add(MDL003, str(exc), index)
            return sorted(p for p in root.glob("*.safetensors") if p not in dangling)
        for name in sorted(set(weight_map.values())):
            shard = root / name
            if shard in dangling:
                continue
            if not shard.exists():
                missing = _("{index} names {shard}, which is missing.", index=index.name, shard=name)
                self.add(MDL001, missing, shard, self.redownload(shard), shard=name)
                continue
            shards.append(shard)
        return shards

    def _safetensors(self, shard: Path) -> None:
        try:
            self.headers[shard] = read_safetensors_header(shard)
        except ModelFormatError as exc:
            code = MDL002 if exc.kind == "truncated" else MDL003
            fix = self.redownload(shard) if code is MDL002 else None
            self.add(code, str(exc), shard, fix, size=shard.stat().st_size)

    def verify(self) -> tuple[int, float | None]:
        known = [k for k in known_hashes(self.place) if k.path.exists()]
        if not known:
            self.notes.append(_("no hashes known to verify (not a Hugging Face cache or --local-dir download)"))
            return 0, None
        progress = HashProgress(sum(k.path.stat().st_size for k in known), self.ctx.progress)
        for item in known:
            actual = digest(item.path, item.algorithm, progress)
            if actual != item.expected:
                message = _(
                    "{path}: {algorithm} is {actual}, but {source} says {expected}.",
                    path=item.path,
                    algorithm=item.algorithm,
                    actual=actual,
                    source=item.source,
                    expected=item.expected,
                )
                self.add(MDL007, message, item.path, self.redownload(item.path), expected=item.expected, actual=actual)
        return len(known), round(progress.mbps, 1)
