"""Text encodings of model config and tokenizer files: loaders read them as UTF-8, and nothing else.

The check itself: its run over each --model tree, the per-file judgement (a verdict of textenc.py
into findings), and the second look that decides a model directory's undecided files with its
confident ones (siblings.py). Which files are text and how they are read: files.py; the option and
the facts: options.py; the model directories of a tree: repositories.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from pathlib import Path
from typing import Any

from decode_doctor.engine import Check, Context, Finding, FixRef, Needs, Severity
from decode_doctor.i18n import N_, _, localized, os_reason, said

from .codes import (
    CODES,
    ENC001,
    ENC002,
    ENC003,
    ENC004,
    ENC005,
    ENC006,
    ENC007,
    ENC008,
    ENC009,
    ENC010,
    ENC011,
    ENC012,
    ConvertParams,
    DropBomParams,
)
from .files import LOADER_NAMES, MAX_ANALYSE, TextFile, read_bounded, utf8_stream_ok, walk
from .options import EncodingsFacts, EncodingsOptions, KeptBom, ScannedTree, encoding_choice
from .repositories import Repositories, Repository

# A UTF-8 BOM breaks these: json.loads refuses it, and a vocab line or template starts with U+FEFF.
BOM_CHOKES = {".json", ".jsonl", ".txt", ".jinja", ".csv", ".tsv", ".toml"}  # tomllib: "Invalid statement"

# why a UTF-8 byte-order mark is left alone, by suffix (BOM_CHOKES are the ones whose loaders fail on it)
BOM_READERS = {
    ".md": N_("Markdown renderers (CommonMark, GitHub) skip it"),
    ".yaml": N_("PyYAML reads it as a byte-order mark"),
    ".yml": N_("PyYAML reads it as a byte-order mark"),
    ".py": N_("Python takes it as the file's UTF-8 declaration"),
    ".html": N_("browsers take it as the page's encoding"),
    ".xml": N_("XML parsers take it as the document's encoding"),
}


class Encodings(Check):
    name = "encodings"
    looks_at = (
        "every config/tokenizer/template/text file under `--model` (recursive: .json, .txt, .md, .yaml, .toml, .csv, .xml, .html, .srt,"
        " .vtt…; never weights such as .gguf, .safetensors, .bin, tokenizer.model) is clean UTF-8. The whole file is read in every "
        "legacy encoding a model repository holds (ISO-8859-1…16, windows-1250…1258, KOI8-R/U, cp866, Mac, GBK/GB18030, Big5, "
        "Shift_JIS/EUC-JP/ISO-2022-JP, EUC-KR/Johab, TIS-620, UTF-16/32 with or without a BOM, CJK-only UTF-16 from its even-offset "
        "line ends); a reading is converted only when "
        "chardet's language statistics rate it far likelier than every other reading on the words where they differ (and structured "
        'files still parse); where those statistics cannot tell two readings apart (one letter: "Modèle" against "Modčle"), the '
        "words they make decide: with the `words` extra (wordfreq's lexicons, `pip install 'decode-doctor[words]'`) a reading whose "
        "differing words are frequent words of its language against one whose words are in no lexicon of its languages is converted, "
        'and the finding names the words and their frequencies ("«Modèle»: French, Zipf 5.0; «Modčle»: not a word in Czech, Slovak, '
        'Slovenian"); two real words stay refused, and without the extra the refusal names it. Otherwise the finding shows the '
        'readings side by side ("gbk (Chinese): 你好 | tis_620 (Thai): ฤใบร") and the'
        " command that decides: `--from-encoding PATH=ENC` (repeatable); a bare `--from-encoding ENC` applies only to undecided files "
        "and never overrides a file that reads as another encoding. A file too short to decide alone (a two-word `classes.txt`, a "
        "config whose only non-ASCII text is a path, a vocab with one non-ASCII line, a JSONL, YAML or TOML file whose non-ASCII text "
        "is in its values) is decided with the files of its model directory (the nearest directory above it holding config.json or a "
        "tokenizer file, else its own directory: under `/models` one model's files never vote on another's) that their own evidence "
        'decided confidently (two at least, agreeing): "decided with the evidence of 3 sibling file(s) of zh-chat/ (…)"; never against '
        "its own bytes, never between two readings in one script, never to a reading with a misshapen word, a letter the siblings' "
        "language does not use or an uncommon CJK character, never when a key or an id reads differently; otherwise the refusal says "
        "why and which bytes are undecided. Mixed, truncated, coding-cookie, binary, unreadable files and links out of the tree are "
        "reported, never converted; UTF-8 BOMs are dropped where loaders choke on them (.json, .toml, .txt…) and left alone, with "
        "the reason in the facts, where readers accept them (README.md, YAML)"
    )
    description = N_("every config and tokenizer file under --model is clean UTF-8 (convertible ones are fixed)")
    codes = CODES
    needs = Needs(inputs=("models",))
    options = EncodingsOptions
    timeout_s = 120.0
    facts_type = EncodingsFacts
    _repositories: Repositories | None = None  # the --model tree being judged (run): its model directories
    _kept: list[KeptBom]  # files with a UTF-8 BOM their readers accept (run)
    scoped = True  # after a conversion, only the files written are judged again

    def run(self, ctx: Context) -> list[Finding]:
        findings: list[Finding] = []
        self._kept = []
        seen: set[Path] = set()
        trees: list[ScannedTree] = []
        given_choices = ctx.option(EncodingsOptions).from_encoding
        choices = [encoding_choice(c) for c in ((given_choices,) if isinstance(given_choices, str) else given_choices)]
        for_all = next((c.encoding for c in reversed(choices) if c.path is None), None)
        for_path = {c.path: c.encoding for c in choices if c.path is not None}
        used: set[str] = set()

        def stated_for(item: TextFile) -> str | None:
            real = os.path.realpath(item.path)
            if real in for_path:
                used.add(real)
                return for_path[real]
            return for_all

        def link_out(link: Path, target: Path, why: str) -> None:
            ctx.not_judged(str(link), _("a symbolic link to {target} ({why}), not followed", target=target, why=why), cause=ENC007.code)
            findings.append(
                self.finding(
                    ENC007,
                    _("{link}: a symbolic link to {target} ({why}); not followed.", link=link, target=target, why=why),
                    evidence={"link": str(link), "target": str(target)},
                    path=str(link),
                )
            )

        for given in ctx.models:
            links: list[TextFile] = []
            counted = [0, 0]  # files, bytes
            self._repositories = Repositories(Path(os.path.abspath(given)), KEEP_FILE_BYTES, KEEP_TREE_BYTES)
            for item in walk(Path(given), link_out):
                if ctx.scope is not None and item.path not in ctx.scope:
                    continue  # the re-check after a fix: only the files it wrote
                if item.is_link:  # after the regular files, so a fix is offered on the real path
                    links.append(item)
                    continue
                seen.add(item.target.resolve())
                ctx.note_file(item.target)
                findings.extend(self._judged(ctx, item, Path(given), stated_for(item), counted))
            for item in links:
                real = item.target.resolve()
                if real in seen:
                    findings.append(
                        self.finding(
                            ENC007,
                            _(
                                "{link}: a symbolic link to {target}, which is checked at its own path; links are never written through.",
                                link=item.path,
                                target=real,
                            ),
                            evidence={"link": str(item.path), "target": str(real)},
                            path=str(item.path),
                        )
                    )
                    continue
                seen.add(real)  # a target outside the walked folders but inside the tree (a Hugging Face cache blob)
                ctx.note_file(item.target)
                findings.extend(self._judged(ctx, item, Path(given), stated_for(item), counted))
            findings = self._with_siblings(findings, Path(given))
            trees.append(ScannedTree(str(given), counted[0], counted[1]))
            if counted[0] == 0 and ctx.scope is None:
                message = _("{path}: 0 text files under it: no encoding was checked.", path=given)
                ctx.not_judged(str(given), _("no text file under it"), cause=ENC012.code)
                findings.append(self.finding(ENC012, message, evidence={"model": str(given), "files": 0}, path=str(given)))
        for path, encoding in for_path.items():
            if path not in used and ctx.scope is None:
                message = _(
                    "--from-encoding {path}={encoding}: not among the text files checked under --model; not applied.",
                    path=path,
                    encoding=encoding,
                )
                findings.append(self.finding(ENC011, message, evidence={"path": path, "encoding": encoding}, path=path))
        ctx.publish(EncodingsFacts(trees, self._kept))
        return findings

    def _with_siblings(self, findings: list[Finding], given: Path) -> list[Finding]:
        """The files a model directory could not decide alone, decided again with the files of the
        same directory (the nearest enclosing one holding a config or tokenizer file, else the file's
        own directory) that their own evidence decided confidently; one model's files never vote on
        another's. A file that still cannot be decided stays refused, and says why."""
        repositories, self._repositories = self._repositories, None
        for tree in repositories.trees.values() if repositories else ():
            findings = self._with_repository(findings, given, tree, repositories.shown(tree.directory) if repositories else "")
        return findings

    def _with_repository(self, findings: list[Finding], given: Path, tree: Repository, shown: str) -> list[Finding]:
        """One model directory's second look (see _with_siblings). Files are read again here, one at a
        time: the directory's bytes are never all held."""
        from .readings import family_of
        from .siblings import SIBLINGS_NEEDED, Sibling, decide_with_siblings

        if not tree.confident:
            return findings
        ranked = sorted(tree.confident.items(), key=lambda kv: -kv[1])
        family, count = ranked[0]
        runner_up = ranked[1][1] if len(ranked) > 1 else 0
        if count < SIBLINGS_NEEDED or count <= 2 * runner_up:
            return findings  # no repository voice: too few files decided, or files that disagree
        read: list[Sibling] = []
        for item, encoding in tree.voices[family]:
            try:
                sibling = Sibling.of(item.path.name, read_bounded(item.target), encoding)
            except OSError:
                continue
            if sibling is not None:
                read.append(sibling)
        if len(read) < SIBLINGS_NEEDED:
            return findings
        names = ", ".join(s.name for s in read[:3]) + (_(" and {count} more", count=count - 3) if count > 3 else "")
        voice = _(
            "{count} sibling file(s) of {repository} read confidently as {family} ({names})",
            count=count, repository=shown, family=family, names=names,
        )  # fmt: skip
        replaced: dict[int, list[Finding]] = {}
        # a file its own evidence decided narrowly in another family contradicts the repository: refused
        for item, encoding, language, margin, finding in tree.narrow:
            if family_of(encoding) != family:
                message = _(
                    "{path}: reads as {encoding} ({language}) by only {margin:.0f} bits, against {voice}; not converted. "
                    "Decide with: {command}",
                    path=item.path, encoding=encoding, language=_(language), margin=margin, voice=voice,
                    command=decide_command(given, item.path, [encoding, family]),
                )  # fmt: skip
                evidence = {**finding.evidence, "siblings": family, "repository": str(tree.directory), "decided_alone": encoding}
                replaced[id(finding)] = [self.finding(ENC002, message, evidence=evidence, path=str(item.path), severity=finding.severity)]
        for item, refusal, kept in tree.pending:
            try:
                data = kept[0] if kept else read_bounded(item.target)
            except OSError:
                continue  # its refusal stands as it was
            judged = decide_with_siblings(data, item.path.suffix.lower(), read, kept[1] if kept else None, shown)
            if judged.verdict is not None:
                replaced[id(refusal)] = [
                    dataclasses.replace(found, evidence={**found.evidence, "repository": str(tree.directory)})
                    for found in self._findings(item, given, None, data, judged.verdict)
                ]
                continue
            message = _(
                "{refusal}. The {voice} do not decide it: {why}.", refusal=refusal.message.rstrip(".。"), voice=voice, why=judged.why.text()
            )
            undecided = _undecided_bytes(data)
            if undecided:
                message += _(" Undecided bytes: {undecided}.", undecided=undecided)
            evidence = {
                **refusal.evidence, "siblings": family, "repository": str(tree.directory), "siblings_why_not": judged.why.english()
            }  # fmt: skip
            replaced[id(refusal)] = [dataclasses.replace(refusal, message=message, evidence=evidence)]
        return [new for finding in findings for new in replaced.get(id(finding), [finding])]

    def _judged(self, ctx: Context, item: TextFile, given: Path, stated: str | None, counted: list[int]) -> list[Finding]:
        """The file's findings; one it could not read is also said to be not judged."""
        found = self._judge(item, given, stated, counted)
        for finding in found:
            if finding.code == ENC008.code:
                ctx.not_judged(str(item.path), _("cannot read it: {why}", why=localized(str(finding.evidence["why"]))), cause=ENC008.code)
        return found

    def _judge(self, item: TextFile, given: Path, stated: str | None, counted: list[int]) -> list[Finding]:
        from .sniff import sniff_binary
        from .textenc import decide

        path, suffix = str(item.path), item.path.suffix.lower()
        try:
            data = read_bounded(item.target)
        except OSError as exc:
            return [
                self.finding(
                    ENC008,
                    _("{path}: cannot read it: {why}", path=path, why=localized(os_reason(exc))),
                    evidence={"errno": exc.errno, "why": str(os_reason(exc))},
                    path=path,
                )
            ]
        counted[0] += 1
        counted[1] += len(data)
        if len(data) > MAX_ANALYSE:
            if sniff_binary(data[:4096]) or utf8_stream_ok(item.target):
                return []
            message = _(
                "{path}: not UTF-8, and at over {limit} MiB larger than decode-doctor reads to decide an encoding; not converted.",
                path=path, limit=MAX_ANALYSE >> 20,
            )  # fmt: skip
            return [self.finding(ENC002, message, evidence={"size": item.target.stat().st_size}, path=path)]
        verdict = decide(data, suffix, stated)
        found = self._findings(item, given, stated, data, verdict)
        repositories = self._repositories
        if repositories is not None and not stated:
            repositories.of(item.path).note(item, data, verdict, found)
        return found

    def _utf8_findings(self, item: TextFile, verdict: Any, evidence: dict[str, Any], sha: str) -> list[Finding]:
        path, suffix = str(item.path), item.path.suffix.lower()
        if verdict.bom == "utf-8-sig" and suffix in BOM_CHOKES:
            fix = None if item.is_link else FixRef(_("remove the UTF-8 BOM from {name}", name=item.path.name), DropBomParams(sha))
            return [
                self.finding(
                    ENC006,
                    _("{path}: starts with a UTF-8 byte-order mark, which {suffix} loaders choke on.", path=path, suffix=suffix),
                    evidence=evidence,
                    path=path,
                    fix=fix,
                )
            ]
        if verdict.bom == "utf-8-sig":
            if suffix in BOM_READERS:  # said(): English in the facts and JSON, the user's language where shown
                why = said(BOM_READERS[suffix])
            elif suffix:
                why = said("no {suffix} loader decode-doctor knows fails on it", suffix=suffix)
            else:
                why = said("no loader of extension-less files decode-doctor knows fails on it")
            self._kept.append(KeptBom(path, why))
            evidence["bom_kept"] = why
        return []

    def _findings(self, item: TextFile, given: Path, stated: str | None, data: bytes, verdict: Any) -> list[Finding]:
        from .textenc import Status

        path, suffix = str(item.path), item.path.suffix.lower()
        evidence: dict[str, Any] = {
            "file": path,
            "size": len(data),
            "encoding": verdict.encoding,
            "language": verdict.language,
            "readings": [{"encoding": r.encoding, "language": r.language, "words": r.words} for r in verdict.readings],
            "first_bad_offset": verdict.bad_offset,
            "first_bad_line": verdict.bad_line,
            "preview": verdict.preview,
        }
        if verdict.words is not None:
            evidence["words"] = verdict.words
        if stated:
            evidence["from_encoding"] = stated
        if item.is_link:
            evidence["link_target"] = str(item.target)
        if verdict.bad_offset is None:
            where = ""
        elif verdict.bad_line is None:  # a UTF-16 text: its lines are not counted in bytes
            where = _(" at byte {offset}", offset=verdict.bad_offset)
        else:
            where = _(" at byte {offset} (line {line})", offset=verdict.bad_offset, line=verdict.bad_line)
        sha = hashlib.sha256(data).hexdigest()
        if verdict.status.is_utf8:
            return self._utf8_findings(item, verdict, evidence, sha)
        if verdict.status == Status.BINARY:
            if item.path.name.lower() in LOADER_NAMES or suffix in (".json", ".jsonl", ".txt", ".jinja"):
                return [
                    self.finding(
                        ENC009,
                        _("{path}: named like a text file but holds binary data ({why}).", path=path, why=verdict.reason),
                        evidence=evidence,
                        path=path,
                    )
                ]
            return []
        severity = Severity.ERROR if item.path.name.lower() in LOADER_NAMES or suffix in (".json", ".jsonl", ".jinja") else Severity.WARNING
        if verdict.status == Status.CONVERT and verdict.encoding:
            shown = _(" «{preview}»", preview=verdict.preview) if verdict.preview else ""
            convert = None
            if not item.is_link:
                convert = FixRef(
                    _("convert {name} from {encoding} to UTF-8", name=item.path.name, encoding=verdict.encoding),
                    ConvertParams(sha, verdict.encoding),
                )
            note = _(" (a symbolic link: convert its target)") if item.is_link else ""
            message = _(
                "{path}: {encoding}, not UTF-8 — loaders fail{where}{shown}; {why}.{note}",
                path=path, encoding=verdict.encoding.upper(), where=where, shown=shown, why=verdict.reason, note=note,
            )  # fmt: skip
            return [self.finding(ENC001, message, evidence=evidence, path=path, fix=convert, severity=severity)]
        if verdict.status == Status.MIXED:
            lines = "; ".join(
                _("{encoding}: lines {lines}", encoding=enc, lines=", ".join(map(str, nums[:8])) + ("…" if len(nums) > 8 else ""))
                for enc, nums in verdict.mixed_lines.items()
            )
            evidence["lines"] = verdict.mixed_lines
            return [
                self.finding(
                    ENC003,
                    _("{path}: mixes encodings ({lines}); not converted.", path=path, lines=lines),
                    evidence=evidence,
                    path=path,
                    severity=severity,
                )
            ]
        if verdict.status == Status.TRUNCATED:
            return [
                self.finding(
                    ENC004,
                    _("{path}: {why}{where}; not converted.", path=path, why=verdict.reason, where=where),
                    evidence=evidence,
                    path=path,
                    severity=severity,
                )
            ]
        if verdict.status == Status.COOKIE:
            return [
                self.finding(
                    ENC005, _("{path}: not UTF-8 and {why}; left as it is.", path=path, why=verdict.reason), evidence=evidence, path=path
                )
            ]
        side_by_side = " | ".join(
            _("{encoding} ({language}): {words}", encoding=r.encoding, language=_(r.language), words=" · ".join(r.words))
            for r in verdict.readings
            if r.words
        )
        if verdict.status == Status.CONTRADICTED or verdict.stated:
            message = _(
                "{path}: {why}{readings}; left as it is.",
                path=path,
                why=verdict.reason,
                readings=_(" — {readings}", readings=side_by_side) if side_by_side else "",
            )
            return [self.finding(ENC010, message, evidence=evidence, path=path)]
        command = decide_command(given, item.path, verdict.candidates)
        evidence["decide_with"] = command
        shown = _(": {readings}", readings=side_by_side) if side_by_side else ""
        message = _(
            "{path}: not UTF-8{where}, and {why}{shown}. Decide with: {command}",
            path=path,
            where=where,
            why=verdict.reason,
            shown=shown,
            command=command,
        )
        return [self.finding(ENC002, message, evidence=evidence, path=path, severity=severity)]


