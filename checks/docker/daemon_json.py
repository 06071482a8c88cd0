"""/etc/docker/daemon.json: read for the checks, rewritten in its own style by the fixer."""

from __future__ import annotations

import json
import re
from typing import Any

from decode_doctor.engine import Context
from decode_doctor.i18n import said

DAEMON_JSON = "/etc/docker/daemon.json"
RESTART = "sudo systemctl restart docker"


def read_daemon_json(ctx: Context) -> tuple[dict[str, Any] | None, str | None]:
    """(the settings, or None; why it could not be used)."""
    text = ctx.read_text(DAEMON_JSON)
    if text is None:
        return None, None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, said(
            "{file} is not valid JSON ({error}, line {line}): dockerd will refuse to start",
            file=DAEMON_JSON,
            error=exc.msg,
            line=exc.lineno,
        )
    except (ValueError, RecursionError):  # a 5,000-digit number, nesting beyond reason
        return None, said(
            "{file} nests too deeply or holds a number too long to be Docker's settings: dockerd will refuse to start", file=DAEMON_JSON
        )
    return (data if isinstance(data, dict) else None), None


def render_like(original: str, data: dict[str, Any]) -> str:
    """JSON in the original file's indentation (and final newline), keys in their original order."""
    match = re.search(r"\n([ \t]+)\S", original)
    indent: int | str = match.group(1) if match and "\t" in match.group(1) else len(match.group(1)) if match else 2
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    return text + ("\n" if original.endswith("\n") or not original else "")
