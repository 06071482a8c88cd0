"""Model artifacts: the incomplete download, the context a model was never trained for, the config
that makes generation run forever, caught before the first request; from headers and small JSON
files only, unless --verify-hashes asks to read every byte."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from decode_doctor.engine import Check, Context, Finding, Needs, Options, option
from decode_doctor.i18n import N_
from decode_doctor.models.layout import locate

from .codes import (
    ARTIFACT_CODES,
)
from .context import ContextReview
from .contract import ArtifactsFacts, ArtifactSummary
from .integrity import IntegrityReview
from .precision import PrecisionReview
from .tokens import TokensReview


@dataclass(frozen=True)
class ArtifactsOptions(Options):
    verify_hashes: bool = option(
        "--verify-hashes", "Read every model file whole and check it against the hash the hub gave (slow).", is_flag=True, default=False
    )


class _Review(IntegrityReview, ContextReview, PrecisionReview, TokensReview):
    """One --model, judged by each concern in turn (review.py and its mixins)."""


class ModelArtifacts(Check):
    name = "model-artifacts"
    looks_at = (
        "each `--model` (a Hugging Face directory, the cache layout `models--org--name/snapshots/…`, or GGUF files), from headers and "
        "small JSON files only: shards the index names but that are missing, truncated or malformed safetensors (overlapping offsets, "
        "gaps, bytes after the last tensor, as the safetensors library checks), truncated GGUFs, `*.incomplete` downloads, snapshot "
        "links to missing blobs; `--context` beyond `max_position_embeddings` without a `rope_scaling` that covers it, inconsistent "
        "`rope_scaling`, `rope_theta` against the GGUF's `rope.freq_base`, a sliding window larger than the context; `torch_dtype` "
        "against the stored dtypes and `quantization_config` against the tensors, mixed-dtype shards, a `--kv-dtype` the engine lacks; "
        "eos, bos and pad ids the tokenizer does not define (or no eos at all), a tokenizer eos that does not stop generation, a chat "
        "model without a chat template, `vocab_size` against the embedding rows and the tokenizer, a `tokenizer.json` that does not "
        "parse; paths with spaces or non-ASCII. `--verify-hashes` reads every file whole and checks it against the hash the hub gave "
        "(cache blob names, `--local-dir` metadata), with a progress line. Fix (display-only, cache): the `huggingface-cli download` "
        "command for the damaged file. Facts: files, bytes, trained context, eos ids, chat template"
    )
    description = N_("each --model's files are complete and its config, context, precision and tokenizer agree")
    codes = ARTIFACT_CODES
    needs = Needs(inputs=("models",))
    options = ArtifactsOptions
    timeout_s = 6 * 3600.0  # --verify-hashes reads hundreds of GB; without it the check takes milliseconds
    facts_type = ArtifactsFacts

    def run(self, ctx: Context) -> list[Finding]:
        findings: list[Finding] = []
        summaries: list[ArtifactSummary] = []
        damaged: dict[str, list[str]] = {}
        for given in ctx.models:
            review = _Review(self, ctx, locate(Path(given)))
            review.paths()
            review.integrity()
            review.config = review.read_config()
            trained, limit = review.context()
            review.precision()
            tokenizer, generation = review.tokens()
            hashed = review.verify() if ctx.option(ArtifactsOptions).verify_hashes else (0, None)
            review.coverage()
            summaries.append(review.summary(trained, limit, tokenizer, generation, hashed))
            findings.extend(review.findings)
            if review.damaged:
                damaged[str(given)] = review.damaged
        ctx.publish(ArtifactsFacts(summaries, damaged))
        return findings
