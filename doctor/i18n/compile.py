"""The .po catalogs compiled to .mo with Babel: by setup.py at build or install time, by the tests
before they run (so a test reads the catalog as committed), and by hand:
`python -m decode_doctor.i18n.compile`. No package-relative import: setup.py loads this file by path."""

from __future__ import annotations

from pathlib import Path

LOCALE = Path(__file__).resolve().parent.parent / "locale"


def compile_catalogs(locale_dir: Path = LOCALE, target_dir: Path | None = None) -> list[Path]:
    """Every <lang>/LC_MESSAGES/*.po under locale_dir compiled to its .mo under target_dir (the
    same relative path; locale_dir itself by default). Fuzzy entries are left out, as msgfmt does."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    written = []
    for po in sorted(locale_dir.glob("*/LC_MESSAGES/*.po")):
        mo = (target_dir or locale_dir) / po.relative_to(locale_dir).with_suffix(".mo")
        mo.parent.mkdir(parents=True, exist_ok=True)
        with open(po, "rb") as source:
            catalog = read_po(source)
        with open(mo, "wb") as out:
            write_mo(out, catalog, use_fuzzy=False)
        written.append(mo)
    return written


if __name__ == "__main__":
    for path in compile_catalogs():
        print(path)
