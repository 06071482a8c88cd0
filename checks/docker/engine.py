"""Docker Engine: reachable or why not, versions, image store, mirrors, disk, runtimes, and whether
pulls go through containerd's referrers client ("failed to decode referrers index")."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import Any

from decode_doctor.engine import Check, Context, EnvRow, Facts, Finding, FixRef, Metric, Sample
from decode_doctor.engine.units import human_bytes
from decode_doctor.i18n import N_, _

from .codes import CODES_ENGINE, DKR003, DKR004, DKR005, DKR010, DKR020, MIN_API, RETIRED, ClassicStoreParams
from .daemon_json import read_daemon_json

REFERRERS_FROM = (29, 1)  # Engine version whose containerd store queries the referrers API
LOW_DISK_BYTES = 50 * 10**9


@dataclass(frozen=True)
class DockerFacts(Facts):
    installed: bool
    reachable: bool = False
    endpoint: str | None = None
    endpoint_from: str | None = None
    version: str | None = None
    api_version: str | None = None
    platform: str | None = None
    storage_driver: str | None = None
    image_store: str | None = None
    mirrors: list[str] = field(default_factory=list)
    runtimes: list[str] = field(default_factory=list)
    default_runtime: str | None = None
    cdi_spec_dirs: list[str] | None = None
    docker_root_dir: str | None = None
    docker_root_free_bytes: int | None = None
    referrers_exposed: bool = False
    daemon: dict[str, Any] | None = None  # /etc/docker/daemon.json as read
    daemon_error: str | None = None
    unanswered: str | None = None  # installed, not reachable: "not running" (DKR003), "permission" (DKR004), "api" (DKR005)

    def summary(self) -> list[str]:
        if not self.installed:
            return [_("Docker is not installed")]
        if not self.reachable and self.endpoint is None:  # another host's files: its Engine was not asked
            return [_("Docker is installed; its Engine was not asked (another host's files)")]
        if not self.reachable:
            return [_("Docker Engine not reachable at {endpoint}", endpoint=self.endpoint)]
        return [
            _(
                "Docker {version} (API {api}, {platform}) via {endpoint_from}: storage {storage}, {store} image store, "
                "mirrors: {mirrors}, runtimes: {runtimes}",
                version=self.version,
                api=self.api_version,
                platform=self.platform or _("platform not reported"),
                endpoint_from=self.endpoint_from,
                storage=self.storage_driver,
                store=self.image_store,
                mirrors=", ".join(self.mirrors) or _("none"),
                runtimes=", ".join(self.runtimes) or _("none"),
            )
        ]

    def environment(self) -> list[EnvRow]:
        if not self.installed:
            return [EnvRow("Docker Engine", _("not installed"))]
        if not self.reachable and self.endpoint is None:
            return [EnvRow("Docker Engine", _("not asked (another host's files)"))]
        if not self.reachable:
            return [EnvRow("Docker Engine", _("not reachable at {endpoint}", endpoint=self.endpoint), ("DKR",))]
        value = _("{version} (API {api}, {store} store)", version=self.version, api=self.api_version, store=self.image_store)
        rows = [EnvRow("Docker Engine", value, ("DKR", "REF", "CTK"))]
        if self.mirrors:
            rows.append(EnvRow(_("registry mirrors"), ", ".join(self.mirrors), ("REF",)))
        return rows

    def metrics(self) -> list[Metric]:
        if not self.reachable:
            return []
        exposed = Sample({"store": self.image_store or "unknown"}, 1.0 if self.referrers_exposed else 0.0)
        return [Metric("decode_doctor_docker_referrers_exposed", "1 when pulls go through containerd's referrers client.", (exposed,))]

    def compared(self) -> dict[str, str | float]:
        if not self.reachable:
            state = "not installed" if not self.installed else "not asked" if self.endpoint is None else "not reachable"
            return {"Docker Engine": state}
        return {"Docker Engine": self.version or "?", "Docker image store": self.image_store or "?"}


def version_tuple(version: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d{1,9}", version or "")[:3])


INFO_TYPES = {
    "Runtimes": dict, "RegistryConfig": dict, "DriverStatus": list, "Driver": str, "DockerRootDir": str,
    "OperatingSystem": str, "DefaultRuntime": str, "CDISpecDirs": list,
}  # fmt: skip
VERSION_TYPES = {"Version": str, "ApiVersion": str, "APIVersion": str, "Platform": dict}


def engine_answers(version: Any, info: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Engine's /version and /info with every field this check reads of the type it reads it as;
    a field of another type (a proxy's or a fork's idea of the API) is dropped, never trusted."""
    version = version if isinstance(version, dict) else {}
    info = info if isinstance(info, dict) else {}
    if isinstance(info.get("Runtimes"), list):  # some proxies list the names
        info = {**info, "Runtimes": {str(name): {} for name in info["Runtimes"] if isinstance(name, str)}}
    kept_info = {k: v for k, v in info.items() if k not in INFO_TYPES or isinstance(v, INFO_TYPES[k])}
    kept_version = {k: v for k, v in version.items() if k not in VERSION_TYPES or isinstance(v, VERSION_TYPES[k])}
    return kept_version, kept_info


