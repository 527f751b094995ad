"""pull: copy new test-run archives from the source into ``data/raw``, incrementally.

The source is ``params.yaml: pull.source`` (one location or a list): a local
directory, or a ``file://``, ``http(s)://`` or ``s3://`` URL read through fsspec.
``data/raw`` is append-only: an archive is copied once, recorded in
``data/raw/manifest.jsonl`` (run_id, sha256, size, first seen, source, change marker), and
never rewritten or deleted.  An archive that reappears under a known run_id with other
content is refused (reported, left out), never overwritten, with one exception: when the copy
taken was unreadable (a truncated or corrupt file: ``archive.unreadable_reason``, never a valid run)
and the new one reads, the new one is taken under the same run_id and the first is kept aside,
byte for byte, in ``data/raw/set_aside/<run_id>/<sha256[:12]>/`` (the manifest's ``set_aside``
says where, its hash and why).  ``regresslab retake RUN_ID`` takes a changed readable copy on
purpose the same way.

An archive is taken only once it is complete, so that a night that starts while a lab's copy is
under way (``scp``, a load generator writing its tarball in place, an NFS copy) does not take half
of it: its size and change marker must hold over ``pull.settle_s`` seconds measured within the
night (listed, then looked at again; checked once more after the copy), unless a
``<run_id>.done`` file beside it says it is complete or the store writes atomically (``s3://``).
One still being written waits for a later night (the summary's ``waiting``).

A night costs what is new, not the whole store: each source is *listed* (names, sizes and the
store's change marker — a local file's mtime, an S3 object's ETag or version id — from the
listing alone), and an archive whose name, size and marker the manifest already holds is known
without a byte of it read.  Only the others are copied and hashed.  A source whose URL scheme
needs a package that is not installed (``s3://`` without ``s3fs``) is skipped with a reason
naming the extra to install; the other sources are still pulled.

Credentials never sit in a source location (the schema refuses one that holds them): each client
finds its own, as it does anywhere else.  ``s3://``: the AWS credential chain (``AWS_PROFILE``,
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``~/.aws/credentials``, an instance role).
``https://``: an entry for the host in ``~/.netrc`` (or the file ``NETRC`` names), or an
``Authorization`` header taken from the environment variable :data:`HTTP_AUTH_ENV`
(e.g. ``Bearer <token>``).  Every location this module logs, stores in the manifest or the
summary, or puts in a reason is masked first (:func:`pipelines.safe_text.mask_url`).
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pipelines import config
from pipelines.progress import Progress
from pipelines.safe_text import mask_url, mask_urls
from pipelines.storage import archive, atomic, manifest

log = logging.getLogger("regresslab.pull")
HTTP_AUTH_ENV = "REGRESSLAB_HTTP_AUTHORIZATION"     # an Authorization header for https:// sources


# --------------------------------------------------------------------------- I/O shell


def _append_manifest(entry: manifest.ManifestEntry, path: Path) -> None:
    """Append one line (one write + fsync).  A pull killed inside the write leaves a torn last
    line, which :func:`manifest.repair_torn_tail` removes at the next pull."""
    manifest.append_json_line(path, entry.to_json())


def _staging_name(name: str) -> str:
    """A temporary name of this process in ``data/raw``: concurrent pulls never share one."""
    return f".incoming-{os.getpid()}-{uuid.uuid4().hex[:8]}-{name}"


def _clean_stale_staging(raw_dir: Path) -> None:
    """Remove the temporary copies of pulls that died (their process is gone)."""
    for p in raw_dir.glob(".incoming-*"):
        pid = p.name.split("-")[1] if p.name.count("-") >= 3 else ""
        if pid.isdigit() and atomic.pid_alive(int(pid)):
            continue
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)


# the package each fsspec scheme needs, and the regresslab extra that installs it
SCHEME_EXTRAS = {"s3": ("s3fs", "s3"), "s3a": ("s3fs", "s3"), "gs": ("gcsfs", None), "gcs": ("gcsfs", None),
                 "az": ("adlfs", None), "abfs": ("adlfs", None), "sftp": ("paramiko", None)}


class SourceUnavailable(OSError):
    """A source that cannot be listed at all (missing, or its scheme's package not installed)."""


def http_options(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """fsspec's options for an http(s) source: aiohttp reads ``~/.netrc`` (and the proxy
    variables) for each host, and the ``Authorization`` header comes from :data:`HTTP_AUTH_ENV`
    when it is set; never from the location itself."""
    env = os.environ if environ is None else environ
    options: dict[str, Any] = {"client_kwargs": {"trust_env": True}}
    header = env.get(HTTP_AUTH_ENV, "").strip()
    if header:
        options["headers"] = {"Authorization": header}
    return options


def _open_source(location: str):
    """Return (fsspec filesystem or None for local, root path)."""
    if "://" not in location:
        return None, location
    import fsspec

    scheme = location.split("://", 1)[0].lower()
    options = http_options() if scheme in ("http", "https") else {}
    try:
        fs, root = fsspec.core.url_to_fs(location, **options)
    except ImportError as exc:
        scheme = location.split("://", 1)[0].lower()
        package, extra = SCHEME_EXTRAS.get(scheme, (None, None))
        how = (f"pip install 'regresslab[{extra}]'" if extra else f"pip install {package}") if package else \
            "install the fsspec implementation of this scheme"
        raise SourceUnavailable(f"{scheme}:// needs the {package or scheme} package, which is not installed "
                                f"({how})") from exc
    except ValueError as exc:                     # an unknown protocol
        raise SourceUnavailable(f"cannot read {mask_url(location)!r}: {mask_urls(str(exc))}") from exc
    return fs, root


def local_marker(path: Path) -> tuple[int, str]:
    """(size, change marker) of a local archive from ``stat`` alone: a file's size and mtime; a
    directory's total size, file count and newest mtime."""
    if path.is_dir():
        size, count, newest = 0, 0, 0
        for p in path.rglob("*"):
            if p.is_file() and not p.is_symlink():
                st = p.stat()
                size, count, newest = size + st.st_size, count + 1, max(newest, st.st_mtime_ns)
        return size, f"dir:{count}:{newest}"
    st = path.stat()
    return st.st_size, f"mtime:{st.st_mtime_ns}"


def remote_marker(info: dict[str, Any]) -> str:
    """The store's change marker of one listed object (ETag, version id, modification time)."""
    for key in ("ETag", "etag", "VersionId", "version_id", "generation", "md5Hash", "LastModified", "mtime",
                "last_modified", "updated"):
        if info.get(key) not in (None, ""):
            return f"{key}:{info[key]}"
    return ""


def remote_run_directory(fs, prefix: str) -> dict[str, dict] | None:
    """The files under a remote prefix (relative path -> listing entry) when it is a lab's run
    directory (a ``run.yaml`` at its top, no ``run.json``), else None.  Listed, not read."""
    try:
        listing = fs.find(prefix, detail=True)
    except OSError:
        return None
    base = prefix.rstrip("/") + "/"
    files = {k[len(base):]: v for k, v in listing.items() if k.startswith(base) and v.get("type", "file") == "file"}
    if "run.yaml" not in files or "run.json" in files:
        return None
    return files


DONE_SUFFIX = ".done"      # <run_id>.done beside an archive: the lab's word that it is complete


def find_archives(location: str, *, with_markers: bool = False, done: set[str] | None = None) -> dict[str, tuple]:
    """run_id -> (full path at the source, file name) for every archive at a source location;
    with ``with_markers``, (path, name, size, marker) from the listing alone.  ``done``, when
    given, receives the run_ids with a ``<run_id>.done`` marker file beside them.

    Two archives of one run_id at a source (``r1.tar.gz`` beside ``r1.zip``) are both listed
    under the run_id with their names joined by `` | ``: :func:`pull` refuses the run_id rather
    than keep whichever came last."""
    fs, root = _open_source(location)
    found: dict[str, list[tuple]] = {}
    done = set() if done is None else done
    if fs is None:
        base = Path(root)
        if not base.is_dir():
            raise FileNotFoundError(f"pull source {mask_url(location)!r} is not a directory")
        # the source is one lab run directory itself, or a folder of archives and run directories
        listed = [base] if archive.is_run_directory(base) else archive.list_archives(base)
        for p in listed:
            local_id = (archive.archive_stem(p) or p.name) if p.is_file() else p.name
            found.setdefault(local_id, []).append((str(p), p.name, *(local_marker(p) if with_markers else (0, ""))))
        done.update(p.name[: -len(DONE_SUFFIX)] for p in base.glob("*" + DONE_SUFFIX) if p.is_file())
    else:
        fs.invalidate_cache(root)                      # a night's listing is the store's now, not a cached one
        for info in fs.ls(root, detail=True):
            name = info["name"].rstrip("/").rsplit("/", 1)[-1]
            run_id = archive.archive_stem(name)
            if name.endswith(DONE_SUFFIX) and info.get("type", "file") == "file":
                done.add(name[: -len(DONE_SUFFIX)])
            elif run_id and info.get("type", "file") == "file":
                found.setdefault(run_id, []).append((info["name"], name, int(info.get("size") or 0),
                                                     remote_marker(info)))
            elif info.get("type") == "directory" and archive.RUN_ID_RE.match(name):
                files = remote_run_directory(fs, info["name"])
                if files is not None:                  # a lab's run directory under a prefix: its tool files
                    size = sum(int(f.get("size") or 0) for f in files.values())
                    marker = "dir:" + hashlib.sha256("\n".join(
                        f"{rel}\t{f.get('size')}\t{remote_marker(f)}" for rel, f in sorted(files.items())
                    ).encode()).hexdigest()[:32]
                    found.setdefault(name, []).append((info["name"], name, size, marker))
    width = 4 if with_markers else 2
    return {run_id: (hits[0][:width] if len(hits) == 1
                     else ("", " | ".join(sorted(h[1] for h in hits)), 0, "")[:width])
            for run_id, hits in found.items()}


def check_directory_archive(path: Path, *, max_bytes: int, max_depth: int = 8) -> None:
    """Refuse a directory archive that is not plain files: symbolic links, devices or FIFOs, more
    than ``max_depth`` levels (the contract's layout has two), or more than ``max_bytes`` in all.
    Walked without following links and without recursion (a 600-level tree cannot abort pull)."""
    total = 0
    stack = [(path, 0)]
    while stack:
        directory, depth = stack.pop()
        if depth > max_depth:
            raise archive.ArchiveError(f"directory archive nested deeper than {max_depth} levels")
        with os.scandir(directory) as entries:
            for entry in entries:
                rel = Path(entry.path).relative_to(path).as_posix()
                if entry.is_symlink():
                    raise archive.ArchiveError(f"member {rel!r} is a symbolic link")
                if entry.is_dir(follow_symlinks=False):
                    stack.append((Path(entry.path), depth + 1))
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
                    if total > max_bytes:
                        raise archive.ArchiveError(f"directory archive larger than {max_bytes} bytes")
                else:
                    raise archive.ArchiveError(f"member {rel!r} is a device, FIFO or socket, not a regular file")


def _hash_and_stage(location: str, path: str, dest_dir: Path, max_bytes: int,
                    directory: bool = False) -> tuple[str, int, Path]:
    """Copy one archive to a temporary name in ``dest_dir`` while hashing it (``directory``: a
    remote run directory, as the listing found it)."""
    fs, _ = _open_source(location)
    if fs is None and Path(path).is_symlink():
        raise archive.ArchiveError("the archive at the source is a symbolic link (not followed)")
    if fs is None and Path(path).is_dir():
        check_directory_archive(Path(path), max_bytes=max_bytes)
        tmp = dest_dir / _staging_name(Path(path).name)
        shutil.copytree(path, tmp, symlinks=True)
        size = sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file())
        return archive.sha256_file(tmp), size, tmp
    if fs is not None and directory:           # the listing said so: no request to ask the store again
        return _stage_remote_directory(fs, path, dest_dir, max_bytes)
    digest = hashlib.sha256()
    tmp = dest_dir / _staging_name(Path(path).name)
    size = 0
    opener = open if fs is None else fs.open
    with opener(path, "rb") as src, open(tmp, "wb") as dst:
        for block in iter(lambda: src.read(2**20), b""):
            size += len(block)
            if size > max_bytes:
                dst.close()
                tmp.unlink()
                raise archive.ArchiveError(f"archive larger than {max_bytes} bytes")
            digest.update(block)
            dst.write(block)
    return digest.hexdigest(), size, tmp


def _stage_remote_directory(fs, prefix: str, dest_dir: Path, max_bytes: int,
                            max_depth: int = 8) -> tuple[str, int, Path]:
    """Copy a remote run directory (its files under ``prefix``) to a temporary directory in
    ``dest_dir``: every relative path checked (no ``..``, no absolute path, at most ``max_depth``
    levels), at most ``max_bytes`` in all, counted as the bytes arrive."""
    files = remote_run_directory(fs, prefix)
    if files is None:
        raise archive.ArchiveError(f"{prefix}: no run.yaml at its top (or a run.json beside it)")
    tmp = dest_dir / _staging_name(prefix.rstrip("/").rsplit("/", 1)[-1])
    tmp.mkdir()
    size = 0
    try:
        for rel, info in sorted(files.items()):
            parts = rel.split("/")
            if rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or len(parts) > max_depth:
                raise archive.ArchiveError(f"member {rel!r} is not a plain relative path")
            target = tmp.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with fs.open(info["name"], "rb") as src, open(target, "wb") as dst:
                for block in iter(lambda: src.read(2**20), b""):
                    size += len(block)
                    if size > max_bytes:
                        raise archive.ArchiveError(f"run directory larger than {max_bytes} bytes")
                    dst.write(block)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return archive.sha256_file(tmp), size, tmp


SET_ASIDE = "set_aside"      # data/raw/set_aside/<run_id>/<sha256[:12]>/<file>: earlier copies kept aside
STILL_WRITTEN = "still being written: taken on a later night"
# stores whose writes are atomic (an object appears whole or not at all): nothing to wait for
ATOMIC_SCHEMES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs"})


def set_aside_path(raw_dir: Path, entry: manifest.ManifestEntry) -> Path:
    """Where the copy ``entry`` names is kept once another copy of its run_id is taken."""
    return raw_dir / SET_ASIDE / entry.run_id / entry.sha256[:12] / entry.file


def retake_hint(run_id: str) -> str:
    """The command that takes a changed copy on purpose (docs/operations/storage.md)."""
    return f"to take the new copy on purpose and keep the first aside: regresslab retake {run_id} --by NAME"


def now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class _Pull:
    """One pull into ``raw_dir``: the manifest as it grows, and the summary of what happened.

    ``accept``: run_id -> why a changed copy of it is taken on purpose (``regresslab retake``)."""

    def __init__(self, raw_dir: Path, max_archive_bytes: int, accept: dict[str, str] | None = None):
        self.raw_dir, self.max_bytes = raw_dir, max_archive_bytes
        self.accept = dict(accept or {})
        self.manifest_path = raw_dir / config.MANIFEST.name
        manifest.repair_torn_tail(self.manifest_path)
        _clean_stale_staging(raw_dir)
        self.manifest = manifest.read_manifest(self.manifest_path)
        self.summary: manifest.PullSummary = {"new": [], "known": [], "refused": [], "recovered": [],
                                              "missing_sources": [], "waiting": [], "retaken": [], "listed_known": 0,
                                              "bytes_read": 0}

    def refuse(self, run_id: str, reason: str, *, loud: bool = True) -> None:
        reason = mask_urls(reason)
        self.summary["refused"].append({"run_id": run_id, "reason": reason})
        if loud:
            log.error("refused %s: %s", run_id, reason)

    def wait(self, run_id: str, why: str = STILL_WRITTEN) -> None:
        """An archive not complete yet: left at the source for a later night, said in the summary."""
        self.summary["waiting"].append({"run_id": run_id, "reason": why})
        log.warning("%s: %s", run_id, why)

    def known(self, run_id: str, name: str, listed_size: int = 0, marker: str = "") -> bool:
        """Whether the listing alone accounts for this archive: name, size and change marker as the
        manifest holds them."""
        entry = self.manifest.get(run_id)
        return bool(marker) and entry is not None and entry.marker == marker and entry.file == name \
            and entry.size == listed_size

    def to_read(self, run_id: str, path: str, name: str, listed_size: int = 0, marker: str = "") -> bool:
        """Whether :meth:`take` will read this archive: a valid run_id, one archive of it at the
        source, and not :meth:`known`."""
        return bool(archive.RUN_ID_RE.match(run_id)) and bool(path) \
            and not self.known(run_id, name, listed_size, marker)

    def fetch(self, location: str, path: str, marker: str = "") -> tuple[str, int, Path] | Exception:
        """One archive copied to a staging name while hashed (thread-safe: its own temporary
        name); (sha256, size, staged path), or the reason it could not be."""
        try:
            return _hash_and_stage(location, path, self.raw_dir, self.max_bytes, directory=marker.startswith("dir:"))
        except (archive.ArchiveError, OSError) as exc:
            return exc

    def take(self, location: str, run_id: str, path: str, name: str, listed_size: int = 0,
             marker: str = "", fetched=None) -> None:
        """Copy one archive found at ``location`` unless it is known, changed or refused.  Known
        by the listing alone (name, size and change marker as the manifest holds them): not read.
        ``fetched``: what :meth:`fetch` gave for it already (read concurrently), else it is read now."""
        if not archive.RUN_ID_RE.match(run_id):
            return self.refuse(run_id, "invalid run_id in file name", loud=False)
        if not path:
            return self.refuse(run_id, f"two archives for one run_id at {location}: {name}; which one is the run?")
        if self.known(run_id, name, listed_size, marker):
            self.summary["known"].append(run_id)
            self.summary["listed_known"] += 1
            return
        got = self.fetch(location, path, marker) if fetched is None else fetched
        if isinstance(got, Exception):
            return self.refuse(run_id, str(got))
        digest, size, tmp = got
        self.summary["bytes_read"] += size
        try:
            self._commit(location, run_id, name, digest, size, tmp, marker)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp) if tmp.is_dir() else tmp.unlink()

    def _commit(self, location: str, run_id: str, name: str, digest: str, size: int, tmp: Path,
                marker: str = "") -> None:
        entry = self.manifest.get(run_id)
        verdict = manifest.archive_status(entry, digest)
        if verdict == "known":
            assert entry is not None
            self.summary["known"].append(run_id)
            if marker and (entry.marker != marker or entry.file != name or entry.size != size):
                # the same content under a new marker (touched, copied again): remembered, so the
                # next night knows it from the listing
                seen = manifest.ManifestEntry(**{**entry.__dict__, "marker": marker, "size": size})
                _append_manifest(seen, self.manifest_path)
                self.manifest[run_id] = seen
            return
        aside: tuple[manifest.SetAside, ...] = ()
        if verdict == "changed":
            assert entry is not None
            replaced = self._replace(entry, tmp, digest)
            if replaced is None:
                return
            aside = (*entry.set_aside, replaced)
        target = self.raw_dir / name
        if target.exists():
            # in data/raw but not in the manifest: a pull killed between the rename and the
            # manifest line.  The same content is taken back; another is refused (raw data
            # is immutable), and the file is left untouched either way.
            if archive.sha256_file(target) != digest:
                self.refuse(run_id, f"{name} already in data/raw with other content, not in the manifest; "
                                    "left untouched", loud=False)
                return
            log.warning("taking back %s: in data/raw but not in the manifest (an interrupted pull)", name)
            self.summary["recovered"].append(run_id)
        else:
            tmp.rename(target)
        new = manifest.ManifestEntry(run_id=run_id, file=name, sha256=digest, size=size, first_seen=now_utc(),
                                     source=mask_url(location), marker=marker, set_aside=aside)
        _append_manifest(new, self.manifest_path)
        self.manifest[run_id] = new
        self.summary["new"].append(run_id)
        if aside:
            self.summary["retaken"].append({"run_id": run_id, "how": aside[-1]["how"], "reason": aside[-1]["reason"]})

    def _replace(self, entry: manifest.ManifestEntry, tmp: Path, digest: str) -> manifest.SetAside | None:
        """A new copy under a known run_id: the earlier copy set aside (the record of it) when it was
        unreadable and the new one reads, or when the new one is accepted on purpose; else refused
        (raw data is immutable) with what to do, and None."""
        run_id = entry.run_id
        change = f"content changed under existing run_id (was sha256 {entry.sha256[:12]}, now {digest[:12]})"
        old = self._earlier_copy(entry)
        if run_id in self.accept:
            how, reason = "accepted", self.accept[run_id]
        else:
            unreadable = archive.unreadable_reason(old) if old is not None else None
            if unreadable is None:
                self.refuse(run_id, f"{change}; raw data is immutable, the new copy is not taken; "
                                    + retake_hint(run_id))
                return None
            fresh = archive.unreadable_reason(tmp)
            if fresh is not None:
                self.refuse(run_id, f"{change}; the first copy was unreadable ({unreadable}) and the new one "
                                    f"is too ({fresh}): waiting for a readable copy")
                return None
            how, reason = "unreadable", f"the first copy was unreadable: {unreadable}"
        aside = set_aside_path(self.raw_dir, entry)
        if old is not None and old != aside:
            aside.parent.mkdir(parents=True, exist_ok=True)
            old.rename(aside)                        # the same bytes, kept: nothing in data/raw is overwritten
        log.warning("%s: a new copy taken (%s); the earlier one kept at %s", run_id, reason,
                    aside.relative_to(self.raw_dir))
        return manifest.SetAside(file=aside.relative_to(self.raw_dir).as_posix(), sha256=entry.sha256,
                                 size=entry.size, how=how, reason=reason, at=now_utc())

    def _earlier_copy(self, entry: manifest.ManifestEntry) -> Path | None:
        """Where the copy the manifest names lies: set aside already (a take interrupted after the
        move), else in ``data/raw``; None when neither holds it."""
        for path in (set_aside_path(self.raw_dir, entry), self.raw_dir / entry.file):
            if path.exists():
                return path
        return None


