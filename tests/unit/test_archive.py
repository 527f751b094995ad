"""Untrusted archives: layout, path traversal, links, decompression bombs, atomic writes."""
from __future__ import annotations

import json
import tarfile

import pytest

from pipelines.storage import archive, atomic
from tests.helpers import good_frames, good_meta, members, write_tgz, write_zip


def test_reads_tar_gz_zip_and_directory_alike(tmp_path):
    files = members(good_meta("r1"), good_frames())
    tgz = write_tgz(tmp_path / "r1.tar.gz", files)
    (tmp_path / "zz").mkdir()
    z = write_zip(tmp_path / "zz" / "r1.zip", files)
    d = tmp_path / "dd" / "r1"
    (d / "counters").mkdir(parents=True)
    for name, data in files.items():
        (d / name).write_bytes(data)
    runs = [archive.read_archive(p) for p in (tgz, z, d)]
    for run in runs:
        assert run.run_id == "r1"
        assert run.meta["system"] == "sys"
        assert set(run.csv_bytes) == {"web01", "lg01"}
    assert runs[0].csv_bytes == runs[1].csv_bytes == runs[2].csv_bytes


@pytest.mark.parametrize("name", ["../evil.csv", "/etc/passwd", "counters/../../x.csv", "counters/sub/../../run.json"])
def test_path_traversal_members_are_refused(tmp_path, name):
    files = members(good_meta("r1"), good_frames())
    files[name] = b"x"
    with pytest.raises(archive.ArchiveError, match="unsafe member path"):
        archive.read_archive(write_tgz(tmp_path / "r1.tar.gz", files))


def test_zip_traversal_is_refused(tmp_path):
    files = members(good_meta("r1"), good_frames())
    files["../../outside.csv"] = b"x"
    with pytest.raises(archive.ArchiveError, match="unsafe member path"):
        archive.read_archive(write_zip(tmp_path / "r1.zip", files))


def test_links_and_devices_are_refused(tmp_path):
    link = tarfile.TarInfo("counters/db01.csv")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/shadow"
    with pytest.raises(archive.ArchiveError, match="link or device"):
        archive.read_archive(write_tgz(tmp_path / "r1.tar.gz", members(good_meta("r1"), good_frames()), extra=[link]))


def test_unexpected_members_are_refused(tmp_path):
    files = members(good_meta("r1"), good_frames())
    files["payload.pkl"] = b"\x80\x04"
    with pytest.raises(archive.ArchiveError, match="unexpected member"):
        archive.read_archive(write_tgz(tmp_path / "r1.tar.gz", files))


def test_decompression_bomb_is_stopped_at_the_member_cap(tmp_path):
    files = members(good_meta("r1"), good_frames())
    files["counters/bomb.csv"] = b"0" * (8 * 2**20)           # 8 MiB of zeros compress to ~8 KiB
    path = write_tgz(tmp_path / "r1.tar.gz", files)
    assert path.stat().st_size < 100_000
    with pytest.raises(archive.ArchiveError, match="decompression bomb"):
        archive.read_archive(path, {"max_member_bytes": 2**20})
    with pytest.raises(archive.ArchiveError, match="compression ratio"):
        archive.read_archive(path)                              # the default ratio cap catches it too


def test_missing_run_json_and_bad_json_are_specific(tmp_path):
    files = members(good_meta("r1"), good_frames())
    del files["run.json"]
    with pytest.raises(archive.ArchiveError, match="run.json is missing"):
        archive.read_archive(write_tgz(tmp_path / "r1.tar.gz", files))
    files["run.json"] = b"{not json"
    with pytest.raises(archive.ArchiveError, match="run.json is not valid JSON"):
        archive.read_archive(write_tgz(tmp_path / "r2.tar.gz", files))


def test_corrupt_gzip_is_an_archive_error(tmp_path):
    path = tmp_path / "r1.tar.gz"
    data = write_tgz(tmp_path / "ok.tar.gz", members(good_meta("r1"), good_frames())).read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(archive.ArchiveError):
        archive.read_archive(path)


