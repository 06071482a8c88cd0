"""--fix and undo: preview, apply, re-check, byte-identical undo, kills, locks, privileges."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from decode_doctor.fixes.journal import LockBusy, UndoError, state_lock, undo_run

from .conftest import REPO, SWAP_ONLY, kill_at_step, python_for, run_dd, tree_digest
from .support.harness import Recorder, cli, fix_killed_at, run_fix

CONF = "etc/sysctl.d/90-decode-doctor.conf"


def fix(root: Path, state: Path, *extra: str):
    return cli("check", *SWAP_ONLY, "--root", str(root), "--fix", "--yes", "--state-dir", str(state), *extra)


def test_fix_sets_both_and_undo_restores_every_byte(host, state_dir):
    root = host("swap60-rhel7")
    before = tree_digest(root)
    proc = fix(root, state_dir)
    assert proc.exit_code == 0, proc.stdout + proc.stderr
    assert (root / "proc/sys/vm/swappiness").read_text() == "1\n"
    assert "vm.swappiness = 1\n" in (root / CONF).read_text()
    assert "SWAP001: resolved" in proc.stdout
    assert "Ready: no problems found" in proc.stdout  # the report after the fix is the re-checked state
    undo = cli("undo", "--state-dir", str(state_dir))
    assert undo.exit_code == 0, undo.stdout + undo.stderr
    assert tree_digest(root) == before
    again = cli("undo", "--state-dir", str(state_dir))
    assert again.exit_code == 2 and "no fix run to undo" in again.stderr


def test_the_fix_path_runs_in_process_with_an_injected_dialogue(host, state_dir):
    root = host("swap60-rhel7")
    outcome, said = run_fix("swappiness", root=root, state_dir=state_dir)
    assert outcome.report.findings == []
    assert outcome.report.fixes is not None and outcome.report.fixes.applied is True
    assert "Planned fixes (1):" in said.text and "SWAP001: resolved" in said.text
    asked = Recorder(interactive=True, answer=False)
    from decode_doctor.app import fixing
    from decode_doctor.app.requests import FixRequest, RunRequest
    from decode_doctor.app.service import run

    fresh = host("boot-regress")
    outcome = run(RunRequest(root=fresh, select=("swappiness",)))
    fixing.fix(outcome, FixRequest(state_dir), asked)
    assert "? Apply 1 fix(es)?" in asked.lines and "Nothing was changed." in asked.lines


def test_dry_run_previews_and_changes_nothing(host, state_dir):
    root = host("swap60-rhel7")
    before = tree_digest(root)
    proc = cli("check", *SWAP_ONLY, "--root", str(root), "--fix", "--dry-run", "--state-dir", str(state_dir))
    assert f"write 1 to {root}/proc/sys/vm/swappiness (the --root copy of /proc/sys/vm/swappiness) (now 60)" in proc.stdout
    assert "+vm.swappiness = 1" in proc.stdout
    assert "Dry run: nothing was changed." in proc.stdout
    assert tree_digest(root) == before
    assert not state_dir.exists()


def test_without_yes_and_without_a_terminal_nothing_is_applied(host, state_dir):
    root = host("swap60-rhel7")
    before = tree_digest(root)
    proc = cli("check", *SWAP_ONLY, "--root", str(root), "--fix", "--state-dir", str(state_dir))
    assert "Pass --yes to apply" in proc.stdout
    assert tree_digest(root) == before


def test_existing_file_is_diffed_and_keeps_its_mode(host, state_dir):
    root = host("swap60-rhel7")
    target = root / CONF
    target.write_text("vm.swappiness = 60\n")
    target.chmod(0o640)
    original = target.read_bytes()
    preview = cli("check", *SWAP_ONLY, "--root", str(root), "--fix", "--dry-run", "--state-dir", str(state_dir))
    assert "-vm.swappiness = 60" in preview.stdout and "+vm.swappiness = 1" in preview.stdout
    fix(root, state_dir)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    cli("undo", "--state-dir", str(state_dir))
    assert target.read_bytes() == original
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_a_file_changed_after_the_fix_is_left_alone_unless_forced(host, state_dir):
    root = host("swap60-rhel7")
    fix(root, state_dir)
    (root / CONF).write_text("vm.swappiness = 5  # the admin's own edit\n")
    proc = cli("undo", "--state-dir", str(state_dir))
    assert proc.exit_code == 1
    assert "conflict: /etc/sysctl.d/90-decode-doctor.conf changed after the fix" in proc.stdout
    assert "the admin's own edit" in (root / CONF).read_text()
    assert (root / "proc/sys/vm/swappiness").read_text() == "60\n"  # the other action was undone
    listing = cli("undo", "--list", "--state-dir", str(state_dir)).stdout
    assert "partly undone (1 of 2 restored)" in listing  # not "applied": one step went back
    forced = cli("undo", "--state-dir", str(state_dir), "--force")
    assert forced.exit_code == 0
    assert not (root / CONF).exists()
    assert "undone" in cli("undo", "--list", "--state-dir", str(state_dir)).stdout


def test_undo_removes_the_temp_file_a_kill_inside_an_atomic_write_left(host, state_dir):
    root = host("swap60-rhel7")
    before = tree_digest(root)
    fix(root, state_dir)
    leftover = root / "etc/sysctl.d/.90-decode-doctor.conf.k3j2h1.dd-tmp"  # what mkstemp names it
    leftover.write_bytes(b"vm.swappiness = 1\n")
    proc = cli("undo", "--state-dir", str(state_dir))
    assert proc.exit_code == 0, proc.stdout + proc.stderr
    assert f"{leftover}: removed: a temp file an interrupted write left" in proc.stdout
    assert tree_digest(root) == before


def test_a_tunable_under_root_is_replaced_whole_so_a_kill_never_leaves_it_empty(tmp_path, monkeypatch):
    from decode_doctor.fixes import atomic

    tunable = tmp_path / "proc/sys/vm/swappiness"
    tunable.parent.mkdir(parents=True)
    tunable.write_text("60\n")

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # SIGKILL's stand-in: between the temp file and the rename

    monkeypatch.setattr(atomic.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        atomic.write_in_place(tunable, b"1\n")
    assert tunable.read_text() == "60\n" and sorted(p.name for p in tunable.parent.iterdir()) == ["swappiness"]


def test_a_failed_move_rolls_back_only_what_its_own_run_moved(tmp_path):
    """Two runs (separate state dirs) quarantine the same file; B moves it while A is between its
    journal record and its move. A's rollback must not put back B's quarantined file."""
    from decode_doctor.fixes.journal import apply_plans, run_info

    broken, quarantine, plan = _quarantine_plan(tmp_path)
    b_result = None

    def a_step(number: int) -> None:
        nonlocal b_result
        if number == 2 and b_result is None:  # A journaled its intent; B runs to the end now
            b_result = apply_plans([plan], tmp_path / "state-b", {"argv": ["b"]})

    a_result = apply_plans([plan], tmp_path / "state-a", {"argv": ["a"]}, on_step=a_step)
    assert [o.status for o in b_result.outcomes] == ["applied"]
    assert a_result.outcomes[0].status.startswith("failed")
    assert not broken.exists() and (quarantine / "broken.jpg").read_bytes() == b"not a jpeg"  # B's move stands
    assert run_info(b_result.run_dir).status == "applied"


def test_undo_a_named_run_and_list(host, state_dir):
    root = host("swap60-rhel7")
    fix(root, state_dir)
    listing = cli("undo", "--list", "--state-dir", str(state_dir)).stdout
    run_id = listing.split()[0]
    assert "applied" in listing
    assert cli("undo", run_id, "--state-dir", str(state_dir)).exit_code == 0
    assert "undone" in cli("undo", "--list", "--state-dir", str(state_dir)).stdout
    unknown = cli("undo", "no-such-run", "--state-dir", str(state_dir))
    assert unknown.exit_code == 2 and "no fix run 'no-such-run'" in unknown.stderr


def test_a_second_fix_run_refuses_while_one_holds_the_lock(host, state_dir):
    root = host("swap60-rhel7")
    before = tree_digest(root)
    with state_lock(state_dir):
        proc = fix(root, state_dir)
        with pytest.raises(LockBusy), state_lock(state_dir):
            pass
    assert "another decode-doctor fix or undo is running" in proc.stdout
    assert tree_digest(root) == before


def test_json_report_of_a_fix_run_records_the_outcomes(host, state_dir):
    root = host("swap60-rhel7")
    proc = fix(root, state_dir, "--format", "json")
    report = json.loads(proc.stdout)
    assert report["fixes"]["applied"] is True
    assert {o["target"] for o in report["fixes"]["outcomes"]} == {"/proc/sys/vm/swappiness", "/" + CONF}
    assert report["findings"] == []
    assert "Planned fixes" in proc.stderr  # the dialogue goes to stderr when stdout is data


def test_sigkill_at_every_journal_step_then_undo_restores_the_originals(host, tmp_path):
    """In process: the fix runs in a forked child that is SIGKILLed after each step in turn."""
    steps_seen = 0
    for step in range(1, 40):
        root = host("swap60-rhel7") if step == 1 else _fresh(tmp_path, step)
        state = tmp_path / f"state-{step}"
        before = tree_digest(root)
        if not fix_killed_at(step, "swappiness", root=root, state_dir=state):
            break
        steps_seen += 1
        try:
            undo_run(state)
        except UndoError as exc:  # killed before any action was journaled
            assert "no fix run to undo" in str(exc)
        assert tree_digest(root) == before, f"step {step}"
        assert not list(root.rglob("*.dd-tmp")), f"step {step}: a temp file was left behind"
    # run record, 4 steps for each of the 2 actions, the finished record
    assert steps_seen == 10


def test_sigkill_from_the_cli_then_undo(host, state_dir):
    """The CLI sample of the kill loop above: the real process, killed after the backup of the first action."""
    root = host("swap60-rhel7")
    before = tree_digest(root)
    proc = run_dd("check", *SWAP_ONLY, "--root", str(root), "--fix", "--yes", "--state-dir", str(state_dir), env=kill_at_step(3))
    assert proc.returncode == -9
    assert run_dd("undo", "--state-dir", str(state_dir)).returncode == 0
    assert tree_digest(root) == before


def _fresh(tmp_path: Path, step: int) -> Path:
    target = tmp_path / f"host-{step}"
    shutil.copytree(REPO / "fixtures/hosts/swap60-rhel7", target)
    return target


def _nobody_can_run_python() -> str | None:
    if os.geteuid() != 0:
        return "needs root to drop to an unprivileged user"
    if shutil.which("runuser") is None:
        return "runuser is not installed"
    if python_for("nobody") is None:
        return "user nobody can run no Python of this version with this checkout's packages (directories not world-readable)"
    return None


def test_without_root_the_fix_prints_the_commands_and_changes_nothing(tmp_path):
    reason = _nobody_can_run_python()
    if reason:
        pytest.skip(reason)
    shared = Path(os.environ.get("TMPDIR", "/tmp")) / f"dd-nobody-{os.getpid()}"
    root = shared / "host"
    try:
        shared.mkdir(mode=0o755)
        shared.chmod(0o755)
        shutil.copytree(REPO / "fixtures/hosts/swap60-rhel7", root)
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        before = tree_digest(root)
        proc = run_dd(
            "check",
            *SWAP_ONLY,
            "--root",
            str(root),
            "--fix",
            "--yes",
            "--state-dir",
            str(shared / "state"),
            user="nobody",
            env={"HOME": str(shared)},
        )
        assert "cannot write the targets (it needs root, or the filesystem is read-only); nothing was changed" in proc.stdout, (
            proc.stdout + proc.stderr
        )
        assert "sudo sysctl -w vm.swappiness=1" in proc.stdout
        assert f"sudo tee {root}/{CONF}" in proc.stdout or "sudo tee /etc/sysctl.d/90-decode-doctor.conf" in proc.stdout
        assert tree_digest(root) == before
        assert not (shared / "state").exists()
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_read_only_filesystem_prints_the_commands_and_changes_nothing(host, state_dir):
    """Root, but the host's /etc and /proc/sys are on a read-only mount (a real one, in a private mount namespace)."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to make a private read-only bind mount")
    root = host("swap60-rhel7")
    before = tree_digest(root)
    script = (
        f"mount --bind {root} {root} && mount -o remount,bind,ro {root} && "
        f"exec {os.sys.executable} -m decode_doctor check --select swappiness --root {root} --fix --yes --state-dir {state_dir}"
    )
    proc = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, cwd=REPO, env={**os.environ, "NO_COLOR": "1"}
    )
    if "mount" in proc.stderr and proc.returncode not in (0, 1):
        pytest.skip(f"cannot make a read-only bind mount here: {proc.stderr.strip()}")
    assert "cannot write the targets (it needs root, or the filesystem is read-only); nothing was changed" in proc.stdout, (
        proc.stdout + proc.stderr
    )
    assert "sudo sysctl -w vm.swappiness=1" in proc.stdout
    assert tree_digest(root) == before


