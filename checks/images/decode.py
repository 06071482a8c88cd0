"""The verdict on one image file, computed in a worker process.

Two questions, kept apart:
- does it break the loader? Pillow's Image.open() and load() on every frame with its default
  settings decide (and torchvision or OpenCV when asked for): an exception, or nothing returned,
  is an error, and --fix quarantines the file;
- are its pixels damaged where the loader does not notice? libjpeg-turbo's strict mode, every PNG
  chunk's CRC and the whole zlib stream, bitmap header fields no real bitmap has: a warning.
Sizes come from the headers (headers.py) before any pixel data is inflated, so a bomb is judged
without being decoded, and nothing is decoded that would not fit the worker's memory budget.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decode_doctor.i18n import N_, Said, os_reason, said

from . import loaders
from .codes import IMG001, IMG002, IMG003, IMG004, IMG005, IMG007, IMG008, IMG012, IMG013, IMG014
from .headers import Header, read_header, sniff

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
    ".tga": "TGA",
    ".ico": "ICO",
}
SAME_FORMAT = {"MPO": "JPEG", "DIB": "BMP"}  # what Pillow calls a format the name may also say
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
MEMORY_BUDGET = 512 << 20  # bytes one worker may hold, file and decoded frames included
BASELINE = 128 << 20  # what the interpreter and decoder libraries already take of it
MAX_READ = MEMORY_BUDGET - BASELINE
INFLATE_STEP = 1 << 20  # the zlib check inflates this much at a time and keeps none of it
# TIFF compressions that libtiff decodes only when built with them: a failure there may be a
# missing codec, not damage
OPTIONAL_TIFF_CODECS = {34712: "JPEG 2000", 34887: "LERC", 34925: "LZMA", 50000: "Zstandard", 50001: "WebP", 50002: "JPEG XL"}


NO_MESSAGE = Said("")
# the damage a problem names (the evidence's and the manifest's word, in English), marked for the
# catalog: a quarantine's preview says it in the user's language
DAMAGE_LABELS = (
    N_("bad CRC"),
    N_("bad RIFF size"),
    N_("bad header"),
    N_("bomb"),
    N_("bomb warning"),
    N_("breaks the loader"),
    N_("corrupt data"),
    N_("decoder crash"),
    N_("empty"),
    N_("extension lies"),
    N_("impossible header"),
    N_("loader warning"),
    N_("no decoder"),
    N_("no end marker"),
    N_("not an image"),
    N_("over the memory budget"),
    N_("timed out"),
    N_("trailing data"),
    N_("truncated"),
    N_("unreadable"),
    N_("zlib"),
)


@dataclass
class Problem:
    code: str
    damage: str
    message: Said = NO_MESSAGE  # English (the evidence, the manifest); text() for the finding
    format: str | None = None
    loader: str | None = None


@dataclass(frozen=True)
class Settings:
    max_pixels: int  # the loader's warning limit; twice it, its error limit (Pillow's MAX_IMAGE_PIXELS)
    extra_loaders: tuple[str, ...] = ()


@dataclass
class Scan:
    """What is known about one file so far."""

    path: str
    data: bytes
    claimed: str | None
    format: str | None = None
    header: Header | None = None
    mode: str | None = None
    problems: list[Problem] = field(default_factory=list)

    def add(self, code: str, damage: str, message: Said, loader: str | None = None, image_format: str | None = None) -> None:
        self.problems.append(Problem(code, damage, message, image_format or self.format, loader))


def describe_non_image(head: bytes) -> Said:
    text = head.lstrip()[:64].lower()
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<body")):
        return said("an HTML page")
    if text.startswith(b"<?xml") or text.startswith(b"<svg"):
        return said("XML/SVG")
    if text[:1] in (b"{", b"["):
        return said("JSON")
    if head.startswith(b"PK\x03\x04"):
        return said("a zip archive")
    if head.startswith(b"\x1f\x8b"):
        return said("gzip data")
    if head.startswith(b"%PDF"):
        return said("a PDF")
    try:
        head.decode("utf-8")
        return said("text")
    except UnicodeDecodeError:
        return said("unrecognised binary data")


def inspect_file(path: str, settings: Settings) -> dict[str, Any]:
    """The verdict on one file, as plain data (it crosses a pipe)."""
    p = Path(path)
    try:
        with open(p, "rb") as handle:
            data = handle.read(MAX_READ + 1)
    except OSError as exc:
        return {"path": path, "problems": [Problem(IMG012.code, "unreadable", os_reason(exc)).__dict__]}
    scan = Scan(path, data, SUFFIX_FORMATS.get(p.suffix.lower()))
    if not data:
        scan.format = scan.claimed
        scan.add(IMG001.code, "empty", said("zero-byte file: every loader fails on it"), loaders.version("pillow"))
    elif len(data) > MAX_READ:
        scan.add(IMG008.code, "over the memory budget", said("larger than {amount} MiB: not decoded here", amount=MAX_READ >> 20))
    else:
        _inspect(scan, settings)
    return _result(scan)


def _inspect(scan: Scan, settings: Settings) -> None:
    scan.format = sniff(scan.data[:32], Path(scan.path).suffix.lower())
    if scan.format:
        scan.header = read_header(scan.format, scan.data)
    pixels = scan.header.pixels if scan.header else 0
    if pixels > 2 * settings.max_pixels:
        size = f"{scan.header.width}×{scan.header.height}" if scan.header else "?"
        scan.add(
            IMG004.code,
            "bomb",
            said(
                "{format} declares {size} = {pixels:,} pixels, over twice the loader's limit of {max_pixels:,} "
                "(Pillow raises DecompressionBombError); found from the header, nothing decoded",
                format=scan.format,
                size=size,
                pixels=pixels,
                max_pixels=settings.max_pixels,
            ),
        )
        return
    if pixels > settings.max_pixels:
        scan.add(
            IMG014.code,
            "bomb warning",
            said(
                "{pixels:,} pixels, over the loader's warning limit of {max_pixels:,}: "
                "Pillow warns (DecompressionBombWarning) and loads it",
                pixels=pixels,
                max_pixels=settings.max_pixels,
            ),
        )
    frames = scan.header.frames if scan.header else 1
    needed = len(scan.data) + pixels * 4 * (2 if frames > 1 else 1)
    if needed > MEMORY_BUDGET - BASELINE:
        over = said(
            "decoding needs about {needed} MiB, over the {budget} MiB a worker may hold", needed=needed >> 20, budget=MEMORY_BUDGET >> 20
        )
        damage = _damage(scan)
        cut = next((p for p in damage if p.damage == "truncated"), None)
        if cut:  # the loader stops where the data does, whatever the size: no need to decode to know
            scan.add(
                IMG001.code,
                "breaks the loader",
                said("{message}: Pillow raises when its data runs out (not decoded: {over})", message=cut.message, over=over),
            )
            scan.problems += damage
        else:
            scan.problems += damage
            scan.add(IMG008.code, "over the memory budget", said("{over}: pixels not checked", over=over))
        return
    damage = _damage(scan)
    verdict = _jpeg_verdict(scan, settings, damage) if scan.format == "JPEG" else loaders.pillow(scan.path, settings.max_pixels)
    _judge(scan, verdict, damage)
    scan.data = b""  # not needed past this point; the extra loaders read the file themselves
    if not any(p.code in (IMG001.code, IMG002.code, IMG004.code) for p in scan.problems):
        for name in settings.extra_loaders:
            extra = loaders.extra(name, scan.path)
            if extra.error:
                scan.add(IMG001.code, "breaks the loader", said("{loader}: {error}", loader=extra.loader, error=extra.error), extra.loader)


def _damage(scan: Scan) -> list[Problem]:
    """Faults a tolerant loader may read past: they are warnings when it does, reasons when it does not."""
    found: list[Problem] = []
    if scan.format == "PNG":
        found = _png_structure(scan.data)
    elif scan.format == "WEBP":
        declared = int.from_bytes(scan.data[4:8], "little") + 8
        if declared not in (len(scan.data), len(scan.data) + len(scan.data) % 2):
            riff = said("the WebP RIFF header says {declared:,} bytes, the file has {count:,}", declared=declared, count=len(scan.data))
            found = [Problem(IMG013.code, "bad RIFF size", riff)]
    if scan.header and scan.header.damage:
        found += [
            Problem(IMG013.code, "impossible header", said("{format} header declares {what}", format=scan.format, what=what))
            for what in scan.header.damage
        ]
    if scan.header and scan.header.truncated:
        found.append(Problem(IMG013.code, "truncated", scan.header.truncated))
    for problem in found:
        problem.format = scan.format
    return found


def _jpeg_verdict(scan: Scan, settings: Settings, damage: list[Problem]) -> loaders.Verdict:
    """libjpeg-turbo in strict mode, at 1/8 scale in gray (every coefficient is still entropy-decoded,
    which is where damage shows; the inverse DCT and colour conversion almost vanish). A clean strict
    decode means Pillow's load passes too (the same library, without its strictness): Pillow only
    opens it, for its own header parsing. Anything strict libjpeg reports is put to Pillow's real load."""
    import simplejpeg

    strict_error, out = None, "GRAY"
    try:
        _height, _width, colorspace, _ = simplejpeg.decode_jpeg_header(scan.data)
        out = "CMYK" if colorspace in ("CMYK", "YCCK") else "GRAY"
        simplejpeg.decode_jpeg(scan.data, colorspace=out, strict=True, fastdct=True, min_width=1, min_height=1)
    except ValueError as exc:
        strict_error = str(exc)
    if strict_error is None:
        verdict = loaders.pillow(scan.path, settings.max_pixels, pixels=False)
        if verdict.format == "MPO" and not verdict.error:  # more pictures in the file: load them all
            verdict = loaders.pillow(scan.path, settings.max_pixels)
        _jpeg_trailing(scan, damage)
        return verdict
    verdict = loaders.pillow(scan.path, settings.max_pixels)
    if "Premature end of JPEG file" in strict_error and not scan.data.rstrip(b"\x00").endswith(b"\xff\xd9"):
        try:  # complete but for the marker, or cut off?
            simplejpeg.decode_jpeg(scan.data + b"\xff\xd9", colorspace=out, strict=True, fastdct=True, min_width=1, min_height=1)
            damage.append(Problem(IMG003.code, "no end marker", said("the JPEG has no EOI marker (its image data is complete)"), "JPEG"))
        except ValueError:
            damage.append(
                Problem(IMG013.code, "truncated", said("the JPEG is cut off: libjpeg reports a premature end of the file"), "JPEG")
            )
    else:
        damage.append(
            Problem(IMG013.code, "corrupt data", said("libjpeg in strict mode: {strict_error}", strict_error=strict_error), "JPEG")
        )
    return verdict


