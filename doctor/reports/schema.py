"""The report's shape, read from the one place it is written: doctor/schema/report-v2.schema.json.

`diff` and `merge` read reports other runs wrote (other versions, hand-edited, truncated files); before
they read one, it is checked against the schema, and the first problem is named with its place
("findings[3].severity is 'fatal', not one of error, warning, info"). A validator of the subset of
JSON Schema the file uses (type, properties, required, items, enum, const, $ref into $defs, allOf,
oneOf, additionalProperties, minimum, minLength, minItems, pattern): the runtime needs no jsonschema,
the tests prove the subset agrees with it on the reports they write.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from typing import Any

from ..i18n import _, literal

MAX_DEPTH = 64
TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
    "number": (int, float),
    "integer": (int,),
}


@functools.cache
def report_schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files("decode_doctor.schema").joinpath("report-v2.schema.json").read_text())
    return data


def problem(data: Any, schema: dict[str, Any] | None = None) -> str | None:
    """The first way data does not fit the schema (the report schema by default), or None."""
    root = schema or report_schema()
    return _check(data, root, root, "", 0)


def _is(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("number", "integer"):
        return False
    return isinstance(value, TYPES.get(kind, ()))


def _shown(value: Any) -> str:
    shown = repr(value)[:40] if isinstance(value, str | int | float | bool) or value is None else type(value).__name__
    return literal(shown)


def _check(value: Any, schema: dict[str, Any], root: dict[str, Any], where: str, depth: int) -> str | None:
    if depth > MAX_DEPTH:
        return _("{where} nests too deeply", where=where or "the report")
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return _check(value, root.get("$defs", {}).get(name, {}), root, where, depth + 1)
    found = _type_problem(value, schema, where) or _value_problem(value, schema, where)
    if found:
        return found
    for part in schema.get("allOf", ()):
        found = _check(value, part, root, where, depth + 1)
        if found:
            return found
    if "oneOf" in schema and all(_check(value, part, root, where, depth + 1) for part in schema["oneOf"]):
        return _("{where} fits none of its forms", where=where or "the report")
    if isinstance(value, dict):
        return _object_problem(value, schema, root, where, depth)
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return _("{where} has fewer than {count} items", where=where, count=schema["minItems"])
        items = schema.get("items")
        for index, item in enumerate(value if isinstance(items, dict) else ()):
            assert isinstance(items, dict)
            found = _check(item, items, root, f"{where}[{index}]", depth + 1)
            if found:
                return found
    return None


def _type_problem(value: Any, schema: dict[str, Any], where: str) -> str | None:
    kinds = schema.get("type")
    if kinds is None:
        return None
    allowed = [kinds] if isinstance(kinds, str) else list(kinds)
    if any(_is(value, kind) for kind in allowed):
        return None
    return _(
        "{where} is {value}, not {expected}",
        where=where or "the report",
        value=_shown(value),
        expected=" or ".join(literal(kind) for kind in allowed),
    )


def _value_problem(value: Any, schema: dict[str, Any], where: str) -> str | None:
    if "const" in schema and value != schema["const"]:
        return _("{where} is {value}, not {expected}", where=where, value=_shown(value), expected=_shown(schema["const"]))
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(str(choice) for choice in schema["enum"])
        return _("{where} is {value}, not one of {choices}", where=where, value=_shown(value), choices=choices)
    if _is(value, "number") and "minimum" in schema and value < schema["minimum"]:
        return _("{where} is {value}, below {minimum}", where=where, value=value, minimum=schema["minimum"])
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return _("{where} is shorter than {count} characters", where=where, count=schema["minLength"])
        if "pattern" in schema and not re.search(schema["pattern"], value[:1000]):
            return _("{where} is {value}, not of its form", where=where, value=_shown(value))
    return None


def _object_problem(value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any], where: str, depth: int) -> str | None:
    prefix = f"{where}." if where else ""
    for key in schema.get("required", ()):
        if key not in value:
            return _("{where} has no {key}", where=where or "the report", key=key)
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            found = _check(item, properties[key], root, prefix + str(key), depth + 1)
        elif extra is False:
            found = _("{where} has {key}, which it may not have", where=where or "the report", key=key)
        elif isinstance(extra, dict):
            found = _check(item, extra, root, prefix + str(key), depth + 1)
        else:
            found = None
        if found:
            return found
    return None
