"""Fast start: --help and the light commands must not import the heavy modules."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("docker", "PIL", "numpy", "chardet", "cpuinfo", "rich", "psutil")

PROBE = """
import sys
from decode_doctor.cli.main import main
try:
    main({argv!r})
except SystemExit:
    pass
heavy = sorted(name for name in sys.modules if name.split('.')[0] in {heavy!r})
print("HEAVY:" + ",".join(heavy))
"""


@pytest.mark.parametrize("argv", [["--help"], ["check", "--help"], ["list"], ["explain", "SWAP001"]])
def test_no_heavy_imports(argv):
    proc = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], capture_output=True, text=True)
    line = [text for text in proc.stdout.splitlines() if text.startswith("HEAVY:")][-1]
    assert line == "HEAVY:", f"{argv} imported {line[6:]}"


def test_python_dash_m_entry_point():
    proc = subprocess.run([sys.executable, "-m", "decode_doctor", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("decode-doctor, version ")


CATALOG_PROBE = """
import sys
from decode_doctor.cli.main import main
from decode_doctor import i18n
try:
    main({argv!r})
except SystemExit:
    pass
print("LOADED:" + str(i18n.catalog.cache_info().currsize))
print("BABEL:" + ",".join(sorted(name for name in sys.modules if name.split('.')[0] == 'babel')))
"""


@pytest.mark.parametrize("lang, loaded", [("en", "0"), ("zh-CN", "1")])
def test_help_loads_a_catalog_only_in_chinese_and_never_babel(lang, loaded):
    """The start-up cost of the Chinese interface (acceptance: --help within 10 %): English --help
    loads no catalog at all, Chinese loads one compiled .mo, and neither imports Babel (a build tool)."""
    argv = ["--help", "--lang", lang]
    proc = subprocess.run([sys.executable, "-c", CATALOG_PROBE.format(argv=argv)], capture_output=True, text=True)
    lines = dict(line.split(":", 1) for line in proc.stdout.splitlines() if line.startswith(("LOADED:", "BABEL:")))
    assert lines == {"LOADED": loaded, "BABEL": ""}, proc.stdout[-500:] + proc.stderr[-500:]
