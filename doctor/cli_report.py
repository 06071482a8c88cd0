"""`decode-doctor report` (the support bundle), `diff` (two reports) and `merge` (a fleet matrix)."""

from __future__ import annotations

import html
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import click

from . import registry
from .cli_check import collect, guarded, run_options, settings_from
from .journal import default_state_dir

CPUINFO = "import json, cpuinfo; print(json.dumps(cpuinfo.get_cpu_info()))"
SINGLE = {"json": "report.json", "markdown": "report.md", "html": "report.html"}


@click.command("report", context_settings={"help_option_names": ["-h", "--help"]})
@run_options
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="A directory (the bundle gets its own name there) or a file path [default: the current directory].")
@click.option("--format", "fmt", type=click.Choice(("bundle", "json", "markdown", "html", "prometheus")), default="bundle", show_default=True, help="A whole bundle, or one redacted file.")
@click.option("--redact-hosts", is_flag=True, help="Also replace host names, IP addresses, user names and home paths with stable placeholders (the mapping stays on this machine).")
@click.option("--no-redact", is_flag=True, help="Write secrets as they are. Only for bundles that never leave this machine.")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None, help="Where --redact-hosts keeps its mapping [default: $XDG_STATE_HOME/decode-doctor].")
def report(root: Path, models: tuple[Path, ...], images: tuple[Path, ...], select: tuple[str, ...], ignore: tuple[str, ...], config_path: Path | None, fail_on: str | None, timeout: float | None, debug: bool, output: Path | None, fmt: str, redact_hosts: bool, no_redact: bool, state_dir: Path | None, **check_options: Any) -> None:
    """Run the checks and write a ticket-ready bundle: report.md, report.html, report.json and raw/."""
    if redact_hosts and no_redact:
        raise click.UsageError("--redact-hosts and --no-redact contradict each other")
    settings = settings_from(root, models, images, select, ignore, config_path, fail_on, timeout, debug, check_options)
    guarded(debug, lambda: _report(settings, output or Path.cwd(), fmt, redact_hosts, no_redact, state_dir or default_state_dir()))


