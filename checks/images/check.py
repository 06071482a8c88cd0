"""Image datasets: every image judged by the loader that will read it (breaks it: an error, quarantined
by --fix) and for damage that loader reads past (a warning), in parallel, bombs from the header."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decode_doctor.engine import Check, Context, Facts, Finding, FixRef, JSONValue, Needs, Options, option
from decode_doctor.engine.units import amount, whole
from decode_doctor.engine.workers import usable_cpus
from decode_doctor.i18n import N_, Said, _, localized, ngettext, said

from .codes import (
    BROKEN,
    CODES,
    DAMAGED,
    IMG005,
    IMG006,
    IMG008,
    IMG009,
    IMG010,
    IMG012,
    IMG015,
    PRECEDENCE,
    QuarantineParams,
    RenameParams,
)
from .decode import UNUSUAL_MODES, Settings
from .loaders import loader_name
from .scan import decode_all, start_counter
from .walk import iter_images, scoped_images

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
            _(
                "{images:,} images checked under {dataset} in {seconds:.1f} s (peak {rss:,.0f} MiB per worker)",
                images=scan.images, dataset=scan.dataset, seconds=scan.seconds, rss=scan.peak_worker_rss_mib,
            )
            for scan in self.datasets
        ]  # fmt: skip


def default_quarantine(dataset: Path) -> Path:
    return dataset.parent / f"{dataset.name}.quarantine"


class _Progress:
    """Progress lines with a rate and, once the counting walk answers, an ETA; the first after half a second."""

    def __init__(self, ctx: Context, counter: Any):
        self.ctx, self.counter = ctx, counter
        self.done = 0
        self.total: int | None = None
        self.started = self.last = time.monotonic()

    def tick(self, problems: int) -> None:
        self.done += 1
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY_S:
            return
        self.last = now
        if self.total is None and self.counter is not None and self.counter.conn.poll():
            self.total = self.counter.conn.recv()
        rate = self.done / max(now - self.started, 1e-6)
        if self.total:
            left = max(self.total - self.done, 0)
            eta = left / max(rate, 1e-6)
            text = _(
                "{done:,} of {total:,} images, {rate:,.0f}/s, ETA {eta:,.0f} s, {problems} problems",
                done=self.done, total=self.total, rate=rate, eta=eta, problems=problems,
            )  # fmt: skip
        else:
            text = _("{done:,} images, {rate:,.0f}/s, {problems} problems", done=self.done, rate=rate, problems=problems)
        self.ctx.progress(text)


def max_pixels_option(value: str | int) -> int:
    """--max-pixels: a positive number of pixels (ValueError: a usage error)."""
    try:
        number = int(str(value).replace("_", "").replace(",", ""))
    except ValueError:
        raise ValueError(said("{value} is not a whole number of pixels", value=repr(value))) from None
    if number <= 0:
        raise ValueError(said("{number} is not a number of pixels: give a positive limit", number=number))
    return number


@dataclass(frozen=True)
class ImagesOptions(Options):
    max_pixels: int | None = option(
        "--max-pixels",
        f"The loader's pixel limit: it warns above, refuses above twice [default: {DEFAULT_MAX_PIXELS:,}, Pillow's].",
        parse=max_pixels_option,
        metavar="PIXELS",
    )
    loader: tuple[str, ...] = option(
        "--loader",
        "Also judge by this loader (repeatable): torchvision (decode_image) or opencv (imread); Pillow always.",
        multiple=True,
        default=(),
        parse=loader_name,
        metavar="NAME",
    )
    quarantine: str = option(
        "--quarantine",
        "What --fix moves out: broken (the loader fails on it) or damaged (also damaged pixels it reads past) [default: broken].",
        choices=("broken", "damaged"),
        default="broken",
    )
    quarantine_dir: str | None = option(
        "--quarantine-dir", "Where --fix moves broken images [default: DATASET.quarantine beside the dataset]."
    )
    image_timeout: float | None = option(
        "--image-timeout",
        f"Seconds one image may take to decode [default: {FILE_TIMEOUT_S:g}].",
        parse=amount(0.0, 3600.0, N_("seconds")),
        metavar="SECONDS",
    )
    jobs: int | None = option(
        "--jobs", "Decoding processes [default: one per usable CPU].", parse=whole(1, 256, N_("a number of processes")), metavar="N"
    )


class Images(Check):
    name = "images"
    looks_at = (
        "every image under `--images` (repeatable), in parallel worker processes over a streaming walk, judged by the loader that will "
        "read it: Pillow's `Image.open()` then `load()` on every frame with its default settings, and torchvision's `decode_image` or "
        "OpenCV's `imread` with `--loader` (the `torchvision` and `opencv` extras). What breaks the loader is an error (IMG001; not an "
        "image IMG002; a bomb IMG004; a decode past `--image-timeout` IMG011) and `--fix` quarantines it into `DATASET.quarantine/` "
        "(`--quarantine-dir`) with a `manifest.jsonl`. Damage the loader reads past is a warning (IMG013: libjpeg-turbo's strict mode, "
        "PNG CRCs and the whole zlib stream, bitmap header fields no bitmap has; IMG003 no end marker), quarantined only with "
        "`--quarantine damaged`; loader warnings (APNG fallback, Pillow's bomb warning zone) are IMG014, never quarantined. Bombs come "
        "from the header alone before any pixel is inflated — PNG, GIF screen and frame extents, WebP, every TIFF/BigTIFF page, JPEG, "
        "BMP, AVIF/HEIF, TGA, ICO — with the loader's own limits (`--max-pixels`, Pillow's: warns above, refuses above twice). A worker"
        " decodes only what fits a 512 MiB budget (a larger decode is reported unchecked, IMG008, as is a format no installed decoder "
        "reads; the peak is in the facts). One finding per file, every reason in its evidence, one action; lying extensions (rename "
        "fix); modes and trailing data (info). Progress with files/s and an ETA on a terminal; `undo` puts every file back "
        "byte-identical"
    )
    description = N_(
        "every image under --images read by the loader that will read it (and for damage it reads past); bombs from the header"
    )
    codes = CODES
    needs = Needs(inputs=("images",))
    options = ImagesOptions
    timeout_s = 7 * 24 * 3600.0  # a dataset of millions takes hours; --timeout caps it
    facts_type = ImagesFacts
    scoped = True  # after a quarantine, only the files moved are judged again

    def run(self, ctx: Context) -> list[Finding]:
        options = ctx.option(ImagesOptions)
        max_pixels = options.max_pixels or DEFAULT_MAX_PIXELS
        extra = tuple(name for name in dict.fromkeys(options.loader) if name != "pillow")
        settings = Settings(max_pixels, extra)
        file_timeout = options.image_timeout or FILE_TIMEOUT_S
        jobs = options.jobs or usable_cpus()
        quarantine_damaged = options.quarantine == "damaged"
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
        quarantine = Path(ctx.option(ImagesOptions).quarantine_dir or default_quarantine(dataset)).absolute()
        if quarantine == dataset or dataset in quarantine.parents:  # its files would be scanned, moved, scanned again
            why = said(
                "the quarantine directory {quarantine} is inside the dataset {dataset}; choose one outside it",
                quarantine=quarantine,
                dataset=dataset,
            )
            ctx.not_judged(_("the dataset {dataset}", dataset=dataset), localized(why))
            return []
        links: list[str] = []
        appledouble: list[str] = []
        findings: list[Finding] = []
        modes: Counter[str] = Counter()
        mode_files: dict[str, list[str]] = {}
        unchecked: dict[str, Said] = {}
        unreadable: dict[str, Said] = {}
        unlisted: list[tuple[str, str]] = []
        peak_rss = [0]
        scoped = ctx.scope is not None
        counter = None if scoped else start_counter(dataset)
        progress = _Progress(ctx, counter)
        if scoped:
            progress.total = len(ctx.scope or ())

        def on_result(result: dict[str, Any]) -> None:
            progress.tick(len(findings))
            peak_rss[0] = max(peak_rss[0], result.get("worker_rss_kb") or 0)
            if result.get("mode"):
                label = UNUSUAL_MODES[result["mode"]]
                modes[label] += 1
                mode_files.setdefault(label, []).append(result["path"])
            problems = result["problems"]
            if problems and all(problem["code"] == IMG008.code for problem in problems):
                unchecked[result["path"]] = problems[0]["message"]
            elif problems:
                finding = self._file_finding(result, dataset, quarantine, quarantine_damaged)
                findings.append(finding)
                if finding.code == IMG012.code:
                    unreadable[result["path"]] = problems[0]["message"]

        try:
            files = scoped_images(dataset, ctx.scope) if ctx.scope is not None else iter_images(dataset, links, appledouble, unlisted)
            decode_all(files, jobs, settings, file_timeout, on_result)
        finally:
            if counter is not None:
                counter.kill()
        scan = DatasetScan(str(dataset), progress.done, round(time.monotonic() - progress.started, 3), round(peak_rss[0] / 1024, 1))
        scans.append(scan)
        summary: dict[str, JSONValue] = {"dataset": scan.dataset, "images": scan.images, "seconds": scan.seconds}
        self._coverage(ctx, dataset, unreadable, unchecked, unlisted)
        if scoped:  # the re-check after a fix: only the files it touched; what is said of the dataset stands
            return findings
        if scan.images == 0:
            findings.append(
                self.finding(
                    IMG015, _("{dataset}: 0 images under it: nothing was checked.", dataset=dataset), evidence=summary, path=str(dataset)
                )
            )
            if not unlisted:
                ctx.not_judged(_("the dataset {dataset}", dataset=dataset), _("no image file under it"), cause=IMG015.code)
        if modes:
            parts = ", ".join(f"{label} {count}" for label, count in modes.most_common())
            message = _(
                "{dataset}: {count} images in modes preprocessing may not expect ({parts}); convert with Image.open(p).convert('RGB').",
                dataset=dataset, count=sum(modes.values()), parts=parts,
            )  # fmt: skip
            evidence = {**summary, "modes": dict(modes), "examples": {k: v[:20] for k, v in mode_files.items()}}
            findings.append(self.finding(IMG006, message, evidence=evidence))
        if unchecked:
            reasons = Counter(_first_clause(reason.text()) for reason in unchecked.values())
            parts = _(", ").join(_("{why} ({count})", why=why, count=count) for why, count in reasons.most_common(3))
            message = _("{dataset}: {count} images not checked: {parts}.", dataset=dataset, count=len(unchecked), parts=parts)
            examples = {path: reason.english() for path, reason in list(unchecked.items())[:100]}
            findings.append(self.finding(IMG008, message, evidence={**summary, "files": examples}))
        findings.extend(self._skipped_files(dataset, summary, links, appledouble))
        return findings

    def _skipped_files(self, dataset: Path, summary: dict[str, JSONValue], links: list[str], appledouble: list[str]) -> list[Finding]:
        """The findings for what the scan passed over on purpose: links it does not follow, AppleDouble files."""
        skipped: list[Finding] = []
        if links:
            message = ngettext(
                "{dataset}: {count} symbolic link not followed.",
                "{dataset}: {count} symbolic links not followed.",
                len(links),
                dataset=dataset,
            )
            skipped.append(self.finding(IMG009, message, evidence={**summary, "links": links[:100]}))
        if appledouble:
            message = ngettext(
                "{dataset}: {count} AppleDouble ._* file (not images).", "{dataset}: {count} AppleDouble ._* files (not images).",
                len(appledouble), dataset=dataset,
            )  # fmt: skip
            skipped.append(self.finding(IMG010, message, evidence={**summary, "files": appledouble[:100]}))
        return skipped

    @staticmethod
    def _coverage(
        ctx: Context, dataset: Path, unreadable: dict[str, Said], unchecked: dict[str, Said], unlisted: list[tuple[str, str]]
    ) -> None:
        """What under the dataset was given and not judged: files that could not be read or decoded here,
        directories that could not be listed."""
        for files, why, cause in ((unreadable, _("cannot be read"), IMG012), (unchecked, _("not decoded here"), IMG008)):
            if files:
                first, first_reason = next(iter(files.items()))
                what = ngettext("{count:,} image under {dataset}", "{count:,} images under {dataset}", len(files), dataset=dataset)
                ctx.not_judged(
                    what, _("{why} (first: {first}: {reason})", why=why, first=first, reason=first_reason.text()), cause=cause.code
                )
        for directory, reason in unlisted[:20]:
            ctx.not_judged(
                _("the images under {directory}", directory=directory), _("the directory cannot be listed: {reason}", reason=reason)
            )
        if len(unlisted) > 20:
            ctx.not_judged(
                _("{count:,} more directories under {dataset}", count=len(unlisted) - 20, dataset=dataset), _("they cannot be listed")
            )

    def _file_finding(self, result: dict[str, Any], dataset: Path, quarantine: Path, quarantine_damaged: bool) -> Finding:
        """One finding per file: its most severe reason decides the code, and the fix goes with that
        code's own kind (a quarantine for a broken file, a rename for a lying extension) or there is
        none; every reason is in the evidence and the message."""
        path = result["path"]
        problems = sorted(result["problems"], key=lambda p: PRECEDENCE.index(p["code"]) if p["code"] in PRECEDENCE else 99)
        primary = problems[0]
        spec = self.code(primary["code"])
        evidence: dict[str, JSONValue] = {
            "file": path,
            "format": result.get("format") or primary.get("format"),
            "loader": primary.get("loader"),
            "damage": primary["damage"],
            "reasons": [{**{k: p.get(k) for k in ("code", "damage", "loader")}, "message": p["message"].english()} for p in problems],
        }
        others = [p["message"].text() for p in problems[1:] if p["message"] != primary["message"]]
        message = _("{path}: {reason}", path=path, reason=primary["message"].text())
        message += _(" (also: {others})", others=_("; ").join(others[:3])) if others else ""
        quarantined = BROKEN.get(spec.code) or (DAMAGED.get(spec.code) if quarantine_damaged else None)
        if quarantined is not None:
            params = QuarantineParams(
                destination=str(quarantine / Path(path).relative_to(dataset)),
                manifest=str(quarantine / "manifest.jsonl"),
                reason=f"{primary['damage']}: {primary['message'].english()}",  # the manifest's, in English like the evidence
                sha256=result.get("sha256"),
                shown_reason=_("{damage}: {reason}", damage=_(primary["damage"]), reason=primary["message"].text()),
            )
            fix = FixRef(_("quarantine {name}", name=Path(path).name), params)
            return self.finding(quarantined, message, evidence=evidence, path=path, fix=fix)
        if spec is IMG005:
            suffix = FORMAT_SUFFIXES.get(primary.get("format") or "")
            rename = None
            if suffix:
                rename = FixRef(_("rename to {name}", name=suffix), RenameParams(str(Path(path).with_suffix(suffix)), result.get("sha256")))
            return self.finding(IMG005, message, evidence=evidence, path=path, fix=rename)
        return self.finding(spec, message, evidence=evidence, path=path)


def _first_clause(text: str) -> str:
    """A reason's first clause, to group the reasons of many files: up to its first colon or semicolon."""
    cut = min((at for at in (text.find(mark) for mark in (";", ":", "；", "：")) if at >= 0), default=len(text))
    return text[:cut]
