"""Safe reading of untrusted test-run archives (contract §1): their members, strict JSON and CSV.

Archives come from outside (contract §1) and are treated as hostile:

* nothing is ever extracted to disk: members are read into memory, so a member
  name cannot traverse paths (``../x``, ``/etc/x``) and links cannot escape;
* only ``run.json`` and ``counters/<host>.csv`` are accepted; links, devices,
  directories with other content and unexpected members are refused;
* every member is read through a hard byte cap (the header's size is not
  trusted), and the total decompressed size and the member count are capped,
  which defeats decompression bombs;
* nothing is unpickled; JSON and CSV only.

Outputs are written by :mod:`pipelines.storage.atomic`; the raw archives' manifest is
:mod:`pipelines.storage.manifest`.
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import lzma
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypedDict, cast

import pandas as pd

from pipelines.config import RUN_ID_RE

log = logging.getLogger("regresslab.archive")

HOST_RE = RUN_ID_RE                   # host names become file stems: the same grammar as run_ids
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip")

class ArchiveLimits(TypedDict, total=False):
    """What one archive may cost to read (``validate.limits``; any left out at :data:`DEFAULT_LIMITS`)."""

    max_members: int
    max_member_bytes: int
    max_total_bytes: int
    max_ratio: float
    max_header_bytes: int
    max_columns: int
    max_rows: int
    max_cells: int
    max_counters: int
    max_line_bytes: int
    max_object_keys: int


DEFAULT_LIMITS: ArchiveLimits = {
    "max_members": 512,               # one run.json + one CSV per host
    "max_member_bytes": 256 * 2**20,  # a CSV of 256 MiB is already huge
    "max_total_bytes": 1024 * 2**20,  # decompressed, all members together
    "max_ratio": 200.0,               # decompressed / compressed size
    "max_header_bytes": 65536,        # a tar PAX / GNU long-name header (tarfile reads it whole)
    "max_columns": 20000,             # counters of one host's CSV (pandas allocates per column)
    "max_rows": 2000000,              # samples of one host's CSV
    "max_cells": 40000000,            # samples x counters of one archive, all hosts (bounds its memory)
    "max_counters": 100000,           # counters of one archive, all hosts (a header-only host still costs)
    "max_line_bytes": 4 * 2**20,      # one line of a CSV (a header of 20,000 counters is ~0.3 MB)
    "max_object_keys": 10000,         # keys of one JSON object (run.json's environment is a few dozen)
}


class ArchiveError(ValueError):
    """An archive breaks the data contract or the safety limits; the message says how."""


class CorruptArchive(ArchiveError):
    """The archive's container cannot be read to its end (a truncated or corrupt stream, not a
    gzip, tar or zip at all): no valid run, and a later, readable copy of it may be taken."""


@dataclass
class RawRun:
    """The untouched content of one archive: metadata and one CSV text per host."""

    run_id: str
    meta: dict[str, Any]
    csv_bytes: dict[str, bytes] = field(default_factory=dict)


def archive_stem(path: str | Path) -> str | None:
    """Return the run_id an archive path names, or None when it is no archive."""
    name = Path(str(path).rstrip("/")).name
    for suffix in ARCHIVE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return None


def _classify_member(name: str) -> tuple[str, str | None]:
    """Map a member name to ('run.json', None) or ('csv', host); raise on anything else."""
    norm = name.replace("\\", "/")
    while norm.startswith("./"):
        norm = norm[2:]
    if norm.startswith("/") or any(part == ".." for part in norm.split("/")):
        raise ArchiveError(f"unsafe member path {name!r} (absolute or '..')")
    if norm in ("", "counters", "counters/"):
        return ("dir", None)
    if norm == "run.json":
        return ("run.json", None)
    parts = norm.split("/")
    if len(parts) == 2 and parts[0] == "counters" and parts[1].endswith(".csv"):
        host = parts[1][: -len(".csv")]
        if not HOST_RE.match(host):
            raise ArchiveError(f"counter file {name!r}: host name must match {HOST_RE.pattern}")
        return ("csv", host)
    raise ArchiveError(f"unexpected member {name!r}: only run.json and counters/<host>.csv are allowed")


def _read_capped(fh: IO[bytes], cap: int, name: str) -> bytes:
    data = fh.read(cap + 1)
    if len(data) > cap:
        raise ArchiveError(f"member {name!r} exceeds {cap} bytes decompressed (decompression bomb?)")
    return data


class _Budget:
    """What an archive may decompress to, counted member by member (``validate.limits``)."""

    def __init__(self, path: Path, limits: ArchiveLimits):
        self.limits = limits
        self.compressed = path.stat().st_size if path.is_file() else None
        self.total = 0
        self.count = 0

    def account(self, data: bytes) -> None:
        self.count += 1
        self.total += len(data)
        if self.count > self.limits["max_members"]:
            raise ArchiveError(f"more than {self.limits['max_members']} members")
        if self.total > self.limits["max_total_bytes"]:
            raise ArchiveError(f"more than {self.limits['max_total_bytes']} bytes decompressed in all "
                               "(decompression bomb?)")
        if self.compressed and self.total > 1_000_000 and self.total / self.compressed > self.limits["max_ratio"]:
            raise ArchiveError(f"compression ratio above {self.limits['max_ratio']:.0f}:1 (decompression bomb?)")


def _directory_members(path: Path, budget: _Budget) -> Iterator[tuple[str, bytes]]:
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path).as_posix()
        if p.is_symlink():
            raise ArchiveError(f"member {rel!r} is a symbolic link")
        if p.is_dir():
            continue  # files inside are classified one by one
        with open(p, "rb") as fh:
            data = _read_capped(fh, budget.limits["max_member_bytes"], rel)
        budget.account(data)
        yield rel, data


def _zip_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, max_bytes: int) -> bytes:
    """One regular member of a zip, refused when it is a link, encrypted, of an unknown method or corrupt."""
    if (info.external_attr >> 16) & 0o170000 == 0o120000:
        raise ArchiveError(f"member {info.filename!r} is a symbolic link")
    if info.flag_bits & 0x1:
        raise ArchiveError(f"member {info.filename!r} is encrypted")
    try:
        with zf.open(info) as fh:
            return _read_capped(fh, max_bytes, info.filename)
    except NotImplementedError as exc:      # zipfile's word for an unknown compression method
        raise ArchiveError(f"member {info.filename!r}: unsupported compression method "
                           f"{info.compress_type}") from exc
    except (zipfile.BadZipFile, RuntimeError, zlib.error, lzma.LZMAError, EOFError, OSError,
            ValueError) as exc:             # bad CRC, truncated or corrupt stream
        raise CorruptArchive(f"member {info.filename!r} is corrupt: {exc}") from exc


def zip_entry_count(path: Path) -> int | None:
    """The entries a zip's end-of-central-directory record (or its ZIP64 one) declares, read from
    the end of the file without parsing the central directory; None when there is no such record."""
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - (22 + 65535)))       # the record, and a comment of at most 64 KiB
        tail = fh.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        return None
    count = int.from_bytes(tail[at + 10:at + 12], "little")
    locator = tail.rfind(b"PK\x06\x07", 0, at)
    if count == 0xFFFF and locator >= 0:           # ZIP64: the count is in the ZIP64 record
        offset = int.from_bytes(tail[locator + 8:locator + 16], "little")
        with open(path, "rb") as fh:
            fh.seek(offset)
            record = fh.read(56)
        if record[:4] == b"PK\x06\x06":
            count = int.from_bytes(record[32:40], "little")
    return count


def _zip_members(path: Path, budget: _Budget) -> Iterator[tuple[str, bytes]]:
    entries = zip_entry_count(path)
    if entries is not None and entries > budget.limits["max_members"]:
        raise ArchiveError(f"a zip of {entries:,} entries (more than {budget.limits['max_members']} members; "
                           "refused before its central directory is read)")
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise CorruptArchive(f"not a readable zip file: {exc}") from exc
    except NotImplementedError as exc:      # a central directory asking for a zip version zipfile lacks
        raise ArchiveError(f"a zip this reader cannot open: {exc}") from exc
    with zf:
        for info in zf.infolist():
            if info.is_dir():
                _classify_member(info.filename)
                budget.account(b"")           # a directory entry is a member too
                continue
            data = _zip_member(zf, info, budget.limits["max_member_bytes"])
            budget.account(data)
            yield info.filename, data


def _tar_members(path: Path, budget: _Budget) -> Iterator[tuple[str, bytes]]:
    name = path.name
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic != b"\x1f\x8b":
        raise CorruptArchive(f"{name} is not gzip-compressed (named {name.split('.', 1)[-1]}; "
                           f"an xz or bzip2 stream, or a plain tar, under a gzip name)")
    check_tar_headers(path, budget.limits)
    try:
        tf = tarfile.open(path, mode="r:gz")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise CorruptArchive(f"not a readable tar archive: {exc}") from exc
    with tf:
        try:
            for member in tf:
                if member.isdir():
                    _classify_member(member.name + "/")
                    budget.account(b"")             # a directory entry is a member too
                    continue
                if not member.isfile():
                    raise ArchiveError(f"member {member.name!r} is a link or device, not a regular file")
                member_fh = tf.extractfile(member)
                assert member_fh is not None
                data = _read_capped(member_fh, budget.limits["max_member_bytes"], member.name)
                budget.account(data)
                yield member.name, data
            _drain_to_end(cast("IO[bytes] | None", tf.fileobj), budget.limits["max_total_bytes"] - budget.total)
        except ArchiveError:
            raise
        except (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError, ValueError) as exc:
            raise CorruptArchive(f"corrupt tar archive: {exc}") from exc


def _drain_to_end(stream: IO[bytes] | None, cap: int) -> None:
    """Read a gzip stream on past the tar's end, to its end-of-stream marker and checksum: a copy cut
    inside the tar's trailing padding holds every member, yet is not the archive (the whole copy
    differs).  At most ``cap`` bytes: padding is a few KiB, not a bomb."""
    drained = 0
    while stream is not None and (chunk := stream.read(2**16)):
        drained += len(chunk)
        if drained > cap:
            raise ArchiveError("more bytes after the tar's end than the archive may hold (decompression bomb?)")


def _iter_members(path: Path, limits: ArchiveLimits) -> Iterator[tuple[str, bytes]]:
    """Yield (member name, bytes) of a tar.gz, zip or directory archive, enforcing the limits."""
    budget = _Budget(path, limits)
    if path.is_dir():
        yield from _directory_members(path, budget)
    elif path.name.endswith(".zip"):
        yield from _zip_members(path, budget)
    else:
        yield from _tar_members(path, budget)


def _unique_keys(pairs: list[tuple[str, Any]], max_keys: int = DEFAULT_LIMITS["max_object_keys"]) -> dict[str, Any]:
    """The object of ``pairs``; refused when it repeats a key (the last would silently win) or has
    more than ``max_keys``.  Linear: one pass with a set."""
    if len(pairs) > max_keys:
        raise ValueError(f"an object with {len(pairs):,} keys (more than {max_keys:,})")
    out: dict[str, Any] = {}
    repeated: set[str] = set()
    for key, value in pairs:
        if key in out:
            repeated.add(key)
        out[key] = value
    if repeated:
        raise ValueError(f"duplicate key(s) {excerpt(sorted(repeated)[:5])} (the last one would silently win)")
    return out


def excerpt(value: Any, limit: int = 120) -> str:
    """A bounded excerpt of a value from outside, for a message: its ``repr`` cut to ``limit``
    characters, with the full length said when it was cut (a 200 MiB cell must not become a 400 MiB
    quarantine reason)."""
    text = repr(value) if not isinstance(value, str) else value
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")


def strict_json(data: bytes, what: str, *, max_depth: int = 64,
                max_keys: int = DEFAULT_LIMITS["max_object_keys"]) -> Any:
    """Parse untrusted JSON strictly: UTF-8, no duplicate keys, at most ``max_keys`` keys an
    object, no NaN/Infinity, nesting at most ``max_depth`` deep (checked before parsing: the
    parser itself recurses).

    Raises
    ------
    ArchiveError
        Naming what is wrong.
    """
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:                    # a bracket counter that skips strings: O(n), no recursion
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > max_depth:
                    raise ArchiveError(f"{what} is nested more than {max_depth} levels deep")
        elif byte in (0x5D, 0x7D):
            depth -= 1
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=lambda pairs: _unique_keys(pairs, max_keys),
                          parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise ArchiveError(f"{what} is not valid UTF-8: {exc}") from exc
    except (json.JSONDecodeError, ValueError, RecursionError) as exc:
        raise ArchiveError(f"{what} is not valid JSON: {exc}") from exc


def _tar_size(field: bytes) -> int:
    """A tar header's size field: octal, or GNU base-256 when the high bit is set."""
    if field[:1] and field[0] & 0x80:
        return int.from_bytes(bytes([field[0] & 0x7F]) + field[1:], "big")
    text = field.split(b"\0", 1)[0].strip()
    return int(text, 8) if text else 0


