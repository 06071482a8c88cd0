"""Redaction for support bundles: structural first (fields marked sensitive where they are made,
secret-named environment variables, Docker auths, URL credentials, Authorization headers), then
patterns as a second net, then every secret value found anywhere replaced everywhere; a leak
self-check runs over the finished files before anything is written."""

from __future__ import annotations

import bisect
import functools
import ipaddress
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..i18n import _
from .textsafe import terminal_safe

SENSITIVE_NAME = re.compile(r"TOKEN|SECRET|KEY|PASSWORD|PASSWD|AUTH|CREDENTIAL", re.I)
SENSITIVE_JSON_KEYS = {"auth", "auths", "password", "identitytoken", "registrytoken", "token", "access_token", "authorization", "secret"}

PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{6,}\.eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}")),
    ("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("aws-secret-key", re.compile(r"(?i)(?<=aws_secret_access_key)(\s*[=:]\s*[\"']?)([A-Za-z0-9/+=]{40})")),
    ("openai-key", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}")),
    ("authorization-header", re.compile(r"(?i)(?<=authorization)([\"']?\s*[:=]\s*[\"']?)([^\r\n\"',}]+)")),
    # "api_password": "…", DB_PASSWORD=…, client_secret: … in configs and command output
    (
        "secret-setting",
        re.compile(
            r"(?i)((?:password|passwd|secret|api[_-]?key|access[_-]?key|private[_-]?key)[\"']?\s*[:=]\s*[\"']?)"
            r"(?!\[REDACTED)([^\s\"',;}]{3,})"
        ),
    ),
    ("bearer-token", re.compile(r"(?i)(?<=bearer )([A-Za-z0-9._~+/=-]{8,})")),
    # user:password up to the last @ before the host, so a password holding @ goes whole
    ("url-credentials", re.compile(r"(?<=://)([^/\s:@\"']{1,256}:[^/\s\"']{1,256})(?=@[^/\s@\"']+)")),
    ("docker-auth", re.compile(r"(?<=\"auth\")(\s*:\s*\")([A-Za-z0-9+/=]{8,})")),
]
# A PEM private key in any framing: raw lines, indented under a YAML `key: |`, commented out with
# `# `, JSON-escaped (`\n` as two characters) or cut short by an output limit. Found by its BEGIN
# line; it ends at the next END line (found once for the whole text: linear time), else where the
# base64 and its framing stop.
PEM_BEGIN = re.compile(r"-----BEGIN (?:[A-Z0-9 ]{1,40} )?PRIVATE KEY-----")
PEM_END = re.compile(r"-----END (?:[A-Z0-9 ]{1,40} )?PRIVATE KEY-----")
PEM_SPAN = 1 << 16  # no private key is longer; an END further away belongs to another key
PEM_FRAMING = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/= \t\r\n#>|\"'\\:,-")
PEM_BODY = re.compile(r"[A-Za-z0-9+/=]{16,}")
# what the leak check looks for: a key's marker followed, through any framing, by its body
PEM_LEAK = re.compile(r"PRIVATE KEY-----(?:\\[nr]|[\s#>|\"'])*[A-Za-z0-9+/]{16}")
# a value no name marks as secret, that looks like one: a token of base64/hex/url-safe characters
# with a long random-looking run (16+ characters, letters and digits, no structure of short words)
TOKEN_VALUE = re.compile(r"[A-Za-z0-9+/=_.~:-]{20,1024}")
TOKEN_SEGMENTS = re.compile(r"[-_.:~]")  # not "/": base64 holds it
UUID_LIKE = re.compile(r"(?:GPU-|MIG-)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
AWS_SECRET_NEAR_KEY = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])")
IPV4 = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b")
IPV6 = re.compile(r"(?<![0-9A-Fa-f:])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![0-9A-Fa-f:])")
URL_HOST = re.compile(r"(?<=://)((?:[^/\s@\"']{1,512}@)?)([A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,10})")
PROXY_LIST = {"no_proxy"}
PLACEHOLDER = re.compile(r"^(?:host|user|ip)-\d+$")
KEEP_HOSTS = {"localhost", "ip6-localhost"}
# Public services named in URLs say what a host talks to, not who it is: kept under --redact-hosts.
PUBLIC_DOMAINS = (
    "docker.io", "docker.com", "huggingface.co", "hf.co", "github.com", "githubusercontent.com", "ghcr.io", "quay.io",
    "gcr.io", "nvidia.com", "nvcr.io", "pytorch.org", "pypi.org", "pythonhosted.org", "ubuntu.com", "debian.org",
)  # fmt: skip
HOME = re.compile(r"/home/([A-Za-z0-9._-]+)")
# root's home as a path (file:///root/…, HOME=/root), not the word: "--root", "pytest-of-root" stay
ROOT_HOME = re.compile(r"(?<![\w.~-])/root(?![\w.-])")
ROOT_PLACEHOLDER = "user-0"  # root's home: a fixed name, since "root" itself is a word no check could scrub
REGISTRY_KEYS = {"auths", "credhelpers"}  # Docker config keys whose own keys are registry hosts