# read at each run (a test lowers them): what the second look may hold of undecided files
KEEP_FILE_BYTES = 1 << 20  # an undecided file this small keeps its readings for the second look
KEEP_TREE_BYTES = 32 << 20  # and all of them together at most this many bytes of files
UNDECIDED_SHOWN = 6  # runs of non-ASCII bytes a refusal lists
HIGH_RUN = re.compile(rb"[\x80-\xff]+")


def _undecided_bytes(data: bytes) -> str:
    """The few non-ASCII byte runs of a file with little non-ASCII text, with where they are
    ("e8 at byte 19 (line 1)"); empty when there are more than a handful."""
    from .textenc import line_number

    runs: list[str] = []
    for match in HIGH_RUN.finditer(data):
        if len(runs) == UNDECIDED_SHOWN:
            return ""
        runs.append(f"{match.group()[:8].hex(' ')} at byte {match.start()} (line {line_number(data, match.start())})")
    return "; ".join(runs)


def decide_command(given: Path, path: Path, candidates: list[str]) -> str:
    """The command that converts path with the reading a person picks."""
    from shlex import quote

    first = candidates[0] if candidates else "ENCODING"
    others = "".join(_(" (or ={encoding})", encoding=c) for c in candidates[1:3])
    return f"decode-doctor check --model {quote(str(given))} --from-encoding {quote(f'{path}={first}')} --fix{others}"