def check_tar_headers(path: Path, limits: ArchiveLimits) -> None:
    """Walk a tar.gz's 512-byte headers before ``tarfile`` does, streaming, and refuse a PAX or
    GNU long-name header larger than ``max_header_bytes`` (``tarfile`` reads such a header whole:
    a 1.5 MB archive can hold a 1.5 GiB one), more than ``max_members`` entries of any kind, and a
    member or members whose declared sizes exceed ``max_member_bytes`` or ``max_total_bytes``:
    refused from the headers, before the data is inflated (8 MiB of gzip can declare 8 GiB of zeros)."""
    import gzip

    count = declared = 0
    try:
        with gzip.open(path, "rb") as fh:
            while True:
                header = fh.read(512)
                if len(header) < 512 or header == b"\0" * 512:
                    return
                count += 1
                if count > limits["max_members"]:
                    raise ArchiveError(f"more than {limits['max_members']} members")
                size = _tar_size(header[124:136])
                kind = header[156:157]
                declared += size
                if kind in (b"0", b"\0", b"7") and size > limits["max_member_bytes"]:
                    raise ArchiveError(f"a member of {size:,} bytes declared (more than {limits['max_member_bytes']:,}: "
                                       "a decompression bomb? refused before it is inflated)")
                if declared > limits["max_total_bytes"]:
                    raise ArchiveError(f"{declared:,} bytes declared by the members (more than "
                                       f"{limits['max_total_bytes']:,} decompressed in all: a decompression bomb? "
                                       "refused before they are inflated)")
                if kind in (b"x", b"g", b"L", b"K") and size > limits["max_header_bytes"]:
                    raise ArchiveError(f"a tar extended header of {size} bytes (more than "
                                       f"{limits['max_header_bytes']})")
                remaining = (size + 511) // 512 * 512
                while remaining:                       # skip the member's data, streaming
                    chunk = fh.read(min(remaining, 2**20))
                    if not chunk:
                        return                         # truncated: tarfile reports it
                    remaining -= len(chunk)
    except (OSError, EOFError, ValueError, zlib.error) as exc:
        if isinstance(exc, ArchiveError):
            raise
        raise CorruptArchive(f"corrupt tar archive: {exc}") from exc


