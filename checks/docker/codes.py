"""The docker feature's codes, each with its explanation in fixed sections, and the typed values its
fixes take."""

from __future__ import annotations

from dataclasses import dataclass

from decode_doctor.engine import Code, CommandsParams, FixableCode, FixParams, Severity


@dataclass(frozen=True)
class ClassicStoreParams(FixParams):
    """Switch dockerd to the classic image store (features.containerd-snapshotter: false)."""


@dataclass(frozen=True)
class RemoveMirrorParams(FixParams):
    """Remove this mirror from daemon.json's registry-mirrors."""

    mirror: str


MIN_API = "1.24"  # the docker SDK's floor

CONFIGURE = "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker"

GENERATE_CDI = "sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"

INSTALL = "install the NVIDIA Container Toolkit (apt-get install nvidia-container-toolkit, from NVIDIA's repository)"

DISPLAY_ONLY = (
    "Display-only: decode-doctor prints the commands (they install packages or restart dockerd, which it "
    "never does for you); run them yourself."
)

INDEX_TYPE = "application/vnd.oci.image.index.v1+json"

MAX_INDEX_BYTES = 4 * 1048 * 1048  # containerd's limit on a referrers body


DKR003 = Code(
    "DKR003",
    "The Docker daemon is not running",
    Severity.ERROR,
    what="Docker is installed but nothing answers on the Engine socket (no socket file, or a stale one: connection refused).",
    why='docker pull and docker run fail with "Cannot connect to the Docker daemon".',
    fix_by_hand="sudo systemctl start docker (and enable it: sudo systemctl enable --now docker); check journalctl -u docker for why it "
    "stopped.",
    example='/var/run/docker.sock exists but refuses connections (dockerd crashed after an upgrade): docker pull says "Cannot connect '
    'to the Docker daemon".',
)

DKR004 = Code(
    "DKR004",
    "Permission denied on the Docker socket",
    Severity.ERROR,
    what="The Engine's socket exists, but this user may not connect to it.",
    why='Every docker command fails for this user with "permission denied while trying to connect to the Docker daemon socket".',
    fix_by_hand="sudo usermod -aG docker $USER, then log out and in (members of the docker group are root-equivalent); or use rootless "
    "Docker.",
    example='User alice, not in the docker group, runs the check: connecting to /var/run/docker.sock fails with "permission denied".',
)

DKR005 = Code(
    "DKR005",
    "The Docker Engine's API version is too old",
    Severity.ERROR,
    what=f"The Engine speaks an API older than {MIN_API}, the oldest the Docker SDK and current CLIs support.",
    why="Current clients and tools (compose, the SDK, GPU tooling) refuse to talk to it.",
    fix_by_hand="Upgrade Docker Engine.",
    example="Docker 1.11 on a CentOS 7 host answers API 1.23; the Docker SDK needs 1.24 or newer.",
)

DKR010 = Code(
    "DKR010",
    "Little free space for Docker images",
    Severity.WARNING,
    what="The filesystem holding Docker's root directory has less than 50 GB free.",
    why='Inference images (CUDA + PyTorch + engine) are 10–25 GB each, and pulls unpack a second copy; pulls fail with "no space left on '
    'device" half-way.',
    fix_by_hand="docker system prune (removes unused images and build cache), or move data-root to a larger disk in daemon.json.",
    example="/var/lib/docker has 6.2 GB free; a vLLM image is 12 GB and a pull unpacks a second copy while it runs.",
)

DKR020 = FixableCode[ClassicStoreParams](
    "DKR020",
    "Pulls use containerd's referrers API (containerd image store, Engine ≥ 29.1)",
    Severity.INFO,
    what="With the containerd image store, Engine 29.1 and later ask the registry — or the configured mirror — for GET "
    "/v2/<repo>/referrers/<digest> whenever a pulled index carries attestations, and decode any 2xx body as an OCI image index.",
    why="A mirror or proxy that answers that request with 200 and an HTML page, an empty body or other JSON breaks every such pull with "
    '"failed to decode referrers index: invalid character \'<\' looking for beginning of value" (or ": EOF"). It is not an old '
    "client: upgrading does not help.",
    fix_by_hand="Probe the mirrors (decode-doctor check --select referrers); fix or remove a broken mirror (it must answer 404, or a "
    "valid index "
    'with "manifests": []), or switch to the classic store with "features": {"containerd-snapshotter": false} in daemon.json and '
    "restart dockerd — images pulled into the containerd store then disappear from `docker images`.",
    params=ClassicStoreParams,
    fix_safety="Unsafe (needs --unsafe-fixes): sets features.containerd-snapshotter to false in daemon.json, keeping every other key; "
    "journaled "
    "and undoable. decode-doctor never restarts dockerd: it prints the command, and images in the containerd store are hidden until "
    "you switch back.",
    example="Docker 29.1.2 with the containerd image store: pulls of images with attestations ask the configured mirror for "
    "/v2/<repo>/referrers/<digest>.",
)

