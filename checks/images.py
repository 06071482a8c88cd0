"""Image datasets: every image is decoded in full, in parallel, and every one that will fail is found."""

from __future__ import annotations

import hashlib
import os
import signal
import struct
import time
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from multiprocessing import Pipe
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from decode_doctor.check import Check, Needs, Option
from decode_doctor.context import Context
from decode_doctor.membw import usable_cpus
from decode_doctor.model import Code, Finding, FixRef, Severity

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".gif", ".webp", ".bmp", ".dib", ".tif", ".tiff", ".heic", ".heif", ".avif"}
FORMAT_SUFFIXES = {"JPEG": ".jpg", "PNG": ".png", "GIF": ".gif", "WEBP": ".webp", "BMP": ".bmp", "TIFF": ".tif", "HEIF": ".heic", "AVIF": ".avif"}
SUFFIX_FORMATS = {".jpg": "JPEG", ".jpeg": "JPEG", ".jpe": "JPEG", ".jfif": "JPEG", ".png": "PNG", ".gif": "GIF", ".webp": "WEBP", ".bmp": "BMP", ".dib": "BMP", ".tif": "TIFF", ".tiff": "TIFF", ".heic": "HEIF", ".heif": "HEIF", ".avif": "AVIF"}
DEFAULT_MAX_PIXELS = 89_478_485  # Pillow's Image.MAX_IMAGE_PIXELS: 1024 × 1024 × 1024 // 4 // 3
FILE_TIMEOUT_S = 10.0
PROGRESS_EVERY_S = 0.5
UNUSUAL_MODES = {"CMYK": "CMYK", "RGBA": "RGBA (alpha)", "LA": "LA (alpha)", "I;16": "16-bit", "I;16B": "16-bit", "I;16L": "16-bit", "I": "32-bit integer", "F": "32-bit float", "PA": "palette with alpha", "P+transparency": "palette with transparency", "RGB;16": "16-bit RGB", "RGBA;16": "16-bit RGBA"}

QUARANTINE_SAFETY = (
    "Safe: the file is moved (never copied and deleted on one filesystem; across filesystems copied, fsynced and "
    "verified by sha256 before the original is removed) into the quarantine directory under its relative path, "
    "and recorded in the quarantine's manifest.jsonl (original path, size, sha256, reason, time); the move is "
    "journaled and `decode-doctor undo` puts every file back byte-identical."
)
IMG001 = Code("IMG001", "An image that will fail to decode", Severity.ERROR,
    what="The file is damaged: empty, cut off, corrupted compressed data (libjpeg's \"Corrupt JPEG data\" warnings included), a PNG chunk with a bad CRC or a broken zlib stream, a bad header, a damaged later frame or page, a bad TIFF directory offset or WebP RIFF size.",
    why="Training and multimodal inference crash on it (\"image decode failed\"), or worse, decode garbage pixels silently: Pillow's verify() misses truncation, load() ignores libjpeg's warnings, and LOAD_TRUNCATED_IMAGES hides truncation entirely.",
    fix_by_hand="Re-download or re-export the file from its source; or move it out of the dataset and drop it from the annotation list.",
    fix_safety=QUARANTINE_SAFETY)
IMG002 = Code("IMG002", "Not an image, saved with an image extension", Severity.ERROR,
    what="The bytes are an HTML page, JSON, text or another non-image format, under a name like .jpg: a scraper saved an error page or an API response.",
    why="Every loader fails on it.",
    fix_by_hand="Fetch the image again, or remove the file and its annotation.",
    fix_safety=QUARANTINE_SAFETY)
IMG003 = Code("IMG003", "An image without its end marker", Severity.WARNING,
    what="A JPEG without its EOI marker, or a PNG without its IEND chunk, whose pixel data is otherwise complete.",
    why="Most decoders show the image, but strict ones (libjpeg in strict mode, some framework decoders) reject it; it usually means a write was interrupted right at the end. decode-doctor does not quarantine it: nothing is lost from the pixels.",
    fix_by_hand="Re-save it: python -c \"from PIL import Image; Image.open('f.jpg').save('f.jpg', quality=95)\" (or re-download).")
