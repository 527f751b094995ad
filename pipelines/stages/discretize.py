"""discretize: the bin edges of every system, learned over its passed runs together.

The bins (Foo et al. 2015 phase 2, seed 003) are :mod:`pipelines.preparation.bins`; this
stage writes ``data/processed/edges/<system>.json``.  A system whose passed runs, params and
code are those its edges were learned from keeps them (``memo``): a night whose new archives
are all targets reads no history run here.
"""
from __future__ import annotations

import logging

from pipelines import config
from pipelines.systems import history
from pipelines.preparation.bins import DiscretizeParams, edges_digest, edges_for
from pipelines.storage import atomic, locks, manifest, memo, store

log = logging.getLogger("regresslab.discretize")


@locks.holding("discretize")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config.ensure_dirs(config.EDGES)
    params = DiscretizeParams.load()
    hist = history.HistoryParams.load()
    index = manifest.read_valid_index()
    atomic.prune_outputs(config.EDGES, history.systems(index))
    for system in history.systems(index):
        training = hist.passed(index, system)
        key = memo.input_key("discretize", index, {"training": training}, discretize=params.block)
        spec = memo.reuse(config.edges_path(system), key)
        reused = spec is not None
        if spec is None:
            ref = store.reference_load(training)
            edges = edges_for([store.load_scaled(r, ref) for r in training], params)
            spec = memo.write(config.edges_path(system), {
                "system": system, "training_runs": training, "log_base": params.block["log_base"],
                "open_edge_bins": params.open_edge_bins, "log_span": params.block["log_span"],
                "reference_load": ref, "digest": edges_digest(edges), "counters": edges}, key)
        edges = spec["counters"]
        ks = [e["k"] for e in edges.values()]
        n_log = sum(1 for e in edges.values() if e.get("scale") == "log")
        print(f"[discretize] {system}: {len(edges)} counters ({n_log} log-scaled) from {len(training)} runs, "
              f"bins per counter {min(ks, default=0)}..{max(ks, default=0)}"
              + (" (unchanged, reused)" if reused else ""))


if __name__ == "__main__":
    config.install_error_hook()
    main()

