"""Images: every damage class found, nothing good touched, quarantine and undo byte-identical."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from decode_doctor.cli.check import KILL_AT_ENV
from decode_doctor.fixes.journal import UndoError, undo_run

from .conftest import run_dd, tree_digest
from .support.harness import cli, fix_killed_at, run_check
from .support.imagegen import encode, picture, write_dataset

QUARANTINE_CODES = {"IMG001", "IMG002", "IMG004", "IMG011"}


def check(*args: str, **kw):
    return cli("check", "--select", "images", *args, **kw)


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "data" / "train"
    items = write_dataset(root, outside=tmp_path / "outside")
    return root, items


def test_every_damage_class_is_found_and_nothing_good_is_flagged(dataset):
    root, items = dataset
    run = run_check("images", images=(root,))
    by_path = run.by_path()
    for item in items:
        found = by_path.get(str(root / item.rel), set())
        if item.expect in ("good", "mode"):
            assert found == set(), (item.rel, found)
        else:
            assert found == {item.expect}, (item.rel, found)
    summary = {f.code: f for f in run.findings if f.path is None}
    assert set(summary["IMG006"].evidence["modes"]) == {"RGBA (alpha)", "16-bit", "palette with transparency", "CMYK"}
    assert summary["IMG009"].evidence["links"] and len(summary["IMG009"].evidence["links"]) == 2
    assert summary["IMG010"].evidence["files"] == [str(root / "good/._photo.jpg")]
    assert run.facts.datasets[0].images == len([i for i in items if not i.rel.startswith(("links/",))]) or run.facts.datasets[0].images > 0
    corrupt = next(f for f in run.findings if f.path and f.path.endswith("corrupt-entropy.jpg"))
    assert "Corrupt JPEG data" in corrupt.evidence["decoder_message"]
    from PIL import Image

    with Image.open(corrupt.path) as image:
        image.load()  # Pillow drops libjpeg's warning: the damage the strict decoder exists to catch


def test_quarantine_and_undo_are_byte_identical_and_stay_in_bounds(dataset, tmp_path):
    root, items = dataset
    everything_before = tree_digest(tmp_path)
    state = tmp_path.parent / f"{tmp_path.name}-state"
    proc = check("--images", str(root), "--fix", "--yes", "--state-dir", str(state))
    assert "applied" in proc.stdout, proc.stdout + proc.stderr
    quarantine = root.parent / "train.quarantine"
    manifest = [json.loads(line) for line in (quarantine / "manifest.jsonl").read_text().splitlines()]
    moved = {entry["original"] for entry in manifest}
    assert all(entry["quarantined"].startswith(str(quarantine) + "/") for entry in manifest)
    expected = {str(root / i.rel) for i in items if i.expect in QUARANTINE_CODES}
    assert moved == expected
    for item in items:
        here, there = root / item.rel, quarantine / item.rel
        if item.expect in QUARANTINE_CODES:
            assert not here.exists() and there.read_bytes() == item.data
        elif item.expect == "IMG005":
            assert not here.exists() and here.with_suffix(".png").read_bytes() == item.data
        else:
            assert here.read_bytes() == item.data, item.rel
    for entry in manifest:
        assert {"original", "quarantined", "size", "sha256", "reason", "time"} <= set(entry)
    after = tree_digest(tmp_path)
    changed = {k for k in set(after) | set(everything_before) if after.get(k) != everything_before.get(k)}
    assert all(k.startswith(("data/train/", "data/train.quarantine")) for k in changed), changed - {
        k for k in changed if k.startswith("data/")
    }
    assert (tmp_path / "outside/elsewhere.jpg").exists()  # the broken file behind the link stayed
    undo = cli("undo", "--state-dir", str(state))
    assert undo.exit_code == 0, undo.stdout + undo.stderr
    restored = tree_digest(root)
    assert restored == {k[len("data/train/") :]: v for k, v in everything_before.items() if k.startswith("data/train/")}
    after_undo = [json.loads(line) for line in (quarantine / "manifest.jsonl").read_text().splitlines()]
    assert {e["restored"] for e in after_undo if "restored" in e} == expected  # the manifest tells the whole story


def _broken_dataset(root: Path, broken: dict[str, bytes]) -> None:
    root.mkdir(parents=True)
    for name, data in broken.items():
        (root / name).write_bytes(data)


def test_sigkill_mid_quarantine_loses_nothing(tmp_path):
    """In process: the fix runs in a forked child killed after each journal step in turn."""
    broken = {f"b{i}.jpg": encode(picture(seed=i), "JPEG")[:200] for i in range(5)}
    step, kills = 0, 0
    while True:
        step += 1
        root = tmp_path / f"run{step}" / "ds"
        _broken_dataset(root, broken)
        state = tmp_path / f"run{step}" / "state"
        killed = fix_killed_at(step, "images", images=(root,), state_dir=state)
        quarantine = root.parent / "ds.quarantine"
        for name, data in broken.items():
            places = [p for p in (root / name, quarantine / name) if p.exists()]
            assert len(places) == 1, f"step {step}: {name} is in {places}"
            assert places[0].read_bytes() == data
        if not killed:
            break
        kills += 1
        try:
            undo_run(state)
        except UndoError:  # killed before any action was journaled
            pass
        for name, data in broken.items():
            assert (root / name).read_bytes() == data and not (quarantine / name).exists()
    assert kills == 2 + 4 * len(broken)


def test_sigkill_from_the_cli_mid_quarantine(tmp_path):
    """The CLI sample: the real process killed mid-move, then `undo`."""
    broken = {f"b{i}.jpg": encode(picture(seed=i), "JPEG")[:200] for i in range(2)}
    root = tmp_path / "ds"
    _broken_dataset(root, broken)
    state = tmp_path / "state"
    proc = run_dd("check", "--select", "images", "--images", str(root), "--fix", "--yes", "--state-dir", str(state), env={KILL_AT_ENV: "4"})
    assert proc.returncode == -9
    assert run_dd("undo", "--state-dir", str(state)).returncode == 0
    assert {p.name: p.read_bytes() for p in root.iterdir()} == broken


def test_quarantine_on_another_filesystem(tmp_path):
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second filesystem (/dev/shm) here")
    root = shm / f"dd-images-{os.getpid()}"
    try:
        (root / "sub").mkdir(parents=True)
        data = encode(picture(), "PNG")[:300]
        (root / "sub/cut.png").write_bytes(data)
        quarantine = tmp_path / "q"
        state = tmp_path / "state"
        proc = check("--images", str(root), "--quarantine-dir", str(quarantine), "--fix", "--yes", "--state-dir", str(state))
        assert "applied" in proc.stdout, proc.stdout + proc.stderr
        assert not (root / "sub/cut.png").exists() and (quarantine / "sub/cut.png").read_bytes() == data
        assert not list(quarantine.rglob("*.dd-tmp"))
        assert cli("undo", "--state-dir", str(state)).exit_code == 0
        assert (root / "sub/cut.png").read_bytes() == data and not (quarantine / "sub/cut.png").exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_quarantine_inside_the_dataset_is_refused(tmp_path):
    root = tmp_path / "ds"
    root.mkdir()
    (root / "x.jpg").write_bytes(b"")
    report = check("--images", str(root), "--quarantine-dir", str(root / "q"), "--format", "json").json()
    (result,) = report["results"]
    assert result["state"] == "crashed" and "is inside the dataset" in result["reason"]
    assert (root / "x.jpg").exists()


def test_per_file_time_limit_does_not_stall_the_scan(tmp_path):
    root = tmp_path / "ds"
    root.mkdir()
    for i in range(3):
        (root / f"big{i}.png").write_bytes(encode(picture(1200, 900, seed=i), "PNG"))
    run = run_check("images", images=(root,), options={"image_timeout": 0.001})
    assert {f.code for f in run.findings} == {"IMG011"}
    assert len(run.findings) == 3


def test_progress_is_reported_while_scanning(tmp_path, monkeypatch):
    from decode_doctor.checks.images.check import Images
    from decode_doctor.engine import Context

    root = tmp_path / "ds"
    root.mkdir()
    for i in range(400):
        (root / f"{i}.png").write_bytes(encode(picture(32, 32, seed=i), "PNG"))
    seen: list[str] = []
    ctx = Context(images=(root,))
    ctx.progress = seen.append
    monkeypatch.setattr("decode_doctor.checks.images.check.PROGRESS_EVERY_S", 0.0)
    Images().run(ctx)
    assert len(seen) == 400 and "/s" in seen[-1]
    assert any(text.startswith("400 of 400 images") and "ETA 0 s" in text for text in seen[-5:])
