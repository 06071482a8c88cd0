"""The message catalog's template, extracted from the source with Babel (babel.cfg), and the .po
files kept in step with it.

    python -m decode_doctor.i18n.messages   # writes doctor/locale/decode_doctor.pot, updates each .po

A new message arrives in each .po untranslated (tests/test_i18n.py then fails until it has its
translation); a message gone from the code is dropped as obsolete. Babel is a test and build
dependency, not a runtime one."""

from __future__ import annotations

from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po, write_po

from . import DOMAIN

REPOSITORY = Path(__file__).resolve().parents[2]
LOCALE = REPOSITORY / "doctor" / "locale"
TEMPLATE = LOCALE / f"{DOMAIN}.pot"


def extract(root: Path = REPOSITORY) -> Catalog:
    """Every message of the source tree at root, by babel.cfg's methods."""
    with open(root / "babel.cfg") as handle:
        method_map, options_map = parse_mapping_cfg(handle)
    template = Catalog(project="decode-doctor", domain=DOMAIN)
    keywords = {**DEFAULT_KEYWORDS, "N_plural": (1, 2), "said": None}  # N_plural: a plural pair marked for the catalog
    found = extract_from_dir(root, method_map, options_map, keywords=keywords, directory_filter=_source_only)
    for filename, lineno, message, comments, context in found:
        template.add(message, None, [(filename, lineno)], auto_comments=comments, context=context)
    return template


def _source_only(dirpath: str) -> bool:
    name = Path(dirpath).name
    return not name.startswith((".", "_")) and name not in ("tests", "benchmarks", "build", "deploy", "fixtures")


def update() -> list[Path]:
    template = extract()
    with open(TEMPLATE, "wb") as out:
        write_po(out, template, width=100, omit_header=False)
    written = [TEMPLATE]
    for po in sorted(LOCALE.glob("*/LC_MESSAGES/*.po")):
        with open(po, "rb") as handle:
            catalog = read_po(handle)
        catalog.update(template, no_fuzzy_matching=True)
        with open(po, "wb") as out:
            write_po(out, catalog, width=100, ignore_obsolete=True)
        written.append(po)
    return written


if __name__ == "__main__":
    for path in update():
        print(path)
