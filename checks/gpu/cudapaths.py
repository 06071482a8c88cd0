"""CUDA path hygiene: which of several toolkits wins on PATH, LD_LIBRARY_PATH and CUDA_HOME; a
libcuda stub on the library path; the host compiler against the one nvcc accepts; PyTorch's CUDA
build against the toolkit an extension build would use. Everything is read as host paths under
--root; symlinks are resolved inside that tree, never out of it. The environment (PATH, LD_LIBRARY_PATH,
CUDA_HOME) and the host compiler are this process's: read for the host it runs on (or --same-host),
never for another host's files."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import PurePosixPath

from decode_doctor.engine import Check, Context, Finding, JSONValue, Severity
from decode_doctor.i18n import Said, _, said

from .codes import GPU027, GPU028, GPU029, GPU031

TOOLKIT_PARENTS = ("/usr/local", "/opt")
MAX_ENTRIES = 64  # PATH / LD_LIBRARY_PATH entries looked at
MAX_HOPS = 16


@dataclass(frozen=True)
class InstalledToolkit:
    root: str  # host path: /usr/local/cuda-12.4
    version: str | None
    gnu_max: int | None  # the newest GCC major its nvcc accepts (crt/host_config.h)


@dataclass(frozen=True)
class Picks:
    """The toolkit each mechanism selects (host paths), "" when it selects none."""

    build: str  # what torch.utils.cpp_extension uses: CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda
    build_from: str
    nvcc: str  # the toolkit whose nvcc is first on PATH
    runtime: str  # the toolkit whose libcudart is first on LD_LIBRARY_PATH
    missing_home: str  # CUDA_HOME / CUDA_PATH naming a directory that is not there


def resolve(ctx: Context, path: str) -> str:
    """A host path with its symlinks resolved inside --root (an absolute link target is a host path)."""
    parts = list(PurePosixPath(path).parts[1:])
    done = PurePosixPath("/")
    hops = 0
    while parts:
        part = parts.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            done = done.parent
            continue
        candidate = done / part
        try:
            target = os.readlink(ctx.host_path(candidate))
        except OSError:  # not a link, or not there
            done = candidate
            continue
        hops += 1
        if hops > MAX_HOPS:
            return str(candidate)
        link = PurePosixPath(target)
        parts = list(link.parts[1:] if link.is_absolute() else link.parts) + parts
        done = PurePosixPath("/") if link.is_absolute() else done
    return str(done)


def _mode(ctx: Context, path: str) -> int:
    """The file type bits of a host path, its links resolved inside the root; 0 when it is not there."""
    try:
        return os.stat(ctx.host_path(resolve(ctx, path))).st_mode
    except (OSError, ValueError):
        return 0


def _is_file(ctx: Context, path: str) -> bool:
    return stat.S_ISREG(_mode(ctx, path))


def _is_dir(ctx: Context, path: str) -> bool:
    return stat.S_ISDIR(_mode(ctx, path))


def gnu_limit(header: str) -> int | None:
    """N from "#if __GNUC__ > N" just before nvcc's "#error -- unsupported GNU version"."""
    last_if = None
    for line in header.splitlines()[:5000]:
        words = line.replace("(", " ").replace(")", " ").split()
        if words[:3] == ["#if", "__GNUC__", ">"] and len(words) > 3 and words[3].isdecimal():
            last_if = int(words[3])
        elif "unsupported GNU version" in line and last_if is not None:
            return last_if
    return None


def _version(ctx: Context, root: str) -> str | None:
    from .nvidia import parse_version_json

    text = ctx.read_text(f"{root}/version.json", limit=1 << 16)
    if text and (version := parse_version_json(text)):
        return version
    text = ctx.read_text(f"{root}/version.txt", limit=4096) or ""
    if text.startswith("CUDA Version ") and text.split()[2:3]:
        return text.split()[2]
    dist = ctx.host_path(f"{root}/dist-info")  # a toolkit assembled from NVIDIA's pip wheels
    if dist.is_dir() and not dist.is_symlink():
        for entry in sorted(dist.iterdir())[:64]:
            if entry.name.startswith("nvidia_cuda_nvcc-") and entry.name.endswith(".dist-info"):
                return entry.name[len("nvidia_cuda_nvcc-") : -len(".dist-info")]
    return None