def _jpeg_trailing(scan: Scan, damage: list[Problem]) -> None:
    end = scan.data.rfind(b"\xff\xd9")
    trailing = len(scan.data) - (end + 2) if end >= 0 else 0
    if trailing > 0 and scan.data[end + 2 :].strip(b"\x00"):
        damage.append(
            Problem(IMG007.code, "trailing data", said("{trailing:,} bytes after the JPEG EOI marker", trailing=trailing), "JPEG")
        )


def _judge(scan: Scan, verdict: loaders.Verdict, damage: list[Problem]) -> None:
    scan.format = scan.format or verdict.format
    if verdict.error is None:
        scan.mode = verdict.mode
        for problem in damage:
            problem.loader = problem.loader or said("{loader} reads it", loader=verdict.loader)
        scan.problems += damage
        for warning in verdict.warnings:
            if "DecompressionBombWarning" not in warning:  # already said, from the header
                scan.add(
                    IMG014.code, "loader warning", said("{loader} warns: {warning}", loader=verdict.loader, warning=warning), verdict.loader
                )
        if scan.claimed and verdict.format and SAME_FORMAT.get(verdict.format, verdict.format) != scan.claimed:
            ext = Path(scan.path).suffix
            real = SAME_FORMAT.get(verdict.format, verdict.format)
            scan.add(IMG005.code, "extension lies", said("{real} data named {ext}", real=real, ext=ext), image_format=real)
        return
    if verdict.bomb:
        scan.add(IMG004.code, "bomb", said("{loader}: {error}", loader=verdict.loader, error=verdict.error), verdict.loader)
        return
    if scan.format is None:
        what = describe_non_image(scan.data[:512]) if scan.data else said("not an image")
        scan.add(
            IMG002.code,
            "not an image",
            said("{what}, not an image: {loader} cannot identify it", what=what, loader=verdict.loader),
            verdict.loader,
        )
        return
    unchecked = _missing_decoder(scan)
    if unchecked:
        scan.add(
            IMG008.code,
            "no decoder",
            said("{unchecked}; {loader}: {error}", unchecked=unchecked, loader=verdict.loader, error=verdict.error),
            verdict.loader,
        )
        return
    scan.add(IMG001.code, "breaks the loader", said("{loader}: {error}", loader=verdict.loader, error=verdict.error), verdict.loader)
    scan.problems += [Problem(p.code, p.damage, p.message, p.format, "also") for p in damage if p.code != IMG007.code]


