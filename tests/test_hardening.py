"""Hardening, second pass (issue 27): each reproduction an independent harness found, through the CLI
or the check that reads the input. Each gives a finding, a one-line error or a bounded run: never a
crashed check, a traceback, a multi-GB process or an unbounded run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from .conftest import FIXTURES
from .support.fakes import fake_tool
from .support.harness import cli
from .support.modelgen import write_gguf

LLAMA = {"model_type": "llama", "max_position_embeddings": 8192}


def _model(tmp_path: Path, config_text: str) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(config_text)
    return model


@pytest.mark.parametrize(
    ("label", "config", "files", "code"),
    [
        ("added_tokens_decoder a list", LLAMA, {"tokenizer_config.json": {"added_tokens_decoder": [1]}}, "MDL003"),
        ("added_tokens a number", LLAMA, {"tokenizer.json": {"added_tokens": 5}}, "MDL034"),
        ("rope_scaling type a list", {**LLAMA, "rope_scaling": {"type": ["yarn"], "factor": 4.0}}, {}, "MDL011"),
        (
            "rope_theta of 400 digits",
            '{"model_type": "llama", "max_position_embeddings": 8192, "rope_theta": ' + "9" * 400 + "}",
            {},
            "MDL003",
        ),
        (
            "original_max_position_embeddings of 400 digits",
            '{"model_type": "llama", "max_position_embeddings": 8192, "rope_scaling": {"type": "yarn", "factor": 4.0, '
            '"original_max_position_embeddings": ' + "9" * 400 + "}}",
            {},
            "MDL003",
        ),
        (
            "a 300-character shard name",
            LLAMA,
            {"model.safetensors.index.json": {"weight_map": {"a": "x" * 300 + ".safetensors"}}},
            "MDL003",
        ),
        ("a shard named outside", LLAMA, {"model.safetensors.index.json": {"weight_map": {"a": "../../etc/passwd"}}}, "MDL003"),
    ],
)
def test_one_bad_field_of_one_file_is_a_finding_on_that_file_not_a_crash(tmp_path, label, config, files, code):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    for name, content in files.items():
        (model / name).write_text(json.dumps(content))
    proc = cli("check", "--select", "model-artifacts", "--model", str(model))
    said = proc.stdout + proc.stderr
    assert "crashed" not in said and "Traceback" not in said, said
    assert code in said, said
    assert proc.exit_code in (1, 3), said  # a finding (3: what the broken file holds is not judged, and says so)


def test_a_torch_version_py_that_is_not_a_version_is_not_judged_not_a_crash(tmp_path):
    site = tmp_path / "site" / "torch"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("")
    (site / "version.py").write_text("__version__ = '2.5.1'\ncuda = 'x'\nhip = None\n")
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path / "site"} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    proc = cli("check", "--select", "gpu", "--python", str(python), "--root", str(FIXTURES / "hosts/swap60-rhel7"), "--same-host")
    said = proc.stdout + proc.stderr
    assert "crashed" not in said and "Traceback" not in said, said
    assert "cuda = 'x', not a version" in said and proc.exit_code == 3, said


@pytest.mark.parametrize("line", ["ignore = 0", "ignore = [1]", "fail-on = []", "select = 5", "timeout = true"])
def test_a_configuration_file_of_the_wrong_shape_is_a_one_line_error(tmp_path, line):
    (tmp_path / "decode-doctor.toml").write_text(line + "\n")
    proc = cli("check", "--select", "swappiness", "--root", str(FIXTURES / "hosts/swap60-rhel7"), cwd=tmp_path)
    assert proc.exit_code == 2 and "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "decode-doctor.toml" in errors[0], proc.stderr


def _peak_rss_mib(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, float, str]:
    """Runs argv under a Python that reports the largest RSS among its descendants (forked workers
    included): (exit code, MiB, output)."""
    probe = (
        "import resource, subprocess, sys\n"
        "proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "print(proc.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)\n"
        "print(proc.stdout[-2000:] + proc.stderr[-2000:])\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=300, env=env)
    head, _, rest = out.stdout.partition("\n")
    code, rss = head.split()
    return int(code), float(rss), rest


DD = [sys.executable, "-m", "decode_doctor"]


@pytest.mark.parametrize("layers", [300_000_000, 2**31])
def test_a_gguf_claiming_hundreds_of_millions_of_layers_is_refused_before_anything_is_allocated(tmp_path, layers):
    meta = {
        "general.architecture": "llama", "general.alignment": 32, "llama.block_count": layers, "llama.context_length": 8192,
        "llama.embedding_length": 256, "llama.attention.head_count": 8, "llama.attention.head_count_kv": 2,
    }  # fmt: skip
    gguf = tmp_path / "it.gguf"
    write_gguf(gguf, meta, {"token_embd.weight": ("Q8_0", [256, 64])})
    code, rss, said = _peak_rss_mib([*DD, "estimate", "--model", str(gguf), "--bandwidth", "100", "--memory", "80"])
    assert code == 2 and "block_count is" in said and rss < 256, (code, rss, said)
    code, rss, said = _peak_rss_mib([*DD, "check", "--select", "decode-budget", "--model", str(gguf), "--bandwidth", "100"])
    assert "DEC010" in said and "crashed" not in said and "timed out" not in said and rss < 256, (code, rss, said)


def test_command_output_is_capped_while_it_streams(tmp_path):
    """A probe printing 256 MiB costs the run about the 1 MiB it keeps, not the 256 MiB."""
    script = (
        "from decode_doctor.engine.commands import CommandRunner\n"
        "r = CommandRunner().run(['sh', '-c', 'head -c 268435456 /dev/zero'], timeout_s=60)\n"
        # VmHWM: this process's own peak (ru_maxrss keeps the high-water mark of the process it was forked from)
        "peak = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM'))\n"
        "print(len(r.stdout), r.truncated, peak // 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True).stdout.split()
    assert out[:2] == [str(1 << 20), "True"] and int(out[2]) < 128, out


def test_a_fake_nvidia_smi_printing_a_gibibyte_keeps_the_run_small(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\nhead -c 1073741824 /dev/zero | tr '\\0' x\n")
    smi.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    _code, rss, said = _peak_rss_mib([*DD, "check", "--select", "gpu", "--root", str(FIXTURES / "hosts/swap60-rhel7")], env=env)
    assert rss < 256, (rss, said)


def test_a_config_over_64_mib_is_not_judged_never_ready(tmp_path):
    config = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 100}
    model = _model(tmp_path, json.dumps({**config, "pad": "x" * (65 << 20)}))
    proc = cli("check", "--select", "decode-budget", "--model", str(model), "--bandwidth", "10")
    assert proc.exit_code == 3 and "larger than 64 MiB" in proc.stdout and "Ready" not in proc.stdout, proc.stdout


@pytest.mark.parametrize(("tunable", "check"), [("proc/sys/vm/swappiness", "swappiness"), ("etc/docker/daemon.json", "docker")])
def test_a_fifo_where_a_tunable_or_config_should_be_is_named_at_once(tmp_path, tunable, check):
    import time

    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "hosts/swap60-rhel7", root, symlinks=True)
    target = root / tunable
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    os.mkfifo(target)
    started = time.monotonic()
    proc = cli("check", "--root", str(root), "--select", check)
    assert time.monotonic() - started < 10  # no wait for the check's timeout (5 s and 20 s) on a busy machine either
    assert proc.exit_code == 3 and "is a FIFO, not a regular file" in proc.stdout and "timed out" not in proc.stdout, proc.stdout


# --- secrets in bundles ----------------------------------------------------------------------------------

KEY_BODY = [
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu",
    "NMoSfm76oqFvAp8Gy0iz5sxjZmSnXyCdPEovGhLa0VzMaQ8s+CLOyS56YyCFGeJZ",
]
S3_SECRET = "q7Xb2Lk9Pz4Wm1Rt8Vn3Yc6Hd0Fg5Js2Ka7Eu1Ri"


def _pem(prefix: str = "", escaped: bool = False) -> str:
    lines = ["-----BEGIN PRIVATE KEY-----", *KEY_BODY, "-----END PRIVATE KEY-----"]
    if escaped:
        return "\\n".join(lines) + "\\n"
    return "".join(f"{prefix}{line}\n" for line in lines)


def _gpu_host(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A host tree with Docker's directory and CDI specs, and an nvidia-smi (a real capture) on PATH
    (the tree stands for this machine: --same-host): the nvidia-container check reads /etc/cdi, and the
    bundle carries what it read."""
    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "hosts/swap60-rhel7", root, symlinks=True)
    (root / "etc/docker").mkdir(parents=True, exist_ok=True)
    capture = FIXTURES / "nvidia/nvidia-smi-q-x/a10g-driver-515.105.01-v11.xml"
    env = fake_tool(tmp_path / "bin", "nvidia-smi", f"cat {capture}\n")
    return root, env


