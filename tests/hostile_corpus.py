"""A corpus of hostile archives, one per known way an archive has broken a night.

``python -m tests.hostile_corpus OUT_DIR`` writes them; the tests call :func:`write_corpus`.
Each entry is ``file name -> the words its quarantine reason must contain``: a specific
reason, never a crash of the stage.  Every archive is otherwise a good run (``good_meta``,
``good_frames``), so the only fault is the one named.
"""
from __future__ import annotations

import io
import lzma
import struct
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np

from tests.helpers import good_frames, good_meta, members

ESCAPED_ABSOLUTE = "/tmp/regresslab-hostile-escaped"    # a system naming an absolute path: never written


def _tar_bytes(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _zip_bytes(files: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _patch_zip_local_header(data: bytes, offset: int, fmt: str, value: int, *, central: int | None = None) -> bytes:
    """Overwrite a field of the first local file header (and of its central directory entry)."""
    out = bytearray(data)
    assert out[:4] == b"PK\x03\x04"
    struct.pack_into(fmt, out, offset, value)
    if central is not None:
        at = out.find(b"PK\x01\x02")
        struct.pack_into(fmt, out, at + central, value)
    return bytes(out)


def corpus() -> dict[str, tuple[bytes, list[str]]]:
    """name -> (archive bytes, words of the expected quarantine reason)."""
    out: dict[str, tuple[bytes, list[str]]] = {}

    def good(run_id: str, **meta) -> dict[str, bytes]:
        return members(good_meta(run_id, **meta), good_frames())

    # --- class 1: a system that would become a path outside data/ (or no file name at all)
    for name, system in (("sys-up", "../../../../escaped"), ("sys-abs", ESCAPED_ABSOLUTE), ("sys-nl", "sys\n"),
                         ("sys-nul", "s\x00ys"), ("sys-emoji", "\U0001F600" * 100)):
        out[f"{name}.tar.gz"] = (_tgz(good(name, system=system)), ["system_is_identifier"])
    # --- class 1b: free text shown on pages, in mails, JUnit files and terminals, made unprintable
    for name, field, meta in (
            ("sys-cause-nul", "cause", {"cause": "cpu\x00\x0cspike"}),              # XML 1.0 forbids both
            ("sys-version-esc", "version", {"version": "1.0\x1b[2J\x1b]0;pwned\x07"}),  # clears a terminal
            ("sys-cause-long", "cause", {"cause": "c" * 5000}),
            ("sys-env-ff", "environment", {"environment": {"cpu_model": "x\x0cy", "cpu_cores": 4}})):
        out[f"{name}.tar.gz"] = (_tgz(good(name, **meta)), [f"{field}_is_printable", field])
    # --- class 2: poison pills that raise something other than ArchiveError in a careless reader
    z = _zip_bytes(good("sys-zip-crc"))
    at = z.find(b"PK\x03\x04") + 14                        # CRC-32 of the first member (run.json)
    crc = bytearray(z)
    crc[at] ^= 0xFF
    c_at = crc.find(b"PK\x01\x02") + 16
    crc[c_at] ^= 0xFF
    out["sys-zip-crc.zip"] = (bytes(crc), ["CRC"])
    z = _zip_bytes(good("sys-zip-enc"))
    out["sys-zip-enc.zip"] = (_patch_zip_local_header(z, 6, "<H", 0x1, central=8), ["encrypted"])
    z = _zip_bytes(good("sys-zip-method"))
    out["sys-zip-method.zip"] = (_patch_zip_local_header(z, 8, "<H", 99, central=10), ["compression"])
    out["sys-xz.tar.gz"] = (lzma.compress(_tar_bytes(good("sys-xz"))), ["xz"])
    deep = good("sys-deep")
    deep["run.json"] = b'{"a": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    out["sys-deep.tar.gz"] = (_tgz(deep), ["nested"])
    out["sys-epoch.tar.gz"] = (_tgz(good("sys-epoch", started_at="1790000000")), ["started_at"])
    out["sys-numtime.tar.gz"] = (_tgz(good("sys-numtime", started_at=1790000000)), ["started_at"])
    # --- class 8: what could pass silently
    frames = good_frames()
    frames["web01"]["web.cpu_pct"] = frames["web01"]["web.cpu_pct"].astype(float)
    # +inf samples drop a counter (contract §1); in most of them, the run
    for host, col in (("web01", "web.io_write_bytes_per_s"), ("web01", "web.cpu_pct"),
                      ("lg01", "app.response_time_ms")):
        frames[host].loc[3, col] = np.inf
    out["sys-inf.tar.gz"] = (_tgz(members(good_meta("sys-inf"), frames)), ["infinite values", "inf",
                                                                           "dropped_counter_share"])
    dup = good("sys-dupkey")
    dup["run.json"] = dup["run.json"].replace(b'"system": "sys"', b'"system": "sys", "system": "other"')
    out["sys-dupkey.tar.gz"] = (_tgz(dup), ["duplicate key", "system"])
    nan = good("sys-nanjson")
    nan["run.json"] = nan["run.json"].replace(b'"duration_s": 600', b'"duration_s": NaN')
    out["sys-nanjson.tar.gz"] = (_tgz(nan), ["NaN"])
    out["sys-twojson.tar.gz"] = (_tgz_members_twice(good("sys-twojson")), ["run.json", "more than once"])
    # --- class 3: resources
    out["sys-manydirs.tar.gz"] = (_tgz_with(good("sys-manydirs"), dirs=2000), ["more than", "members"])
    out["sys-pax.tar.gz"] = (_tgz_with(good("sys-pax"), pax={"comment": "a" * 300_000}), ["extended header"])
    wide = good("sys-wide")
    names = ",".join(f"web.c{i}" for i in range(25_000))
    wide["counters/web01.csv"] = f"timestamp,{names}\n".encode() + b"1790000000" + b",1" * 25_000 + b"\n"
    out["sys-wide.tar.gz"] = (_tgz(wide), ["columns"])
    # --- class 9: small inputs inside every other limit that cost far more than their size
    keys = good_meta("sys-keys")
    keys["environment"] = {f"k{i}": i for i in range(40_000)}                # quadratic duplicate check: 50 s
    out["sys-keys.tar.gz"] = (_tgz(members(keys, good_frames())), ["40,000 keys", "more than 10,000"])
    many = good("sys-hosts")                                                   # header-only hosts: few cells
    for h in range(96):
        header = ",".join(f"h{h:02d}.c{i}" for i in range(2_000))
        many[f"counters/x{h:02d}.csv"] = f"timestamp,{header}\n1790000000{',1' * 2_000}\n".encode()
    out["sys-hosts.tar.gz"] = (_tgz(many), ["counters over", "more than 100,000"])
    long_line = good("sys-longline")                                           # one 5 MiB line
    digits = (np.random.default_rng(0).integers(0, 10, 5 * 2**20, dtype=np.uint8) + ord("0")).tobytes()
    long_line["counters/web01.csv"] = b"timestamp,web.cpu_pct\n1790000000," + digits + b"\n"   # incompressible
    out["sys-longline.tar.gz"] = (_tgz(long_line), ["line of", "more than 4,194,304"])
    out["sys-bomb8g.tar.gz"] = (_declared_bomb(good("sys-bomb8g")), ["declared", "decompression bomb"])
    out["sys-zipmany.zip"] = (_zip_bytes({**good("sys-zipmany"), **{f"counters/z{i}": b"" for i in range(600)}}),
                              ["entries", "before its central directory"])
    return out


def _declared_bomb(files: dict[str, bytes]) -> bytes:
    """A tar.gz of a few KB whose first member declares nearly 8 GiB (of zeros, were it inflated)."""
    import gzip
    stream = b""
    for name, data in files.items():                       # the good members, without the end-of-archive blocks
        info = tarfile.TarInfo(name)
        info.size = len(data)
        stream += info.tobuf(format=tarfile.GNU_FORMAT) + data + b"\0" * (-len(data) % 512)
    bomb = tarfile.TarInfo("counters/bomb.csv")
    bomb.size = 8 * 2**30 - 1
    return gzip.compress(stream + bomb.tobuf(format=tarfile.GNU_FORMAT) + b"\0" * 2**20, mtime=0)


def write_run_dirs(out: Path) -> dict[str, list[str]]:
    """Run directories (a lab's raw files and its run.yaml) that cost far more than their size:
    run_id -> the words its quarantine reason must hold."""
    laughs = "\n".join([f'a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'] +
                        [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)])
    run_yaml = "system: sys\nversion: '1'\nverdict: pass\ncause: none\n"
    k6_line = b'{"type":"Point","metric":"vus","data":{"time":"2026-11-22T10:00:00Z","value":1,"tags":{"x":"' + \
        b"y" * (5 * 2**20) + b'"}}}\n'
    dirs = {"sys-laughs": ({"run.yaml": (run_yaml + laughs + "\n").encode(), "k6.json": _k6_points()},
                           ["YAML alias"]),
            "sys-longk6": ({"run.yaml": run_yaml.encode(), "k6.json": k6_line}, ["line 1", "longer than"])}
    expected = {}
    for name, (files, words) in dirs.items():
        (out / name).mkdir(parents=True, exist_ok=True)
        for file, data in files.items():
            (out / name / file).write_bytes(data)
        expected[name] = words
    return expected


def _k6_points() -> bytes:
    lines = [b'{"type":"Point","metric":"vus","data":{"time":"2026-11-22T10:00:%02dZ","value":1,"tags":{}}}' % s
             for s in range(0, 60, 5)]
    return b"\n".join(lines) + b"\n"


def _tgz_with(files: dict[str, bytes], *, dirs: int = 0, pax: dict[str, str] | None = None) -> bytes:
    """A tar.gz of ``files`` preceded by ``dirs`` directory entries, or whose first member carries
    the PAX header ``pax`` (a large one is read whole by ``tarfile``)."""
    import gzip
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for i in range(dirs):
            info = tarfile.TarInfo(f"counters/d{i}")
            info.type = tarfile.DIRTYPE
            tf.addfile(info)
        for j, (name, data) in enumerate(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if pax and j == 0:
                info.pax_headers = dict(pax)
            tf.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), mtime=0)


def _tgz(files: dict[str, bytes]) -> bytes:
    import gzip
    return gzip.compress(_tar_bytes(files), mtime=0)


def _tgz_members_twice(files: dict[str, bytes]) -> bytes:
    """A tar in which run.json appears twice (the second would win with a naive reader)."""
    import gzip
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in [*files.items(), ("run.json", files["run.json"].replace(b'"pass"', b'"fail"'))]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), mtime=0)


def write_corpus(out: Path) -> dict[str, list[str]]:
    """Write every hostile archive and run directory into ``out``; return run_id -> the words its
    reason must hold."""
    out.mkdir(parents=True, exist_ok=True)
    expected = {}
    for name, (data, words) in corpus().items():
        (out / name).write_bytes(data)
        expected[name.split(".")[0]] = words
    expected.update(write_run_dirs(out))
    return expected


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "hostile")
    for run_id, words in write_corpus(target).items():
        print(f"{run_id}: reason must mention {words}")
