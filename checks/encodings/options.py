"""What the encodings check takes (--from-encoding) and what it publishes (the trees checked, and the
byte-order marks it left alone, with why)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from decode_doctor.engine import Facts, Options, option
from decode_doctor.i18n import _, localized, said


@dataclass(frozen=True)
class EncodingChoice:
    """One --from-encoding: an encoding for one file (path) or for every file the check cannot decide."""

    encoding: str
    path: str | None = None  # real path


def encoding_choice(value: str | EncodingChoice) -> EncodingChoice:
    """Parses ENCODING or PATH=ENCODING; ValueError (a usage error on the command line) if it cannot be used."""
    import codecs

    if isinstance(value, EncodingChoice):
        return value
    path, separator, name = value.rpartition("=")
    name = name.strip()
    try:
        info = codecs.lookup(name)
    except LookupError:
        raise ValueError(said("unknown encoding {name!r}", name=name)) from None
    if not getattr(info, "_is_text_encoding", True):
        raise ValueError(said("{name!r} is not a text encoding", name=name))
    if not separator:
        return EncodingChoice(name)
    if not path:
        raise ValueError(said("{value!r}: PATH=ENCODING needs a path before '='", value=value))
    if not os.path.lexists(path):
        raise ValueError(said("{path}: no such file", path=path))
    return EncodingChoice(name, os.path.realpath(path))


@dataclass(frozen=True)
class ScannedTree:
    path: str
    files: int
    bytes: int


@dataclass(frozen=True)
class KeptBom:
    """A UTF-8 file with a byte-order mark its readers accept: left alone, and why."""

    file: str
    why: str


KEPT_SHOWN = 5


@dataclass(frozen=True)
class EncodingsFacts(Facts):
    trees: list[ScannedTree] = field(default_factory=list)
    kept_boms: list[KeptBom] = field(default_factory=list)

    def summary(self) -> list[str]:
        lines = [
            _("{files:,} text files ({size:,} bytes) checked under {path}", files=tree.files, size=tree.bytes, path=tree.path)
            for tree in self.trees
        ]
        lines += [
            _("{file}: UTF-8 with a byte-order mark, left alone ({why})", file=kept.file, why=localized(kept.why))
            for kept in self.kept_boms[:KEPT_SHOWN]
        ]
        if len(self.kept_boms) > KEPT_SHOWN:
            more = len(self.kept_boms) - KEPT_SHOWN
            lines.append(_("and {count} more UTF-8 files with a byte-order mark their readers accept", count=more))
        return lines


@dataclass(frozen=True)
class EncodingsOptions(Options):
    from_encoding: tuple[str, ...] = option(
        "--from-encoding",
        "ENC or PATH=ENC (repeatable): the encoding of a file the check could not decide; never overrides a file "
        "that reads clearly as another encoding.",
        multiple=True,
        default=(),
        parse=encoding_choice,
        metavar="[PATH=]ENC",
    )