def is_run_directory(path: Path) -> bool:
    """A lab's own output folder for one run: ``run.yaml`` beside the collectors' files, no
    ``run.json`` (``pipelines.importers.run_directory`` converts it when it is read)."""
    return path.is_dir() and (path / "run.yaml").is_file() and not (path / "run.json").exists()


def read_archive(path: str | Path, limits: ArchiveLimits | None = None) -> RawRun:
    """Read one archive (tar.gz, tgz, zip or plain directory) without extracting it.

    (A lab's run directory, :func:`is_run_directory`, is read by ``pipelines.importers.run_directory.read_run``.)

    Raises
    ------
    ArchiveError
        With a specific reason when the archive is unsafe or breaks the layout.
    """
    path = Path(path)
    limits = {**DEFAULT_LIMITS, **(limits or {})}
    run_id = archive_stem(path) if path.is_file() else path.name
    if run_id is None:
        raise ArchiveError(f"{path.name}: not an archive name (expected {', '.join(ARCHIVE_SUFFIXES)})")
    if not RUN_ID_RE.match(run_id):
        raise ArchiveError(f"archive name {run_id!r} is not a valid run_id ({RUN_ID_RE.pattern})")
    meta_bytes: bytes | None = None
    csvs: dict[str, bytes] = {}
    for name, data in _iter_members(path, limits):
        kind, host = _classify_member(name)
        if kind == "run.json":
            if meta_bytes is not None:
                raise ArchiveError("run.json appears more than once (which one is the run?)")
            meta_bytes = data
        elif kind == "csv":
            assert host is not None                 # a counter file names its host
            if host in csvs:
                raise ArchiveError(f"duplicate counter file for host {host!r}")
            csvs[host] = data
    if meta_bytes is None:
        raise ArchiveError("run.json is missing")
    meta = strict_json(meta_bytes, "run.json", max_keys=limits["max_object_keys"])
    if not isinstance(meta, dict):
        raise ArchiveError("run.json must hold a JSON object")
    if not csvs:
        raise ArchiveError("no counters/<host>.csv file")
    return RawRun(run_id=run_id, meta=meta, csv_bytes=csvs)