def test_a_bundle_holds_no_private_key_body_in_any_framing_nor_a_random_value(tmp_path):
    """An indented key in a CDI spec (YAML `key: |`), one commented out in another, a JSON-escaped one
    in an environment variable, and a 40-character secret in a variable named like anything."""
    root, path = _gpu_host(tmp_path)
    cdi = root / "etc/cdi"
    cdi.mkdir(parents=True)
    (cdi / "nvidia.yaml").write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ntls:\n  key: |\n" + _pem("    ") + "devices: []\n")
    (cdi / "old.yaml").write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n" + _pem("# ") + "devices: []\n")
    env = {**path, "SERVICE_ACCOUNT_JSON": '{"private_key": "' + _pem(escaped=True) + '"}', "S3_SIGNING": S3_SECRET}
    out = tmp_path / "out"
    out.mkdir()
    proc = cli("report", "--root", str(root), "--same-host", "--select", "swappiness,nvidia-container", "-o", str(out), env=env)
    assert proc.exit_code in (0, 1, 3), proc.stdout + proc.stderr
    (bundle,) = out.glob("*.tar.gz")
    with tarfile.open(bundle) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    everything = b"\n".join(members.values())
    assert any(name.endswith("raw/files/nvidia-container/etc/cdi/nvidia.yaml") for name in members), sorted(members)
    for body in KEY_BODY:
        for fragment in (body, body[:24], body[-24:]):
            assert fragment.encode() not in everything, fragment
    assert S3_SECRET.encode() not in everything
    assert b"S3_SIGNING=[REDACTED:high-entropy]" in everything
    notes = next(data for name, data in members.items() if name.endswith("raw/redaction-notes.txt"))
    assert b"S3_SIGNING" in notes


