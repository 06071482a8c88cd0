"""Text that holds file names which are not UTF-8 (Python carries their bytes as lone surrogates,
surrogateescape): every output writes such a byte as \\xNN instead of failing to encode it."""

from __future__ import annotations

import codecs

ESCAPE = "decode-doctor-escape"


def _escape(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start : error.end]
    return "".join(f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else f"\\u{ord(c):04x}" for c in text), error.end


codecs.register_error(ESCAPE, _escape)


def to_bytes(text: str) -> bytes:
    return text.encode("utf-8", ESCAPE)


def shown(text: str) -> str:
    """The text with every undecodable byte written \\xNN (for a terminal or a JSON string)."""
    return to_bytes(text).decode("utf-8")


def escaped_tree(value: object) -> object:
    """A JSON-ready value with every string shown(): JSON has no escape for a byte, so the name's
    undecodable bytes become the text \\xNN in it (valid JSON, readable, and the same as other formats)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return shown(value)
        return value
    if isinstance(value, dict):
        return {escaped_tree(k): escaped_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [escaped_tree(v) for v in value]
    return value
