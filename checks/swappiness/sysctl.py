"""Where vm.swappiness comes from: the boot-time sysctl configuration and the /proc/sys mount."""

from __future__ import annotations

import re
from dataclasses import dataclass

from decode_doctor.engine.context import Context

SWAPPINESS = "/proc/sys/vm/swappiness"
# systemd-sysctl / `sysctl --system` order: files collated by name across these directories (the
# first directory holding a name wins), applied in lexical order; /etc/sysctl.conf comes last.
SYSCTL_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d")
SYSCTL_CONF = "/etc/sysctl.conf"
SETTING = re.compile(r"^\s*-?\s*vm[./]swappiness\s*=\s*(\S+)\s*$")


@dataclass(frozen=True)
class PersistentSetting:
    value: str
    source: str  # the host path of the file that sets it last


def persistent_setting(ctx: Context, extra_file: tuple[str, str] | None = None) -> PersistentSetting | None:
    """The vm.swappiness value the boot-time sysctl configuration ends with, and which file sets it.

    extra_file (name, text) lets the fixer ask what the result would be with its file added.
    """
    chosen: dict[str, str] = {}  # basename → host path
    for directory in SYSCTL_DIRS:
        host_dir = ctx.host_path(directory)
        if not host_dir.is_dir():
            continue
        for entry in sorted(host_dir.iterdir()):
            if entry.name.endswith(".conf") and entry.name not in chosen:
                chosen[entry.name] = f"{directory}/{entry.name}"
    texts: list[tuple[str, str]] = []
    for name in sorted(set(chosen) | ({extra_file[0]} if extra_file else set())):
        if extra_file and name == extra_file[0]:
            texts.append((f"/etc/sysctl.d/{name}", extra_file[1]))
            continue
        text = ctx.read_text(chosen[name])
        if text is not None:
            texts.append((chosen[name], text))
    conf = ctx.read_text(SYSCTL_CONF)
    if conf is not None:
        texts.append((SYSCTL_CONF, conf))
    result = None
    for source, text in texts:
        for line in text.splitlines():
            match = SETTING.match(line)
            if match:
                result = PersistentSetting(match.group(1), source)
    return result


def proc_sys_read_only(ctx: Context) -> bool:
    """True when the mount holding /proc/sys is read-only (containers)."""
    best = ("", False)
    for line in (ctx.read_text("/proc/self/mounts") or ctx.read_text("/proc/mounts") or "").splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        mountpoint, options = parts[1], parts[3].split(",")
        if SWAPPINESS.startswith(mountpoint.rstrip("/") + "/") and len(mountpoint) >= len(best[0]):
            best = (mountpoint, "ro" in options)
    return best[1]


# Names the fix may write, in the order it prefers them: the first that sorts after every sysctl.d
# file setting vm.swappiness is read last and takes effect.
CONF_NAMES = ("90-decode-doctor.conf", "99-decode-doctor.conf", "zz-decode-doctor.conf", "zzzz-decode-doctor.conf")


def effective_conf_name(ctx: Context, text: str) -> str | None:
    """The sysctl.d file name whose setting would be the one applied at boot, or None when no
    sysctl.d file can win (a later /etc/sysctl.conf, or a name no candidate sorts after)."""
    for name in CONF_NAMES:
        after = persistent_setting(ctx, extra_file=(name, text))
        if after is not None and after.source == f"/etc/sysctl.d/{name}":
            return name
    return None
