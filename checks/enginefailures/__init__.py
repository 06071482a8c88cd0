"""Known engine failures on this host's hardware (a catalog of crashes, each with a probe and verified
workarounds), and the same crashes in pasted logs."""
