"""Reading a server without loading it: its /metrics, llama.cpp's /slots and the model list, each a
small bounded GET to the endpoint given and nowhere else."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from decode_doctor.i18n import N_, Said, reason, said

from . import engines, promtext
from .client import ClientError, Endpoint, fetch

OWNERS = {"vllm": "vLLM", "sglang": "SGLang", "llamacpp": "llama.cpp", "me": "llama-cpp-python", "tgi": "TGI"}
METRICS_HINT = {
    "vLLM": N_("vLLM serves /metrics unless started with --disable-log-stats"),
    "SGLang": N_("start SGLang with --enable-metrics"),
    "llama.cpp": N_("start llama-server with --metrics"),
    "llama-cpp-python": N_("llama-cpp-python's server has no /metrics"),
}


def hinted(note: str | None, engine: str | None) -> str | None:
    """Why there is no reading, with how to turn the engine's metrics on when it is known."""
    return said("{note} ({hint})", note=note, hint=Said(METRICS_HINT[engine])) if note and engine in METRICS_HINT else note


@dataclass(frozen=True)
class Reading:
    snapshot: engines.Snapshot | None
    note: str | None  # why there is no snapshot
    model: str | None
    engine: str | None  # from the metrics, else from the model list's owned_by
    reachable: bool


@dataclass(frozen=True)
class Answer:
    """One GET: its status and body, or why there was no HTTP answer (the ClientError's kind and message)."""

    status: int | None
    body: bytes = b""
    error: str | None = None
    kind: str | None = None

    @property
    def answered(self) -> bool:
        return self.status is not None

    def describe(self, path: str) -> str:
        return said("{path} answered HTTP {status}", path=path, status=self.status) if self.answered else (self.error or "")


async def get(endpoint: Endpoint, path: str, timeout: float) -> Answer:
    try:
        answer = await fetch(endpoint, "GET", path, timeout=timeout)
    except ClientError as exc:
        return Answer(None, error=reason(exc), kind=exc.kind)
    return Answer(answer.status, answer.body)


def models_from(answer: Answer) -> tuple[str | None, str | None]:
    """(the first model id, the engine its owned_by names) from GET {base}/models."""
    if answer.status != 200:
        return None, None
    try:
        body = json.loads(answer.body)
    except ValueError:
        return None, None
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        return None, None
    first = data[0]
    model = first.get("id") if isinstance(first.get("id"), str) else None
    owner = first.get("owned_by")
    return model, OWNERS.get(owner.lower()) if isinstance(owner, str) else None


def snapshot_from(answer: Answer) -> tuple[engines.Snapshot | None, str | None]:
    if not answer.answered:
        return None, said("GET /metrics: {error}", error=answer.error)
    if answer.status != 200:
        return None, said("GET /metrics answered HTTP {status}", status=answer.status)
    exposition = promtext.parse(answer.body)
    if not exposition.samples:
        return None, said("GET /metrics answered, but with no Prometheus samples")
    return engines.snapshot(exposition), None


async def slots(endpoint: Endpoint, timeout: float) -> engines.Slots | None:
    answer = await get(endpoint, "/slots", timeout)
    if answer.status != 200:
        return None
    try:
        return engines.slots_from(json.loads(answer.body))
    except ValueError:
        return None


class Unreachable(Exception):
    """Nothing answers at the endpoint's address."""


async def models(endpoint: Endpoint, timeout: float) -> tuple[str | None, str | None]:
    """The model list's first id and owner; raises Unreachable when the connection itself fails or the
    list is not answered (no HTTP answer, or a status other than 200: a redirect, a refusal, an error)."""
    path = endpoint.path("models")
    listing = await get(endpoint, path, timeout)
    if listing.kind == "connect":
        raise Unreachable(listing.error or "")  # a Said: said in the user's language
    if listing.status != 200:
        detail = listing.describe(path) or said("{path} was not answered", path=path)
        raise Unreachable(
            said("{endpoint}: {detail}, not a model list (is it an OpenAI-compatible endpoint?)", endpoint=endpoint.label, detail=detail)
        )
    return models_from(listing)


async def metrics(endpoint: Endpoint, timeout: float) -> tuple[engines.Snapshot | None, str | None]:
    """A reading of /metrics (with llama.cpp's /slots), or why there is none."""
    return await _with_slots(endpoint, *snapshot_from(await get(endpoint, "/metrics", timeout)), timeout)


async def _with_slots(
    endpoint: Endpoint, snap: engines.Snapshot | None, note: str | None, timeout: float
) -> tuple[engines.Snapshot | None, str | None]:
    """llama.cpp's reading with its /slots (its sequence limit); others as they are."""
    if snap is not None and snap.engine == "llama.cpp":
        snap = snap.with_slots(await slots(endpoint, timeout))
    return snap, note


def failure(listing: Answer, metrics: Answer, timeout: float) -> str | None:
    """Why the endpoint is not serving, when neither GET gave a usable answer: nothing listens, it
    accepts and never answers (or drops the connection), or it answers only server errors."""
    if listing.kind == "connect" and metrics.kind == "connect":
        return listing.error
    if not listing.answered and not metrics.answered:
        if listing.kind == "timeout" and metrics.kind == "timeout":
            return said(
                "it accepts connections but answered neither the model list nor /metrics within {seconds} s (a hung server)",
                seconds=format(timeout, "g"),
            )
        return said("no HTTP answer: {listing}; {metrics}", listing=listing.error, metrics=metrics.error)
    statuses = [a.status for a in (listing, metrics) if a.answered]
    if statuses and all(status is not None and status >= 500 for status in statuses):
        model_list = said("the model list")  # Babel does not see a message nested in another's arguments here
        return said(
            "it answers only server errors ({listing}; {metrics})",
            listing=listing.describe(model_list),
            metrics=metrics.describe("/metrics"),
        )
    return None


async def read(endpoint: Endpoint, timeout: float = 5.0) -> Reading:
    """The model list and /metrics, asked together (a hung server costs one timeout, not two)."""
    listing, answer = await asyncio.gather(get(endpoint, endpoint.path("models"), timeout), get(endpoint, "/metrics", timeout))
    broken = failure(listing, answer, timeout)
    if broken:
        return Reading(None, broken, None, None, reachable=False)
    model, owner = models_from(listing)
    snap, note = await _with_slots(endpoint, *snapshot_from(answer), timeout)
    engine = snap.engine if snap is not None and snap.engine != "unknown" else owner
    return Reading(snap, hinted(note, engine), model, engine, reachable=True)