def installed(ctx: Context) -> list[InstalledToolkit]:
    """The toolkit directories under /usr/local and /opt (cuda, cuda-12.4, …), links left out."""
    found = []
    for parent in TOOLKIT_PARENTS:
        base = ctx.host_path(parent)
        if not base.is_dir() or base.is_symlink():
            continue
        for entry in sorted(base.iterdir())[:256]:
            if not entry.name.startswith("cuda") or entry.is_symlink() or not entry.is_dir():
                continue
            root = f"{parent}/{entry.name}"
            if not _is_dir(ctx, f"{root}/bin") and not _is_dir(ctx, f"{root}/include"):
                continue
            header = ctx.read_text(f"{root}/include/crt/host_config.h") or ctx.read_text(f"{root}/include/host_config.h") or ""
            found.append(InstalledToolkit(root, _version(ctx, root), gnu_limit(header)))
    return found


def _env(ctx: Context, name: str) -> str | None:
    """An environment variable of the judged host's processes: this process's own on the live host (or
    --same-host, as before); another host's files carry none (this machine's PATH is not theirs)."""
    return ctx.env.get(name) if ctx.live_devices else None


def _entries(value: str | None) -> list[str]:
    return [entry for entry in (value or "").split(":")[:MAX_ENTRIES] if entry.startswith("/")]


def _owner(path: str, toolkits: list[InstalledToolkit]) -> str:
    for toolkit in toolkits:
        if path == toolkit.root or path.startswith(toolkit.root + "/"):
            return toolkit.root
    return ""


def picks(ctx: Context, toolkits: list[InstalledToolkit]) -> Picks:
    nvcc_dir = next((d for d in _entries(_env(ctx, "PATH")) if _is_file(ctx, f"{d}/nvcc")), "")
    nvcc = _owner(resolve(ctx, f"{nvcc_dir}/nvcc"), toolkits) if nvcc_dir else ""
    runtime = ""
    for directory in _entries(_env(ctx, "LD_LIBRARY_PATH")):
        real = resolve(ctx, directory)
        base = ctx.host_path(real)
        if base.is_dir() and any(p.name.startswith("libcudart.so") for p in sorted(base.iterdir())[:2048]):
            runtime = _owner(real, toolkits) or real
            break
    missing, build, source = "", "", ""
    for name in ("CUDA_HOME", "CUDA_PATH"):
        value = _env(ctx, name) or ""
        if value.startswith("/"):
            if _is_dir(ctx, value):
                build, source = _owner(resolve(ctx, value), toolkits) or resolve(ctx, value), name
                break
            missing = missing or f"{name}={value}"
    if not build and nvcc:
        build, source = nvcc, "nvcc on PATH"
    if not build and _is_dir(ctx, "/usr/local/cuda"):
        build, source = _owner(resolve(ctx, "/usr/local/cuda"), toolkits), "/usr/local/cuda"
    return Picks(build, source, nvcc, runtime, missing)


def stub_dirs(ctx: Context) -> list[tuple[str, str, bool]]:
    """(where, directory, has libcuda.so.1) for each toolkit stubs/ directory holding a libcuda on the
    dynamic loader's path: LD_LIBRARY_PATH or /etc/ld.so.conf(.d)."""
    candidates = [("LD_LIBRARY_PATH", d) for d in _entries(_env(ctx, "LD_LIBRARY_PATH"))]
    conf_dir = ctx.host_path("/etc/ld.so.conf.d")
    confs = ["/etc/ld.so.conf"]
    if conf_dir.is_dir() and not conf_dir.is_symlink():
        confs += [f"/etc/ld.so.conf.d/{p.name}" for p in sorted(conf_dir.iterdir())[:256] if p.name.endswith(".conf")]
    for conf in confs:
        for line in (ctx.read_text(conf, limit=1 << 16) or "").splitlines()[:1000]:
            if line.strip().startswith("/"):
                candidates.append((conf, line.strip()))
    found = []
    for where, directory in candidates:
        if PurePosixPath(directory).name != "stubs":
            continue
        base = ctx.host_path(resolve(ctx, directory))
        names = {p.name for p in sorted(base.iterdir())[:512]} if base.is_dir() else set()
        if any(name.startswith("libcuda.so") for name in names):
            found.append((where, directory, "libcuda.so.1" in names))
    return found


def compiler_major(ctx: Context) -> tuple[str, int] | None:
    """The host C++ compiler nvcc would call (NVCC_CCBIN, CUDAHOSTCXX, else g++ on PATH) and its GCC
    major version; None for clang or when it does not answer."""
    compiler = _env(ctx, "NVCC_CCBIN") or _env(ctx, "CUDAHOSTCXX") or ctx.which("g++") or ctx.which("gcc")
    if not compiler:
        return None
    record = ctx.run([compiler, "-dumpfullversion", "-dumpversion"], timeout_s=10)
    words = (record.stdout or "").split()
    if not record.ok or not words or "clang" in compiler:
        return None
    major = words[0].split(".")[0]
    return (compiler, int(major)) if major.isdecimal() and len(major) <= 3 else None


