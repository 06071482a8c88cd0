"""Docker Engine: reachable or why not, versions, image store, mirrors, disk, runtimes, and whether
pulls go through containerd's referrers client ("failed to decode referrers index")."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from decode_doctor.check import Check, Needs
from decode_doctor.context import Context
from decode_doctor.model import Applicability, Code, Finding, FixRef, Severity

MIN_API = "1.24"  # the docker SDK's floor
REFERRERS_FROM = (29, 1)  # Engine version whose containerd store queries the referrers API
LOW_DISK_BYTES = 50 * 10**9
DAEMON_JSON = "/etc/docker/daemon.json"
RESTART = "sudo systemctl restart docker"

DKR001 = Code("DKR001", "Docker Engine", Severity.INFO,
    what="The Engine decode-doctor reached (DOCKER_HOST, else the current docker context, else the default socket): version, API version, platform, storage driver, image store, registry mirrors, runtimes.",
    why="Inference images are pulled and run by this Engine; its store and mirrors decide whether pulls work.",
    fix_by_hand="Nothing to fix.")
DKR002 = Code("DKR002", "Docker is not installed", Severity.INFO,
    what="No docker or dockerd binary, no Engine socket and no DOCKER_HOST.",
    why="Containerised inference servers cannot run here; host-installed ones are unaffected.",
    fix_by_hand="Install Docker Engine if you deploy with containers (https://docs.docker.com/engine/install/).")
DKR003 = Code("DKR003", "The Docker daemon is not running", Severity.ERROR,
    what="Docker is installed but nothing answers on the Engine socket (no socket file, or a stale one: connection refused).",
    why="docker pull and docker run fail with \"Cannot connect to the Docker daemon\".",
    fix_by_hand="sudo systemctl start docker (and enable it: sudo systemctl enable --now docker); check journalctl -u docker for why it stopped.")
DKR004 = Code("DKR004", "Permission denied on the Docker socket", Severity.ERROR,
    what="The Engine's socket exists, but this user may not connect to it.",
    why="Every docker command fails for this user with \"permission denied while trying to connect to the Docker daemon socket\".",
    fix_by_hand="sudo usermod -aG docker $USER, then log out and in (members of the docker group are root-equivalent); or use rootless Docker.")
DKR005 = Code("DKR005", "The Docker Engine's API version is too old", Severity.ERROR,
    what=f"The Engine speaks an API older than {MIN_API}, the oldest the Docker SDK and current CLIs support.",
    why="Current clients and tools (compose, the SDK, GPU tooling) refuse to talk to it.",
    fix_by_hand="Upgrade Docker Engine.")
DKR010 = Code("DKR010", "Little free space for Docker images", Severity.WARNING,
    what="The filesystem holding Docker's root directory has less than 50 GB free.",
    why="Inference images (CUDA + PyTorch + engine) are 10–25 GB each, and pulls unpack a second copy; pulls fail with \"no space left on device\" half-way.",
    fix_by_hand="docker system prune (removes unused images and build cache), or move data-root to a larger disk in daemon.json.")
DKR020 = Code("DKR020", "Pulls use containerd's referrers API (containerd image store, Engine ≥ 29.1)", Severity.INFO,
    what="With the containerd image store, Engine 29.1 and later ask the registry — or the configured mirror — for GET /v2/<repo>/referrers/<digest> whenever a pulled index carries attestations, and decode any 2xx body as an OCI image index.",
    why="A mirror or proxy that answers that request with 200 and an HTML page, an empty body or other JSON breaks every such pull with \"failed to decode referrers index: invalid character '<' looking for beginning of value\" (or \": EOF\"). It is not an old client: upgrading does not help.",
    fix_by_hand="Probe the mirrors (decode-doctor check --select referrers); fix or remove a broken mirror (it must answer 404, or a valid index with \"manifests\": []), or switch to the classic store with \"features\": {\"containerd-snapshotter\": false} in daemon.json and restart dockerd — images pulled into the containerd store then disappear from `docker images`.",
    fix_safety="Unsafe (needs --unsafe-fixes): sets features.containerd-snapshotter to false in daemon.json, keeping every other key; journaled and undoable. decode-doctor never restarts dockerd: it prints the command, and images in the containerd store are hidden until you switch back.")


def version_tuple(version: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version or "")[:3])


def image_store(info: dict[str, Any], daemon: dict[str, Any] | None) -> str:
    status = info.get("DriverStatus") or []
    if info.get("Driver") == "overlayfs" or any(isinstance(row, list) and row[:2] == ["driver-type", "io.containerd.snapshotter.v1"] for row in status):
        return "containerd"
    if info.get("Driver"):
        return "classic"
    features = (daemon or {}).get("features") or {}
    return "containerd" if features.get("containerd-snapshotter") else "classic"


def api_version(version: dict[str, Any]) -> str | None:
    return version.get("ApiVersion") or version.get("APIVersion")  # 29.0.0 briefly spelled it APIVersion


def mirrors(info: dict[str, Any], daemon: dict[str, Any] | None) -> list[str]:
    found = list((info.get("RegistryConfig") or {}).get("Mirrors") or [])
    for mirror in (daemon or {}).get("registry-mirrors") or []:
        if mirror not in found and mirror.rstrip("/") + "/" not in found:
            found.append(mirror)
    return [m.rstrip("/") for m in found]


def referrers_exposed(version: dict[str, Any], store: str) -> bool:
    return store == "containerd" and version_tuple(version.get("Version"))[:2] >= REFERRERS_FROM


def read_daemon_json(ctx: Context) -> tuple[dict[str, Any] | None, str | None]:
    text = ctx.read_text(DAEMON_JSON)
    if text is None:
        return None, None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"{DAEMON_JSON} is not valid JSON ({exc.msg}, line {exc.lineno}): dockerd will refuse to start"
    return (data if isinstance(data, dict) else None), None


def engine_url(ctx: Context) -> tuple[str, str]:
    """(base URL, where it came from): DOCKER_HOST, else the CLI's current context, else the default socket."""
    if ctx.env.get("DOCKER_HOST"):
        return ctx.env["DOCKER_HOST"], "DOCKER_HOST"
    try:
        from docker.context import ContextAPI

        context = ContextAPI.get_current_context()
        if context is not None and context.Host and context.name != "default":
            return context.Host, f"docker context {context.name}"
    except Exception:
        pass
    return "unix:///var/run/docker.sock", "default socket"


