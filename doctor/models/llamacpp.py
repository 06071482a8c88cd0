"""The installed llama.cpp, as llama-cpp-python ships it: its version, read without importing it (the
import loads the shared library)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def engine_version() -> str | None:
    """llama-cpp-python's version, None when it is not installed (read without importing it)."""
    try:
        return version("llama_cpp_python")
    except PackageNotFoundError:
        return None
