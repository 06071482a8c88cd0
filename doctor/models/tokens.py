"""What a model's tokenizer and generation files say: the tokens the tokenizer defines, its special
tokens, the chat template, and the ids generation stops at.

transformers reads tokenizer_config.json (eos_token, added_tokens_decoder, chat_template),
special_tokens_map.json and generation_config.json (eos_token_id: an id or a list of them);
tokenizer.json is the Rust tokenizers library's file: model.vocab (a token → id map for BPE and
WordPiece, a list of [token, score] for Unigram) and added_tokens ([{id, content, special}]).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decode_doctor.i18n import _

from .modelfiles import ModelFormatError, read_config

MAX_ID_DIGITS = 12  # no vocabulary has a trillion tokens; int() of a 5,000-digit key raises
TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "[/INST]", "<|im_start|>", "<|assistant|>")
CHAT_NAMES = ("instruct", "chat", "-it", "_it")


@dataclass
class Tokenizer:
    """The union of what tokenizer.json, tokenizer_config.json and special_tokens_map.json say."""

    ids: set[int] = field(default_factory=set)  # every id a token has (empty: tokenizer.json absent)
    by_content: dict[str, int] = field(default_factory=dict)  # added and special tokens
    eos: str | None = None  # the tokenizer's eos token, as text
    pad: str | None = None
    chat_template: bool | None = False  # None: unknown, its file could not be read
    has_json: bool = False
    unreadable: dict[str, str] = field(default_factory=dict)  # file name → why it could not be read

    @property
    def size(self) -> int | None:
        return max(self.ids) + 1 if self.ids else None

    def id_of(self, content: str | None) -> int | None:
        return None if content is None else self.by_content.get(content)

    def defines(self, token_id: int) -> bool:
        return not self.ids or token_id in self.ids


def _content(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _ints(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def _kind(value: Any) -> str:
    return _("a JSON {kind} ({value})", kind=type(value).__name__, value=str(value)[:40])


def read_tokenizer(root: Path) -> tuple[Tokenizer, list[tuple[Path, ModelFormatError]]]:
    """The tokenizer, and (file, why) for every file that exists but does not parse."""
    reader = _TokenizerFiles(root)
    reader.tokenizer_json()
    config = reader.tokenizer_config()
    special = reader.load("special_tokens_map.json") or {}
    tokenizer = reader.tokenizer
    tokenizer.eos = _content(config.get("eos_token")) or _content(special.get("eos_token"))
    tokenizer.pad = _content(config.get("pad_token")) or _content(special.get("pad_token"))
    in_files = any((root / name).is_file() for name in ("chat_template.jinja", "chat_template.json"))
    if bool(config.get("chat_template")) or in_files:
        tokenizer.chat_template = True
    elif "tokenizer_config.json" in tokenizer.unreadable:
        tokenizer.chat_template = None  # it may hold one: unknown, never "no chat template"
    return tokenizer, reader.broken


class _TokenizerFiles:
    """A model directory's tokenizer files, read one by one into one Tokenizer; a file that does not
    parse, or holds a value of the wrong shape, is kept as broken (a finding on that file)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tokenizer = Tokenizer()
        self.broken: list[tuple[Path, ModelFormatError]] = []

    def load(self, name: str) -> dict[str, Any] | None:
        path = self.root / name
        if not path.exists():
            return None
        try:
            return read_config(path)
        except ModelFormatError as exc:
            self.broken.append((path, exc))
            self.tokenizer.unreadable[name] = str(exc)
            return None

    def wrong(self, name: str, what: str) -> None:
        """A value of the wrong shape: the file is broken for what reads it, a finding on that file."""
        error = ModelFormatError(f"{name}: {what}", self.root / name)
        self.broken.append((self.root / name, error))
        self.tokenizer.unreadable[name] = str(error)

    def tokenizer_json(self) -> None:
        data = self.load("tokenizer.json")
        if data is None or not self._shaped(data):
            return
        tokenizer = self.tokenizer
        tokenizer.has_json = True
        found_model = data.get("model")
        model: dict[str, Any] = found_model if isinstance(found_model, dict) else {}
        vocab = model.get("vocab")
        if isinstance(vocab, dict):
            tokenizer.ids.update(v for v in vocab.values() if isinstance(v, int))
            for token in ("<|endoftext|>", "</s>", "<eos>", "<|im_end|>"):
                if isinstance(vocab.get(token), int):
                    tokenizer.by_content.setdefault(token, vocab[token])
        elif isinstance(vocab, list):
            tokenizer.ids.update(range(len(vocab)))
        for added in data.get("added_tokens") or []:
            if isinstance(added, dict) and isinstance(added.get("id"), int) and isinstance(added.get("content"), str):
                tokenizer.ids.add(added["id"])
                tokenizer.by_content[added["content"]] = added["id"]

    def _shaped(self, data: dict[str, Any]) -> bool:
        """Whether tokenizer.json's model, vocab and added tokens have the shapes transformers reads."""
        found_model = data.get("model")
        added_tokens = data.get("added_tokens")
        vocab = found_model.get("vocab") if isinstance(found_model, dict) else None
        if found_model is not None and not isinstance(found_model, dict):
            self.wrong("tokenizer.json", _("model is {found_model}, not an object", found_model=_kind(found_model)))
        elif vocab is not None and not isinstance(vocab, dict | list):
            self.wrong("tokenizer.json", _("model.vocab is {vocab}, not a token → id object or a list", vocab=_kind(vocab)))
        elif added_tokens is not None and not isinstance(added_tokens, list):
            self.wrong("tokenizer.json", _("added_tokens is {added_tokens}, not a list", added_tokens=_kind(added_tokens)))
        else:
            return True
        return False

    def tokenizer_config(self) -> dict[str, Any]:
        config = self.load("tokenizer_config.json") or {}
        decoder = config.get("added_tokens_decoder")
        if decoder is not None and not isinstance(decoder, dict):
            self.wrong("tokenizer_config.json", _("added_tokens_decoder is {decoder}, not an id → token object", decoder=_kind(decoder)))
            return {}
        huge = next((k for k in decoder if len(str(k)) > MAX_ID_DIGITS and str(k).isdecimal()), None) if decoder else None
        if huge is not None:
            self.wrong(
                "tokenizer_config.json",
                _("added_tokens_decoder names id {huge}… ({count:,} digits): not a token id", huge=str(huge)[:20], count=len(str(huge))),
            )
            return {}
        for key, added in (decoder or {}).items():
            if str(key).isascii() and str(key).isdecimal() and _content(added):  # "²" is a digit int() refuses
                self.tokenizer.by_content.setdefault(_content(added) or "", int(key))
                if self.tokenizer.has_json:
                    self.tokenizer.ids.add(int(key))
        return config


