"""A generated corpus of model text files in many encodings, with what decode-doctor must do to each."""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path

ZH = "这是一个大型语言模型的配置文件，请勿修改。模型支持中文和英文对话。"
ZH_TW = "這是一個大型語言模型的設定檔，請不要修改。模型支援繁體中文與英文對話。"
JA = "これは大規模言語モデルの設定ファイルです。表示ソフトで編集しないでください。"
KO = "이것은 대규모 언어 모델의 설정 파일입니다. 수정하지 마십시오."
LATIN = "Modèle de langue: café, crème brûlée, naïve façade – “quoted” text, déjà vu."


@dataclass
class Item:
    rel: str
    data: bytes
    expect: str  # "clean", "convert" (must convert), "convert-or-ambiguous", "never" (must stay), "bom"
    text: str | None = None  # the true text, for conversions


def _json(text: str, extra: dict | None = None) -> str:
    return json.dumps({"model_type": "llama", "description": text, **(extra or {})}, ensure_ascii=False, indent=2) + "\n"


def corpus() -> list[Item]:
    items: list[Item] = []

    def add(rel: str, text: str, encoding: str, expect: str) -> None:
        items.append(Item(rel, text.encode(encoding), expect, text))

    # unambiguous legacy encodings, short and long, LF and CRLF
    add("gbk/config.json", _json(ZH), "gbk", "convert")
    add("gbk/generation_config.json", _json(ZH * 20), "gbk", "convert")
    add("gbk/labels.txt", "\n".join(["猫", "狗", "鸟", "鱼", "马", "牛", "羊", "鸡", "鸭", "鹅"]) + "\n", "gbk", "convert")
    add("gbk/settings.ini", f"[model]\r\nname=测试模型\r\ndescription={ZH}\r\n", "gbk", "convert")
    add("gb18030/special_tokens_map.json", _json("欢迎使用本模型😀，支持表情和中文。"), "gb18030", "convert")
    add("big5/tokenizer_config.json", _json(ZH_TW), "big5", "convert")
    add("sjis/config.json", _json(JA, {"name": "表示ソフト"}), "shift_jis", "convert")  # 0x5C second bytes
    add("eucjp/README.md", f"# モデル\n\n{JA}\n", "euc_jp", "convert")
    add("euckr/config.json", _json(KO), "euc_kr", "convert")
    add("cp1252/notes.md", f"# Notes\n\n{LATIN}\n", "cp1252", "convert")
    add("cp1252/labels.csv", "id,label\r\n1,café\r\n2,crème\r\n3,naïve\r\n", "cp1252", "convert")
    # the hard case: two or three CJK characters in a large ASCII JSON
    big = {f"token_{i}": i for i in range(3000)}
    add("short/tokenizer.json", json.dumps({**big, "greeting": "你好"}, ensure_ascii=False), "gbk", "convert-or-ambiguous")
    add("short/added_tokens.json", json.dumps({"<|zh|>": 1, "desc": "繁體"}, ensure_ascii=False), "big5", "convert-or-ambiguous")
    add("short/vocab_ko.txt", "hello\nworld\n한국\n", "euc_kr", "convert-or-ambiguous")
    # one non-ASCII character near the end of a 1 MB vocab: chardet's default 200 KB prefix misses it
    vocab = "".join(f"token{i:07d}\n" for i in range(80_000))
    add("large/vocab.txt", vocab + "中\n", "gbk", "convert-or-ambiguous")
    add("large/merges.txt", vocab + f"{ZH}\n", "gbk", "convert")
    # clean files
    add("clean/config.json", _json(ZH), "utf-8", "clean")
    add("clean/ascii.json", _json("plain ascii"), "ascii", "clean")
    add("clean/chat_template.jinja", "{% for m in messages %}{{ m['content'] }}{% endfor %}\n", "utf-8", "clean")
    items.append(Item("clean/bom-readme.md", b"\xef\xbb\xbf# Readme with a BOM\n", "clean"))
    items.append(Item("bom/config.json", b"\xef\xbb\xbf" + _json(ZH).encode("utf-8"), "bom", _json(ZH)))
    # UTF-16 and UTF-32
    add("utf16/config.json", "\ufeff" + _json(ZH), "utf-16-le", "convert")
    items[-1].text = _json(ZH)
    add("utf16/vocab.txt", "\ufeff" + "hello\n你好\n", "utf-16-be", "convert")
    items[-1].text = "hello\n你好\n"
    add("utf32/special_tokens_map.json", "\ufeff" + _json("tokens"), "utf-32-le", "convert")
    items[-1].text = _json("tokens")
    add("utf16-nobom/tokenizer_config.json", _json("模型 config"), "utf-16-le", "convert")
    # never converted
    items.append(
        Item(
            "mixed/config.json",
            (_json("x")[:-2] + ",\n").encode() + f'  "a": "{ZH}",\n'.encode() + f'  "b": "{ZH}"\n}}\n'.encode("gbk"),
            "never",
        )
    )
    items.append(Item("truncated/utf8.txt", f"hello {ZH}".encode()[:-1], "never"))
    items.append(Item("truncated/gbk.txt", f"hello {ZH}".encode("gbk")[:-1], "never"))
    items.append(Item("binary/config.json", gzip.compress(b'{"a": 1}' * 100), "never"))
    items.append(Item("binary/vocab.txt", b"\x00\x01\x02" * 100, "never"))
    items.append(Item("binary/tokenizer.json", (8).to_bytes(8, "little") + b'{"a":{}}' + b"\0" * 32, "never"))
    items.append(Item("code/modeling_custom.py", "# -*- coding: gbk -*-\n# 模型代码\nNAME = '测试'\n".encode("gbk"), "never"))
    # a JSON whose only plausible parse is the right decode
    add("parse/config.json", _json("表示ソフト ソース 能力"), "shift_jis", "convert")
    return items


def write_corpus(root: Path, outside: Path | None = None) -> list[Item]:
    items = corpus()
    for item in items:
        path = root / item.rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(item.data)
    if outside is not None:
        outside.mkdir(parents=True, exist_ok=True)
        (outside / "secret.json").write_bytes(_json(ZH).encode("gbk"))
        os.symlink(outside / "secret.json", root / "links" / "config.json") if (root / "links").mkdir() is None else None
        os.symlink(root / "gbk" / "config.json", root / "links" / "inside.json")
    return items
