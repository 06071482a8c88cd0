"""Package discovery for setuptools: the installed decode_doctor is assembled from doctor/, checks/ and
fixers/ ([tool.setuptools.package-dir] in pyproject.toml), and every package directory under them is
installed, so a new feature package needs no edit anywhere (tests/test_architecture.py installs one).

The message catalogs (doctor/locale/<lang>/LC_MESSAGES/decode_doctor.po) are compiled to .mo here,
with Babel (a build requirement): into the build for a wheel, beside the .po for an editable install."""

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOTS = {"decode_doctor": "doctor", "decode_doctor.checks": "checks", "decode_doctor.fixers": "fixers"}
HERE = Path(__file__).resolve().parent


def packages() -> list[str]:
    """Every directory under the roots that holds a module is a package of the distribution. A directory
    of modules without an __init__.py stops the build: setuptools' find_packages would skip it (and all
    under it) in silence, and the wheel would lack it while the checkout, on sys.path, still imports it."""
    found = []
    orphans = []
    for name, directory in ROOTS.items():
        top = HERE / directory
        for folder in sorted(path.parent for path in top.rglob("*.py")):
            if "__pycache__" in folder.parts:
                continue
            if not (folder / "__init__.py").is_file():
                orphans.append(str(folder.relative_to(HERE)))
                continue
            dotted = ".".join((name, *folder.relative_to(top).parts))
            if dotted not in found:
                found.append(dotted)
    if orphans:
        raise SystemExit(f"modules outside a package (add an __init__.py): {', '.join(sorted(set(orphans)))}")
    return found


def compile_catalogs(target: Path) -> list[str]:
    """doctor/locale's catalogs compiled under target/locale (doctor/i18n/compile.py, loaded by path)."""
    spec = importlib.util.spec_from_file_location("dd_compile", HERE / "doctor" / "i18n" / "compile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [str(path) for path in module.compile_catalogs(HERE / "doctor" / "locale", target / "locale")]


class BuildWithCatalogs(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            compile_catalogs(HERE / "doctor")  # the editable package is the source tree itself
        else:
            self._catalogs = compile_catalogs(Path(self.build_lib) / "decode_doctor")

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), *getattr(self, "_catalogs", [])]


setup(packages=packages(), cmdclass={"build_py": BuildWithCatalogs})
