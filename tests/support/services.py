"""Real services for the Docker tests: a private dockerd, a docker-registry, and HTTP servers of our own."""

from __future__ import annotations

import http.server
import io
import json
import os
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

SUPERVISE = Path(__file__).resolve().parent / "supervise.py"


def supervised(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Starts a service under supervise.py: it dies with this test run, however the run ends."""
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, str(SUPERVISE), "--", *argv], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for(predicate: Callable[[], bool], seconds: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    detail = log.read_text()[-2000:] if log and log.exists() else ""
    raise RuntimeError(f"{what} did not come up within {seconds:g} s\n{detail}")


@contextmanager
def dockerd() -> Iterator[str]:
    """A private Engine: no iptables, no bridge, vfs storage, its own socket under a temp dir."""
    binary = shutil.which("dockerd")
    if binary is None:
        raise FileNotFoundError("dockerd is not installed (Debian: apt-get install docker.io)")
    base = Path(tempfile.mkdtemp(prefix="dd-dockerd-", dir="/tmp"))
    sock = base / "docker.sock"
    log = base / "dockerd.log"
    argv = [
        binary,
        "--iptables=false",
        "--ip-forward=false",
        "--bridge=none",
        "--storage-driver=vfs",
        f"--data-root={base}/data",
        f"--exec-root={base}/exec",
        f"--pidfile={base}/dockerd.pid",
        f"-H=unix://{sock}",
    ]
    proc = supervised(argv, log)
    try:
        _wait_for(lambda: sock.exists() and _answers(sock), 30, "dockerd", log)
        yield f"unix://{sock}"
    finally:
        stop(proc)
        subprocess.run(["umount", "-R", str(base / "exec")], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def _answers(sock: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(sock))
            client.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
            return b"200" in client.recv(64)
    except OSError:
        return False


@contextmanager
def registry() -> Iterator[str]:
    """Debian's docker-registry (distribution 2.8) on 127.0.0.1; returns host:port."""
    binary = shutil.which("docker-registry")
    if binary is None:
        raise FileNotFoundError("docker-registry is not installed (Debian: apt-get install docker-registry)")
    base = Path(tempfile.mkdtemp(prefix="dd-registry-"))
    port = free_port()
    config = base / "config.yml"
    config.write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {base}/data\nhttp:\n  addr: 127.0.0.1:{port}\nlog:\n  level: warn\n"
    )
    proc = supervised([binary, "serve", str(config)], base / "registry.log")
    try:
        _wait_for(lambda: _http_ok(f"http://127.0.0.1:{port}/v2/"), 20, "docker-registry", base / "registry.log")
        yield f"127.0.0.1:{port}"
    finally:
        stop(proc)
        shutil.rmtree(base, ignore_errors=True)


def _http_ok(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


def push_tiny_image(docker_host: str, registry_host: str, repository: str = "tiny", tag: str = "1") -> str:
    """docker import of a one-file tar, tagged and pushed with the real Engine; returns the reference."""
    import docker

    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w") as tar:
        data = b"hello from decode-doctor\n"
        info = tarfile.TarInfo("hello.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    client = docker.DockerClient(base_url=docker_host, version="auto", timeout=60)
    reference = f"{registry_host}/{repository}"
    client.api.import_image_from_data(payload.getvalue(), repository=reference, tag=tag)
    for line in client.api.push(reference, tag=tag, stream=True, decode=True):
        if "error" in line:
            raise RuntimeError(line["error"])
    return f"{reference}:{tag}"


Route = Callable[[http.server.BaseHTTPRequestHandler], tuple[int, dict[str, str], bytes]]


def _handler(route: Route, unix: bool = False) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, headers, body = route(self)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def address_string(self) -> str:
            return "unix" if unix else super().address_string()

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def http_server(route: Route) -> Iterator[str]:
    """A threaded HTTP server on 127.0.0.1 answering every GET with route(handler)."""

    Handler = _handler(route)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def unix_http_server(path: Path, route: Route) -> Iterator[str]:
    """The same, on a unix socket (a fake Engine)."""

    Handler = _handler(route, unix=True)

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    server = Server(str(path), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"unix://{path}"
    finally:
        server.shutdown()
        server.server_close()


def json_body(data: object) -> bytes:
    return json.dumps(data).encode()


# --- the fleet: Debian's prometheus-node-exporter and prometheus on loopback ---------------------------


def _binary(name: str, package: str) -> str:
    found = shutil.which(name) or next((str(p) for p in (Path("/usr/bin") / name,) if p.exists()), None)
    if found is None:
        raise FileNotFoundError(f"{name} is not installed (Debian: apt-get install {package})")
    return found


@contextmanager
def node_exporter(textfile_dir: Path) -> Iterator[str]:
    """node_exporter with only its textfile collector, reading textfile_dir; returns host:port."""
    binary = _binary("prometheus-node-exporter", "prometheus-node-exporter")
    port = free_port()
    log = textfile_dir.parent / f"node-exporter-{port}.log"
    argv = [
        binary,
        f"--web.listen-address=127.0.0.1:{port}",
        "--collector.disable-defaults",
        "--collector.textfile",
        f"--collector.textfile.directory={textfile_dir}",
    ]
    proc = supervised(argv, log)
    try:
        _wait_for(lambda: _http_ok(f"http://127.0.0.1:{port}/metrics"), 20, "node_exporter", log)
        yield f"127.0.0.1:{port}"
    finally:
        stop(proc)


@contextmanager
def prometheus(targets: list[str], rule_files: list[Path], base: Path) -> Iterator[str]:
    """Prometheus scraping targets every second and evaluating rule_files every second; returns its URL."""
    binary = _binary("prometheus", "prometheus")
    port = free_port()
    config = base / "prometheus.yml"
    listed = ", ".join(f'"{t}"' for t in targets)
    rules = "".join(f'  - "{path}"\n' for path in rule_files)
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n{rules}"
        f"scrape_configs:\n  - job_name: node\n    static_configs:\n      - targets: [{listed}]\n"
    )
    log = base / "prometheus.log"
    argv = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={base / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=1h",
    ]
    proc = supervised(argv, log)
    try:
        _wait_for(lambda: _http_ok(f"http://127.0.0.1:{port}/-/ready"), 60, "prometheus", log)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


def prometheus_api(url: str, path: str, **params: str) -> object:
    """The data of a Prometheus HTTP API answer (GET url/api/v1/path?params); raises on an error status."""
    import urllib.parse
    import urllib.request

    query = urllib.parse.urlencode(params)
    with urllib.request.urlopen(f"{url}/api/v1/{path}" + (f"?{query}" if query else ""), timeout=10) as response:
        answer = json.loads(response.read())
    if answer.get("status") != "success":
        raise RuntimeError(f"Prometheus said {answer}")
    return answer["data"]


def wait_until(predicate: Callable[[], object], seconds: float, what: str) -> object:
    """Polls predicate until it returns something true (and returns it), or fails naming what it waited for."""
    deadline = time.monotonic() + seconds
    last: object = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"{what}: not within {seconds:g} s (last: {last!r})")
