"""Selection and configuration: --select/--ignore, and [tool.decode-doctor] or decode-doctor.toml."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib  # pyright: ignore[reportMissingImports]

from ..i18n import _, localized, os_reason
from .findings import FAIL_ON_LEVELS, Finding

KNOWN_KEYS = {"select", "ignore", "fail-on", "timeout"}


class ConfigError(Exception):
    pass


@dataclass
class Config:
    source: str | None = None  # the file (and table) it came from; None: no configuration
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # ignore selector → why
    fail_on: str | None = None
    timeout: float | None = None


def _parse(table: dict[str, object], source: str) -> Config:
    unknown = set(table) - KNOWN_KEYS
    if unknown:
        raise ConfigError(
            _(
                "{source}: unknown key(s) {unknown}; known: {known}",
                source=source,
                unknown=", ".join(sorted(unknown)),
                known=", ".join(sorted(KNOWN_KEYS)),
            )
        )
    config = Config(source=source)
    select = table.get("select", [])
    if not isinstance(select, list) or not all(isinstance(s, str) for s in select):
        raise ConfigError(_("{source}: select must be a list of codes or check names", source=source))
    config.select = select
    ignore = table.get("ignore", [])
    if not isinstance(ignore, list):
        raise ConfigError(
            _(
                '{source}: ignore must be a list of codes or {{code = "…", reason = "…"}} tables, not {ignore:.40}',
                source=source,
                ignore=repr(ignore),
            )
        )
    for item in ignore:
        if isinstance(item, str):
            config.ignore.append(item)
        elif isinstance(item, dict) and isinstance(item.get("code"), str):
            config.ignore.append(item["code"])
            if item.get("reason"):
                config.reasons[item["code"]] = str(item["reason"])
        else:
            raise ConfigError(
                _('{source}: ignore items are codes or {{code = "…", reason = "…"}} tables, not {item:.40}', source=source, item=repr(item))
            )
    fail_on = table.get("fail-on")
    if fail_on is not None and (not isinstance(fail_on, str) or fail_on not in FAIL_ON_LEVELS):
        raise ConfigError(_("{source}: fail-on must be one of {levels}", source=source, levels=", ".join(FAIL_ON_LEVELS)))
    config.fail_on = fail_on
    timeout = table.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 7 * 86400):
        raise ConfigError(_("{source}: timeout must be a number of seconds above 0 and at most a week", source=source))
    config.timeout = float(timeout) if timeout is not None else None
    return config


def _read_toml(path: Path) -> dict[str, object]:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(_("cannot read {path}: {strerror}", path=path, strerror=localized(os_reason(exc)))) from None
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError, not UTF-8, a 5,000-digit number
        raise ConfigError(_('{path} is not valid TOML ("{detail}")', path=path, detail=str(exc))) from None


def _table(data: dict[str, object], source: str) -> dict[str, object]:
    if "tool" in data:
        tool = data["tool"]
        if not isinstance(tool, dict) or "decode-doctor" not in tool:
            raise ConfigError(_("{source} has no [tool.decode-doctor] table", source=source))
        data = tool["decode-doctor"]
    if not isinstance(data, dict):
        raise ConfigError(_("{source}: [tool.decode-doctor] must be a table, not {name}", source=source, name=type(data).__name__))
    return data


def load_config(explicit: Path | None, cwd: Path) -> Config:
    if explicit is not None:
        return _parse(_table(_read_toml(explicit), str(explicit)), str(explicit))
    own = cwd / "decode-doctor.toml"
    if own.is_file():
        return _parse(_table(_read_toml(own), str(own)), str(own))
    pyproject = cwd / "pyproject.toml"
    if pyproject.is_file():
        tool = _read_toml(pyproject).get("tool", {})
        table = tool.get("decode-doctor") if isinstance(tool, dict) else None
        if table is not None:
            return _parse(_table({"tool": tool}, str(pyproject)), f"{pyproject} [tool.decode-doctor]")
    return Config()


def split_selectors(values: Iterable[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def matches(selector: str, check: str, code: str) -> bool:
    """A selector is a check name, a full code, or a code prefix (like ruff's "SWAP")."""
    return selector == check or code.startswith(selector)


def check_selected(selectors: list[str], check: str, codes: Iterable[str]) -> bool:
    if not selectors:
        return True
    code_list = list(codes)
    return any(selector == check or any(c.startswith(selector) for c in code_list) for selector in selectors)


def ignored_by(finding: Finding, ignore: list[str], select: list[str]) -> str | None:
    """The selector that filters this finding out, if any."""
    for selector in ignore:
        if matches(selector, finding.check, finding.code):
            return selector
    if select and not any(matches(s, finding.check, finding.code) for s in select):
        return "not selected"
    return None
