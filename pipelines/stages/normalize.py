"""normalize: the load phase of each validated run as equal intervals of counter medians.

The method (Foo et al. 2015 phase 1, seed 003; Nguyen 2017 §5.2, seed 004) is
:mod:`pipelines.preparation.intervals`.  This stage normalises every validated run whose
stored result is not current and writes ``data/interim/normalized/<run_id>.parquet`` with
its ``.json`` (interval, load fits, cache key), and the index of normalised runs.
"""
from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import pandas as pd

from pipelines import config
from pipelines.preparation.intervals import normalize_run
from pipelines.progress import Progress
from pipelines.storage import archive, locks

log = logging.getLogger("regresslab.normalize")


CODE_VERSION = 2


def run_key(validation_key: str, params: dict[str, Any]) -> str:
    blob = json.dumps({"v": validation_key, "p": params, "code": CODE_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def load_valid_run(run_id: str) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """A validated run's host frames and metadata (only this stage reads them)."""
    run_dir = config.valid_dir(run_id)
    meta = archive.read_json(run_dir / "meta.json")
    frames = {h: pd.read_parquet(run_dir / f"{h}.parquet") for h in meta["_hosts"]}
    return frames, meta


def normalize_one(run_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """Normalise one validated run unless its cached result is current; return its index row."""
    key = expected_key(run_id, params)
    if is_current(run_id, key):
        return archive.read_json(config.info_path(run_id))
    frames, meta = load_valid_run(run_id)
    frame, info = normalize_run(frames, meta, interval_s=float(params["interval_s"]),
                                min_intervals=int(params["min_intervals"]), load_scaling=bool(params["load_scaling"]),
                                min_load_correlation=float(params["min_load_correlation"]))
    info.update({"key": key, "run_id": run_id, "system": meta["system"]})
    archive.write_parquet_atomic(config.frame_path(run_id), frame)
    archive.write_json_atomic(config.info_path(run_id), info)
    return info


def expected_key(run_id: str, params: dict[str, Any]) -> str:
    """The cache key a normalised run must carry: its validation's key and the params."""
    return run_key(archive.read_json(config.valid_dir(run_id) / "meta.json")["_validation_key"], params)


def is_current(run_id: str, key: str) -> bool:
    """Whether the run's normalised frame exists and was made under ``key``."""
    info_file = config.info_path(run_id)
    return config.frame_path(run_id).exists() and info_file.exists() and archive.read_json(info_file).get("key") == key


def pending_runs() -> list[str]:
    """Validated runs not normalised yet (or normalised under other params): tonight's fan-out."""
    params = config.load_params("normalize")
    index = archive.read_valid_index()
    return [r for r in sorted(index, key=lambda r: (index[r]["started_at"], r))
            if not is_current(r, expected_key(r, params))]


@locks.holding("normalize", shared=True)
def run_one(run_id: str) -> dict[str, Any]:
    """Normalise one validated run (the per-run task of the nightly DAG)."""
    return normalize_one(run_id, config.load_params("normalize"))


@locks.holding("normalize")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = config.load_params("normalize")
    index = archive.read_valid_index()
    config.NORMALIZED.mkdir(parents=True, exist_ok=True)
    progress = Progress(log, "normalize", len(index), every=25)
    rows = {}
    for i, run_id in enumerate(sorted(index), 1):
        rows[run_id] = {k: v for k, v in normalize_one(run_id, params).items() if k != "counters"}
        progress.step(i)
    for stale in config.NORMALIZED.glob("*.parquet"):
        if stale.stem not in index:      # a run quarantined after a suite change
            stale.unlink()
            stale.with_suffix(".json").unlink(missing_ok=True)
    archive.write_json_atomic(config.NORMALIZED_INDEX, rows)
    print(f"[normalize] {len(rows)} runs normalised")


if __name__ == "__main__":
    main()