FETCHES = 8        # archives read from a source at once: a store's latency, not its bandwidth, bounds one


def source_state(location: str, listed: dict[str, tuple], run_ids: set[str]) -> dict[str, tuple[int, str]]:
    """(size, change marker) of each of ``run_ids`` as the source shows it now: a local archive's
    ``stat``; a remote one's listing, asked again per object where the listing names neither
    (an http index page: a ``HEAD`` gives its length, ETag or Last-Modified)."""
    fs, _ = _open_source(location)
    out: dict[str, tuple[int, str]] = {}
    for run_id in run_ids:
        path, _name, size, marker = listed[run_id]
        try:
            if fs is None:
                out[run_id] = local_marker(Path(path))
            elif not marker.startswith("dir:") and (not size or not marker):
                info = fs.info(path)
                out[run_id] = (int(info.get("size") or 0), remote_marker(info))
            else:
                out[run_id] = (size, marker)
        except (OSError, ValueError):
            out[run_id] = (-1, "gone")
    return out


class Settle:
    """Which archives of a listing are complete: those with a ``<run_id>.done`` marker, those on a
    store whose writes are atomic, and the others once their size and change marker held over
    ``settle_s`` seconds measured within the night (listed, then looked at again).  With
    ``require_done``, an archive without its marker waits whatever its state."""

    def __init__(self, location: str, settle_s: float, require_done: bool):
        self.location, self.settle_s, self.require_done = location, settle_s, require_done
        self.atomic = location.split("://", 1)[0].lower() in ATOMIC_SCHEMES if "://" in location else False

    def incomplete(self, listed: dict[str, tuple], to_read: set[str], done: set[str], listed_at: float
                   ) -> tuple[dict[str, str], dict[str, tuple[int, str]]]:
        """The archives of ``to_read`` not complete yet (run_id -> why), and the state each of the
        others was seen settled in (checked again after its copy, :meth:`moved`)."""
        waiting = {r: f"no {r}{DONE_SUFFIX} beside it yet: taken on a later night"
                   for r in to_read if self.require_done and r not in done}
        settling = {r for r in to_read if r not in done and r not in waiting and not self.atomic}
        if not settling or self.settle_s <= 0:
            return waiting, {}
        first = source_state(self.location, listed, settling)
        time.sleep(max(0.0, self.settle_s - (time.monotonic() - listed_at)))
        again = find_archives(self.location, with_markers=True)
        now = source_state(self.location, {**listed, **{r: again[r] for r in settling if r in again}},
                           {r for r in settling if r in again})
        moved = {r for r in settling if now.get(r) != first[r]}
        waiting.update((r, STILL_WRITTEN) for r in moved)
        return waiting, {r: first[r] for r in settling - moved}

    def moved(self, listed: dict[str, tuple], run_id: str, settled: dict[str, tuple[int, str]]) -> bool:
        """Whether an archive seen settled changed again while it was copied."""
        return run_id in settled and source_state(self.location, listed, {run_id})[run_id] != settled[run_id]


