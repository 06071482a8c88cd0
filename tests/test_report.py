"""Support bundles with secrets removed, diff, merge, Prometheus output, the HTML report in Chromium,
(the deployment manifests: tests/test_fleet.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from .conftest import FIXTURES
from .support.fakes import fake_tool, vm_dmidecode
from .support.harness import chromium_or_skip, cli

SECRETS = {
    "hf": "hf_QmVaLidLoOkInGtOkEnValue0123456789",
    "ghp": "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "github_pat": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGH",
    "aws_id": "AKIAIOSFODNN7EXAMPLE",
    "aws_secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "openai": "sk-proj-Zyxwvutsrqponmlkjihgfedcba9876543210",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkZWNvZGUtZG9jdG9yIn0.c2lnbmF0dXJlLW5vdC1yZWFs",
    "pem": "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
    "bearer": "b3ar3rT0kenValue.abc-def_ghi",
    "url_password": "mirr0rPassw0rd",
    "docker_auth": "dXNlcjpzM2NyM3RQYXNzd29yZA==",
    "plain_by_name": "correct-horse-battery-staple",
}


@pytest.fixture
def planted(tmp_path):
    """Secrets of every kind in environment variables, daemon.json, docker config.json, a model config
    file and command output."""
    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "hosts/swap60-rhel7", root)
    (root / "etc/docker").mkdir(parents=True)
    (root / "etc/docker/daemon.json").write_text(
        json.dumps({"registry-mirrors": [f"https://ops:{SECRETS['url_password']}@mirror.internal.example"], "log-driver": "local"})
    )
    docker_config = tmp_path / "docker-config"
    docker_config.mkdir()
    (docker_config / "config.json").write_text(
        json.dumps({"auths": {"registry.example.com": {"auth": SECRETS["docker_auth"]}}, "credsStore": "pass"})
    )
    model = tmp_path / "model"
    model.mkdir()
    text = json.dumps(
        {
            "model_type": "llama",
            "描述": "这是一个大型语言模型的配置文件，请勿修改。",
            "hub_token": SECRETS["hf"],
            "signing_jwt": SECRETS["jwt"],
        },
        ensure_ascii=False,
    )
    (model / "config.json").write_bytes(text.encode("gbk"))  # not UTF-8: the encodings check quotes the line
    (model / "notes.txt").write_text(f"-----BEGIN PRIVATE KEY-----\n{SECRETS['pem']}\n-----END PRIVATE KEY-----\n")
    smi = fake_tool(
        tmp_path / "bin",
        "nvidia-smi",
        f"echo 'Authorization: Bearer {SECRETS['bearer']}' >&2; echo 'Failed to initialize NVML: Driver/library version mismatch' >&2; "
        f"exit 18",
    )
    env = {
        **smi,
        "DOCKER_CONFIG": str(docker_config),
        "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock",
        "HF_TOKEN": SECRETS["hf"],
        "GITHUB_TOKEN": SECRETS["ghp"],
        "GH_PAT": SECRETS["github_pat"],
        "AWS_ACCESS_KEY_ID": SECRETS["aws_id"],
        "AWS_SECRET_ACCESS_KEY": SECRETS["aws_secret"],
        "OPENAI_API_KEY": SECRETS["openai"],
        "DB_PASSWORD": SECRETS["plain_by_name"],
        "HARMLESS_SETTING": "keep-me-visible",
    }
    return root, model, env


def bundle_files(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def make_bundle(tmp_path: Path, root: Path, model: Path, env: dict, *extra: str):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    select = ("--select", "swappiness,encodings,gpu,docker")
    # the planted tree stands for this machine (--same-host): its nvidia-smi, Docker socket and config are this run's
    proc = cli("report", "--root", str(root), "--same-host", "--model", str(model), *select, "-o", str(out), *extra, env=env)
    bundles = sorted(out.glob("*.tar.gz"))
    return proc, bundles


def test_bundle_holds_no_secret_and_keeps_the_evidence(planted, tmp_path):
    root, model, env = planted
    proc, bundles = make_bundle(tmp_path, root, model, env)
    assert len(bundles) == 1, proc.stdout + proc.stderr
    assert bundles[0].name.startswith("decode-doctor-rhel7-node-") and bundles[0].stat().st_mode & 0o077 == 0
    files = bundle_files(bundles[0])
    assert {"report.md", "report.html", "report.json", "raw/environment-variables.txt", "raw/docker-config.json"} <= set(files)
    assert any(name.startswith("raw/commands/gpu-") for name in files)
    assert any(name.startswith("raw/files/swappiness/proc/") for name in files)
    everything = b"\n".join(files.values()).decode("utf-8", errors="replace")
    for kind, secret in SECRETS.items():
        assert secret not in everything, f"{kind} leaked"
    report = json.loads(files["report.json"])
    codes = {f["code"] for f in report["findings"]}
    assert {"SWAP001", "ENC001", "GPU011", "DKR003"} <= codes
    assert report["schema_version"] == 2 and report["facts"]["swappiness"]["swappiness"] == 60
    swap = next(f for f in report["findings"] if f["code"] == "SWAP001")
    assert swap["evidence"]["swappiness"] == 60  # non-secret evidence survives
    assert "HARMLESS_SETTING=keep-me-visible" in files["raw/environment-variables.txt"].decode()
    assert "HF_TOKEN=[REDACTED:by-name]" in files["raw/environment-variables.txt"].decode()
    assert json.loads(files["raw/docker-config.json"])["credsStore"] == "pass"
    assert "registry.example.com" in files["raw/docker-config.json"].decode()
    assert "Driver/library version mismatch" in everything
    rows = {row["name"]: row for row in report["environment"]}
    assert "Python" in rows and rows["vm.swappiness"]["judged"] == "SWAP001" and rows["memory"]["judged"] == "SWAP001"
    assert "## Environment" in files["report.md"].decode()


def test_no_redact_says_so_loudly(planted, tmp_path):
    root, model, env = planted
    proc, bundles = make_bundle(tmp_path, root, model, env, "--no-redact")
    assert "WARNING: --no-redact" in proc.stderr
    assert SECRETS["hf"].encode() in b"".join(bundle_files(bundles[0]).values())


def test_leak_self_check_refuses_to_write():
    from decode_doctor.reports.redact import Redactor

    redactor = Redactor()
    redactor.environment({"MY_TOKEN": "s3cr3t-value-xyz"})
    problems = redactor.leaks({"report.json": b'{"x": "s3cr3t-value-xyz"}', "raw/a.txt": b"hf_abcdefghijklmnopqrstuvwxyz0123"})
    assert any("report.json: a secret value" in p for p in problems)
    assert any("raw/a.txt: huggingface-token pattern still matches" in p for p in problems)
    assert Redactor().leaks({"ok.txt": b"[REDACTED:huggingface-token] nothing else"}) == []


def test_redact_hosts_uses_stable_placeholders_kept_locally(planted, tmp_path):
    root, model, env = planted
    (root / "etc/docker/daemon.json").write_text(
        json.dumps({"registry-mirrors": ["http://10.20.30.40:5000"], "data-root": "/home/alice/docker"})
    )
    state = tmp_path / "state"
    _proc, bundles = make_bundle(tmp_path, root, model, env, "--redact-hosts", "--state-dir", str(state))
    files = bundle_files(bundles[0])
    everything = b"\n".join(files.values()).decode("utf-8", errors="replace")
    for real in ("rhel7-node", "10.20.30.40", "alice"):
        assert real not in everything, real
    assert "host-1" in everything and "ip-1" in everything
    assert not bundles[0].name.startswith("decode-doctor-rhel7-node")
    mapping_files = list((state / "redaction").glob("*.json"))
    assert len(mapping_files) == 1 and mapping_files[0].stat().st_mode & 0o077 == 0
    mapping = json.loads(mapping_files[0].read_text())
    assert {"rhel7-node", "10.20.30.40", "alice"} <= set(mapping.values())
    assert "vm.swappiness" in everything  # dotted names are not host names


@pytest.fixture
def steady_bandwidth(monkeypatch):
    """The bandwidth check's probe answers fixed figures: these tests are about reports, not this machine."""
    from decode_doctor.checks.bandwidth import membw

    figures = {"read": 40.0}  # set before a run: the check runs in a forked child, which sees it

    def measure_cpu(buffer_bytes, budget_s=1.0, threads=None):
        read = figures["read"]
        return membw.CpuBandwidth(read, read * 0.9, 0.01, 0.02, 2, buffer_bytes, 3, 0.05, 0.0)

    monkeypatch.setattr(membw, "measure_cpu", measure_cpu)
    bin_dir = Path(tempfile.mkdtemp(prefix="dd-vm-bin-"))
    monkeypatch.setenv("PATH", vm_dmidecode(bin_dir)["PATH"].split(os.pathsep)[0])  # no DIMMs, as on a VM: BW002 does not apply
    return figures


