"""Text encodings of model config and tokenizer files: loaders read them as UTF-8, and nothing else."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decode_doctor.engine import Check, Code, Context, Facts, Finding, FixRef, Needs, Option, Severity

LOADER_NAMES = {
    "config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
    "tokenizer.json",
    "vocab.txt",
    "merges.txt",
    "chat_template.jinja",
    "preprocessor_config.json",
    "added_tokens.json",
    "vocab.json",
    "processor_config.json",
    "adapter_config.json",
}
TEXT_SUFFIXES = {".json", ".jsonl", ".yaml", ".yml", ".txt", ".jinja", ".csv", ".tsv", ".ini", ".cfg", ".toml", ".md", ".py"}
WEIGHT_SUFFIXES = {
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".gguf",
    ".onnx",
    ".h5",
    ".msgpack",
    ".ckpt",
    ".npz",
    ".npy",
    ".model",
    ".tflite",
    ".pb",
    ".ot",
}
# A UTF-8 BOM breaks these: json.loads refuses it, and a vocab line or template starts with U+FEFF.
BOM_CHOKES = {".json", ".jsonl", ".txt", ".jinja", ".csv", ".tsv"}
SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".ipynb_checkpoints"}
MAX_ANALYSE = 64 << 20  # above this a non-UTF-8 file is reported, not converted

FIX_SAFETY = (
    "Safe: the file is decoded strictly, re-encoded as UTF-8 without a BOM, line endings kept, and the new "
    "bytes must decode back to exactly the same text before anything is written; written atomically with its "
    "mode and owner; journaled, and `decode-doctor undo` restores the original bytes."
)
ENC001 = Code(
    code="ENC001",
    title="A model text file is not UTF-8 (convertible)",
    severity=Severity.ERROR,
    what="The file is in a legacy encoding (GBK, Big5, Shift_JIS, EUC-KR, cp1252…) or UTF-16/32, and exactly one "
    "reading of its bytes is plausible, so it can be converted without guessing.",
    why="transformers, tokenizers, vLLM and llama.cpp open config and tokenizer files as UTF-8: loading fails with "
    "\"UnicodeDecodeError: 'utf-8' codec can't decode byte 0xd5 in position 4\", usually for files saved on Windows.",
    fix_by_hand="iconv -f GBK -t UTF-8 config.json > config.json.utf8 && mv config.json.utf8 config.json — for this "
    "file only, with the encoding named here; never iconv every *.json (it corrupts files already in UTF-8), and never "
    "read with errors='ignore' (it silently drops characters).",
    example='config.json saved by Notepad in GBK: {"description": "通义千问"} → bytes 0xcd 0xa8 …',
    fix_safety=FIX_SAFETY,
)
ENC002 = Code(
    code="ENC002",
    title="A model text file is not UTF-8, and its encoding cannot be told for sure",
    severity=Severity.ERROR,
    what="Several encodings decode the bytes into plausible text (a few CJK characters in a large ASCII file read "
    "as GBK, Big5 and EUC-JP alike), or none does.",
    why="Loaders fail on it as on any non-UTF-8 file; converting with the wrong encoding would silently turn the "
    "text into other characters, which is worse than failing.",
    fix_by_hand="Open the file in an editor that lets you pick the encoding, see which reading is right, then run "
    "decode-doctor check --model DIR --from-encoding gbk --fix (or convert that one file with iconv).",
)
ENC003 = Code(
    code="ENC003",
    title="A model text file mixes encodings",
    severity=Severity.ERROR,
    what="Some lines are UTF-8 and others are in another encoding, as happens when files are concatenated or "
    "edited with tools that disagree.",
    why="No single conversion is right for the whole file; converting it would corrupt the UTF-8 lines.",
    fix_by_hand="Fix the named lines by hand (re-type or re-export them), then run the check again.",
)
ENC004 = Code(
    code="ENC004",
    title="A model text file ends in the middle of a character",
    severity=Severity.ERROR,
    what="The file decodes cleanly until its last character, whose bytes are incomplete: it was cut off.",
    why="A truncated config or tokenizer file is usually an interrupted download or copy; more than the encoding is wrong.",
    fix_by_hand="Download or copy the file again and compare its size and sha256 with the source.",
)
ENC005 = Code(
    code="ENC005",
    title="A Python file in a legacy encoding declares it in a coding cookie",
    severity=Severity.WARNING,
    what="The .py file is not UTF-8 and says so (# -*- coding: gbk -*-).",
    why="Python reads it correctly thanks to the cookie; converting the bytes without editing the cookie would break "
    "it, so decode-doctor leaves it alone. Tools that read it as plain text (trust_remote_code loaders, linters) may not.",
    fix_by_hand="Convert it and change the cookie to utf-8 in the same edit, or leave it as it is.",
)
ENC006 = Code(
    code="ENC006",
    title="A UTF-8 byte-order mark the loader chokes on",
    severity=Severity.ERROR,
    what="The file starts with the bytes EF BB BF (a UTF-8 BOM), as Windows editors write.",
    why='json.loads rejects it ("Unexpected UTF-8 BOM"), and in vocab, merges or template files the first entry '
    'silently becomes "\\ufeff…", a token that never matches.',
    fix_by_hand="Remove the first three bytes: tail -c +4 file > file.new && mv file.new file.",
    fix_safety="Safe: removes the three BOM bytes only; journaled and undoable.",
)
ENC007 = Code(
    code="ENC007",
    title="A symbolic link was not followed",
    severity=Severity.INFO,
    what="A symbolic link in the model directory: one pointing outside the tree (or to a directory) is never followed; "
    "one pointing inside it is reported once, its target checked at its own path; decode-doctor never writes through a link.",
    why="Links out of the tree could lead the check, and a fix, to files the user did not name.",
    fix_by_hand="Pass the link's target directory with another --model if it should be checked.",
)
ENC008 = Code(
    code="ENC008",
    title="A model text file cannot be read",
    severity=Severity.WARNING,
    what="Opening or reading the file failed (permissions, I/O error).",
    why="If the serving process cannot read it either, loading fails; if it can, this check could not vouch for it.",
    fix_by_hand="Check its owner and mode (ls -l), and that the serving user can read it.",
)
ENC009 = Code(
    code="ENC009",
    title="A text config file holds binary data",
    severity=Severity.WARNING,
    what="A file named like a text config (config.json, vocab.txt…) holds binary data (NUL bytes, or gzip, zip, "
    "pickle, safetensors or GGUF magic).",
    why="Loaders fail on it with a parse error; often a download saved an archive or an error blob under the name.",
    fix_by_hand="Download the file again; if it is an archive, unpack it.",
)
ENC010 = Code(
    code="ENC010",
    title="The encoding given with --from-encoding does not fit the file",
    severity=Severity.ERROR,
    what="Decoded strictly with the encoding you named, the file fails (or no longer parses).",
    why="decode-doctor refuses to convert with an encoding that does not decode every byte: that would lose text.",
    fix_by_hand="Pick another encoding, or fix the file by hand.",
)


@dataclass(frozen=True)
class ScannedTree:
    path: str
    files: int
    bytes: int


@dataclass(frozen=True)
class EncodingsFacts(Facts):
    trees: list[ScannedTree] = field(default_factory=list)

    def summary(self) -> list[str]:
        return [f"{tree.files:,} text files ({tree.bytes:,} bytes) checked under {tree.path}" for tree in self.trees]


@dataclass(frozen=True)
class TextFile:
    path: Path  # the path to report (inside the tree; a link if it is one)
    target: Path  # what to read
    tree: Path
    is_link: bool


def is_text_config(name: str) -> bool:
    lower = name.lower()
    suffix = os.path.splitext(lower)[1]
    return lower in LOADER_NAMES or (suffix in TEXT_SUFFIXES and suffix not in WEIGHT_SUFFIXES)


def tree_root(given: Path) -> Path:
    """The boundary for links: a Hugging Face cache snapshot links into ../../blobs, inside models--*/."""
    parts = given.parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] == "snapshots" and parts[i - 1].startswith(("models--", "datasets--")):
            return Path(*parts[:i])
    return given


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def walk(given: Path, on_link_out: Any) -> Iterator[TextFile]:
    """Text config files under given, streaming; links are followed only when they stay in the tree."""
    given = Path(os.path.abspath(given))
    if given.is_file() or (given.is_symlink() and not given.is_dir()):
        yield TextFile(given, given.resolve(), given.parent, given.is_symlink())
        return
    root = tree_root(given)
    for directory, dirnames, filenames in os.walk(given, followlinks=False):
        base = Path(directory)
        for name in list(dirnames):
            entry = base / name
            if name in SKIP_DIRS:
                dirnames.remove(name)
            elif entry.is_symlink():
                dirnames.remove(name)
                on_link_out(entry, entry.resolve(), "a link to a directory")
        for name in sorted(filenames):
            if not is_text_config(name):
                continue
            entry = base / name
            if entry.is_symlink():
                target = entry.resolve()
                if not _inside(target, root):
                    on_link_out(entry, target, "outside the tree")
                    continue
                yield TextFile(entry, target, given, True)
            else:
                yield TextFile(entry, entry, given, False)


def _read(target: Path) -> bytes:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(target, flags)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(MAX_ANALYSE + 1)


def _utf8_stream_ok(target: Path) -> bool:
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        with open(target, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                decoder.decode(block)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


class Encodings(Check):
    name = "encodings"
    description = "every config and tokenizer file under --model is clean UTF-8 (convertible ones are fixed)"
    codes = (ENC001, ENC002, ENC003, ENC004, ENC005, ENC006, ENC007, ENC008, ENC009, ENC010)
    needs = Needs(inputs=("models",))
    options = (
        Option("--from-encoding", "Source encoding for non-UTF-8 files the tool would not decide on its own (still decoded strictly)."),
    )
    timeout_s = 120.0
    facts_type = EncodingsFacts

    def run(self, ctx: Context) -> list[Finding]:
        findings: list[Finding] = []
        seen: set[Path] = set()
        trees: list[ScannedTree] = []
        from_encoding = ctx.options.get("from_encoding")

        def link_out(link: Path, target: Path, why: str) -> None:
            findings.append(
                self.finding(
                    "ENC007",
                    f"{link}: a symbolic link to {target} ({why}); not followed.",
                    evidence={"link": str(link), "target": str(target)},
                    path=str(link),
                )
            )

        for given in ctx.models:
            links: list[TextFile] = []
            counted = [0, 0]  # files, bytes
            for item in walk(Path(given), link_out):
                if item.is_link:  # after the regular files, so a fix is offered on the real path
                    links.append(item)
                    continue
                seen.add(item.target.resolve())
                ctx.note_file(item.target)
                findings.extend(self._judge(item, from_encoding, counted))
            for item in links:
                real = item.target.resolve()
                if real in seen:
                    findings.append(
                        self.finding(
                            "ENC007",
                            f"{item.path}: a symbolic link to {real}, which is checked at its own path; links are never written through.",
                            evidence={"link": str(item.path), "target": str(real)},
                            path=str(item.path),
                        )
                    )
                    continue
                seen.add(real)  # a target outside the walked folders but inside the tree (a Hugging Face cache blob)
                ctx.note_file(item.target)
                findings.extend(self._judge(item, from_encoding, counted))
            trees.append(ScannedTree(str(given), counted[0], counted[1]))
        ctx.publish(EncodingsFacts(trees))
        return findings

    def _judge(self, item: TextFile, from_encoding: str | None, counted: list[int]) -> list[Finding]:
        from .textenc import decide

        path, suffix = str(item.path), item.path.suffix.lower()
        try:
            data = _read(item.target)
        except OSError as exc:
            return [self.finding("ENC008", f"{path}: cannot read it: {exc.strerror or exc}", evidence={"errno": exc.errno}, path=path)]
        counted[0] += 1
        counted[1] += len(data)
        if len(data) > MAX_ANALYSE:
            if _utf8_stream_ok(item.target):
                return []
            return [
                self.finding(
                    "ENC002",
                    f"{path}: not UTF-8, and at over {MAX_ANALYSE >> 20} MiB too large to analyse; convert it by hand",
                    evidence={"size": item.target.stat().st_size},
                    path=path,
                )
            ]
        verdict = decide(data, suffix, from_encoding)
        evidence: dict[str, Any] = {
            "file": path,
            "size": len(data),
            "encoding": verdict.encoding,
            "candidates": verdict.candidates,
            "first_bad_offset": verdict.bad_offset,
            "first_bad_line": verdict.bad_line,
            "preview": verdict.preview,
        }
        if item.is_link:
            evidence["link_target"] = str(item.target)
        where = f" at byte {verdict.bad_offset} (line {verdict.bad_line})" if verdict.bad_offset is not None else ""
        sha = hashlib.sha256(data).hexdigest()
        if verdict.status in ("utf-8", "ascii"):
            if verdict.bom == "utf-8-sig" and suffix in BOM_CHOKES:
                fix = None if item.is_link else FixRef(f"remove the UTF-8 BOM from {item.path.name}", {"sha256": sha, "drop_bom": True})
                return [
                    self.finding(
                        "ENC006",
                        f"{path}: starts with a UTF-8 byte-order mark, which {suffix} loaders choke on.",
                        evidence=evidence,
                        path=path,
                        fix=fix,
                    )
                ]
            return []
        if verdict.status == "binary":
            if item.path.name.lower() in LOADER_NAMES or suffix in (".json", ".jsonl", ".txt", ".jinja"):
                return [
                    self.finding(
                        "ENC009", f"{path}: named like a text file but holds binary data ({verdict.reason}).", evidence=evidence, path=path
                    )
                ]
            return []
        severity = Severity.ERROR if item.path.name.lower() in LOADER_NAMES or suffix in (".json", ".jsonl", ".jinja") else Severity.WARNING
        if verdict.status == "convert":
            name = verdict.encoding.upper()
            shown = f" «{verdict.preview}»" if verdict.preview else ""
            fix = None
            if not item.is_link:
                params = {"sha256": sha, "encoding": verdict.encoding}
                fix = FixRef(f"convert {item.path.name} from {verdict.encoding} to UTF-8", params)
            note = " (a symbolic link: convert its target)" if item.is_link else ""
            message = f"{path}: {name}, not UTF-8 — loaders fail{where}{shown}; {verdict.reason}.{note}"
            return [self.finding("ENC001", message, evidence=evidence, path=path, fix=fix, severity=severity)]
        if verdict.status == "mixed":
            lines = "; ".join(
                f"{enc}: lines {', '.join(map(str, nums[:8]))}{'…' if len(nums) > 8 else ''}" for enc, nums in verdict.mixed_lines.items()
            )
            evidence["lines"] = verdict.mixed_lines
            return [
                self.finding(
                    "ENC003", f"{path}: mixes encodings ({lines}); not converted.", evidence=evidence, path=path, severity=severity
                )
            ]
        if verdict.status == "truncated":
            return [
                self.finding("ENC004", f"{path}: {verdict.reason}{where}; not converted.", evidence=evidence, path=path, severity=severity)
            ]
        if verdict.status == "cookie":
            return [self.finding("ENC005", f"{path}: not UTF-8 and {verdict.reason}; left as it is.", evidence=evidence, path=path)]
        if from_encoding and verdict.encoding == from_encoding:
            return [self.finding("ENC010", f"{path}: {verdict.reason}; not converted.", evidence=evidence, path=path)]
        return [self.finding("ENC002", f"{path}: not UTF-8{where}; {verdict.reason}.", evidence=evidence, path=path, severity=severity)]
