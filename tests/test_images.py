"""Images: every damage class found, nothing good touched, quarantine and undo byte-identical."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from decode_doctor.checks.images.codes import QuarantineParams, RenameParams
from decode_doctor.fixes.journal import UndoError, undo_run

from .conftest import kill_at_step, run_dd, tree_digest
from .support.harness import cli, fix_killed_at, run_check
from .support.imagegen import encode, picture, png_chunks, png_of_zeros, samples, write_dataset

QUARANTINE_CODES = {"IMG001", "IMG002", "IMG004", "IMG011"}
WARNING_CODES = {"IMG003", "IMG005", "IMG013", "IMG014"}


def check(*args: str, **kw):
    return cli("check", "--select", "images", *args, **kw)


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "data" / "train"
    items = write_dataset(root, outside=tmp_path / "outside")
    return root, items


def test_every_file_gets_one_finding_with_the_right_verdict(dataset):
    root, items = dataset
    run = run_check("images", images=(root,))
    per_file: dict[str, list] = {}
    for finding in run.findings:
        if finding.path:
            per_file.setdefault(finding.path, []).append(finding)
    assert all(len(found) == 1 for found in per_file.values())  # one finding per file, every reason inside it
    summary = {f.code: f for f in run.findings if f.path is None}
    for item in items:
        found = {f.code for f in per_file.get(str(root / item.rel), [])}
        if item.expect in ("good", "mode", "unchecked"):
            assert found == set(), (item.rel, found)
        else:
            assert found == {item.expect}, (item.rel, found)
        if item.expect == "unchecked":
            assert str(root / item.rel) in summary["IMG008"].evidence["files"]
    assert set(summary["IMG006"].evidence["modes"]) == {"RGBA (alpha)", "16-bit", "palette with transparency", "CMYK"}
    assert summary["IMG009"].evidence["links"] and len(summary["IMG009"].evidence["links"]) == 2
    assert summary["IMG010"].evidence["files"] == [str(root / "good/._photo.jpg")]
    for finding in run.findings:
        if finding.code in QUARANTINE_CODES:
            assert finding.severity.value == "error" and finding.fix is not None
        elif finding.code in WARNING_CODES:
            assert finding.severity.value == "warning"
            assert finding.fix is None or isinstance(finding.fix.params, RenameParams)
    assert run.facts.datasets[0].images > 0


def test_the_loader_decides_and_names_itself(dataset):
    from PIL import Image

    root, _ = dataset
    run = run_check("images", images=(root,))
    by_name = {Path(f.path).name: f for f in run.findings if f.path}
    damaged = by_name["corrupt-entropy.jpg"]
    assert damaged.code == "IMG013" and "Corrupt JPEG data" in damaged.evidence["reasons"][0]["message"]
    with Image.open(damaged.path) as image:
        image.load()  # Pillow reads past it: a warning, not a quarantine
    no_eoi = by_name["no-eoi.jpg"]
    assert no_eoi.code == "IMG001" and no_eoi.evidence["loader"].startswith("Pillow ")
    assert "image file is truncated" in no_eoi.message and "no EOI marker" in no_eoi.message
    with pytest.raises(OSError, match="image file is truncated"), Image.open(no_eoi.path) as image:
        image.load()
    assert by_name["apng-no-frames.png"].code == "IMG014" and "Invalid APNG" in by_name["apng-no-frames.png"].message
    for name in ("bomb-extents.gif", "bomb.webp", "bomb.tiff", "bomb-big.tiff", "bomb.bmp", "bomb.avif", "bomb.tga"):
        assert "found from the header, nothing decoded" in by_name[name].message, name


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
    assert not quarantine.exists()  # the run made the quarantine; undo leaves no empty tree or manifest behind


def _broken_dataset(root: Path, broken: dict[str, bytes]) -> None:
    root.mkdir(parents=True)
    for name, data in broken.items():
        (root / name).write_bytes(data)


def test_sigkill_mid_quarantine_loses_nothing(tmp_path):
    """In process: the fix runs in a forked child killed after each journal step in turn."""
    broken = {f"b{i}.jpg": encode(picture(seed=i), "JPEG")[:200] for i in range(3)}
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
        # nothing the run created is left: no quarantine (nor a manifest naming files that never moved),
        # no temp file in the dataset or the state dir (the journal stays: it is the run's record)
        assert not quarantine.exists(), f"step {step}: {sorted(p.name for p in quarantine.rglob('*'))}"
        assert sorted(p.name for p in root.iterdir()) == sorted(broken)
        assert not [p for p in state.rglob("*") if p.name.endswith(".dd-tmp") or (p.is_file() and "backups" in p.parts)]
    assert kills == 2 + 4 * len(broken)


def test_sigkill_from_the_cli_mid_quarantine(tmp_path):
    """The CLI sample: the real process killed mid-move, then `undo`."""
    broken = {f"b{i}.jpg": encode(picture(seed=i), "JPEG")[:200] for i in range(2)}
    root = tmp_path / "ds"
    _broken_dataset(root, broken)
    state = tmp_path / "state"
    proc = run_dd("check", "--select", "images", "--images", str(root), "--fix", "--yes", "--state-dir", str(state), env=kill_at_step(4))
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
    assert result["state"] != "crashed"  # refused with the reason, in the user's language: never a crash
    (unjudged,) = report["not_judged"]
    assert unjudged["what"] == f"the dataset {root}" and "is inside the dataset" in unjudged["why"]
    assert report["summary"]["verdict"] == "incomplete" and (root / "x.jpg").exists()


def test_per_file_time_limit_does_not_stall_the_scan(tmp_path):
    root = tmp_path / "ds"
    root.mkdir()
    for i in range(3):
        (root / f"big{i}.png").write_bytes(encode(picture(600, 450, seed=i), "PNG"))
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


def test_damaged_files_are_quarantined_only_when_asked(tmp_path):
    root = tmp_path / "ds"
    write = write_dataset(root)
    damaged = {str(root / i.rel) for i in write if i.expect in ("IMG013", "IMG003")}
    broken = {str(root / i.rel) for i in write if i.expect in QUARANTINE_CODES}
    default = run_check("images", images=(root,))
    assert {f.path for f in default.findings if f.fix and isinstance(f.fix.params, QuarantineParams)} == broken
    asked = run_check("images", images=(root,), options={"quarantine": "damaged"})
    assert {f.path for f in asked.findings if f.fix and isinstance(f.fix.params, QuarantineParams)} == broken | damaged


def test_two_faults_in_one_file_are_one_finding_and_one_move(tmp_path):
    png = encode(picture(), "PNG")
    chunks = png_chunks(png)
    broken = bytearray(png)
    # a bad CRC on the IDAT and on IEND: Pillow reads it, two reasons
    for offset, ctype, body in chunks:
        if ctype in (b"IDAT", b"IEND"):
            broken[offset + 8 + len(body)] ^= 0xFF
    root = tmp_path / "ds"
    root.mkdir()
    (root / "two.png").write_bytes(bytes(broken))
    report = check("--images", str(root), "--quarantine", "damaged", "--format", "json")
    (finding,) = report.json()["findings"]
    assert finding["code"] == "IMG013" and len(finding["evidence"]["reasons"]) == 2
    fixed = check("--images", str(root), "--quarantine", "damaged", "--fix", "--yes", "--state-dir", str(tmp_path / "state"))
    assert "applied" in fixed.stdout and "failed" not in fixed.stdout, fixed.stdout
    assert not (root / "two.png").exists() and (root.parent / "ds.quarantine" / "two.png").read_bytes() == bytes(broken)


def test_bombs_are_judged_from_the_header_within_the_memory_budget(tmp_path):
    """Every format's bomb, and a real 870 KB-class 30000×30000 PNG (once inflated before its IHDR was
    read: 1.78 GB), scanned with the workers' peak memory measured; and a 90-megapixel PNG inside
    Pillow's warning zone, which is decoded (it loads) and only warned about."""
    root = tmp_path / "bombs"
    root.mkdir()
    for item in samples():
        if item.expect == "IMG004":
            (root / Path(item.rel).name).write_bytes(item.data)
    (root / "huge.png").write_bytes(png_of_zeros(30_000, 30_000, rows=300))
    (root / "zone.png").write_bytes(png_of_zeros(10_000, 9_000))
    run = run_check("images", images=(root,), options={"jobs": 1})
    by_name = {Path(f.path).name: f for f in run.findings if f.path}
    assert by_name.pop("zone.png").code == "IMG014"
    assert {f.code for f in by_name.values()} == {"IMG004"} and "huge.png" in by_name
    peak = run.facts.datasets[0].peak_worker_rss_mib
    assert 0 < peak < 512, peak


