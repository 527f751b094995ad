"""features: violation-ratio and excursion rows of the labelled history.

The features (Nguyen 2017 ch. 8, seed 004) are :mod:`pipelines.detectors.causes.features`;
this stage writes ``data/processed/features/<system>.parquet``.  The table is kept whole while the
verified runs, params and code are the same; when they change, the rows of the pairs whose inputs
did not (the two runs, the lab shift, the charts' params, the reference load, the code: each row's
``pair_key``) are taken from the last table, the others charted.
"""
from __future__ import annotations

import logging

import pandas as pd

from pipelines import config, parallel
from pipelines.systems import history, labs
from pipelines.detectors.charts import control_charts as charts
from pipelines.detectors.causes.features import (KEY_COLUMNS, feature_columns, pair_baselines, pair_rows, rows_by_key,
                                                rows_frame, shift_digest, with_pair_keys)
from pipelines.progress import Progress
from pipelines.storage import atomic, locks, manifest, memo, store

log = logging.getLogger("regresslab.features")


@locks.holding("features")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    cc_params = charts.ControlChartParams.load()
    hist = history.HistoryParams.load()
    config.ensure_dirs(config.FEATURES)
    index = manifest.read_valid_index()
    atomic.prune_outputs(config.FEATURES, history.systems(index), suffix=".parquet")
    for system in history.systems(index):
        charter = charts.Charter(store.FrameStore.of_system(system), cc_params.chart)
        passed = history.passed_runs(index, system, exclude=set(hist.exclude))
        envs = {r: index[r].get("environment") or {} for r in index if index[r]["system"] == system}
        verified = hist.verified(index, system)
        path = config.features_path(system)
        key = memo.input_key("features", index, {"passed": passed, "verified": verified}, system=system,
                             control_charts=cc_params.block, history=hist.block, reference=charter.frames.reference)
        if memo.reuse_parquet(path, key):     # the same verified runs, params and code: the same pairs
            print(f"[features] {system}: {len(verified)} verified runs unchanged, table kept")
            continue
        progress = Progress(log, f"features {system}", len(verified), every=10)
        lab_runs = hist.verdicts(index, system)
        known = rows_by_key(pd.read_parquet(path) if path.exists() else None)   # pairs computed before

        def features_of(run_id: str) -> tuple[pd.DataFrame, list[str], list[list[str]]]:
            pairs = pair_baselines(run_id, passed, envs, cc_params.max_baseline_runs)
            lab = charter.lab(run_id, pairs, index, lab_runs, labs.lab_params(hist))
            keys = [memo.input_key("features", index, {"pair": [run_id, b]}, system=system, control_charts=cc_params.block,
                                   shift=shift_digest(lab["shift"]), reference=charter.frames.reference) for b in pairs]
            rows = pair_rows(charter, run_id, pairs, lab["shift"],
                             {b: known[k] for b, k in zip(pairs, keys) if k in known})
            part = rows_frame(run_id, pairs, rows)
            if len(part):
                part["system"] = system
                part["cause"] = "none" if index[run_id]["verdict"] == "pass" else \
                    (index[run_id].get("cause") or "unknown")
            columns = set(feature_columns(part))
            return part, keys, [sorted(columns - set(row)) for row in rows]
        parts = [out for out in parallel.map_ordered(features_of, verified, progress=progress.each())
                 if len(out[0])]              # a run with no passed run to pair it with gives no row
        frame = pd.concat([p for p, _, _ in parts], ignore_index=True) if parts else pd.DataFrame(columns=KEY_COLUMNS)
        frame = with_pair_keys(frame[KEY_COLUMNS + feature_columns(frame)], parts)
        memo.write_parquet(path, frame, key)
        reused = sum(k in known for _, keys, _ in parts for k in keys)
        print(f"[features] {system}: {len(frame)} pairs of {len(verified)} runs ({reused} kept from the last table), "
              f"{len(feature_columns(frame))} features, causes {sorted(frame['cause'].unique())}")


if __name__ == "__main__":
    config.install_error_hook()
    main()

