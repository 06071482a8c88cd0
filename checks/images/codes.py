"""The images feature's codes, each with its explanation in fixed sections."""

from __future__ import annotations

from dataclasses import dataclass

from decode_doctor.engine import Code, FixableCode, FixParams, Severity


@dataclass(frozen=True)
class QuarantineParams(FixParams):
    """Move the file into the quarantine (its relative path kept), recording it in the manifest."""

    destination: str
    manifest: str
    reason: str  # in English, as the manifest keeps it
    sha256: str | None  # what the check read: a file changed since is refused
    shown_reason: str = ""  # the reason in the user's language, for the preview


@dataclass(frozen=True)
class RenameParams(FixParams):
    """Rename the file to the extension of its real format, in the same directory."""

    destination: str
    sha256: str | None


DAMAGED_SAFETY = (
    "Safe, and only with --quarantine damaged: the file is moved into the quarantine as broken ones are (manifest, journal, "
    "byte-identical undo); without it, damaged files are reported and stay."
)

QUARANTINE_SAFETY = (
    "Safe: the file is moved (never copied and deleted on one filesystem; across filesystems copied, fsynced and "
    "verified by sha256 before the original is removed) into the quarantine directory under its relative path, "
    "and recorded in the quarantine's manifest.jsonl (original path, size, sha256, reason, time); the move is "
    "journaled and `decode-doctor undo` puts every file back byte-identical."
)


IMG001 = FixableCode[QuarantineParams](
    "IMG001",
    "An image that breaks the loader",
    Severity.ERROR,
    what="The loader raises on the file or returns nothing: Pillow's Image.open() then load() on every frame, with its default "
    "settings (LOAD_TRUNCATED_IMAGES off), and torchvision's decode_image or OpenCV's imread when given with --loader. Empty, cut "
    "off, a broken zlib or JPEG stream, a bad header, a damaged later frame or page. The finding names the loader and version.",
    why='A dataloader worker dies on it ("image file is truncated", "cannot identify image file"), and with it the training step '
    "or the batch; with LOAD_TRUNCATED_IMAGES on, it is silently padded with gray instead.",
    fix_by_hand="Re-download or re-export the file from its source; or move it out of the dataset and drop it from the annotation list.",
    params=QuarantineParams,
    fix_safety=QUARANTINE_SAFETY,
    example='train/0041.jpg is cut off at 60 % of its bytes: Pillow\'s load() raises "image file is truncated (43 bytes not processed)".',
)

IMG002 = FixableCode[QuarantineParams](
    "IMG002",
    "Not an image, saved with an image extension",
    Severity.ERROR,
    what="The bytes are an HTML page, JSON, text or another non-image format, under a name like .jpg: a scraper saved an error page or an "
    "API response.",
    why="Every loader fails on it.",
    fix_by_hand="Fetch the image again, or remove the file and its annotation.",
    params=QuarantineParams,
    fix_safety=QUARANTINE_SAFETY,
    example='cat_123.jpg holds "<!DOCTYPE html><html><head><title>403 Forbidden": a scraper saved the error page.',
)

IMG003 = FixableCode[QuarantineParams](
    "IMG003",
    "An image without its end marker",
    Severity.WARNING,
    what="A PNG without its IEND chunk, or a JPEG without its EOI marker, whose pixel data is otherwise complete and which the loader "
    "reads. (Pillow refuses a JPEG without EOI: that is IMG001, with this as a reason.)",
    why="Strict decoders (libpng, libjpeg in strict mode, some framework decoders) reject it; it usually means a write was "
    "interrupted right at the end.",
    fix_by_hand="Re-save it: python -c \"from PIL import Image; Image.open('f.png').save('f.png')\" (or re-download).",
    params=QuarantineParams,
    fix_safety=DAMAGED_SAFETY,
    example="frame_0007.png has no IEND chunk; its IDAT data is complete and Pillow reads it.",
)