@pytest.mark.parametrize("value", ["0", "-5", "many"])
def test_max_pixels_must_be_a_positive_number(tmp_path, value):
    (tmp_path / "a.png").write_bytes(encode(picture(), "PNG"))
    proc = check("--images", str(tmp_path), "--max-pixels", value)
    assert proc.exit_code == 2 and "Invalid value for '--max-pixels'" in proc.stderr, proc.stderr


def test_the_warning_zone_follows_max_pixels(tmp_path):
    root = tmp_path / "ds"
    root.mkdir()
    (root / "zone.png").write_bytes(encode(picture(40, 30), "PNG"))  # 1,200 pixels: over 1,000, under 2,000
    (root / "over.png").write_bytes(encode(picture(50, 50), "PNG"))  # 2,500: over twice the limit
    run = run_check("images", images=(root,), options={"max_pixels": 1000})
    by_name = {Path(f.path).name: f for f in run.findings if f.path}
    assert by_name["zone.png"].code == "IMG014" and by_name["zone.png"].fix is None
    assert by_name["over.png"].code == "IMG004" and by_name["over.png"].fix is not None


def test_an_extra_loader_is_checked_when_asked(tmp_path):
    import importlib.util

    (tmp_path / "a.png").write_bytes(encode(picture(), "PNG"))
    for loader, package in (("opencv", "cv2"), ("torchvision", "torchvision")):
        proc = check("--images", str(tmp_path), "--loader", loader, "--format", "json")
        if importlib.util.find_spec(package) is None:
            assert proc.exit_code == 2 and f"the {loader} loader is not installed here" in proc.stderr
        else:
            assert proc.exit_code == 0 and proc.json()["findings"] == []
    if importlib.util.find_spec("cv2") is not None:  # the test extra installs OpenCV: its verdict is its own
        (tmp_path / "b.tga").write_bytes(encode(picture(), "TGA"))
        report = check("--images", str(tmp_path), "--loader", "opencv", "--format", "json").json()
        (finding,) = report["findings"]
        assert finding["code"] == "IMG001" and finding["evidence"]["loader"].startswith("OpenCV ")
        assert "cv2.imread returned None" in finding["message"]
        assert check("--images", str(tmp_path), "--format", "json").json()["findings"] == []  # Pillow reads TGA
    proc = check("--images", str(tmp_path), "--loader", "imageio")
    assert proc.exit_code == 2 and "unknown loader 'imageio'" in proc.stderr


