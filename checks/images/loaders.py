"""The loaders whose verdict counts: what a dataloader will do with a file. Pillow with its default
settings always; torchvision's decode_image and OpenCV's imread when asked for and installed."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any

from decode_doctor.i18n import said

LOADERS = ("pillow", "torchvision", "opencv")
PACKAGES = {"pillow": "PIL", "torchvision": "torchvision", "opencv": "cv2"}
INSTALL = {"torchvision": "pip install torchvision", "opencv": "pip install opencv-python-headless"}


@dataclass
class Verdict:
    loader: str  # its name and version: "Pillow 13.0.0"
    error: str | None = None  # what it raised, or that it returned nothing
    bomb: bool = False  # the error is the loader's own decompression-bomb refusal
    warnings: list[str] = field(default_factory=list)
    format: str | None = None
    mode: str | None = None
    frames: int = 0


def loader_name(value: str) -> str:
    """--loader NAME, checked: a known loader whose package is installed (ValueError: a usage error)."""
    name = value.strip().lower()
    if name not in LOADERS:
        raise ValueError(said("unknown loader {value}: choose from {loaders}", value=repr(value), loaders=", ".join(LOADERS)))
    if importlib.util.find_spec(PACKAGES[name]) is None:
        raise ValueError(said("the {name} loader is not installed here ({install})", name=name, install=INSTALL[name]))
    return name


def version(name: str) -> str:
    if name == "pillow":
        import PIL

        return f"Pillow {PIL.__version__}"
    if name == "torchvision":
        import torchvision  # pyright: ignore[reportMissingImports]

        return f"torchvision {torchvision.__version__}"
    import cv2

    return f"OpenCV {cv2.__version__}"


def pillow(path: str, max_pixels: int, *, pixels: bool = True) -> Verdict:
    """Image.open, then load() on every frame, with Pillow's defaults (LOAD_TRUNCATED_IMAGES off),
    its decompression-bomb limits set to max_pixels. pixels=False stops after open() (the header)."""
    import warnings

    from PIL import Image, ImageSequence

    Image.MAX_IMAGE_PIXELS = max_pixels
    verdict = Verdict(version("pillow"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with Image.open(path) as image:
                verdict.format, verdict.mode = image.format, image.mode
                if image.mode == "P" and "transparency" in image.info:
                    verdict.mode = "P+transparency"
                if pixels:
                    for frame in ImageSequence.Iterator(image):
                        frame.load()
                        verdict.frames += 1
        except Image.DecompressionBombError as exc:
            verdict.error, verdict.bomb = str(exc), True
        except Exception as exc:  # whatever it raises, a dataloader worker dies of it
            where = f" (frame {verdict.frames + 1})" if verdict.frames else ""
            verdict.error = f"{type(exc).__name__}{where}: {exc}"
    verdict.warnings = [f"{w.category.__name__}: {w.message}" for w in caught]
    return verdict


def torchvision(path: str) -> Verdict:
    from torchvision.io import decode_image, read_file  # pyright: ignore[reportMissingImports]

    verdict = Verdict(version("torchvision"))
    try:
        decode_image(read_file(path))
        verdict.frames = 1
    except Exception as exc:
        verdict.error = f"{type(exc).__name__}: {exc}"
    return verdict


def opencv(path: str) -> Verdict:
    import cv2

    verdict = Verdict(version("opencv"))
    try:
        image = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    except Exception as exc:
        verdict.error = f"{type(exc).__name__}: {exc}"
        return verdict
    if image is None:
        verdict.error = "cv2.imread returned None"
    else:
        verdict.frames = 1
    return verdict


def extra(name: str, path: str) -> Verdict:
    return torchvision(path) if name == "torchvision" else opencv(path)


def preload(names: Any) -> None:
    """Import the decoders once, before forking, instead of once in every worker."""
    import simplejpeg  # noqa: F401
    from PIL import Image

    Image.init()
    if "torchvision" in names:
        import torchvision.io  # noqa: F401  # pyright: ignore[reportMissingImports]
    if "opencv" in names:
        import cv2

        try:
            cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)
        except AttributeError:
            pass
