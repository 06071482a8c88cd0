"""Output formats in one place (issue 50): every format is one record of reports.formats, and every
command's --format, the report renderer, `report --format`'s single file, the bundle's members, diff and
merge read it. Adding a format is one registration; an unknown name is a usage error (exit 2) everywhere,
never a fallback to text."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import TextIO

import pytest

from decode_doctor.reports import formats
from decode_doctor.reports.formats import Format, Offer, UnknownFormat, Use

from .conftest import FIXTURES, REPO, run_dd
from .support.harness import cli

HOST = FIXTURES / "hosts" / "swap60-rhel7"
SWAP = ("--root", str(HOST), "--select", "swappiness")


def ndjson(view: object, stream: TextIO, how: object) -> None:
    """A renderer a test registers: one JSON line per finding (this module, named by dotted path)."""
    for finding in view.to_json()["findings"]:  # type: ignore[attr-defined]
        stream.write(json.dumps({"format": "ndjson", "code": finding["code"], "message": finding["message"]}) + "\n")


NDJSON = Format(
    "ndjson",
    ".ndjson",
    "application/x-ndjson",
    redacted=True,
    offers={Use.REPORT: Offer(f"{__name__}:ndjson"), Use.SINGLE: Offer()},
)


@pytest.fixture
def with_ndjson(monkeypatch: pytest.MonkeyPatch) -> Iterator[Format]:
    """ndjson registered, in this process, as a plugin registers it before the CLI is imported: the
    CLI's modules and the application's modules of choices are imported afresh (click builds a
    --format choice once, when its module loads) and put back afterwards, with the registry as it was."""
    fresh = ("decode_doctor.cli", "decode_doctor.app.choices", "decode_doctor.app.flags")
    loaded = dict(sys.modules)
    for name in sorted((n for n in loaded if n in fresh or n.startswith("decode_doctor.cli.")), key=lambda n: -n.count(".")):
        parent, _, child = name.rpartition(".")
        if parent in loaded:
            monkeypatch.setattr(loaded[parent], child, loaded[name])  # put back with the module afterwards
        monkeypatch.delitem(sys.modules, name)
    with formats.registered(NDJSON) as (fmt,):
        yield fmt


def test_each_use_offers_what_it_always_did_and_every_table_is_the_registry():
    from decode_doctor.app import choices
    from decode_doctor.app.output import FORMATS as OUTPUT_FORMATS

    assert formats.choices(Use.REPORT) == ("text", "json", "markdown", "html", "prometheus")
    assert formats.choices(Use.SINGLE) == ("bundle", "json", "markdown", "html", "prometheus")
    assert formats.choices(Use.DIFF) == ("text", "json")
    assert formats.choices(Use.FLEET) == ("text", "markdown", "html", "json")
    assert formats.choices(Use.INFO) == ("text", "json", "markdown")
    assert formats.FORMATS == choices.FORMATS == OUTPUT_FORMATS == formats.choices(Use.REPORT)
    assert formats.choices(Use.SINGLE) == choices.BUNDLE_FORMATS
    assert {use: formats.choices(use) for use in Use} == formats._OFFERED
    assert [f.file_name for f in formats.members()] == ["report.json", "report.md", "report.html"]
    assert formats.get("prometheus").file_name == "metrics.prom"
    assert [name for name, f in formats.registry().items() if not f.redacted] == ["text"]


def test_help_imports_no_renderer():
    probe = textwrap.dedent(
        """
        import sys
        from decode_doctor.cli.main import main
        for argv in (["--help"], ["check", "--help"], ["report", "--help"], ["merge", "--help"]):
            try:
                main(argv)
            except SystemExit:
                pass
        print("LOADED:" + ",".join(sorted(n for n in sys.modules if n.startswith("decode_doctor.reports."))))
        """
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO)
    (line,) = [text for text in proc.stdout.splitlines() if text.startswith("LOADED:")]
    loaded = set(line[len("LOADED:") :].split(","))
    assert "decode_doctor.reports.formats" in loaded, proc.stderr[-2000:]
    renderers = {"render", "text", "json", "markdown", "html", "prometheus", "fleet", "compare", "view", "bundle"}
    assert not loaded & {f"decode_doctor.reports.{name}" for name in renderers}, line


def test_a_registered_format_is_offered_and_rendered_by_check_and_report(with_ndjson, tmp_path):
    """Registering one Format is all it takes: check's and report's --format offer it, check renders
    it, `report --format ndjson` writes it as the one redacted, leak-checked file."""
    assert "ndjson" in formats.choices(Use.REPORT) and "ndjson" in formats.choices(Use.SINGLE)
    assert "ndjson" in cli("check", "--help").stdout and "ndjson" in cli("report", "--help").stdout

    checked = cli("check", *SWAP, "--format", "ndjson")
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    lines = [json.loads(line) for line in checked.stdout.splitlines()]
    assert lines and {line["format"] for line in lines} == {"ndjson"} and "SWAP001" in {line["code"] for line in lines}

    written = cli("report", *SWAP, "--format", "ndjson", "-o", str(tmp_path), "--state-dir", str(tmp_path / "state"))
    assert written.exit_code == 0, written.stdout + written.stderr
    (single,) = [p for p in tmp_path.iterdir() if p.is_file()]
    assert single.name.endswith("-report.ndjson") and single.stat().st_mode & 0o777 in (0o600, 0o644)
    assert "SWAP001" in {json.loads(line)["code"] for line in single.read_text().splitlines()}

    # not offered where it was not declared: a usage error, as any unknown name
    assert cli("diff", str(single), str(single), "--format", "ndjson").exit_code == 2


def test_a_registered_format_renders_through_the_application_layer(tmp_path):
    from decode_doctor.app.bundle import BundleRequest, write_report
    from decode_doctor.app.requests import RunRequest
    from decode_doctor.reports.render import render
    from decode_doctor.reports.view import build_view, judging_codes

    from .support.harness import run_app

    outcome = run_app("swappiness", root=HOST)
    view = build_view(outcome.report, codes=judging_codes(outcome.registry.codes(), outcome.report))
    with pytest.raises(UnknownFormat):
        render(view, "ndjson", io.StringIO(), tty=False)
    with formats.registered(NDJSON):
        stream = io.StringIO()
        render(view, "ndjson", stream, tty=False)
        assert json.loads(stream.getvalue().splitlines()[0])["format"] == "ndjson"
        request = BundleRequest(RunRequest(root=HOST, select=("swappiness",)), tmp_path / "one.ndjson", tmp_path / "state", "ndjson")
        result = write_report(request)
        assert result.written == tmp_path / "one.ndjson" and result.files == 1
        assert json.loads(result.written.read_text().splitlines()[0])["code"].startswith("SWAP")
    assert "ndjson" not in formats.choices(Use.REPORT)  # the registry as it was


def test_a_plugin_adds_a_format_by_its_entry_point_alone(tmp_path):
    """A distribution that declares a Format in the decode_doctor.formats entry-point group: check and
    report offer and write it; --help imports its declaration, never its renderer."""
    site = tmp_path / "site"
    package = site / "dd_csv_format"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "from decode_doctor.reports.formats import Format, Offer, Use\n\n"
        'CSV = Format("csv", ".csv", "text/csv", redacted=True,\n'
        '             offers={Use.REPORT: Offer("dd_csv_format.render:csv"), Use.SINGLE: Offer()})\n'
    )
    (package / "render.py").write_text(
        "def csv(view, stream, how):\n"
        '    stream.write("code,severity\\n")\n'
        '    for finding in view.to_json()["findings"]:\n'
        "        stream.write(f\"{finding['code']},{finding['severity']}\\n\")\n"
    )
    dist = site / "dd_csv_format-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dd-csv-format\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[decode_doctor.formats]\ncsv = dd_csv_format:CSV\n")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))}

    checked = run_dd("check", *SWAP, "--format", "csv", env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("code,severity\n") and "SWAP001,warning" in checked.stdout

    out = tmp_path / "out.csv"
    written = run_dd("report", *SWAP, "--format", "csv", "-o", str(out), "--state-dir", str(tmp_path / "state"), env=env)
    assert written.returncode == 0, written.stdout + written.stderr
    assert "SWAP001,warning" in out.read_text()

    probe = (
        "import sys\nfrom decode_doctor.cli.main import main\n"
        "try:\n    main(['check', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('RENDER:' + str('dd_csv_format.render' in sys.modules))\n"
    )
    helped = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env={**os.environ, **env}, cwd=REPO)
    assert "[text|json|markdown|html|prometheus|csv]" in helped.stdout and "RENDER:False" in helped.stdout, helped.stderr[-2000:]


@pytest.mark.parametrize(
    "argv",
    [
        ("check", *SWAP, "--format", "yaml"),
        ("analyze", "--format", "yaml", str(HOST / "etc" / "sysctl.conf")),
        ("report", *SWAP, "--format", "yaml"),
        ("report", *SWAP, "--format", "text"),  # text is not a file `report` writes
        ("diff", "a.json", "b.json", "--format", "yaml"),
        ("merge", "a.json", "--format", "yaml"),
        ("list", "--format", "yaml"),
    ],
    ids=lambda argv: argv[0] + ("-text" if "text" in argv else ""),
)
def test_an_unknown_format_is_a_usage_error_everywhere(argv, tmp_path):
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text("{}")
    result = cli(*argv, cwd=tmp_path)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert "--format" in result.stderr and not result.stdout


def test_an_unknown_format_is_a_typed_error_in_the_application_layer(tmp_path):
    from decode_doctor.app import compare
    from decode_doctor.app.bundle import BundleRequest, write_report
    from decode_doctor.app.output import OutputRequest, render_report
    from decode_doctor.app.requests import RunRequest
    from decode_doctor.engine.registry import load
    from decode_doctor.reports.fleet import FleetReader
    from decode_doctor.reports.render import render_diff

    with pytest.raises(UnknownFormat) as raised:
        formats.get("yaml", Use.REPORT)
    assert raised.value.offered == formats.choices(Use.REPORT) and "yaml" in str(raised.value)
    with pytest.raises(UnknownFormat):
        formats.get("prometheus", Use.FLEET)  # a format, but not one merge writes
    with pytest.raises(UnknownFormat):
        OutputRequest(fmt="yaml").redacted  # noqa: B018
    from decode_doctor.reports.report import Report

    with pytest.raises(UnknownFormat):
        render_report(Report([], [], [], {}), load(), OutputRequest(fmt="yaml"))
    with pytest.raises(UnknownFormat):  # before a check runs
        write_report(BundleRequest(RunRequest(root=HOST, select=("swappiness",)), tmp_path, tmp_path, "yaml"))
    with pytest.raises(UnknownFormat):  # before a report is read
        compare.diff(tmp_path / "missing.json", tmp_path / "missing.json", "html")
    with pytest.raises(UnknownFormat):
        compare.render(FleetReader(0.0).fleet("error", None, []), "prometheus")
    with pytest.raises(UnknownFormat):
        render_diff(None, "markdown")  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="already registered"):
        formats.register(formats.get("json"))
    with formats.registered(NDJSON), formats.registered(NDJSON):  # registered() replaces, and puts back
        assert formats.choices(Use.REPORT).count("ndjson") == 1
    assert "ndjson" not in formats.registry()
