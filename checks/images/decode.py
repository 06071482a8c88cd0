"""The verdict on one image file, computed in a worker process: format sniffing, PNG structure, JPEG
in libjpeg's strict mode, and every frame and page through Pillow."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUFFIX_FORMATS = {
    ".jpg": "JPEG",
    ".jpeg": "JPEG",
    ".jpe": "JPEG",
    ".jfif": "JPEG",
    ".png": "PNG",
    ".gif": "GIF",
    ".webp": "WEBP",
    ".bmp": "BMP",
    ".dib": "BMP",
    ".tif": "TIFF",
    ".tiff": "TIFF",
    ".heic": "HEIF",
    ".heif": "HEIF",
    ".avif": "AVIF",
}
UNUSUAL_MODES = {
    "CMYK": "CMYK",
    "RGBA": "RGBA (alpha)",
    "LA": "LA (alpha)",
    "I;16": "16-bit",
    "I;16B": "16-bit",
    "I;16L": "16-bit",
    "I": "32-bit integer",
    "F": "32-bit float",
    "PA": "palette with alpha",
    "P+transparency": "palette with transparency",
    "RGB;16": "16-bit RGB",
    "RGBA;16": "16-bit RGBA",
}


@dataclass
class Problem:
    code: str
    damage: str
    message: str = ""
    format: str | None = None


def sniff(head: bytes) -> str | None:
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
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "TIFF"
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in (b"avif", b"avis"):
            return "AVIF"
        if brand in (b"heic", b"heix", b"hevc", b"heim", b"heis", b"mif1", b"msf1"):
            return "HEIF"
    return None


def describe_non_image(head: bytes) -> str:
    text = head.lstrip()[:64].lower()
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<body")):
        return "an HTML page"
    if text.startswith(b"<?xml") or text.startswith(b"<svg"):
        return "XML/SVG"
    if text[:1] in (b"{", b"["):
        return "JSON"
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive"
    if head.startswith(b"\x1f\x8b"):
        return "gzip data"
    if head.startswith(b"%PDF"):
        return "a PDF"
    try:
        head.decode("utf-8")
        return "text"
    except UnicodeDecodeError:
        return "unrecognised binary data"


def _png_structure(data: bytes) -> list[Problem]:
    """Every chunk's CRC, IHDR first and sane, one zlib stream over the IDATs, IEND, trailing data."""
    import zlib

    problems = []
    pos, idat, seen_iend, first = 8, zlib.decompressobj(), False, True
    while pos + 8 <= len(data):
        length, ctype = struct.unpack(">I4s", data[pos : pos + 8])
        end = pos + 12 + length
        if end > len(data):
            return [Problem("IMG001", "truncated", f"PNG cut off inside the {ctype.decode('latin-1')} chunk", "PNG")]
        body = data[pos + 8 : pos + 8 + length]
        crc = struct.unpack(">I", data[end - 4 : end])[0]
        if zlib.crc32(ctype + body) & 0xFFFFFFFF != crc:
            problems.append(Problem("IMG001", "crc", f"PNG {ctype.decode('latin-1')} chunk at byte {pos} has a bad CRC", "PNG"))
        if first:
            first = False
            if ctype != b"IHDR" or length != 13:
                return [Problem("IMG001", "bad header", "PNG does not start with a valid IHDR chunk", "PNG")]
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            valid = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
            if width == 0 or height == 0 or depth not in valid.get(color, ()):
                return [
                    Problem(
                        "IMG001", "bad header", f"PNG IHDR is invalid ({width}×{height}, bit depth {depth}, colour type {color})", "PNG"
                    )
                ]
        if ctype == b"IDAT":
            try:
                idat.decompress(body, 0)
            except zlib.error as exc:
                problems.append(Problem("IMG001", "zlib", f"PNG image data is not a valid zlib stream: {exc}", "PNG"))
                idat = zlib.decompressobj()
        if ctype == b"IEND":
            seen_iend = True
            pos = end
            break
        pos = end
    if not seen_iend:
        if not idat.eof:
            return problems or [Problem("IMG001", "truncated", "PNG ends before its image data is complete", "PNG")]
        problems.append(Problem("IMG003", "no end marker", "PNG has no IEND chunk (its image data is complete)", "PNG"))
    elif not idat.eof and not any(p.damage == "zlib" for p in problems):
        problems.append(Problem("IMG001", "zlib", "PNG image data ends before its zlib stream does", "PNG"))
    if seen_iend and pos < len(data):
        problems.append(Problem("IMG007", "trailing data", f"{len(data) - pos} bytes after IEND", "PNG"))
    return problems


