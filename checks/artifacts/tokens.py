"""Tokenizer agreement: eos, bos and pad ids, a chat template, vocab_size against the embedding rows."""

from __future__ import annotations

from decode_doctor.i18n import _, localized, reason
from decode_doctor.models.files import EMBEDDING, OUTPUT_HEAD
from decode_doctor.models.tokens import Generation, Tokenizer, looks_like_chat, read_generation, read_tokenizer

from .codes import (
    MDL003,
    MDL030,
    MDL031,
    MDL032,
    MDL033,
    MDL034,
    MDL035,
)
from .review import ReviewBase
from .values import as_count


class TokensReview(ReviewBase):
    def tokens(self) -> tuple[Tokenizer, Generation]:
        root = self.place.root if self.place.layout != "file" else self.place.root.parent
        tokenizer, broken = (Tokenizer(), []) if self.place.layout == "file" else read_tokenizer(root)
        for path, error in broken:
            if error.kind != "encoding":
                self.add(MDL034 if path.name == "tokenizer.json" else MDL003, localized(reason(error)), path)
            else:  # the encodings check's to judge; what it holds is unknown here until it is UTF-8
                held = _("its chat template and special tokens") if path.name == "tokenizer_config.json" else _("what it holds")
                self.ctx.not_judged(
                    _("{model}: {what}", model=self.place.given.name, what=held),
                    _("{error}; the encodings check judges its encoding", error=localized(reason(error))),
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
        count = as_count(meta.get("tokenizer.ggml.tokens"))
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
        vocab = as_count(self.config.get("vocab_size"))
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
