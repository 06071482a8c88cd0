"""Chinese typography as code: one normaliser for what decode-doctor prints in zh-CN (issue 51).

The rules (doctor/locale/GLOSSARY.md, "Rules"), each applied only beside Chinese text and never inside
what is quoted or code — backticks, ASCII double quotes (evidence), “…”, a Markdown code fence, an
HTML tag, <code> or <pre>:

- 、 between the items of a list in a Chinese sentence: `ABC001, ABC002` → `ABC001、ABC002` when the
  run of Latin text holding the list touches Chinese on one side and every item is a short code or
  name (at most two words);
- no space after full-width punctuation: `。 下一句` → `。下一句` (one space only: a padded column keeps its
  padding);
- a source location inside the sentence, before its full stop: `…模块。（x.txt，第 1 行）` →
  `…模块（x.txt，第 1 行）。`;
- one bracket pair, never nested: an inner （…） inside another becomes a comma-separated aside
  (`（运行期间（1 次读取））` → `（运行期间，1 次读取）`);
- `——` for a dash: ` — ` beside Chinese → `——`;
- `≥`/`≤` for `>=`/`<=` in prose: ` >= 580` → ` ≥ 580` (a version specifier such as `torch>=2.1`
  touches its name and stays).

normalize() is the text form, normalize_html() the HTML one (text nodes only); both return the text
unchanged unless the language is Chinese (normalized()/normalized_html() always apply the rules: the
tests); stream() wraps a terminal's stream for rich. Nothing here imports more than re."""

from __future__ import annotations

import re
from typing import Any, TextIO, cast

from . import chinese

__all__ = ["normalize", "normalize_html", "normalized", "normalized_html", "stream"]

HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
FULL = "\u3000-\u303f\uff00-\uffef“”‘’…——"  # CJK symbols and punctuation, full-width forms
CHINESE_CHAR = f"[{HAN}{FULL}]"
# what is never touched: backticks, ASCII double quotes (evidence, even over a wrapped line), “…”
PROTECTED = re.compile(r'`[^`\n]{0,400}`|"[^"]{0,400}"|“[^”]{0,400}”')
FENCE = re.compile(r"(?ms)^```.*?^```[^\n]*$")

_LATIN = r"A-Za-z0-9_.+/%:-"
_ITEM = rf"[A-Za-z0-9][{_LATIN}]*(?: [{_LATIN}]+)?"
LIST_RUN = re.compile(rf"(?<![{_LATIN}]){_ITEM}(?:, {_ITEM})+(?![{_LATIN}])")
SPACE_AFTER = re.compile(rf"(?<=[。，、；：！？])[ \t](?=[^\s|])|(?<=[）》」』】])[ \t](?=[{HAN}])")
LOCATION_AFTER_STOP = re.compile(r"。(（[^（）\n]*?(?:第 ?\d+ ?行|line \d+)[^（）\n]*）)")
DASH = re.compile(rf"(?<={CHINESE_CHAR}) — |(?<=\S) — (?={CHINESE_CHAR})")
COMPARISON = re.compile(r"(?<=[\s（，：；])(>=|<=)(?= ?[\d{])")


def normalize(text: str) -> str:
    """text in Chinese typography when the language is Chinese; else text itself."""
    return normalized(text) if chinese() else text


def normalize_html(html: str) -> str:
    """An HTML page's text nodes in Chinese typography when the language is Chinese; else html itself."""
    return normalized_html(html) if chinese() else html


def normalized(text: str) -> str:
    """text in Chinese typography, whatever the language (the rules above; code and quotes kept)."""
    if not re.search(f"[{HAN}]", text):
        return text
    out: list[str] = []
    last = 0
    for fence in FENCE.finditer(text):
        out.append(_prose(text[last : fence.start()]))
        out.append(fence.group())
        last = fence.end()
    out.append(_prose(text[last:]))
    return "".join(out)


TAG = re.compile(r"<[^>]*>")
RAW_ELEMENTS = ("code", "pre", "script", "style", "kbd", "samp")


