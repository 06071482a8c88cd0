"""nvidia-smi, live: -q -x, then -q when the XML is unreadable, and its failures told apart; the one
mapping of nvidia-smi's failure kinds to codes, shared with `analyze`."""

from __future__ import annotations

from typing import Any

from decode_doctor.engine import Check, Code, CommandRecord, Context, Finding
from decode_doctor.i18n import N_, _, localized, reason

from .codes import GPU010, GPU011, GPU012, GPU013, GPU014, GPU015, GPU016, GPU017
from .contract import DriverInfo
from .nvidia import classify_smi_failure, parse_smi_text, parse_smi_xml
from .options import GpuOptions

SMI_TIMEOUT_S = 15.0

# nvidia-smi failure kind (nvidia.classify_smi_failure) → (code, message), live and pasted alike
SMI_FAILURE_CODES: dict[str, tuple[Code, str]] = {
    "no-driver": (GPU010, N_("nvidia-smi cannot communicate with the NVIDIA driver: the kernel module is not loaded.")),
    "version-mismatch": (
        GPU011,
        N_("Driver/library version mismatch: the driver was upgraded but the old kernel module is still loaded; reboot or reload it."),
    ),
    "no-devices": (GPU012, N_("The NVIDIA driver is loaded but finds no GPU.")),
    "unknown-error": (GPU013, N_("nvidia-smi cannot get a handle for a GPU (Unknown Error): the driver lost it.")),
    "fallen-off": (GPU014, N_("nvidia-smi says a GPU is lost (fallen off the bus): it is gone until a reset or reboot.")),
    "missing": (GPU015, N_("nvidia-smi is not installed: the NVIDIA driver is missing.")),
}


def record_evidence(record: CommandRecord) -> dict[str, Any]:
    return {"command": " ".join(record.argv), "exit_code": record.exit_code, "output": record.excerpt(800), "timed_out": record.timed_out}


def read_nvidia_smi(check: Check, ctx: Context, findings: list[Finding]) -> tuple[DriverInfo | None, bool]:
    """(the driver and GPUs, whether nvidia-smi failed); a failure is added to findings."""
    if not ctx.which("nvidia-smi"):
        return None, False
    limit = ctx.option(GpuOptions).nvidia_smi_timeout or SMI_TIMEOUT_S
    record = ctx.run(["nvidia-smi", "-q", "-x"], timeout_s=limit)
    evidence = record_evidence(record)
    if record.timed_out:
        stuck = _("nvidia-smi -q -x did not answer within {seconds} s: the driver is stuck.", seconds=format(limit, "g"))
        findings.append(check.finding(GPU016, stuck, evidence=evidence))
        return None, True
    output = record.stdout + record.stderr
    if record.exit_code == 0:
        try:
            return parse_smi_xml(record.stdout), False
        except ValueError as exc:
            text = ctx.run(["nvidia-smi", "-q"], timeout_s=limit)
            try:
                return parse_smi_text(text.stdout), False
            except ValueError:
                findings.append(check.finding(GPU017, _("{why}.", why=localized(reason(exc))), evidence=evidence))
                return None, True
    kind = classify_smi_failure(output, record.exit_code)
    if kind in SMI_FAILURE_CODES:
        code, wording = SMI_FAILURE_CODES[kind]
        message = _(wording)
    else:
        code, message = GPU017, _("nvidia-smi failed with exit code {exit_code}.", exit_code=record.exit_code)
    findings.append(check.finding(code, message + _(" Output: {output}", output=output.strip()[:200]), evidence=evidence))
    return None, True
