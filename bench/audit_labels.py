"""Where a labelled set's truth and its counters disagree: levels no normal run of the history reached.

    python -m bench.audit_labels build/smd ../shared/data/smd/target_labels.json
    python -m bench.audit_labels . data/example/target_labels.json      # after dvc repro

The detectors are judged by run accuracy against a set's labels.  A label says what the
people who made the set called a fault; a regression detector reads counters.  Where the two
disagree, no sound detector can follow the label, and the set's goal should be read with that
in mind.  For every labelled target this prints the counters whose **median over the run lies
outside every interval of every normal history run of the same lab** (below the smallest value
or above the largest the history ever recorded, after the pipeline's normalisation and load
scaling), with how far out, in widths of that range (``(median - max) / (max - min)`` above it;
a memory counter 1 % above its largest value is ~0.01 out, a counter at a tenth of its smallest
value is ~0.9 out), then, per label, how many targets have such a counter at least 0, 0.1 and
0.5 ranges out.

A normal-labelled target with such a counter has a whole-run level the history never saw
(a level shift, not a spike: the median of the run); a fault-labelled target without one has
nothing a level-based regression detector could see, unless in a part of the run.  It reads the
tree's normalised runs (``make real-<set>`` or ``dvc repro``) and judges nothing: a place to
look, not a verdict.  Targets in a lab no normal history run used are listed as such.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


TOP = 5                     # counters printed per target
LEVELS = (0.0, 0.1, 0.5)    # the summary: targets with a counter more than this many ranges out


def beyond_history(run: pd.DataFrame, history: list[pd.DataFrame]) -> dict[str, float]:
    """Counter -> how far the run's median lies outside every history interval, in widths of the
    history's range, for the counters where it does: ``(median - max) / (max - min)`` above the
    range, ``(min - median) / (max - min)`` below it (``inf`` when the history was constant).
    Counters the history never recorded are not judged.  Furthest first."""
    import numpy as np
    import pandas as pd

    stacked = pd.concat(history, ignore_index=True)
    low, high = stacked.min(skipna=True), stacked.max(skipna=True)
    out: dict[str, float] = {}
    for counter, median in run.median(skipna=True).items():
        if counter not in stacked or not np.isfinite(median) or not np.isfinite(high[counter]):
            continue
        lo, hi = float(low[counter]), float(high[counter])
        outside = median - hi if median > hi else lo - median if median < lo else 0.0
        if outside > 0:
            out[counter] = outside / (hi - lo) if hi > lo else float("inf")
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree", help="a tree holding this code's normalised runs (build/<set>, or . after dvc repro)")
    ap.add_argument("labels", help="the set's target_labels.json")
    args = ap.parse_args()
    os.environ["REGRESSLAB_ROOT"] = str(Path(args.tree).resolve())
    from pipelines import config
    from pipelines.systems import history, labs
    from pipelines.storage import manifest, store

    labels = json.loads(Path(args.labels).read_text())
    index = manifest.read_valid_index()
    exclude = set(config.load_params("history")["exclude"])
    furthest: dict[str, list[float]] = {}     # label -> each target's largest distance out (-1: none)
    frames: dict[str, store.FrameStore] = {}
    for run_id in sorted(labels):
        if run_id not in index:
            print(f"{run_id}: not in the tree (quarantined or not pulled)")
            continue
        row, truth = index[run_id], labels[run_id]["verdict"]
        system = row["system"]
        if system not in frames:
            frames[system] = store.FrameStore.of_system(system)
        lab = labs.lab_key(row.get("environment"))
        normal = [r for r in history.passed_runs(index, system, exclude=exclude)
                  if labs.lab_key(index[r].get("environment")) == lab and r != run_id]
        if not normal:
            print(f"{run_id} ({truth}): a lab no normal history run used")
            continue
        out = beyond_history(frames[system][run_id], [frames[system][r] for r in normal])
        expected = set(labels[run_id].get("regressed_counters") or [])
        shown = ", ".join(f"{c} {f:.3g}{' (labelled)' if c in expected else ''}"
                          for c, f in list(out.items())[:TOP])
        print(f"{run_id} ({truth}): {len(out)} counter(s) beyond {len(normal)} normal runs (ranges out)"
              + (f": {shown}" if out else ""))
        furthest.setdefault(truth, []).append(max(out.values(), default=-1.0))
    for truth, largest in sorted(furthest.items()):
        print(f"{truth}-labelled targets (same lab) with a counter's median beyond every normal history interval: "
              + ", ".join(f"{sum(f > level for f in largest)} of {len(largest)} by more than {level:g} range(s)"
                          for level in LEVELS))


if __name__ == "__main__":
    main()
