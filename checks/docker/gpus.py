"""NVIDIA container readiness: will `docker run --gpus all` work on this host?"""

from __future__ import annotations

import re

from decode_doctor.checks.gpu.contract import GpuFacts
from decode_doctor.engine import Check, CommandsParams, Context, Finding, FixRef, Needs, Reads, SkipCheck
from decode_doctor.i18n import N_, _, sentences

from .codes import CODES_GPUS, CONFIGURE, CTK001, CTK002, CTK003, GENERATE_CDI, INSTALL
from .daemon_json import read_daemon_json
from .engine import DockerFacts

BIN_DIRS = ("/usr/bin", "/usr/local/bin", "/usr/sbin", "/bin")
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
APT_INSTALL = "sudo apt-get install -y nvidia-container-toolkit"
# codes.py's INSTALL, marked here for the catalog (codes.py is read by the explanations' extractor only)
assert N_("install the NVIDIA Container Toolkit (apt-get install nvidia-container-toolkit, from NVIDIA's repository)") == INSTALL


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
    looks_at = (
        "`docker run --gpus` readiness: `nvidia-container-runtime-hook` / `nvidia-cdi-hook`, CDI specs in `/etc/cdi` and "
        "`/var/run/cdi`, the `nvidia` runtime in daemon.json. Fixes are display-only: the commands are printed, never run"
    )
    description = N_("NVIDIA Container Toolkit hooks, CDI specs and Docker runtimes for `docker run --gpus`")
    codes = CODES_GPUS
    needs = Needs(platforms=("linux",), reads=(Reads(GpuFacts), Reads(DockerFacts)))
    timeout_s = 10.0

    def run(self, ctx: Context) -> list[Finding]:
        gpu = ctx.facts.get(GpuFacts)
        if gpu is None or not (gpu.devices or gpu.unified_memory):
            raise SkipCheck(_("no NVIDIA GPU"))
        engine = ctx.facts.get(DockerFacts)
        docker = _installed(ctx, "dockerd") or _installed(ctx, "docker") or (ctx.host_path("/etc/docker").is_dir() and "/etc/docker")
        if not docker and engine is not None and engine.installed:
            # the docker check found it (on PATH, or an Engine named by DOCKER_HOST): never "not installed" beside it
            docker = ctx.installed("dockerd") or ctx.installed("docker") or engine.endpoint or "docker"
        if not docker:
            raise SkipCheck(_("Docker is not installed"))
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
        # the running Engine's view when it answered; daemon.json otherwise
        reachable = engine is not None and engine.reachable
        runtimes = engine.runtimes if engine is not None and reachable else sorted((config or {}).get("runtimes", {}) or {})
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
            message = _(
                "Neither nvidia-container-runtime-hook nor nvidia-cdi-hook is installed: `docker run --gpus all` fails with "
                'could not select device driver "" with capabilities: [[gpu]]; {install}.',
                install=_(INSTALL),
            )
            fix = _commands(_("install the NVIDIA Container Toolkit and register it with dockerd"), APT_INSTALL, CONFIGURE)
            findings.append(self.finding(CTK001, message, evidence=evidence, fix=fix))
        if not specs:
            message = _("No CDI spec names nvidia.com/gpu devices in {dirs}.", dirs=_(" or ").join(CDI_DIRS))
            commands = (GENERATE_CDI,) if tools["nvidia-ctk"] else (APT_INSTALL, GENERATE_CDI)
            findings.append(self.finding(CTK002, message, evidence=evidence, fix=_commands(_("generate the CDI spec"), *commands)))
        if "nvidia" not in runtimes:
            state = (
                _("it is unreadable: {error}", error=config_error)
                if config_error
                else _("runtimes: {runtimes}", runtimes=", ".join(runtimes) or _("none"))
            )
            message = _("daemon.json defines no nvidia runtime ({state}); only --runtime=nvidia needs it.", state=state)
            if engine is not None and engine.installed and engine.endpoint and not reachable:
                message = sentences(message, _engine_state(engine))
            findings.append(self.finding(CTK003, message, evidence=evidence, fix=_commands(_("register the nvidia runtime"), CONFIGURE)))
        return findings


def _engine_state(engine: DockerFacts) -> str:
    """Why the runtimes are daemon.json's, as the docker check found it (DKR003, DKR004, DKR005): Docker
    is installed, its Engine did not answer; never "not installed" beside the docker check's "not running"."""
    if engine.unanswered == "permission":
        return _(
            "Docker is installed but its Engine at {endpoint} refuses this user, so these runtimes are daemon.json's, not the Engine's.",
            endpoint=engine.endpoint,
        )
    if engine.unanswered == "api":
        return _(
            "Docker is installed but its Engine at {endpoint} refuses this client's API version, so these runtimes are daemon.json's, "
            "not the Engine's.",
            endpoint=engine.endpoint,
        )
    return _(
        "Docker is installed but its daemon is not running ({endpoint}), so these runtimes are daemon.json's, not the Engine's.",
        endpoint=engine.endpoint,
    )


def _commands(summary: str, *commands: str) -> FixRef[CommandsParams]:
    return FixRef(f"{summary}: {'; '.join(commands)}", CommandsParams(summary, commands))