def test_a_tunable_under_sys_is_written_with_tee_not_sysctl(tmp_path):
    from decode_doctor.fixes.actions import WriteTunable

    sysfs = WriteTunable(tmp_path / "enabled", "never", label="/sys/kernel/mm/transparent_hugepage/enabled")
    assert sysfs.shell() == "echo never | sudo tee /sys/kernel/mm/transparent_hugepage/enabled >/dev/null"
    procfs = WriteTunable(tmp_path / "swappiness", "1", label="/proc/sys/vm/swappiness")
    assert procfs.shell() == "sudo sysctl -w vm.swappiness=1"


def _quarantine_plan(tmp_path):
    from decode_doctor.engine.findings import Finding, Severity
    from decode_doctor.fixes.actions import FixPlan, MoveFile

    data = tmp_path / "data"
    data.mkdir()
    broken = data / "broken.jpg"
    broken.write_bytes(b"not a jpeg")
    quarantine = tmp_path / "data.quarantine"
    finding = Finding("IMG001", "images", Severity.ERROR, "t", "m", path=str(broken))
    move = MoveFile(broken, quarantine / "broken.jpg", manifest=quarantine / "manifest.jsonl")
    return broken, quarantine, FixPlan(finding, "quarantine", [move])


def _created(tmp_path, before):
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p not in before and "journal.jsonl" not in p.name)


