"""Docker's fixes: daemon.json edits (the classic image store, a broken mirror removed; dockerd is never
restarted) and the NVIDIA Container Toolkit commands, which are shown, never run."""

from __future__ import annotations

import json
from typing import Any

from decode_doctor.checks.docker.daemon_json import DAEMON_JSON, RESTART, render_like
from decode_doctor.engine import Applicability, Context, Finding, Fixer
from decode_doctor.fixes.actions import Plan, ReplaceFile, ShowCommands

MIRROR_CODES = ("REF001", "REF002", "REF003", "REF004", "REF005", "REF007")


class DockerDaemonFixer(Fixer):
    name = "docker-daemon"
    claims = {"DKR020": Applicability.UNSAFE, **dict.fromkeys(MIRROR_CODES, Applicability.UNSAFE)}

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
            notes = [
                f"then restart dockerd yourself: {RESTART}",
                "images pulled into the containerd store disappear from `docker images` until you switch back",
            ]
        else:
            configured = data.get("registry-mirrors") or []
            kept = [m for m in configured if m.rstrip("/") != params["mirror"].rstrip("/")]
            if kept == configured:
                raise ValueError(f"{params['mirror']} is not in {DAEMON_JSON}'s registry-mirrors (configured elsewhere?)")
            data["registry-mirrors"] = kept
            description = f"remove the mirror {params['mirror']} from registry-mirrors"
            notes = [f"then restart dockerd yourself: {RESTART}", "pulls then go to the upstream registry directly"]
        content = render_like(original, data)
        if json.loads(content) != data:
            raise ValueError("the edited daemon.json does not parse back to the intended settings")
        return Plan(finding, description, [ReplaceFile(path, content.encode(), label=DAEMON_JSON)], notes)


class NvidiaContainerCommands(Fixer):
    name = "nvidia-container"
    claims = dict.fromkeys(("CTK001", "CTK002", "CTK003"), Applicability.DISPLAY_ONLY)

    def plan(self, finding: Finding, ctx: Context) -> Plan:
        assert finding.fix is not None
        commands = tuple(str(command) for command in finding.fix.params["commands"])
        return Plan(finding, finding.fix.summary.split(":", 1)[0], [ShowCommands(commands)])
