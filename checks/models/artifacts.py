"""Model artifacts: the incomplete download, the context a model was never trained for, the config
that makes generation run forever, caught before the first request; from headers and small JSON
files only, unless --verify-hashes asks to read every byte."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decode_doctor.engine import Check, Code, CommandsParams, Context, EnvRow, Facts, Finding, FixableCode, FixRef, Needs, Option
from decode_doctor.engine.units import human_bytes
from decode_doctor.i18n import N_, _

from .codes import (
    ARTIFACT_CODES,
    DAMAGING,
    MDL001,
    MDL002,
    MDL003,
    MDL004,
    MDL005,
    MDL006,
    MDL007,
    MDL010,
    MDL011,
    MDL012,
    MDL013,
    MDL020,
    MDL021,
    MDL022,
    MDL030,
    MDL031,
    MDL032,
    MDL033,
    MDL034,
    MDL035,
    MDL040,
)
from .layout import HashProgress, ModelPlace, dangling_links, digest, incomplete_files, known_hashes, locate
from .modelfiles import (
    EMBEDDING,
    OUTPUT_HEAD,
    ModelFormatError,
    check_shard_name,
    read_config,
    read_gguf_header,
    read_model_config,
    read_safetensors_header,
    tensor_bytes,
)
from .tokens import Generation, Tokenizer, looks_like_chat, read_generation, read_tokenizer

ROPE_TYPES = {"default", "linear", "dynamic", "yarn", "longrope", "su", "llama3", "mrope"}
FLOAT_DTYPES = ("BF16", "F16", "F32")
DEFAULT_ROPE_THETA = 10000.0  # transformers' default when config.json has no rope_theta


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


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    for nested in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(nested), dict):
            return {**config, **config[nested]}
    return config


NUMBER_LIMIT = 1e300  # a config value beyond this is not a number any loader computes with


def _number(value: Any) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    if isinstance(value, int) and abs(value) > NUMBER_LIMIT:  # float() of a 400-digit integer overflows
        return None
    return float(value) if math.isfinite(value) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 1 << 40 else None


def context_limit(text: dict[str, Any]) -> tuple[int | None, int | None]:
    """(the trained context, what rope_scaling stretches it to)."""
    trained = _count(text.get("max_position_embeddings"))
    scaling = text.get("rope_scaling")
    if trained is None or not isinstance(scaling, dict):
        return trained, trained
    kind = scaling.get("rope_type") or scaling.get("type")
    factor = _number(scaling.get("factor"))
    if kind in ("linear", "dynamic", "yarn") and factor and factor > 1:
        original = _count(scaling.get("original_max_position_embeddings")) or trained
        return trained, max(trained, int(original * min(factor, 1 << 20)))
    return trained, trained


class _Review:
    """One --model, judged: the findings it gets and its summary."""

    def __init__(self, check: ModelArtifacts, ctx: Context, place: ModelPlace):
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

    # --- the checks, in order ---

    def paths(self) -> None:
        text = str(self.place.given)
        if any(ch.isspace() for ch in text) or not text.isascii():
            self.add(
                MDL040, _("{path}: the path has spaces or non-ASCII characters; unquoted scripts and some loaders break on it.", path=text)
            )

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
        for gguf in self._ggufs():
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
                raise ModelFormatError(f"{index.name} has no weight_map of tensor names to file names", index)
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

    def _ggufs(self) -> list[Path]:
        if self.place.layout == "file":
            return [self.place.root] if self.place.root.suffix == ".gguf" else []
        return sorted(p for p in self.place.root.glob("*.gguf") if p.exists())

    def read_config(self) -> dict[str, Any]:
        path = self.place.root / "config.json"
        if self.place.layout == "file" or not path.exists():
            return {}
        try:
            return _text_config(read_model_config(path))
        except ModelFormatError as exc:
            if exc.kind != "encoding":  # not UTF-8: the encodings check finds it, and converts it
                self.add(MDL003, str(exc), path)
            return {}

    def context(self) -> tuple[int | None, int | None]:
        text = self.config
        trained, limit = context_limit(text)
        meta = self.gguf.meta if self.gguf else {}
        arch = meta.get("general.architecture")
        gguf_context = _count(meta.get(f"{arch}.context_length"))
        if trained is None and gguf_context:
            trained = limit = gguf_context
        self._rope_scaling(text)
        served = self.ctx.options.get("context")
        if served and limit and served > limit:
            source = "max_position_embeddings" if text.get("max_position_embeddings") else _("the GGUF's context_length")
            if limit > (trained or 0):
                stretched = _(" (rope_scaling stretches it to {limit:,})", limit=limit)
            else:
                stretched = _(" and no rope_scaling stretches it")
            message = _(
                "{model}: --context {served:,} is beyond the {trained:,} tokens of its {source}{stretched}; serve at most {limit:,}.",
                model=self.place.given.name,
                served=served,
                trained=trained,
                source=source,
                stretched=stretched,
                limit=limit,
            )
            self.add(MDL010, message, served=served, trained=trained, limit=limit)
        theta = _number(text.get("rope_theta"))
        freq_key = f"{arch}.rope.freq_base"
        gguf_theta = _number(meta.get(freq_key))
        if text and gguf_theta is not None and (theta or DEFAULT_ROPE_THETA) != gguf_theta:
            if theta:
                said = "rope_theta " + format(theta, "g")
            else:
                said = _("no rope_theta (transformers' default {theta})", theta=format(DEFAULT_ROPE_THETA, "g"))
            message = _(
                "{model}: config.json has {said}, the GGUF's {key} is {value}.",
                model=self.place.given.name,
                said=said,
                key=freq_key,
                value=format(gguf_theta, "g"),
            )
            self.add(MDL012, message, config_rope_theta=theta, gguf_freq_base=gguf_theta)
        window = _count(text.get("sliding_window"))
        if window and trained and window > trained and text.get("use_sliding_window") is not False:
            message = _(
                "{model}: sliding_window {window:,} is larger than max_position_embeddings {trained:,}.",
                model=self.place.given.name,
                window=window,
                trained=trained,
            )
            self.add(MDL013, message, sliding_window=window, max_position_embeddings=trained)
        return trained, limit

    def _rope_scaling(self, text: dict[str, Any]) -> None:
        scaling = text.get("rope_scaling")
        if scaling is None:
            return
        name = self.place.given.name
        if not isinstance(scaling, dict):
            wrong = _("{model}: rope_scaling is {kind}, not an object.", model=name, kind=type(scaling).__name__)
            self.add(MDL011, wrong, rope_scaling=str(scaling)[:200])
            return
        named = [k for k in (scaling.get("rope_type"), scaling.get("type")) if k is not None]
        problems = [_("its type is {value}, not a name", value=json.dumps(k)[:40]) for k in named if not isinstance(k, str)]
        kinds = {k for k in named if isinstance(k, str)}
        if problems:
            pass
        elif not kinds:
            problems.append(_("it names no type"))
        elif len(kinds) > 1:
            problems.append(_("rope_type and type disagree ({kinds})", kinds=", ".join(sorted(map(str, kinds)))))
        elif not kinds <= ROPE_TYPES:
            problems.append(_("type {kind} is not one engines know", kind=repr(next(iter(kinds)))))
        kind = next(iter(kinds), None)
        factor = scaling.get("factor")
        number = _number(factor)
        if kind in ("linear", "dynamic", "yarn", "llama3") and not (number is not None and number >= 1):
            problems.append(_("factor is {value}, not a number of at least 1", value=repr(factor)))
        for key in ("factor", "original_max_position_embeddings"):
            value = scaling.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 1 << 40:
                problems.append(_("{key} is a {digits}-digit number", key=key, digits=len(str(abs(value)))))
        original = _count(scaling.get("original_max_position_embeddings"))
        trained = _count(text.get("max_position_embeddings"))
        if original and trained and original > trained:
            problems.append(
                _(
                    "original_max_position_embeddings {original:,} is above max_position_embeddings {trained:,}",
                    original=original,
                    trained=trained,
                )
            )
        if problems:
            inconsistent = _("{model}: rope_scaling is inconsistent: {problems}.", model=name, problems=_("; ").join(problems))
            self.add(MDL011, inconsistent, rope_scaling=scaling)

    def precision(self) -> None:
        name = self.place.given.name
        if self.headers:
            self._quantization(name)
        kv = self.ctx.options.get("kv_dtype")
        if self.gguf is not None and not self.headers and kv == "fp8":
            self.add(
                MDL021,
                _("{model}: a GGUF model is served by llama.cpp, which has no fp8 KV cache; budget q8_0 with --kv-dtype int8.", model=name),
            )
        elif self.headers and kv in ("int8", "int4"):
            message = _(
                "{model}: safetensors models are served by vLLM or TGI, whose KV caches are fp16/bf16 or fp8; "
                "--kv-dtype {kv} budgets a cache they do not have.",
                model=name,
                kv=kv,
            )
            self.add(MDL021, message, kv_dtype=kv)

    def _quantization(self, name: str) -> None:
        entries = [entry for header in self.headers.values() for key, entry in header.items() if key != "__metadata__"]
        names = [key for header in self.headers.values() for key in header if key != "__metadata__"]
        dtypes = {entry["dtype"] for entry in entries}
        packed = any(n.endswith(("qweight", "weight_packed")) for n in names) or any(d.startswith("F8") for d in dtypes)
        quant = self.config.get("quantization_config")
        method = str(quant.get("quant_method") or "") if isinstance(quant, dict) else ""
        expects = {
            "gptq": lambda: any(n.endswith("qweight") for n in names),
            "awq": lambda: any(n.endswith("qweight") for n in names),
            "fp8": lambda: any(d.startswith("F8") for d in dtypes),
            "fbgemm_fp8": lambda: any(d.startswith("F8") for d in dtypes),
            "compressed-tensors": lambda: packed or "I8" in dtypes,
        }
        if method in expects and not expects[method]():
            stored = "/".join(sorted(dtypes & set(FLOAT_DTYPES))) or _("unquantized")
            message = _(
                "{model}: quantization_config says {method}, but the weights are stored {stored}, with none of its tensors.",
                model=name,
                method=method,
                stored=stored,
            )
            self.add(MDL020, message, quant_method=method, stored=sorted(dtypes))
        elif packed and not method:
            self.add(MDL020, _("{model}: the weights hold quantized tensors, but config.json has no quantization_config.", model=name))
        if packed or method:
            return
        dominant = {shard: _dominant(header) for shard, header in self.headers.items()}
        kinds = {d for d in dominant.values() if d}
        if len(kinds) > 1:
            listing = ", ".join(f"{shard.name} {kind}" for shard, kind in sorted(dominant.items()) if kind)
            mixed = _("{model}: the shards store different dtypes: {listing}.", model=name, listing=listing)
            self.add(MDL022, mixed, dtypes={s.name: d for s, d in dominant.items()})
            return
        stored_as = next(iter(kinds), None)
        declared = self.config.get("torch_dtype") or self.config.get("dtype")
        if (declared, stored_as) in (("float16", "BF16"), ("bfloat16", "F16")):
            if stored_as == "BF16":
                risk = _("cast at load, they can overflow to inf (8 exponent bits down to 5)")
            else:
                risk = _("cast at load, they lose mantissa bits (10 down to 7)")
            message = _(
                "{model}: torch_dtype is {declared}, but the weights are stored {stored}: {risk}.",
                model=name,
                declared=declared,
                stored=stored_as,
                risk=risk,
            )
            self.add(MDL020, message, torch_dtype=declared, stored=stored_as)

    def tokens(self) -> tuple[Tokenizer, Generation]:
        root = self.place.root if self.place.layout != "file" else self.place.root.parent
        tokenizer, broken = (Tokenizer(), []) if self.place.layout == "file" else read_tokenizer(root)
        for path, error in broken:
            if error.kind != "encoding":
                self.add(MDL034 if path.name == "tokenizer.json" else MDL003, str(error), path)
            else:  # the encodings check's to judge; what it holds is unknown here until it is UTF-8
                held = _("its chat template and special tokens") if path.name == "tokenizer_config.json" else _("what it holds")
                self.ctx.not_judged(
                    _("{model}: {what}", model=self.place.given.name, what=held),
                    _("{error}; the encodings check judges its encoding", error=error),
                )
        generation = read_generation(root, self.config) if self.place.layout != "file" else Generation([], [], None)
        name = self.place.given.name
        if self.gguf is not None and not self.config:
            self._gguf_tokens(name)
            return tokenizer, generation
        if not self.config:
            return tokenizer, generation
        for file, why in tokenizer.unreadable.items():
            self.unknown.append(f"{'chat template' if file == 'tokenizer_config.json' else file} unknown ({why})")
            if file == "tokenizer_config.json":
                self.template_unknown = _("chat template unknown ({why})", why=why)
        if not generation.eos_ids and tokenizer.eos is None and not tokenizer.unreadable:
            self.add(
                MDL030,
                _("{model}: neither generation_config.json, config.json nor the tokenizer names an end-of-sequence token.", model=name),
            )
        undefined = [i for i in generation.eos_ids if not tokenizer.defines(i)]
        if undefined and tokenizer.has_json:
            message = _(
                "{model}: {source} stops at {ids}, which the tokenizer ({size:,} ids) does not define.",
                model=name,
                source=generation.source,
                ids=", ".join(map(str, undefined)),
                size=tokenizer.size,
            )
            self.add(MDL030, message, eos_token_id=generation.eos_ids, tokenizer_size=tokenizer.size)
        for what, ids in (("bos_token_id", generation.bos_ids), ("pad_token_id", generation.pad_ids)):
            unknown = [i for i in ids if not tokenizer.defines(i)]
            if unknown and tokenizer.has_json:
                message = _(
                    "{model}: {key} {ids} is not a token of the tokenizer ({size:,} ids).",
                    model=name,
                    key=what,
                    ids=", ".join(map(str, unknown)),
                    size=tokenizer.size,
                )
                if what == "bos_token_id":
                    self.add(MDL031, message, bos_token_id=ids)
                else:
                    self.add(MDL031, message, pad_token_id=ids)
        turn = tokenizer.id_of(tokenizer.eos)
        if turn is not None and generation.eos_ids and turn not in generation.eos_ids:
            message = _(
                "{model}: the tokenizer's eos_token {eos} ({id}) is not among {source}'s eos_token_id {ids}: "
                "generation runs past the end of a turn.",
                model=name,
                eos=tokenizer.eos,
                id=turn,
                source=generation.source,
                ids=generation.eos_ids,
            )
            self.add(MDL035, message, eos_token=tokenizer.eos, eos_token_id=generation.eos_ids)
        if set(generation.pad_ids) & set(generation.eos_ids):
            self.notes.append(_("pad_token_id is an eos id (fine for serving; batched training must mask it)"))
        if looks_like_chat(name, tokenizer, generation) and tokenizer.chat_template is False:
            self.add(
                MDL032,
                _("{model}: an instruction-tuned model, but no chat template in tokenizer_config.json or chat_template.jinja.", model=name),
            )
        self._vocab(name, tokenizer)
        return tokenizer, generation

    def _gguf_tokens(self, name: str) -> None:
        meta = self.gguf.meta
        count = _count(meta.get("tokenizer.ggml.tokens"))
        eos = meta.get("tokenizer.ggml.eos_token_id")
        if eos is None:
            self.add(MDL030, _("{model}: the GGUF names no tokenizer.ggml.eos_token_id.", model=name))
        elif count and isinstance(eos, int) and eos >= count:
            beyond = _("{model}: tokenizer.ggml.eos_token_id {eos} is beyond its {count:,} tokens.", model=name, eos=eos, count=count)
            self.add(MDL030, beyond, eos_token_id=eos)
        chat = "instruct" in name.lower() or "chat" in name.lower()
        if chat and not meta.get("tokenizer.chat_template"):
            self.add(MDL032, _("{model}: an instruction-tuned model, but the GGUF has no tokenizer.chat_template.", model=name))

    def _vocab(self, name: str, tokenizer: Tokenizer) -> None:
        vocab = _count(self.config.get("vocab_size"))
        if vocab is None:
            return
        for pattern, what in ((EMBEDDING, _("embedding")), (OUTPUT_HEAD, _("output head"))):
            rows = next(
                (
                    e["shape"][0]
                    for h in self.headers.values()
                    for k, e in h.items()
                    if k != "__metadata__" and pattern.search(k) and e["shape"]
                ),
                None,
            )
            if rows is not None and rows != vocab:
                message = _(
                    "{model}: config.json's vocab_size is {vocab:,}, the {matrix} matrix has {rows:,} rows.",
                    model=name,
                    vocab=vocab,
                    matrix=what,
                    rows=rows,
                )
                self.add(MDL033, message, vocab_size=vocab, rows=rows)
                return
        if tokenizer.size and tokenizer.size > vocab:
            message = _(
                "{model}: the tokenizer defines ids up to {last:,}, beyond config.json's vocab_size {vocab:,}.",
                model=name,
                last=tokenizer.size - 1,
                vocab=vocab,
            )
            self.add(MDL033, message, vocab_size=vocab, tokenizer_size=tokenizer.size)

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
        weights = list(self.headers) + ([self._ggufs()[0]] if self.gguf else [])
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
            rope_theta=_number(self.config.get("rope_theta")),
            eos_ids=generation.eos_ids,
            chat_template=tokenizer.chat_template
            or bool(self.gguf and self.gguf.meta.get("tokenizer.chat_template"))
            or (None if tokenizer.chat_template is None else False),
            tokenizer_size=tokenizer.size,
            vocab_size=_count(self.config.get("vocab_size")),
            verified=hashed[0],
            hash_mbps=hashed[1],
            notes=self.notes,
            unknown=self.unknown,
            template_unknown=self.template_unknown,
        )


def _dominant(header: dict[str, Any]) -> str | None:
    weight: dict[str, int] = {}
    for key, entry in header.items():
        if key != "__metadata__" and entry["dtype"] in FLOAT_DTYPES:
            weight[entry["dtype"]] = weight.get(entry["dtype"], 0) + tensor_bytes(entry)
    return max(weight, key=weight.__getitem__) if weight else None


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
    options = (Option("--verify-hashes", "Read every model file whole and check it against the hash the hub gave (slow).", is_flag=True),)
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
            hashed = review.verify() if ctx.options.get("verify_hashes") else (0, None)
            review.coverage()
            summaries.append(review.summary(trained, limit, tokenizer, generation, hashed))
            findings.extend(review.findings)
            if review.damaged:
                damaged[str(given)] = review.damaged
        ctx.publish(ArtifactsFacts(summaries, damaged))
        return findings
