"""Where decode-doctor keeps its state on this machine: fix journals and backups, the --redact-hosts
mapping, measurements worth reusing (quiet bandwidth figures, llama.cpp calibrations)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

STATE_DIR_ENV = "DECODE_DOCTOR_STATE_DIR"  # a command's --state-dir, handed to the checks it runs


def default_state_dir(env: Mapping[str, str] | None = None) -> Path:
    """$DECODE_DOCTOR_STATE_DIR, else $XDG_STATE_HOME/decode-doctor, else ~/.local/state/decode-doctor
    (env: the checks' environment, ctx.env; None: this process's)."""
    env = os.environ if env is None else env
    if env.get(STATE_DIR_ENV):
        return Path(env[STATE_DIR_ENV])
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "decode-doctor"