def _report(tmp_path: Path, host: str, name: str) -> Path:
    target = tmp_path / name
    args = ("--root", str(FIXTURES / "hosts" / host), "--same-host")  # the fixture stands for this machine: its bandwidth is measured
    proc = cli("check", *args, "--select", "swappiness,bandwidth", "--format", "json", "-o", str(target))
    assert target.exists(), proc.stderr
    return target


def test_diff_and_merge_two_fixture_hosts(tmp_path, steady_bandwidth):
    a = _report(tmp_path, "swap60-rhel7", "a.json")
    steady_bandwidth["read"] = 44.0
    b = _report(tmp_path, "boot-regress", "b.json")
    data = json.loads(cli("diff", str(a), str(b), "--format", "json").stdout)
    assert [f["code"] for f in data["appeared"]] == ["SWAP004"]
    assert [f["code"] for f in data["disappeared"]] == ["SWAP001"]
    assert data["changed"]["vm.swappiness"] == {"before": "60", "after": "1"}
    assert data["measured"]["CPU read bandwidth (GB/s)"] == {"before": 40.0, "after": 44.0, "change_percent": 10.0}
    text = cli("diff", str(a), str(b)).stdout
    assert "+ SWAP004" in text and "- SWAP001" in text and "measured CPU read bandwidth (GB/s): 40 → 44 (+10.0%)" in text
    assert "None" not in text
    heading = "| host | verdict | age | not judged | bandwidth | swappiness |"
    for fmt, marker in (("text", "rhel7-node"), ("markdown", heading), ("html", "<table>")):
        merged = cli("merge", str(a), str(b), "--format", fmt).stdout
        assert marker in merged, fmt
    markdown = cli("merge", str(a), str(b), "--format", "markdown").stdout
    assert re.search(r"\| rhel7-node \| with findings \| \d+ s \| 0 \| passed \| warning: SWAP001 \|", markdown), markdown
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert cli("diff", str(a), str(bad)).exit_code == 2