def normalized_html(html: str) -> str:
    """The text between tags in Chinese typography, outside <code>, <pre>, <script> and <style>."""
    out: list[str] = []
    last, raw = 0, 0
    for tag in TAG.finditer(html):
        between = html[last : tag.start()]
        out.append(between if raw else _text_node(between))
        out.append(tag.group())
        name = re.match(r"</?\s*([a-zA-Z0-9]+)", tag.group())
        if name and name.group(1).lower() in RAW_ELEMENTS and not tag.group().endswith("/>"):
            raw += -1 if tag.group().startswith("</") else 1
            raw = max(raw, 0)
        last = tag.end()
    tail = html[last:]
    out.append(tail if raw else _text_node(tail))
    return "".join(out)


def _text_node(text: str) -> str:
    """An HTML text node: its escaped quotes read as quotes, so quoted evidence is kept as in text."""
    if '"' in text or "&quot;" not in text:
        return _prose(text)
    return _prose(text.replace("&quot;", '"')).replace('"', "&quot;")


def _prose(text: str) -> str:
    """The rules over text outside its protected spans (a protected span is held as a placeholder)."""
    if not re.search(f"[{HAN}]", text):
        return text
    held: list[str] = []

    def hold(match: re.Match[str]) -> str:
        held.append(match.group())
        return f"\x01{len(held) - 1}\x02"

    text = PROTECTED.sub(hold, text)
    text = _lists(text)
    text = LOCATION_AFTER_STOP.sub(r"\1。", text)
    text = _unnested(text)
    text = DASH.sub("——", text)
    text = COMPARISON.sub(lambda m: "≥" if m.group(1) == ">=" else "≤", text)
    text = SPACE_AFTER.sub("", text)
    return re.sub("\x01(\\d+)\x02", lambda m: held[int(m.group(1))], text)


def _lists(text: str) -> str:
    """、 between the items of a Latin list that touches Chinese (its run of Latin text is bounded by a
    Chinese character or full-width punctuation on at least one side)."""

    def joined(match: re.Match[str]) -> str:
        before = text[max(match.start() - 64, 0) : match.start()].rstrip(" ")
        after = text[match.end() : match.end() + 64].lstrip(" ")
        touches = bool(before and re.match(CHINESE_CHAR, before[-1])) or bool(after and re.match(CHINESE_CHAR, after[0]))
        return match.group().replace(", ", "、") if touches else match.group()

    return LIST_RUN.sub(joined, text)


def _unnested(text: str) -> str:
    """An inner full-width pair inside another becomes a comma-separated aside, innermost first."""
    for _round in range(4):  # nesting three deep at most
        changed = _unnest_once(text)
        if changed == text:
            return text
        text = changed
    return text


def _unnest_once(text: str) -> str:
    depth, index = 0, 0
    out: list[str] = []
    while index < len(text):
        char = text[index]
        if char == "（":
            depth += 1
            if depth >= 2:
                close = _closing(text, index)
                if close is not None and "（" not in text[index + 1 : close]:
                    inner = text[index + 1 : close]
                    following = text[close + 1 : close + 2]
                    out.append(("，" if out and out[-1] not in "，：；" else "") + inner)
                    if following and following not in "）。，；：、":
                        out.append("，")
                    depth -= 1
                    index = close + 1
                    continue
        elif char == "）":
            depth = max(depth - 1, 0)
        out.append(char)
        index += 1
    return "".join(out)


def _closing(text: str, start: int) -> int | None:
    end = text.find("）", start + 1)
    newline = text.find("\n", start + 1)
    if end < 0 or (0 <= newline < end):
        return None
    return end


class _Normalizing:
    """A text stream whose writes are normalised (rich's console writes a whole print at once)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(normalized(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def stream(out: TextIO) -> TextIO:
    """out, its writes normalised when the language is Chinese (out itself otherwise)."""
    return cast(TextIO, _Normalizing(out)) if chinese() else out
