"""Archives as they really arrive at a lab's share: still being copied when the night starts, copied
half and completed later, replaced on purpose.  No run is lost: an archive still being written waits
for a later night, a copy that was never readable is taken again once a readable one is there (the
first kept aside), and a readable archive that changes is refused with the command that takes it."""
from __future__ import annotations

import hashlib
import json
import shutil
import threading
import time

import pytest
import yaml

from pipelines import config
from pipelines.cli import main as cli
from pipelines.stages import pull
from pipelines.storage import archive, manifest
from tests.helpers import good_frames, good_meta, members, run_stages, write_tgz

pytestmark = pytest.mark.slow     # stages end to end

NO_MODEL = ("features", "train_causes")      # the cause model is not under test: a night without one


def point_at(tree, src, **pull_params) -> None:
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["pull"].update(source=str(src), **pull_params)
    params["train_causes"].update(learners=["decision_tree"], learning_curve_repeats=2, learning_curve_learners=1)
    (tree / "params.yaml").write_text(yaml.safe_dump(params))


def summary() -> dict:
    return json.loads(config.PULL_SUMMARY.read_text())


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_half_copied_archive_is_taken_again_once_complete_and_analysed(tree, tiny_lab, tmp_path):
    """The README's flow: a night finds half of a target's archive at the source (its copy stalled:
    nothing moves while the night looks), takes and quarantines it; the copy completes; the next night
    takes the whole archive under the same run_id, keeps the half aside, and analyses the run."""
    lab, truth = tiny_lab
    src = tmp_path / "src"
    shutil.copytree(lab, src)
    target = sorted(r for r in truth if "-t" in r)[0]
    whole = (src / f"{target}.tar.gz").read_bytes()
    half = whole[: len(whole) // 2]
    (src / f"{target}.tar.gz").write_bytes(half)
    point_at(tree, src)

    run_stages("pull", through="report", skip=NO_MODEL)
    valid = json.loads(config.VALID_INDEX.read_text())
    assert "corrupt tar archive" in valid["quarantined"][target]
    assert not config.run_report_path(target).exists()
    assert (config.RAW / f"{target}.tar.gz").read_bytes() == half

    (src / f"{target}.tar.gz").write_bytes(whole)         # the copy completes
    run_stages("pull", through="report", skip=NO_MODEL)
    (retaken,) = summary()["retaken"]
    assert retaken["run_id"] == target and retaken["how"] == "unreadable"
    entry = manifest.read_manifest()[target]
    assert entry.sha256 == sha(whole) and entry.size == len(whole)
    (aside,) = entry.set_aside
    assert aside["sha256"] == sha(half) and aside["size"] == len(half) and aside["how"] == "unreadable"
    assert aside["reason"].startswith("the first copy was unreadable: corrupt tar archive")
    assert aside["file"] == f"set_aside/{target}/{sha(half)[:12]}/{target}.tar.gz"
    assert (config.RAW / aside["file"]).read_bytes() == half            # kept aside, byte for byte
    assert (config.RAW / f"{target}.tar.gz").read_bytes() == whole
    assert [json.loads(line)["sha256"] for line in config.MANIFEST.read_text().splitlines()
            if json.loads(line)["run_id"] == target] == [sha(half), sha(whole)]    # both copies on record

    valid = json.loads(config.VALID_INDEX.read_text())
    assert target in valid["valid"] and target not in valid["quarantined"]
    assert not config.quarantine_path(target).exists()
    doc = json.loads(config.run_report_path(target).read_text())
    assert doc["verdict"] in ("pass", "fail")
    page = config.run_report_path(target, "html").read_text()
    assert "Taken again: the first copy was unreadable." in page
    assert f"data/raw/{aside['file']}" in page and sha(half)[:12] in page
    assert f'<a href="runs/{target}.html"><code>{target}</code></a>' in config.NIGHT_INDEX.read_text()

    run_stages({"pull"})                                  # a third night: nothing to take again
    assert summary()["retaken"] == [] and summary()["refused"] == [] and target in summary()["known"]


def test_an_archive_still_growing_waits_and_is_taken_complete_on_the_next_night(tree, tmp_path):
    """A load generator writes its tarball in place while the night lists the source: the archive's
    size moves within the settle interval, so it is left at the source, said in the summary and on
    the night index, and the next night takes it whole."""
    src = tmp_path / "src"
    src.mkdir()
    write_tgz(src / "shop-old-1.tar.gz", members(good_meta("shop-old-1"), good_frames()))
    whole = write_tgz(tmp_path / "whole.tar.gz", members(good_meta("shop-new-1"), good_frames())).read_bytes()
    point_at(tree, src, settle_s=0.6)
    growing = src / "shop-new-1.tar.gz"
    growing.write_bytes(b"")
    stop = threading.Event()

    def write_slowly() -> None:
        chunk = max(1, len(whole) // 40)
        with open(growing, "ab") as fh:
            for at in range(0, len(whole), chunk):
                if stop.is_set():
                    return
                fh.write(whole[at:at + chunk])
                fh.flush()
                time.sleep(0.05)

    writer = threading.Thread(target=write_slowly)
    writer.start()
    try:
        pull.main()
    finally:
        writer.join()
        stop.set()
    first = summary()
    assert first["new"] == ["shop-old-1"]
    assert first["waiting"] == [{"run_id": "shop-new-1", "reason": "still being written: taken on a later night"}]
    assert "shop-new-1" not in manifest.read_manifest() and not (config.RAW / "shop-new-1.tar.gz").exists()

    assert growing.read_bytes() == whole                  # the writer is done
    pull.main()
    second = summary()
    assert second["new"] == ["shop-new-1"] and second["waiting"] == []
    assert manifest.read_manifest()["shop-new-1"].sha256 == sha(whole)


def test_a_done_marker_lets_an_archive_in_at_once_and_can_be_required(tree, tmp_path):
    """``<run_id>.done`` beside an archive says it is complete: taken without the settle wait. With
    ``done_markers: required`` an archive without its marker waits, whatever its state."""
    src = tmp_path / "src"
    src.mkdir()
    for run_id in ("shop-a-1", "shop-b-1"):
        write_tgz(src / f"{run_id}.tar.gz", members(good_meta(run_id), good_frames()))
    (src / "shop-a-1.done").write_text("")
    point_at(tree, src, settle_s=300, done_markers="required")
    started = time.monotonic()
    pull.main()
    assert time.monotonic() - started < 60                 # no settle wait: every archive is marked or waits
    first = summary()
    assert first["new"] == ["shop-a-1"]
    assert first["waiting"] == [{"run_id": "shop-b-1", "reason": "no shop-b-1.done beside it yet: taken on a later night"}]
    (src / "shop-b-1.done").write_text("")
    pull.main()
    assert summary()["new"] == ["shop-b-1"]


def test_a_readable_archive_that_changes_is_refused_until_retaken_on_purpose(tree, tmp_path, capsys):
    """A valid archive replaced at the source with other valid content is refused, and the refusal
    names the command; ``regresslab retake`` takes the new copy, keeps the first aside and records
    who and why.  A corrupt copy followed by another corrupt one waits for a readable one."""
    src = tmp_path / "src"
    src.mkdir()
    first = write_tgz(src / "shop-a-1.tar.gz", members(good_meta("shop-a-1"), good_frames())).read_bytes()
    point_at(tree, src)
    pull.main()
    second = write_tgz(src / "shop-a-1.tar.gz", members(good_meta("shop-a-1"), good_frames(seed=7))).read_bytes()
    assert sha(second) != sha(first)
    pull.main()
    (refused,) = summary()["refused"]
    assert refused["reason"].endswith("raw data is immutable, the new copy is not taken; to take the new copy on "
                                      "purpose and keep the first aside: regresslab retake shop-a-1 --by NAME")
    assert (config.RAW / "shop-a-1.tar.gz").read_bytes() == first

    assert cli.main(["retake", "shop-a-1", "--by", "ana", "--note", "the lab re-ran the export"]) == 0
    assert "the new copy taken" in capsys.readouterr().out
    entry = manifest.read_manifest()["shop-a-1"]
    assert entry.sha256 == sha(second)
    (aside,) = entry.set_aside
    assert (aside["how"], aside["reason"]) == ("accepted", "replaced on purpose by ana: the lab re-ran the export")
    assert (config.RAW / aside["file"]).read_bytes() == first and (config.RAW / "shop-a-1.tar.gz").read_bytes() == second
    assert cli.main(["retake", "shop-a-1", "--by", "ana"]) == 1          # the same content: nothing to take
    assert "nothing to take" in capsys.readouterr().err
    assert cli.main(["retake", "shop-zz-9", "--by", "ana"]) == 2         # never pulled: the night takes it

    # a truncated copy of another run, then another truncated copy: nothing taken, nothing overwritten
    whole = write_tgz(tmp_path / "b.tar.gz", members(good_meta("shop-b-1"), good_frames())).read_bytes()
    (src / "shop-b-1.tar.gz").write_bytes(whole[:300])
    pull.main()
    (src / "shop-b-1.tar.gz").write_bytes(whole[:900])
    pull.main()
    (refused,) = summary()["refused"]
    assert refused["run_id"] == "shop-b-1" and refused["reason"].endswith("waiting for a readable copy")
    assert (config.RAW / "shop-b-1.tar.gz").read_bytes() == whole[:300]
    assert not (config.RAW / "set_aside" / "shop-b-1").exists()


def test_a_take_interrupted_after_the_first_copy_was_moved_aside_resumes(tree, tmp_path):
    """A pull killed after it set the unreadable copy aside, before the new copy's manifest line: the
    next pull finds the first copy where it was put and finishes the take."""
    src = tmp_path / "src"
    src.mkdir()
    whole = write_tgz(tmp_path / "c.tar.gz", members(good_meta("shop-c-1"), good_frames())).read_bytes()
    (src / "shop-c-1.tar.gz").write_bytes(whole[:400])
    point_at(tree, src)
    pull.main()
    entry = manifest.read_manifest()["shop-c-1"]
    from pipelines.storage.sources import set_aside_path

    kept = set_aside_path(config.RAW, entry)
    kept.parent.mkdir(parents=True)
    (config.RAW / "shop-c-1.tar.gz").rename(kept)          # where the killed pull stopped
    (src / "shop-c-1.tar.gz").write_bytes(whole)
    pull.main()
    assert summary()["new"] == ["shop-c-1"] and summary()["retaken"][0]["how"] == "unreadable"
    assert kept.read_bytes() == whole[:400] and (config.RAW / "shop-c-1.tar.gz").read_bytes() == whole
    assert archive.unreadable_reason(kept) is not None and archive.unreadable_reason(config.RAW / "shop-c-1.tar.gz") is None