def image_store(info: dict[str, Any], daemon: dict[str, Any] | None) -> str:
    status = info.get("DriverStatus") or []
    if info.get("Driver") == "overlayfs" or any(
        isinstance(row, list) and row[:2] == ["driver-type", "io.containerd.snapshotter.v1"] for row in status
    ):
        return "containerd"
    if info.get("Driver"):
        return "classic"
    features = (daemon or {}).get("features")
    return "containerd" if isinstance(features, dict) and features.get("containerd-snapshotter") is True else "classic"


def api_version(version: dict[str, Any]) -> str | None:
    return version.get("ApiVersion") or version.get("APIVersion")  # 29.0.0 briefly spelled it APIVersion


def mirrors(info: dict[str, Any], daemon: dict[str, Any] | None) -> list[str]:
    listed = (info.get("RegistryConfig") or {}).get("Mirrors")
    found = [m for m in listed if isinstance(m, str)] if isinstance(listed, list) else []
    configured = (daemon or {}).get("registry-mirrors")
    for mirror in configured if isinstance(configured, list) else []:
        if not isinstance(mirror, str):
            continue  # dockerd refuses such a daemon.json; DKR reports the file, not a mirror
        if mirror not in found and mirror.rstrip("/") + "/" not in found:
            found.append(mirror)
    return [m.rstrip("/") for m in found]


def referrers_exposed(version: dict[str, Any], store: str) -> bool:
    return store == "containerd" and version_tuple(version.get("Version"))[:2] >= REFERRERS_FROM


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
    return "not running"