def path_findings(check: Check, ctx: Context, torch_cuda: str | None) -> list[Finding]:
    """GPU027 toolkits that disagree, GPU028 a libcuda stub, GPU029 a host compiler nvcc refuses,
    GPU031 PyTorch's CUDA against the toolkit an extension build would use."""
    toolkits = installed(ctx)
    chosen = picks(ctx, toolkits)
    versions = {t.root: t.version for t in toolkits}
    label = lambda root: _("{root} ({version})", root=root, version=versions.get(root) or _("version unknown"))  # noqa: E731
    findings = []
    named: dict[Said, str] = {  # English keys in the evidence, the user's language in the message
        said("build ({source})", source=chosen.build_from): chosen.build,
        said("nvcc on PATH"): chosen.nvcc,
        said("libcudart on LD_LIBRARY_PATH"): chosen.runtime,
    }
    distinct = {root for root in named.values() if root}
    if len(distinct) > 1 or chosen.missing_home:
        parts = [_("{what}: {toolkit}", what=what.text(), toolkit=label(root)) for what, root in named.items() if root]
        missing = _("{variable} names a directory that is not there. ", variable=chosen.missing_home) if chosen.missing_home else ""
        listed = _(", ").join(label(t.root) for t in toolkits) or _("none")
        message = missing + _("Installed: {installed}; {picks}.", installed=listed, picks=_("; ").join(parts))
        evidence: dict[str, JSONValue] = {"installed": {t.root: t.version for t in toolkits}, **{k: v for k, v in named.items() if v}}
        findings.append(check.finding(GPU027, message, evidence=evidence))
    for where, directory, shadows in stub_dirs(ctx):
        if shadows:
            message = _(
                "{directory} (a toolkit's link-time stubs) is on the loader path via {where}: libcuda.so.1 there shadows the driver's.",
                directory=directory,
                where=where,
            )
        else:
            message = _(
                "{directory} (a toolkit's link-time stubs) is on the loader path via {where}: its libcuda.so can be picked up instead "
                "of the driver's.",
                directory=directory,
                where=where,
            )
        severity = None if shadows else Severity.WARNING
        findings.append(check.finding(GPU028, message, evidence={"where": where, "directory": directory}, severity=severity))
    build = next((t for t in toolkits if t.root == chosen.build), None)
    if build and build.gnu_max is not None and not ctx.live_devices:  # the compiler nvcc would call runs on that host, not here
        ctx.not_judged(_("the host compiler against the GCC versions {toolkit} accepts (GPU029)", toolkit=build.root), ctx.elsewhere)
    elif build and build.gnu_max is not None and (compiler := compiler_major(ctx)) and compiler[1] > build.gnu_max:
        message = _(
            "{compiler} is GCC {gcc}, but nvcc {version} in {toolkit} accepts GCC ≤ {gnu_max} (its include/crt/host_config.h): "
            'every CUDA extension build stops with "unsupported GNU version".',
            compiler=compiler[0],
            gcc=compiler[1],
            version=build.version or "",
            toolkit=build.root,
            gnu_max=build.gnu_max,
        )
        cited: dict[str, JSONValue] = {"compiler": compiler[0], "gcc_major": compiler[1], "toolkit": build.root, "gnu_max": build.gnu_max}
        findings.append(check.finding(GPU029, message, evidence=cited))
    if build and build.version and torch_cuda:
        built, have = torch_cuda.split(".")[:2], build.version.split(".")[:2]
        if built != have:
            major = built[0] != have[0]
            if major:
                consequence = _("torch.utils.cpp_extension refuses a different major version.")
            else:
                consequence = _("a minor mismatch builds with a warning, and its kernels need the newer runtime.")
            message = _(
                "PyTorch was built with CUDA {torch_cuda}, but an extension build would use {toolkit} ({source}): {consequence}",
                torch_cuda=torch_cuda,
                toolkit=label(build.root),
                source=chosen.build_from,
                consequence=consequence,
            )
            evidence = {"torch_cuda": torch_cuda, "toolkit": build.root, "toolkit_version": build.version, "from": chosen.build_from}
            findings.append(check.finding(GPU031, message, evidence=evidence, severity=None if major else Severity.INFO))
    return findings
