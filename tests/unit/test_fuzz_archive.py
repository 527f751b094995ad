"""Property-based fuzzing of what reads untrusted bytes.  On any bytes, the archive
reader, the counter-CSV parser and the strict JSON reader either succeed or raise the one
``ArchiveError`` (which ``validate`` turns into a quarantine); nothing else escapes to stop a
night.  Derandomised, so CI sees the same cases every time; bytes are drawn both from nothing
and as mutations (flips, cuts, insertions) of a good archive, which reach the inner readers."""
from __future__ import annotations

import gzip
import io
import tarfile
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.storage import archive
from tests.helpers import good_frames, good_meta, members

SETTINGS = settings(derandomize=True, max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SMALL = {"max_members": 16, "max_member_bytes": 2**20, "max_total_bytes": 4 * 2**20}


def _good(kind: str) -> bytes:
    files = members(good_meta("sys-run-1"), good_frames(period=60.0))
    buf = io.BytesIO()
    if kind == "zip":
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in files.items():
                zf.writestr(name, data)
    else:                                      # "tar": the bytes inside the gzip stream
        with tarfile.open(fileobj=buf, mode="w:gz" if kind == "tar.gz" else "w") as tf:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


GOOD = {"tar.gz": _good("tar.gz"), "zip": _good("zip"), "tar": _good("tar")}


@st.composite
def mutated(draw, kind: str) -> bytes:
    """A good archive with a few bytes flipped, a cut and an insertion (each maybe)."""
    data = bytearray(GOOD[kind])
    for _ in range(draw(st.integers(0, 8))):
        i = draw(st.integers(0, len(data) - 1))
        data[i] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        del data[draw(st.integers(0, len(data) - 1)):][: draw(st.integers(1, 64))]
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data)))
        data[at:at] = draw(st.binary(max_size=64))
    return bytes(data)


def _read(tmp_path, data: bytes, suffix: str) -> None:
    if suffix == "tar":                        # damage the tar itself, then compress: reaches the
        data, suffix = gzip.compress(data, mtime=0), "tar.gz"      # headers, run.json and the CSVs
    path = tmp_path / f"sys-run-1.{suffix}"
    path.write_bytes(data)
    try:
        run = archive.read_archive(path, SMALL)
    except archive.ArchiveError:
        return
    for host, csv in run.csv_bytes.items():
        try:
            archive.parse_counter_csv(csv, host, {"max_columns": 64, "max_rows": 10_000})
        except archive.ArchiveError:
            pass


@pytest.mark.parametrize("suffix", ["tar.gz", "tgz", "zip"])
@SETTINGS
@given(data=st.binary(max_size=4096))
def test_any_bytes_are_read_or_refused_with_the_archive_error(tmp_path, suffix, data):
    _read(tmp_path, data, suffix)


@pytest.mark.parametrize("kind", ["tar.gz", "tar", "zip"])
@SETTINGS
@given(data=st.data())
def test_a_damaged_good_archive_is_read_or_refused_with_the_archive_error(tmp_path, kind, data):
    _read(tmp_path, data.draw(mutated(kind)), kind)


@SETTINGS
@given(data=st.one_of(st.binary(max_size=2048),
                      st.text(alphabet=st.sampled_from(list(',\n\r"0123456789.-eE+abnN \x00\xff')), max_size=2048)
                      .map(lambda t: t.encode("utf-8", "surrogatepass"))))
def test_any_bytes_parse_as_a_counter_csv_or_are_refused(data):
    try:
        frame = archive.parse_counter_csv(data, "web", {"max_columns": 64, "max_rows": 10_000})
    except archive.ArchiveError:
        return
    assert frame.shape[1] <= 64


@SETTINGS
@given(data=st.one_of(st.binary(max_size=1024),
                      st.recursive(st.none() | st.booleans() | st.floats() | st.text(max_size=8),
                                   lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                                   max_leaves=20).map(lambda v: repr(v).encode())))
def test_any_bytes_are_strict_json_or_refused(data):
    try:
        archive.strict_json(data, "run.json")
    except archive.ArchiveError:
        pass


def test_a_zip_asking_for_a_version_zipfile_lacks_is_refused_not_a_crash(tmp_path):
    """Found by the fuzzing above: a central-directory entry that needs zip version 6.4 (one byte
    changed) made ``zipfile.ZipFile`` raise NotImplementedError, not an archive error."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("run.json", "{}")
    data = bytearray(buf.getvalue())
    central = data.index(b"PK\x01\x02")
    data[central + 6] = 64                  # "version needed to extract": 6.4
    path = tmp_path / "r.zip"
    path.write_bytes(bytes(data))
    with pytest.raises(archive.ArchiveError, match="cannot open"):
        archive.read_archive(path)
