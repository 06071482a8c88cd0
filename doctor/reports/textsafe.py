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


# C0 controls but newline and tab, DEL, C1 controls, and the bidirectional marks, overrides and isolates
# (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069): what can clear, retitle or reorder a terminal
# when a name holds it
_TERMINAL_UNSAFE = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A)}
_TERMINAL_UNSAFE.update({c: f"\\u{c:04x}" for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))})


def terminal_safe(text: str) -> str:
    """The text with every control character a terminal would act on written as \\xNN (\\u202e for
    a right-to-left override); newlines and tabs stay."""
    return text.translate(_TERMINAL_UNSAFE)
