"""NVIDIA container readiness: will `docker run --gpus all` work on this host?"""

from __future__ import annotations

import re

from decode_doctor.check import Check, Needs, SkipCheck
from decode_doctor.checks.docker import read_daemon_json
from decode_doctor.context import Context
from decode_doctor.model import Code, Finding, Severity

BIN_DIRS = ("/usr/bin", "/usr/local/bin", "/usr/sbin", "/bin")
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
CONFIGURE = "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker"
GENERATE_CDI = "sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"
INSTALL = "install the NVIDIA Container Toolkit (apt-get install nvidia-container-toolkit, from NVIDIA's repository)"

CTK001 = Code("CTK001", "docker run --gpus will fail: no NVIDIA container hook", Severity.ERROR,
    what="dockerd registers its \"nvidia\" device driver only if it finds nvidia-container-runtime-hook (or, from Engine 29.2, nvidia-cdi-hook) on its PATH when it starts; neither is installed.",
    why="Every `docker run --gpus all` fails with: could not select device driver \"\" with capabilities: [[gpu]]. Inference containers start without GPUs or not at all.",
    fix_by_hand=f"{INSTALL}, then restart dockerd (sudo systemctl restart docker).")
CTK002 = Code("CTK002", "No CDI specification for the NVIDIA GPUs", Severity.WARNING,
    what="No CDI spec in /etc/cdi or /var/run/cdi names nvidia.com/gpu devices.",
    why="`docker run --device nvidia.com/gpu=all` (CDI, the path newer Engines and Podman prefer) fails without one; the spec also goes stale after driver upgrades.",
    fix_by_hand=GENERATE_CDI)
CTK003 = Code("CTK003", "The nvidia runtime is not configured in Docker", Severity.INFO,
    what="daemon.json has no runtimes.nvidia entry.",
    why="Needed only for `--runtime=nvidia` (and images or compose files that ask for it); `--gpus` works without it.",
    fix_by_hand=CONFIGURE)


def _installed(ctx: Context, name: str) -> str | None:
    if ctx.live_host and ctx.which(name):
        return ctx.which(name)
    for directory in BIN_DIRS:
        if ctx.host_path(f"{directory}/{name}").exists():
            return f"{directory}/{name}"
    return None


def cdi_devices(ctx: Context) -> dict[str, list[str]]:
    """CDI spec file → the nvidia.com/gpu device names it declares."""
    found: dict[str, list[str]] = {}
    for directory in CDI_DIRS:
        base = ctx.host_path(directory)
        if not base.is_dir():
            continue
        for spec in sorted(base.iterdir()):
            if spec.suffix not in (".yaml", ".yml", ".json"):
                continue
            text = ctx.read_text(f"{directory}/{spec.name}") or ""
            if "nvidia.com/gpu" not in text:
                continue
            found[f"{directory}/{spec.name}"] = re.findall(r"^\s*-?\s*\"?name\"?\s*:\s*\"?([\w.-]+)\"?", text, re.M)
    return found


class NvidiaContainer(Check):
    name = "nvidia-container"
    description = "NVIDIA Container Toolkit hooks, CDI specs and Docker runtimes for `docker run --gpus`"
    codes = (CTK001, CTK002, CTK003)
    needs = Needs(platforms=("linux",), after=("gpu", "docker"), files=("/etc/docker/daemon.json", *CDI_DIRS), commands=())
    timeout_s = 10.0

    def run(self, ctx: Context) -> list[Finding]:
        gpu = ctx.facts.get("gpu")
        if gpu is None or not (gpu.get("devices") or gpu.get("unified_memory")):
            raise SkipCheck("no NVIDIA GPU")
        docker = _installed(ctx, "dockerd") or _installed(ctx, "docker") or (ctx.host_path("/etc/docker").is_dir() and "/etc/docker")
        if not docker:
            raise SkipCheck("Docker is not installed")
        tools = {name: _installed(ctx, name) for name in ("nvidia-container-runtime-hook", "nvidia-cdi-hook", "nvidia-ctk", "nvidia-container-runtime", "nvidia-container-cli")}
        specs = cdi_devices(ctx)
        config, config_error = read_daemon_json(ctx)
        engine = ctx.facts.get("docker") or {}
        # the running Engine's view when it answered; daemon.json otherwise
        runtimes = engine["runtimes"] if engine.get("reachable") else sorted((config or {}).get("runtimes", {}) or {})
        evidence = {"docker": docker, "tools": tools, "cdi_specs": specs, "runtimes": runtimes, "default_runtime": (config or {}).get("default-runtime"), "daemon_json_error": config_error}
        findings = []
        if not tools["nvidia-container-runtime-hook"] and not tools["nvidia-cdi-hook"]:
            findings.append(self.finding("CTK001", f"Neither nvidia-container-runtime-hook nor nvidia-cdi-hook is installed: `docker run --gpus all` fails with \"could not select device driver \\\"\\\" with capabilities: [[gpu]]\". Fix: {INSTALL}; then {CONFIGURE}.", evidence={**evidence, "commands": [CONFIGURE]}))
        if not specs:
            hint = GENERATE_CDI if tools["nvidia-ctk"] else f"{INSTALL}, then {GENERATE_CDI}"
            findings.append(self.finding("CTK002", f"No CDI spec names nvidia.com/gpu devices in {' or '.join(CDI_DIRS)}. Fix: {hint}", evidence={**evidence, "commands": [GENERATE_CDI]}))
        if "nvidia" not in runtimes:
            findings.append(self.finding("CTK003", f"daemon.json defines no nvidia runtime ({'it is unreadable: ' + config_error if config_error else 'runtimes: ' + (', '.join(runtimes) or 'none')}); only --runtime=nvidia needs it. Fix: {CONFIGURE}", evidence={**evidence, "commands": [CONFIGURE]}))
        return findings