def _missing_decoder(scan: Scan) -> Said | None:
    """Why the loader's failure may be a decoder this machine lacks rather than damage."""
    from PIL import features

    if scan.format == "AVIF" and not features.check("avif"):
        return said("AVIF: this Pillow has no AVIF decoder")
    if scan.format == "HEIF" and not _heif_plugin():
        return said("HEIF: no decoder installed (pip install pillow-heif)")
    if scan.format == "TIFF" and scan.header and scan.header.compression in OPTIONAL_TIFF_CODECS:
        name = OPTIONAL_TIFF_CODECS[scan.header.compression]
        return said("TIFF with {name} compression, which the installed libtiff may not be built with", name=name)
    return None


def _heif_plugin() -> bool:
    try:
        from pillow_heif import register_heif_opener  # pyright: ignore[reportMissingImports]
    except ImportError:
        return False
    register_heif_opener()
    return True


def _png_size(data: bytes) -> tuple[int, int]:
    return struct.unpack(">II", data[16:24]) if len(data) >= 24 else (0, 0)


PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def _png_data_bytes(data: bytes) -> int:
    """The most bytes the IHDR's image can inflate to: a filter byte per row and the rows' pixels
    (Adam7 adds a filter byte per row of each of 7 passes), plus a little slack."""
    if len(data) < 29:
        return 1 << 62
    width, height = _png_size(data)
    depth, color, interlace = data[24], data[25], data[28]
    row = (width * depth * PNG_CHANNELS.get(color, 4) + 7) // 8
    rows = height * (7 if interlace else 1)
    return rows + rows * (row + 8) + 4096


