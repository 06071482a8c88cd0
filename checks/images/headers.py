"""Image sizes from headers alone: what a file declares, read before a single byte of pixel data is
inflated, so a decompression bomb is found from its first few hundred bytes. Every reader is bounded
by the file's own length; a field that points past the end ends the walk, it never raises."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from decode_doctor.i18n import Said, said

MAX_FRAMES = 100_000  # frames, pages or boxes walked in one file
MAX_BOX_DEPTH = 8


@dataclass
class Header:
    format: str
    width: int = 0
    height: int = 0
    pixels: int = 0  # the most any one frame or page needs (a GIF's frames can reach past its screen)
    frames: int = 1
    damage: list[Said] = field(default_factory=list)  # impossible fields the loader may or may not tolerate
    compression: int | None = None  # TIFF: the first page's Compression tag
    truncated: Said | None = None  # the declared pixel data is longer than the file

    def sized(self, width: int, height: int) -> Header:
        self.width, self.height = max(self.width, width), max(self.height, height)
        self.pixels = max(self.pixels, width * height)
        return self


def sniff(head: bytes, suffix: str = "") -> str | None:
    """The format the first bytes announce (a few formats have no magic and go by their name)."""
    if head.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WEBP"
    if head[:2] == b"BM":
        return "BMP"
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return "TIFF"
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in (b"avif", b"avis"):
            return "AVIF"
        if brand in (b"heic", b"heix", b"hevc", b"heim", b"heis", b"mif1", b"msf1", b"hevx"):
            return "HEIF"
    if head[:4] == b"\x00\x00\x01\x00":
        return "ICO"
    if suffix == ".tga":
        return "TGA"
    if suffix == ".dib" and head[:4] in (b"\x0c\x00\x00\x00", b"\x28\x00\x00\x00", b"\x38\x00\x00\x00", b"\x6c\x00\x00\x00"):
        return "DIB"
    return None


def read_header(fmt: str, data: bytes) -> Header | None:
    """The header of data in fmt, or None when the header itself is cut off or malformed (the
    loader then decides)."""
    reader = _READERS.get(fmt)
    if reader is None:
        return None
    try:
        return reader(data)
    except (struct.error, IndexError, ValueError):
        return None


def _png(data: bytes) -> Header | None:
    if data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return Header("PNG").sized(width, height)


def _gif(data: bytes) -> Header | None:
    """The logical screen, and every frame's extents: a 1×1 screen can hold a 65535×65535 frame."""
    header = Header("GIF").sized(*struct.unpack("<HH", data[6:10]))
    screen_width, screen_height = header.width, header.height
    flags = data[10]
    pos = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    header.frames = 0
    while pos < len(data) and header.frames < MAX_FRAMES:
        block = data[pos]
        if block == 0x3B:  # trailer
            break
        if block == 0x21:  # extension: label, then sub-blocks
            pos = _skip_sub_blocks(data, pos + 2)
        elif block == 0x2C:  # image descriptor
            left, top, width, height, local = struct.unpack("<HHHHB", data[pos + 1 : pos + 10])
            header.frames += 1
            extent_width, extent_height = max(screen_width, left + width), max(screen_height, top + height)
            header.sized(extent_width, extent_height)
            pos += 10 + (3 << ((local & 7) + 1) if local & 0x80 else 0)
            pos = _skip_sub_blocks(data, pos + 1)  # after the LZW minimum code size
        else:
            break  # not a GIF block: the loader will say what it makes of it
    header.frames = max(header.frames, 1)
    return header


def _skip_sub_blocks(data: bytes, pos: int) -> int:
    while pos < len(data):
        size = data[pos]
        pos += 1 + size
        if size == 0:
            break
    return pos