CTK001 = FixableCode[CommandsParams](
    "CTK001",
    "docker run --gpus will fail: no NVIDIA container hook",
    Severity.ERROR,
    what='dockerd registers its "nvidia" device driver only if it finds nvidia-container-runtime-hook (or, from Engine 29.2, '
    "nvidia-cdi-hook) on its PATH when it starts; neither is installed.",
    why='Every `docker run --gpus all` fails with: could not select device driver "" with capabilities: [[gpu]]. Inference containers '
    "start without GPUs or not at all.",
    fix_by_hand=f"{INSTALL}, then restart dockerd (sudo systemctl restart docker).",
    params=CommandsParams,
    fix_safety=DISPLAY_ONLY,
    example="dockerd's PATH holds neither nvidia-container-runtime-hook nor nvidia-cdi-hook: docker run --gpus all fails with could "
    'not select device driver "" with capabilities: [[gpu]].',
)

CTK002 = FixableCode[CommandsParams](
    "CTK002",
    "No CDI specification for the NVIDIA GPUs",
    Severity.WARNING,
    what="No CDI spec in /etc/cdi or /var/run/cdi names nvidia.com/gpu devices.",
    why="`docker run --device nvidia.com/gpu=all` (CDI, the path newer Engines and Podman prefer) fails without one; the spec also goes "
    "stale after driver upgrades.",
    fix_by_hand=GENERATE_CDI,
    params=CommandsParams,
    fix_safety="Display-only: decode-doctor prints the command (it writes /etc/cdi, which decode-doctor never does for you); "
    "run it yourself.",
    example="/etc/cdi and /var/run/cdi hold no spec that names nvidia.com/gpu: docker run --device nvidia.com/gpu=all fails to resolve "
    "the device.",
)

CTK003 = FixableCode[CommandsParams](
    "CTK003",
    "The nvidia runtime is not configured in Docker",
    Severity.INFO,
    what="daemon.json has no runtimes.nvidia entry.",
    why="Needed only for `--runtime=nvidia` (and images or compose files that ask for it); `--gpus` works without it.",
    fix_by_hand=CONFIGURE,
    params=CommandsParams,
    fix_safety=DISPLAY_ONLY,
    example='daemon.json has "runtimes": {} and a compose file asks for runtime: nvidia.',
)

FIX = (
    'fix or remove the mirror (it must answer 404, or a valid index with "manifests": []), or set '
    '"features": {"containerd-snapshotter": false} in daemon.json; upgrading Docker does not help'
)


REMOVE_MIRROR = (
    "Unsafe (needs --unsafe-fixes), offered for a mirror configured in daemon.json: removes it from "
    "registry-mirrors, keeping every other key and the file's indentation; journaled and undoable. "
    "decode-doctor never restarts dockerd: it prints the command."
)


BROKEN_2XX = (
    "containerd (Docker Engine ≥ 29.1 with the containerd image store) decodes any 2xx answer as an OCI image index, "
    'whatever its Content-Type; this answer makes every pull of an image with attestations fail with "failed to decode referrers '
    'index". '
    "An old Docker client is not the cause, and upgrading does not help."
)


def _code(
    code: str, title: str, what: str, example: str, severity: Severity = Severity.ERROR, why: str = BROKEN_2XX
) -> FixableCode[RemoveMirrorParams]:
    """A referrers answer that breaks pulls: the fix removes the mirror from daemon.json."""
    return FixableCode(
        code,
        title,
        severity,
        what=what,
        example=example,
        params=RemoveMirrorParams,
        fix_safety=REMOVE_MIRROR,
        why=why,
        fix_by_hand=f"The registry or mirror must answer GET /v2/<repo>/referrers/<digest> with 404 or a valid OCI index; meanwhile {FIX}.",
    )


