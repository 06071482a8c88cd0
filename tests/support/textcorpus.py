"""A generated corpus of model text files in many encodings, with what decode-doctor must do to each."""

from __future__ import annotations

import gzip
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

ZH = "这是一个大型语言模型的配置文件，请勿修改。模型支持中文和英文对话。"
ZH_TW = "這是一個大型語言模型的設定檔，請不要修改。模型支援繁體中文與英文對話。"
JA = "これは大規模言語モデルの設定ファイルです。表示ソフトで編集しないでください。"
KO = "이것은 대규모 언어 모델의 설정 파일입니다. 수정하지 마십시오."
LATIN = "Modèle de langue: café, crème brûlée, naïve façade – “quoted” text, déjà vu."
# the failure classes of issue 12, in sentences written for this corpus
HU = (
    "A modell magyar nyelvű szövegeket is értelmez: őszintén szólva a fűszeres ételekről "
    "és a hűvös időjárásról szóló mondatokat is könnyedén követi."
)
CS = "Tento model rozumí české větě: příliš žluťoučký kůň úpěl ďábelské ódy, a přesto se učí rychle a správně."
PL = "Ten model rozumie zdania po polsku: zażółć gęślą jaźń, a także źdźbło trawy i łódź na jeziorze przy brzegu."
TR = "Bu model Türkçe cümleleri de anlıyor: İstanbul'da güzel bir gün, çiçekler açıyor ve şarkılar söyleniyor."
RU = "Эта модель понимает русский текст: съешь же ещё этих мягких французских булок, да выпей чаю."
KO_LONG = "이 모델은 한국어 문장을 이해하고 생성합니다. 감정 분류에 사용하십시오."
NER_LABELS = ["B-人名", "I-人名", "B-組織名", "I-組織名", "B-地名", "I-地名", "O"]
CHATGLM_TEMPLATE = "{% for message in messages %}[Round {{ loop.index }}]\n\n问：{{ message['content'] }}\n\n答：{% endfor %}"


@dataclass
class Item:
    rel: str
    data: bytes
    # "clean", "convert" (must convert), "convert-or-ambiguous", "never" (must stay), "bom",
    # "ignored" (not text: never a finding)
    expect: str
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
    # three French words: cp1252 ("crème") and windows-1250 ("crčme") are both Latin text; refusing is right
    add("cp1252/labels.csv", "id,label\r\n1,café\r\n2,crème\r\n3,naïve\r\n", "cp1252", "convert-or-ambiguous")
    add("cp1252/labels_fr.csv", "id,label\r\n1,café\r\n2,crème brûlée\r\n3,naïveté\r\n4,élève\r\n", "cp1252", "convert")
    # Central European and Turkish: every byte also decodes in cp1252, to other accented letters
    add("latin2/README.md", f"# Modell\n\n{HU}\n", "iso8859_2", "convert")
    add("latin2/config.json", _json(CS), "iso8859_2", "convert")
    add("latin2/strings.xml", f'<?xml version="1.0"?>\n<string name="about">{PL}</string>\n', "iso8859_2", "convert")
    add("cp1250/notes.md", f"# Opis\n\n{PL}\n", "cp1250", "convert")
    add("cp1250/config.json", _json(HU), "cp1250", "convert")
    add("turkish/config.json", _json(TR), "iso8859_9", "convert")
    add("turkish/README.md", f"# Açıklama\n\n{TR}\n", "cp1254", "convert")
    add("cyrillic/config.json", _json(RU), "cp1251", "convert")
    add("cyrillic/README.md", f"# Описание\n\n{RU}\n", "koi8_r", "convert")
    subtitles = "1\n00:00:01,000 --> 00:00:03,000\nПривет, как дела?\n\n2\n00:00:04,000 --> 00:00:06,000\nВсё хорошо, спасибо.\n"
    add("cyrillic/captions.srt", subtitles, "cp1251", "convert")
    # kanji-only NER labels: GB2312 reads the same bytes as other hanzi ("B-客叹"); never convert them so
    add("kanji/config.json", json.dumps({"labels": NER_LABELS}, ensure_ascii=False), "euc_jp", "convert-or-ambiguous")
    add("kanji/labels.json", _json("", {"id2label": dict(enumerate(NER_LABELS))}), "euc_jp", "convert-or-ambiguous")
    # Korean configs and ChatGLM-style GBK configs (once "ambiguous: gb2312 or euc_kr", "gbk or cp949")
    add("korean/config.json", _json(KO_LONG, {"id2label": {"0": "부정", "1": "긍정"}}), "euc_kr", "convert")
    add("korean/labels.json", _json("", {"id2label": {"0": "부정", "1": "긍정", "2": "중립"}}), "euc_kr", "convert")
    chatglm = {"architectures": ["ChatGLMModel"], "pad_token_id": 3}
    add("chatglm/config.json", _json("一个开源的、支持中英双语的对话语言模型，基于通用语言模型架构。", chatglm), "gbk", "convert")
    tokenizer = {"name_or_path": "THUDM/chatglm-6b", "padding_side": "left", "chat_template": CHATGLM_TEMPLATE}
    add("chatglm/tokenizer_config.json", json.dumps(tokenizer, ensure_ascii=False, indent=2) + "\n", "gbk", "convert")
    # a lone "£" in an English page: once converted as Shift_JIS ("｣825")
    add("pound/index.html", "<p>Price: £825 per month, paid in advance.</p>\n", "cp1252", "convert-or-ambiguous")
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
    add("utf16-nobom/vocab.txt", "hello\nworld\n你好\n", "utf-16-be", "convert")
    add("utf32-nobom/config.json", _json("tokens"), "utf-32-le", "convert")
    # ISO-2022-JP is all 7-bit bytes: its escapes, not UTF-8, decide it
    add("iso2022/README.md", f"# モデル\n\n{JA}\n", "iso2022_jp", "convert")
    # weights beside the configs: never read as text, whatever bytes they hold
    noise = random.Random(12).randbytes(4096)
    items.append(Item("weights/model.Q4_K_M.gguf", b"GGUF\x03\x00\x00\x00" + noise, "ignored"))
    header = b'{"w": {"dtype": "F16", "shape": [2048], "data_offsets": [0, 4096]}}'
    items.append(Item("weights/model.safetensors", len(header).to_bytes(8, "little") + header + noise, "ignored"))
    items.append(Item("weights/tokenizer.model", noise, "ignored"))
    add("weights/config.json", _json(ZH), "gbk", "convert")
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
