"""Redaction without chains or gaps (issue 17): each planted secret or host name is looked for in the
output afterwards. Unit tests on the Redactor, then one bundle unpacked and searched."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from decode_doctor.reports.redact import Redactor

from .conftest import FIXTURES
from .support.harness import cli
from .test_report import bundle_files


def hosts_redactor(*names: str) -> Redactor:
    redactor = Redactor(hosts=True)
    redactor.known_hosts |= set(names)
    return redactor


def test_placeholders_are_never_redacted_again():
    redactor = hosts_redactor()
    text = "data-root /home/alice/docker, owner alice"
    for _ in range(3):  # every output format passes the same text through again
        text = redactor.text(text)
    assert text == "data-root /home/user-1/docker, owner user-1"
    assert redactor.mapping == {"alice": "user-1"}  # no user-2 → user-1 chain


@pytest.mark.parametrize(
    ("planted", "secret"),
    [
        ("HTTPS_PROXY=http://ops:s3cret@proxy.corp.example:3128", "proxy.corp.example"),
        ("mirror https://registry.corp.example/v2/", "registry.corp.example"),
        ("peer fe80::1ff:fe23:4567:890a and 2001:db8::7", "2001:db8::7"),
        ("peer fe80::1ff:fe23:4567:890a", "fe80::1ff:fe23:4567:890a"),
        ("hostname vm up 3 days", " vm "),
    ],
)
def test_host_names_in_urls_proxies_ipv6_and_short_names_are_replaced(planted, secret):
    redactor = hosts_redactor("vm")
    assert secret not in redactor.text(planted)


def test_a_user_name_inside_a_hyphenated_path_is_scrubbed_and_the_check_agrees():
    """pytest's /tmp/pytest-of-<user> (found running the suite as a user other than root): the name is
    scrubbed there, and a word that merely contains it is neither scrubbed nor called a leak."""
    redactor = hosts_redactor()
    redactor.known_users.add("alice")
    text = redactor.text("tmp /tmp/pytest-of-alice/x, home /home/alice, no malice, alice_dev")
    assert text == "tmp /tmp/pytest-of-user-1/x, home /home/user-1, no malice, user-1_dev"
    assert redactor.leaks({"report.md": text.encode()}) == []
    assert redactor.leaks({"report.md": b"left: pytest-of-alice"}) != []


def test_no_proxy_lists_are_replaced_entry_by_entry():
    env = Redactor(hosts=True).environment({"no_proxy": ".corp.example,10.0.0.0/8,localhost,127.0.0.1"})
    assert env["no_proxy"].split(",")[2:] == ["localhost", "127.0.0.1"]
    assert "corp.example" not in env["no_proxy"] and "10.0.0.0" not in env["no_proxy"]


def test_public_services_and_dotted_names_stay_under_redact_hosts():
    text = hosts_redactor("vm").text("pulled https://registry-1.docker.io/v2/ and https://huggingface.co/Qwen; vm.swappiness = 1")
    assert text == "pulled https://registry-1.docker.io/v2/ and https://huggingface.co/Qwen; vm.swappiness = 1"


@pytest.mark.parametrize(
    ("planted", "secret"),
    [
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAxSECRETxyz\nAAAAB3NzaC1yc2EAAA", "MIIEowIBAAKCAQEAxSECRETxyz"),  # cut by a limit
        ("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\nMIIEpQSECRET\n-----END RSA PRIVATE KEY-----", "MIIEpQSECRET"),
        ('{"Authorization": "Basic dXNlcjpodW50ZXIy"}', "dXNlcjpodW50ZXIy"),
        ('"api_password": "hunter2-but-longer"', "hunter2-but-longer"),
        ("DB_PASSWORD=correcthorse client_secret: battery-staple", "battery-staple"),
        ("https://ops:p@ss@word@mirror.example/v2/", "ss@word"),
    ],
)
def test_secrets_cut_short_quoted_or_holding_an_at_sign_are_removed(planted, secret):
    assert secret not in Redactor().text(planted)


def test_model_tokens_are_not_secrets():
    text = '"eos_token": "<|endoftext|>", "pad_token": "<|pad|>", "tokenizer_class": "Qwen2Tokenizer"'
    assert Redactor().text(text) == text


def test_the_patterns_stay_linear_on_hostile_text():
    redactor = hosts_redactor("vm")
    hostile = "-----BEGIN PRIVATE KEY-----" * 20_000 + "password=" * 20_000 + "a:" * 100_000 + "://" * 50_000
    started = time.process_time()
    redactor.text(hostile)
    assert time.process_time() - started < 5  # quadratic would be hours; this is CPU time, not wall time


def test_a_bundle_with_redact_hosts_names_no_short_host_anywhere(tmp_path):
    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "hosts/swap60-rhel7", root)
    (root / "etc/hostname").write_text("vm\n")
    (root / "etc/docker").mkdir(parents=True)
    mirror = "https://ops:pa@ss@mirror.corp.example:5000"
    (root / "etc/docker/daemon.json").write_text(json.dumps({"registry-mirrors": [mirror], "data-root": "/home/alice/d"}))
    out = tmp_path / "out"
    out.mkdir()
    env = {"HTTPS_PROXY": "http://proxy.corp.example:3128", "no_proxy": ".corp.example,fd00::12"}
    proc = cli("report", "--root", str(root), "--select", "swappiness,docker", "--redact-hosts", "-o", str(out), env=env)
    (bundle,) = sorted(out.glob("*.tar.gz"))
    assert proc.exit_code == 0, proc.stderr
    assert not bundle.name.startswith("decode-doctor-vm-")
    files = bundle_files(bundle)
    everything = b"\n".join(files.values()).decode("utf-8", errors="replace")
    for real in ("mirror.corp.example", "proxy.corp.example", "alice", "pa@ss", "fd00::12"):
        assert real not in everything, real
    title = files["report.html"].decode().split("<title>", 1)[1].split("</title>", 1)[0]
    assert title.startswith("decode-doctor report: host-") and "vm" not in title, title


def test_redact_hosts_leaves_no_user_home_or_private_registry_in_any_member_name_or_content(tmp_path):
    """A host with a user's home (a model under /home/alice), root's home in the environment and a
    private registry in Docker's config: nothing of them in the tarball's names or files."""
    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "hosts/swap60-rhel7", root)
    model = tmp_path / "home" / "alice" / "models" / "tiny"
    model.mkdir(parents=True)
    config = json.dumps({"model_type": "llama", "描述": "这是一个大型语言模型的配置文件，请勿修改。"}, ensure_ascii=False)
    (model / "config.json").write_bytes(config.encode("gbk"))  # read and quoted: its path becomes a member name
    docker = tmp_path / "docker-config"
    docker.mkdir()
    auths = {
        "registry.internal.example:5000": {"auth": "b3BzOnMzY3JldHBhc3N3b3Jk"},
        "https://index.docker.io/v1/": {"auth": "eDp5eXl5eXl5"},
    }
    (docker / "config.json").write_text(json.dumps({"auths": auths, "credHelpers": {"ecr.internal.example": "ecr-login"}}))
    env = {"DOCKER_CONFIG": str(docker), "HOME": "/root", "HF_HOME": "/root/.cache/huggingface", "USER": "alice"}
    out = tmp_path / "out"
    out.mkdir()
    state = tmp_path / "state"
    args = ("--select", "swappiness,encodings", "--redact-hosts", "--state-dir", str(state), "-o", str(out))
    # the tree stands for this machine (--same-host): its user's Docker config goes into the bundle
    proc = cli("report", "--root", str(root), "--same-host", "--model", str(model), *args, env=env)
    assert proc.exit_code == 0, proc.stderr
    (bundle,) = sorted(out.glob("*.tar.gz"))
    files = bundle_files(bundle)
    assert any("/home/user-" in name for name in files), sorted(files)  # the model's file is there, under its placeholder
    names = "\n".join(files)
    everything = b"\n".join(files.values()).decode("utf-8", errors="replace")
    for real in ("alice", "/root", "registry.internal.example", "ecr.internal.example", "b3BzOnMzY3JldHBhc3N3b3Jk"):
        assert real not in names and real not in everything, real
    config_json = json.loads(files["raw/docker-config.json"])
    assert set(config_json["auths"]) == {"host-1:5000", "https://index.docker.io/v1/"}  # public registries stay named
    assert "HOME=/home/user-0" in files["raw/environment-variables.txt"].decode()
    (mapping,) = (state / "redaction").glob("*.json")  # what each placeholder stands for stays on this host
    assert {"alice", "root", "registry.internal.example", "ecr.internal.example"} <= set(json.loads(mapping.read_text()).values())


def test_the_leak_check_reads_member_names_too():
    redactor = hosts_redactor()
    redactor.text("owner alice at /home/alice")  # alice becomes user-1
    problems = redactor.leaks({"raw/files/encodings/home/alice/m/config.json": b"fine", "raw/env.txt": b"HOME=/root"})
    assert "raw/files/encodings/home/alice/m/config.json (its name): user-1 (al…) is still present" in problems
    assert "raw/env.txt: a home path is still present" in problems