IMG004 = FixableCode[QuarantineParams](
    "IMG004",
    "Decompression bomb",
    Severity.ERROR,
    what="The header declares more than twice --max-pixels (the loader's own limit: Pillow's MAX_IMAGE_PIXELS, about 89.5 "
    "megapixels, so 179 MP), where the loader refuses it. Found from the header alone — PNG IHDR, GIF screen and every frame's "
    "extents, WebP, every TIFF page, JPEG SOF, BMP, AVIF/HEIF ispe, TGA, ICO — before any pixel data is inflated.",
    why="Pillow raises DecompressionBombError and the worker dies; a loader without the limit allocates gigabytes.",
    fix_by_hand="Downscale it if it is a real image, or remove it; raise --max-pixels if such sizes are expected.",
    params=QuarantineParams,
    fix_safety=QUARANTINE_SAFETY,
    example="A 12 KB PNG whose IHDR declares 50,000 × 50,000 pixels (2.5 gigapixels), found before any pixel is inflated.",
)

IMG005 = FixableCode[RenameParams](
    "IMG005",
    "An image whose extension lies",
    Severity.WARNING,
    what="A valid image whose bytes are one format and whose name says another (PNG bytes named .jpg).",
    why="Pipelines that pick the decoder from the extension (TensorFlow's decode_jpeg, some DALI and webdataset loaders) fail on it, "
    "while Pillow, which sniffs the content, does not.",
    fix_by_hand="Rename it to its real extension (and update the annotation list), or re-encode it.",
    params=RenameParams,
    fix_safety="Safe: renames the file to the extension of its real format, in the same directory, if that name is free; journaled and "
    "undoable. Annotation files that name it must be updated by you.",
    example="photo_88.jpg holds PNG bytes: TensorFlow's decode_jpeg fails on it, Pillow does not.",
)

IMG006 = Code(
    "IMG006",
    "Images in modes a vision model's preprocessing may not expect",
    Severity.INFO,
    what="Valid images in CMYK, 16-bit, palette-with-transparency or RGBA modes.",
    why="Preprocessing that assumes 8-bit RGB (normalisation constants, 3 channels) silently produces wrong tensors or crashes on a 4th "
    "channel.",
    fix_by_hand="Convert in the dataloader: Image.open(p).convert('RGB'), or re-encode the files once.",
    example="1,204 of 90,000 images are RGBA PNGs and 37 are CMYK JPEGs, in a dataset whose transforms assume 3-channel RGB.",
)

IMG007 = Code(
    "IMG007",
    "Data after the image's end marker",
    Severity.INFO,
    what="Bytes follow the JPEG EOI or PNG IEND marker (an appended archive, a second image, padding).",
    why="Decoders ignore them, but they waste space and can hide content; some strict validators reject the file.",
    fix_by_hand="Re-save the image to drop the trailing bytes.",
    example="logo.jpg has 18,402 bytes after its EOI marker (a ZIP archive appended to the image).",
)

IMG008 = Code(
    "IMG008",
    "Images that could not be checked here",
    Severity.INFO,
    what="No installed decoder reads the format (HEIF without pillow-heif, AVIF without a Pillow built with it, a TIFF compression "
    "the local libtiff lacks), or decoding would need more memory than a worker may hold: unchecked, never called corrupt.",
    why="If the training environment cannot decode them either, they fail there.",
    fix_by_hand="pip install pillow-heif (or the codec the finding names) and run the check again, or convert them to JPEG/PNG.",
    example="A dataset of .heic photos on a host without pillow-heif: each is reported unchecked, never corrupt.",
)

IMG009 = Code(
    "IMG009",
    "Symbolic links in the dataset were not followed",
    Severity.INFO,
    what="Links are reported once and never resolved, so the check (and a quarantine) stays inside the tree it was given.",
    why="A link can point outside the dataset; moving or reading through it would touch files the user did not name.",
    fix_by_hand="Check the link targets yourself, or pass their directories with --images.",
    example="train/cats is a symbolic link to /mnt/other/cats: reported, not followed.",
)

IMG010 = Code(
    "IMG010",
    "macOS AppleDouble files (._*) in the dataset",
    Severity.INFO,
    what="Files named ._something, written by macOS on non-Apple filesystems, hold resource-fork metadata, not images.",
    why="Glob patterns such as *.jpg pick them up and the loader fails on them.",
    fix_by_hand="find DIR -name '._*' -delete (or exclude them in the dataset's file list).",
    example="A dataset copied from a Mac to an exFAT disk holds ._0001.jpg beside every 0001.jpg.",
)