def test_invalid_run_id_in_file_name(tmp_path):
    with pytest.raises(archive.ArchiveError, match="not a valid run_id"):
        archive.read_archive(write_tgz(tmp_path / "bad name!.tar.gz", members(good_meta(), good_frames())))


def test_atomic_write_leaves_old_file_when_interrupted(tmp_path):
    target = tmp_path / "out.json"
    atomic.write_json_atomic(target, {"v": 1})
    with pytest.raises(RuntimeError):
        with atomic.atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_deterministic_tar_gz(tmp_path):
    files = members(good_meta("r1"), good_frames())
    atomic.write_tar_gz_atomic(tmp_path / "a.tar.gz", files)
    atomic.write_tar_gz_atomic(tmp_path / "b.tar.gz", files)
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()
    assert archive.read_archive(tmp_path / "a.tar.gz").csv_bytes["web01"] == files["counters/web01.csv"]


def test_a_model_written_twice_is_the_same_bytes_and_still_loads():
    """skops names arrays and objects by id() and stamps zip members with the time: two saves of
    one model differed, so a resumed training changed its output.  reproducible_skops renumbers
    them in schema order and fixes the dates; the model loads and predicts the same."""
    import numpy as np
    import skops.io as sio
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X = np.random.RandomState(0).rand(20, 3)
    y = np.arange(20) % 2
    models = [make_pipeline(StandardScaler(), RandomForestClassifier(5, random_state=0)).fit(X, y) for _ in range(2)]
    raw = [sio.dumps(m) for m in models]
    assert raw[0] != raw[1]                                   # what skops writes differs
    a, b = (atomic.reproducible_skops(r) for r in raw)
    assert a == b
    loaded = sio.loads(a, trusted=sio.get_untrusted_types(data=a))
    assert (loaded.predict_proba(X) == models[0].predict_proba(X)).all()


def test_prune_outputs_removes_only_the_stale_files_of_its_suffix(tmp_path):
    from pipelines.storage import atomic
    for name in ("r1.json", "r2.json", "r3.json", "sys.parquet", ".r4.json.123.abc.tmp"):
        (tmp_path / name).write_text("x")
    (tmp_path / "calibration").mkdir()
    (tmp_path / "calibration" / "r2.json").write_text("x")
    outside = tmp_path.parent / f"{tmp_path.name}-secret.json"
    outside.write_text("keep")
    (tmp_path / "r5.json").symlink_to(outside)
    removed = atomic.prune_outputs(tmp_path, ["r1", "r3"])
    assert sorted(p.name for p in removed) == ["r2.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".r4.json.123.abc.tmp", "calibration", "r1.json",
                                                           "r3.json", "r5.json", "sys.parquet"]
    assert (tmp_path / "calibration" / "r2.json").exists() and outside.read_text() == "keep"
    assert [p.name for p in atomic.prune_outputs(tmp_path, [], suffix=".parquet")] == ["sys.parquet"]
    assert atomic.prune_outputs(tmp_path / "missing", []) == []


def test_an_archive_is_bounded_in_samples_times_counters_before_pandas_allocates():
    from pipelines.storage import archive
    assert archive.csv_cells(b"timestamp,a,b\n1,2,3\n4,5,6\n") == 2 * 3
    assert archive.csv_cells(b"timestamp,a,b\n1,2,3\n4,5,6") == 2 * 3       # no final newline
    assert archive.csv_cells(b"timestamp,a,b\n") == 0 and archive.csv_cells(b"") == 0
    csvs = {"web01": b"timestamp,a,b\n" + b"1,2,3\n" * 10, "db01": b"timestamp,c\n" + b"1,2\n" * 20}
    archive.check_cells(csvs, {"max_cells": 70})                              # 30 + 40 = 70: at the bound
    with pytest.raises(archive.ArchiveError, match=r"70 samples x counters .*more than 69.*db01 40, web01 30"):
        archive.check_cells(csvs, {"max_cells": 69})