def test_a_92_megapixel_png_named_jpg_is_one_finding_and_the_check_judges_the_rest(tmp_path):
    """The case that once crashed the whole check: the most severe reason (the loader warns: too many
    pixels) ranked first, and the rename fix of the lying extension went with a code that has none."""
    from PIL import Image

    root = tmp_path / "ds"
    root.mkdir()
    Image.new("L", (9600, 9600), 128).save(root / "big.jpg", format="PNG")  # 92.2 MP: over 89.5, under 179
    (root / "good.jpg").write_bytes(encode(picture(), "JPEG"))
    first = cli("check", "--select", "images", "--images", str(root), "--format", "json", "--fail-on", "warning")
    report = first.json()
    (result,) = report["results"]
    assert result["state"] == "findings"
    (finding,) = report["findings"]
    assert (finding["code"], finding["path"]) == ("IMG014", str(root / "big.jpg"))
    assert "over the loader's warning limit" in finding["message"] and "PNG data named .jpg" in finding["message"]
    assert finding["fix"] is None  # the loader's warning has no fix; the rename is said in the message
    assert report["facts"]["images"]["datasets"][0]["images"] == 2  # the good file was judged too
    assert finding["severity"] == "warning" and first.exit_code == 1  # exit 1 at --fail-on warning (0 at the default, error)


