"""Prompts of a controlled token length, reproducible from a seed.

Each prompt is a distinct run of common English words (distinct, so a prefix cache cannot answer a
request from an earlier one). Its length is set with the server's own tokenizer when the server has
one (vLLM's and llama.cpp's /tokenize, llama-cpp-python's /extras/tokenize, TGI's /tokenize), else
calibrated from usage.prompt_tokens of two small requests, else estimated, and the report says which.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from decode_doctor.i18n import _, localized, said

from .client import ClientError, Endpoint, fetch

_COMMON_WORDS = """
the of and to in is was that for on with as by at from his her they this had not are but or have were which
one you all been their has would there when who will more no if out so said what up its about into than them
can only other new some could time these two may then do first any like now my such over our even most made
after also did many before must through back years where much your way well down should because each just
those people how too little state good very make world still own see men work long get here between both life
being under never day same another know while last might great old year off come since against go came right
used take three states himself few house use during without again place around however home small found
thought went say part once general high upon school every does got united left number course war until always
away something fact though water less public put think almost hand enough far took head yet government system
better set told nothing night end why called didn find look asked later point knew city next program business
give group toward young days let room president side social given present several order national possible
rather second face per among form important often things looking early white case john become large big need
four within felt along children saw best church ever least power development light thing seemed family
interest want members mind country area others done turned although open god service certain kind problem
began different door thus help sense means whole matter perhaps itself york times law human line above name
example action company hands local show five history whether gave either today act feet across taken past
quite anything seen having death week experience body word half really field car words already themselves
information tell together college shall money period held keep sure free seems real behind cannot miss
political air question making office brought whose special heard major problems ago became federal moment
study available known result street economic boy position reason change south board individual job areas
society west close turn love community true court force full seem care
"""
WORDS = tuple(_COMMON_WORDS.split())
FALLBACK_TOKENS_PER_WORD = 1.3  # common English words in a BPE vocabulary, space included
MAX_TOKENIZE_CALLS = 4  # per prompt: the first guess, then corrections


def words(seed: int, index: int, count: int) -> str:
    """The index-th prompt of a seed, count words long; a longer count extends the same sequence."""
    rng = random.Random(f"decode-doctor:{seed}:{index}")
    return " ".join(rng.choice(WORDS) for _ in range(count))


@dataclass(frozen=True)
class PromptSet:
    seed: int
    target_tokens: int
    method: str  # "tokenizer (POST /tokenize)", "calibrated (usage.prompt_tokens)", "estimated"
    texts: tuple[str, ...]
    tokens: tuple[int | None, ...]  # each text's tokens as the server counts them (None: not counted)
    tokens_per_word: float

    def digest(self) -> str:
        return hashlib.sha256("\n".join(self.texts).encode()).hexdigest()

    def describe(self) -> str:
        counted = [n for n in self.tokens if n is not None]
        if counted:
            low, high = min(counted), max(counted)
            span = f"{low}" if low == high else f"{low}–{high}"
            return _(
                "{count} prompts of {span} tokens ({method}), seed {seed}",
                count=len(self.texts), span=span, method=localized(self.method), seed=self.seed,
            )  # fmt: skip
        return _(
            "{count} prompts of about {tokens} tokens ({method}), seed {seed}",
            count=len(self.texts), tokens=self.target_tokens, method=localized(self.method), seed=self.seed,
        )  # fmt: skip


Counter = Callable[[str], Awaitable[int | None]]


def _count_from(body: Any) -> int | None:
    """A token count from the answers the engines give: vLLM {"count"}, llama.cpp {"tokens": […]},
    TGI [{"id"…}…]."""
    if isinstance(body, dict):
        if isinstance(body.get("count"), int):
            return body["count"]
        if isinstance(body.get("tokens"), list):
            return len(body["tokens"])
    if isinstance(body, list):
        return len(body)
    return None


async def find_tokenizer(endpoint: Endpoint, model: str, timeout: float) -> tuple[str, Counter] | None:
    """The server's tokenizer endpoint, if it has one: (its description, a counting function)."""
    probes = (
        # vLLM reads "prompt", llama.cpp "content", TGI "inputs"; each ignores the others' fields.
        ("/tokenize", lambda text: {"model": model, "prompt": text, "content": text, "inputs": text, "add_special_tokens": False}),
        ("/extras/tokenize", lambda text: {"model": model, "input": text}),  # llama-cpp-python
    )
    for path, body in probes:
        try:
            answer = await fetch(endpoint, "POST", path, body("hello world"), timeout)
            count = _count_from(json.loads(answer.body)) if answer.status == 200 else None
        except (ClientError, ValueError, RecursionError):
            continue
        if count is None:
            continue

        async def counter(text: str, path: str = path, body: Any = body) -> int | None:
            answer = await fetch(endpoint, "POST", path, body(text), timeout)
            return _count_from(json.loads(answer.body)) if answer.status == 200 else None

        return said("tokenizer (POST {path})", path=path), counter
    return None


async def _fit(counter: Counter, seed: int, index: int, target: int, ratio: float) -> tuple[str, int | None]:
    """The index-th prompt with as close to target tokens as the server's tokenizer allows."""
    count = max(1, round(target / ratio))
    best: tuple[str, int | None] = (words(seed, index, count), None)
    seen: dict[int, int] = {}
    for _attempt in range(MAX_TOKENIZE_CALLS):
        text = words(seed, index, count)
        tokens = await counter(text)
        if tokens is None:
            return best
        seen[count] = tokens
        if best[1] is None or abs(tokens - target) < abs(best[1] - target):
            best = (text, tokens)
        if tokens == target:
            break
        step = round((target - tokens) / ratio) or (1 if tokens < target else -1)
        count = max(1, count + step)
        if count in seen:
            break
    return best


async def build(
    count: int,
    target: int,
    seed: int,
    *,
    counter: tuple[str, Counter] | None,
    calibrate: Callable[[str], Awaitable[int | None]] | None,
    progress: Callable[[str], None] = lambda text: None,
    parallel: int = 4,
) -> PromptSet:
    """count prompts of target tokens. calibrate(text) sends a request and returns the server's
    usage.prompt_tokens (or None); it is used when there is no tokenizer."""
    if counter is not None:
        method, count_tokens = counter
        sample = words(seed, -1, 400)
        sample_tokens = await count_tokens(sample)
        if sample_tokens:
            ratio = sample_tokens / 400
            semaphore = asyncio.Semaphore(parallel)
            done = 0

            async def one(index: int) -> tuple[str, int | None]:
                nonlocal done
                async with semaphore:
                    fitted = await _fit(count_tokens, seed, index, target, ratio)
                done += 1
                if done % 16 == 0 or done == count:
                    progress(_("preparing prompts: {done}/{count}", done=done, count=count))
                return fitted

            fitted = await asyncio.gather(*(one(i) for i in range(count)))
            return PromptSet(seed, target, method, tuple(t for t, _ in fitted), tuple(n for _, n in fitted), ratio)
    ratio, method = FALLBACK_TOKENS_PER_WORD, said("estimated: the server has no tokenizer endpoint and reports no usage")
    if calibrate is not None:
        # Two lengths: the difference cancels the chat template's own tokens.
        short, long = await calibrate(words(seed, -2, 8)), await calibrate(words(seed, -2, 208))
        if short is not None and long is not None and long > short:
            ratio, method = (long - short) / 200, said("calibrated from usage.prompt_tokens")
    texts = tuple(words(seed, i, max(1, round(target / ratio))) for i in range(count))
    return PromptSet(seed, target, method, texts, (None,) * count, ratio)
