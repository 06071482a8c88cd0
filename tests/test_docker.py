"""Docker: a real Engine and registry, our own broken mirrors, captured /info and daemon.json files."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import pytest

from decode_doctor.checks.docker.codes import ClassicStoreParams
from decode_doctor.checks.docker.engine import api_version, image_store, mirrors, referrers_exposed
from decode_doctor.checks.docker.referrers import INDEX_TYPE, OK_404, Answer, judge_referrers, parse_reference

from .conftest import FIXTURES, kill_at_step, run_dd, unprivileged_child
from .support.emitted import unprovable
from .support.harness import cli
from .support.services import http_server, json_body, unix_http_server


def run_check(select: str, *args: str, env: dict | None = None, unprivileged: bool = False, root: Path | None = None) -> dict:
    """A JSON report: in process, or through a real process that file modes bind (conftest.unprivileged_child)."""
    argv = ["check", "--select", select, "--format", "json", *args]
    if root is not None:  # the tree stands for this machine's filesystem: its Engine is the one at DOCKER_HOST
        argv += ["--root", str(root), "--same-host"]
    if unprivileged:
        proc = run_dd(*argv, env=env, unprivileged=True)
        assert proc.stdout.startswith("{"), proc.stdout + proc.stderr
        return json.loads(proc.stdout)
    return cli(*argv, env=env).json()


def codes(report: dict) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for finding in report["findings"]:
        out.setdefault(finding["code"], finding)
    return out


def empty_root(tmp_path: Path) -> Path:
    root = tmp_path / "host"
    root.mkdir(exist_ok=True)
    return root


# --- the real Engine ---------------------------------------------------------------------------


def test_real_engine_version_info_and_store(docker_host, tmp_path):
    report = run_check("docker", env={"DOCKER_HOST": docker_host}, root=empty_root(tmp_path))
    assert "DKR020" not in codes(report)
    facts = report["facts"]["docker"]
    assert facts["version"] and facts["api_version"]
    assert facts["storage_driver"] == "vfs" and facts["image_store"] == "classic"
    assert facts["endpoint_from"] == "DOCKER_HOST"
    assert facts["reachable"] and facts["referrers_exposed"] is False
    assert any(row["name"] == "Docker Engine" and row["judged"] == "ok" for row in report["environment"])


def test_daemon_not_running(tmp_path):
    missing = run_check("docker", env={"DOCKER_HOST": f"unix://{tmp_path}/gone.sock"}, root=empty_root(tmp_path))
    assert codes(missing)["DKR003"]["message"].endswith("gone.sock: no socket).")
    stale = tmp_path / "stale.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(stale))
    server.close()  # the file stays, nobody listens: a crashed dockerd
    refused = run_check("docker", env={"DOCKER_HOST": f"unix://{stale}"}, root=empty_root(tmp_path))
    assert "connection refused" in codes(refused)["DKR003"]["message"]


def test_permission_denied_on_the_socket():
    """DKR004: an Engine's socket that this process may not open (a user outside the docker group). The
    socket's mode refuses the connect before a byte is said, so a listening socket of our own stands for
    dockerd's; root connects anywhere, so the check runs in conftest.unprivileged_child."""
    import tempfile

    if isinstance(why := unprivileged_child(), str):
        pytest.skip(unprovable("DKR004", why))
    with tempfile.TemporaryDirectory(prefix="dd-socket-") as top, socket.socket(socket.AF_UNIX) as server:
        os.chmod(top, 0o755)  # /tmp/pytest-of-root is root's only (user nobody)
        path = Path(top) / "docker.sock"
        server.bind(str(path))
        server.listen()
        path.chmod(0o000)
        report = run_check("docker", env={"DOCKER_HOST": f"unix://{path}"}, unprivileged=True, root=Path("/"))
    found = codes(report)
    assert "DKR004" in found and "Permission denied" in found["DKR004"]["message"]
    assert "usermod -aG docker" in cli("explain", "DKR004").stdout


def test_api_version_too_old(tmp_path):
    def route(handler):
        if handler.path.endswith("/version"):
            return 200, {"Content-Type": "application/json"}, json_body({"Version": "1.0.0", "ApiVersion": "1.12"})
        return (
            400,
            {"Content-Type": "application/json"},
            json_body({"message": "client version 1.24 is too new. Maximum supported API version is 1.12"}),
        )

    with unix_http_server(tmp_path / "old.sock", route) as url:
        report = run_check("docker", env={"DOCKER_HOST": url}, root=empty_root(tmp_path))
    assert "DKR005" in codes(report)


