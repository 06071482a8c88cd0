"""The review of one --model: where its findings and notes collect, the fix that downloads a file
again, what could not be judged, and its summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from decode_doctor.engine import Check, Code, CommandsParams, Context, Finding, FixableCode, FixRef
from decode_doctor.i18n import _
from decode_doctor.models.files import ModelFormatError
from decode_doctor.models.layout import ModelPlace
from decode_doctor.models.modelfiles import read_model_config
from decode_doctor.models.safetensors import tensor_bytes
from decode_doctor.models.tokens import Generation, Tokenizer

from .codes import (
    DAMAGING,
    MDL003,
    MDL006,
    MDL040,
)
from .contract import ArtifactSummary
from .values import as_count, as_number, text_config_of


class ReviewBase:
    """One --model, judged: the findings it gets and its summary (each concern a mixin beside it)."""

    def __init__(self, check: Check, ctx: Context, place: ModelPlace):
        self.check, self.ctx, self.place = check, ctx, place
        self.findings: list[Finding] = []
        self.notes: list[str] = []
        self.headers: dict[Path, dict[str, Any]] = {}
        self.gguf: Any = None
        self.config: dict[str, Any] = {}
        self.damaged: list[str] = []
        self.unknown: list[str] = []
        self.template_unknown: str | None = None  # why the chat template could not be read, said in the user's language

    def add(self, code: Code, message: str, path: Path | None = None, fix: FixRef[CommandsParams] | None = None, **evidence: Any) -> None:
        where = str(path) if path else str(self.place.given)
        evidence = {"model": str(self.place.given), **evidence}
        if fix is not None and isinstance(code, FixableCode):
            self.findings.append(self.check.finding(code, message, evidence=evidence, path=where, fix=fix))
        else:
            self.findings.append(self.check.finding(code, message, evidence=evidence, path=where))
        if code in DAMAGING:
            self.damaged.append(f"{code.code}: {message}")

    def redownload(self, path: Path | None) -> FixRef[CommandsParams] | None:
        place = self.place
        if place.repo is None:
            return None
        command = f"huggingface-cli download {place.repo}"
        if path is not None:
            try:
                command += f" {path.relative_to(place.root)}"
            except ValueError:
                pass
        if place.revision:
            command += f" --revision {place.revision}"
        return FixRef(_("download it again: {command}", command=command), CommandsParams(_("download it again"), (command,)))

    def paths(self) -> None:
        text = str(self.place.given)
        if any(ch.isspace() for ch in text) or not text.isascii():
            self.add(
                MDL040, _("{path}: the path has spaces or non-ASCII characters; unquoted scripts and some loaders break on it.", path=text)
            )

    def ggufs(self) -> list[Path]:
        if self.place.layout == "file":
            return [self.place.root] if self.place.root.suffix == ".gguf" else []
        return sorted(p for p in self.place.root.glob("*.gguf") if p.exists())

    def read_config(self) -> dict[str, Any]:
        path = self.place.root / "config.json"
        if self.place.layout == "file" or not path.exists():
            return {}
        try:
            return text_config_of(read_model_config(path))
        except ModelFormatError as exc:
            if exc.kind != "encoding":  # not UTF-8: the encodings check finds it, and converts it
                self.add(MDL003, str(exc), path)
            return {}

    def coverage(self) -> None:
        """What could not be looked at: a model with no readable config (a directory) or no weight file
        whose header could be read is not judged on what those files hold."""
        place, name = self.place, self.place.given.name
        if place.layout == "file":
            return
        config = place.root / "config.json"
        if not self.config and self.gguf is None:
            cause = None
            if config.is_symlink() and not config.exists():
                why, cause = _("config.json is a link to a missing file ({code})", code=MDL006.code), MDL006.code
            elif not config.exists():
                why = _("there is no config.json")
            else:
                said = next((f for f in self.findings if f.path == str(config)), None)
                why = f"{said.code}: {said.message}" if said else _("config.json could not be read")
                cause = said.code if said else None
            self.ctx.not_judged(_("{model}: context, precision and tokenizer agreement", model=name), why, cause=cause)
        broken = [p.name for p in (*place.root.glob("*.safetensors"), *place.root.glob("*.gguf")) if p.is_symlink() and not p.exists()]
        if broken and not self.headers and self.gguf is None:
            self.ctx.not_judged(
                _("{model}: its weights", model=name),
                _("no weight file could be read ({files}: links to missing files)", files=", ".join(broken[:3])),
            )

    def summary(
        self, trained: int | None, limit: int | None, tokenizer: Tokenizer, generation: Generation, hashed: tuple[int, float | None]
    ) -> ArtifactSummary:
        weights = list(self.headers) + ([self.ggufs()[0]] if self.gguf else [])
        total = sum(tensor_bytes(e) for h in self.headers.values() for k, e in h.items() if k != "__metadata__")
        if self.gguf:
            total += sum(t[2] for t in self.gguf.tensors)
        return ArtifactSummary(
            path=str(self.place.given),
            layout=self.place.layout,
            repo=self.place.repo,
            revision=self.place.revision,
            weight_files=len(weights),
            weight_bytes=total,
            trained_context=trained,
            context_limit=limit,
            rope_theta=as_number(self.config.get("rope_theta")),
            eos_ids=generation.eos_ids,
            chat_template=tokenizer.chat_template
            or bool(self.gguf and self.gguf.meta.get("tokenizer.chat_template"))
            or (None if tokenizer.chat_template is None else False),
            tokenizer_size=tokenizer.size,
            vocab_size=as_count(self.config.get("vocab_size")),
            verified=hashed[0],
            hash_mbps=hashed[1],
            notes=self.notes,
            unknown=self.unknown,
            template_unknown=self.template_unknown,
        )