IMG004 = Code("IMG004", "Decompression bomb", Severity.ERROR,
    what="The header declares more pixels than --max-pixels (Pillow's default, about 89.5 megapixels): decoding it would allocate gigabytes. Found from the header alone, without decoding.",
    why="Loaders either refuse it (Pillow's DecompressionBombError) or run out of memory; either way the dataloader worker dies.",
    fix_by_hand="Downscale it if it is a real image, or remove it; raise --max-pixels if such sizes are expected.",
    fix_safety=QUARANTINE_SAFETY)
IMG005 = Code("IMG005", "An image whose extension lies", Severity.WARNING,
    what="A valid image whose bytes are one format and whose name says another (PNG bytes named .jpg).",
    why="Pipelines that pick the decoder from the extension (TensorFlow's decode_jpeg, some DALI and webdataset loaders) fail on it, while Pillow, which sniffs the content, does not.",
    fix_by_hand="Rename it to its real extension (and update the annotation list), or re-encode it.",
    fix_safety="Safe: renames the file to the extension of its real format, in the same directory, if that name is free; journaled and undoable. Annotation files that name it must be updated by you.")
IMG006 = Code("IMG006", "Images in modes a vision model's preprocessing may not expect", Severity.INFO,
    what="Valid images in CMYK, 16-bit, palette-with-transparency or RGBA modes.",
    why="Preprocessing that assumes 8-bit RGB (normalisation constants, 3 channels) silently produces wrong tensors or crashes on a 4th channel.",
    fix_by_hand="Convert in the dataloader: Image.open(p).convert('RGB'), or re-encode the files once.")
IMG007 = Code("IMG007", "Data after the image's end marker", Severity.INFO,
    what="Bytes follow the JPEG EOI or PNG IEND marker (an appended archive, a second image, padding).",
    why="Decoders ignore them, but they waste space and can hide content; some strict validators reject the file.",
    fix_by_hand="Re-save the image to drop the trailing bytes.")
IMG008 = Code("IMG008", "Images in a format that cannot be checked here", Severity.INFO,
    what="HEIC/HEIF or AVIF images, with no decoder plugin installed (pillow-heif, pillow-avif-plugin): they were not checked.",
    why="If the training environment cannot decode them either, they fail there.",
    fix_by_hand="pip install pillow-heif (and pillow-avif-plugin) and run the check again, or convert them to JPEG/PNG.")
IMG009 = Code("IMG009", "Symbolic links in the dataset were not followed", Severity.INFO,
    what="Links are reported once and never resolved, so the check (and a quarantine) stays inside the tree it was given.",
    why="A link can point outside the dataset; moving or reading through it would touch files the user did not name.",
    fix_by_hand="Check the link targets yourself, or pass their directories with --images.")
IMG010 = Code("IMG010", "macOS AppleDouble files (._*) in the dataset", Severity.INFO,
    what="Files named ._something, written by macOS on non-Apple filesystems, hold resource-fork metadata, not images.",
    why="Glob patterns such as *.jpg pick them up and the loader fails on them.",
    fix_by_hand="find DIR -name '._*' -delete (or exclude them in the dataset's file list).")
IMG011 = Code("IMG011", "An image took too long to decode", Severity.ERROR,
    what="Decoding the file took longer than the per-file limit (--image-timeout); the worker was stopped.",
    why="A pathological file (huge progressive JPEG, crafted compressed data) stalls a dataloader worker the same way.",
    fix_by_hand="Inspect it by hand; remove or re-encode it.",
    fix_safety=QUARANTINE_SAFETY)
IMG012 = Code("IMG012", "An image file cannot be read", Severity.WARNING,
    what="Opening or reading the file failed (permissions, I/O error).",
    why="The training job will fail on it the same way, or, running as another user, may not.",
    fix_by_hand="Check the file's owner and mode, and the disk (dmesg for I/O errors).")


# --- walking ---------------------------------------------------------------------------------