def _public(host: str) -> bool:
    return any(host == domain or host.endswith("." + domain) for domain in PUBLIC_DOMAINS)


def placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


@dataclass
class Redactor:
    enabled: bool = True
    terminal: bool = False  # the output is read on a terminal (text, Markdown): control characters escaped
    hosts: bool = False  # --redact-hosts
    secrets: set[str] = field(default_factory=set)  # every secret value seen, for the value pass and the leak check
    mapping: dict[str, str] = field(default_factory=dict)  # host mode: real value → placeholder
    known_hosts: set[str] = field(default_factory=set)
    known_users: set[str] = field(default_factory=set)
    root_home: bool = False  # /root was replaced (said in the local mapping, not scrubbed as a word)
    notes: list[str] = field(default_factory=list)  # what was redacted on suspicion, not by a rule: for the bundle to say

    # --- structural ---

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        out = {}
        for name, value in sorted(env.items()):
            if self.enabled and SENSITIVE_NAME.search(name):
                self._secret(value)
                out[name] = placeholder("by-name")
            elif self.enabled and random_token(value):
                self._secret(value)
                out[name] = placeholder("high-entropy")
                self.notes.append(_("{name}: its value looks like a key or token (a long random-looking run), redacted", name=name))
            elif self.enabled and self.hosts and name.lower() in PROXY_LIST:  # a list of host names and domains
                out[name] = ",".join(self._list_entry(entry) for entry in value.split(","))
            else:
                out[name] = self.text(value)
        return out

    def json(self, value: Any, key: str = "") -> Any:
        if not self.enabled:  # the user's own output: only the values the command knows are secret go
            return self._known_json(value) if self.secrets or self.terminal else value
        rename = self.registry if self.hosts and key.lower() in REGISTRY_KEYS else None
        if key.lower() in SENSITIVE_JSON_KEYS:
            for leaf in _leaves(value):
                self._secret(str(leaf))
            return placeholder(key.lower()) if not isinstance(value, (dict, list)) else _blank(value, key.lower(), rename)
        if rename and isinstance(value, dict):
            return {rename(str(k)): self.json(v, str(k)) for k, v in value.items()}
        if isinstance(value, dict):
            return {k: self.json(v, str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.json(v, key) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value

    def finding(self, finding: dict[str, Any]) -> dict[str, Any]:
        """A finding's evidence keys listed in `sensitive` are dropped to placeholders."""
        if not self.enabled:
            return self.json(finding)
        evidence = dict(finding.get("evidence") or {})
        for key in finding.get("sensitive") or []:
            if key in evidence:
                for leaf in _leaves(evidence[key]):
                    self._secret(str(leaf))
                evidence[key] = placeholder("sensitive-field")
        return self.json({**finding, "evidence": evidence})

    # --- patterns and values ---

    def text(self, text: str) -> str:
        if not text:
            return text
        if not self.enabled:  # the user's own output (text): only the values the command knows are secret go
            return terminal_safe(self._known(text)) if self.terminal else self._known(text)
        if "PRIVATE KEY-----" in text:
            text = self._pem(text)
        for kind, pattern in PATTERNS:
            text = pattern.sub(functools.partial(self._replace, kind=kind), text)
        if "[REDACTED:aws-access-key]" in text:  # the secret key usually sits right beside the access key
            text = AWS_SECRET_NEAR_KEY.sub(lambda m: self._replace_value(m.group(0), "aws-secret-key"), text)
        for secret in sorted(self.secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, placeholder("value"))
        if self.hosts:
            text = self._hosts(text)
        return terminal_safe(text) if self.terminal else text

    def _known(self, text: str) -> str:
        for secret in sorted(self.secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, placeholder("value"))
        return text

    def _known_json(self, value: Any, depth: int = 0) -> Any:
        if depth > 64:
            return value
        if isinstance(value, dict):
            return {self._known(k) if isinstance(k, str) else k: self._known_json(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._known_json(v, depth + 1) for v in value]
        return self.text(value) if isinstance(value, str) else value

    def _pem(self, text: str) -> str:
        ends = [match.span() for match in PEM_END.finditer(text)]
        out, position = [], 0
        for begin in PEM_BEGIN.finditer(text):
            if begin.start() < position:
                continue
            after = bisect.bisect_left(ends, (begin.end(), 0))
            if after < len(ends) and ends[after][0] - begin.end() <= PEM_SPAN:
                stop = ends[after][1]
            else:  # cut short: up to where the base64 and its framing stop
                stop = begin.end()
                limit = min(len(text), begin.end() + PEM_SPAN)
                while stop < limit and text[stop] in PEM_FRAMING:
                    stop += 1
            for run in PEM_BODY.findall(text, begin.end(), stop):
                self._secret(run.removeprefix("n"))  # a JSON-escaped key: "\nMIIE…" reads "nMIIE…"
            out += [text[position : begin.start()], placeholder("pem-private-key")]
            position = stop
        return "".join(out) + text[position:]

    def _replace(self, match: re.Match[str], kind: str) -> str:
        if match.lastindex and match.lastindex >= 2:  # (prefix)(secret)
            self._secret(match.group(2))
            return match.group(1) + placeholder(kind)
        return self._replace_value(match.group(match.lastindex or 0), kind)

    def _replace_value(self, value: str, kind: str) -> str:
        self._secret(value)
        return placeholder(kind)

    def _secret(self, value: str) -> None:
        value = value.strip()
        if len(value) >= 6 and not value.startswith("[REDACTED"):
            self.secrets.add(value)

    # --- host names, addresses, users (--redact-hosts) ---

    def _list_entry(self, entry: str) -> str:
        name = entry.strip().lstrip(".")
        if not name or name in KEEP_HOSTS or name.startswith(("127.", "::1", "*")) or PLACEHOLDER.match(name):
            return entry
        return entry.replace(name, self._stable(name, "ip" if IPV4.fullmatch(name.split("/")[0]) else "host"))

    def _stable(self, value: str, kind: str) -> str:
        if PLACEHOLDER.match(value) or value in self.mapping.values():
            return value  # never a placeholder of a placeholder
        if value not in self.mapping:
            count = sum(1 for v in self.mapping.values() if v.startswith(kind + "-")) + 1
            self.mapping[value] = f"{kind}-{count}"
        return self.mapping[value]

    def _hosts(self, text: str) -> str:
        def ip(match: re.Match[str]) -> str:
            try:
                address = ipaddress.ip_address(match.group(0))
            except ValueError:
                return match.group(0)
            if address.is_loopback or address.is_unspecified or str(address).startswith("255."):
                return match.group(0)
            return self._stable(match.group(0), "ip")

        text = IPV4.sub(ip, text)
        text = IPV6.sub(ip, text)
        text = URL_HOST.sub(self._url_host, text)
        for user in HOME.findall(text):
            if not PLACEHOLDER.match(user):
                self.known_users.add(user)
        text = HOME.sub(lambda m: "/home/" + self._stable(m.group(1), "user"), text)
        if "/root" in text:
            replaced = ROOT_HOME.sub("/home/" + ROOT_PLACEHOLDER, text)
            self.root_home = self.root_home or replaced != text
            text = replaced
        for host in sorted(self.known_hosts, key=len, reverse=True):
            # a whole name, and not the first word of a dotted identifier ("vm" in vm.swappiness)
            if len(host) >= 2 and host in text:
                pattern = rf"(?<![\w.-]){re.escape(host)}(?![\w-]|\.[a-z])"
                if re.search(pattern, text):
                    text = re.sub(pattern, self._stable(host, "host"), text)
        for user in sorted(self.known_users, key=len, reverse=True):
            if len(user) >= 3 and not PLACEHOLDER.match(user):
                text = user_name(user).sub(self._stable(user, "user"), text)
        return text

    def _url_host(self, match: re.Match[str]) -> str:
        host = match.group(2)
        public = _public(host)
        if public or host in KEEP_HOSTS or PLACEHOLDER.match(host) or host.replace(".", "").isdecimal():
            return match.group(0)  # addresses have their own pass
        return match.group(1) + self._stable(host, "host")

    def registry(self, name: str) -> str:
        """A registry as Docker's config names it ("https://registry.corp:5000/v1/", "registry.corp:5000"):
        a private host becomes its placeholder everywhere; public registries stay."""
        scheme, sep, rest = name.partition("://") if "://" in name else ("", "", name)
        address, slash, path = rest.partition("/")
        host, colon, port = address.partition(":")
        public = _public(host)
        if not host or public or host in KEEP_HOSTS or PLACEHOLDER.match(host):
            return name
        if not IPV4.fullmatch(host):
            self.known_hosts.add(host)
        replaced = self._stable(host, "ip" if IPV4.fullmatch(host) else "host")
        return scheme + sep + replaced + colon + port + slash + path

    def path_name(self, name: str) -> str:
        """A member name of the bundle (raw/files/…/home/alice/…): redacted like its contents."""
        return self.text(name)

    def host_name(self, host: str) -> str:
        """The host's name as the bundle's file name and the HTML title show it."""
        return self._stable(host, "host") if self.enabled and self.hosts and host and host not in KEEP_HOSTS else host

    # --- the last net ---

    def leaks(self, files: Mapping[str, bytes]) -> list[str]:
        """What is still in the files, or in their names: secret values seen during collection, pattern
        matches, and (host mode) host names, addresses and home paths. An empty list means the bundle may
        be written."""
        if not self.enabled:
            return []
        problems = []
        for member, content in [(_("{name} (its name)", name=name), name.encode()) for name in files] + list(files.items()):
            name, text = member, content.decode("utf-8", errors="replace")
            for secret in self.secrets:
                if secret in text:
                    problems.append(_("{name}: a secret value ({secret}…) is still present", name=name, secret=secret[:4]))
            for kind, pattern in PATTERNS:
                for match in pattern.finditer(text):
                    value = match.group(match.lastindex or 0)
                    if not value.startswith("[REDACTED"):
                        problems.append(_("{name}: {kind} pattern still matches", name=name, kind=kind))
                        break
            if PEM_LEAK.search(text) or PEM_BEGIN.search(text) or PEM_END.search(text):  # a marker left means a body may be
                problems.append(_("{name}: a private key is still present", name=name))
            if self.hosts:
                for real in self.mapping:
                    user = self.mapping[real].startswith("user-")
                    if len(real) >= 3 and (user_name(real).search(text) if user else real in text):
                        problems.append(
                            _("{name}: {mapping} ({real}…) is still present", name=name, mapping=self.mapping[real], real=real[:2])
                        )
                homes = [user for user in HOME.findall(text) if not PLACEHOLDER.match(user)]
                if homes or ROOT_HOME.search(text):
                    problems.append(_("{name}: a home path is still present", name=name))
        return problems

    def local_mapping(self) -> dict[str, str]:
        """placeholder → real value, for the mapping file kept on this host."""
        mapping = {placeholder: real for real, placeholder in self.mapping.items()}
        if self.root_home:
            mapping[ROOT_PLACEHOLDER] = "root"
        return mapping


def user_name(user: str) -> re.Pattern[str]:
    """A user's name as a word of its own, where a hyphen, underscore or dot also ends a word: the
    name in /tmp/pytest-of-alice is the user's, in "malice" it is not. Scrubbing and the leak check
    use this one pattern, so the check never refuses what the scrubbing rightly left."""
    return re.compile(rf"(?<![A-Za-z0-9]){re.escape(user)}(?![A-Za-z0-9])")


def random_token(value: str) -> bool:
    """A value that looks like a key or token: one word of token characters, holding a run of 16 or
    more without separators that mixes letters and digits and is not a word (hex digests, base64,
    url-safe tokens do; model names, paths, UUIDs and settings do not)."""
    value = value.strip()
    if not TOKEN_VALUE.fullmatch(value) or value.startswith(("/", "./", "~")) or UUID_LIKE.fullmatch(value):
        return False
    for run in TOKEN_SEGMENTS.split(value):
        letters = sum(c.isalpha() for c in run)
        digits = sum(c.isdecimal() for c in run)
        if len(run) < 16 or letters < 4:
            continue
        entropy = _entropy(run)
        mixed_case = any(c.islower() for c in run) and any(c.isupper() for c in run)
        if (digits >= 1 and entropy >= 3.0) or (mixed_case and len(run) >= 24 and entropy >= 4.2):
            return True
    return False


def _entropy(text: str) -> float:
    counts: dict[str, int] = {}
    for char in text:
        counts[char] = counts.get(char, 0) + 1
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _blank(value: Any, kind: str, rename: Any = None) -> Any:
    """Keeps the shape (registry names in `auths`, renamed under --redact-hosts), drops every value."""
    if isinstance(value, dict):
        return {(rename(str(k)) if rename else k): _blank(v, kind) for k, v in value.items()}
    if isinstance(value, list):
        return [_blank(v, kind) for v in value]
    return placeholder(kind)
