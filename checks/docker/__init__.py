"""Docker: the Engine and its image store, the registries and mirrors pulls go through ("failed to
decode referrers index"), and whether `docker run --gpus` works (NVIDIA Container Toolkit)."""