@dataclass
class Generation:
    eos_ids: list[int]
    pad_ids: list[int]
    source: str | None  # which file said so
    bos_ids: list[int] = field(default_factory=list)


def read_generation(root: Path, config: dict[str, Any]) -> Generation:
    """The ids generation stops at: generation_config.json's eos_token_id, else config.json's."""
    path = root / "generation_config.json"
    generation: dict[str, Any] = {}
    if path.is_file():
        try:
            generation = read_config(path)
        except ModelFormatError:
            generation = {}
    pad = _ints(generation.get("pad_token_id")) or _ints(config.get("pad_token_id"))
    bos = _ints(generation.get("bos_token_id")) or _ints(config.get("bos_token_id"))
    for data, source in ((generation, "generation_config.json"), (config, "config.json")):
        if _ints(data.get("eos_token_id")):
            return Generation(_ints(data.get("eos_token_id")), pad, source, bos)
    return Generation([], pad, None, bos)


def looks_like_chat(name: str, tokenizer: Tokenizer, generation: Generation) -> bool:
    """An instruction-tuned model: by its name, or because it stops at an end-of-turn token (base
    models' tokenizers often define those tokens too, but never stop at them)."""
    lowered = name.lower()
    turn_ids = {tokenizer.by_content[t] for t in TURN_TOKENS if t in tokenizer.by_content}
    return any(marker in lowered for marker in CHAT_NAMES) or tokenizer.eos in TURN_TOKENS or bool(turn_ids & set(generation.eos_ids))
