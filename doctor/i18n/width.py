"""Terminal columns for text that mixes CJK and Latin: a CJK character takes two columns, so tables
pad and paragraphs wrap by display width, not by string length (stdlib unicodedata only)."""

from __future__ import annotations

import unicodedata

# Chinese punctuation that must not start a line (and opening marks that must not end one)
NO_LINE_START = set("，。、；：！？）》」』】〉”’…%,.;:!?)]}")
NO_LINE_END = set("（《「『【〈“‘([{")


def char_width(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def width(text: str) -> int:
    """Columns text takes on a terminal."""
    return sum(char_width(c) for c in text)


def ljust(text: str, columns: int) -> str:
    """text padded with spaces to columns (display width); longer text is left as it is."""
    return text + " " * max(0, columns - width(text))


def rjust(text: str, columns: int) -> str:
    return " " * max(0, columns - width(text)) + text


def _pieces(text: str) -> list[str]:
    """Units a line may break between: a Latin word with its trailing spaces, or one wide character
    (with the punctuation that must stay on its line)."""
    pieces: list[str] = []
    current = ""
    for char in text:
        wide = char_width(char) == 2
        if char in NO_LINE_START and current:  # "false，": the mark stays with the Latin word before it
            current += char
            continue
        if char == "." and pieces and pieces[-1] and char_width(pieces[-1][-1]) == 2:  # "；.json": a file name's start
            current += char
            continue
        if char in NO_LINE_START and pieces and not pieces[-1].endswith(" "):  # " .gguf": a word's own start
            pieces[-1] += char
            continue
        if wide:
            if current:
                pieces.append(current)
                current = ""
            if pieces and pieces[-1] and pieces[-1][-1] in NO_LINE_END:
                pieces[-1] += char
            else:
                pieces.append(char)
        elif char == " ":
            current += char
            pieces.append(current)
            current = ""
        else:
            if current == "" and pieces and pieces[-1] and pieces[-1][-1] in NO_LINE_END:
                current = pieces.pop()
            current += char
    if current:
        pieces.append(current)
    return pieces


UNBROKEN = ("KV ", "Cache")  # a term the glossary keeps whole


def _kept_whole(pieces: list[str]) -> list[str]:
    """A command in backticks is one piece (copied from the terminal it must not be cut at a line's
    end), and so is "KV Cache"."""
    kept: list[str] = []
    inside = False
    for piece in pieces:
        if inside or (kept and kept[-1] == UNBROKEN[0] and piece.startswith(UNBROKEN[1])):
            kept[-1] += piece
        else:
            kept.append(piece)
        inside ^= piece.count("`") % 2 == 1
    return kept


def wrap(text: str, columns: int, indent: str = "") -> list[str]:
    """text in lines of at most columns display columns (a longer word or a command in backticks
    alone on its line), each starting with indent; CJK text breaks between characters, Latin between
    words."""
    lines: list[str] = []
    line = indent
    used = width(indent)
    for piece in _kept_whole(_pieces(text)):
        size = width(piece.rstrip(" "))
        if used + size > columns and line.strip():
            lines.append(line.rstrip(" "))
            piece = piece.lstrip(" ")
            line, used = indent, width(indent)
            size = width(piece.rstrip(" "))
        line += piece
        used += width(piece)
    if line.strip():
        lines.append(line.rstrip(" "))
    return lines or [indent.rstrip()]