REF001 = _code(
    "REF001",
    "Referrers endpoint answers 200 with HTML",
    "The mirror or proxy answers the referrers request with an HTML page (a login, error or captive portal page): containerd fails with "
    "\"invalid character '<' looking for beginning of value\".",
    "A Nexus mirror answers GET /v2/library/alpine/referrers/sha256:… with 200 text/html (its login page): containerd fails with "
    "invalid character '<' looking for beginning of value.",
)

REF002 = _code(
    "REF002",
    "Referrers endpoint answers 200 with an empty body",
    'An empty 2xx body: containerd fails with "failed to decode referrers index: EOF".',
    "A caching proxy answers the referrers request with 200 and Content-Length: 0: containerd fails with failed to decode referrers "
    "index: EOF.",
)

REF003 = _code(
    "REF003",
    "Referrers endpoint answers JSON that is not an OCI index",
    'The body is JSON, but not an image index with schemaVersion 2 and a manifests array of descriptors (a JSON array, an {"errors": …} '
    "document sent with 200, a null manifests list…).",
    'A mirror answers 200 with {"errors": [{"code": "NOT_FOUND"}]}: JSON, but not an image index.',
)

REF004 = _code(
    "REF004",
    "Referrers endpoint answers more than one JSON value",
    "Data follows the JSON object (a second object, HTML after JSON): containerd rejects trailing data.",
    'A mirror answers 200 with {"schemaVersion": 2, "manifests": []} followed by an HTML footer.',
)

REF005 = _code(
    "REF005",
    "Referrers endpoint answers an oversized body",
    f"The body exceeds {MAX_INDEX_BYTES:,} bytes, containerd's limit for a referrers index.",
    "A misconfigured proxy streams a 20 MB log file as the referrers answer; containerd stops at 4 MiB.",
)

REF006 = Code(
    "REF006",
    "Referrers index served with the wrong Content-Type",
    Severity.WARNING,
    what=f"The index is valid but not served as {INDEX_TYPE}, as the distribution spec requires; containerd ignores it today, other "
    "clients may not.",
    why="A client that checks the media type (as the distribution spec allows) refuses the index and fails the pull; containerd "
    "accepts it today.",
    fix_by_hand="Have the registry or mirror serve referrers with Content-Type application/vnd.oci.image.index.v1+json.",
    example="A registry serves a valid index as application/json instead of application/vnd.oci.image.index.v1+json.",
)

REF007 = _code(
    "REF007",
    "Referrers endpoint answers with a server error",
    "The registry or mirror answers 5xx: pulls that need referrers fail or retry.",
    "The mirror answers the referrers request with 502 Bad Gateway.",
    why="Every pull that asks for referrers fails or retries until the registry or mirror recovers; the fault is on that server's "
    "side, and upgrading Docker does not help.",
)

REF008 = Code(
    "REF008",
    "Registry answers the referrers API correctly",
    Severity.INFO,
    what="404 (then the sha256-<hex> tag fallback) or a valid OCI index: pulls through it are safe.",
    why="Evidence that the mirror is not the problem.",
    fix_by_hand="Nothing to fix.",
    example="registry-1.docker.io answers 404 for the referrers API and 404 for the sha256-<hex> tag fallback: no referrers, pulls are "
    "safe.",
)

REF009 = Code(
    "REF009",
    "Registry could not be probed",
    Severity.WARNING,
    what="The registry or mirror did not answer (DNS, TLS, connection), refused anonymous access, or the image's manifest could not be "
    "resolved.",
    why="decode-doctor cannot vouch for it; the Engine may fail to pull through it for the same reason.",
    fix_by_hand="Check the URL, the network path (proxy, firewall) and credentials; pass --image with an image that exists there.",
    example="https://mirror.internal:5000 does not resolve from this host (DNS), so its referrers answer could not be judged.",
)

CODES_ENGINE = (DKR003, DKR004, DKR005, DKR010, DKR020)
CODES_GPUS = (CTK001, CTK002, CTK003)
CODES_REFERRERS = (REF001, REF002, REF003, REF004, REF005, REF006, REF007, REF008, REF009)
# the answers that break pulls: their fix removes the mirror (by code, for the probe's verdict)
BREAKS_PULLS: dict[str, FixableCode[RemoveMirrorParams]] = {c.code: c for c in (REF001, REF002, REF003, REF004, REF005, REF007)}
RETIRED = {
    "DKR001": "the Engine's versions and settings are now facts (check --verbose, JSON facts.docker)",
    "DKR002": "Docker not being installed is now a fact (the environment table's Docker Engine row)",
}
