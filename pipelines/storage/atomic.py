"""Outputs written atomically: to a temporary file in the destination directory, moved into place
with ``os.replace``, so a killed run never leaves a half-written file (and a temporary left by a
killed process is swept); JSON without NaN, Parquet, reproducible skops and tar.gz bytes.
"""
from __future__ import annotations

import io
import json
import os
import re
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

_UMASK = os.umask(0o022)
os.umask(_UMASK)


TMP_SUFFIX = ".tmp"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs on this machine (a temporary's writer, a stranded copy's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_temporaries(*roots: Path) -> list[Path]:
    """Delete the temporaries :func:`atomic_path` left behind when its process was killed
    (``os._exit``, SIGKILL, power loss: no ``finally`` ran).  Their names carry the writer's pid
    (``.<name>.<pid>.<random>.tmp``); one whose process is gone is stale.  Returns what it
    removed.  Called when a stage takes the data folder exclusively, so a killed night resumes
    with no temporary file left."""
    removed = []
    for root in roots:
        if not Path(root).is_dir():
            continue
        for tmp in Path(root).rglob(f".*{TMP_SUFFIX}"):
            parts = tmp.name[:-len(TMP_SUFFIX)].split(".")
            pid = parts[-2] if len(parts) >= 4 else ""
            if pid.isdigit() and not pid_alive(int(pid)) and tmp.is_file() and not tmp.is_symlink():
                tmp.unlink(missing_ok=True)
                removed.append(tmp)
    return removed


def prune_outputs(directory: str | Path, keep: set[str] | list[str], suffix: str = ".json") -> list[Path]:
    """Delete the files ``<stem><suffix>`` of ``directory`` whose stem is not in ``keep``: the
    results of runs that are no longer targets, or of systems that left the index.  A stage's
    outputs are DVC ``persist`` outputs (DVC deletes a non-persistent output
    before the stage's command runs, outside the data lock, under an Airflow night's per-run
    tasks that are reading it), so the stage itself, holding the data folder exclusively, keeps
    them what a run from scratch would leave.  Only plain files; returns what it removed."""
    directory, keep = Path(directory), set(keep)
    removed = []
    if directory.is_dir():
        for path in sorted(directory.glob(f"*{suffix}")):
            if path.name[:-len(suffix)] not in keep and path.is_file() and not path.is_symlink():
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; move it into place only on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=TMP_SUFFIX, dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.exists():          # mkstemp makes 0600; give the file the usual mode
            os.chmod(tmp_path, 0o666 & ~_UMASK)
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def reproducible_skops(data: bytes) -> bytes:
    """The same ``skops`` file, written so that one model gives one byte string: members dated
    1980-01-01 (skops stamps the time of writing) object ids and array files renumbered in
    the order ``schema.json`` first names them (skops numbers them by ``id()``, an address).  A model trained
    twice on the same data is then the same bytes, so a killed training resumes identically and
    DVC sees no change."""
    with zipfile.ZipFile(io.BytesIO(data)) as src:
        schema = src.read("schema.json").decode("utf-8")
        pattern = re.compile(r'("__id__": )([0-9]+)|"([0-9]+)\.npy"')
        ids: dict[str, str] = {}
        for m in pattern.finditer(schema):
            ids.setdefault(m.group(2) or m.group(3), str(len(ids) + 1))
        schema = pattern.sub(lambda m: m.group(1) + ids[m.group(2)] if m.group(2) else f'"{ids[m.group(3)]}.npy"',
                             schema)
        names = {f"{old}.npy": f"{new}.npy" for old, new in ids.items()}
        members = {"schema.json": (schema.encode("utf-8"), src.getinfo("schema.json"))}
        for info in src.infolist():
            if info.filename != "schema.json":
                members[names.get(info.filename, info.filename)] = (src.read(info), info)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for name in ["schema.json", *sorted(n for n in members if n != "schema.json")]:
            payload, info = members[name]
            fixed = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            fixed.compress_type, fixed.external_attr = info.compress_type, info.external_attr
            dst.writestr(fixed, payload)
    return out.getvalue()


def write_text_atomic(path: str | Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write strict JSON (RFC 8259): a non-finite number (NaN, ±inf) becomes null, so every output
    parses with a strict parser (``allow_nan=False`` would otherwise refuse it)."""
    write_text_atomic(path, json.dumps(finite(obj), indent=2, sort_keys=False, default=_json_default,
                                       allow_nan=False) + "\n")


def finite(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float (numpy's too) replaced by None."""
    import math

    import numpy as np

    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.ndarray):
        return finite(obj.tolist())
    return obj


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def write_parquet_atomic(path: str | Path, frame: pd.DataFrame) -> None:
    """``frame`` to ``path`` as Parquet, atomically.  Float columns are written without a dictionary:
    counters' values seldom repeat, so a dictionary costs time and bytes for nothing (a host frame
    of 500 counters x 1,920 intervals: 81 ms and 6.4 MB with one, 55 ms and 5.2 MB without); other
    columns (names, items, labels) keep theirs."""
    import pandas.api.types as ptypes

    keep = [str(c) for c in frame.columns if not ptypes.is_float_dtype(frame[c])]
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=True, use_dictionary=keep)


def read_parquet(path: str | Path, columns: list[str] | None = None) -> pd.DataFrame:
    """A frame :func:`write_parquet_atomic` wrote, as ``pd.read_parquet`` reads it, by pyarrow's
    reader of one file: ``pd.read_parquet`` starts a dataset discovery for every file, a fifth of
    the time of reading a normalised run (docs/operations/performance.md).  With ``columns``,
    those of them the frame has, in that order, and nothing else read from the file."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as handle:
        if columns is not None:
            names = set(handle.schema_arrow.names)
            columns = [c for c in dict.fromkeys(columns) if c in names]
        return handle.read(columns=columns, use_pandas_metadata=True).to_pandas()


def write_keyed_npz(path: str | Path, key: str, **arrays: np.ndarray) -> None:
    """``arrays`` written atomically with numpy alone (compressed, no pickle) under ``key``, the
    input key of what they were computed from: :func:`read_keyed_npz` gives them back under it."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        savez: Any = np.savez_compressed            # numpy's stub types **kwds as its allow_pickle flag
        savez(fh, key=np.array(key), **arrays)


def read_keyed_npz(path: str | Path, key: str, names: tuple[str, ...]) -> dict[str, np.ndarray] | None:
    """The arrays ``names`` :func:`write_keyed_npz` wrote under ``key``; None when the file is
    missing, was written under another key, lacks one of them, or is torn or foreign (what it
    held is computed again, never trusted; read with ``allow_pickle=False``)."""
    if not Path(path).exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            return {name: z[name] for name in names} if str(z["key"]) == key else None
    except Exception:           # noqa: BLE001 -- a torn or foreign file is recomputed, never trusted
        return None


def read_json(path: str | Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def write_tar_gz_atomic(path: str | Path, members: dict[str, bytes], mtime: float = 0.0) -> None:
    """Write a deterministic tar.gz (fixed mtime, sorted members, no owner names)."""
    import gzip

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size = len(members[name])
            info.mtime = int(mtime)
            info.mode = 0o644
            tf.addfile(info, io.BytesIO(members[name]))
    raw = buf.getvalue()
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=int(mtime), compresslevel=6) as gz:
        gz.write(raw)
    write_bytes_atomic(path, out.getvalue())
