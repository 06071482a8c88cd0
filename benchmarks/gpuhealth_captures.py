"""The GPU health check (issue 48) against captures nobody here wrote, labelled by hand.

    python benchmarks/gpuhealth_captures.py [--cli] [--only TEXT] [--json FILE] [--shared DIR]

Reads the hand labels in fixtures/gpuhealth/real-labels.toml (the real captures the project keeps)
and fixtures/gpuhealth/public/LABELS.toml (public captures from GitHub issues and repositories:
fragments, Windows, MIG, laptops, HGX), runs the check on every labelled capture the way
`decode-doctor analyze FILE` does (in-process through GpuHealthCheck.analyze, or with --cli through
the installed `decode-doctor analyze FILE --format json`), and prints per capture the codes labelled,
found, missed and extra; then, per code, faults found / labelled and false findings, and the false
findings on captures labelled healthy.

A label "GPH001?" marks what the capture cannot tell (a narrow link whose slot width is not shown):
neither a hit nor a miss nor a false finding. GPH021, GPH032 and GPH033 are informational (history,
MIG, memory held): they are scored per code but do not make a capture unhealthy.

Exit status: 0 whatever the accuracy (a benchmark, not a gate); 1 when a capture crashed the tool.
A capture labelled in real-labels.toml whose copy under fixtures/gpuhealth/ is not there yet is read
from --shared (default /work/shared/fixtures-real) and marked so; missing there too, it is skipped.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures" / "gpuhealth"
LABEL_FILES = (FIXTURES / "real-labels.toml", FIXTURES / "public" / "LABELS.toml")
SHARED = Path("/work/shared/fixtures-real")
INFORMATIONAL = frozenset({"GPH021", "GPH032", "GPH033"})  # state worth knowing, not a fault
CLI = REPO / ".venv" / "bin" / "decode-doctor"


@dataclass(frozen=True)
class Labelled:
    """One capture and its hand label."""

    name: str  # the path under fixtures/gpuhealth/ the labels name
    path: Path | None  # where it is read from; None: neither the fixture copy nor the shared original is there
    kind: str
    platform: str
    gpus: int
    sure: frozenset[str]  # codes a careful engineer raises from the capture
    ambiguous: frozenset[str]  # "GPH001?": the capture cannot tell
    from_shared: bool = False

    @property
    def faults(self) -> frozenset[str]:
        return self.sure - INFORMATIONAL

    @property
    def healthy(self) -> bool:
        return not self.faults


@dataclass
class Outcome:
    """What the tool said of one capture."""

    recognised: bool = False
    kind: str = ""
    found: frozenset[str] = frozenset()
    gpus: int | None = None
    crash: str | None = None


@dataclass
class Scored:
    capture: Labelled
    outcome: Outcome
    missed: frozenset[str] = field(init=False)
    extra: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        self.missed = self.capture.sure - self.outcome.found
        self.extra = self.outcome.found - self.capture.sure - self.capture.ambiguous


def load_labels(label_files: Iterable[Path] = LABEL_FILES, shared: Path | None = SHARED) -> list[Labelled]:
    """Every labelled capture; shared=None reads only the copies under fixtures/gpuhealth/."""
    captures = []
    for label_file in label_files:
        with open(label_file, "rb") as handle:
            entries = tomllib.load(handle)["capture"]
        for entry in entries:
            codes = [str(code) for code in entry["labels"]]
            copy = FIXTURES / entry["file"]
            original = shared / entry["shared"] if shared is not None and "shared" in entry else None
            path: Path | None = None
            if copy.is_file():
                path = copy
            elif original is not None and original.is_file():
                path = original
            captures.append(
                Labelled(
                    name=entry["file"],
                    path=path,
                    kind=entry["kind"],
                    platform=entry.get("platform", ""),
                    gpus=int(entry.get("gpus", 0)),
                    sure=frozenset(code for code in codes if not code.endswith("?")),
                    ambiguous=frozenset(code.rstrip("?") for code in codes if code.endswith("?")),
                    from_shared=path is original and path is not None,
                )
            )
    return captures


def analyze_in_process(path: Path) -> Outcome:
    """The gpu-health check's part of `decode-doctor analyze FILE`: the same reading of the file
    (size limit, UTF-16 detection) and the same analyze() entry."""
    from decode_doctor.app.analyze import read_input
    from decode_doctor.checks.gpuhealth.check import GpuHealthCheck
    from decode_doctor.checks.gpuhealth.contract import GpuHealthFacts

    try:
        analysis = GpuHealthCheck.analyze(read_input(str(path)), path.name)
    except Exception:  # the benchmark reports a crash instead of stopping at the first one
        return Outcome(crash=traceback.format_exc(limit=-3).strip().splitlines()[-1])
    if analysis is None:
        return Outcome()
    gpus = len(analysis.facts.gpus) if isinstance(analysis.facts, GpuHealthFacts) else None
    return Outcome(True, analysis.kind, frozenset(f.code for f in analysis.findings), gpus)


def analyze_with_cli(path: Path, cli: Path = CLI) -> Outcome:
    """`decode-doctor analyze FILE --format json`, keeping the gpu-health check's result. A file no
    check reads is a usage error (exit 2 with a message, no report): not recognised, not a crash."""
    done = subprocess.run(
        [str(cli), "analyze", str(path), "--format", "json", "--incomplete", "ignore", "--fail-on", "never"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        if "Traceback" in done.stderr or done.returncode not in (0, 1, 2, 3):
            return Outcome(crash=(done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1])
        return Outcome()
    # results[] name each check that read the file ("gpu-health (FILE)"); findings and facts are the report's
    for result in report.get("results", []):
        check = str(result.get("check", ""))
        if check.split(" ", 1)[0] == "gpu-health":
            codes = frozenset(str(f["code"]) for f in report.get("findings", []) if f.get("check") == "gpu-health")
            facts = (report.get("facts") or {}).get(check) or {}
            gpus = len(facts["gpus"]) if isinstance(facts.get("gpus"), list) else None
            return Outcome(True, str(result.get("reason") or ""), codes, gpus)
    return Outcome()


def score(captures: Iterable[Labelled], cli: bool = False) -> list[Scored]:
    run = analyze_with_cli if cli else analyze_in_process
    return [Scored(capture, run(capture.path)) for capture in captures if capture.path is not None]


@dataclass
class CodeTally:
    labelled: int = 0
    found: int = 0
    false: int = 0  # found where neither labelled nor ambiguous
    ambiguous: int = 0
    ambiguous_found: int = 0


def tally(scored: Iterable[Scored]) -> dict[str, CodeTally]:
    codes: dict[str, CodeTally] = {}
    for row in scored:
        for code in row.capture.sure:
            entry = codes.setdefault(code, CodeTally())
            entry.labelled += 1
            entry.found += code in row.outcome.found
        for code in row.capture.ambiguous:
            entry = codes.setdefault(code, CodeTally())
            entry.ambiguous += 1
            entry.ambiguous_found += code in row.outcome.found
        for code in row.extra:
            codes.setdefault(code, CodeTally()).false += 1
    return dict(sorted(codes.items()))


def healthy_false_findings(scored: Iterable[Scored]) -> list[Scored]:
    """Captures labelled healthy on which the tool found a fault (an informational code is not one)."""
    return [row for row in scored if row.capture.healthy and row.extra - INFORMATIONAL]


def _codes(codes: Iterable[str]) -> str:
    return " ".join(sorted(codes)) or "-"


def _sets(scored: list[Scored]) -> list[tuple[str, list[Scored]]]:
    public = [row for row in scored if row.capture.name.startswith("public/")]
    kept = [row for row in scored if not row.capture.name.startswith("public/")]
    return [(name, rows) for name, rows in (("public captures", public), ("project's real captures", kept)) if rows]


def _summary(name: str, rows: list[Scored]) -> str:
    """One line per set: faults found / labelled and false findings on the captures labelled healthy."""
    labelled = sum(len(row.capture.faults) for row in rows)
    hits = sum(len(row.capture.faults & row.outcome.found) for row in rows)
    healthy = sum(row.capture.healthy for row in rows)
    return (
        f"{name}: {len(rows)} captures, faults found / labelled {hits}/{labelled}, "
        f"false findings on healthy captures {len(healthy_false_findings(rows))}/{healthy}"
    )


def render(scored: list[Scored], skipped: list[Labelled]) -> str:
    lines = [f"{'capture':<74} {'gpus':>5} {'labelled':<24} {'found':<24} {'missed':<16} extra"]
    for row in scored:
        capture, outcome = row.capture, row.outcome
        label = _codes(capture.sure) + ("".join(f" {code}?" for code in sorted(capture.ambiguous)))
        if outcome.crash:
            found = "CRASH"
        elif not outcome.recognised:
            found = "(not read)"
        else:
            found = _codes(outcome.found)
        seen = "" if outcome.gpus is None else str(outcome.gpus)
        name = capture.name + (" [shared]" if capture.from_shared else "")
        lines.append(f"{name:<74} {seen + '/' + str(capture.gpus):>5} {label:<24} {found:<24} {_codes(row.missed):<16} {_codes(row.extra)}")
        if outcome.crash:
            lines.append(f"    crash: {outcome.crash}")
    for capture in skipped:
        lines.append(f"{capture.name:<74} (skipped: the file is not there)")
    codes = tally(scored)
    lines += ["", f"{'code':<8} {'found/labelled':>15} {'false findings':>15} {'ambiguous found/labelled':>25}"]
    for code, entry in codes.items():
        kind = " (informational)" if code in INFORMATIONAL else ""
        found = f"{entry.found}/{entry.labelled}" if entry.labelled else "-"
        ambiguous = f"{entry.ambiguous_found}/{entry.ambiguous}" if entry.ambiguous else "-"
        lines.append(f"{code:<8} {found:>15} {entry.false:>15} {ambiguous:>25}{kind}")
    faults = {code: entry for code, entry in codes.items() if code not in INFORMATIONAL}
    labelled = sum(entry.labelled for entry in faults.values())
    hits = sum(entry.found for entry in faults.values())
    healthy = [row for row in scored if row.capture.healthy]
    flagged = healthy_false_findings(scored)
    fault_captures = [row for row in scored if not row.capture.healthy]
    whole = [row for row in fault_captures if row.capture.faults <= row.outcome.found]
    lines += ["", *(_summary(name, rows) for name, rows in _sets(scored))]
    lines += [
        "",
        f"captures: {len(scored)} read ({sum(r.outcome.recognised for r in scored)} recognised by the check, "
        f"{sum(bool(r.outcome.crash) for r in scored)} crashed), {len(skipped)} skipped",
        f"faults found / labelled: {hits}/{labelled}" + (f" ({100 * hits / labelled:.0f} %)" if labelled else ""),
        f"captures with faults whose every fault was found: {len(whole)}/{len(fault_captures)}",
        f"false findings on captures labelled healthy: {len(flagged)} of {len(healthy)} captures"
        + ("".join(f"\n    {row.capture.name}: {_codes(row.extra - INFORMATIONAL)}" for row in flagged)),
    ]
    return "\n".join(lines)


def as_json(scored: list[Scored]) -> list[dict[str, object]]:
    return [
        {
            "capture": row.capture.name,
            "read_from": str(row.capture.path),
            "labelled": sorted(row.capture.sure),
            "ambiguous": sorted(row.capture.ambiguous),
            "recognised": row.outcome.recognised,
            "kind": row.outcome.kind,
            "found": sorted(row.outcome.found),
            "missed": sorted(row.missed),
            "extra": sorted(row.extra),
            "crash": row.outcome.crash,
        }
        for row in scored
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", action="store_true", help="run the installed decode-doctor analyze FILE --format json per capture")
    parser.add_argument("--only", help="only the captures whose path contains this text")
    parser.add_argument("--json", type=Path, help="also write the per-capture results here")
    parser.add_argument("--shared", type=Path, default=SHARED, help="where the real captures not yet copied under fixtures/ are")
    args = parser.parse_args(argv)
    captures = [c for c in load_labels(shared=args.shared) if not args.only or args.only in c.name]
    scored = score(captures, cli=args.cli)
    print(render(scored, [c for c in captures if c.path is None]))
    if args.json:
        args.json.write_text(json.dumps(as_json(scored), indent=1))
    return 1 if any(row.outcome.crash for row in scored) else 0


if __name__ == "__main__":
    sys.exit(main())
