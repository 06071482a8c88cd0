"""vm.swappiness against the swap configured, now and at boot (sysctl.d order)."""

from .check import Swappiness, SwappinessFacts
from .sysctl import SWAPPINESS, SYSCTL_DIRS, persistent_setting, proc_sys_read_only

__all__ = ["SWAPPINESS", "SYSCTL_DIRS", "Swappiness", "SwappinessFacts", "persistent_setting", "proc_sys_read_only"]