def unreadable_reason(path: str | Path, limits: ArchiveLimits | None = None) -> str | None:
    """Why an archive's container cannot be read to its end (:class:`CorruptArchive`: truncated,
    corrupt, or no gzip, tar or zip at all), or None when it can: every member read through, within
    ``limits``, whatever the members hold (a readable archive may still break the contract)."""
    path = Path(path)
    if path.is_dir():
        return None
    try:
        for _ in _iter_members(path, {**DEFAULT_LIMITS, **(limits or {})}):
            pass
    except CorruptArchive as exc:
        return str(exc)
    except ArchiveError:
        return None
    except OSError as exc:
        return f"cannot be read: {exc}"
    return None


def longest_line(data: bytes, limit: int) -> int:
    """The length of the first line of ``data`` longer than ``limit``, else 0.  No copy of the
    data: ``bytes.find`` from newline to newline, stopping at the first line too long."""
    if len(data) <= limit:
        return 0
    start = 0
    while start <= len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        if end - start > limit:
            return end - start
        start = end + 1
    return 0


def csv_cells(data: bytes) -> int:
    """Rows times columns of a CSV as written (header excluded), counted on the bytes."""
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return max(0, lines - 1) * (data.split(b"\n", 1)[0].count(b",") + 1)


def check_cells(csv_bytes: dict[str, bytes], limits: ArchiveLimits | None = None) -> None:
    """An archive's memory bound, before pandas allocates anything: its samples times counters,
    over every host, at most ``max_cells``.  Parsing and validating take about 20-60 bytes a
    cell (numbers / text, measured: 20 M cells of text, a 150 MB CSV, peaked at 1.1 GB in
    ``validate``), so the default 40 M cells keeps one archive near 2 GB at worst; a 2,000-counter,
    8-hour run sampled every 2 s is 28.8 M.  Before that, what a header-only host or one long
    line would cost: at most ``max_counters`` counters over all hosts, no line longer than
    ``max_line_bytes``."""
    limits = {**DEFAULT_LIMITS, **(limits or {})}
    for host, data in csv_bytes.items():
        longest = longest_line(data, limits["max_line_bytes"])
        if longest > limits["max_line_bytes"]:
            raise ArchiveError(f"counters/{host}.csv has a line of {longest:,} bytes (more than "
                               f"{limits['max_line_bytes']:,})")
    counters = {host: data.split(b"\n", 1)[0].count(b",") for host, data in csv_bytes.items()}
    if sum(counters.values()) > limits["max_counters"]:
        raise ArchiveError(f"{sum(counters.values()):,} counters over {len(counters)} hosts (more than "
                           f"{limits['max_counters']:,})")
    cells = {host: csv_cells(data) for host, data in csv_bytes.items()}
    total = sum(cells.values())
    if total > limits["max_cells"]:
        top = ", ".join(f"{h} {n:,}" for h, n in sorted(cells.items(), key=lambda kv: -kv[1])[:3])
        raise ArchiveError(f"{total:,} samples x counters over all hosts (more than {limits['max_cells']:,}; "
                           f"largest: {top})")


