"""mine_rules: one association-rule model per prior passed run.

The mining (Foo et al. 2015 phase 2, seed 003) is :mod:`pipelines.detectors.rules.mining`;
this stage mines (or finds cached) the model of every training run of every system under
its bin edges, and drops the models of runs that left the history.
"""
from __future__ import annotations

import logging
from typing import Any

from pipelines import config, parallel
from pipelines.systems import history
from pipelines.detectors.rules.mining import MiningParams, mine_for_run, model_path
from pipelines.progress import Progress
from pipelines.storage import atomic, locks, manifest, store

log = logging.getLogger("regresslab.mine_rules")


def pending_models() -> list[str]:
    """The training runs (of every system's edges) whose model is not cached yet: tonight's fan-out."""
    params = MiningParams.load()
    out = []
    for system in history.systems(manifest.read_valid_index()):
        spec = store.read_edges(system)
        out += [r for r in spec["training_runs"] if not model_path(r, spec["counters"], params, config.models_dir(system),
                                                                   spec["reference_load"])[0].exists()]
    return out


@locks.holding("mine_rules", shared=True)
def run_one(run_id: str) -> int:
    """Mine (or find cached) the model of one training run; its number of rules (nightly DAG task)."""
    params = MiningParams.load()
    system = manifest.read_valid_index()[run_id]["system"]
    spec = store.read_edges(system)
    return int(len(mine_for_run(run_id, spec["counters"], params, config.models_dir(system), spec["reference_load"])))


@locks.holding("mine_rules")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = MiningParams.load()
    index = manifest.read_valid_index()
    summary = {}
    for system in history.systems(index):
        spec = store.read_edges(system)
        runs = spec["training_runs"]
        directory = config.models_dir(system)
        progress = Progress(log, f"mine_rules {system}", len(runs), what="models")
        ref = spec["reference_load"]

        def mined(run_id: str) -> dict[str, Any]:
            rules = mine_for_run(run_id, spec["counters"], params, directory, ref)
            return {"system": system, "rules": int(len(rules)),
                    "stationarity_rules": int((rules["premise"].map(len) == 0).sum())}
        for run_id, row in zip(runs, parallel.map_ordered(
                mined, runs, progress=progress.each(lambda run_id, row: f"{run_id}: {row['rules']} rules"))):
            summary[run_id] = row
        keep = {model_path(run_id, spec["counters"], params, directory, ref)[0].name for run_id in runs}
        for stale in directory.glob("*.parquet"):
            if stale.name not in keep:       # models of runs that left the window, or of old edges
                stale.unlink()
    atomic.write_json_atomic(config.MODELS / "index.json", summary)
    print(f"[mine_rules] {len(summary)} models, {sum(r['rules'] for r in summary.values())} rules")


if __name__ == "__main__":
    config.install_error_hook()
    main()

