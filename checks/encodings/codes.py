"""The encodings feature's codes, each with its explanation in fixed sections."""

from __future__ import annotations

from dataclasses import dataclass

from decode_doctor.engine import Code, FixableCode, FixParams, Severity


@dataclass(frozen=True)
class ConvertParams(FixParams):
    """Convert the file from this encoding to UTF-8; sha256 is what the check read (a changed file is refused)."""

    sha256: str
    encoding: str


@dataclass(frozen=True)
class DropBomParams(FixParams):
    """Remove the UTF-8 byte-order mark; sha256 is what the check read."""

    sha256: str


FIX_SAFETY = (
    "Safe: the file is decoded strictly, re-encoded as UTF-8 without a BOM, line endings kept, and the new "
    "bytes must decode back to exactly the same text before anything is written; written atomically with its "
    "mode and owner; journaled, and `decode-doctor undo` restores the original bytes."
)


ENC001 = FixableCode[ConvertParams](
    code="ENC001",
    title="A model text file is not UTF-8 (convertible)",
    severity=Severity.ERROR,
    what="The file is in a legacy encoding (GBK, Big5, Shift_JIS, EUC-KR, windows-1250, KOI8-R…) or UTF-16/32, and "
    "one reading of its bytes beats every other: on the words where the readings differ, it is far likelier text of "
    "its language (chardet's language statistics) and its words look like words, so it can be converted without guessing. "
    "A file too short to decide alone (a two-word classes.txt, a config whose only non-ASCII text is one path) is decided "
    "with the files of the same --model tree that were decided confidently, when at least two of them agree and "
    "their bytes carry its reading over the same bar one file must clear; the message names those sibling files. "
    "Its own bytes keep a veto: siblings never decide it when its own evidence leans to another reading, when the "
    "other reading is in the same script (the file must choose between windows-1252 and windows-1250 itself), or "
    "when the siblings' reading would give a word no text has, a letter the siblings never use or an uncommon CJK "
    "character.",
    why="transformers, tokenizers, vLLM and llama.cpp open config and tokenizer files as UTF-8: loading fails with "
    "\"UnicodeDecodeError: 'utf-8' codec can't decode byte 0xd5 in position 4\", usually for files saved on Windows.",
    fix_by_hand="iconv -f GBK -t UTF-8 config.json > config.json.utf8 && mv config.json.utf8 config.json — for this "
    "file only, with the encoding named here; never iconv every *.json (it corrupts files already in UTF-8), and never "
    "read with errors='ignore' (it silently drops characters).",
    example='config.json saved by Notepad in GBK: {"description": "通义千问"} → bytes 0xcd 0xa8 …',
    params=ConvertParams,
    fix_safety=FIX_SAFETY,
)

ENC002 = Code(
    code="ENC002",
    title="A model text file is not UTF-8, and its encoding cannot be told for sure",
    severity=Severity.ERROR,
    what="Several encodings decode the bytes into text that reads as some language, and the evidence does not "
    "separate them (two kanji in a large ASCII file read as GBK, Big5 and EUC-JP alike); or no encoding reads it "
    "as text at all. The finding shows the competing readings side by side on the words where they differ. When "
    "files of the same tree were decided confidently and still do not decide this one, it says why (its own bytes "
    "lean the other way, the readings are in one script, the siblings' reading gives an unlikely character) and "
    "lists the few undecided bytes with their offsets.",
    why="Loaders fail on it as on any non-UTF-8 file; converting with the wrong encoding would silently turn the "
    "text into other characters, which is worse than failing.",
    fix_by_hand="Look at the readings in the finding, pick the one whose words are right, and run the command it "
    "shows: decode-doctor check --model DIR --from-encoding PATH=ENCODING --fix (repeat --from-encoding for each "
    "file). A bare --from-encoding ENCODING applies to every file decode-doctor could not decide, never to one it "
    "reads as another encoding.",
    example='tokenizer_config.json with the words "Le poète" saved in windows-1252: windows-1250 gives "Le počte", and both are '
    "words (French and Czech); the finding shows both readings and asks for --from-encoding PATH=cp1252.",
)

ENC003 = Code(
    code="ENC003",
    title="A model text file mixes encodings",
    severity=Severity.ERROR,
    what="Some lines are UTF-8 and others are in another encoding, as happens when files are concatenated or "
    "edited with tools that disagree.",
    why="No single conversion is right for the whole file; converting it would corrupt the UTF-8 lines.",
    fix_by_hand="Fix the named lines by hand (re-type or re-export them), then run the check again.",
    example="vocab.txt whose first 10,000 lines are UTF-8 and whose last lines were appended in GBK on Windows.",
)

ENC004 = Code(
    code="ENC004",
    title="A model text file ends in the middle of a character",
    severity=Severity.ERROR,
    what="The file decodes cleanly until its last character, whose bytes are incomplete: it was cut off.",
    why="A truncated config or tokenizer file is usually an interrupted download or copy; more than the encoding is wrong.",
    fix_by_hand="Download or copy the file again and compare its size and sha256 with the source.",
    example="special_tokens_map.json cut off after the first byte of a three-byte UTF-8 character (an interrupted copy).",
)

