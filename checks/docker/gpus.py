"""NVIDIA container readiness: will `docker run --gpus all` work on this host?"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from decode_doctor.engine import Check, Code, Context, Finding, FixRef, Needs, Severity, SkipCheck

from .daemon_json import read_daemon_json
from .engine import DockerFacts

BIN_DIRS = ("/usr/bin", "/usr/local/bin", "/usr/sbin", "/bin")
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
CONFIGURE = "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker"
GENERATE_CDI = "sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"
APT_INSTALL = "sudo apt-get install -y nvidia-container-toolkit"
INSTALL = "install the NVIDIA Container Toolkit (apt-get install nvidia-container-toolkit, from NVIDIA's repository)"
DISPLAY_ONLY = (
    "Display-only: decode-doctor prints the commands (they install packages or restart dockerd, which it "
    "never does for you); run them yourself."
)

CTK001 = Code(
    "CTK001",
    "docker run --gpus will fail: no NVIDIA container hook",
    Severity.ERROR,
    what='dockerd registers its "nvidia" device driver only if it finds nvidia-container-runtime-hook (or, from Engine 29.2, '
    "nvidia-cdi-hook) on its PATH when it starts; neither is installed.",
    why='Every `docker run --gpus all` fails with: could not select device driver "" with capabilities: [[gpu]]. Inference containers '
    "start without GPUs or not at all.",
    fix_by_hand=f"{INSTALL}, then restart dockerd (sudo systemctl restart docker).",
    fix_safety=DISPLAY_ONLY,
)
CTK002 = Code(
    "CTK002",
    "No CDI specification for the NVIDIA GPUs",
    Severity.WARNING,
    what="No CDI spec in /etc/cdi or /var/run/cdi names nvidia.com/gpu devices.",
    why="`docker run --device nvidia.com/gpu=all` (CDI, the path newer Engines and Podman prefer) fails without one; the spec also goes "
    "stale after driver upgrades.",
    fix_by_hand=GENERATE_CDI,
    fix_safety=DISPLAY_ONLY,
)
CTK003 = Code(
    "CTK003",
    "The nvidia runtime is not configured in Docker",
    Severity.INFO,
    what="daemon.json has no runtimes.nvidia entry.",
    why="Needed only for `--runtime=nvidia` (and images or compose files that ask for it); `--gpus` works without it.",
    fix_by_hand=CONFIGURE,
    fix_safety=DISPLAY_ONLY,
)


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
    needs = Needs(platforms=("linux",), after=("gpu", "docker"))

    @classmethod
    def requires(cls, options: Mapping[str, Any]) -> tuple[str, ...]:
        return ("gpu", "docker")

    timeout_s = 10.0

    def run(self, ctx: Context) -> list[Finding]:
        gpu = ctx.facts.get("gpu")  # the gpu feature's facts: devices, unified_memory
        if gpu is None or not (getattr(gpu, "devices", None) or getattr(gpu, "unified_memory", False)):
            raise SkipCheck("no NVIDIA GPU")
        docker = _installed(ctx, "dockerd") or _installed(ctx, "docker") or (ctx.host_path("/etc/docker").is_dir() and "/etc/docker")
        if not docker:
            raise SkipCheck("Docker is not installed")
        tools = {
            name: _installed(ctx, name)
            for name in (
                "nvidia-container-runtime-hook",
                "nvidia-cdi-hook",
                "nvidia-ctk",
                "nvidia-container-runtime",
                "nvidia-container-cli",
            )
        }
        specs = cdi_devices(ctx)
        config, config_error = read_daemon_json(ctx)
        engine = ctx.facts.get("docker")
        # the running Engine's view when it answered; daemon.json otherwise
        if isinstance(engine, DockerFacts) and engine.reachable:
            runtimes = engine.runtimes
        else:
            runtimes = sorted((config or {}).get("runtimes", {}) or {})
        evidence = {
            "docker": docker,
            "tools": tools,
            "cdi_specs": specs,
            "runtimes": runtimes,
            "default_runtime": (config or {}).get("default-runtime"),
            "daemon_json_error": config_error,
        }
        findings = []
        if not tools["nvidia-container-runtime-hook"] and not tools["nvidia-cdi-hook"]:
            message = (
                "Neither nvidia-container-runtime-hook nor nvidia-cdi-hook is installed: `docker run --gpus all` fails with "
                f'could not select device driver "" with capabilities: [[gpu]]; {INSTALL}.'
            )
            fix = _commands("install the NVIDIA Container Toolkit and register it with dockerd", APT_INSTALL, CONFIGURE)
            findings.append(self.finding("CTK001", message, evidence=evidence, fix=fix))
        if not specs:
            message = f"No CDI spec names nvidia.com/gpu devices in {' or '.join(CDI_DIRS)}."
            commands = (GENERATE_CDI,) if tools["nvidia-ctk"] else (APT_INSTALL, GENERATE_CDI)
            findings.append(self.finding("CTK002", message, evidence=evidence, fix=_commands("generate the CDI spec", *commands)))
        if "nvidia" not in runtimes:
            state = f"it is unreadable: {config_error}" if config_error else f"runtimes: {', '.join(runtimes) or 'none'}"
            message = f"daemon.json defines no nvidia runtime ({state}); only --runtime=nvidia needs it."
            findings.append(self.finding("CTK003", message, evidence=evidence, fix=_commands("register the nvidia runtime", CONFIGURE)))
        return findings


def _commands(summary: str, *commands: str) -> FixRef:
    return FixRef(f"{summary}: {'; '.join(commands)}", {"commands": list(commands)})