class DockerEngine(Check):
    name = "docker"
    looks_at = (
        "the Engine through the Docker SDK (DOCKER_HOST, else the current docker context, else the default socket): not running, "
        "permission denied, API too old told apart; free space under the data root; whether pulls use containerd's referrers client "
        "(Engine ≥ 29.1 with the containerd store). Facts: installed or not, version, API version, platform, storage driver, image "
        "store (containerd or classic), mirrors (from `/info` and daemon.json), runtimes. Fix (unsafe, `--unsafe-fixes`): back to the "
        "classic store in daemon.json; dockerd is never restarted for you"
    )
    description = N_("Docker Engine reachability, versions, image store, mirrors, disk space and the referrers exposure")
    codes = CODES_ENGINE
    timeout_s = 20.0
    facts_type = DockerFacts
    retired = RETIRED

    def run(self, ctx: Context) -> list[Finding]:
        import docker
        from docker.errors import DockerException

        daemon, daemon_error = read_daemon_json(ctx)
        installed = any(ctx.installed(b) for b in ("docker", "dockerd")) or ctx.host_path("/etc/docker").is_dir()
        if not ctx.live_devices:  # another host's files: DOCKER_HOST, this user's docker context and the socket are this machine's
            if installed:
                ctx.not_judged(_("the Docker Engine"), ctx.elsewhere)
            configured = mirrors({}, daemon)  # daemon.json's, for the referrers probe
            ctx.publish(DockerFacts(installed=installed, mirrors=configured, daemon=daemon, daemon_error=daemon_error))
            return []
        url, origin = engine_url(ctx)
        socket_path = url[len("unix://") :] if url.startswith("unix://") else None
        if not installed and origin == "default socket" and socket_path and not os.path.exists(socket_path):
            ctx.publish(DockerFacts(installed=False, daemon=daemon, daemon_error=daemon_error))
            return []
        base = DockerFacts(installed=True, endpoint=url, endpoint_from=origin, daemon=daemon, daemon_error=daemon_error)
        evidence: dict[str, Any] = {"endpoint": url, "endpoint_from": origin, "daemon_json_error": daemon_error}
        try:
            client = docker.DockerClient(base_url=url, timeout=10, version="auto")
            version = client.version()
            info = client.info()
        except DockerException as exc:
            kind = classify_connection_error(str(exc))
            ctx.publish(replace(base, unanswered=kind))
            evidence["error"] = str(exc)[:400]
            if kind == "permission":
                message = _("Permission denied on {socket}: this user is not allowed to use the Docker Engine.", socket=socket_path or url)
                return [self.finding(DKR004, message, evidence=evidence)]
            if kind == "api":
                refused = _("The Engine at {url} refuses this client's API version: {error}", url=url, error=str(exc)[:160])
                return [self.finding(DKR005, refused, evidence=evidence)]
            state = _("no socket") if socket_path and not os.path.exists(socket_path) else _("connection refused")
            where = _("{socket}: {state}", socket=socket_path, state=state) if socket_path else url
            return [self.finding(DKR003, _("The Docker daemon is not running ({where}).", where=where), evidence=evidence)]
        facts = self._facts(ctx, base, *engine_answers(version, info))
        ctx.publish(facts)
        return self._judge(facts, version, evidence)

    @staticmethod
    def _facts(ctx: Context, base: DockerFacts, version: dict[str, Any], info: dict[str, Any]) -> DockerFacts:
        store = image_store(info, base.daemon)
        root_dir = info.get("DockerRootDir")
        free = None
        if root_dir and (base.endpoint or "").startswith("unix://") and ctx.host_path(root_dir).exists():
            stat = os.statvfs(ctx.host_path(root_dir))
            free = stat.f_bavail * stat.f_frsize
        return replace(
            base,
            reachable=True,
            version=version.get("Version"),
            api_version=api_version(version),
            platform=(version.get("Platform") or {}).get("Name") or info.get("OperatingSystem"),
            storage_driver=info.get("Driver"),
            image_store=store,
            mirrors=mirrors(info, base.daemon),
            runtimes=sorted(info.get("Runtimes") or {}),
            default_runtime=info.get("DefaultRuntime"),
            cdi_spec_dirs=info.get("CDISpecDirs"),
            docker_root_dir=root_dir,
            docker_root_free_bytes=free,
            referrers_exposed=referrers_exposed(version, store),
        )

    def _judge(self, facts: DockerFacts, version: dict[str, Any], evidence: dict[str, Any]) -> list[Finding]:
        evidence = {**evidence, **facts.to_dict()}
        findings = []
        api = facts.api_version
        if api and version_tuple(api) < version_tuple(MIN_API):
            message = _("Engine {version} speaks API {api}, older than {minimum}.", version=facts.version, api=api, minimum=MIN_API)
            findings.append(self.finding(DKR005, message, evidence=evidence))
        free = facts.docker_root_free_bytes
        if free is not None and free < LOW_DISK_BYTES:
            message = _(
                "{root} has {free} free; inference images need 10–25 GB each, twice while pulling.",
                root=facts.docker_root_dir,
                free=human_bytes(free),
            )
            findings.append(self.finding(DKR010, message, evidence={"docker_root_dir": facts.docker_root_dir, "free_bytes": free}))
        if facts.image_store == "containerd":
            fix = FixRef(_("switch dockerd to the classic image store"), ClassicStoreParams())
            if facts.referrers_exposed:
                note = _("this Engine queries the referrers API on pulls")
            else:
                note = _("Engine {version} does not query it yet; 29.1 and later do", version=facts.version)
            message = _(
                'containerd image store: {note}; a mirror or proxy that answers it with HTML or an empty 200 breaks pulls ("failed to '
                'decode referrers index").',
                note=note,
            )
            findings.append(self.finding(DKR020, message, evidence=evidence, fix=fix if facts.referrers_exposed else None))
        return findings
