"""Edits /etc/docker/daemon.json: the classic image store, or a broken mirror removed. Never restarts dockerd."""

from __future__ import annotations

import json
import re
from typing import Any

from decode_doctor.checks.docker import DAEMON_JSON, RESTART
from decode_doctor.context import Context
from decode_doctor.fix import Fixer, Plan, ReplaceFile
from decode_doctor.model import Finding


def render_like(original: str, data: dict[str, Any]) -> str:
    """JSON in the original file's indentation (and final newline), keys in their original order."""
    match = re.search(r"\n([ \t]+)\S", original)
    indent: int | str = match.group(1) if match and "\t" in match.group(1) else len(match.group(1)) if match else 2
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    return text + ("\n" if original.endswith("\n") or not original else "")


class DockerDaemonFixer(Fixer):
    name = "docker-daemon"
    codes = ("DKR020", "REF001", "REF002", "REF003", "REF004", "REF005", "REF007")

    def plan(self, finding: Finding, ctx: Context) -> Plan:
        assert finding.fix is not None
        params = finding.fix.params
        path = ctx.host_path(DAEMON_JSON)
        original = path.read_text() if path.exists() else ""
        data: dict[str, Any] = json.loads(original) if original.strip() else {}
        if params["action"] == "classic-store":
            features = dict(data.get("features") or {})
            features["containerd-snapshotter"] = False
            data["features"] = features
            description = "use the classic image store (features.containerd-snapshotter: false)"
            notes = [f"then restart dockerd yourself: {RESTART}", "images pulled into the containerd store disappear from `docker images` until you switch back"]
        else:
            mirrors = [m for m in data.get("registry-mirrors") or [] if m.rstrip("/") != params["mirror"].rstrip("/")]
            if mirrors == (data.get("registry-mirrors") or []):
                raise ValueError(f"{params['mirror']} is not in {DAEMON_JSON}'s registry-mirrors (configured elsewhere?)")
            data["registry-mirrors"] = mirrors
            description = f"remove the mirror {params['mirror']} from registry-mirrors"
            notes = [f"then restart dockerd yourself: {RESTART}", "pulls then go to the upstream registry directly"]
        content = render_like(original, data)
        if json.loads(content) != data:
            raise ValueError("the edited daemon.json does not parse back to the intended settings")
        return Plan(finding, description, [ReplaceFile(path, content.encode(), label=DAEMON_JSON)], notes)