def _webp(data: bytes) -> Header | None:
    chunk = data[12:16]
    body = 20
    if chunk == b"VP8X":
        width = 1 + int.from_bytes(data[body + 4 : body + 7], "little")
        height = 1 + int.from_bytes(data[body + 7 : body + 10], "little")
    elif chunk == b"VP8L":
        bits = int.from_bytes(data[body + 1 : body + 5], "little")
        width, height = 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    elif chunk == b"VP8 ":
        if data[body + 3 : body + 6] != b"\x9d\x01\x2a":
            return None
        width, height = struct.unpack("<HH", data[body + 6 : body + 10])
        width, height = width & 0x3FFF, height & 0x3FFF
    else:
        return None
    return Header("WEBP").sized(width, height)


_TIFF_TYPES = {3: ("H", 2), 4: ("I", 4), 16: ("Q", 8)}  # SHORT, LONG, LONG8


def _tiff(data: bytes) -> Header | None:
    """Every page (IFD) of a TIFF or BigTIFF, each one's ImageWidth × ImageLength."""
    order = "<" if data[:2] == b"II" else ">"
    big = struct.unpack(order + "H", data[2:4])[0] == 43
    if big:
        offset = struct.unpack(order + "Q", data[8:16])[0]
        count_format, entry_size, value_size = "Q", 20, 8
    else:
        offset = struct.unpack(order + "I", data[4:8])[0]
        count_format, entry_size, value_size = "H", 12, 4
    header = Header("TIFF")
    header.frames = 0
    seen: set[int] = set()
    count_size = struct.calcsize(count_format)
    while offset and offset not in seen and offset + count_size <= len(data) and header.frames < MAX_FRAMES:
        seen.add(offset)
        (entries,) = struct.unpack(order + count_format, data[offset : offset + count_size])
        tags: dict[int, int] = {}
        first = offset + count_size
        for index in range(min(entries, 4096)):
            at = first + index * entry_size
            if at + entry_size > len(data):
                break
            tag, kind = struct.unpack(order + "HH", data[at : at + 4])
            if tag in (256, 257, 259) and kind in _TIFF_TYPES:
                code, size = _TIFF_TYPES[kind]
                value_at = at + 4 + (8 if big else 4)
                (tags[tag],) = struct.unpack(order + code, data[value_at : value_at + size])
        header.frames += 1
        header.sized(tags.get(256, 0), tags.get(257, 0))
        if header.compression is None:
            header.compression = tags.get(259)
        next_at = first + entries * entry_size
        if next_at + value_size > len(data):
            break
        (offset,) = struct.unpack(order + ("Q" if big else "I"), data[next_at : next_at + value_size])
    header.frames = max(header.frames, 1)
    return header