def iter_images(root: Path, links: list[str], appledouble: list[str]) -> Iterator[Path]:
    """Image files under root, streaming (a directory stack, never the whole list): links reported,
    not followed; ._* files and directories named like images set aside."""
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            entries = os.scandir(directory)
        except OSError:
            continue
        with entries:
            for entry in entries:
                if entry.is_symlink():
                    links.append(entry.path)
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                    continue
                suffix = os.path.splitext(entry.name)[1].lower()
                if suffix not in IMAGE_SUFFIXES or not entry.is_file(follow_symlinks=False):
                    continue
                if entry.name.startswith("._"):
                    appledouble.append(entry.path)
                    continue
                yield Path(entry.path)


# --- inspecting one file (runs in worker processes) ------------------------------------------

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
                return [Problem("IMG001", "bad header", f"PNG IHDR is invalid ({width}×{height}, bit depth {depth}, colour type {color})", "PNG")]
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
        return [Problem("IMG004", "bomb", f"JPEG declares {width}×{height} = {width * height:,} pixels (limit {max_pixels:,})", "JPEG")], None
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
                    return [Problem("IMG004", "bomb", f"{fmt} declares {width}×{height} = {width * height:,} pixels (limit {max_pixels:,})", fmt)], None
                mode = image.mode
                if mode == "P" and "transparency" in image.info:
                    mode = "P+transparency"
                for frame in ImageSequence.Iterator(image):
                    frame.load()
                    frames += 1
        except (OSError, SyntaxError, ValueError, EOFError, struct.error, Warning, IndexError, TypeError, ZeroDivisionError, MemoryError) as exc:
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
            return _result(path, data, fmt, None, [Problem("IMG008", "unsupported", f"{fmt}: no decoder plugin installed; not checked", fmt)])
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


# --- the worker pool -------------------------------------------------------------------------

BATCH = 16  # paths per message: one pipe round trip per batch, not per file


class _FileTimeout(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _FileTimeout()


def _timed_out(path: str, limit: float) -> dict[str, Any]:
    return {"path": path, "problems": [Problem("IMG011", "timed out", f"decoding took longer than {limit:g} s").__dict__]}


def _crashed(path: str, why: str) -> dict[str, Any]:
    return {"path": path, "problems": [Problem("IMG001", "decoder crash", why).__dict__]}


def _worker(conn: Connection, max_pixels: int, file_timeout: float) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGALRM, _on_alarm)
    while True:
        try:
            batch = conn.recv()
        except EOFError:
            break
        if batch is None:
            break
        results = []
        for path in batch:
            try:
                signal.setitimer(signal.ITIMER_REAL, file_timeout)
                result = inspect_file(path, max_pixels)
                signal.setitimer(signal.ITIMER_REAL, 0)
            except _FileTimeout:
                result = _timed_out(path, file_timeout)
            except Exception as exc:  # never let one file stop the worker
                signal.setitimer(signal.ITIMER_REAL, 0)
                result = _crashed(path, f"{type(exc).__name__}: {exc}")
            results.append(result)
        conn.send(results)
    conn.close()


@dataclass
class _Slot:
    pid: int
    conn: Connection
    batch: list[str] = field(default_factory=list)
    deadline: float = 0.0


def _spawn(max_pixels: int, file_timeout: float) -> _Slot:
    parent, child = Pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            parent.close()
            _worker(child, max_pixels, file_timeout)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    child.close()
    return _Slot(pid, parent)


