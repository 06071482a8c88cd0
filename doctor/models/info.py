"""What a model's files say about it (read by modelfiles.py from headers and config.json): the values
every model feature sizes, budgets, plans and checks from."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decode_doctor.engine.facts import REPORTED, values_dict
from decode_doctor.i18n import N_, ngettext
from decode_doctor.i18n.labels import Labelled


class ModelFormat(Labelled):
    """How a model's weights are stored (the names are names: only config-only is words)."""

    SAFETENSORS = "safetensors"
    GGUF = "gguf"
    PYTORCH_BIN = "pytorch-bin"
    CONFIG_ONLY = "config-only", N_("config-only")  # a config.json and no weight files


@dataclass
class ModelInfo:
    path: str
    format: ModelFormat
    architecture: str | None = None
    layers: int | None = None
    attention_heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    hidden_size: int | None = None
    vocab_size: int | None = None
    max_context: int | None = None
    kv_latent_dim: int | None = None  # MLA (DeepSeek): one compressed vector per token and layer
    experts: int | None = None
    experts_per_token: int | None = None
    tied_embeddings: bool = False
    weight_bytes: int = 0
    bytes_by_dtype: dict[str, int] = field(default_factory=dict)
    embedding_bytes: int = 0
    output_head_bytes: int = 0
    not_decode_bytes: int = 0  # vision/audio towers: in memory, not read per token
    expert_bytes: int = 0
    tensor_count: int = 0
    files: list[str] = field(default_factory=list)
    quantization: str | None = None
    notes: list[str] = field(default_factory=list)
    sliding_window: int | None = None  # GGUF: the attention window of the sliding layers
    label: str | None = None  # the repository's name, for a snapshot in the Hugging Face cache
    recurrent: bool = False  # GGUF: state-space (ssm.*) or linear-attention layers, whose state is not sized from the header
    # config.json as read, for sizing from it; kept out of reports and comparisons (facts stay small)
    config: dict[str, Any] | None = field(default=None, repr=False, compare=False, metadata={REPORTED: False})

    @property
    def dominant_dtype(self) -> str | None:
        """The stored type holding most of the weight bytes (F16, Q4_0, BF16…), None when none is known."""
        return max(self.bytes_by_dtype, key=self.bytes_by_dtype.__getitem__) if self.bytes_by_dtype else None

    @property
    def name(self) -> str:
        return self.label or Path(self.path).name

    @property
    def decode_read_bytes(self) -> int:
        """Weight bytes one decode step reads: the embedding table is gathered (a row per token),
        except when it doubles as the output head; towers are skipped; MoE reads its active experts."""
        read: float = self.weight_bytes - self.not_decode_bytes
        if not self.tied_embeddings:
            read -= self.embedding_bytes
        if self.experts and self.experts_per_token and self.expert_bytes:
            read -= self.expert_bytes * (1 - self.experts_per_token / self.experts)
        return int(read)

    def missing_hyperparameters(self) -> list[str]:
        missing = [n for n in ("layers", "kv_heads", "head_dim") if getattr(self, n) is None]
        return [] if self.kv_latent_dim and self.layers else missing

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = values_dict(self)
        data["decode_read_bytes"] = self.decode_read_bytes
        return data


def sequences(count: int) -> str:
    return ngettext("{count:,} sequence", "{count:,} sequences", count)
