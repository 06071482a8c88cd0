"""Docker's fixes: daemon.json edits (the classic image store, a broken mirror removed; dockerd is never
restarted) and the NVIDIA Container Toolkit commands, which are shown, never run."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from decode_doctor.checks.docker.codes import BREAKS_PULLS, CODES_GPUS, DKR020, ClassicStoreParams, RemoveMirrorParams
from decode_doctor.checks.docker.daemon_json import DAEMON_JSON, RESTART, render_like
from decode_doctor.engine import Applicability, CommandsParams, Context, Finding, FixableCode, Fixer
from decode_doctor.fixes.actions import FixPlan, ReplaceFile, ShowCommands
from decode_doctor.i18n import _, said


class DockerDaemonFixer(Fixer):
    name = "docker-daemon"
    claims: ClassVar[Mapping[FixableCode[Any], Applicability]] = {
        DKR020: Applicability.UNSAFE,
        **dict.fromkeys(BREAKS_PULLS.values(), Applicability.UNSAFE),
    }
    takes = (ClassicStoreParams, RemoveMirrorParams)

    def plan(self, finding: Finding, ctx: Context) -> FixPlan:
        path = ctx.host_path(DAEMON_JSON)
        original = path.read_text() if path.exists() else ""
        data: dict[str, Any] = json.loads(original) if original.strip() else {}
        if finding.fix is not None and isinstance(finding.fix.params, ClassicStoreParams):
            features = dict(data.get("features") or {})
            features["containerd-snapshotter"] = False
            data["features"] = features
            description = _("use the classic image store (features.containerd-snapshotter: false)")
            notes = [
                _("then restart dockerd yourself: {command}", command=RESTART),
                _("images pulled into the containerd store disappear from `docker images` until you switch back"),
            ]
        else:
            mirror = self.params(finding, RemoveMirrorParams).mirror
            configured = data.get("registry-mirrors") or []
            kept = [m for m in configured if m.rstrip("/") != mirror.rstrip("/")]
            if kept == configured:
                raise ValueError(
                    said(
                        "{mirror} is not in {daemon_json}'s registry-mirrors (configured elsewhere?)",
                        mirror=mirror,
                        daemon_json=DAEMON_JSON,
                    )
                )
            data["registry-mirrors"] = kept
            description = _("remove the mirror {mirror} from registry-mirrors", mirror=mirror)
            notes = [_("then restart dockerd yourself: {command}", command=RESTART), _("pulls then go to the upstream registry directly")]
        content = render_like(original, data)
        if json.loads(content) != data:
            raise ValueError(said("the edited daemon.json does not parse back to the intended settings"))
        return FixPlan(finding, description, [ReplaceFile(path, content.encode(), label=DAEMON_JSON)], notes)


class NvidiaContainerCommands(Fixer):
    name = "nvidia-container"
    claims: ClassVar[Mapping[FixableCode[Any], Applicability]] = dict.fromkeys(CODES_GPUS, Applicability.DISPLAY_ONLY)
    takes = (CommandsParams,)

    def plan(self, finding: Finding, ctx: Context) -> FixPlan:
        params = self.params(finding, CommandsParams)
        return FixPlan(finding, params.description, [ShowCommands(params.commands)])