def test_prometheus_output_parses(tmp_path, steady_bandwidth):
    from prometheus_client.parser import text_string_to_metric_families

    args = ("--root", str(FIXTURES / "hosts/swap60-rhel7"), "--same-host")  # the fixture stands for this machine: its bandwidth is measured
    proc = cli("check", *args, "--select", "swappiness,bandwidth", "--format", "prometheus")
    families = {f.name: f for f in text_string_to_metric_families(proc.stdout)}
    findings = families["decode_doctor_findings"].samples
    assert any(s.labels["code"] == "SWAP001" and s.labels["severity"] == "warning" and s.value == 1 for s in findings)
    states = [s for s in families["decode_doctor_check_state"].samples if s.value == 1]
    assert {s.labels["check"]: s.labels["state"] for s in states} == {"swappiness": "findings", "bandwidth": "passed"}
    bandwidth = {s.labels["kind"]: s.value for s in families["decode_doctor_memory_bandwidth_bytes_per_second"].samples}
    assert bandwidth == {"read": 40e9, "copy": 36e9}
    assert families["decode_doctor_vm_swappiness"].samples[0].value == 60
    assert families["decode_doctor_check_duration_seconds"].samples


def test_html_report_renders_in_headless_chromium_without_network(tmp_path):
    from .support.modelgen import qwen2_7b

    chromium = chromium_or_skip()
    model = qwen2_7b(tmp_path / "Qwen2-7B", shards=1)
    dataset = tmp_path / "dataset-with-a-rather-long-directory-name-as-they-come-from-object-stores"
    dataset.mkdir()
    for i in range(29):  # 29 image findings must not bury the host's
        (dataset / f"shard-{i:05d}-of-00029-{'x' * 60}.jpg").write_bytes(b"not a jpeg at all")
    page = tmp_path / "report.html"
    args = ["--select", "swappiness,decode-budget,images", "--model", str(model), "--images", str(dataset), "--bandwidth", "51.2"]
    cli("check", "--root", str(FIXTURES / "hosts/swap60-rhel7"), *args, "--format", "html", "-o", str(page))
    text = page.read_text()
    assert "<svg" in text and "tokens/s per sequence" in text
    assert "http://" not in text and "https://" not in text and "<script" not in text
    rows = text.split("<tbody>", 1)[1].split("</tbody>", 1)[0].split("<tr>")[1:]
    assert "SWAP001" in rows[0] and "IMG002" in rows[-1] and "<details><summary>29 findings" in rows[-1]
    # The test's own page (the report has no script) frames the report at 1280 px and writes its width.
    harness = tmp_path / "measure.html"
    harness.write_text(
        '<!DOCTYPE html><body style="margin:0"><iframe id="r" src="report.html" style="width:1280px;height:900px;border:0"></iframe>'
        '<script>r.onload=()=>{const d=r.contentDocument.documentElement;document.title="width "+d.scrollWidth+" of "+d.clientWidth}'
        "</script></body>"
    )
    netlog = tmp_path / "netlog.json"
    proc = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-pings",
            "--disable-default-apps",
            "--disable-extensions",
            "--disable-domain-reliability",
            "--disable-client-side-phishing-detection",
            "--metrics-recording-only",
            "--disable-features=OptimizationHints,MediaRouter,Translate,AutofillServerCommunication,CertificateTransparencyComponentUpdater",
            "--host-resolver-rules=MAP * ~NOTFOUND",  # nothing leaves this machine, whatever asks
            f"--user-data-dir={tmp_path / 'profile'}",
            "--enable-logging=stderr",
            "--v=0",
            f"--log-net-log={netlog}",
            "--window-size=1280,900",
            "--allow-file-access-from-files",
            "--virtual-time-budget=5000",
            "--dump-dom",
            harness.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    title = re.search(r"<title>width (\d+) of (\d+)</title>", proc.stdout)
    assert title, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert int(title.group(1)) <= int(title.group(2)) <= 1280  # nothing scrolls sideways: the Fix column shows
    assert "Uncaught" not in proc.stderr

    # every URL Chromium's network stack touched (a killed Chromium leaves the log unterminated: no JSON parse)
    urls = set(re.findall(r'"url":"([^"]+)"', netlog.read_text()))
    browser_own = re.compile(r"^https?://[^/]*(google\.com|googleapis\.com|gstatic\.com|gvt1\.com)(/|:)")
    from_page = [u for u in urls if u.startswith(("http://", "https://", "ws://", "wss://")) and not browser_own.match(u)]
    assert from_page == [], from_page


def test_an_html_page_shows_only_the_exit_code_of_the_command_that_made_it(tmp_path):
    root = FIXTURES / "hosts/swap60-rhel7"
    check = cli("check", "--root", str(root), "--select", "swappiness", "--format", "html", "-o", str(tmp_path / "check.html"))
    report = cli("report", "--root", str(root), "--select", "swappiness", "--format", "html", "-o", str(tmp_path / "report.html"))
    assert check.exit_code == 0 and report.exit_code == 0  # SWAP001 is a warning: check exits 0
    assert "exit code 0" in (tmp_path / "check.html").read_text()
    assert "exit code" not in (tmp_path / "report.html").read_text()  # report exits 0 once written, whatever it holds