def test_the_leak_check_refuses_a_key_body_that_got_through(tmp_path):
    from decode_doctor.reports.redact import Redactor

    for framing in (_pem("    "), _pem("# "), _pem(escaped=True), _pem()):
        assert Redactor().leaks({"raw/x": framing.encode()}), framing
        # the BEGIN line alone replaced, the body kept (what the first pass did to an indented key)
        half = framing.replace("-----BEGIN PRIVATE KEY-----", "[REDACTED:pem-private-key]")
        assert Redactor().leaks({"raw/x": half.encode()}), half
    assert not Redactor().leaks({"raw/x": Redactor().text(_pem("    ")).encode()})


def test_archive_member_names_are_escaped_like_every_other_output(tmp_path):
    from decode_doctor.reports.bundle import member_name

    assert member_name("raw/files/docker/etc/cdi/a\nb\udcff.yaml") == "raw/files/docker/etc/cdi/a\\x0ab\\xff.yaml"
    root, path = _gpu_host(tmp_path)
    cdi = root / "etc/cdi"
    cdi.mkdir(parents=True)
    (cdi / os.fsdecode(b"nv\nidia\xff.yaml")).write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n")
    out = tmp_path / "out"
    out.mkdir()
    cli("report", "--root", str(root), "--same-host", "--select", "nvidia-container", "-o", str(out), env=path)
    (bundle,) = out.glob("*.tar.gz")
    with tarfile.open(bundle) as tar:
        names = [m.name for m in tar.getmembers()]
    assert any(name.endswith("etc/cdi/nv\\x0aidia\\xff.yaml") for name in names), names
    assert not [name for name in names if "\n" in name or any(0xDC80 <= ord(c) <= 0xDCFF for c in name)]