def test_a_kill_after_the_manifest_line_and_before_the_move_is_undone_whole(tmp_path):
    """Steps: 1 the run's record, 2 the intent, 3 the backup (the manifest line), 4 the move. A kill
    at 3 leaves a manifest naming a file that never moved: undo takes the line back, and with it the
    quarantine this run made."""
    from decode_doctor.fixes.journal import apply_plans, undo_run

    broken, quarantine, plan = _quarantine_plan(tmp_path)

    def kill(step: int) -> None:
        if step == 3:
            raise KeyboardInterrupt  # SIGKILL's stand-in: nothing after this line runs

    with pytest.raises(KeyboardInterrupt):
        apply_plans([plan], tmp_path / "state", {"argv": ["fix"]}, on_step=kill)
    assert "broken.jpg" in (quarantine / "manifest.jsonl").read_text()  # the window the issue names
    _run, outcomes = undo_run(tmp_path / "state")
    assert broken.read_bytes() == b"not a jpeg" and not quarantine.exists(), outcomes
    assert any("withdrawn" in status for _, status in outcomes), outcomes
    state_files = [p.name for p in (tmp_path / "state").rglob("*") if p.is_file()]
    assert not [name for name in state_files if name.endswith(".dd-tmp")]


def test_a_refused_move_takes_its_manifest_line_back_and_keeps_the_other_runs(tmp_path):
    """Another run quarantined the same file between this run's manifest line and its move: the move
    is refused (the destination exists), and of the two identical lines one goes: one file moved."""
    import json

    from decode_doctor.fixes.journal import apply_plans

    broken, quarantine, plan = _quarantine_plan(tmp_path)
    other = {}

    def interleave(step: int) -> None:
        if step == 3 and not other:  # this run's line is written; the other run moves the file now
            other["result"] = apply_plans([plan], tmp_path / "state-b", {"argv": ["b"]})

    result = apply_plans([plan], tmp_path / "state-a", {"argv": ["a"]}, on_step=interleave)
    assert result.outcomes[0].status.startswith("failed") and other["result"].outcomes[0].status == "applied"
    lines = [json.loads(line) for line in (quarantine / "manifest.jsonl").read_text().splitlines()]
    assert [entry.get("quarantined") for entry in lines] == [str(quarantine / "broken.jpg")]  # B's line alone
    assert (quarantine / "broken.jpg").read_bytes() == b"not a jpeg" and not broken.exists()


