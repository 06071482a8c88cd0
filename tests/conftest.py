from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# Hypothesis keeps what it learns under its storage directory: a temporary one, never the checkout.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(__import__("tempfile").mkdtemp(prefix="dd-hypothesis-"), "h"))
# The CLI tests start decode-doctor as a process: let them reuse compiled bytecode instead of compiling
# every module again in each process (some environments set PYTHONDONTWRITEBYTECODE).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

REPO = Path(__file__).resolve().parent.parent
LAST = "tests/test_codes.py::test_every_declared_code_is_emitted_by_some_test"
FIXTURES = REPO / "fixtures"
PLUGINS = Path(__file__).resolve().parent / "plugins"
# Tests about one check select it: the bandwidth probe would add a second of measuring to each run.
SWAP_ONLY = ("--select", "swappiness")
KILLHOOK = Path(__file__).resolve().parent / "support" / "killhook"


def kill_at_step(step: int) -> dict[str, str]:
    """The environment of a CLI run that SIGKILLs itself after journal step `step` (support/killhook)."""
    path = os.pathsep.join(p for p in (str(KILLHOOK), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "DD_TEST_KILL_AT_STEP": str(step)}


def sigint_default() -> None:
    """preexec_fn for a child a test interrupts: a shell that runs CI in the background starts every
    process with SIGINT ignored, and Python then never raises KeyboardInterrupt."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under root (symlinks by target), for byte-identical comparisons."""
    digest = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            digest[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            digest[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            digest[rel] = "dir"
    return digest


def pytest_configure(config: pytest.Config) -> None:
    """Tests write nowhere but temporary directories: decode-doctor's default state directory (fix
    journals, the --redact-hosts mapping, the bandwidth cache) is one for this session."""
    import tempfile

    from .support import emitted

    os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="dd-test-state-")
    # English unless a test asks for Chinese, whatever this machine's locale; the catalogs compiled
    # from the .po as committed (an editable install compiled them once, maybe before an edit)
    os.environ["DECODE_DOCTOR_LANG"] = "en"
    # a program value (None, True, a state's machine word) given to a sentence fails the test that
    # reached it, in this process and in every decode-doctor it starts (doctor/i18n: raw_value)
    os.environ["DECODE_DOCTOR_STRICT_SENTENCES"] = "1"
    from decode_doctor.i18n.compile import compile_catalogs

    compile_catalogs()
    from hypothesis import settings

    settings.register_profile("decode-doctor", database=None)  # no .hypothesis/ written into the checkout
    settings.load_profile("decode-doctor")
    emitted.install()


def pytest_unconfigure(config: pytest.Config) -> None:
    from .support import emitted

    emitted.remove()
    shutil.rmtree(os.environ.get("XDG_STATE_HOME", "/nonexistent"), ignore_errors=True)
    shutil.rmtree(os.path.dirname(os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY", "/nonexistent/h")), ignore_errors=True)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The test that reads which codes the suite emitted runs last."""
    items.sort(key=lambda item: item.nodeid == LAST)


@pytest.fixture
def host(tmp_path: Path):
    """Copies a fixture host tree into tmp_path, so fixes never touch the repository."""

    def make(name: str) -> Path:
        target = tmp_path / "hosts" / name
        shutil.copytree(FIXTURES / "hosts" / name, target, symlinks=True)
        return target

    return make


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


BOOTSTRAP = (
    "import site, sys; site.addsitedir({site!r}); from decode_doctor.cli.main import main; "
    "sys.argv[0] = 'decode-doctor'; main(sys.argv[1:])"
)


def python_for(user: str) -> str | None:
    """An interpreter of this Python version that user can execute, or None.

    This virtualenv's interpreter may live under /root (pyenv); the distribution's binary of the
    same version runs our site-packages just as well.
    """
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, f"/usr/bin/{version}", f"/usr/local/bin/{version}"):
        if not os.path.exists(candidate) or shutil.which("runuser") is None:
            continue
        site = sysconfig.get_paths()["purelib"]
        probe = subprocess.run(
            ["runuser", "-u", user, "--", candidate, "-c", BOOTSTRAP.format(site=site), "--version"],
            capture_output=True,
            text=True,
            cwd="/",
            stdin=subprocess.DEVNULL,
        )
        if probe.returncode == 0 and "decode-doctor" in probe.stdout:
            return candidate
    return None


# setpriv starts a uid-0 child without the two capabilities that read and search past any file's mode
DROP_DAC = ("setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-dac_override,-dac_read_search", "--")


@dataclass(frozen=True)
class Unprivileged:
    """How run_dd(unprivileged=True) starts a decode-doctor that a file's mode refuses: an argv prefix, or another user."""

    prefix: tuple[str, ...] = ()
    user: str | None = None


def _as_owner() -> tuple[str, ...]:
    """setpriv's prefix that runs a child as the user who owns this checkout (root's own: none)."""
    owner = REPO.stat()
    if owner.st_uid == 0:
        return ()
    return ("setpriv", f"--reuid={owner.st_uid}", f"--regid={owner.st_gid}", "--clear-groups", "--")


@functools.cache
def unprivileged_child() -> Unprivileged | str:
    """How this session starts a decode-doctor that a mode-000 file refuses, or why it cannot.

    Not root: the child as it is. Root: the same uid 0 without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH
    (setpriv), which still owns what root owns, so no other user need reach this checkout and its
    interpreter (a clone under /root or in a mode-700 directory); in another user's clone (sudo in a
    private home), that user. Else user nobody, where it can run them.
    """
    tried = []
    with tempfile.TemporaryDirectory(prefix="dd-probe-") as top:
        os.chmod(top, 0o755)  # the file's own mode refuses, not its directory's
        locked = Path(top) / "locked"
        locked.touch()
        locked.chmod(0)
        probe = f"import decode_doctor\ntry:\n    open({str(locked)!r})\nexcept PermissionError:\n    print('refused')"
        candidates = {f"uid {os.geteuid()}": (), "uid 0 without CAP_DAC_OVERRIDE (setpriv)": DROP_DAC}
        if os.geteuid() == 0 and (owner := _as_owner()):
            candidates[f"this checkout's owner, uid {REPO.stat().st_uid} (setpriv)"] = owner
        for who, prefix in candidates.items():
            if prefix and shutil.which(prefix[0]) is None:
                tried.append(f"{who}: {prefix[0]} is not installed")
                continue
            argv = [*prefix, sys.executable, "-c", probe]
            proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, stdin=subprocess.DEVNULL)
            if proc.stdout.strip() == "refused":
                return Unprivileged(prefix)
            said = proc.stderr.strip().splitlines()
            tried.append(f"{who}: {said[-1] if said else 'reads a mode-000 file'}")
    if python_for("nobody"):
        return Unprivileged(user="nobody")
    tried.append("user nobody: can run no interpreter with this checkout's packages")
    return "no process here that a file's mode refuses: " + "; ".join(tried)


def need_unprivileged() -> Unprivileged:
    """The unprivileged child, or a skip that says why this session has none (a test whose code another
    test also proves; one that is the only proof of its code skips through emitted.unprovable)."""
    how = unprivileged_child()
    if isinstance(how, str):
        pytest.skip(how)
    return how


def run_dd(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    cwd: Path | None = None,
    user: str | None = None,
    unprivileged: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Runs decode-doctor as a user would: a fresh process, its real exit code and streams.

    unprivileged: a process that file modes bind (unprivileged_child), wherever this session can start one."""
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    from .support.emitted import child_env

    prefix: tuple[str, ...] = ()
    if unprivileged:
        how = unprivileged_child()
        assert not isinstance(how, str), how
        prefix, user = how.prefix, how.user or user
    argv = [*prefix, sys.executable, "-m", "decode_doctor", *args]
    if user:
        python = python_for(user)
        assert python, f"user {user} cannot run decode-doctor here"
        kept = [f"{k}={v}" for k, v in full_env.items() if k in ("PATH", "NO_COLOR", "HOME", *(env or {}))]
        bootstrap = BOOTSTRAP.format(site=sysconfig.get_paths()["purelib"])
        if not env or "PYTHONPATH" not in env:  # the code gate's hook, loaded once the checkout is importable
            hook = Path(__file__).parent / "support" / "emitted_site" / "sitecustomize.py"
            kept.append(f"DD_EMITTED_LOG={child_env({})['DD_EMITTED_LOG']}")
            bootstrap = bootstrap.replace("from decode_doctor", f"exec(open({str(hook)!r}).read()); from decode_doctor", 1)
        argv = ["runuser", "-u", user, "--", "env", "-i", *kept, python, "-c", bootstrap, *args]
    if not user:
        full_env = child_env(full_env)  # its checks' findings count for the code gate (tests/support/emitted.py)
    return subprocess.run(argv, capture_output=True, text=True, env=full_env, timeout=timeout, cwd=cwd or REPO, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def docker_host():
    """A real Engine: the one .ci/run started (DD_TEST_DOCKER_HOST), else a private one started here."""
    from .support.services import dockerd

    if os.environ.get("DD_TEST_DOCKER_HOST"):
        yield os.environ["DD_TEST_DOCKER_HOST"]
        return
    if os.geteuid() != 0:  # it would wait 30 s for a dockerd that refuses to start
        pytest.skip("a private dockerd needs root (DD_TEST_DOCKER_HOST names an Engine to use instead)")
    try:
        with dockerd() as host:
            yield host
    except FileNotFoundError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def registry_with_image(docker_host):
    """A real docker-registry on 127.0.0.1 holding a tiny image pushed by the real Engine."""
    from .support.services import push_tiny_image, registry

    if os.environ.get("DD_TEST_REGISTRY"):
        host = os.environ["DD_TEST_REGISTRY"]
        yield host, push_tiny_image(docker_host, host)
        return
    try:
        with registry() as host:
            yield host, push_tiny_image(docker_host, host)
    except FileNotFoundError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))


@pytest.fixture(autouse=True)
def _english_after_each_test():
    """A test that ran a command in Chinese (in this process) leaves the next one in English."""
    yield
    from decode_doctor import i18n

    i18n.use(i18n.ENGLISH)


@pytest.fixture
def busy_loops() -> Iterator[None]:
    """Two processes spinning beside the test: the load a bound must hold under, or a node whose CPUs serve."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