def parse_counter_csv(data: bytes, host: str, limits: ArchiveLimits | None = None) -> pd.DataFrame:
    """Parse one host's counter CSV as the collector wrote it (no coercion).

    Values keep pandas' own inference, so a column holding text stays ``object``
    and the validation suite can report it.  Columns and rows are counted before pandas
    allocates anything (``max_columns``, ``max_rows``): 200,000 columns in 480 KB aborted the
    process.
    """
    limits = {**DEFAULT_LIMITS, **(limits or {})}
    first = data.split(b"\n", 1)[0]
    if first.count(b",") + 1 > limits["max_columns"]:
        raise ArchiveError(f"counters/{host}.csv has {first.count(b',') + 1} columns "
                           f"(more than {limits['max_columns']})")
    if data.count(b"\n") > limits["max_rows"] + 1:
        raise ArchiveError(f"counters/{host}.csv has more than {limits['max_rows']} rows")
    try:
        # only an empty cell is a missing sample (contract §1): "n/a", "null", "-" stay text
        frame = pd.read_csv(io.BytesIO(data), low_memory=False, keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ArchiveError(f"counters/{host}.csv is not a readable CSV: {exc}") from exc
    return frame


def list_archives(directory: str | Path) -> list[Path]:
    """Archives in a local directory: files with an archive suffix and sub-directories holding run.json."""
    directory = Path(directory)
    found = []
    for p in sorted(directory.iterdir()):
        if p.is_file() and archive_stem(p):
            found.append(p)
        elif p.is_dir() and ((p / "run.json").is_file() or is_run_directory(p)):
            found.append(p)
    return found


def sha256_file(path: str | Path, chunk: int = 2**20) -> str:
    """Content hash of a file, or of a directory archive (its members' names and bytes)."""
    digest = hashlib.sha256()
    path = Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            digest.update(f.relative_to(path).as_posix().encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(chunk), b""):
                digest.update(block)
    return digest.hexdigest()