def _stop(slot: _Slot) -> None:
    try:
        os.kill(slot.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(slot.pid, 0)
    except ChildProcessError:
        pass
    slot.conn.close()


def _preload_decoders() -> None:
    """Import the decoders once, before forking, instead of once in every worker."""
    import simplejpeg  # noqa: F401
    from PIL import GifImagePlugin, Image, ImageSequence, PngImagePlugin, TiffImagePlugin, WebPImagePlugin  # noqa: F401

    Image.init()


def decode_all(paths: Iterator[Path], jobs: int, max_pixels: int, file_timeout: float, on_result: Any) -> None:
    """Feeds batches of paths to `jobs` forked workers as they free up. Each worker limits every file
    with an alarm; a worker that still overruns (stuck inside a C decoder) or dies is replaced, and
    its batch is retried one file at a time, so the one bad file is found and reported. Memory stays
    flat: at most one batch per worker is in flight."""
    _preload_decoders()
    slots = [_spawn(max_pixels, file_timeout) for _ in range(max(1, jobs))]
    source = iter(paths)
    retry: deque[str] = deque()
    slack = 2.0

    def feed(slot: _Slot) -> None:
        if retry:
            batch = [retry.popleft()]
        else:
            batch = [str(p) for p in islice(source, BATCH)]
        slot.batch = batch
        if batch:
            slot.deadline = time.monotonic() + file_timeout * len(batch) + slack
            slot.conn.send(batch)

    def replace(slot: _Slot, why: str) -> _Slot:
        _stop(slot)
        fresh = _spawn(max_pixels, file_timeout)
        slots[slots.index(slot)] = fresh
        if len(slot.batch) == 1:
            on_result(_timed_out(slot.batch[0], file_timeout) if why == "timeout" else _crashed(slot.batch[0], "the decoder crashed on this file"))
        else:
            retry.extend(slot.batch)
        return fresh

    try:
        for slot in slots:
            feed(slot)
        while any(slot.batch for slot in slots):
            busy = [slot for slot in slots if slot.batch]
            ready = wait([slot.conn for slot in busy], timeout=max(0.0, min(s.deadline for s in busy) - time.monotonic()))
            for slot in busy:
                if slot.conn in ready:
                    try:
                        results = slot.conn.recv()
                    except EOFError:
                        feed(replace(slot, "crash"))
                        continue
                    slot.batch = []
                    for result in results:
                        on_result(result)
                    feed(slot)
                elif time.monotonic() >= slot.deadline:
                    feed(replace(slot, "timeout"))
    finally:
        for slot in slots:
            try:
                slot.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        for slot in slots:
            try:
                os.waitpid(slot.pid, 0)
            except ChildProcessError:
                pass


# --- the check -------------------------------------------------------------------------------

def start_counter(dataset: Path) -> tuple[int, Connection]:
    """A forked process that walks the tree once more, only counting, so progress can show an ETA
    while the decoders stream through it; its answer arrives long before they finish."""
    parent, child = Pipe(duplex=False)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            parent.close()
            child.send(sum(1 for _ in iter_images(dataset, [], [])))
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    child.close()
    return pid, parent


def default_quarantine(dataset: Path) -> Path:
    return dataset.parent / f"{dataset.name}.quarantine"


class Images(Check):
    name = "images"
    description = "every image under --images decodes in full (JPEG in libjpeg's strict mode, every frame and page)"
    codes = (IMG001, IMG002, IMG003, IMG004, IMG005, IMG006, IMG007, IMG008, IMG009, IMG010, IMG011, IMG012)
    needs = Needs(inputs=("images",))
    options = (
        Option("--max-pixels", f"Images declaring more pixels are decompression bombs [default: {DEFAULT_MAX_PIXELS:,}, Pillow's].", type=int),
        Option("--quarantine-dir", "Where --fix moves broken images [default: DATASET.quarantine beside the dataset]."),
        Option("--image-timeout", f"Seconds one image may take to decode [default: {FILE_TIMEOUT_S:g}].", type=float),
        Option("--jobs", "Decoding processes [default: one per usable CPU].", type=int),
    )
    timeout_s = 7 * 24 * 3600.0  # a dataset of millions takes hours; --timeout caps it

    def run(self, ctx: Context) -> list[Finding]:
        max_pixels = ctx.options.get("max_pixels") or DEFAULT_MAX_PIXELS
        file_timeout = ctx.options.get("image_timeout") or FILE_TIMEOUT_S
        jobs = ctx.options.get("jobs") or usable_cpus()
        findings: list[Finding] = []
        for dataset in ctx.images:
            findings.extend(self._scan(ctx, Path(dataset), max_pixels, file_timeout, jobs))
        return findings

    def _scan(self, ctx: Context, dataset: Path, max_pixels: int, file_timeout: float, jobs: int) -> list[Finding]:
        quarantine = Path(ctx.options.get("quarantine_dir") or default_quarantine(dataset)).absolute()
        if quarantine == dataset or dataset in quarantine.parents:
            raise ValueError(f"the quarantine directory {quarantine} is inside the dataset {dataset}; choose one outside it")
        links: list[str] = []
        appledouble: list[str] = []
        findings: list[Finding] = []
        modes: Counter[str] = Counter()
        mode_files: dict[str, list[str]] = {}
        unsupported: list[str] = []
        now = time.monotonic()
        counter: dict[str, Any] = {"done": 0, "started": now, "last": now, "total": None}  # first line after half a second
        counter_pid, counter_conn = start_counter(dataset)

        def on_result(result: dict[str, Any]) -> None:
            counter["done"] += 1
            now = time.monotonic()
            if now - counter["last"] >= PROGRESS_EVERY_S:
                counter["last"] = now
                if counter["total"] is None and counter_conn.poll():
                    counter["total"] = counter_conn.recv()
                rate = counter["done"] / max(now - counter["started"], 1e-6)
                text = f"{counter['done']:,} images, {rate:,.0f}/s, {len(findings)} problems"
                if counter["total"]:
                    left = max(counter["total"] - counter["done"], 0)
                    text = f"{counter['done']:,} of {counter['total']:,} images, {rate:,.0f}/s, ETA {left / max(rate, 1e-6):,.0f} s, {len(findings)} problems"
                ctx.progress(text)
            if result.get("mode"):
                label = UNUSUAL_MODES[result["mode"]]
                modes[label] += 1
                mode_files.setdefault(label, []).append(result["path"])
            for problem in result["problems"]:
                if problem["code"] == "IMG008":
                    unsupported.append(result["path"])
                    continue
                findings.append(self._finding(problem, result["path"], result.get("sha256"), dataset, quarantine))

        try:
            decode_all(iter_images(dataset, links, appledouble), jobs, max_pixels, file_timeout, on_result)
        finally:
            try:
                os.kill(counter_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(counter_pid, 0)
            counter_conn.close()
        summary = {"dataset": str(dataset), "images": counter["done"], "seconds": round(time.monotonic() - counter["started"], 3)}
        if modes:
            parts = ", ".join(f"{label} {count}" for label, count in modes.most_common())
            findings.append(self.finding("IMG006", f"{dataset}: {sum(modes.values())} images in modes preprocessing may not expect ({parts}); convert with Image.open(p).convert('RGB').", evidence={**summary, "modes": dict(modes), "examples": {k: v[:20] for k, v in mode_files.items()}}))
        if unsupported:
            findings.append(self.finding("IMG008", f"{dataset}: {len(unsupported)} HEIC/AVIF images not checked (no decoder plugin).", evidence={**summary, "files": unsupported[:100]}))
        if links:
            findings.append(self.finding("IMG009", f"{dataset}: {len(links)} symbolic links not followed.", evidence={**summary, "links": links[:100]}))
        if appledouble:
            findings.append(self.finding("IMG010", f"{dataset}: {len(appledouble)} AppleDouble ._* files (not images).", evidence={**summary, "files": appledouble[:100]}))
        ctx.publish(f"images:{dataset}", summary)
        return findings

    def _finding(self, problem: dict[str, Any], path: str, sha256: str | None, dataset: Path, quarantine: Path) -> Finding:
        code = problem["code"]
        evidence = {"file": path, "format": problem.get("format"), "damage": problem["damage"], "decoder_message": problem["message"]}
        fix = None
        if code in ("IMG001", "IMG002", "IMG004", "IMG011"):
            target = quarantine / Path(path).relative_to(dataset)
            fix = FixRef("images", f"quarantine {Path(path).name}", params={"action": "quarantine", "destination": str(target), "manifest": str(quarantine / "manifest.jsonl"), "reason": f"{problem['damage']}: {problem['message']}", "sha256": sha256})
        elif code == "IMG005":
            fix = FixRef("images", f"rename to {FORMAT_SUFFIXES[problem['format']]}", params={"action": "rename", "destination": str(Path(path).with_suffix(FORMAT_SUFFIXES[problem["format"]])), "sha256": sha256})
        message = f"{path}: {problem['message']}"
        return self.finding(code, message, evidence=evidence, path=path, fix=fix)
