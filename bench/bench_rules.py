"""Benchmark of rule mining and detection: wall time and peak memory.

    python -m bench.bench_rules                 # 100, 500, 2000 counters x 1920 intervals
    python -m bench.bench_rules --counters 100 500 --history 50

For one run model it prints, per counter count and algorithm (apriori, fpgrowth), the
wall time, the peak resident memory of a fresh process and the rules produced; then the
same for a whole ``detect`` of one target against ``--history`` prior runs (models mined
beforehand, as the nightly cache holds them; pruning included).  Each case runs in its
own process so peak memory is the case's own.

The data are realistic performance counters, not noise: a load that drifts (an
Ornstein-Uhlenbeck process) drives about half of the counters linearly with their own
slopes, the others are flat or step between two regimes (GC, batch jobs); each gets
measurement noise and some are integers — the structure that makes rules explode.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np
import pandas as pd


from pipelines import config
from pipelines.detectors.rules import ensemble as rule_ensemble
from pipelines.detectors.rules import mining as rule_mining
from pipelines.preparation import bins

# the project's own mining params (params.yaml: mine_rules); the algorithm varies per case
PARAMS = config.load_params("mine_rules")
DISC = bins.DiscretizeParams.load()          # bins as the pipeline learns them (open edge bins, log span)


def synthetic_run(n_counters: int, n_intervals: int, seed: int, shift: dict[int, float] | None = None) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    load = np.empty(n_intervals)
    x = 0.0
    for t in range(n_intervals):
        x = 0.97 * x + 0.03 * rng.normal(0, 1.0)
        load[t] = 1.0 + 0.5 * x
    structure = np.random.default_rng(12345)            # the same system in every run
    cols = {"app.load": load * 100}
    regime = (np.sin(np.arange(n_intervals) / 40.0) > 0.6).astype(float)
    for i in range(n_counters - 1):
        kind = structure.integers(0, 4)
        level = structure.uniform(10, 1000)
        if kind <= 1:
            v = level * (1 + structure.uniform(0.5, 1.5) * (load - 1))
        elif kind == 2:
            v = level * np.ones(n_intervals)
        else:
            v = level * (1 + 0.4 * regime)
        v = v * np.exp(rng.normal(0, structure.uniform(0.005, 0.03), n_intervals))
        if shift and i in shift:
            v = v * shift[i]
        if structure.random() < 0.2:
            v = np.round(v)
        cols[f"h{i % 20:02d}.c{i:04d}"] = v
    return pd.DataFrame(cols)


def case_mine(n_counters: int, n_intervals: int, algorithm: str) -> dict:
    frame = synthetic_run(n_counters, n_intervals, seed=1)
    edges = bins.edges_for([frame], DISC)
    binned = bins.apply_edges(frame, edges)
    t0 = time.perf_counter()
    rules = rule_mining.mine_model(binned, edges, rule_mining.MiningParams.of({**PARAMS, "algorithm": algorithm}))
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "rules": int(len(rules)), "stationarity": int((rules["premise"].map(len) == 0).sum())}


def case_detect(n_counters: int, n_intervals: int, history: int) -> dict:
    runs = [synthetic_run(n_counters, n_intervals, seed=100 + i) for i in range(history)]
    edges = bins.edges_for(runs, DISC)
    params = rule_mining.MiningParams.of({**PARAMS, "algorithm": "apriori"})
    t0 = time.perf_counter()
    models = [rule_ensemble.Model(f"r{i}", rule_mining.mine_model(bins.apply_edges(r, edges), edges, params),
                           {"cpu": "a" if i % 2 else "b", "mem": 16}) for i, r in enumerate(runs)]
    mine_wall = time.perf_counter() - t0
    target = synthetic_run(n_counters, n_intervals, seed=999, shift={3: 1.3, 7: 0.7})
    refs = {f"r{i}": rule_ensemble.Encoded.of(bins.apply_edges(runs[i], edges)) for i in range(0, history, 2)[:3]}
    t0 = time.perf_counter()
    pruned, _ = rule_ensemble.prune_models(models, list(refs), refs.__getitem__, delta_threshold=0.1,
                                           min_premise_intervals=10)
    result = rule_ensemble.detect_run(bins.apply_edges(target, edges), {"cpu": "a", "mem": 16}, pruned, None,
                               delta_threshold=0.1, min_premise_intervals=10, stacking_threshold=0.5)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "mine_all_s": mine_wall, "rules": int(sum(len(m.rules) for m in models)),
            "flagged": len(result["stacking"])}


def run_case(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, "--case", *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counters", type=int, nargs="+", default=[100, 500, 2000])
    parser.add_argument("--intervals", type=int, default=1920)
    parser.add_argument("--history", type=int, default=50)
    parser.add_argument("--max-mined-items", type=int, help="0 = no bound (to measure the explosion)")
    parser.add_argument("--case", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        kind, n, m, extra = args.case[0], int(args.case[1]), int(args.case[2]), args.case[3]
        if len(args.case) > 4:
            PARAMS["max_mined_items"] = int(args.case[4]) or None
        result = case_mine(n, m, extra) if kind == "mine" else case_detect(n, m, int(extra))
        result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(result))
        return
    if args.max_mined_items is not None:
        PARAMS["max_mined_items"] = args.max_mined_items or None
    print(f"one run model, {args.intervals} intervals, min support {PARAMS['min_support']}, min confidence "
          f"{PARAMS['min_confidence']}, max_len {PARAMS['max_len']}, max_mined_items {PARAMS['max_mined_items']}")
    print(f"{'counters':>8} {'algorithm':>9} {'wall s':>8} {'peak MB':>8} {'rules':>8} {'stationarity':>12}")
    for n in args.counters:
        for algorithm in ("apriori", "fpgrowth"):
            r = run_case(["mine", str(n), str(args.intervals), algorithm, str(PARAMS["max_mined_items"] or 0)])
            print(f"{n:>8} {algorithm:>9} {r['wall_s']:>8.2f} {r['peak_rss_mb']:>8.0f} {r['rules']:>8} "
                  f"{r['stationarity']:>12}", flush=True)
    print(f"\ndetect of one target against {args.history} prior runs (apriori; mining of the models shown apart)")
    print(f"{'counters':>8} {'detect s':>9} {'mine all s':>10} {'peak MB':>8} {'rules':>9} {'flagged':>7}")
    for n in args.counters:
        r = run_case(["detect", str(n), str(args.intervals), str(args.history), str(PARAMS["max_mined_items"] or 0)])
        print(f"{n:>8} {r['wall_s']:>9.2f} {r['mine_all_s']:>10.1f} {r['peak_rss_mb']:>8.0f} {r['rules']:>9} "
              f"{r['flagged']:>7}", flush=True)


if __name__ == "__main__":
    main()
