"""Whether installed distributions declare entry points, read without importlib.metadata: shared by the
registry (checks, fixers) and the output formats (doctor/reports/formats.py), both asked on every start."""

from __future__ import annotations

import os
import sys


def plugins_declared(groups: tuple[str, ...]) -> bool:
    """Whether an installed distribution may declare an entry point in these groups: the entry_points.txt
    of every dist-info and egg-info directory on sys.path (what importlib.metadata reads, without its
    import and its 15 ms). What cannot be read so plainly (a zip or an egg on the path) counts as one."""
    headers = {f"[{group}]" for group in groups}
    for entry in sys.path:
        where = entry or "."
        try:
            names = os.listdir(where)
        except OSError:
            if os.path.exists(where):
                return True  # a zip archive on the path: let importlib.metadata read it
            continue
        for name in names:
            if name.endswith(".egg"):
                return True
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(where, name, "entry_points.txt"), encoding="utf-8") as handle:
                    if any(line.strip() in headers for line in handle):
                        return True
            except (OSError, ValueError):
                continue
    return False
