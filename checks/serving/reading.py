"""Reading a server without loading it: its /metrics, llama.cpp's /slots and the model list, each a
small bounded GET to the endpoint given and nowhere else."""

from __future__ import annotations

import json
from dataclasses import dataclass

from . import engines, promtext
from .client import ClientError, Endpoint, fetch

OWNERS = {"vllm": "vLLM", "sglang": "SGLang", "llamacpp": "llama.cpp", "me": "llama-cpp-python", "tgi": "TGI"}
METRICS_HINT = {
    "vLLM": "vLLM serves /metrics unless started with --disable-log-stats",
    "SGLang": "start SGLang with --enable-metrics",
    "llama.cpp": "start llama-server with --metrics",
    "llama-cpp-python": "llama-cpp-python's server has no /metrics",
}


@dataclass(frozen=True)
class Reading:
    snapshot: engines.Snapshot | None
    note: str | None  # why there is no snapshot
    model: str | None
    engine: str | None  # from the metrics, else from the model list's owned_by
    reachable: bool


class Unreachable(Exception):
    """Nothing answers at the endpoint's address."""


async def models(endpoint: Endpoint, timeout: float) -> tuple[str | None, str | None]:
    """(the first model id, the engine its owned_by names) from GET {base}/models; raises
    Unreachable when the connection itself fails."""
    try:
        answer = await fetch(endpoint, "GET", endpoint.path("models"), timeout=timeout)
        body = json.loads(answer.body) if answer.status == 200 else None
    except ClientError as exc:
        if exc.kind == "connect":
            raise Unreachable(str(exc)) from None
        return None, None
    except ValueError:
        return None, None
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        return None, None
    first = data[0]
    model = first.get("id") if isinstance(first.get("id"), str) else None
    owner = first.get("owned_by")
    return model, OWNERS.get(owner.lower()) if isinstance(owner, str) else None


async def metrics(endpoint: Endpoint, timeout: float) -> tuple[engines.Snapshot | None, str | None]:
    try:
        answer = await fetch(endpoint, "GET", "/metrics", timeout=timeout)
    except ClientError as exc:
        return None, f"GET /metrics: {exc}"
    if answer.status != 200:
        return None, f"GET /metrics answered HTTP {answer.status}"
    exposition = promtext.parse(answer.body)
    if not exposition.samples:
        return None, "GET /metrics answered, but with no Prometheus samples"
    snap = engines.snapshot(exposition)
    if snap.engine == "llama.cpp":
        snap = snap.with_slots(await slots(endpoint, timeout))
    return snap, None


async def slots(endpoint: Endpoint, timeout: float) -> engines.Slots | None:
    try:
        answer = await fetch(endpoint, "GET", "/slots", timeout=timeout)
        return engines.slots_from(json.loads(answer.body)) if answer.status == 200 else None
    except (ClientError, ValueError):
        return None


async def read(endpoint: Endpoint, timeout: float = 5.0) -> Reading:
    try:
        model, owner = await models(endpoint, timeout)
    except Unreachable as exc:
        return Reading(None, str(exc), None, None, reachable=False)
    snap, note = await metrics(endpoint, timeout)
    reachable = True
    engine = snap.engine if snap is not None and snap.engine != "unknown" else owner
    if note and engine in METRICS_HINT:
        note = f"{note} ({METRICS_HINT[engine]})"
    return Reading(snap, note, model, engine, reachable)