ENC005 = Code(
    code="ENC005",
    title="A Python file in a legacy encoding declares it in a coding cookie",
    severity=Severity.WARNING,
    what="The .py file is not UTF-8 and says so (# -*- coding: gbk -*-).",
    why="Python reads it correctly thanks to the cookie; converting the bytes without editing the cookie would break "
    "it, so decode-doctor leaves it alone. Tools that read it as plain text (trust_remote_code loaders, linters) may not.",
    fix_by_hand="Convert it and change the cookie to utf-8 in the same edit, or leave it as it is.",
    example="convert.py starting with # -*- coding: gbk -*- and GBK comments: Python reads it, other tools may not; it is reported, "
    "not converted.",
)

ENC006 = FixableCode[DropBomParams](
    code="ENC006",
    title="A UTF-8 byte-order mark the loader chokes on",
    severity=Severity.ERROR,
    what="The file starts with the bytes EF BB BF (a UTF-8 BOM), as Windows editors write, and it is a kind of file "
    "whose loaders fail on it (.json, .jsonl, .toml, .txt, .jinja, .csv, .tsv). A README.md, YAML or Python file with a "
    "BOM is left alone, and the check's facts say why (Markdown renderers, PyYAML and Python accept it).",
    why='json.loads rejects it ("Unexpected UTF-8 BOM"), tomllib too ("Invalid statement"), and in vocab, merges or '
    "template files the first entry "
    'silently becomes "\\ufeff…", a token that never matches.',
    fix_by_hand="Remove the first three bytes: tail -c +4 file > file.new && mv file.new file.",
    params=DropBomParams,
    fix_safety="Safe: removes the three BOM bytes only; journaled and undoable.",
    example='tokenizer_config.json saved by Notepad with a UTF-8 BOM: json.loads fails with "Unexpected UTF-8 BOM (decode using '
    'utf-8-sig)".',
)

ENC007 = Code(
    code="ENC007",
    title="A symbolic link was not followed",
    severity=Severity.INFO,
    what="A symbolic link in the model directory: one pointing outside the tree (or to a directory) is never followed; "
    "one pointing inside it is reported once, its target checked at its own path; decode-doctor never writes through a link.",
    why="Links out of the tree could lead the check, and a fix, to files the user did not name.",
    fix_by_hand="Pass the link's target directory with another --model if it should be checked.",
    example="config.json is a symbolic link to ../../shared/config.json, outside the --model tree: it is reported, not read.",
)

ENC008 = Code(
    code="ENC008",
    title="A model text file cannot be read",
    severity=Severity.WARNING,
    what="Opening or reading the file failed (permissions, I/O error).",
    why="If the serving process cannot read it either, loading fails; if it can, this check could not vouch for it.",
    fix_by_hand="Check its owner and mode (ls -l), and that the serving user can read it.",
    example="generation_config.json is mode 0600 and owned by another user: reading it fails with permission denied.",
)

ENC009 = Code(
    code="ENC009",
    title="A text config file holds binary data",
    severity=Severity.WARNING,
    what="A file named like a text config (config.json, vocab.txt…) holds binary data (NUL bytes, or gzip, zip, "
    "pickle, safetensors or GGUF magic).",
    why="Loaders fail on it with a parse error; often a download saved an archive or an error blob under the name.",
    fix_by_hand="Download the file again; if it is an archive, unpack it.",
    example="tokenizer.json is 12 MB of NUL bytes (a failed download preallocated the file).",
)

ENC010 = Code(
    code="ENC010",
    title="The encoding given with --from-encoding was not used",
    severity=Severity.ERROR,
    what="You named an encoding for this file (--from-encoding PATH=ENC) or for every undecided file "
    "(--from-encoding ENC), and either the file reads clearly as another encoding (decode-doctor never overrides a "
    "confident reading), or decoded with yours it fails, holds control characters, or no longer parses.",
    why="Converting with an encoding that does not fit turns the text into other characters for good "
    '("# モデル" read as GBK becomes "# 儌僨儖"), and a strict decode that fails would lose bytes.',
    fix_by_hand="Compare the readings shown side by side; if the file's own reading is right, drop --from-encoding "
    "for it (the check converts it); otherwise pick another encoding or fix the file by hand.",
    example="--from-encoding config.json=shift_jis for a file that reads far better as GBK: the stated encoding was not used.",
)

ENC011 = Code(
    code="ENC011",
    title="A --from-encoding path names no checked file",
    severity=Severity.WARNING,
    what="--from-encoding PATH=ENC names a file that is not among the text files checked under --model.",
    why="The decision was not applied anywhere; the file it was meant for is still undecided.",
    fix_by_hand="Give the path of the file as the finding for it shows it, and the --model directory that holds it.",
    example="--from-encoding tokenizer_confg.json=gbk, with a typo in the file name: no checked file has that path.",
)

ENC012 = Code(
    code="ENC012",
    title="No text file to check under a --model",
    severity=Severity.INFO,
    what="--model names a directory or file under which no config, tokenizer, template or other text file was found.",
    why="Nothing was judged: a mistyped path, or a single weights file (.gguf, .safetensors), would otherwise read as clean.",
    fix_by_hand="Give the model's directory (the one holding config.json and the tokenizer files).",
    example="--model ./models/qwen, a directory that holds only model.safetensors: there is no text file to check.",
)

CODES = (ENC001, ENC002, ENC003, ENC004, ENC005, ENC006, ENC007, ENC008, ENC009, ENC010, ENC011, ENC012)
