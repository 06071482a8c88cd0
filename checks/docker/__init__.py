"""Docker: the Engine and its image store, the registries and mirrors pulls go through ("failed to
decode referrers index"), and whether `docker run --gpus` works (NVIDIA Container Toolkit)."""

from .daemon_json import DAEMON_JSON, RESTART, read_daemon_json, render_like
from .engine import DockerEngine, DockerFacts, api_version, image_store, mirrors, referrers_exposed
from .gpus import NvidiaContainer
from .referrers import Referrers

__all__ = [
    "DAEMON_JSON",
    "RESTART",
    "DockerEngine",
    "DockerFacts",
    "NvidiaContainer",
    "Referrers",
    "api_version",
    "image_store",
    "mirrors",
    "read_daemon_json",
    "referrers_exposed",
    "render_like",
]
