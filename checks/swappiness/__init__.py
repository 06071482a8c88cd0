"""vm.swappiness against the swap configured, now and at boot (sysctl.d order)."""
