"""The model-artifacts check's contract: what it publishes about each model (ArtifactsFacts), for the
checks that read it (the decode budget names the models it cannot judge)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from decode_doctor.engine import EnvRow, Facts
from decode_doctor.engine.units import human_bytes
from decode_doctor.i18n import _


@dataclass(frozen=True)
class ArtifactSummary:
    path: str
    layout: str
    repo: str | None
    revision: str | None
    weight_files: int
    weight_bytes: int
    trained_context: int | None
    context_limit: int | None  # what the rope_scaling stretches it to
    rope_theta: float | None
    eos_ids: list[int]
    chat_template: bool | None  # None: unknown (its file could not be read; see unknown)
    tokenizer_size: int | None
    vocab_size: int | None
    verified: int = 0
    hash_mbps: float | None = None
    notes: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # what could not be read, and why
    template_unknown: str | None = None  # why the chat template is unknown, when it is

    def line(self) -> str:
        where = f"{self.repo}@{(self.revision or '?')[:12]}" if self.repo else self.path
        parts = [_("{count} weight file(s), {size}", count=self.weight_files, size=human_bytes(self.weight_bytes))]
        if self.trained_context:
            if (self.context_limit or 0) > self.trained_context:
                stretched = _(" ({limit:,} with rope_scaling)", limit=self.context_limit)
            else:
                stretched = ""
            parts.append(_("trained context {context:,}{stretched}", context=self.trained_context, stretched=stretched))
        if self.eos_ids:
            parts.append(_("stops at {ids}", ids=", ".join(map(str, self.eos_ids))))
        if self.chat_template is None:
            parts.append(self.template_unknown or _("chat template unknown"))
        else:
            parts.append(_("chat template") if self.chat_template else _("no chat template"))
        if self.verified:
            parts.append(_("{count} file(s) verified at {mbps:,.0f} MB/s", count=self.verified, mbps=self.hash_mbps))
        return _("{where}: {parts}", where=where, parts=_("; ").join(parts + self.notes))


@dataclass(frozen=True)
class ArtifactsFacts(Facts):
    models: list[ArtifactSummary] = field(default_factory=list)
    # models whose files are incomplete or broken → what is wrong ("MDL003: config.json: …"), for the
    # checks that cannot judge them (the decode budget) to name
    damaged: dict[str, list[str]] = field(default_factory=dict)

    def summary(self) -> list[str]:
        return [model.line() for model in self.models]

    def environment(self) -> list[EnvRow]:
        return [EnvRow(_("model {name}", name=Path(m.path).name), m.line(), ("MDL",)) for m in self.models]