def _jpeg(data: bytes, max_pixels: int) -> tuple[list[Problem], str | None]:
    import simplejpeg

    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError as exc:
        return [Problem("IMG001", "bad header", f"JPEG header: {exc}", "JPEG")], None
    if width * height > max_pixels:
        return [
            Problem("IMG004", "bomb", f"JPEG declares {width}×{height} = {width * height:,} pixels (limit {max_pixels:,})", "JPEG")
        ], None
    # Every coefficient is still entropy-decoded (that is where libjpeg finds damage), but at 1/8
    # scale in gray the inverse DCT, upsampling and colour conversion almost vanish.
    out = "CMYK" if colorspace in ("CMYK", "YCCK") else "GRAY"
    fast = {"fastdct": True, "min_width": 1, "min_height": 1}
    mode = None  # CMYK JPEGs are common and every JPEG loader converts them: never flagged
    try:
        simplejpeg.decode_jpeg(data, colorspace=out, strict=True, **fast)
    except ValueError as exc:
        message = str(exc)
        if "Premature end of JPEG file" in message and not data.rstrip(b"\x00").endswith(b"\xff\xd9"):
            try:
                simplejpeg.decode_jpeg(data + b"\xff\xd9", colorspace=out, strict=True, **fast)
                return [Problem("IMG003", "no end marker", "JPEG has no EOI marker (its image data is complete)", "JPEG")], mode
            except ValueError:
                return [Problem("IMG001", "truncated", "JPEG is cut off: libjpeg reports a premature end of the file", "JPEG")], mode
        return [Problem("IMG001", "corrupt data", f"libjpeg: {message}", "JPEG")], mode
    end = data.rfind(b"\xff\xd9")
    trailing = len(data) - (end + 2) if end >= 0 else 0
    if trailing > 0 and data[end + 2 :].strip(b"\x00"):
        return [Problem("IMG007", "trailing data", f"{trailing} bytes after the JPEG EOI marker", "JPEG")], mode
    return [], mode


def _pillow(path: Path, fmt: str, max_pixels: int) -> tuple[list[Problem], str | None]:
    import warnings

    from PIL import Image, ImageSequence

    Image.MAX_IMAGE_PIXELS = None  # our own limit, from the header, below
    frames = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Pillow's "Truncated File Read" and friends are damage too
        try:
            with Image.open(path) as image:
                width, height = image.size
                if width * height > max_pixels:
                    return [
                        Problem(
                            "IMG004", "bomb", f"{fmt} declares {width}×{height} = {width * height:,} pixels (limit {max_pixels:,})", fmt
                        )
                    ], None
                mode = image.mode
                if mode == "P" and "transparency" in image.info:
                    mode = "P+transparency"
                for frame in ImageSequence.Iterator(image):
                    frame.load()
                    frames += 1
        except (
            OSError,
            SyntaxError,
            ValueError,
            EOFError,
            struct.error,
            Warning,
            IndexError,
            TypeError,
            ZeroDivisionError,
            MemoryError,
        ) as exc:
            text = str(exc) or type(exc).__name__
            damage = "truncated" if "truncated" in text.lower() or isinstance(exc, EOFError) else "corrupt data"
            where = f" (frame {frames + 1})" if frames else ""
            return [Problem("IMG001", damage, f"{fmt}{where}: {text}", fmt)], None
    return [], mode if mode in UNUSUAL_MODES else None


def inspect_file(path: str, max_pixels: int) -> dict[str, Any]:
    """The verdict on one file, as plain data (it crosses a pipe)."""
    p = Path(path)
    try:
        with open(p, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return {"path": path, "problems": [Problem("IMG012", "unreadable", exc.strerror or str(exc)).__dict__]}
    claimed = SUFFIX_FORMATS.get(p.suffix.lower())
    if not data:
        return _result(path, data, None, None, [Problem("IMG001", "empty", "zero-byte file", claimed)])
    fmt = sniff(data[:32])
    if fmt is None:
        return _result(path, data, None, None, [Problem("IMG002", "not an image", f"{describe_non_image(data[:512])}, not an image", None)])
    problems: list[Problem] = []
    mode = None
    if fmt in ("HEIF", "AVIF"):
        if not _heif_plugins():
            return _result(
                path, data, fmt, None, [Problem("IMG008", "unsupported", f"{fmt}: no decoder plugin installed; not checked", fmt)]
            )
        problems, mode = _pillow(p, fmt, max_pixels)
    elif fmt == "JPEG":
        problems, mode = _jpeg(data, max_pixels)
    else:
        if fmt == "PNG":
            problems = _png_structure(data)
        elif fmt == "WEBP":
            declared = int.from_bytes(data[4:8], "little") + 8
            if declared != len(data) + (len(data) % 2) and declared != len(data):
                problems = [Problem("IMG001", "bad RIFF size", f"WebP RIFF header says {declared} bytes, the file has {len(data)}", "WEBP")]
        if not any(pr.code in ("IMG001", "IMG004") for pr in problems):
            decoded, mode = _pillow(p, fmt, max_pixels)
            problems += [d for d in decoded if not (d.code == "IMG001" and any(pr.code == "IMG003" for pr in problems))]
    if claimed and claimed != fmt and not any(pr.code in ("IMG001", "IMG002", "IMG004", "IMG011") for pr in problems):
        problems.append(Problem("IMG005", "extension lies", f"{fmt} data named {p.suffix}", fmt))
    return _result(path, data, fmt, mode, problems)


def _result(path: str, data: bytes, fmt: str | None, mode: str | None, problems: list[Problem]) -> dict[str, Any]:
    result: dict[str, Any] = {"path": path, "format": fmt, "mode": mode, "problems": [pr.__dict__ for pr in problems]}
    if problems:  # the fixer refuses to move a file that changed after the check
        result["sha256"] = hashlib.sha256(data).hexdigest()
    return result


def _heif_plugins() -> bool:
    try:
        from pillow_heif import register_heif_opener  # type: ignore[import-not-found]

        register_heif_opener()
        return True
    except ImportError:
        return False