def pull(sources: list[str], raw_dir: Path, *, max_archive_bytes: int, fetches: int = FETCHES,
         settle_s: float = 0.0, require_done: bool = False, accept: dict[str, str] | None = None,
         only: set[str] | None = None) -> manifest.PullSummary:
    """Copy new archives from every source into ``raw_dir``; return a summary.

    An archive is taken once it is complete (:class:`Settle`); one still being written is left
    for a later night and said in the summary's ``waiting``.  The archives a source's listing does
    not already account for are read ``fetches`` at a time (each to a staging name of its own,
    hashed as it arrives: an object store answers each request after its own latency), and taken in
    the listing's order (the manifest, the summary and every refusal as one reader would write
    them).  ``accept``: run_id -> why a changed copy is taken on purpose; ``only``: these run_ids
    alone (``regresslab retake``)."""
    from concurrent.futures import ThreadPoolExecutor

    raw_dir.mkdir(parents=True, exist_ok=True)
    run = _Pull(raw_dir, max_archive_bytes, accept)
    for location in sources:
        done: set[str] = set()
        listed_at = time.monotonic()
        try:
            candidates = find_archives(location, with_markers=True, done=done)
        except (FileNotFoundError, OSError) as exc:       # SourceUnavailable among them: the night goes on
            shown, reason = mask_url(location), mask_urls(str(exc))
            log.warning("source %s skipped: %s", shown, reason)
            run.summary["missing_sources"].append({"source": shown, "reason": reason})
            continue
        if only is not None:
            candidates = {r: c for r, c in candidates.items() if r in only}
        listed = sorted(candidates.items())
        to_read = {run_id for run_id, (path, name, size, marker) in listed if run.to_read(run_id, path, name, size, marker)}
        settle = Settle(location, settle_s, require_done)
        waiting, settled = settle.incomplete(candidates, to_read, done, listed_at)
        progress = Progress(log, f"pull {mask_url(location)}", len(candidates), what="archives checked", every=25)
        with ThreadPoolExecutor(max(1, fetches), thread_name_prefix="pull") as pool:
            reading = {run_id: pool.submit(run.fetch, location, path, marker)
                       for run_id, (path, name, size, marker) in listed if run_id in to_read and run_id not in waiting}
            try:
                for i, (run_id, (path, name, size, marker)) in enumerate(listed, 1):
                    fetched = reading[run_id].result() if run_id in reading else None
                    if run_id in waiting or (isinstance(fetched, tuple) and settle.moved(candidates, run_id, settled)):
                        run.wait(run_id, waiting.get(run_id, STILL_WRITTEN))
                    else:
                        run.take(location, run_id, path, name, size, marker, fetched=fetched)
                    progress.step(i, f"{len(run.summary['new'])} new")
            finally:                                   # a pull that stops leaves no staged copy behind
                for future in reading.values():
                    future.cancel()
                for future in reading.values():
                    got = None if future.cancelled() else future.result()
                    if isinstance(got, tuple) and got[2].exists():
                        shutil.rmtree(got[2]) if got[2].is_dir() else got[2].unlink()
    return run.summary