def _jpeg(data: bytes) -> Header | None:
    """The first SOF marker's size (SOF0–SOF15 but DHT, JPG and DAC)."""
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            pos += 2
            continue
        (length,) = struct.unpack(">H", data[pos + 2 : pos + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[pos + 5 : pos + 9])
            return Header("JPEG").sized(width, height)
        if marker in (0xDA, 0xD9):
            return None  # scan data or the end before any frame header
        pos += 2 + length
    return None


def _bmp(data: bytes) -> Header | None:
    return _dib(data, 14, "BMP")


def _dib_only(data: bytes) -> Header | None:
    return _dib(data, 0, "DIB")


BMP_BIT_COUNTS = (1, 2, 4, 8, 16, 24, 32, 64)
MAX_DENSITY = 1_000_000  # pixels per metre (25,400 dpi): scanners stop well below it


def _dib(data: bytes, at: int, fmt: str) -> Header | None:
    """BITMAPINFOHEADER and its variants, and the fields no real bitmap has (bmpsuite's b/ files)."""
    (size,) = struct.unpack("<I", data[at : at + 4])
    if size == 12:
        width, height, planes, bits = struct.unpack("<HHHH", data[at + 4 : at + 12])
        header = Header(fmt).sized(width, height)
        compression = image_size = colours = 0
    elif size >= 40:
        width, height, planes, bits, compression, image_size = struct.unpack("<iiHHII", data[at + 4 : at + 24])
        (colours,) = struct.unpack("<I", data[at + 32 : at + 36])
        header = Header(fmt).sized(abs(width), abs(height))
        if width <= 0 or height == 0:
            header.damage.append(said("a {width}×{height} bitmap", width=width, height=height))
        if height < 0 and compression in (1, 2):
            header.damage.append(said("an RLE bitmap stored top-down (negative height), which RLE cannot be"))
    else:
        return None
    if planes != 1:
        header.damage.append(said("{planes} colour planes (a bitmap has 1)", planes=planes))
    if bits not in BMP_BIT_COUNTS:
        header.damage.append(said("{bits} bits per pixel", bits=bits))
    elif bits <= 8 and colours > 1 << bits:
        header.damage.append(said("a palette of {colours} colours for {bits}-bit pixels", colours=colours, bits=bits))
    if image_size > len(data):
        header.damage.append(said("an image size of {image_size:,} bytes in a {count:,}-byte file", image_size=image_size, count=len(data)))
    if size >= 40:
        for axis, density in zip("xy", struct.unpack("<ii", data[at + 24 : at + 32]), strict=True):
            if abs(density) > MAX_DENSITY:
                header.damage.append(
                    said(
                        "a {axis} density of {density:,} pixels per metre ({amount:,.0f} dpi)",
                        axis=axis,
                        density=density,
                        amount=abs(density) * 0.0254,
                    )
                )
    if fmt == "BMP":
        _bmp_file(data, at, size, header, width, height, bits, compression, colours)
    return header


def _bmp_file(data: bytes, at: int, size: int, header: Header, width: int, height: int, bits: int, compression: int, colours: int) -> None:
    """The BMP file header around the DIB: its file size and where its pixel data starts and ends."""
    (file_size, pixel_offset) = struct.unpack("<I4xI", data[2:14])
    if file_size > len(data):
        header.damage.append(said("a file size of {file_size:,} bytes; the file has {count:,}", file_size=file_size, count=len(data)))
    stride = (abs(width) * bits + 31) // 32 * 4
    if pixel_offset >= len(data):
        header.truncated = said(
            "the bitmap's pixel data would start at byte {pixel_offset:,}, past the end of the {count:,}-byte file",
            pixel_offset=pixel_offset,
            count=len(data),
        )
    elif compression in (0, 3) and bits in BMP_BIT_COUNTS and pixel_offset + stride * abs(height) > len(data):
        header.truncated = said(
            "the bitmap's pixel data stops at byte {count:,} of the {amount:,} it declares",
            count=len(data),
            amount=pixel_offset + stride * abs(height),
        )
    elif bits in (4, 8) and compression in (0, 1, 2) and not header.damage:
        header.damage += _palette_overruns(data, at + size, pixel_offset, bits, compression, colours, abs(width), height)


def _palette_overruns(
    data: bytes, palette_at: int, pixel_offset: int, bits: int, compression: int, colours: int, width: int, height: int
) -> list[Said]:
    """Pixels that index past the palette, and RLE runs that write outside the image."""
    palette = min(colours or 1 << bits, max((pixel_offset - palette_at) // 4, 0))
    if palette >= 1 << bits:
        return []  # every index is in the palette
    pixels = data[pixel_offset:]
    if compression:
        return _rle_overruns(pixels, bits, width, abs(height), palette)
    import numpy as np

    stride, used_bytes = (width * bits + 31) // 32 * 4, (width * bits + 7) // 8
    rows = min(abs(height), len(pixels) // stride) if stride else 0
    grid = np.frombuffer(pixels, dtype=np.uint8, count=rows * stride).reshape(rows, stride)[:, :used_bytes]
    if bits == 4:
        high, low = grid >> 4, grid & 15
        if width % 2:
            low = low[:, :-1]
        used = int(max(high.max(initial=0), low.max(initial=0)))
    else:
        used = int(grid.max(initial=0))
    return [said("pixels index colour {used} of a {palette}-colour palette", used=used, palette=palette)] if used >= palette else []


def _rle_overruns(stream: bytes, bits: int, width: int, height: int, palette: int) -> list[Said]:
    x = y = pos = 0
    largest = 0
    while pos + 1 < len(stream):
        count, value = stream[pos], stream[pos + 1]
        pos += 2
        if count:  # an encoded run
            x += count
            largest = max(largest, value if bits == 8 else max(value >> 4, value & 15))
        elif value == 0:  # end of line
            x, y = 0, y + 1
        elif value == 1:  # end of bitmap
            break
        elif value == 2:  # delta
            if pos + 1 >= len(stream):
                break
            x, y = x + stream[pos], y + stream[pos + 1]
            pos += 2
        else:  # an absolute run of `value` pixels, padded to 16 bits
            literal = stream[pos : pos + ((value + 1) // 2 if bits == 4 else value)]
            values = literal if bits == 8 else bytes(v for b in literal for v in (b >> 4, b & 15))[:value]
            largest = max(largest, max(values, default=0))
            x += value
            nbytes = len(literal)
            pos += nbytes + (nbytes & 1)
        if x > width or y > height:
            return [said("an RLE run writes outside the {width}×{height} image", width=width, height=height)]
    if palette and largest >= palette:
        return [said("pixels index colour {largest} of a {palette}-colour palette", largest=largest, palette=palette)]
    return []


def _heif(data: bytes) -> Header | None:
    """The largest 'ispe' (image spatial extents) property of an AVIF or HEIF file."""
    header = Header("HEIF")
    found = False
    for box, body in _boxes(data, 0, len(data), 0):
        if box == b"ispe" and len(body) >= 12:
            width, height = struct.unpack(">II", body[4:12])
            header.sized(width, height)
            found = True
    return header if found else None


def _boxes(data: bytes, start: int, end: int, depth: int) -> Iterator[tuple[bytes, bytes]]:
    pos, count = start, 0
    while pos + 8 <= end and count < MAX_FRAMES:
        count += 1
        size, box = struct.unpack(">I4s", data[pos : pos + 8])
        header_size = 8
        if size == 1:
            (size,) = struct.unpack(">Q", data[pos + 8 : pos + 16])
            header_size = 16
        elif size == 0:
            size = end - pos
        if size < header_size or pos + size > end:
            return
        body_start = pos + header_size
        yield box, data[body_start : pos + size]
        if depth < MAX_BOX_DEPTH and box in (b"meta", b"iprp", b"ipco"):
            yield from _boxes(data, body_start + (4 if box == b"meta" else 0), pos + size, depth + 1)
        pos += size


def _tga(data: bytes) -> Header | None:
    width, height = struct.unpack("<HH", data[12:16])
    return Header("TGA").sized(width, height)


def _ico(data: bytes) -> Header | None:
    (count,) = struct.unpack("<H", data[4:6])
    header = Header("ICO")
    header.frames = count
    for index in range(min(count, 256)):
        entry = 6 + index * 16
        width, height = data[entry] or 256, data[entry + 1] or 256
        (offset,) = struct.unpack("<I", data[entry + 12 : entry + 16])
        embedded = data[offset : offset + 24]
        if embedded.startswith(b"\x89PNG"):  # an icon can hold a PNG of any size
            width, height = struct.unpack(">II", embedded[16:24])
        header.sized(width, height)
    return header


_READERS = {
    "PNG": _png,
    "GIF": _gif,
    "WEBP": _webp,
    "TIFF": _tiff,
    "JPEG": _jpeg,
    "BMP": _bmp,
    "DIB": _dib_only,
    "AVIF": _heif,
    "HEIF": _heif,
    "TGA": _tga,
    "ICO": _ico,
}