def _small_filesystem() -> str | None:
    """A mounted filesystem with less free space than the check asks for (a tmpfs), if the machine has one."""
    from decode_doctor.checks.docker.engine import LOW_DISK_BYTES

    for candidate in ("/dev/shm", "/run", "/boot"):
        try:
            stat = os.statvfs(candidate)
        except OSError:
            continue
        if 0 < stat.f_bavail * stat.f_frsize < LOW_DISK_BYTES:
            return candidate
    return None


def test_an_engine_on_the_containerd_store_with_a_small_data_root(tmp_path):
    """Engine 29.1 with the containerd image store (pulls ask mirrors for referrers: DKR020, with the
    unsafe fix back to the classic store) and a data root on a filesystem with little room (DKR010)."""
    small = _small_filesystem()
    if small is None:
        pytest.skip("no mounted filesystem here has less than 50 GB free")
    root = empty_root(tmp_path)
    (root / "var/lib").mkdir(parents=True)
    (root / "var/lib/docker").symlink_to(small)  # statvfs of the data root under --root reads that filesystem

    def route(handler):
        if handler.path.endswith("/version"):
            return (
                200,
                {"Content-Type": "application/json"},
                json_body({"Version": "29.1.2", "ApiVersion": "1.52", "MinAPIVersion": "1.24"}),
            )
        if handler.path.endswith("/info"):
            status = [["driver-type", "io.containerd.snapshotter.v1"]]
            info = {"Driver": "overlayfs", "DriverStatus": status, "DockerRootDir": "/var/lib/docker", "Runtimes": {"runc": {}}}
            return 200, {"Content-Type": "application/json"}, json_body(info)
        return 404, {"Content-Type": "application/json"}, json_body({"message": "not here"})

    with unix_http_server(tmp_path / "engine.sock", route) as url:
        report = run_check("docker", env={"DOCKER_HOST": url}, root=root)
    found = codes(report)
    assert found["DKR010"]["evidence"]["docker_root_dir"] == "/var/lib/docker"
    assert "GB free; inference images need 10–25 GB each" in found["DKR010"]["message"]
    assert found["DKR020"]["fix"]["fixer"] == "docker-daemon" and found["DKR020"]["fix"]["applicability"] == "unsafe"
    assert report["facts"]["docker"]["image_store"] == "containerd" and report["facts"]["docker"]["referrers_exposed"] is True


