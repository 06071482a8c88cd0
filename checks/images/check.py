"""Image datasets: every image is decoded in full, in parallel, and every one that will fail is found."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decode_doctor.engine import Check, Code, Context, Facts, Finding, FixRef, Needs, Option, Severity
from decode_doctor.engine.workers import usable_cpus

from .decode import UNUSUAL_MODES
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
}
DEFAULT_MAX_PIXELS = 89_478_485  # Pillow's Image.MAX_IMAGE_PIXELS: 1024 × 1024 × 1024 // 4 // 3
FILE_TIMEOUT_S = 10.0
PROGRESS_EVERY_S = 0.5


QUARANTINE_SAFETY = (
    "Safe: the file is moved (never copied and deleted on one filesystem; across filesystems copied, fsynced and "
    "verified by sha256 before the original is removed) into the quarantine directory under its relative path, "
    "and recorded in the quarantine's manifest.jsonl (original path, size, sha256, reason, time); the move is "
    "journaled and `decode-doctor undo` puts every file back byte-identical."
)
IMG001 = Code(
    "IMG001",
    "An image that will fail to decode",
    Severity.ERROR,
    what='The file is damaged: empty, cut off, corrupted compressed data (libjpeg\'s "Corrupt JPEG data" warnings included), a PNG chunk '
    "with a bad CRC or a broken zlib stream, a bad header, a damaged later frame or page, a bad TIFF directory offset or WebP RIFF "
    "size.",
    why='Training and multimodal inference crash on it ("image decode failed"), or worse, decode garbage pixels silently: Pillow\'s '
    "verify() misses truncation, load() ignores libjpeg's warnings, and LOAD_TRUNCATED_IMAGES hides truncation entirely.",
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
    what="A JPEG without its EOI marker, or a PNG without its IEND chunk, whose pixel data is otherwise complete.",
    why="Most decoders show the image, but strict ones (libjpeg in strict mode, some framework decoders) reject it; it usually means a "
    "write was interrupted right at the end. decode-doctor does not quarantine it: nothing is lost from the pixels.",
    fix_by_hand="Re-save it: python -c \"from PIL import Image; Image.open('f.jpg').save('f.jpg', quality=95)\" (or re-download).",
)
IMG004 = Code(
    "IMG004",
    "Decompression bomb",
    Severity.ERROR,
    what="The header declares more pixels than --max-pixels (Pillow's default, about 89.5 megapixels): decoding it would allocate "
    "gigabytes. Found from the header alone, without decoding.",
    why="Loaders either refuse it (Pillow's DecompressionBombError) or run out of memory; either way the dataloader worker dies.",
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
    "Images in a format that cannot be checked here",
    Severity.INFO,
    what="HEIC/HEIF or AVIF images, with no decoder plugin installed (pillow-heif, pillow-avif-plugin): they were not checked.",
    why="If the training environment cannot decode them either, they fail there.",
    fix_by_hand="pip install pillow-heif (and pillow-avif-plugin) and run the check again, or convert them to JPEG/PNG.",
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


@dataclass(frozen=True)
class DatasetScan:
    dataset: str
    images: int
    seconds: float


@dataclass(frozen=True)
class ImagesFacts(Facts):
    datasets: list[DatasetScan] = field(default_factory=list)

    def summary(self) -> list[str]:
        return [f"{scan.images:,} images decoded under {scan.dataset} in {scan.seconds:.1f} s" for scan in self.datasets]


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


class Images(Check):
    name = "images"
    description = "every image under --images decodes in full (JPEG in libjpeg's strict mode, every frame and page)"
    codes = (IMG001, IMG002, IMG003, IMG004, IMG005, IMG006, IMG007, IMG008, IMG009, IMG010, IMG011, IMG012)
    needs = Needs(inputs=("images",))
    options = (
        Option(
            "--max-pixels", f"Images declaring more pixels are decompression bombs [default: {DEFAULT_MAX_PIXELS:,}, Pillow's].", type=int
        ),
        Option("--quarantine-dir", "Where --fix moves broken images [default: DATASET.quarantine beside the dataset]."),
        Option("--image-timeout", f"Seconds one image may take to decode [default: {FILE_TIMEOUT_S:g}].", type=float),
        Option("--jobs", "Decoding processes [default: one per usable CPU].", type=int),
    )
    timeout_s = 7 * 24 * 3600.0  # a dataset of millions takes hours; --timeout caps it
    facts_type = ImagesFacts

    def run(self, ctx: Context) -> list[Finding]:
        max_pixels = ctx.options.get("max_pixels") or DEFAULT_MAX_PIXELS
        file_timeout = ctx.options.get("image_timeout") or FILE_TIMEOUT_S
        jobs = ctx.options.get("jobs") or usable_cpus()
        findings: list[Finding] = []
        scans: list[DatasetScan] = []
        for dataset in ctx.images:
            findings.extend(self._scan(ctx, Path(dataset), max_pixels, file_timeout, jobs, scans))
        ctx.publish(ImagesFacts(scans))
        return findings

    def _scan(
        self, ctx: Context, dataset: Path, max_pixels: int, file_timeout: float, jobs: int, scans: list[DatasetScan]
    ) -> list[Finding]:
        quarantine = Path(ctx.options.get("quarantine_dir") or default_quarantine(dataset)).absolute()
        if quarantine == dataset or dataset in quarantine.parents:
            raise ValueError(f"the quarantine directory {quarantine} is inside the dataset {dataset}; choose one outside it")
        links: list[str] = []
        appledouble: list[str] = []
        findings: list[Finding] = []
        modes: Counter[str] = Counter()
        mode_files: dict[str, list[str]] = {}
        unsupported: list[str] = []
        counter = start_counter(dataset)
        progress = _Progress(ctx, counter)

        def on_result(result: dict[str, Any]) -> None:
            progress.tick(len(findings))
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
            counter.kill()
        scan = DatasetScan(str(dataset), progress.done, round(time.monotonic() - progress.started, 3))
        scans.append(scan)
        summary = {"dataset": scan.dataset, "images": scan.images, "seconds": scan.seconds}
        if modes:
            parts = ", ".join(f"{label} {count}" for label, count in modes.most_common())
            message = (
                f"{dataset}: {sum(modes.values())} images in modes preprocessing may not expect ({parts}); "
                "convert with Image.open(p).convert('RGB')."
            )
            evidence = {**summary, "modes": dict(modes), "examples": {k: v[:20] for k, v in mode_files.items()}}
            findings.append(self.finding("IMG006", message, evidence=evidence))
        if unsupported:
            message = f"{dataset}: {len(unsupported)} HEIC/AVIF images not checked (no decoder plugin)."
            findings.append(self.finding("IMG008", message, evidence={**summary, "files": unsupported[:100]}))
        if links:
            message = f"{dataset}: {len(links)} symbolic links not followed."
            findings.append(self.finding("IMG009", message, evidence={**summary, "links": links[:100]}))
        if appledouble:
            message = f"{dataset}: {len(appledouble)} AppleDouble ._* files (not images)."
            findings.append(self.finding("IMG010", message, evidence={**summary, "files": appledouble[:100]}))
        return findings

    def _finding(self, problem: dict[str, Any], path: str, sha256: str | None, dataset: Path, quarantine: Path) -> Finding:
        code = problem["code"]
        evidence = {"file": path, "format": problem.get("format"), "damage": problem["damage"], "decoder_message": problem["message"]}
        fix = None
        if code in ("IMG001", "IMG002", "IMG004", "IMG011"):
            target = quarantine / Path(path).relative_to(dataset)
            params = {
                "action": "quarantine",
                "destination": str(target),
                "manifest": str(quarantine / "manifest.jsonl"),
                "reason": f"{problem['damage']}: {problem['message']}",
                "sha256": sha256,
            }
            fix = FixRef(f"quarantine {Path(path).name}", params)
        elif code == "IMG005":
            suffix = FORMAT_SUFFIXES[problem["format"]]
            params = {"action": "rename", "destination": str(Path(path).with_suffix(suffix)), "sha256": sha256}
            fix = FixRef(f"rename to {suffix}", params)
        return self.finding(code, f"{path}: {problem['message']}", evidence=evidence, path=path, fix=fix)