def _inflate_idat(inflater: Any, body: bytes, inflated: int, needed: int, data: bytes) -> int | Problem:
    """One IDAT chunk fed to the PNG's inflater in steps and thrown away: the bytes inflated so far,
    or the problem that ends the inflating."""
    import zlib

    try:
        inflated += len(inflater.decompress(body, INFLATE_STEP))
        while inflater.unconsumed_tail and inflated <= needed:
            inflated += len(inflater.decompress(inflater.unconsumed_tail, INFLATE_STEP))
    except zlib.error as exc:
        return Problem(IMG013.code, "zlib", said("the PNG image data is not a valid zlib stream: {exc}", exc=str(exc)))
    if inflated > needed:  # a 1×1 image whose data inflates to a gigabyte: stop, say so
        message = said(
            "the PNG image data inflates to more than {needed:,} bytes, all its {dimensions} pixels need; the rest is a decompression bomb",
            needed=needed,
            dimensions="×".join(map(str, _png_size(data))),
        )
        return Problem(IMG013.code, "zlib", message)
    if inflater.unused_data:
        return Problem(IMG013.code, "zlib", said("the PNG image data goes on after its zlib stream ends"))
    return inflated


def _png_structure(data: bytes) -> list[Problem]:
    """Every chunk's CRC, a sane IHDR first, the zlib stream over the IDATs inflated in steps and
    thrown away (memory stays flat whatever the header claims), IEND, and what follows it."""
    import zlib

    problems: list[Problem] = []
    pos, inflater, seen_iend, first = 8, zlib.decompressobj(), False, True
    zlib_broken = False
    inflated, needed = 0, _png_data_bytes(data)
    while pos + 8 <= len(data):
        length, ctype = struct.unpack(">I4s", data[pos : pos + 8])
        end = pos + 12 + length
        name = ctype.decode("latin-1")
        if end > len(data):
            return [*problems, Problem(IMG013.code, "truncated", said("the PNG is cut off inside its {name} chunk", name=name))]
        body = data[pos + 8 : pos + 8 + length]
        if zlib.crc32(ctype + body) & 0xFFFFFFFF != struct.unpack(">I", data[end - 4 : end])[0]:
            problems.append(Problem(IMG013.code, "bad CRC", said("the PNG {name} chunk at byte {pos:,} has a bad CRC", name=name, pos=pos)))
        if first:
            first = False
            if ctype != b"IHDR" or length != 13:
                return [Problem(IMG013.code, "bad header", said("the PNG does not start with an IHDR chunk"))]
        if ctype == b"IDAT" and not zlib_broken:
            problem = _inflate_idat(inflater, body, inflated, needed, data)
            if isinstance(problem, Problem):
                problems.append(problem)
                zlib_broken = True
            else:
                inflated = problem
        pos = end
        if ctype == b"IEND":
            seen_iend = True
            break
    if not seen_iend:
        if inflater.eof:
            problems.append(Problem(IMG003.code, "no end marker", said("the PNG has no IEND chunk (its image data is complete)")))
        elif not zlib_broken:
            problems.append(Problem(IMG013.code, "truncated", said("the PNG ends before its image data is complete")))
    elif not inflater.eof and not zlib_broken:
        problems.append(Problem(IMG013.code, "zlib", said("the PNG image data ends before its zlib stream does")))
    if seen_iend and pos < len(data):
        problems.append(Problem(IMG007.code, "trailing data", said("{amount:,} bytes after IEND", amount=len(data) - pos)))
    return problems


def _result(scan: Scan) -> dict[str, Any]:
    result: dict[str, Any] = {
        "path": scan.path,
        "format": scan.format,
        "mode": scan.mode if scan.mode in UNUSUAL_MODES else None,
        "problems": [problem.__dict__ for problem in scan.problems],
    }
    if scan.problems:  # the fixer refuses to move a file that changed after the check
        result["sha256"] = _sha256(scan.path)
    return result


def _sha256(path: str) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()
