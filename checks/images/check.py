"""Image datasets: every image judged by the loader that will read it (breaks it: an error, quarantined
by --fix) and for damage that loader reads past (a warning), in parallel, bombs from the header."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decode_doctor.engine import Check, Code, Context, Facts, Finding, FixRef, Needs, Option, Severity
from decode_doctor.engine.units import amount, whole
from decode_doctor.engine.workers import usable_cpus

from .decode import UNUSUAL_MODES, Settings
from .loaders import loader_name
from .scan import decode_all, start_counter
from .walk import iter_images

FORMAT_SUFFIXES = {
    "JPEG": ".jpg",
    "PNG": ".png",
    "GIF": ".gif",
    "WEBP": ".webp",
    "BMP": ".bmp",
    "TIFF": ".tif",
    "HEIF": ".heic",
    "AVIF": ".avif",
    "TGA": ".tga",
    "ICO": ".ico",
}
DEFAULT_MAX_PIXELS = 89_478_485  # Pillow's Image.MAX_IMAGE_PIXELS: it warns above, and refuses above twice that
FILE_TIMEOUT_S = 10.0
PROGRESS_EVERY_S = 0.5


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
IMG001 = Code(
    "IMG001",
    "An image that breaks the loader",
    Severity.ERROR,
    what="The loader raises on the file or returns nothing: Pillow's Image.open() then load() on every frame, with its default "
    "settings (LOAD_TRUNCATED_IMAGES off), and torchvision's decode_image or OpenCV's imread when given with --loader. Empty, cut "
    "off, a broken zlib or JPEG stream, a bad header, a damaged later frame or page. The finding names the loader and version.",
    why='A dataloader worker dies on it ("image file is truncated", "cannot identify image file"), and with it the training step '
    "or the batch; with LOAD_TRUNCATED_IMAGES on, it is silently padded with gray instead.",
    fix_by_hand="Re-download or re-export the file from its source; or move it out of the dataset and drop it from the annotation list.",
    fix_safety=QUARANTINE_SAFETY,
)
IMG002 = Code(
    "IMG002",
    "Not an image, saved with an image extension",
    Severity.ERROR,
    what="The bytes are an HTML page, JSON, text or another non-image format, under a name like .jpg: a scraper saved an error page or an "
    "API response.",
    why="Every loader fails on it.",
    fix_by_hand="Fetch the image again, or remove the file and its annotation.",
    fix_safety=QUARANTINE_SAFETY,
)
IMG003 = Code(
    "IMG003",
    "An image without its end marker",
    Severity.WARNING,
    what="A PNG without its IEND chunk, or a JPEG without its EOI marker, whose pixel data is otherwise complete and which the loader "
    "reads. (Pillow refuses a JPEG without EOI: that is IMG001, with this as a reason.)",
    why="Strict decoders (libpng, libjpeg in strict mode, some framework decoders) reject it; it usually means a write was "
    "interrupted right at the end.",
    fix_by_hand="Re-save it: python -c \"from PIL import Image; Image.open('f.png').save('f.png')\" (or re-download).",
    fix_safety=DAMAGED_SAFETY,
)
IMG004 = Code(
    "IMG004",
    "Decompression bomb",
    Severity.ERROR,
    what="The header declares more than twice --max-pixels (the loader's own limit: Pillow's MAX_IMAGE_PIXELS, about 89.5 "
    "megapixels, so 179 MP), where the loader refuses it. Found from the header alone — PNG IHDR, GIF screen and every frame's "
    "extents, WebP, every TIFF page, JPEG SOF, BMP, AVIF/HEIF ispe, TGA, ICO — before any pixel data is inflated.",
    why="Pillow raises DecompressionBombError and the worker dies; a loader without the limit allocates gigabytes.",
    fix_by_hand="Downscale it if it is a real image, or remove it; raise --max-pixels if such sizes are expected.",
    fix_safety=QUARANTINE_SAFETY,
)
IMG005 = Code(
    "IMG005",
    "An image whose extension lies",
    Severity.WARNING,
    what="A valid image whose bytes are one format and whose name says another (PNG bytes named .jpg).",
    why="Pipelines that pick the decoder from the extension (TensorFlow's decode_jpeg, some DALI and webdataset loaders) fail on it, "
    "while Pillow, which sniffs the content, does not.",
    fix_by_hand="Rename it to its real extension (and update the annotation list), or re-encode it.",
    fix_safety="Safe: renames the file to the extension of its real format, in the same directory, if that name is free; journaled and "
    "undoable. Annotation files that name it must be updated by you.",
)
IMG006 = Code(
    "IMG006",
    "Images in modes a vision model's preprocessing may not expect",
    Severity.INFO,
    what="Valid images in CMYK, 16-bit, palette-with-transparency or RGBA modes.",
    why="Preprocessing that assumes 8-bit RGB (normalisation constants, 3 channels) silently produces wrong tensors or crashes on a 4th "
    "channel.",
    fix_by_hand="Convert in the dataloader: Image.open(p).convert('RGB'), or re-encode the files once.",
)
IMG007 = Code(
    "IMG007",
    "Data after the image's end marker",
    Severity.INFO,
    what="Bytes follow the JPEG EOI or PNG IEND marker (an appended archive, a second image, padding).",
    why="Decoders ignore them, but they waste space and can hide content; some strict validators reject the file.",
    fix_by_hand="Re-save the image to drop the trailing bytes.",
)
IMG008 = Code(
    "IMG008",
    "Images that could not be checked here",
    Severity.INFO,
    what="No installed decoder reads the format (HEIF without pillow-heif, AVIF without a Pillow built with it, a TIFF compression "
    "the local libtiff lacks), or decoding would need more memory than a worker may hold: unchecked, never called corrupt.",
    why="If the training environment cannot decode them either, they fail there.",
    fix_by_hand="pip install pillow-heif (or the codec the finding names) and run the check again, or convert them to JPEG/PNG.",
)
IMG009 = Code(
    "IMG009",
    "Symbolic links in the dataset were not followed",
    Severity.INFO,
    what="Links are reported once and never resolved, so the check (and a quarantine) stays inside the tree it was given.",
    why="A link can point outside the dataset; moving or reading through it would touch files the user did not name.",
    fix_by_hand="Check the link targets yourself, or pass their directories with --images.",
)
IMG010 = Code(
    "IMG010",
    "macOS AppleDouble files (._*) in the dataset",
    Severity.INFO,
    what="Files named ._something, written by macOS on non-Apple filesystems, hold resource-fork metadata, not images.",
    why="Glob patterns such as *.jpg pick them up and the loader fails on them.",
    fix_by_hand="find DIR -name '._*' -delete (or exclude them in the dataset's file list).",
)
IMG011 = Code(
    "IMG011",
    "An image took too long to decode",
    Severity.ERROR,
    what="Decoding the file took longer than the per-file limit (--image-timeout); the worker was stopped.",
    why="A pathological file (huge progressive JPEG, crafted compressed data) stalls a dataloader worker the same way.",
    fix_by_hand="Inspect it by hand; remove or re-encode it.",
    fix_safety=QUARANTINE_SAFETY,
)
IMG012 = Code(
    "IMG012",
    "An image file cannot be read",
    Severity.WARNING,
    what="Opening or reading the file failed (permissions, I/O error).",
    why="The training job will fail on it the same way, or, running as another user, may not.",
    fix_by_hand="Check the file's owner and mode, and the disk (dmesg for I/O errors).",
)


IMG013 = Code(
    "IMG013",
    "Damaged pixels the loader reads past",
    Severity.WARNING,
    what="The loader opens and decodes the file, but it is damaged: libjpeg-turbo in strict mode reports corrupt data, a PNG chunk "
    "has a bad CRC or its zlib stream is broken past what the loader reads, or a bitmap header declares what no bitmap has "
    "(30,000 colour planes, a 2 GB image in a 1 KB file, pixels past the palette, RLE runs outside the image).",
    why="Training goes on, on pixels that are partly garbage (gray blocks, shifted rows), and another loader may refuse the file.",
    fix_by_hand="Re-download or re-export it; --quarantine damaged moves these out with the broken ones.",
    fix_safety=DAMAGED_SAFETY,
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
)


IMG015 = Code(
    "IMG015",
    "No images under the dataset given",
    Severity.WARNING,
    what="--images names a directory in which the walk found no file to check (none at all, or only links, AppleDouble files "
    "and the like, each reported on its own).",
    why="A mistyped or unmounted dataset path would otherwise pass as a healthy dataset.",
    fix_by_hand="Check the path (and that the volume holding it is mounted); give the directory that holds the image files.",
)


@dataclass(frozen=True)
class DatasetScan:
    dataset: str
    images: int
    seconds: float
    peak_worker_rss_mib: float = 0.0  # the most memory any decoding worker held


@dataclass(frozen=True)
class ImagesFacts(Facts):
    datasets: list[DatasetScan] = field(default_factory=list)

    def summary(self) -> list[str]:
        return [
            f"{scan.images:,} images checked under {scan.dataset} in {scan.seconds:.1f} s "
            f"(peak {scan.peak_worker_rss_mib:,.0f} MiB per worker)"
            for scan in self.datasets
        ]


def default_quarantine(dataset: Path) -> Path:
    return dataset.parent / f"{dataset.name}.quarantine"


class _Progress:
    """Progress lines with a rate and, once the counting walk answers, an ETA; the first after half a second."""

    def __init__(self, ctx: Context, counter: Any):
        self.ctx, self.counter = ctx, counter
        self.done, self.total = 0, None
        self.started = self.last = time.monotonic()

    def tick(self, problems: int) -> None:
        self.done += 1
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY_S:
            return
        self.last = now
        if self.total is None and self.counter.conn.poll():
            self.total = self.counter.conn.recv()
        rate = self.done / max(now - self.started, 1e-6)
        if self.total:
            left = max(self.total - self.done, 0)
            eta = left / max(rate, 1e-6)
            text = f"{self.done:,} of {self.total:,} images, {rate:,.0f}/s, ETA {eta:,.0f} s, {problems} problems"
        else:
            text = f"{self.done:,} images, {rate:,.0f}/s, {problems} problems"
        self.ctx.progress(text)


def max_pixels_option(value: str) -> int:
    """--max-pixels: a positive number of pixels (ValueError: a usage error)."""
    try:
        number = int(str(value).replace("_", "").replace(",", ""))
    except ValueError:
        raise ValueError(f"{value!r} is not a whole number of pixels") from None
    if number <= 0:
        raise ValueError(f"{number} is not a number of pixels: give a positive limit")
    return number


# the verdict a file's finding carries: its most severe reason, and errors before the rest
PRECEDENCE = ("IMG004", "IMG002", "IMG001", "IMG011", "IMG013", "IMG003", "IMG014", "IMG005", "IMG012", "IMG007", "IMG008")
BROKEN = {"IMG001", "IMG002", "IMG004", "IMG011"}
DAMAGED = {"IMG013", "IMG003"}


class Images(Check):
    name = "images"
    description = "every image under --images read by the loader that will read it (and for damage it reads past); bombs from the header"
    codes = (IMG001, IMG002, IMG003, IMG004, IMG005, IMG006, IMG007, IMG008, IMG009, IMG010, IMG011, IMG012, IMG013, IMG014, IMG015)
    needs = Needs(inputs=("images",))
    options = (
        Option(
            "--max-pixels",
            f"The loader's pixel limit: it warns above, refuses above twice [default: {DEFAULT_MAX_PIXELS:,}, Pillow's].",
            type=max_pixels_option,
            metavar="PIXELS",
        ),
        Option(
            "--loader",
            "Also judge by this loader (repeatable): torchvision (decode_image) or opencv (imread); Pillow always.",
            multiple=True,
            type=loader_name,
            metavar="NAME",
        ),
        Option(
            "--quarantine",
            "What --fix moves out: broken (the loader fails on it) or damaged (also damaged pixels it reads past) [default: broken].",
            choices=("broken", "damaged"),
        ),
        Option("--quarantine-dir", "Where --fix moves broken images [default: DATASET.quarantine beside the dataset]."),
        Option(
            "--image-timeout",
            f"Seconds one image may take to decode [default: {FILE_TIMEOUT_S:g}].",
            type=amount(0.0, 3600.0, "seconds"),
            metavar="SECONDS",
        ),
        Option("--jobs", "Decoding processes [default: one per usable CPU].", type=whole(1, 256, "a number of processes"), metavar="N"),
    )
    timeout_s = 7 * 24 * 3600.0  # a dataset of millions takes hours; --timeout caps it
    facts_type = ImagesFacts

    def run(self, ctx: Context) -> list[Finding]:
        max_pixels = max_pixels_option(ctx.options.get("max_pixels") or DEFAULT_MAX_PIXELS)
        extra = tuple(name for name in dict.fromkeys(ctx.options.get("loader") or ()) if name != "pillow")
        settings = Settings(max_pixels, extra)
        file_timeout = ctx.options.get("image_timeout") or FILE_TIMEOUT_S
        jobs = ctx.options.get("jobs") or usable_cpus()
        quarantine_damaged = ctx.options.get("quarantine") == "damaged"
        findings: list[Finding] = []
        scans: list[DatasetScan] = []
        for dataset in ctx.images:
            findings.extend(self._scan(ctx, Path(dataset), settings, file_timeout, jobs, quarantine_damaged, scans))
        ctx.publish(ImagesFacts(scans))
        return findings

    def _scan(
        self,
        ctx: Context,
        dataset: Path,
        settings: Settings,
        file_timeout: float,
        jobs: int,
        quarantine_damaged: bool,
        scans: list[DatasetScan],
    ) -> list[Finding]:
        quarantine = Path(ctx.options.get("quarantine_dir") or default_quarantine(dataset)).absolute()
        if quarantine == dataset or dataset in quarantine.parents:
            raise ValueError(f"the quarantine directory {quarantine} is inside the dataset {dataset}; choose one outside it")
        links: list[str] = []
        appledouble: list[str] = []
        findings: list[Finding] = []
        modes: Counter[str] = Counter()
        mode_files: dict[str, list[str]] = {}
        unchecked: dict[str, str] = {}
        peak_rss = [0]
        counter = start_counter(dataset)
        progress = _Progress(ctx, counter)

        def on_result(result: dict[str, Any]) -> None:
            progress.tick(len(findings))
            peak_rss[0] = max(peak_rss[0], result.get("worker_rss_kb") or 0)
            if result.get("mode"):
                label = UNUSUAL_MODES[result["mode"]]
                modes[label] += 1
                mode_files.setdefault(label, []).append(result["path"])
            problems = result["problems"]
            if problems and all(problem["code"] == "IMG008" for problem in problems):
                unchecked[result["path"]] = problems[0]["message"]
            elif problems:
                findings.append(self._file_finding(result, dataset, quarantine, quarantine_damaged))

        try:
            decode_all(iter_images(dataset, links, appledouble), jobs, settings, file_timeout, on_result)
        finally:
            counter.kill()
        scan = DatasetScan(str(dataset), progress.done, round(time.monotonic() - progress.started, 3), round(peak_rss[0] / 1024, 1))
        scans.append(scan)
        summary = {"dataset": scan.dataset, "images": scan.images, "seconds": scan.seconds}
        if scan.images == 0:
            findings.append(
                self.finding("IMG015", f"{dataset}: 0 images under it: nothing was checked.", evidence=summary, path=str(dataset))
            )
        if modes:
            parts = ", ".join(f"{label} {count}" for label, count in modes.most_common())
            message = (
                f"{dataset}: {sum(modes.values())} images in modes preprocessing may not expect ({parts}); "
                "convert with Image.open(p).convert('RGB')."
            )
            evidence = {**summary, "modes": dict(modes), "examples": {k: v[:20] for k, v in mode_files.items()}}
            findings.append(self.finding("IMG006", message, evidence=evidence))
        if unchecked:
            reasons = Counter(reason.split(";")[0].split(":")[0] for reason in unchecked.values())
            parts = ", ".join(f"{why} ({count})" for why, count in reasons.most_common(3))
            message = f"{dataset}: {len(unchecked)} images not checked: {parts}."
            examples = dict(list(unchecked.items())[:100])
            findings.append(self.finding("IMG008", message, evidence={**summary, "files": examples}))
        if links:
            message = f"{dataset}: {len(links)} symbolic link{'s' if len(links) != 1 else ''} not followed."
            findings.append(self.finding("IMG009", message, evidence={**summary, "links": links[:100]}))
        if appledouble:
            message = f"{dataset}: {len(appledouble)} AppleDouble ._* file{'s' if len(appledouble) != 1 else ''} (not images)."
            findings.append(self.finding("IMG010", message, evidence={**summary, "files": appledouble[:100]}))
        return findings

    def _file_finding(self, result: dict[str, Any], dataset: Path, quarantine: Path, quarantine_damaged: bool) -> Finding:
        """One finding per file: its most severe reason decides the code and the one action; every
        reason is in the evidence."""
        path = result["path"]
        problems = sorted(result["problems"], key=lambda p: PRECEDENCE.index(p["code"]) if p["code"] in PRECEDENCE else 99)
        primary = problems[0]
        code = primary["code"]
        evidence = {
            "file": path,
            "format": result.get("format") or primary.get("format"),
            "loader": primary.get("loader"),
            "damage": primary["damage"],
            "reasons": [{k: p.get(k) for k in ("code", "damage", "message", "loader")} for p in problems],
        }
        fix = None
        if code in BROKEN or (code in DAMAGED and quarantine_damaged):
            target = quarantine / Path(path).relative_to(dataset)
            params = {
                "action": "quarantine",
                "destination": str(target),
                "manifest": str(quarantine / "manifest.jsonl"),
                "reason": f"{primary['damage']}: {primary['message']}",
                "sha256": result.get("sha256"),
            }
            fix = FixRef(f"quarantine {Path(path).name}", params)
        elif any(p["code"] == "IMG005" for p in problems) and code not in BROKEN:
            renamed = next(p for p in problems if p["code"] == "IMG005")
            real = renamed["message"].split(" data named ")[0]
            suffix = FORMAT_SUFFIXES.get(real)
            if suffix:
                params = {"action": "rename", "destination": str(Path(path).with_suffix(suffix)), "sha256": result.get("sha256")}
                fix = FixRef(f"rename to {suffix}", params)
        others = [p["message"] for p in problems[1:] if p["message"] != primary["message"]]
        message = f"{path}: {primary['message']}" + (f" (also: {'; '.join(others[:3])})" if others else "")
        return self.finding(code, message, evidence=evidence, path=path, fix=fix)