def test_a_registry_that_does_not_answer_cannot_be_vouched_for(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    report = run_check("referrers", "--registry", f"http://127.0.0.1:{port}", root=empty_root(tmp_path))
    (finding,) = [f for f in report["findings"] if f["code"] == "REF009"]
    assert finding["severity"] == "warning" and f"127.0.0.1:{port}" in finding["message"]


def test_not_installed(tmp_path):
    env = {"PATH": str(tmp_path / "empty-bin"), "DOCKER_CONFIG": str(tmp_path / "cfg")}
    (tmp_path / "empty-bin").mkdir()
    report = run_check("docker", env=env, root=empty_root(tmp_path))
    if not os.path.exists("/var/run/docker.sock"):
        assert report["findings"] == [] and report["facts"]["docker"]["installed"] is False


# --- captured Engines and daemon.json files ------------------------------------------------------


def test_captured_engines():
    desktop = json.loads(
        (FIXTURES / "docker-info/docker-desktop-28.2.2-wsl2-containerd-snapshotter-nvidia-runtime.api-info.json").read_text()
    )
    assert image_store(desktop, None) == "containerd"
    old = json.loads((FIXTURES / "docker-info/docker-18.09.0-debian9-overlay2.json").read_text())
    assert image_store(old, None) == "classic"
    version_28 = json.loads((FIXTURES / "docker-version/docker-desktop-4.42.1-engine-28.2.2-wsl2.api-version.json").read_text())
    assert not referrers_exposed(version_28, "containerd")
    assert referrers_exposed({**version_28, "Version": "29.1.2"}, "containerd")
    assert not referrers_exposed({**version_28, "Version": "29.1.2"}, "classic")
    text = (FIXTURES / "docker-version/docker-29.0.0-version-pretty-server-APIVersion-rename.partial.txt").read_text()
    server = json.loads(text[text.index("{") :].split('"Components"')[0].rsplit(",", 1)[0] + "}}")["Server"]
    assert api_version(server) == "1.52"


def test_mirrors_from_info_and_daemon_json():
    daemon = json.loads((FIXTURES / "daemon-json/registry-mirrors-https.json").read_text())
    assert mirrors({"RegistryConfig": {"Mirrors": ["https://docker.1ms.run/"]}}, daemon) == [
        "https://docker.1ms.run",
        "https://docker.xuanyuan.me",
    ]
    snapshotter = json.loads((FIXTURES / "daemon-json/containerd-snapshotter-true-docker-docs.json").read_text())
    assert image_store({}, snapshotter) == "containerd"
    assert image_store({}, json.loads((FIXTURES / "daemon-json/containerd-snapshotter-explicitly-false.json").read_text())) == "classic"


# --- referrers: the real registry, and broken mirrors of our own ------------------------------------


def test_real_registry_has_no_referrers_api_and_falls_back(registry_with_image, docker_host, tmp_path):
    _host, image = registry_with_image
    report = run_check("docker,referrers", "--image", image, env={"DOCKER_HOST": docker_host}, root=empty_root(tmp_path))
    found = codes(report)
    finding = found["REF008"]
    assert finding["evidence"]["status"] == 404 and finding["evidence"]["fallback_status"] == 404
    assert finding["evidence"]["manifest_status"] == 200 and finding["evidence"]["digest"].startswith("sha256:")


INDEX = {"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": []}
BROKEN = {
    "html": (200, "text/html", b"<!DOCTYPE html><html><body>Welcome to our mirror</body></html>", "REF001"),
    "empty": (200, INDEX_TYPE, b"", "REF002"),
    "array": (200, "application/json", b"[]", "REF003"),
    "errors": (200, "application/json", json_body({"errors": [{"code": "UNSUPPORTED", "message": "not supported"}]}), "REF003"),
    "null-manifests": (200, INDEX_TYPE, json_body({"schemaVersion": 2, "manifests": None}), "REF003"),
    "trailing": (200, INDEX_TYPE, json_body(INDEX) + b"\n<html>", "REF004"),
    "oversized": (200, INDEX_TYPE, json_body({**INDEX, "annotations": {"pad": "x" * (4 * 1048 * 1048)}}), "REF005"),
    "content-type": (200, "application/json", json_body(INDEX), "REF006"),
    "server-error": (500, "text/plain", b"internal error", "REF007"),
    "good-index": (200, INDEX_TYPE, json_body(INDEX), "REF008"),
}


def broken_mirror(mode: str):
    status, content_type, body, _ = BROKEN[mode]

    def route(handler):
        if "/referrers/" in handler.path:
            assert "ns=docker.io" in handler.path  # the mirror form of the request
            assert handler.headers["Accept"].startswith(INDEX_TYPE)
            return status, {"Content-Type": content_type}, body
        return 404, {"Content-Type": "application/json"}, json_body({"errors": [{"code": "MANIFEST_UNKNOWN"}]})

    return http_server(route)


@pytest.mark.parametrize("mode", sorted(BROKEN))
def test_each_broken_answer_has_its_own_finding(mode, tmp_path):
    with broken_mirror(mode) as url:
        report = run_check("referrers", "--registry", url, root=empty_root(tmp_path))
    (finding,) = report["findings"]
    assert finding["code"] == BROKEN[mode][3], finding
    assert url in finding["message"] or url in finding["evidence"]["registry"]
    if finding["code"] not in ("REF008",):
        assert finding["evidence"]["first_bytes"] == BROKEN[mode][2][:200].decode(errors="replace")


def test_token_flow_and_manifest_resolution(tmp_path):
    manifest = json_body({"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": []})
    seen = []

    def route(handler):
        seen.append(handler.path)
        if handler.path.startswith("/token"):
            return 200, {"Content-Type": "application/json"}, json_body({"token": "t0ken"})
        if handler.headers.get("Authorization") != "Bearer t0ken":
            realm = f"http://{handler.headers['Host']}/token"
            return 401, {"WWW-Authenticate": f'Bearer realm="{realm}",service="test"'}, b""
        if "/manifests/8.0" in handler.path:
            return 200, {"Content-Type": INDEX_TYPE}, manifest
        if "/referrers/" in handler.path:
            return 200, {"Content-Type": "text/html"}, b"<html>login</html>"
        return 404, {}, b""

    with http_server(route) as url:
        host = url.split("//", 1)[1]
        report = run_check("referrers", "--image", f"{host}/library/mysql:8.0", root=empty_root(tmp_path))
    (finding,) = report["findings"]
    assert finding["code"] == "REF001"
    assert any(p.startswith("/token?service=test&scope=repository%3Alibrary%2Fmysql%3Apull") for p in seen)
    assert finding["evidence"]["manifest_status"] == 200


def test_no_network_probes_nothing(tmp_path):
    report = run_check("referrers", "--registry", "http://127.0.0.1:9", "--no-network", root=empty_root(tmp_path))
    referrers = {r["check"]: r for r in report["results"]}["referrers"]
    assert referrers["state"] == "skipped" and referrers["reason"] == "--no-network"


def test_parse_reference_defaults():
    assert parse_reference("mysql:8.0") == ("docker.io", "library/mysql", "8.0")
    assert parse_reference("ghcr.io/org/img") == ("ghcr.io", "org/img", "latest")
    assert parse_reference("127.0.0.1:5000/tiny:1") == ("127.0.0.1:5000", "tiny", "1")
    assert parse_reference("user/app@sha256:abc") == ("docker.io", "user/app", "sha256:abc")
    assert judge_referrers(Answer(404, "", b""))[0] == OK_404


# --- the fix: a broken mirror removed from daemon.json, undone byte for byte ---------------------------


def test_remove_a_broken_mirror_and_undo(docker_host, tmp_path):
    root = empty_root(tmp_path)
    (root / "etc/docker").mkdir(parents=True)
    with broken_mirror("html") as url, broken_mirror("good-index") as good:
        original = (
            f'{{\n    "log-driver": "journald",\n    "registry-mirrors": [\n        "{url}",\n        "{good}"\n    ],\n    '
            f'"default-runtime": "runc"\n}}\n'
        )
        (root / "etc/docker/daemon.json").write_text(original)
        state = tmp_path / "state"
        args = ("check", "--select", "docker,referrers", "--root", str(root), "--same-host")  # the Engine at DOCKER_HOST is its
        preview = cli(*args, "--fix", "--dry-run", env={"DOCKER_HOST": docker_host})
        assert "is marked unsafe" in preview.stdout
        killed = run_dd(
            "check",
            "--select",
            "docker,referrers",
            "--root",
            str(root),
            "--same-host",
            "--fix",
            "--unsafe-fixes",
            "--yes",
            "--state-dir",
            str(tmp_path / "killed"),
            env={"DOCKER_HOST": docker_host, **kill_at_step(3)},
        )
        assert killed.returncode == -9  # the CLI sample of a kill mid-fix: after the backup, before the write
        assert run_dd("undo", "--state-dir", str(tmp_path / "killed")).returncode == 0
        assert (root / "etc/docker/daemon.json").read_text() == original
        proc = cli(
            "check",
            "--select",
            "docker,referrers",
            "--root",
            str(root),
            "--same-host",
            "--fix",
            "--unsafe-fixes",
            "--yes",
            "--state-dir",
            str(state),
            env={"DOCKER_HOST": docker_host},
        )
    assert "applied" in proc.stdout, proc.stdout + proc.stderr
    assert "sudo systemctl restart docker" in proc.stdout
    edited = json.loads((root / "etc/docker/daemon.json").read_text())
    assert edited == {"log-driver": "journald", "registry-mirrors": [good], "default-runtime": "runc"}
    assert "REF001: resolved" in proc.stdout
    assert (root / "etc/docker/daemon.json").read_text().startswith('{\n    "log-driver"')  # indentation kept
    assert cli("undo", "--state-dir", str(state)).exit_code == 0
    assert (root / "etc/docker/daemon.json").read_text() == original


def test_classic_store_fix_keeps_every_other_key(tmp_path):
    from decode_doctor.engine import Context, Finding, FixRef, Severity
    from decode_doctor.fixers.docker import DockerDaemonFixer

    root = empty_root(tmp_path)
    (root / "etc/docker").mkdir(parents=True)
    shutil.copy(FIXTURES / "daemon-json/containerd-snapshotter-true-compact-log-local.json", root / "etc/docker/daemon.json")
    before = json.loads((root / "etc/docker/daemon.json").read_text())
    finding = Finding("DKR020", "docker", Severity.INFO, "t", "m", fix=FixRef("s", ClassicStoreParams()))
    plan = DockerDaemonFixer().plan(finding, Context(root=root))
    (action,) = plan.actions
    after = json.loads(action.content)
    assert after["features"]["containerd-snapshotter"] is False
    assert {k: v for k, v in after.items() if k != "features"} == {k: v for k, v in before.items() if k != "features"}
    assert any("disappear from `docker images`" in note for note in plan.notes)
