"""Image datasets: every image decoded in full, broken ones quarantined, lying extensions renamed."""

from .check import Images, ImagesFacts, default_quarantine
from .decode import inspect_file, sniff
from .walk import iter_images

__all__ = ["Images", "ImagesFacts", "default_quarantine", "inspect_file", "iter_images", "sniff"]
