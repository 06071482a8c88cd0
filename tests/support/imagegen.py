"""Real image files for the image tests: Pillow encodes the originals, then bytes are cut and flipped."""

from __future__ import annotations

import io
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from PIL import Image


def picture(width: int = 96, height: int = 64, mode: str = "RGB", seed: int = 0) -> Image.Image:
    """A busy picture (gradients and noise, built in C) so the compressed data is non-trivial."""
    gradient = Image.linear_gradient("L").resize((width, height))
    across = Image.linear_gradient("L").rotate(90 + seed % 180).resize((width, height))
    import random

    noise = Image.frombytes("L", (width, height), random.Random(seed).randbytes(width * height))
    image = Image.merge("RGB", (gradient, across, noise))
    return image.convert(mode) if mode != "RGB" else image


def encode(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def frames(count: int = 3, size: tuple[int, int] = (48, 32)) -> list[Image.Image]:
    return [picture(*size, seed=i) for i in range(count)]


def png_chunks(data: bytes) -> list[tuple[int, bytes, bytes]]:
    """(offset, type, body) of each chunk."""
    chunks, pos = [], 8
    while pos + 8 <= len(data):
        length, ctype = struct.unpack(">I4s", data[pos : pos + 8])
        chunks.append((pos, ctype, data[pos + 8 : pos + 8 + length]))
        pos += 12 + length
    return chunks


def png_chunk(ctype: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + ctype + body + struct.pack(">I", zlib.crc32(ctype + body) & 0xFFFFFFFF)


def rebuild_png(
    data: bytes, replace: dict[bytes, bytes] | None = None, drop: tuple[bytes, ...] = (), insert_after_ihdr: bytes = b""
) -> bytes:
    out = data[:8]
    for _, ctype, body in png_chunks(data):
        if ctype in drop:
            continue
        out += png_chunk(ctype, (replace or {}).get(ctype, body))
        if ctype == b"IHDR":
            out += insert_after_ihdr
    return out


def flip(data: bytes, at: float, count: int = 24) -> bytes:
    buffer = bytearray(data)
    start = int(len(data) * at)
    for i in range(start, min(start + count, len(buffer) - 2)):
        buffer[i] ^= 0x5A
    return bytes(buffer)


def jpeg_scan_start(data: bytes) -> int:
    pos = 2
    while pos < len(data):
        marker = data[pos + 1]
        length = struct.unpack(">H", data[pos + 2 : pos + 4])[0]
        if marker == 0xDA:
            return pos + 2 + length
        pos += 2 + length
    raise ValueError("no SOS")


def jpeg_with_size(data: bytes, width: int, height: int) -> bytes:
    """Rewrites the SOF dimensions (a decompression bomb header on a tiny file)."""
    pos = 2
    buffer = bytearray(data)
    while pos < len(data):
        marker = data[pos + 1]
        length = struct.unpack(">H", data[pos + 2 : pos + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            struct.pack_into(">HH", buffer, pos + 5, height, width)
            return bytes(buffer)
        pos += 2 + length
    raise ValueError("no SOF")


def gif_extents_bomb() -> bytes:
    """A 1×1 logical screen holding one 65535×65535 frame: its size shows only in the frame descriptor."""
    screen = b"GIF89a" + struct.pack("<HHBBB", 1, 1, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff"
    frame = b"\x2c" + struct.pack("<HHHHB", 0, 0, 65535, 65535, 0) + b"\x02\x02\x4c\x01\x00"
    return screen + frame + b"\x3b"


def webp_canvas_bomb() -> bytes:
    """An extended WebP whose VP8X canvas is 16384×16384."""
    vp8x = b"VP8X" + struct.pack("<I", 10) + b"\x00\x00\x00\x00" + (16383).to_bytes(3, "little") * 2
    body = b"WEBP" + vp8x
    return b"RIFF" + struct.pack("<I", len(body)) + body


def tiff_with(width: int, height: int, compression: int = 1, big: bool = False) -> bytes:
    """A one-page TIFF (or BigTIFF) with these ImageWidth, ImageLength and Compression tags and a
    strip of 64 bytes: a header to read, not a picture."""
    tags = [(256, width), (257, height), (258, 8), (259, compression), (262, 1), (273, 0), (277, 1), (278, height), (279, 64)]
    if big:
        head = b"II+\x00" + struct.pack("<HHQ", 8, 0, 16)
        ifd = struct.pack("<Q", len(tags)) + b"".join(struct.pack("<HHQQ", tag, 16, 1, value) for tag, value in tags) + struct.pack("<Q", 0)
        strip_at = 16 + len(ifd)
    else:
        head = b"II*\x00" + struct.pack("<I", 8)
        ifd = struct.pack("<H", len(tags)) + b"".join(struct.pack("<HHII", tag, 4, 1, value) for tag, value in tags) + struct.pack("<I", 0)
        strip_at = 8 + len(ifd)
    ifd = ifd.replace(
        struct.pack("<HHQQ" if big else "<HHII", 273, 16 if big else 4, 1, 0),
        struct.pack("<HHQQ" if big else "<HHII", 273, 16 if big else 4, 1, strip_at),
    )
    return head + ifd + bytes(range(64))


def bmp_header(
    width: int, height: int, planes: int = 1, bits: int = 24, image_size: int = 0, colours: int = 0, pixels: bytes = b""
) -> bytes:
    palette = b"\x00\x00\x00\x00" * (colours or (1 << bits if bits <= 8 else 0))
    offset = 14 + 40 + len(palette)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, planes, bits, 0, image_size, 2835, 2835, colours, 0)
    return b"BM" + struct.pack("<IHHI", offset + len(pixels), 0, 0, offset) + info + palette + pixels


def avif_extents(width: int, height: int) -> bytes:
    """An AVIF container whose only image property is an ispe of width × height (no pixels)."""

    def box(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", 8 + len(body)) + kind + body

    ispe = box(b"ispe", b"\x00\x00\x00\x00" + struct.pack(">II", width, height))
    meta = box(b"meta", b"\x00\x00\x00\x00" + box(b"iprp", box(b"ipco", ispe)))
    return box(b"ftyp", b"avif\x00\x00\x00\x00avifmif1") + meta


def tga_header(width: int, height: int) -> bytes:
    return struct.pack("<BBBHHBHHHHBB", 0, 0, 2, 0, 0, 0, 0, 0, width, height, 24, 0)


def png_of_zeros(width: int, height: int, rows: int | None = None) -> bytes:
    """A grayscale PNG of zeros whose IDAT holds the first `rows` rows (all of them by default)."""
    deflate = zlib.compressobj(1)
    row = b"\x00" * (width + 1)
    body = [deflate.compress(row * min(500, (rows or height) - start)) for start in range(0, rows or height, 500)]
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", b"".join(body) + deflate.flush()) + png_chunk(b"IEND", b"")


@dataclass
class Sample:
    rel: str
    data: bytes
    expect: str  # a code ("IMG001"...), or "good" (never flagged), "mode" (IMG006 only), "unchecked" (IMG008 only)


def samples() -> list[Sample]:
    base = picture(160, 120)
    jpeg = encode(base, "JPEG", quality=90)
    png = encode(base, "PNG")
    gif = encode(frames()[0], "GIF", save_all=True, append_images=frames()[1:], duration=100, loop=0)
    webp = encode(base, "WEBP", quality=80)
    webp_anim = encode(frames()[0], "WEBP", save_all=True, append_images=frames()[1:], duration=100, lossless=True)
    bmp = encode(base, "BMP")
    tiff_pages = encode(frames()[0], "TIFF", save_all=True, append_images=frames()[1:])
    exif = Image.Exif()
    exif[0x0112] = 6  # rotated 90°
    out: list[Sample] = []

    def add(rel: str, data: bytes, expect: str) -> None:
        out.append(Sample(rel, data, expect))

    # never flagged
    add("good/photo.jpg", jpeg, "good")
    add("good/photo.png", png, "good")
    add("good/anim.gif", gif, "good")
    add("good/photo.webp", webp, "good")
    add("good/anim.webp", webp_anim, "good")
    add("good/photo.bmp", bmp, "good")
    add("good/pages.tiff", tiff_pages, "good")
    add("good/UPPER.JPG", jpeg, "good")
    add("good/UPPER.PNG", png, "good")
    add("good/rotated-exif.jpg", encode(base, "JPEG", exif=exif.tobytes()), "good")
    add("good/cmyk.jpg", encode(base.convert("CMYK"), "JPEG"), "good")
    add("good/one-pixel.png", encode(Image.new("RGB", (1, 1), (1, 2, 3)), "PNG"), "good")
    add("good/one-pixel.jpg", encode(Image.new("RGB", (1, 1), (1, 2, 3)), "JPEG"), "good")
    add("good/one-pixel.gif", encode(Image.new("P", (1, 1)), "GIF"), "good")
    add("good/large 4000x3000.jpg", encode(picture(4000, 3000), "JPEG", quality=70), "good")
    add("good/猫 cat.png", png, "good")
    add("good/-dash start.jpg", jpeg, "good")
    add("good/gray.jpg", encode(base.convert("L"), "JPEG"), "good")
    # modes a model may not expect: information only
    add("modes/rgba.png", encode(base.convert("RGBA"), "PNG"), "mode")
    add("modes/sixteen.png", encode(base.convert("I;16"), "PNG"), "mode")
    palette = base.convert("P")
    add("modes/palette-transparent.png", encode(palette, "PNG", transparency=0), "mode")
    add("modes/cmyk.tiff", encode(base.convert("CMYK"), "TIFF"), "mode")
    # broken: empty, header only, truncated at several points, in every format
    add("broken/empty.jpg", b"", "IMG001")
    add("broken/empty.png", b"", "IMG001")
    add("broken/header-only.jpg", jpeg[: jpeg_scan_start(jpeg)], "IMG001")
    add("broken/header-only.png", png[:33], "IMG001")
    for fraction in (0.3, 0.6, 0.9):
        tag = int(fraction * 100)
        add(f"broken/truncated-{tag}.jpg", jpeg[: int(len(jpeg) * fraction)], "IMG001")
        add(f"broken/truncated-{tag}.png", png[: int(len(png) * fraction)], "IMG001")
        add(f"broken/truncated-{tag}.gif", gif[: int(len(gif) * fraction)], "IMG001")
        add(f"broken/truncated-{tag}.webp", webp[: int(len(webp) * fraction)], "IMG001")
        add(f"broken/truncated-{tag}.bmp", bmp[: int(len(bmp) * fraction)], "IMG001")
        add(f"broken/truncated-{tag}.tiff", tiff_pages[: int(len(tiff_pages) * fraction)], "IMG001")
    add("broken/-坏 图片 cut.jpg", jpeg[: len(jpeg) // 2], "IMG001")
    add("broken/ -space first.png", png[: len(png) // 2], "IMG001")
    scan = jpeg_scan_start(jpeg)
    # PNG: a bad CRC on an ancillary chunk (Pillow then cannot identify it), a broken zlib stream, a bad IHDR
    text_chunk = png_chunk(b"tEXt", b"Comment\x00hello")
    bad_crc = rebuild_png(png, insert_after_ihdr=text_chunk[:-4] + b"\x00\x00\x00\x00")
    add("broken/bad-crc.png", bad_crc, "IMG001")
    idat = next(body for _, ctype, body in png_chunks(png) if ctype == b"IDAT")
    broken_idat = bytearray(idat)
    for i in range(len(idat) // 2, len(idat) // 2 + 16):
        broken_idat[i] ^= 0xFF
    add("broken/bad-zlib.png", rebuild_png(png, replace={b"IDAT": bytes(broken_idat)}), "IMG001")
    ihdr = bytearray(next(body for _, ctype, body in png_chunks(png) if ctype == b"IHDR"))
    ihdr[8] = 3  # bit depth 3 does not exist
    add("broken/bad-ihdr.png", rebuild_png(png, replace={b"IHDR": bytes(ihdr)}), "IMG001")
    # later frames and pages
    gif_frames_start = gif.find(b"\x2c", len(gif) // 2)
    add("broken/later-frame.gif", gif[: gif_frames_start + 20], "IMG001")
    add("broken/later-frame.webp", webp_anim[: int(len(webp_anim) * 0.8)], "IMG001")
    add("broken/later-page.tiff", tiff_pages[: int(len(tiff_pages) * 0.75)], "IMG001")
    bad_ifd = bytearray(tiff_pages)
    struct.pack_into("<I", bad_ifd, 4, len(tiff_pages) + 10_000)
    add("broken/bad-ifd-offset.tiff", bytes(bad_ifd), "IMG001")
    bad_riff = bytearray(webp)
    struct.pack_into("<I", bad_riff, 4, len(webp) * 3)
    add("broken/bad-riff-size.webp", bytes(bad_riff), "IMG001")
    # not images at all
    add(
        "broken/error-page.jpg",
        b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body>Not Found</body></html>\n",
        "IMG002",
    )
    add("broken/api-response.png", b'{"error": "rate limited", "retry_after": 30}\n', "IMG002")
    # decompression bombs, flagged from the header
    add("broken/bomb.jpg", jpeg_with_size(jpeg, 30000, 30000), "IMG004")
    bomb_ihdr = bytearray(ihdr)
    bomb_ihdr[8] = 8
    struct.pack_into(">II", bomb_ihdr, 0, 40000, 40000)
    add("broken/bomb.png", rebuild_png(png, replace={b"IHDR": bytes(bomb_ihdr)}), "IMG004")
    # Pillow refuses a JPEG without EOI ("image file is truncated"): it breaks the loader
    add("broken/no-eoi.jpg", jpeg[:-2], "IMG001")
    # more bombs, each from its header alone: a GIF frame past its screen, a WebP canvas, a TIFF and
    # a BigTIFF page, a bitmap, an AVIF's ispe, a TGA
    add("broken/bomb-extents.gif", gif_extents_bomb(), "IMG004")
    add("broken/bomb.webp", webp_canvas_bomb(), "IMG004")
    add("broken/bomb.tiff", tiff_with(100_000, 100_000), "IMG004")
    add("broken/bomb-big.tiff", tiff_with(100_000, 100_000, big=True), "IMG004")
    add("broken/bomb.bmp", bmp_header(50_000, 50_000), "IMG004")
    add("broken/bomb.avif", avif_extents(20_000, 20_000), "IMG004")
    add("broken/bomb.tga", tga_header(65_535, 65_535), "IMG004")
    # damaged pixels the loader reads past: warnings, quarantined only with --quarantine damaged
    add("damaged/corrupt-entropy.jpg", flip(jpeg, (scan + (len(jpeg) - scan) * 0.5) / len(jpeg), 200), "IMG013")
    idat_at = next(offset for offset, ctype, _ in png_chunks(png) if ctype == b"IDAT")
    bad_idat_crc = bytearray(png)
    bad_idat_crc[idat_at + 8 + len(idat)] ^= 0xFF
    add("damaged/bad-idat-crc.png", bytes(bad_idat_crc), "IMG013")
    add("damaged/zlib-goes-on.png", rebuild_png(png, replace={b"IDAT": idat + b"garbage after the stream"}), "IMG013")
    palette_pixels = bytes([200]) * 4 * 2  # 4×2 8-bit pixels, index 200 of a 16-colour palette
    add("damaged/past-the-palette.bmp", bmp_header(4, 2, bits=8, colours=16, pixels=palette_pixels), "IMG013")
    # the loader warns and reads it: never quarantined
    actl_empty = png_chunk(b"acTL", struct.pack(">II", 0, 0))
    add("warns/apng-no-frames.png", rebuild_png(png, insert_after_ihdr=actl_empty), "IMG014")
    # formats Pillow reads: BigTIFF, a headerless DIB, TGA, ICO, AVIF
    small = picture(32, 24)
    add("good/big.tif", encode(small, "TIFF", big_tiff=True), "good")
    add("good/headerless.dib", encode(small, "DIB"), "good")
    add("good/photo.tga", encode(small, "TGA"), "good")
    add("good/icon.ico", encode(small, "ICO"), "good")
    add("good/photo.avif", encode(small, "AVIF"), "good")
    # a decoder this machine may lack: unchecked (counted in IMG008), never corrupt
    add("unchecked/webp-in.tiff", tiff_with(32, 24, compression=50001), "unchecked")
    # not broken, but reported
    add("odd/png-named.jpg", png, "IMG005")
    add("odd/no-iend.png", rebuild_png(png, drop=(b"IEND",)), "IMG003")
    add("odd/trailing.jpg", jpeg + b"PK\x03\x04 appended archive bytes", "IMG007")
    add("odd/trailing.png", png + b"extra bytes after IEND", "IMG007")
    return out


def write_dataset(root: Path, outside: Path | None = None) -> list[Sample]:
    items = samples()
    for item in items:
        path = root / item.rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(item.data)
    (root / "annotations.json").write_text('{"images": []}')
    (root / "labels.txt").write_text("cat\ndog\n")
    (root / "not-a-file.jpg").mkdir()  # a directory named like an image
    (root / "good/._photo.jpg").write_bytes(b"\x00\x05\x16\x07AppleDouble metadata")
    os.symlink(root / "good/photo.jpg", root / "link-inside.jpg")
    if outside is not None:
        outside.mkdir(parents=True, exist_ok=True)
        (outside / "elsewhere.jpg").write_bytes(b"")  # broken, but outside: never touched
        os.symlink(outside / "elsewhere.jpg", root / "link-outside.jpg")
    return items
