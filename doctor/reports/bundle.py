"""The support bundle: one tar.gz with the member of each format that has one (reports.formats:
report.md, report.html, report.json) and raw/, redacted and leak-checked before a single byte is written."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
import socket
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.context import Context
from ..engine.facts import EnvRow
from ..engine.findings import Code
from .formats import members
from .redact import Redactor
from .render import render_member
from .report import Report
from .textsafe import shown, to_bytes
from .view import ReportView, build_view

RAW_FILE_LIMIT = 1 << 20


class LeakError(Exception):
    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems[:10]))
        self.problems = problems


@dataclass
class Bundle:
    name: str
    files: dict[str, bytes]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "host"


def _docker_config(ctx: Context) -> tuple[str, str] | None:
    directory = ctx.env.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")
    path = Path(directory) / "config.json"
    try:
        return str(path), path.read_text(errors="replace")
    except OSError:
        return None


def _read_raw(ctx: Context, name: str) -> str | None:
    path = Path(name[len("file://") :]) if name.startswith("file://") else ctx.host_path(name)
    try:
        with open(path, "rb") as handle:
            return handle.read(RAW_FILE_LIMIT).decode("utf-8", errors="replace")
    except OSError:
        return None


def _command_text(record: Any) -> str:
    return (
        f"$ {' '.join(record.argv)}\nexit code: {record.exit_code}\nduration: {record.duration_s:.3f} s\n"
        f"timed out: {record.timed_out}\nerror: {record.error}\n--- stdout ---\n{record.stdout}\n--- stderr ---\n{record.stderr}\n"
    )


def member_name(name: str) -> str:
    """An archive member's name as every other output writes a file name: an undecodable byte or a
    control character (a newline in a file name) as \\xNN."""
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in shown(name))


def build_bundle(report: Report, ctx: Context, host: list[EnvRow], redactor: Redactor, codes: dict[str, Code]) -> tuple[Bundle, ReportView]:
    """The bundle's files, every one redacted, and the view they were rendered from."""
    host_name = report.meta.get("host") or socket.gethostname()
    redactor.known_hosts |= {host_name, socket.gethostname(), socket.getfqdn()} - {"localhost", ""}
    if ctx.env.get("USER") and ctx.env["USER"] != "root":
        redactor.known_users.add(ctx.env["USER"])
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    env_vars = redactor.environment(ctx.env)  # first: secret-named variables teach the redactor their values
    files: dict[str, str] = {}
    for result in report.results:
        for number, record in enumerate(result.commands):
            name = f"raw/commands/{result.check}-{number + 1:02d}-{_slug(record.argv[0].rsplit('/', 1)[-1])}.txt"
            files[name] = redactor.text(_command_text(record))
        for name in result.files:
            text = _read_raw(ctx, name)
            if text is not None:
                shown = name[len("file://") :] if name.startswith("file://") else name
                where = f"raw/files/{_slug(result.check)}{shown}" if shown.startswith("/") else f"raw/files/{_slug(result.check)}/{shown}"
                files[where] = redactor.text(text)
    docker_config = _docker_config(ctx) if ctx.live_devices else None  # this user's, never another host's files
    if docker_config:
        try:
            files["raw/docker-config.json"] = json.dumps(redactor.json(json.loads(docker_config[1])), indent=2)
        except (ValueError, RecursionError):
            files["raw/docker-config.json"] = redactor.text(docker_config[1])
    files["raw/environment-variables.txt"] = "".join(
        f"{k}={redactor.text(v) if not v.startswith('[REDACTED') else v}\n" for k, v in env_vars.items()
    )
    if redactor.notes:
        files["raw/redaction-notes.txt"] = "".join(f"{note}\n" for note in redactor.notes)
    view = build_view(report, redactor, codes, host)
    for fmt in members():  # report.json, report.md, report.html: every format the registry makes a member
        files[fmt.file_name] = render_member(view, fmt)
    # a second pass: values learned late (in raw files) are scrubbed from everything, names included
    encoded: dict[str, bytes] = {}
    for name, text in files.items():
        member = member_name(redactor.path_name(name))
        while member in encoded:  # two paths that redact alike stay two members
            member = f"{member}~"
        encoded[member] = to_bytes(redactor.text(text))
    return Bundle(f"decode-doctor-{_slug(redactor.text(host_name))}-{stamp}", encoded), view


def write_bundle(bundle: Bundle, redactor: Redactor, output: Path) -> Path:
    problems = redactor.leaks(bundle.files)
    if problems:
        raise LeakError(problems)
    target = output / f"{bundle.name}.tar.gz" if output.is_dir() else output
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in sorted(bundle.files.items()):
            info = tarfile.TarInfo(f"{bundle.name}/{name}")
            info.size = len(data)
            info.mtime = int(dt.datetime.now().timestamp())
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    fd, tmp = tempfile.mkstemp(prefix=".decode-doctor-", suffix=".tmp", dir=target.parent)
    with os.fdopen(fd, "wb") as handle:
        handle.write(buffer.getvalue())
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(tmp, 0o600)  # a bundle describes the host: readable by its owner only
    os.replace(tmp, target)
    return target
