"""Sets vm.swappiness to 1 now (/proc/sys) and at boot (a sysctl.d file)."""

from __future__ import annotations

from decode_doctor.checks.swappiness.codes import SWAP001, SWAP004, SwappinessParams
from decode_doctor.checks.swappiness.sysctl import CONF_NAMES, SWAPPINESS, effective_conf_name
from decode_doctor.engine import Applicability, Context, Finding, Fixer
from decode_doctor.fixes.actions import Action, FixPlan, ReplaceFile, WriteTunable
from decode_doctor.i18n import _

CONF_NAME = CONF_NAMES[0]
CONF_PATH = f"/etc/sysctl.d/{CONF_NAME}"


def conf_text(target: int) -> str:
    return (
        "# Written by decode-doctor: keep model weights and the KV cache in RAM.\n"
        "# Undo with `decode-doctor undo`, or delete this file.\n"
        f"vm.swappiness = {target}\n"
    )


class SwappinessFixer(Fixer):
    name = "swappiness"
    claims = {SWAP001: Applicability.SAFE, SWAP004: Applicability.SAFE}
    takes = (SwappinessParams,)

    def plan(self, finding: Finding, ctx: Context) -> FixPlan:
        target = self.params(finding, SwappinessParams).target
        text = conf_text(target)
        actions: list[Action] = []
        current = (ctx.read_text(SWAPPINESS) or "").strip()
        if current != str(target):
            actions.append(WriteTunable(ctx.host_path(SWAPPINESS), str(target), label=SWAPPINESS))
        # The check offers this fix only when some sysctl.d name wins at boot (effective_conf_name).
        name = effective_conf_name(ctx, text) or CONF_NAME
        path = f"/etc/sysctl.d/{name}"
        actions.append(ReplaceFile(ctx.host_path(path), text.encode(), label=path))
        notes = [_("a tuned profile (tuned-adm active) can set vm.swappiness again at boot")]
        return FixPlan(finding, _("set vm.swappiness={target} now and at boot", target=target), actions, notes)
