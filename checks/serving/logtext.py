"""Server output as users paste it into tickets, read line by line: vLLM's periodic stats lines and
startup lines, SGLang's batch lines, llama-server's slot lines. Each line is bounded and scanned for
fixed keys (no regular expression), so a hostile paste costs linear time.

What is read is the same shape the live check reads from /metrics (engines.Snapshot), so the same
diagnosis judges it and the findings cite the line they came from.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

MAX_LINES = 200_000
MAX_LINE_CHARS = 16 << 10


@dataclass(frozen=True)
class Cited:
    """A line of the paste: its number (1-based) and its text, shortened for a report."""

    line: int
    text: str


@dataclass(frozen=True)
class StatsLine:
    """One periodic stats line: what ran, waited and filled the KV cache at that moment."""

    at: Cited
    running: float | None
    waiting: float | None
    kv_usage: float | None  # 0–1
    swapped: float | None = None


@dataclass
class ServerLog:
    engine: str  # vLLM, SGLang, llama.cpp
    stats: list[StatsLine] = field(default_factory=list)
    v1: bool = False  # vLLM V1 ("Waiting:"): it does not log preemptions
    limit: tuple[float, Cited] | None = None  # the sequence limit the log states (max_num_seqs, max_running_requests)
    capacity: list[Cited] = field(default_factory=list)  # startup lines on the KV cache's size
    preemptions: float = 0.0  # vLLM's cumulative count, SGLang's retracted requests
    first_preemption: Cited | None = None
    truncated: list[Cited] = field(default_factory=list)  # llama.cpp prompts cut to fit a slot
    shifted: list[Cited] = field(default_factory=list)  # llama.cpp context shifts
    refused: list[Cited] = field(default_factory=list)  # llama.cpp requests larger than the slot
    slot_tokens: tuple[int, Cited] | None = None  # llama.cpp's context per slot
    oversized: list[tuple[int, int, Cited]] = field(default_factory=list)  # (prompt tokens, slot tokens, where)
    lines: int = 0
    skipped: int = 0  # lines over the length limit

    @property
    def substantive(self) -> bool:
        """Whether any of the server's own lines were read (not just an error message it sent)."""
        return bool(
            self.stats or self.capacity or self.limit or self.first_preemption or self.slot_tokens or self.truncated or self.shifted
        )


def lines_of(text: str) -> Iterator[tuple[int, str]]:
    start, number = 0, 0
    while start < len(text) and number < MAX_LINES:
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        number += 1
        yield number, text[start:end]
        start = end + 1


def number_after(line: str, key: str) -> float | None:
    """The number right after the first `key` in the line ("Running: 2 reqs" → 2.0; "81,408" → 81408;
    "82.1%" → 82.1); None when the key is absent or no number follows."""
    index = line.find(key)
    if index < 0:
        return None
    index += len(key)
    while index < len(line) and line[index] == " ":
        index += 1
    end = index
    while end < len(line) and (line[end].isdecimal() or line[end] in ".,"):
        end += 1
    digits = line[index:end].rstrip(".,").replace(",", "")
    try:
        value = float(digits) if digits else None
    except ValueError:
        return None
    return value if value is not None and value <= MAX_NUMBER else None  # 400 digits: infinity, no count


MAX_NUMBER = 1e15  # no token count, request count or percentage in a log is larger


def cite(number: int, line: str) -> Cited:
    return Cited(number, " ".join(line.split())[:300])


def kind_of(text: str) -> str | None:
    """vLLM, SGLang or llama.cpp when the text holds that server's own lines; None otherwise."""
    head = text[: 4 << 20]
    if "Avg prompt throughput:" in head and "GPU KV cache usage:" in head:
        return "vLLM"
    if "is preempted by PreemptionMode" in head or "Maximum concurrency for" in head or "# GPU blocks:" in head:
        return "vLLM"
    if ("Decode batch" in head or "Prefill batch" in head) and "#running-req:" in head:
        return "SGLang"
    if "#retracted_reqs:" in head:
        return "SGLang"
    for mark in (
        "n_ctx_slot =",
        "slot update_slots:",
        "update_slots: id ",
        "slot context shift",
        "input truncated",
        "llama_new_context_with_model:",
    ):
        if mark in head:
            return "llama.cpp"
    if "exceeds the available context size" in head:
        return "llama.cpp"
    return None


def _vllm_line(log: ServerLog, number: int, line: str) -> None:
    if "Avg prompt throughput:" in line and "Running:" in line:
        waiting = number_after(line, "Waiting:")
        if waiting is not None:
            log.v1 = True
        else:
            waiting = number_after(line, "Pending:")
        usage = number_after(line, "GPU KV cache usage:")
        at = cite(number, line)
        kv = usage / 100 if usage is not None else None
        log.stats.append(StatsLine(at, number_after(line, "Running:"), waiting, kv, number_after(line, "Swapped:")))
        return
    if "is preempted by PreemptionMode" in line:
        total = number_after(line, "total_num_cumulative_preemption=")
        log.preemptions = max(log.preemptions, total or 1.0)
        log.first_preemption = log.first_preemption or cite(number, line)
        return
    for key in ("'max_num_seqs':", "max_num_seqs="):
        value = number_after(line, key)
        if value:
            log.limit = (value, cite(number, line))
            return
    if "Maximum concurrency for" in line or "GPU KV cache size:" in line or "# GPU blocks:" in line:
        log.capacity.append(cite(number, line))


def _sglang_line(log: ServerLog, number: int, line: str) -> None:
    if ("Decode batch" in line or "Prefill batch" in line) and "#running-req:" in line:
        usage = number_after(line, "full token usage:")
        usage = number_after(line, "token usage:") if usage is None else usage
        log.stats.append(StatsLine(cite(number, line), number_after(line, "#running-req:"), number_after(line, "#queue-req:"), usage))
        return
    retracted = number_after(line, "#retracted_reqs:")
    if retracted:
        log.preemptions += retracted
        log.first_preemption = log.first_preemption or cite(number, line)
        return
    value = number_after(line, "max_running_requests=")
    if value:
        log.limit = (value, cite(number, line))
    if "max_total_num_tokens=" in line:
        log.capacity.append(cite(number, line))


def _llama_line(log: ServerLog, number: int, line: str) -> None:
    slot = number_after(line, "n_ctx_slot =") or number_after(line, "n_ctx_slot=")
    if slot:
        log.slot_tokens = log.slot_tokens or (int(slot), cite(number, line))
        prompt = number_after(line, "n_prompt_tokens =") or number_after(line, "task.n_tokens =")
        if prompt and prompt > slot:
            log.oversized.append((int(prompt), int(slot), cite(number, line)))
    if "input truncated" in line:
        log.truncated.append(cite(number, line))
        size = number_after(line, "n_ctx =") or number_after(line, "n_ctx=")
        if size and log.slot_tokens is None:
            log.slot_tokens = (int(size), cite(number, line))
    elif "slot context shift" in line or "context shift -" in line:
        log.shifted.append(cite(number, line))
    elif "exceeds the available context size" in line:
        log.refused.append(cite(number, line))


READERS = {"vLLM": _vllm_line, "SGLang": _sglang_line, "llama.cpp": _llama_line}


def read_log(text: str) -> ServerLog | None:
    engine = kind_of(text)
    if engine is None:
        return None
    log = ServerLog(engine)
    reader = READERS[engine]
    for number, line in lines_of(text):
        log.lines = number
        if len(line) > MAX_LINE_CHARS:
            log.skipped += 1
            continue
        reader(log, number, line)
    return log