IMG011 = FixableCode[QuarantineParams](
    "IMG011",
    "An image took too long to decode",
    Severity.ERROR,
    what="Decoding the file took longer than the per-file limit (--image-timeout); the worker was stopped.",
    why="A pathological file (huge progressive JPEG, crafted compressed data) stalls a dataloader worker the same way.",
    fix_by_hand="Inspect it by hand; remove or re-encode it.",
    params=QuarantineParams,
    fix_safety=QUARANTINE_SAFETY,
    example="A crafted progressive JPEG takes more than the 10 s per-file limit to decode; the worker was stopped.",
)

IMG012 = Code(
    "IMG012",
    "An image file cannot be read",
    Severity.WARNING,
    what="Opening or reading the file failed (permissions, I/O error).",
    why="The training job will fail on it the same way, or, running as another user, may not.",
    fix_by_hand="Check the file's owner and mode, and the disk (dmesg for I/O errors).",
    example="val/0003.png is mode 0000 (another user extracted the archive): opening it fails with permission denied.",
)

IMG013 = FixableCode[QuarantineParams](
    "IMG013",
    "Damaged pixels the loader reads past",
    Severity.WARNING,
    what="The loader opens and decodes the file, but it is damaged: libjpeg-turbo in strict mode reports corrupt data, a PNG chunk "
    "has a bad CRC or its zlib stream is broken past what the loader reads, or a bitmap header declares what no bitmap has "
    "(30,000 colour planes, a 2 GB image in a 1 KB file, pixels past the palette, RLE runs outside the image).",
    why="Training goes on, on pixels that are partly garbage (gray blocks, shifted rows), and another loader may refuse the file.",
    fix_by_hand="Re-download or re-export it; --quarantine damaged moves these out with the broken ones.",
    params=QuarantineParams,
    fix_safety=DAMAGED_SAFETY,
    example="scan_12.png has a bad CRC in its IDAT chunk at byte 33,417; Pillow decodes it, libpng's strict readers refuse it.",
)

IMG014 = Code(
    "IMG014",
    "The loader warns about an image",
    Severity.WARNING,
    what="The loader reads the file but warns: Pillow's DecompressionBombWarning (more pixels than --max-pixels, less than twice "
    "as many), an APNG it falls back to the default image for, corrupt EXIF, and the like. Never quarantined.",
    why="The warning floods dataloader logs, and what it reports (a 150-megapixel image, the APNG's frames ignored) may not be what "
    "the dataset meant.",
    fix_by_hand="Downscale very large images; re-export the file if the warning points at damage.",
    example="A 92-megapixel PNG (9,600 × 9,600): Pillow warns DecompressionBombWarning and loads it.",
)

IMG015 = Code(
    "IMG015",
    "No images under the dataset given",
    Severity.WARNING,
    what="--images names a directory in which the walk found no file to check (none at all, or only links, AppleDouble files "
    "and the like, each reported on its own).",
    why="A mistyped or unmounted dataset path would otherwise pass as a healthy dataset.",
    fix_by_hand="Check the path (and that the volume holding it is mounted); give the directory that holds the image files.",
    example="--images /data/coco/train2017 on a host where /data is not mounted: the directory is there but empty.",
)

CODES = (IMG001, IMG002, IMG003, IMG004, IMG005, IMG006, IMG007, IMG008, IMG009, IMG010, IMG011, IMG012, IMG013, IMG014, IMG015)
# the verdict a file's finding carries: its most severe reason, and errors before the rest
PRECEDENCE = tuple(c.code for c in (IMG004, IMG002, IMG001, IMG011, IMG013, IMG003, IMG014, IMG005, IMG012, IMG007, IMG008))
# what --fix moves into the quarantine: the loader fails on it (broken), or with --quarantine damaged, also what it reads past
BROKEN: dict[str, FixableCode[QuarantineParams]] = {c.code: c for c in (IMG001, IMG002, IMG004, IMG011)}
DAMAGED: dict[str, FixableCode[QuarantineParams]] = {c.code: c for c in (IMG013, IMG003)}
