"""Known engine failures on this host's hardware, probed before they are an outage (failures.py)."""

from __future__ import annotations

from decode_doctor.engine import Analysis, Check, Context, Finding, JSONValue, Needs, SkipCheck
from decode_doctor.i18n import N_, _, joined, said

from .catalog import EngineFailureFacts, KnownFailure, Outcome, catalog, probe
from .codes import ENG001, ENGINE_FAILURE_CODES

MAX_PASTE_LINES = 200_000


def cpu_flags(ctx: Context) -> set[str]:
    """The first processor's flags in /proc/cpuinfo under --root."""
    for line in (ctx.read_text("/proc/cpuinfo", limit=1 << 20) or "").splitlines():
        name, colon, value = line.partition(":")
        if colon and name.strip() == "flags":
            return set(value.split())
    return set()


class EngineFailures(Check):
    name = "engine-failures"
    looks_at = (
        "decode-doctor's catalog of known engine failures (`checks/enginefailures/data/engine-failures.json`: engine, affected "
        "versions, the hardware condition, a probe, verified workarounds, public reports) against this host: for each entry "
        "whose condition holds (llama.cpp's AMX crash: a CPU with AMX_TILE and AMX_INT8), the installed llama-cpp-python "
        "evaluates a 3.5 MB random-weight model in a child process as the entry's probe says; a crash (its signal named) is "
        "ENG001 with the workarounds the same probe verified here. `analyze` finds the same crash in a pasted llama-server or "
        'ollama log ("AMX model buffer size", then a segfault)'
    )
    description = N_("known engine crashes on this host's hardware, probed in a child process, with verified workarounds")
    codes = ENGINE_FAILURE_CODES
    needs = Needs(platforms=("linux",))
    timeout_s = 150.0
    facts_type = EngineFailureFacts
    pasted = N_('a llama-server or ollama log showing a known engine crash ("AMX model buffer size", then a segfault)')

    def run(self, ctx: Context) -> list[Finding]:
        from decode_doctor.models.llamacpp import engine_version

        flags = cpu_flags(ctx)
        applicable = [f for f in catalog() if set(f.cpu_flags) <= flags]
        if not applicable:
            raise SkipCheck(_("no known engine failure applies to this CPU (the catalog's conditions: {flags})", flags=_conditions()))
        what = [_("whether {engine} crashes here ({failure})", engine=f.engine, failure=f.id) for f in applicable]
        if not ctx.live_devices:  # this Python's engine and this PATH's llama-server are this machine's, not that host's
            for item in what:
                ctx.not_judged(item, _("the CPU under --root is not this machine's (--same-host says it is): its engine cannot be probed"))
            return []
        version = engine_version()
        if version is None:
            server = ctx.which("llama-server")
            why = _("llama-cpp-python is not installed, and the probes run through it") + (
                _(" (llama-server is at {path}: it is not probed)", path=server) if server else ""
            )
            for item in what:
                ctx.not_judged(item, why)
            ctx.publish(EngineFailureFacts(None, []))
            return []
        findings, probed = [], []
        for failure in applicable:
            outcome = probe(failure)
            probed.append(
                {"id": failure.id, "results": [str(r.said()) for r in outcome.results], "verified": [w.id for w in outcome.verified]}
            )
            if outcome.crashed:
                findings.append(self._finding(outcome, f"llama-cpp-python {version}"))
        ctx.publish(EngineFailureFacts(f"llama-cpp-python {version}", probed))
        return findings

    def _finding(self, outcome: Outcome, engine: str) -> Finding:
        failure = outcome.failure
        crashed = outcome.crashed
        kinds = ", ".join(r.weight_type for r in crashed)
        signals = ", ".join(sorted({r.signal or "?" for r in crashed}))
        if outcome.verified:
            fix = _("Verified here: {workarounds}.", workarounds=_("; ").join(_(w.text) for w in outcome.verified))
        else:
            fix = _("No workaround in the catalog was verified here.")
        message = _(
            "{engine} crashed ({signals}) on a {mode} evaluation of {kinds} weights on this CPU: {title} ({id}). {fix}",
            engine=engine,
            signals=signals,
            mode=failure.probe.mode,
            kinds=kinds,
            title=_(failure.title),
            id=failure.id,
            fix=fix,
        )
        evidence: dict[str, JSONValue] = {
            "failure": failure.id,
            "engine": engine,
            "results": [str(r.said()) for r in outcome.results],
            "last_log_line": crashed[0].detail,
            "buffers_mib": crashed[0].buffers,
            "verified_workarounds": [w.id for w in outcome.verified],
            "refuted_workarounds": [w.id for w in outcome.refuted],
            "unverified_workarounds": [w.id for w in failure.workarounds if w.probe is None],
            "sources": list(failure.sources),
        }
        return self.finding(ENG001, message, evidence=evidence)

    @classmethod
    def analyze(cls, text: str, source: str) -> Analysis | None:
        """A pasted llama-server or ollama log where a known failure's marker is followed by a crash."""
        lines = text.splitlines()[:MAX_PASTE_LINES]
        findings = []
        for failure in catalog():
            marker = next((i for i, line in enumerate(lines) if any(m in line for m in failure.log_markers)), None)
            if marker is None:
                continue
            crash = next((i for i in range(marker, len(lines)) if any(m in lines[i] for m in failure.crash_markers)), None)
            if crash is None:
                continue
            check = cls()
            message = _(
                "The log shows {title} ({id}): line {marker} ({marker_text}), then line {crash} ({crash_text}). "
                "Workarounds: {workarounds}.",
                title=_(failure.title),
                id=failure.id,
                marker=marker + 1,
                marker_text=lines[marker].strip()[:120],
                crash=crash + 1,
                crash_text=lines[crash].strip()[:120],
                workarounds=_("; ").join(_(w.text) for w in failure.workarounds),
            )
            evidence: dict[str, JSONValue] = {
                "source": source,
                "line": crash + 1,
                "text": lines[crash][:300],
                "marker_line": marker + 1,
                "sources": list(failure.sources),
            }
            findings.append(check.finding(ENG001, message, evidence=evidence))
        if not findings:
            return None
        return Analysis(findings, kind=_("an engine's crash log"))


def _conditions() -> str:
    return joined("; ", [said("{id}: CPU flags {flags}", id=f.id, flags=" + ".join(f.cpu_flags)) for f in catalog()])


__all__ = ["EngineFailures", "KnownFailure", "cpu_flags"]
