"""features: violation-ratio and excursion rows of the labelled history.

The features (Nguyen 2017 ch. 8, seed 004) are :mod:`pipelines.detectors.cause_features`;
this stage writes ``data/processed/features/<system>.parquet``.
"""
from __future__ import annotations

import logging

import pandas as pd

from pipelines import config, parallel
from pipelines.calibration import history, labs
from pipelines.detectors import charts
from pipelines.detectors.cause_features import KEY_COLUMNS, feature_columns, pair_baselines, pair_features
from pipelines.progress import Progress
from pipelines.storage import atomic, locks, manifest, memo, store

log = logging.getLogger("regresslab.features")


@locks.holding("features")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    cc_params = config.load_params("control_charts")
    hist = config.load_params("history")
    exclude = set(hist["exclude"])
    config.ensure_dirs(config.FEATURES)
    index = manifest.read_valid_index()
    atomic.prune_outputs(config.FEATURES, history.systems(index), suffix=".parquet")
    for system in history.systems(index):
        charter = charts.Charter(store.FrameStore.of_system(system), cc_params)
        passed = history.passed_runs(index, system, exclude=exclude)
        envs = {r: index[r].get("environment") or {} for r in index if index[r]["system"] == system}
        verified = history.verified_runs(index, system, exclude=exclude)
        path = config.features_path(system)
        key = memo.input_key("features", index, {"passed": passed, "verified": verified}, system=system,
                             control_charts=cc_params, history=hist, reference=charter.frames.reference)
        if memo.reuse_parquet(path, key):     # the same verified runs, params and code: the same pairs
            print(f"[features] {system}: {len(verified)} verified runs unchanged, table kept")
            continue
        progress = Progress(log, f"features {system}", len(verified), every=10)
        lab_runs = history.verdicts(index, system, exclude=exclude)

        def features_of(run_id: str) -> pd.DataFrame:
            pairs = pair_baselines(run_id, passed, envs, cc_params["max_baseline_runs"])
            lab = charter.lab(run_id, pairs, index, lab_runs, labs.lab_params(hist))
            part = pair_features(charter, run_id, pairs, lab["shift"])
            if len(part):
                part["system"] = system
                part["cause"] = "none" if index[run_id]["verdict"] == "pass" else \
                    (index[run_id].get("cause") or "unknown")
            return part
        parts = [part for part in parallel.map_ordered(features_of, verified, progress=progress.each())
                 if len(part)]                # a run with no passed run to pair it with gives no row
        frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=KEY_COLUMNS)
        frame = frame[KEY_COLUMNS + feature_columns(frame)]
        memo.write_parquet(path, frame, key)
        print(f"[features] {system}: {len(frame)} pairs of {len(verified)} runs, "
              f"{len(feature_columns(frame))} features, causes {sorted(frame['cause'].unique())}")


if __name__ == "__main__":
    config.install_error_hook()
    main()

