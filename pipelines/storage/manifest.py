"""The ledgers of ``data/``: the raw archives' manifest (``data/raw/manifest.jsonl``, append-only),
any append-only JSON-lines log (the triage log too), and ``validate``'s index of valid runs.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, TypedDict

from pipelines import config
from pipelines.storage.atomic import read_json
from pipelines.storage.run_records import ValidIndex

log = logging.getLogger("regresslab.archive")


@dataclass(frozen=True)
class ManifestEntry:
    """One line of ``data/raw/manifest.jsonl``: an archive pulled once, never rewritten.

    ``marker`` is the source's own change marker when it was last seen (a local file's size and
    mtime, a store's ETag, version id or modification time): an archive listed again with the same
    name, size and marker is known without being read.  A later line for the same run_id (the same
    content seen under a new marker, or a new copy taken in place of one set aside) replaces the
    earlier one when the manifest is read.

    ``set_aside``: the earlier copies of this run_id that were set aside, oldest first (an
    unreadable copy, or one replaced on purpose), each a :class:`SetAside`'s fields."""

    run_id: str
    file: str
    sha256: str
    size: int
    first_seen: str
    source: str
    marker: str = ""
    set_aside: tuple["SetAside", ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The manifest line (``set_aside`` only when there is one)."""
        out = {k: v for k, v in self.__dict__.items() if k != "set_aside"}
        if self.set_aside:
            out["set_aside"] = [dict(s) for s in self.set_aside]
        return out


class PullSummary(TypedDict):
    """What one pull did (``data/interim/pull_summary.json``): the run_ids taken (``new``), known
    already (``known``; ``listed_known`` of them from the listing alone), refused with why, taken
    back after an interrupted pull (``recovered``), taken again in place of an unreadable copy
    (``retaken``: how and why), still being written (``waiting``), the sources that could not be
    listed (``missing_sources``: source and why) and the bytes read."""

    new: list[str]
    known: list[str]
    refused: list[dict[str, str]]
    recovered: list[str]
    missing_sources: list[dict[str, str]]
    waiting: list[dict[str, str]]
    retaken: list[dict[str, str]]
    listed_known: int
    bytes_read: int


class SetAside(TypedDict):
    """An earlier copy of a run_id kept aside in ``data/raw/set_aside/`` when a new one was taken:
    where it lies (relative to ``data/raw``), its hash and size, why it was set aside (``how``:
    ``unreadable`` or ``accepted``, and the ``reason`` in words) and when."""

    file: str
    sha256: str
    size: int
    how: str
    reason: str
    at: str


def read_manifest(path: Path | None = None) -> dict[str, ManifestEntry]:
    """The raw archives' manifest: run_id -> entry.

    A last line without its newline is the trace of a ``pull`` killed while appending: it is
    ignored here (``pull`` truncates it, :func:`manifest_torn_tail`, and takes the archive
    back from ``data/raw``).  Any other line that is not an entry is skipped with a warning,
    so one damaged line cannot stop every later night.
    """
    path = path or config.MANIFEST
    entries: dict[str, ManifestEntry] = {}
    if not path.exists():
        return entries
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        lines.pop()                      # torn last line (no newline): an interrupted append
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            row["set_aside"] = tuple(row.get("set_aside") or ())
            entries[row["run_id"]] = ManifestEntry(**row)
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("manifest line %d skipped: %s", number, exc)
    return entries


def manifest_torn_tail(path: Path) -> int:
    """Bytes after the manifest's last newline (a torn append); 0 when the file is whole."""
    if not path.exists():
        return 0
    data = path.read_bytes()
    return len(data) - (data.rfind(b"\n") + 1)


def append_json_line(path: Path, record: Mapping[str, Any]) -> None:
    """Append one JSON line to an append-only log (the pull manifest, the triage log): one write,
    flushed and synced. After an append killed midway the file ends inside a line; the record
    then starts on a line of its own (the torn bytes stay; readers skip them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torn = manifest_torn_tail(path) > 0
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(("\n" if torn else "") + json.dumps(record, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_valid_index(*, every: bool = False) -> ValidIndex:
    """run_id -> the validated run's metadata row (``validate``'s index, where every later stage
    starts), without the runs ``normalize`` could not normalise within its budget (``every``: with
    them, for ``normalize`` itself)."""
    index = read_json(config.VALID_INDEX)["valid"]
    if every:
        return index
    return {r: row for r, row in index.items() if not config.normalize_failed_path(r).exists()}


def archive_status(entry: ManifestEntry | None, sha256: str) -> str:
    """What to do with an archive found at the source: ``new``, ``known`` or ``changed``.

    ``changed`` (same run_id, other content) is refused: raw data is immutable.
    """
    if entry is None:
        return "new"
    return "known" if entry.sha256 == sha256 else "changed"


def repair_torn_tail(path: Path) -> int:
    """Cut a torn last line (an interrupted append) off the manifest; the bytes removed.

    The manifest is our own record, not raw data; the archive of the torn entry is in
    ``data/raw`` and is taken back by :func:`pull` (same content at the source)."""
    torn = manifest_torn_tail(path)
    if torn:
        with open(path, "r+b") as fh:
            fh.truncate(path.stat().st_size - torn)
            fh.flush()
            os.fsync(fh.fileno())
        log.warning("manifest: cut a torn last line of %d bytes (a pull was interrupted)", torn)
    return torn
