"""Writes that cannot be redirected, stores that never lose a record, merge linear in hosts.

Every output (the agent's textfile and --json-report, `check -o`, state files) goes through one writer
(engine.writes.replace_output): a link at the path is replaced, never written through; a FIFO there is
refused at once, never opened; two processes appending to a store both keep their records."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from decode_doctor.engine.writes import RefusedTarget, StoreBusy, lock_path, locked, replace_output

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ROOT = FIXTURES / "hosts/swap60-rhel7"
BOUND_S = 60  # a FIFO opened for writing would block for ever; a busy machine still finishes in this


def _dd(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(state), "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "decode_doctor", *args], capture_output=True, text=True, timeout=BOUND_S, env=env)


def _check(target: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    return _dd("check", "--root", str(ROOT), "--select", "swappiness", "--format", "json", "-o", str(target), state=tmp / "state")


def _agent(directory: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = ("agent", "--root", str(ROOT), "--select", "swappiness", "--textfile-directory", str(directory), "--once", *extra)
    return _dd(*args, state=tmp / "state")


def _victims(tmp: Path) -> tuple[Path, Path]:
    """A regular file outside the directory (a loop device's stand-in: its bytes must stay) and a FIFO."""
    outside = tmp / "elsewhere"
    outside.mkdir()
    device = outside / "loop0"
    device.write_bytes(b"\x00superblock" * 400)
    fifo = outside / "fifo"
    os.mkfifo(fifo)
    return device, fifo


def _placed(target: Path, how: str, device: Path, fifo: Path) -> None:
    if how == "link-to-null":
        target.symlink_to("/dev/null")
    elif how == "link-to-file":
        target.symlink_to(device)
    elif how == "link-to-fifo":
        target.symlink_to(fifo)
    else:
        os.mkfifo(target)


def _judged(target: Path, how: str, device: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert device.read_bytes() == b"\x00superblock" * 400  # never written through
    if how == "fifo-in-place":
        assert stat.S_ISFIFO(os.lstat(target).st_mode)  # refused, never opened
        said = [line for line in proc.stderr.splitlines() if "FIFO" in line]
        assert said and "refusing to write there" in said[0], proc.stderr
    else:
        assert stat.S_ISREG(os.lstat(target).st_mode), proc.stderr  # the link replaced by the report itself
        assert target.read_text().strip()


CASES = ["link-to-null", "link-to-file", "link-to-fifo", "fifo-in-place"]


@pytest.mark.parametrize("how", CASES)
def test_check_o_never_writes_through_a_link_and_refuses_a_fifo(tmp_path, how):
    device, fifo = _victims(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    target = out / "report.json"
    _placed(target, how, device, fifo)
    proc = _check(target, tmp_path)
    _judged(target, how, device, proc)
    if how != "fifo-in-place":
        assert json.loads(target.read_text())["findings"]


@pytest.mark.parametrize("how", CASES)
def test_the_agents_textfile_never_is_written_through_or_blocks(tmp_path, how):
    device, fifo = _victims(tmp_path)
    directory = tmp_path / "textfile"
    directory.mkdir()
    target = directory / "decode_doctor.prom"
    _placed(target, how, device, fifo)
    proc = _agent(directory, tmp_path)
    _judged(target, how, device, proc)
    if how == "fifo-in-place":
        assert proc.returncode == 2  # the run failed, said in one line, and the agent ended (--once)
    else:
        assert "decode_doctor_" in target.read_text()


@pytest.mark.parametrize("how", CASES)
def test_the_agents_json_report_never_is_written_through_or_blocks(tmp_path, how):
    device, fifo = _victims(tmp_path)
    directory = tmp_path / "textfile"
    directory.mkdir()
    target = tmp_path / "fleet" / "host.json"
    target.parent.mkdir()
    _placed(target, how, device, fifo)
    proc = _agent(directory, tmp_path, "--json-report", str(target))
    _judged(target, how, device, proc)
    if how != "fifo-in-place":
        assert json.loads(target.read_text())["run"]


def test_the_writer_refuses_a_device_a_directory_and_a_place_in_dev(tmp_path):
    (tmp_path / "dir").mkdir()
    with pytest.raises(RefusedTarget, match="a directory"):
        replace_output(tmp_path / "dir", b"x")
    try:
        os.mknod(tmp_path / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers, in place
    except PermissionError:
        pass  # no CAP_MKNOD: the links to /dev/null above stand for it
    else:
        with pytest.raises(RefusedTarget, match="a device"):
            replace_output(tmp_path / "null", b"x")
        assert stat.S_ISCHR(os.lstat(tmp_path / "null").st_mode)
        os.unlink(tmp_path / "null")
    with pytest.raises(RefusedTarget, match="/dev"):
        replace_output(Path("/dev/stdout"), b"x")  # a link in /dev: never replaced, never written through
    assert os.path.islink("/dev/stdout")
    assert list(tmp_path.iterdir()) == [tmp_path / "dir"]  # no temporary file left behind


def test_a_lock_file_that_is_a_link_or_a_fifo_is_refused_and_a_held_lock_times_out(tmp_path):
    store = tmp_path / "store.json"
    lock_path(store).symlink_to("/dev/null")
    with pytest.raises(RefusedTarget, match="symbolic link"), locked(store):
        pass
    lock_path(store).unlink()
    os.mkfifo(lock_path(store))
    with pytest.raises(RefusedTarget, match="FIFO"), locked(store):
        pass
    lock_path(store).unlink()
    with locked(store):
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                f"from pathlib import Path; from decode_doctor.engine.writes import locked\nwith locked(Path({str(store)!r}), 0.2): pass",
            ],
            capture_output=True,
            text=True,
            timeout=BOUND_S,
        )
    assert proc.returncode == 1 and "StoreBusy" in proc.stderr and "locked by another process" in proc.stderr
    assert issubclass(StoreBusy, OSError)  # the bandwidth check's store write treats it as any failed write


# --- stores: concurrent appends, implausible figures ----------------------------------------------

WRITERS = 8
EACH = 20
NOW = 1_700_000_000.0


def _figure_data(measured_at: float, machine: str, read_gbps: float = 25.0) -> dict[str, object]:
    measured = {
        "read_gbps": read_gbps, "copy_gbps": 20.0, "read_spread": 0.0, "copy_spread": 0.0, "threads": 2,
        "buffer_bytes": 1 << 28, "passes": 3, "wall_s": 1.0, "other_load": 0.0,
    }  # fmt: skip
    cpu = {"measured": measured, "llc_bytes": None, "numa_nodes": 1, "governor": None, "measured_on": "this host"}
    return {"measured_at": measured_at, "machine": machine, "facts": {"cpu": cpu}}


def _append_quiet(state: str, worker: int) -> None:
    from decode_doctor.checks.bandwidth import quiet

    quiet.KEEP = WRITERS * EACH  # every append kept: a lost one shows as a missing record
    for number in range(EACH):
        quiet.store_quiet(quiet._figure(_figure_data(NOW + worker * 1000 + number, f"worker-{worker}")), Path(state))


def _append_calibration(state: str, worker: int) -> None:
    from decode_doctor.models.calibration import records
    from decode_doctor.models.calibration.model import Calibration

    records.KEEP = WRITERS * EACH
    base = {
        "host": "h/cpu", "engine": "llama.cpp", "engine_version": "0.3.36", "threads": 2, "weight_type": "F16",
        "fixed_s": 0.0001, "s_per_byte": 3e-11, "s_per_unit": 1e-12, "s_per_kv_byte": 1e-11, "spread": 0.05,
    }  # fmt: skip
    for number in range(EACH):
        records.record(Path(state), Calibration(**base, measured_at=NOW + worker * 1000 + number))  # type: ignore[arg-type]


def _concurrently(target, state: Path) -> None:  # type: ignore[no-untyped-def]
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=target, args=(str(state), worker)) for worker in range(WRITERS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(BOUND_S * 2)
        assert worker.exitcode == 0


def test_eight_processes_appending_to_the_quiet_store_keep_every_figure(tmp_path):
    from decode_doctor.checks.bandwidth.quiet import STORE

    _concurrently(_append_quiet, tmp_path)
    figures = json.loads((tmp_path / STORE).read_text())["figures"]
    assert len({(f["machine"], f["measured_at"]) for f in figures}) == len(figures) == WRITERS * EACH
    assert not list(tmp_path.glob("*.kept-*")) and not list(tmp_path.glob("*.dd-tmp"))


def test_eight_processes_appending_calibrations_keep_every_record(tmp_path):
    from decode_doctor.models.calibration.records import CACHE_NAME

    _concurrently(_append_calibration, tmp_path)
    data = json.loads((tmp_path / CACHE_NAME).read_text())
    assert len({r["measured_at"] for r in data}) == len(data) == WRITERS * EACH
    assert not list(tmp_path.glob("*.kept-*")) and not list(tmp_path.glob("*.dd-tmp"))


@pytest.mark.parametrize("gbps", [1e14, 1e-300, 0.01, 250_000.0])
def test_an_implausible_quiet_bandwidth_is_dropped_with_the_reason(tmp_path, gbps):
    from decode_doctor.checks.bandwidth.quiet import STORE, load_quiet

    figures = [_figure_data(NOW, "good"), _figure_data(NOW + 1, "hostile", read_gbps=gbps)]
    (tmp_path / STORE).write_text(json.dumps({"figures": figures}))
    read = load_quiet(tmp_path)
    assert [f.machine for f in read.figures] == ["good"]
    (why,) = read.ignored
    assert "figure 2: ignored" in why and "read_gbps" in why and "not a plausible bandwidth" in why


def test_an_implausible_gpu_figure_is_dropped_too(tmp_path):
    from decode_doctor.checks.bandwidth.quiet import STORE, load_quiet

    figure = _figure_data(NOW, "gpu")
    gpu = {"index": 0, "name": "H100", "memory_bytes": 80 << 30, "copy_gbps": 90_000.0, "spread": 0.0}
    figure["facts"] = {**figure["facts"], "gpus": [gpu]}  # type: ignore[dict-item]
    (tmp_path / STORE).write_text(json.dumps({"figures": [figure]}))
    read = load_quiet(tmp_path)
    assert not read.figures and "GPU 0 copy_gbps" in read.ignored[0]


# --- merge: linear in hosts ---------------------------------------------------------------------------


def _host(number: int) -> dict[str, object]:
    results = [{"check": f"check-{c}", "outcome": "passed"} for c in range(5)] + [{"check": "swap", "outcome": "findings"}]
    findings = [{"check": "swap", "severity": "warning", "code": "SWAP001"}]
    return {"run": {"host": f"node-{number}", "started": "2026-01-01T00:00:00+00:00"}, "results": results, "findings": findings}


@pytest.mark.parametrize("fmt", ["text", "markdown", "html", "json"])
def test_merge_lists_the_checks_once_per_render_not_once_per_host(monkeypatch, fmt):
    from decode_doctor.reports import fleet as fleet_module

    calls = []
    names = fleet_module.check_names
    monkeypatch.setattr(fleet_module, "check_names", lambda rows: calls.append(len(rows)) or names(rows))
    counts = {}
    for hosts in (10, 100):
        calls.clear()
        merged = fleet_module.fleet([(f"{n}.json", _host(n)) for n in range(hosts)], now=1_800_000_000.0)
        fleet_module.render_fleet(merged, fmt)
        counts[hosts] = len(calls)
    assert counts[100] == counts[10] <= 2  # a pass over the rows per render (html: table and classes), not per host


@pytest.mark.parametrize("name", ["node.json", "node.tar.gz"])
def test_a_fifo_given_to_merge_or_diff_is_refused_at_once_never_opened_for_a_blocking_read(tmp_path, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    argv = [sys.executable, "-m", "decode_doctor"]
    merged = subprocess.run([*argv, "merge", str(fifo)], capture_output=True, text=True, timeout=60)
    assert merged.returncode == 3 and "a FIFO, not a regular file" in merged.stdout, merged.stdout + merged.stderr
    diffed = subprocess.run([*argv, "diff", str(fifo), str(fifo)], capture_output=True, text=True, timeout=60)
    assert diffed.returncode == 2 and "a FIFO, not a regular file" in diffed.stderr
