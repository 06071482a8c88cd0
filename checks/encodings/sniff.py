"""What a file's bytes show before any reading of them as text: the magic numbers of binary formats,
UTF-32 and UTF-16 without a byte-order mark (from where the zero bytes fall, or for CJK text from its
even-offset line ends), and control bytes no text holds. textenc.decide asks these first."""

from __future__ import annotations

BINARY_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"PK\x03\x04", "zip"),
    (b"GGUF", "GGUF"),
    (b"\x89PNG", "PNG"),
    (b"\xff\xd8\xff", "JPEG"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\x7fELF", "ELF"),
    (b"SQLite format 3\x00", "SQLite"),
    (b"\x93NUMPY", "numpy"),
    (b"%PDF", "PDF"),
    (b"\x89HDF\r\n\x1a\n", "HDF5"),
    (b"\x08\x01\x12", "ONNX/protobuf"),
)
CONTROL_BYTES = [b for b in range(0x80) if b <= 0x08 or b == 0x0B or 0x0E <= b <= 0x1F or b == 0x7F]


def sniff_binary(data: bytes) -> str | None:
    """The binary format the bytes start as ("gzip", "safetensors", "NUL bytes"…); None for text."""
    for magic, name in BINARY_MAGIC:
        if data.startswith(magic):
            return name
    if data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "pickle"
    if len(data) >= 10 and data[8:10] == b'{"':
        length = int.from_bytes(data[:8], "little")
        if 0 < length <= len(data) - 8:
            return "safetensors"
    if b"\x00" in data:
        return "NUL bytes"
    return None


def wide_without_bom(data: bytes) -> str | None:
    """UTF-32 or UTF-16 without a BOM, from where the zero bytes of its ASCII characters fall."""
    if len(data) >= 8 and len(data) % 4 == 0:
        lanes = [data[i::4].count(0) / (len(data) // 4) for i in range(4)]
        if lanes[1] > 0.95 and lanes[2] > 0.95 and lanes[3] > 0.95:
            return "utf-32-le"
        if lanes[0] > 0.95 and lanes[1] > 0.95 and lanes[2] > 0.95:
            return "utf-32-be"
    if len(data) < 4 or len(data) % 2:
        return None
    even, odd = data[0::2], data[1::2]
    zero_even, zero_odd = even.count(0) / len(even), odd.count(0) / len(odd)
    for codec, lean in (("utf-16-le", zero_odd > 0.4 and zero_even < 0.05), ("utf-16-be", zero_even > 0.4 and zero_odd < 0.05)):
        if lean and _mostly_ascii(data, codec):
            return codec
    return _wide_cjk(data)


def _mostly_ascii(data: bytes, codec: str) -> bool:
    """The characters whose high byte is zero are text: most of them printable ASCII (not "é", "ÿ"
    and friends, which random bytes give as often)."""
    try:
        text = data.decode(codec)
    except UnicodeDecodeError:
        return False
    low = [c for c in text if ord(c) < 0x100]
    return len(low) >= 3 and sum(1 for c in low if " " <= c <= "~" or c in "\t\r\n") >= 0.75 * len(low)


WIDE_LINE_ENDS = {"utf-16-le": b"\n\x00", "utf-16-be": b"\x00\n"}
CJK_SHARE = 0.9  # of the characters that are not ASCII: what a CJK text without a BOM must be
WIDE_CJK_LIMIT = 16 << 20  # larger files are not read as UTF-16 without a BOM on this evidence


def _wide_cjk(data: bytes) -> str | None:
    """UTF-16 without a BOM whose text is CJK (few zero bytes: only its line ends and spaces have
    them): every line end falls at an even offset (`0a 00` little-endian), the whole decodes
    strictly (surrogates paired), holds no control, private-use or unassigned character, and at
    least nine in ten of its characters beyond ASCII are CJK. Random bytes of even length almost
    never pass all of that; an odd length never is UTF-16."""
    from .readings import forbidden

    if len(data) % 2 or len(data) < 4 or len(data) > WIDE_CJK_LIMIT or sniff_binary(data[:4096]) not in (None, "NUL bytes"):
        return None
    for codec, line_end in WIDE_LINE_ENDS.items():
        ends = _find_all(data, line_end)
        aligned = [i for i in ends if i % 2 == 0]
        if not aligned or (len(aligned) < len(ends) and len(aligned) < 2):
            continue
        try:
            text = data.decode(codec)
        except UnicodeDecodeError:
            continue
        if forbidden(text.replace("\r", "").replace("\n", "").replace("\t", "")):
            continue
        wide = [c for c in text if ord(c) > 0x7F]
        if len(wide) < 2 or (len(aligned) < 2 and len(wide) < 6):  # two lines, or one line of six
            continue
        hangul = sum(1 for c in wide if 0xAC00 <= ord(c) <= 0xD7A3)
        han = sum(1 for c in wide if _is_cjk(c)) - hangul
        # one language: Chinese and Japanese text has no Hangul, Korean text little Han (random units mix them)
        cjk = max(han, hangul) if min(han, hangul) <= 0.1 * (han + hangul) else 0
        if cjk >= CJK_SHARE * len(wide) and text.count("\n") == len(aligned):
            return codec
    return None


def _find_all(data: bytes, needle: bytes) -> list[int]:
    found: list[int] = []
    start = data.find(needle)
    while start >= 0 and len(found) < 1 << 20:
        found.append(start)
        start = data.find(needle, start + 1)
    return found


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return (
        0x4E00 <= code <= 0x9FFF  # CJK unified ideographs
        or 0x3000 <= code <= 0x30FF  # CJK punctuation, hiragana, katakana
        or 0xAC00 <= code <= 0xD7A3  # Hangul syllables
        or 0xFF00 <= code <= 0xFFEF  # full- and half-width forms
        or 0xF900 <= code <= 0xFAFF  # compatibility ideographs
    )


def control_byte(data: bytes) -> int | None:
    """The first byte of CONTROL_BYTES (the C0 controls but tab, line feed, form feed and carriage return;
    DEL) the data holds, which no text file does; None if none."""
    import numpy as np

    table = np.zeros(256, dtype=bool)
    table[CONTROL_BYTES] = True
    values = np.frombuffer(data, dtype=np.uint8)
    found = np.flatnonzero(table[values])
    return int(values[found[0]]) if len(found) else None
