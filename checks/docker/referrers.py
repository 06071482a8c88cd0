"""A live probe of registries and mirrors: do they answer the OCI referrers API the way containerd's
client needs ("failed to decode referrers index" otherwise)?"""

from __future__ import annotations

import enum
import hashlib
import ipaddress
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from decode_doctor.engine import Analysis, Check, Code, Context, Finding, FixRef, Needs, Options, Reads, Severity, SkipCheck, option
from decode_doctor.i18n import N_, _

from .codes import (
    BREAKS_PULLS,
    CODES_REFERRERS,
    FIX,
    INDEX_TYPE,
    MAX_INDEX_BYTES,
    REF001,
    REF002,
    REF003,
    REF004,
    REF005,
    REF006,
    REF007,
    REF008,
    REF009,
    RemoveMirrorParams,
)
from .engine import DockerFacts

MANIFEST_TYPES = ", ".join(
    (
        INDEX_TYPE,
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
TIMEOUT_S = 10.0
PROBE_DIGEST = "sha256:" + hashlib.sha256(b"decode-doctor referrers probe").hexdigest()


@dataclass
class Answer:
    status: int | None
    content_type: str
    body: bytes
    error: str | None = None
    url: str = ""
    challenge: str | None = None  # WWW-Authenticate of a 401


# codes.py's FIX, marked here for the catalog (codes.py is read by the explanations' extractor only)
assert (
    N_(
        'fix or remove the mirror (it must answer 404, or a valid index with "manifests": []), or set '
        '"features": {"containerd-snapshotter": false} in daemon.json; upgrading Docker does not help'
    )
    == FIX
)


def _is_local(host: str) -> bool:
    name = host.rsplit(":", 1)[0].strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def parse_reference(ref: str) -> tuple[str, str, str]:
    """(registry host, repository, tag or digest) with Docker's defaults."""
    name, sep, digest = ref.partition("@")
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        host, path = first, rest
    else:
        host, path = "docker.io", name
    if ":" in path.rsplit("/", 1)[-1]:
        path, tag = path.rsplit(":", 1)
    else:
        tag = "latest"
    if host == "docker.io" and "/" not in path:
        path = f"library/{path}"
    return host, path, digest if sep else tag


def base_url(host: str) -> str:
    if host.startswith(("http://", "https://")):
        return host.rstrip("/")
    if host == "docker.io":
        return "https://registry-1.docker.io"
    return f"{'http' if _is_local(host) else 'https'}://{host}"


@dataclass(frozen=True)
class ReferrersOptions(Options):
    registry: tuple[str, ...] = option(
        "--registry",
        "A registry or mirror URL to probe (repeatable; the Engine's mirrors are probed by default).",
        multiple=True,
        default=(),
    )
    image: tuple[str, ...] = option("--image", "An image to resolve and probe (repeatable), e.g. mysql:8.0.", multiple=True, default=())
    no_network: bool = option("--no-network", "Probe nothing over the network.", is_flag=True, default=False)


class Session:
    """Anonymous bearer-token flow, the way the Engine does it."""

    def __init__(self) -> None:
        self.tokens: dict[str, str] = {}

    def get(self, url: str, accept: str, scope_hint: str | None = None, limit: int = MAX_INDEX_BYTES + 1) -> Answer:
        headers = {"Accept": accept, "User-Agent": "decode-doctor"}
        origin = urllib.parse.urlsplit(url).netloc
        if origin in self.tokens:
            headers["Authorization"] = f"Bearer {self.tokens[origin]}"
        answer = self._fetch(url, headers, limit)
        if answer.status == 401 and origin not in self.tokens:
            token = self._token(answer.challenge, scope_hint) if answer.challenge else None
            if token:
                self.tokens[origin] = token
                headers["Authorization"] = f"Bearer {token}"
                answer = self._fetch(url, headers, limit)
        return answer

    def _fetch(self, url: str, headers: dict[str, str], limit: int) -> Answer:
        request = urllib.request.Request(url, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return Answer(response.status, response.headers.get("Content-Type", ""), response.read(limit), url=url)
        except urllib.error.HTTPError as exc:
            return Answer(
                exc.code, exc.headers.get("Content-Type", ""), exc.read(64 * 1024), url=url, challenge=exc.headers.get("WWW-Authenticate")
            )
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            return Answer(None, "", b"", error=str(reason), url=url)

    def _token(self, challenge: str, scope_hint: str | None) -> str | None:
        fields = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        if not challenge.lower().startswith("bearer") or "realm" not in fields:
            return None
        query = {"service": fields.get("service", "")}
        scope = fields.get("scope") or scope_hint
        if scope:
            query["scope"] = scope
        answer = self._fetch(fields["realm"] + "?" + urllib.parse.urlencode(query), {"User-Agent": "decode-doctor"}, 1 << 20)
        if answer.status != 200:
            return None
        try:
            data = json.loads(answer.body)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested beyond reason
            return None
        token = data.get("token") or data.get("access_token") if isinstance(data, dict) else None
        return token if isinstance(token, str) else None


class Served(enum.Enum):
    """An answer of the referrers endpoint that breaks nothing."""

    NOT_FOUND = "404"  # no referrers here: the tag fallback decides
    INDEX = "index"  # a valid index, served as one


OK_404, OK_INDEX = Served.NOT_FOUND, Served.INDEX


def judge_referrers(answer: Answer) -> tuple[Code | Served, str]:
    """(the code, or OK_404 / OK_INDEX, and what came back) for one answer of the referrers endpoint
    (or its tag fallback)."""
    head = answer.body[:80].decode("utf-8", errors="replace")
    if answer.status is not None and answer.status >= 500:
        return REF007, _("HTTP {status}: {head}", status=answer.status, head=repr(head))
    if answer.status is None or not 200 <= answer.status < 300:
        return OK_404 if answer.status == 404 else REF009, _("HTTP {value}", value=answer.status or answer.error)
    if len(answer.body) > MAX_INDEX_BYTES:
        return REF005, _("HTTP {status} with more than {limit:,} bytes", status=answer.status, limit=MAX_INDEX_BYTES)
    text = answer.body.decode("utf-8", errors="replace")
    if not text.strip():
        return REF002, _("HTTP {status} with an empty body (containerd: failed to decode referrers index: EOF)", status=answer.status)
    if text.lstrip().startswith("<"):
        return (
            REF001,
            _(
                "HTTP {status}, {value}: {head} (containerd: invalid character '<' looking for beginning of value)",
                status=answer.status,
                value=answer.content_type or _("no Content-Type"),
                head=repr(head),
            ),
        )
    decoder = json.JSONDecoder()
    try:
        value, end = decoder.raw_decode(text.lstrip())
    except json.JSONDecodeError as exc:
        return REF003, _("HTTP {status}: not JSON ({msg}): {head}", status=answer.status, msg=exc.msg, head=repr(head))
    except (ValueError, RecursionError):
        return REF003, _(
            "HTTP {status}: JSON nested too deeply (or a number too long) to be an index: {head}", status=answer.status, head=repr(head)
        )
    if text.lstrip()[end:].strip():
        return REF004, _(
            "HTTP {status}: data after the JSON value: {value}", status=answer.status, value=repr(text.lstrip()[end : end + 40])
        )
    problem = index_problem(value)
    if problem:
        return REF003, _("HTTP {status}: {problem}: {head}", status=answer.status, problem=problem, head=repr(head))
    if answer.content_type.split(";")[0].strip() != INDEX_TYPE:
        return REF006, _(
            "HTTP {status}: a valid index served as {value}", status=answer.status, value=answer.content_type or _("no Content-Type")
        )
    return OK_INDEX, _("HTTP {status}: a valid index with {count} referrer(s)", status=answer.status, count=len(value["manifests"]))


def index_problem(value: Any) -> str | None:
    if not isinstance(value, dict):
        return _("a JSON {name}, not an object", name=type(value).__name__)
    if "errors" in value and "manifests" not in value:
        return _("an error document sent with a success status")
    if value.get("schemaVersion") != 2:
        return _("schemaVersion is {value}, not 2", value=repr(value.get("schemaVersion")))
    manifests = value.get("manifests")
    if not isinstance(manifests, list):
        return _("manifests is null or not an array")
    for descriptor in manifests:
        if not isinstance(descriptor, dict) or not all(k in descriptor for k in ("mediaType", "digest", "size")):
            return _("a descriptor lacks mediaType, digest or size")
    return None


PULL_ERROR = "failed to decode referrers index"


class Referrers(Check):
    name = "referrers"
    looks_at = (
        "a live probe of the configured mirrors and of `--registry URL` / `--image REF`: anonymous token flow, manifest resolution, "
        "`GET /v2/<repo>/referrers/<digest>` and its tag fallback, each answer judged the way containerd decodes it (HTML, empty body, "
        "non-index JSON, trailing data, oversized, wrong Content-Type, 5xx). `--no-network` probes nothing. Fix (unsafe): remove a "
        "broken mirror from daemon.json"
    )
    description = N_("probes registries and mirrors for the OCI referrers API containerd's pulls depend on")
    codes = CODES_REFERRERS
    needs = Needs(reads=(Reads(DockerFacts),))  # the Engine's image store decides how much a broken mirror matters
    pasted = N_('docker pull\'s "failed to decode referrers index" errors')

    @classmethod
    def analyze(cls, text: str, source: str) -> Analysis | None:
        """A pasted `docker pull` error: containerd's "failed to decode referrers index" says what the
        mirror answered (HTML, nothing, or JSON that is not an index)."""
        check, findings = cls(), []
        for number, line in enumerate(text.splitlines()[:200_000], start=1):
            at = line.find(PULL_ERROR)
            if at < 0:
                continue
            rest = line[at + len(PULL_ERROR) :][:200]
            code = REF001 if "invalid character '<'" in rest else REF002 if rest.strip(" :").startswith("EOF") else REF003
            message = _(
                "docker pull failed with {error}{rest} ({source}, line {number}): a registry or mirror answers the OCI referrers API "
                "with something that is not an index; `decode-doctor check --select docker,referrers` finds which.",
                error=PULL_ERROR,
                rest=rest,
                source=source,
                number=number,
            )
            findings.append(check.finding(code, message, evidence={"source": source, "line": number, "text": line.strip()[:300]}))
            break  # one pull error is the finding; the live probe names the mirror
        return Analysis(findings, kind="docker pull error") if findings else None

    options = ReferrersOptions
    timeout_s = 120.0

    def run(self, ctx: Context) -> list[Finding]:
        options = ctx.option(ReferrersOptions)
        if options.no_network:
            raise SkipCheck("--no-network")
        engine = ctx.facts.get(DockerFacts)
        configured = list(engine.mirrors) if engine is not None else []
        if not ctx.live_devices:  # another host's mirror on its own loopback address: here it would be this machine's
            for local in [m for m in configured if m not in options.registry and _is_local(urllib.parse.urlsplit(base_url(m)).netloc)]:
                ctx.not_judged(_("the mirror {mirror}", mirror=local), ctx.elsewhere)
                configured.remove(local)
        registries = list(options.registry) + [m for m in configured if m not in options.registry]
        images = list(options.image)
        if not registries and not images:
            if ctx.unjudged:  # only mirrors this machine cannot probe for another host: said, not "nothing to probe"
                return []
            raise SkipCheck(_("no registry to probe (no mirrors configured; pass --registry URL or --image REF)"))
        # a broken mirror is an error where pulls go through the referrers client, or where that is unknown
        exposed = engine.referrers_exposed if engine is not None and engine.reachable else None
        severity = None if exposed in (True, None) else Severity.WARNING
        session = Session()
        findings = []
        targets: list[tuple[str, str, str | None, bool]] = []  # (base, repository, reference, mirror)
        for registry in registries:
            if not images:
                targets.append((base_url(registry), "library/alpine", None, True))
            for image in images:
                _registry, repo, ref = parse_reference(image)
                targets.append((base_url(registry), repo, ref, True))
        if not registries:
            for image in images:
                registry_host, repo, ref = parse_reference(image)
                targets.append((base_url(registry_host), repo, ref, False))
        for base, repository, reference, mirror in targets:
            findings.append(self._probe(session, base, repository, reference, mirror, configured, severity))
        return findings

    def _probe(
        self, session: Session, base: str, repo: str, ref: str | None, mirror: bool, configured: list[str], severity: Severity | None
    ) -> Finding:
        ns = "?ns=docker.io" if mirror else ""
        scope = f"repository:{repo}:pull"
        evidence: dict[str, Any] = {"registry": base, "repository": repo, "reference": ref}
        digest = PROBE_DIGEST
        if ref is not None:
            if ref.startswith("sha256:"):
                digest = ref
            else:
                answer = session.get(f"{base}/v2/{repo}/manifests/{ref}{ns}", MANIFEST_TYPES, scope)
                evidence["manifest_status"] = answer.status
                if answer.status != 200:
                    unresolved = _(
                        "{base}: cannot resolve {image} (HTTP {status}).",
                        base=base,
                        image=repo + ":" + ref,
                        status=answer.status or answer.error,
                    )
                    return self.finding(REF009, unresolved, evidence=evidence)
                digest = "sha256:" + hashlib.sha256(answer.body).hexdigest()
        evidence["digest"] = digest
        url = f"{base}/v2/{repo}/referrers/{digest}{ns}"
        answer = session.get(url, f"{INDEX_TYPE}, */*", scope)
        evidence.update(
            url=url,
            status=answer.status,
            content_type=answer.content_type,
            first_bytes=answer.body[:200].decode("utf-8", errors="replace"),
            error=answer.error,
        )
        code, what = judge_referrers(answer)
        if code == OK_404:
            fallback = session.get(f"{base}/v2/{repo}/manifests/sha256-{digest.split(':', 1)[1]}{ns}", f"{INDEX_TYPE}, */*", scope)
            evidence.update(fallback_status=fallback.status, fallback_content_type=fallback.content_type)
            if fallback.status == 404:
                return self.finding(
                    REF008, _("{base}: referrers 404, tag fallback 404: no referrers, pulls are safe.", base=base), evidence=evidence
                )
            code, what = judge_referrers(fallback)
            url = fallback.url
            if code in (OK_INDEX, OK_404):
                return self.finding(REF008, _("{base}: referrers 404, tag fallback {what}.", base=base, what=what), evidence=evidence)
        if isinstance(code, Served):  # OK_INDEX
            return self.finding(REF008, _("{base}: {what}.", base=base, what=what), evidence=evidence)
        if code is REF009:
            return self.finding(REF009, _("{base}: the referrers probe got {what}.", base=base, what=what), evidence=evidence)
        message = _("{url} → {what}. Fix: {fix}.", url=url, what=what, fix=_(FIX))
        breaking = BREAKS_PULLS.get(code.code)
        if breaking is None:  # REF006: a valid index with the wrong media type
            return self.finding(code, message, evidence=evidence)
        in_config = [m for m in configured if m.rstrip("/") == base.rstrip("/")]
        fix = (
            FixRef(_("remove the mirror {mirror} from registry-mirrors", mirror=base), RemoveMirrorParams(in_config[0]))
            if in_config
            else None
        )
        return self.finding(breaking, message, evidence=evidence, fix=fix, severity=severity)
