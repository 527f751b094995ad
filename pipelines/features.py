"""features: violation ratios of (target, baseline) pairs, the training data of the cause classifiers.

Nguyen 2017 ch. 8 (seed 004; METHODS.md §D): every run is reduced to the lower and upper
violation ratio of each counter on the control charts of a baseline run (§3.2.2), one row
per (target, baseline) pair, labelled with the verified cause (``none`` for a passed run).

The baselines of a run are the passed runs of its history with the most similar
environment (``history.most_similar``), each charted alone as in the thesis; a run none of
them shares a lab with is first moved by its lab's level (``labs``), as in the nightly
charts.  A passed run is never its own baseline.  A counter absent from the target or the baseline has
NaN ratios: the classifiers impute them and see a missing-value indicator, so absence
is a feature, not a silent zero.  Columns are ``lower:<counter>`` and ``upper:<counter>``.
"""
from __future__ import annotations

import hashlib
import logging
from typing import Any

import pandas as pd

from pipelines import archive, config, control_charts, history, labs, locks, store
from pipelines.progress import Progress

log = logging.getLogger("regresslab.features")
KEY_COLUMNS = ["target", "baseline", "system", "cause"]


# --------------------------------------------------------------------------- pure core


def pair_row(ratios: pd.DataFrame) -> dict[str, float]:
    """One feature row from the violation ratios of a pair."""
    row = {f"lower:{c}": v for c, v in ratios["lower"].items()}
    row.update({f"upper:{c}": v for c, v in ratios["upper"].items()})
    return row


def pair_features(charter: control_charts.Charter, target: str, baselines: list[str],
                  shift: pd.Series | None = None) -> pd.DataFrame:
    """Feature rows of ``target`` (moved by ``-shift`` into the baselines' lab, ``labs``) against
    each of ``baselines`` (charted one at a time)."""
    rows = []
    for b in baselines:
        ratios, _, _ = charter([b], target, shift)
        rows.append({"target": target, "baseline": b, **pair_row(ratios)})
    return pd.DataFrame(rows)


def pair_baselines(run_id: str, passed: list[str], envs: dict[str, dict[str, Any]],
                   max_runs: int | None) -> list[str]:
    """The passed runs (never the run itself) whose environment is most like the run's, the
    newest ``max_runs`` of them (``passed`` is oldest first)."""
    others = [r for r in passed if r != run_id]
    return sorted(control_charts.chart_baseline({r: envs[r] for r in others}, envs[run_id], max_runs))


def feature_columns(frame: pd.DataFrame) -> list[str]:
    return sorted(c for c in frame.columns if c.startswith(("lower:", "upper:")))


def frame_digest(frame: pd.DataFrame) -> str:
    """A content hash of a feature table (stable across row order)."""
    ordered = frame.sort_values(["target", "baseline"]).reset_index(drop=True)
    ordered = ordered[KEY_COLUMNS + feature_columns(ordered)]
    return hashlib.sha256(pd.util.hash_pandas_object(ordered, index=True).to_numpy().tobytes()
                          + ",".join(ordered.columns).encode()).hexdigest()


# --------------------------------------------------------------------------- I/O shell


@locks.holding("features")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    cc_params = config.load_params("control_charts")
    hist = config.load_params("history")
    exclude = set(hist["exclude"])
    config.ensure_dirs(config.FEATURES)
    index = archive.read_valid_index()
    for system in history.systems(index):
        charter = control_charts.Charter(store.FrameStore.of_system(system), cc_params)
        passed = history.passed_runs(index, system, exclude=exclude)
        envs = {r: index[r].get("environment") or {} for r in index if index[r]["system"] == system}
        verified = history.verified_runs(index, system, exclude=exclude)
        progress = Progress(log, f"features {system}", len(verified), every=10)
        parts = []
        lab_runs = history.verdicts(index, system, exclude=exclude)
        for i, run_id in enumerate(verified, 1):
            pairs = pair_baselines(run_id, passed, envs, cc_params["max_baseline_runs"])
            lab = charter.lab(run_id, pairs, index, lab_runs, labs.lab_params(hist))
            part = pair_features(charter, run_id, pairs, lab["shift"])
            part["system"] = system
            part["cause"] = "none" if index[run_id]["verdict"] == "pass" else (index[run_id].get("cause") or "unknown")
            parts.append(part)
            progress.step(i)
        frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=KEY_COLUMNS)
        frame = frame[KEY_COLUMNS + feature_columns(frame)]
        archive.write_parquet_atomic(config.features_path(system), frame)
        print(f"[features] {system}: {len(frame)} pairs of {len(verified)} runs, "
              f"{len(feature_columns(frame))} features, causes {sorted(frame['cause'].unique())}")


if __name__ == "__main__":
    main()