def _report(settings: Any, output: Path, fmt: str, redact_hosts: bool, no_redact: bool, state_dir: Path) -> int:
    from .bundle import LeakError, build_bundle, write_bundle
    from .environment import collect_environment
    from .redact import Redactor

    # py-cpuinfo samples the clock for about a second: let it run in its own process beside the checks
    cpu_probe = subprocess.Popen([sys.executable, "-c", CPUINFO], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    result, ctx, _ = collect(settings, sys.stderr.isatty())
    try:
        cpu = json.loads(cpu_probe.communicate(timeout=10)[0] or "{}")
    except (subprocess.TimeoutExpired, json.JSONDecodeError):
        cpu_probe.kill()
        cpu = {}
    environment = collect_environment(ctx, result, cpu)
    if no_redact:
        click.secho("WARNING: --no-redact: the bundle holds tokens, passwords, keys and host names exactly as found. "
                    "Do not attach it to a ticket or send it anywhere.", fg="red", bold=True, err=True)
    redactor = Redactor(enabled=not no_redact, hosts=redact_hosts)
    explanations = {code: {"fix_by_hand": spec.fix_by_hand} for code, (spec, _) in registry.all_codes().items()}
    bundle = build_bundle(result, ctx, environment, redactor, explanations)
    if fmt != "bundle":
        if fmt == "prometheus":
            from .prometheus import render_prometheus

            bundle.files = {"metrics.prom": redactor.text(render_prometheus(result)).encode()}
        else:
            bundle.files = {SINGLE[fmt]: bundle.files[SINGLE[fmt]]}
        bundle.name = f"{bundle.name}-{next(iter(bundle.files))}"
    target = output
    if fmt != "bundle" and output.is_dir():
        target = output / bundle.name
    try:
        if fmt == "bundle":
            written = write_bundle(bundle, redactor, output)
        else:
            problems = redactor.leaks(bundle.files)
            if problems:
                raise LeakError(problems)
            target.write_bytes(next(iter(bundle.files.values())))
            written = target
    except LeakError as exc:
        click.echo("decode-doctor report: the bundle was NOT written: secrets would remain in it after redaction:", err=True)
        for problem in exc.problems[:20]:
            click.echo(f"    {problem}", err=True)
        click.echo("Report this as a bug, or remove the secret from its source; --no-redact writes it anyway (locally only).", err=True)
        return 2
    if redact_hosts and redactor.mapping:
        mapping = state_dir / "redaction" / f"{bundle.name}.json"
        mapping.parent.mkdir(parents=True, exist_ok=True)
        mapping.write_text(json.dumps({placeholder: real for real, placeholder in redactor.mapping.items()}, indent=2))
        mapping.chmod(0o600)
        click.echo(f"placeholder mapping kept on this machine only: {mapping}", err=True)
    click.echo(f"{'bundle' if fmt == 'bundle' else 'report'} written to {written} ({len(bundle.files)} file(s)); {len(result.findings)} finding(s), exit code {result.exit_code}", err=True)
    return result.exit_code


# --- reading reports back ------------------------------------------------------------------------

def load_report(path: Path) -> dict[str, Any]:
    """A report.json, or the report.json inside a bundle."""
    try:
        if path.name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(path) as tar:
                member = next(m for m in tar.getmembers() if m.name.endswith("/report.json"))
                data = json.load(tar.extractfile(member))  # type: ignore[arg-type]
        else:
            data = json.loads(path.read_text())
    except (OSError, StopIteration, json.JSONDecodeError, tarfile.TarError) as exc:
        raise click.BadParameter(f"{path}: not a decode-doctor report ({type(exc).__name__}: {exc})") from None
    if data.get("schema_version") != 1 or "findings" not in data:
        raise click.BadParameter(f"{path}: not a decode-doctor report (schema_version 1)")
    return data


def facts_of(report: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for result in report.get("results", []):
        merged.update(result.get("facts") or {})
    return merged


def versions_of(report: dict[str, Any]) -> dict[str, Any]:
    facts = facts_of(report)
    found: dict[str, Any] = {"decode-doctor": report["tool"]["version"]}
    for row in report.get("environment") or []:
        found[row["name"]] = row["value"]
    gpu = facts.get("gpu") or {}
    if gpu:
        found.update({"NVIDIA driver": gpu.get("driver"), "CUDA (driver)": gpu.get("cuda")})
    docker = facts.get("docker") or {}
    if docker.get("reachable"):
        found["Docker"] = docker.get("version")
    for finding in report["findings"]:
        if finding["code"] == "GPU021" or finding["code"] == "GPU022":
            found["torch"] = finding["evidence"].get("torch")
    return {k: v for k, v in found.items() if v is not None and k != "memory bandwidth"}


def bandwidth_of(report: dict[str, Any]) -> dict[str, float]:
    cpu = (facts_of(report).get("bandwidth") or {}).get("cpu") or {}
    return {k: cpu[k] for k in ("read_gbps", "copy_gbps") if cpu.get(k)}


def _key(finding: dict[str, Any]) -> tuple[str, str, str]:
    return finding["code"], finding["check"], finding.get("path") or ""


@click.command("diff", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("before", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("after", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
def diff(before: Path, after: Path, fmt: str) -> None:
    """What differs between two reports (JSON or bundles): versions, findings, check states, bandwidth."""
    a, b = load_report(before), load_report(after)
    va, vb = versions_of(a), versions_of(b)
    versions = {k: (va.get(k), vb.get(k)) for k in sorted(set(va) | set(vb)) if va.get(k) != vb.get(k)}
    fa = {_key(f): f for f in a["findings"]}
    fb = {_key(f): f for f in b["findings"]}
    appeared = [fb[k] for k in sorted(set(fb) - set(fa))]
    gone = [fa[k] for k in sorted(set(fa) - set(fb))]
    states_a = {r["check"]: r["state"] for r in a["results"]}
    states_b = {r["check"]: r["state"] for r in b["results"]}
    states = {c: (states_a.get(c), states_b.get(c)) for c in sorted(set(states_a) | set(states_b)) if states_a.get(c) != states_b.get(c)}
    ba, bb = bandwidth_of(a), bandwidth_of(b)
    bandwidth = {k: {"before": ba[k], "after": bb[k], "change_percent": round((bb[k] - ba[k]) / ba[k] * 100, 1)} for k in ba if k in bb}
    data = {
        "before": {"file": str(before), "host": a["run"]["host"], "started": a["run"]["started"]},
        "after": {"file": str(after), "host": b["run"]["host"], "started": b["run"]["started"]},
        "versions": {k: {"before": x, "after": y} for k, (x, y) in versions.items()},
        "appeared": [{k: f[k] for k in ("code", "severity", "check", "message", "path")} for f in appeared],
        "disappeared": [{k: f[k] for k in ("code", "severity", "check", "message", "path")} for f in gone],
        "states": {c: {"before": x, "after": y} for c, (x, y) in states.items()},
        "bandwidth": bandwidth,
    }
    if fmt == "json":
        click.echo(json.dumps(data, indent=2))
        return
    click.echo(f"before: {a['run']['host']} at {a['run']['started']} ({before})")
    click.echo(f"after:  {b['run']['host']} at {b['run']['started']} ({after})")
    for name, (x, y) in versions.items():
        click.echo(f"version  {name}: {x} → {y}")
    for f in appeared:
        click.echo(f"+ {f['code']} {f['severity']} {f['check']}: {f['message']}")
    for f in gone:
        click.echo(f"- {f['code']} {f['severity']} {f['check']}: {f['message']}")
    for check, (x, y) in states.items():
        click.echo(f"state    {check}: {x} → {y}")
    for name, change in bandwidth.items():
        click.echo(f"bandwidth {name}: {change['before']} → {change['after']} GB/s ({change['change_percent']:+.1f} %)")
    if not (versions or appeared or gone or states or bandwidth):
        click.echo("no differences")


SEVERITY_RANK = {"error": 3, "warning": 2, "info": 1}


def matrix(reports: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[str], dict[tuple[str, str], str]]:
    hosts = [name for name, _ in reports]
    checks = sorted({r["check"] for _, rep in reports for r in rep["results"]})
    cells: dict[tuple[str, str], str] = {}
    for name, rep in reports:
        for result in rep["results"]:
            findings = [f for f in rep["findings"] if f["check"] == result["check"]]
            if findings:
                worst = max(findings, key=lambda f: SEVERITY_RANK[f["severity"]])
                codes = sorted({f["code"] for f in findings if f["severity"] == worst["severity"]})
                cells[(name, result["check"])] = f"{worst['severity']}: {', '.join(codes)}"
            else:
                cells[(name, result["check"])] = result["state"]
    return hosts, checks, cells


@click.command("merge", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("reports", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(("text", "markdown", "html")), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None)
def merge(reports: tuple[Path, ...], fmt: str, output: Path | None) -> None:
    """A host × check matrix for a fleet, from many reports (JSON or bundles)."""
    loaded, seen = [], set()
    for path in reports:
        data = load_report(path)
        name = data["run"]["host"]
        if name in seen:
            name = f"{name} ({path.name})"
        seen.add(name)
        loaded.append((name, data))
    hosts, checks, cells = matrix(loaded)
    if fmt == "html":
        head = "".join(f"<th>{html.escape(c)}</th>" for c in checks)
        rows = "".join("<tr><th>" + html.escape(h) + "</th>" + "".join(f'<td class="{html.escape(cells.get((h, c), "").split(":")[0])}">{html.escape(cells.get((h, c), "—"))}</td>' for c in checks) + "</tr>" for h in hosts)
        text = (
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>decode-doctor fleet</title><style>'
            "body{font:14px system-ui,sans-serif;margin:2rem}table{border-collapse:collapse}th,td{border:1px solid #ddd;padding:.3rem .5rem}"
            ".error{background:#fde7e9}.warning{background:#fff4d6}.info{background:#e8f0fe}.passed{background:#e6f4ea}</style></head>"
            f"<body><h1>decode-doctor fleet: {len(hosts)} hosts</h1><table><tr><th>host</th>{head}</tr>{rows}</table></body></html>\n"
        )
    elif fmt == "markdown":
        lines = ["| host | " + " | ".join(checks) + " |", "|---" * (len(checks) + 1) + "|"]
        lines += ["| " + h + " | " + " | ".join(cells.get((h, c), "—") for c in checks) + " |" for h in hosts]
        text = "\n".join(lines) + "\n"
    else:
        width = max(len(h) for h in hosts)
        widths = [max(len(c), *(len(cells.get((h, c), "—")) for h in hosts)) for c in checks]
        lines = [" " * width + "  " + "  ".join(c.ljust(w) for c, w in zip(checks, widths))]
        lines += [h.ljust(width) + "  " + "  ".join(cells.get((h, c), "—").ljust(w) for c, w in zip(checks, widths)) for h in hosts]
        text = "\n".join(line.rstrip() for line in lines) + "\n"
    if output:
        output.write_text(text)
        click.echo(f"fleet matrix written to {output}", err=True)
    else:
        click.echo(text, nl=False)
