"""Image datasets: every image decoded in full, broken ones quarantined, lying extensions renamed."""