def test_every_image_kind_under_every_wrong_extension_is_judged_without_a_crash(tmp_path):
    """Every sample the corpus tests know (good, broken, damaged, bombs, not images), saved under every
    image extension but its own: one verdict per file, each fix of its code's own kind, no crashed check."""
    from decode_doctor.checks.images.walk import IMAGE_SUFFIXES
    from decode_doctor.engine import FixableCode
    from decode_doctor.engine.registry import load

    root = tmp_path / "ds"
    root.mkdir()
    written = []
    for number, sample in enumerate(samples()):
        own = Path(sample.rel).suffix.lower()
        for suffix in sorted(IMAGE_SUFFIXES - {own}):
            path = root / f"{number:03d}-{Path(sample.rel).stem}{suffix}"
            path.write_bytes(sample.data)
            written.append(str(path))
    run = run_check("images", images=(root,))  # a crash would raise here
    per_file = [f for f in run.findings if f.path in written]
    assert len({f.path for f in per_file}) == len(per_file)  # at most one finding per file
    codes = load().codes()
    for finding in per_file:
        spec = codes[finding.code][0]
        if finding.fix is not None:
            assert isinstance(spec, FixableCode) and isinstance(finding.fix.params, spec.params), finding
    assert run.facts is not None and run.facts.datasets[0].images == len(written)


def test_an_image_the_user_cannot_read_is_said_and_the_rest_judged():
    """IMG012, as a process without the right to read one file (root reads everything: conftest.unprivileged_child)."""
    import tempfile

    from .conftest import unprivileged_child
    from .support.emitted import unprovable

    if isinstance(why := unprivileged_child(), str):
        pytest.skip(unprovable("IMG012", why))
    with tempfile.TemporaryDirectory(prefix="dd-unreadable-") as top:  # /tmp/pytest-of-root is root's only (user nobody)
        root = Path(top) / "ds"
        root.mkdir()
        (root / "good.jpg").write_bytes(encode(picture(), "JPEG"))
        (root / "locked.png").write_bytes(encode(picture(), "PNG"))
        os.chmod(top, 0o755)
        root.chmod(0o755)
        (root / "good.jpg").chmod(0o644)
        (root / "locked.png").chmod(0o000)
        proc = run_dd("check", "--select", "images", "--images", str(root), "--format", "json", unprivileged=True)
    report = json.loads(proc.stdout)
    (finding,) = report["findings"]
    assert finding["code"] == "IMG012" and finding["path"].endswith("locked.png") and "Permission denied" in finding["message"]
    assert report["results"][0]["state"] == "findings" and report["summary"]["verdict"] == "incomplete"
    (unjudged,) = report["not_judged"]
    assert unjudged["what"] == f"1 image under {root}" and unjudged["cause"] == "IMG012" and "locked.png" in unjudged["why"]
    assert proc.returncode == 3  # a warning, and a file that was not judged: the verdict is incomplete


def test_the_re_check_after_a_fix_judges_only_the_files_the_fix_touched(tmp_path):
    """5 broken images among 200 good ones and one lying extension: the re-check decodes the renamed
    file alone (the quarantined ones are gone from the dataset), never the 200, and the journal says so;
    the findings about the rest of the dataset stand."""
    from .support.harness import run_fix

    root = tmp_path / "ds"
    root.mkdir()
    good = encode(picture(8, 8), "JPEG")
    for number in range(200):
        (root / f"{number:03d}.jpg").write_bytes(good)
    for number in range(5):
        (root / f"broken-{number}.jpg").write_bytes(good[: len(good) // 2])
    (root / "really-a-png.jpg").write_bytes(encode(picture(8, 8), "PNG"))
    (root / "cmyk.jpg").write_bytes(encode(picture(8, 8).convert("CMYK"), "JPEG"))  # IMG006, a dataset-wide note
    state = tmp_path / "state"
    after, said = run_fix("images", images=(root,), state_dir=state)
    assert "IMG001: resolved (5 findings)" in said.text and "IMG005: resolved" in said.text, said.text
    (run_dir,) = (state / "runs").iterdir()
    records = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    (recheck,) = [r for r in records if r["type"] == "recheck"]
    judged_paths = {Path(p) for p in recheck["paths"]}
    assert {p for p in judged_paths if root in p.parents} == {root / f"broken-{n}.jpg" for n in range(5)} | {
        root / "really-a-png.jpg",
        root / "really-a-png.png",
    }
    assert recheck["judged"]["images"] == [f"1 images checked under {root} in " + recheck["judged"]["images"][0].split(" in ", 1)[1]]
    findings = {f.code for r in after.report.results for f in r.findings}
    assert findings == {"IMG006"}  # the note about the dataset stands from the first run
    (result,) = after.report.results
    assert result.facts is not None and result.facts.datasets[0].images == 207  # the first run's facts: every file