def test_undo_removes_and_names_a_temp_file_a_killed_backup_left_in_the_state_dir(host, state_dir):
    root = host("swap60-rhel7")
    from decode_doctor.fixes.journal import runs_dir

    assert cli("check", "--root", str(root), "--select", "SWAP001", "--fix", "--yes", "--state-dir", str(state_dir)).exit_code == 0
    (run,) = list(runs_dir(state_dir).iterdir())
    leftover = run / "backups" / ".3.a1b2c3d4.dd-tmp"  # what a kill between the backup's write and its rename leaves
    leftover.write_bytes(b"partial")
    proc = cli("undo", "--state-dir", str(state_dir))
    assert proc.exit_code == 0 and not leftover.exists()
    assert ".3.a1b2c3d4.dd-tmp" in proc.stdout and "interrupted backup" in proc.stdout


def test_a_real_kill_at_the_backups_rename_then_undo_leaves_nothing_the_run_created(host, tmp_path):
    """SIGKILL (no cleanup runs) between the backup's temp file and its rename into the state dir's
    backups/: undo restores the host and removes the temp file, and says so."""
    import signal

    from decode_doctor.fixes import atomic
    from decode_doctor.fixes.journal import undo_run

    from .support.harness import run_fix

    root = host("swap60-rhel7")
    before = tree_digest(root)
    state = tmp_path / "state"
    pid = os.fork()
    if pid == 0:
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            replace = atomic.os.replace

            def killed_at_backup(src, dst, *args, **kwargs):  # type: ignore[no-untyped-def]
                if str(dst).isdigit():  # backups/<seq>: the backup's own rename
                    os.kill(os.getpid(), signal.SIGKILL)
                return replace(src, dst, *args, **kwargs)

            atomic.os.replace = killed_at_backup
            run_fix("SWAP001", root=root, state_dir=state)
        finally:
            os._exit(70)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    left = [p for p in state.rglob("*") if p.name.endswith(".dd-tmp")]
    assert left, "the kill did not happen inside the backup's write"
    _run, outcomes = undo_run(state)
    assert tree_digest(root) == before
    assert not [p for p in state.rglob("*") if p.name.endswith(".dd-tmp")]
    assert any("interrupted backup" in status for _, status in outcomes), outcomes
