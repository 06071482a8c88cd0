"""Fake executables first on PATH, and fake Python packages, for probes that run real tools."""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

FAKES = Path(__file__).resolve().parent.parent / "fakes"


def fake_tool(bin_dir: Path, name: str, script: str) -> dict[str, str]:
    """Writes bin_dir/name as a shell script; returns the environment that puts it first on PATH."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    tool = bin_dir / name
    tool.write_text("#!/bin/sh\n" + script + "\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def printing(path: Path, exit_code: int = 0, to_stderr: bool = False) -> str:
    return f"cat {shlex.quote(str(path))}{' >&2' if to_stderr else ''}; exit {exit_code}"


def fake_torch(site: Path, version: str, cuda: str | None, cudnn_lib: str | None = None) -> dict[str, str]:
    """A torch package with only version.py (never imported by decode-doctor) on PYTHONPATH."""
    torch = site / "torch"
    torch.mkdir(parents=True, exist_ok=True)
    (torch / "__init__.py").write_text("raise ImportError('the fake torch must not be imported')\n")
    cuda_line = f"cuda: Optional[str] = '{cuda}'" if cuda else "cuda: Optional[str] = None"
    (torch / "version.py").write_text(
        f"from typing import Optional\n\n__all__ = ['__version__']\n__version__ = '{version}'\ndebug = False\n{cuda_line}\ngit_version = "
        f"'abc'\nhip: Optional[str] = None\n"
    )
    if cudnn_lib:
        (torch / "lib").mkdir(exist_ok=True)
        (torch / "lib" / f"libcudnn.so.{cudnn_lib}").write_bytes(b"")
    return {"PYTHONPATH": str(site)}


VM_DMIDECODE = "echo '# dmidecode 3.4'; echo 'Getting SMBIOS data from sysfs.'; echo 'SMBIOS 2.8 present.'; exit 0"


def vm_dmidecode(bin_dir: Path) -> dict[str, str]:
    """A dmidecode that lists no memory device, as on a virtual machine: the DIMMs' rating does not apply
    there, so BW002 is neither judged nor left unjudged (a missing or refused dmidecode is not judged)."""
    return fake_tool(bin_dir, "dmidecode", VM_DMIDECODE)
