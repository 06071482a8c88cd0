"""Package discovery for setuptools: the installed decode_doctor is assembled from doctor/, checks/ and
fixers/ ([tool.setuptools.package-dir] in pyproject.toml), and every package directory under them is
installed, so a new feature package needs no edit anywhere (tests/test_architecture.py installs one)."""

from setuptools import find_packages, setup

ROOTS = {"decode_doctor": "doctor", "decode_doctor.checks": "checks", "decode_doctor.fixers": "fixers"}


def packages() -> list[str]:
    found = []
    for name, directory in ROOTS.items():
        found.append(name)
        found += [f"{name}.{sub}" for sub in find_packages(directory)]
    return found


setup(packages=packages())
