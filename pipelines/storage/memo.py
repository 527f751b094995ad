"""memo: a stage's result is reused when nothing it was computed from has changed.

The night's targets stay targets until an analyst verifies them, so each night analyses
again the targets of the nights before, against the same history, and recalibrates every
system on the same normal runs.  ``dvc repro`` re-runs a whole stage when any of its inputs
changes (one new archive is enough), and the Airflow night has no such check at all.  So the
stages that judge runs keep, in each result file, the **input key** it was computed under
(``input_key``), and skip the work when the key they would compute now is the same:

* the runs it read, each by its normalised frame's own key (``stages.normalize.run_key``: the
  archive's bytes, the validation and normalisation params, the normaliser's version) and by
  what the index says of it (verdict, environment, version, baseline: a triage moves a run);
* the params blocks it reads, and any per-system file it read (bin edges, a calibration);
* the code: the source of the stage's module and of every project module it imports,
  found with ``ast`` as ``tests/unit/test_dvc_graph.py`` finds them, so an edit to the
  stage or to what it uses is a change; nothing else is.

A result written under another key is computed again and replaced atomically, as before.
A run the key misses would be reused stale, so the key is what the stage reads, listed in the
stage next to where it reads it.  A JSON result carries its key as a field, a Parquet table
in its schema's metadata, a report page in a ``<meta>`` element (its verdict file is the
contract's and carries nothing more; the page is written after it, so a page under the key
vouches for both): the result and its key go together in one atomic write.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from pipelines import codebase, config
from pipelines.storage import atomic
from pipelines.storage.run_records import ValidIndex

KEY_FIELD = "input_key"
D = TypeVar("D", bound=Mapping[str, Any])      # a stored result's record (a TypedDict of stage_files)


def file_digest(path: Path) -> str | None:
    """The hash of a file's bytes (None when it does not exist)."""
    path = Path(path)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


INDEX_FIELDS = ("system", "verdict", "cause", "environment", "version", "baseline", "started_at")


_FRAME_KEYS: dict[tuple[str, int, int, int], str | None] = {}


def frame_key(run_id: str) -> str | None:
    """The key its normalised frame was made under (``stages.normalize.run_key``); None before it is.
    Read once per version of the info file in a process: every target's key lists the same
    history runs, and an info file holds every counter's load fit."""
    info = config.info_path(run_id)
    try:
        stat = info.stat()
    except FileNotFoundError:
        return None
    # normalize replaces the file by a rename: a new version is a new inode, whatever its time and size
    version = (str(info), stat.st_ino, stat.st_mtime_ns, stat.st_size)
    if version not in _FRAME_KEYS:
        _FRAME_KEYS[version] = atomic.read_json(info).get("key")
    return _FRAME_KEYS[version]


def run_identity(run_id: str, index: ValidIndex) -> list[Any]:
    """What a stage reads of one run: its normalised frame's key and the index's row of it."""
    row = index.get(run_id) or {}
    return [run_id, frame_key(run_id), {k: row.get(k) for k in INDEX_FIELDS}]


def input_key(module: str, index: ValidIndex, runs: dict[str, list[str]], **parts: Any) -> str:
    """The key of one result of stage ``module``: the runs it read (``runs``: role -> run ids, in
    the order the stage uses them), any other input ``parts`` (params, digests of files), and
    the code."""
    blob = {"code": codebase.code_digest(codebase.stage_module(module)),
            "runs": {role: [run_identity(r, index) for r in ids] for role, ids in sorted(runs.items())},
            "parts": parts}
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()


def reuse(path: Path, key: str) -> dict[str, Any] | None:
    """The result at ``path`` when it was written under ``key``; else None (compute it again).
    JSON at rest: a caller that knows the record it wrote there says so (:func:`reuse_as`)."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        doc = atomic.read_json(path)
    except Exception:               # noqa: BLE001 -- a torn or foreign file is recomputed, never trusted
        return None
    return doc if isinstance(doc, dict) and doc.get(KEY_FIELD) == key else None


def reuse_as(path: Path, key: str, kind: type[D]) -> D | None:
    """:func:`reuse`, typed as the record ``kind`` this code writes under that key (a key holds
    the code's digest: a file written under it was written as that record)."""
    return cast("D | None", reuse(path, key))


def write(path: Path, doc: D, key: str) -> D:
    """Write ``doc`` with its key, atomically; the document as written."""
    written = {**doc, KEY_FIELD: key}
    atomic.write_json_atomic(path, written)
    return cast(D, written)


PARQUET_KEY = b"regresslab_input_key"


def reuse_parquet(path: Path, key: str) -> bool:
    """Whether the Parquet table at ``path`` was written under ``key`` (only its schema is read)."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.exists():
        return False
    try:
        metadata = pq.read_schema(path).metadata or {}
    except Exception:               # noqa: BLE001 -- a torn or foreign file is recomputed, never trusted
        return False
    return metadata.get(PARQUET_KEY) == key.encode()


def write_parquet(path: Path, frame, key: str) -> None:
    """Write a DataFrame as Parquet with its key in the schema's metadata, atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=True)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), PARQUET_KEY: key.encode()})
    with atomic.atomic_path(path) as tmp:
        pq.write_table(table, tmp)


HTML_KEY = re.compile(r'<meta name="regresslab-input-key" content="([0-9a-f]{64})">')


def stamp_html(html: str, key: str) -> str:
    """A page with its key as the first element of its ``<head>``."""
    if "<head>" not in html:
        raise ValueError("the page has no <head> to hold its input key")
    return html.replace("<head>", f'<head><meta name="regresslab-input-key" content="{key}">', 1)


def reuse_html(path: Path, key: str) -> bool:
    """Whether the page at ``path`` was written under ``key`` (its first 4 KB are read)."""
    path = Path(path)
    if not path.exists():
        return False
    with open(path, "rb") as fh:
        found = HTML_KEY.search(fh.read(4096).decode("utf-8", errors="replace"))
    return found is not None and found.group(1) == key