def classify_connection_error(text: str) -> str:
    if "too new" in text or "too old" in text or "no longer supported" in text:
        return "api"
    if "PermissionError" in text or "Permission denied" in text or "Errno 13" in text:
        return "permission"
    if "FileNotFoundError" in text or "No such file" in text or "ConnectionRefused" in text or "Connection refused" in text:
        return "not running"
    if "too new" in text or "too old" in text or "no longer supported" in text:
        return "api"
    return "not running"


class DockerEngine(Check):
    name = "docker"
    description = "Docker Engine reachability, versions, image store, mirrors, disk space and the referrers exposure"
    codes = (DKR001, DKR002, DKR003, DKR004, DKR005, DKR010, DKR020)
    needs = Needs(files=(DAEMON_JSON,), commands=("Engine API: GET /version, GET /info",))
    timeout_s = 20.0

    def run(self, ctx: Context) -> list[Finding]:
        import docker
        from docker.errors import DockerException

        daemon, daemon_error = read_daemon_json(ctx)
        url, origin = engine_url(ctx)
        installed = any(ctx.which(b) for b in ("docker", "dockerd")) or ctx.host_path("/etc/docker").is_dir()
        socket_path = url[len("unix://"):] if url.startswith("unix://") else None
        if not installed and origin == "default socket" and socket_path and not os.path.exists(socket_path):
            ctx.publish("docker", {"reachable": False, "installed": False})
            return [self.finding("DKR002", "Docker is not installed (no docker or dockerd, no Engine socket, no DOCKER_HOST).")]
        evidence: dict[str, Any] = {"endpoint": url, "endpoint_from": origin, "daemon_json_error": daemon_error}
        try:
            client = docker.DockerClient(base_url=url, timeout=10, version="auto")
            version = client.version()
            info = client.info()
        except DockerException as exc:
            kind = classify_connection_error(str(exc))
            evidence["error"] = str(exc)[:400]
            ctx.publish("docker", {"reachable": False, "installed": True, "daemon": daemon})
            if kind == "permission":
                return [self.finding("DKR004", f"Permission denied on {socket_path or url}: this user is not allowed to use the Docker Engine.", evidence=evidence)]
            if kind == "api":
                return [self.finding("DKR005", f"The Engine at {url} refuses this client's API version: {str(exc)[:160]}", evidence=evidence)]
            where = f"{socket_path}: {'no socket' if socket_path and not os.path.exists(socket_path) else 'connection refused'}" if socket_path else url
            return [self.finding("DKR003", f"The Docker daemon is not running ({where}).", evidence=evidence)]
        return self._judge(ctx, version, info, daemon, evidence)

    def _judge(self, ctx: Context, version: dict[str, Any], info: dict[str, Any], daemon: dict[str, Any] | None, evidence: dict[str, Any]) -> list[Finding]:
        api = api_version(version)
        store = image_store(info, daemon)
        mirror_list = mirrors(info, daemon)
        exposed = referrers_exposed(version, store)
        platform = (version.get("Platform") or {}).get("Name") or info.get("OperatingSystem")
        evidence.update({
            "version": version.get("Version"), "api_version": api, "platform": platform, "os": info.get("OperatingSystem"),
            "storage_driver": info.get("Driver"), "driver_status": info.get("DriverStatus"), "image_store": store,
            "mirrors": mirror_list, "runtimes": sorted(info.get("Runtimes") or {}), "default_runtime": info.get("DefaultRuntime"),
            "cdi_spec_dirs": info.get("CDISpecDirs"), "discovered_devices": info.get("DiscoveredDevices"), "docker_root_dir": info.get("DockerRootDir"),
        })
        findings = []
        if api and version_tuple(api) < version_tuple(MIN_API):
            findings.append(self.finding("DKR005", f"Engine {version.get('Version')} speaks API {api}, older than {MIN_API}.", evidence=evidence))
        message = (
            f"Docker {version.get('Version')} (API {api}, {platform}) via {evidence['endpoint_from']}: storage {info.get('Driver')}, "
            f"{store} image store, mirrors: {', '.join(mirror_list) or 'none'}, runtimes: {', '.join(evidence['runtimes']) or 'none'}."
        )
        findings.append(self.finding("DKR001", message, evidence=evidence))
        root_dir = info.get("DockerRootDir")
        if root_dir and evidence["endpoint"].startswith("unix://") and ctx.host_path(root_dir).exists():
            stat = os.statvfs(ctx.host_path(root_dir))
            free = stat.f_bavail * stat.f_frsize
            evidence["docker_root_free_bytes"] = free
            if free < LOW_DISK_BYTES:
                findings.append(self.finding("DKR010", f"{root_dir} has {free / 1e9:.1f} GB free; inference images need 10–25 GB each, twice while pulling.", evidence={"docker_root_dir": root_dir, "free_bytes": free}))
        if store == "containerd":
            fix = FixRef("docker-daemon", "switch dockerd to the classic image store", Applicability.UNSAFE, params={"action": "classic-store"})
            note = "this Engine queries the referrers API on pulls" if exposed else f"Engine {version.get('Version')} does not query it yet; 29.1 and later do"
            findings.append(self.finding("DKR020", f"containerd image store: {note}; a mirror or proxy that answers it with HTML or an empty 200 breaks pulls (\"failed to decode referrers index\").", evidence=evidence, fix=fix if exposed else None))
        ctx.publish("docker", {"reachable": True, "installed": True, "version": version.get("Version"), "api_version": api, "image_store": store, "mirrors": mirror_list, "referrers_exposed": exposed, "runtimes": evidence["runtimes"], "cdi_spec_dirs": info.get("CDISpecDirs"), "daemon": daemon})
        return findings