def test_the_duplicate_key_check_is_linear_and_keys_are_bounded():
    import json
    import signal

    big = json.dumps({f"k{i}": i for i in range(300_000)}).encode()
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("quadratic")))
    signal.alarm(20)                 # linear: well under a second; the old keys.count() check: about 45 minutes
    try:
        assert len(archive.strict_json(big, "run.json", max_keys=10**6)) == 300_000
    finally:
        signal.alarm(0)
    with pytest.raises(archive.ArchiveError, match="300,000 keys"):
        archive.strict_json(big, "run.json")                                    # the default: 10,000 a object
    with pytest.raises(archive.ArchiveError, match=r"duplicate key\(s\) \['a'\]"):
        archive.strict_json(b'{"a": 1, "b": {"a": 2}, "a": 3}', "run.json")


def test_a_zip_declaring_too_many_entries_is_refused_before_its_directory_is_read(tmp_path):
    files = {**members(good_meta("r1"), good_frames()), **{f"counters/e{i}": b"" for i in range(600)}}
    path = write_zip(tmp_path / "r1.zip", files)
    assert archive.zip_entry_count(path) == len(files)
    with pytest.raises(archive.ArchiveError, match=f"{len(files)} entries.*before its central directory"):
        archive.read_archive(path)


def test_a_long_line_is_found_without_copying():
    assert archive.longest_line(b"a,b\n1,2\n", 3) == 0                 # no line over 3 bytes
    assert archive.longest_line(b"ab\n" + b"x" * 10 + b"\nz", 5) == 10
    assert archive.longest_line(b"x" * 10, 5) == 10                      # the last line has no newline


def test_a_parquet_frame_reads_back_as_pandas_reads_it(tmp_path):
    import numpy as np
    import pandas as pd

    frame = pd.DataFrame({"web01.cpu_pct": [1.5, np.nan, 3.25], "host": ["a", "b", "a"], "n": [1, 2, 3]},
                         index=pd.Index([10, 20, 30], name="interval"))
    path = tmp_path / "frame.parquet"
    atomic.write_parquet_atomic(path, frame)
    back = atomic.read_parquet(path)
    pd.testing.assert_frame_equal(back, frame)
    pd.testing.assert_frame_equal(back, pd.read_parquet(path))
    assert list(back.dtypes) == list(pd.read_parquet(path).dtypes)


def test_an_archive_cut_short_or_not_an_archive_at_all_is_unreadable_and_a_bad_layout_is_not(tmp_path):
    """``unreadable_reason``: the container cannot be read to its end (a copy cut short, an empty
    file, a zip without its directory, another format under the name) -- no valid run, so a later
    readable copy may be taken -- as opposed to a readable archive that breaks the contract."""
    files = members(good_meta("r1"), good_frames())
    whole = write_tgz(tmp_path / "r1.tar.gz", files).read_bytes()
    zipped = write_zip(tmp_path / "z" / "r1.zip", files) if (tmp_path / "z").mkdir() is None else None
    assert archive.unreadable_reason(tmp_path / "r1.tar.gz") is None
    assert archive.unreadable_reason(zipped) is None
    cases = {"half.tar.gz": whole[: len(whole) // 2], "empty.tar.gz": b"", "tail.tar.gz": whole[:-9],
             "plain.tgz": b"just text, no gzip", "half.zip": zipped.read_bytes()[: zipped.stat().st_size // 2]}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        reason = archive.unreadable_reason(tmp_path / name)
        assert reason is not None, name
        with pytest.raises(archive.CorruptArchive):
            archive.read_archive(tmp_path / name)
    write_tgz(tmp_path / "r2.tar.gz", {**files, "notes.txt": b"x"})          # readable, breaks the layout
    with pytest.raises(archive.ArchiveError, match="unexpected member") as refused:
        archive.read_archive(tmp_path / "r2.tar.gz")
    assert not isinstance(refused.value, archive.CorruptArchive)
    assert archive.unreadable_reason(tmp_path / "r2.tar.gz") is None
    assert archive.unreadable_reason(tmp_path) is None                        # a directory is never cut short
