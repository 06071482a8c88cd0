"""Where decode-doctor keeps its state on this machine: fix journals and backups, the --redact-hosts
mapping, measurements worth reusing (the CPU bandwidth cache)."""

from __future__ import annotations

import os
from pathlib import Path


def default_state_dir() -> Path:
    """$XDG_STATE_HOME/decode-doctor, else ~/.local/state/decode-doctor."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "decode-doctor"
