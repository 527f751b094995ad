"""Which features carry the cause on real faults: per labelled tree, feature blocks and
learners, the leave-one-run-out accuracy on the history (``none`` included: what ``train_causes``
ranks by), the faults' nearest cause in it, and the nearest cause of the labelled failed targets.

    python -m bench.compare_cause_features nezha=build/nezha:../shared/data/nezha/target_labels.json \
        hpc=build/hpc:../shared/data/hpc/target_labels.json [--blocks kinds shifts kinds,shifts] \
        [--learners random_forest logistic_regression] [--seeds 0 1 2] [--pooled]

Each tree must hold the outputs of ``features`` of this code (the pair tables) and its validated,
normalised runs.  The history's figure is ``train_causes``' own: a run's class probabilities from
a model trained without any row of the run (as target or baseline), its nearest fault the most
probable cause other than ``none``, classes balanced as ``train_causes.balance_classes`` says.
A target's figure is ``predict_causes``' own: its pairs against its most similar passed runs,
moved into their lab, through the model trained on the whole history; "failed targets" are the
targets whose truth is a fault, judged whatever a detector said (the label a failed run shows).
``--blocks`` takes the pipeline's blocks (``cause_features.BLOCKS``) and two measured here only:
``families`` (ratios and excursions folded per counter family: CPU, memory, IO, latency) and
``shapes`` (each counter's strongest window over its whole-run violation share: a step, or a
burst inside part of the run) and ``onsets`` (when each counter kind first left its band, and
how long after the first one: which component moved first), which rebuild the pair rows with
those columns.
The learner is not chosen here: every one asked is printed, so that a block is kept only when
it helps on both sets with the same learner.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]


def modules(tree: Path):
    """The pipeline's modules with the tree as the project root (``config`` reads it at import)."""
    os.environ["REGRESSLAB_ROOT"] = str(tree.resolve())
    names = ["config", "archive", "store", "history", "labs", "control_charts", "features", "train_causes"]
    loaded = {}
    for name in names:
        module = importlib.import_module(f"pipelines.{name}")
        loaded[name] = importlib.reload(module) if name == "config" else module
    for name in names[1:]:          # the others hold config's paths through the module object
        loaded[name] = importlib.reload(loaded[name])
    return loaded


# Counter families ("ratios per counter family"), a measurement only, not a pipeline
# block: the first pattern that matches a counter's kind (features.counter_kind) names its family.
FAMILIES = [("latency", r"latency|success_rate|workload_ops|response|duration"),
            ("io", r"network|syscall|iowait|pgpgin|pgpgout|written|dirtied|disk|_io|read|write"),
            ("cpu", r"cpu|user_pct|sys_pct|idle_pct|nice_pct|softirq|context_switch|procs_running|processes|intr"),
            ("memory", r".")]


def family_features(m, frame: pd.DataFrame) -> pd.DataFrame:
    """Per side (ratios and excursions) and family, the largest, mean and median value over the
    family's counters (``families`` in ``--blocks``)."""
    import re
    out = {}
    for side in ("lower", "upper", "below", "above"):
        cols = [c for c in m["features"].feature_columns(frame) if c.startswith(side + ":")]
        fam = pd.Series([next(f for f, rx in FAMILIES if re.search(rx, m["features"].counter_kind(c[len(side) + 1:])[1]))
                         for c in cols], index=cols, dtype=object)
        for family, members in fam.groupby(fam).groups.items():
            block = frame[list(members)].astype(float)
            out[f"family:{side}:max:{family}"] = block.max(axis=1)
            out[f"family:{side}:mean:{family}"] = block.mean(axis=1)
            out[f"family:{side}:median:{family}"] = block.median(axis=1)
    return pd.DataFrame(out, index=frame.index)


def shape_rows(m, charter, run_id, pairs, shift) -> pd.DataFrame:
    """Pair rows with each counter's shape in time (``--blocks shapes``): ``burst:<counter>``, the
    strongest window's violation share over the whole run's (1 for a step that covers the run, up
    to 1 / window_share for a burst inside one window; NaN without a violation)."""
    rows = []
    for b in pairs:
        ratios, limits, _ = charter([b], run_id, shift, excursions_too=True)
        row = {"target": run_id, "baseline": b, **m["features"].pair_row(ratios)}
        burst = (ratios["window"] / ratios["sum"]).where(ratios["sum"] > 0)
        row.update({f"burst:{c}": v for c, v in burst.items()})
        row.update({f"onset:{c}": v for c, v in onsets(m, charter, run_id, limits, shift).items()})
        rows.append(row)
    return pd.DataFrame(rows)


def onsets(m, charter, run_id, limits, shift) -> pd.Series:
    """Per counter, when it first left its band for two intervals in a row, as a share of the run
    (0 = the first interval; NaN: never).  Whole-run limits only."""
    import numpy as np
    target = m["labs"].shifted(charter.frames[run_id], shift)
    counters = [c for c in target.columns if c in limits.lcl.columns]
    t = target[counters].to_numpy(dtype=float)
    lo, hi = limits.lcl[counters].to_numpy(dtype=float)[:1], limits.ucl[counters].to_numpy(dtype=float)[:1]
    with np.errstate(invalid="ignore"):
        out = (t < lo) | (t > hi)
    both = out[:-1] & out[1:]
    first = np.where(both.any(axis=0), both.argmax(axis=0) / max(1, len(t) - 1), np.nan)
    return pd.Series(first, index=counters)


def shape_features(m, frame: pd.DataFrame) -> pd.DataFrame:
    """The ``burst:`` columns folded by counter kind: largest and median over the kind's counters."""
    cols = [c for c in frame.columns if c.startswith("burst:")]
    kinds = pd.Series([m["features"].counter_kind(c[6:])[1] for c in cols], index=cols)
    out = {}
    for kind, members in kinds.groupby(kinds).groups.items():
        block = frame[list(members)].astype(float)
        out[f"shape:max:{kind}"] = block.max(axis=1)
        out[f"shape:median:{kind}"] = block.median(axis=1)
    return pd.DataFrame(out, index=frame.index)


def onset_features(m, frame: pd.DataFrame) -> pd.DataFrame:
    """Which component moved first (``--blocks onsets``): per counter kind, the earliest onset over
    its instances, and that onset less the row's earliest (0 for the kind that moved first)."""
    cols = [c for c in frame.columns if c.startswith("onset:")]
    x = frame[cols].astype(float)
    first = x.min(axis=1)
    kinds = pd.Series([m["features"].counter_kind(c[6:])[1] for c in cols], index=cols)
    out = {}
    for kind, members in kinds.groupby(kinds).groups.items():
        earliest = x[list(members)].min(axis=1)
        out[f"onset:min:{kind}"] = earliest
        out[f"onset:after_first:{kind}"] = earliest - first
    return pd.DataFrame(out, index=frame.index)


def bench_design(m, frame: pd.DataFrame, blocks: list[str]) -> pd.DataFrame:
    """``cause_features.design`` with the bench's own ``families`` block beside the pipeline's blocks."""
    own = [b for b in blocks if b not in ("families", "shapes", "onsets")]
    parts = [m["features"].design(frame, own)] if own else []
    if "families" in blocks:
        parts.append(family_features(m, frame))
    if "shapes" in blocks:
        parts.append(shape_features(m, frame))
    if "onsets" in blocks:
        parts.append(onset_features(m, frame))
    out = pd.concat(parts, axis=1)
    return out[sorted(out.columns)]


def bench_design_frame(m, frame: pd.DataFrame, blocks: list[str]) -> tuple[pd.DataFrame, list[str]]:
    x = bench_design(m, frame, blocks)
    keys = frame[m["features"].KEY_COLUMNS].reset_index(drop=True)
    return pd.concat([keys, x.reset_index(drop=True)], axis=1), list(x.columns)


def rows_against(m, charter, run_id, pairs, shift, pooled, shapes=False):
    """Pair rows (one per baseline run, charted alone: the thesis') or, ``pooled``, one row against
    the pairs' runs pooled into one baseline (as the nightly charts judge a target)."""
    if shapes:
        return shape_rows(m, charter, run_id, pairs, shift)
    if not pooled:
        return m["features"].pair_features(charter, run_id, pairs, shift)
    ratios, _, _ = charter(pairs, run_id, shift, excursions_too=True)
    return pd.DataFrame([{"target": run_id, "baseline": "+".join(pairs), **m["features"].pair_row(ratios)}])


def target_rows(m, index, system, run_id, cc_params, hist, charter, pooled, shapes=False):
    """The rows ``predict_causes`` builds for a target."""
    envs = {r: index[r].get("environment") or {} for r in index if index[r]["system"] == system}
    baseline = m["history"].baseline_for(run_id, index, window=hist["window"], exclude=set(hist["exclude"]))
    pairs = m["features"].pair_baselines(run_id, baseline, envs, cc_params["max_baseline_runs"])
    if not pairs:
        return None
    lab = charter.lab(run_id, pairs, index, m["history"].verdicts(index, system, exclude=set(hist["exclude"])),
                      m["labs"].lab_params(m["history"].HistoryParams.of(hist)))
    return rows_against(m, charter, run_id, pairs, lab["shift"], pooled, shapes)


def pooled_table(m, index, system, cc_params, hist, charter, shapes=False):
    """The history's rows against pooled baselines, built as ``stages.features.main`` builds its pairs.
    A held-out run may sit in the pooled baselines of other runs' rows (their ``baseline`` names
    the pool, which ``causes.train_mask`` does not look into): a slight leak, in its favour."""
    exclude = set(hist["exclude"])
    passed = m["history"].passed_runs(index, system, exclude=exclude)
    envs = {r: index[r].get("environment") or {} for r in index if index[r]["system"] == system}
    lab_runs = m["history"].verdicts(index, system, exclude=exclude)
    parts = []
    for run_id in m["history"].verified_runs(index, system, exclude=exclude):
        pairs = m["features"].pair_baselines(run_id, passed, envs, cc_params["max_baseline_runs"])
        lab = charter.lab(run_id, pairs, index, lab_runs, m["labs"].lab_params(m["history"].HistoryParams.of(hist)))
        part = rows_against(m, charter, run_id, pairs, lab["shift"], not shapes, shapes)
        part["system"] = system
        part["cause"] = "none" if index[run_id]["verdict"] == "pass" else (index[run_id].get("cause") or "unknown")
        parts.append(part)
    frame = pd.concat(parts, ignore_index=True)
    return frame[m["features"].KEY_COLUMNS + m["features"].feature_columns(frame)
                 + [c for c in frame.columns if c.startswith(("burst:", "onset:"))]]


def evaluate_tree(name: str, tree: Path, labels: dict, blocks_list: list[list[str]], learners: list[str],
                  pooled: bool = False, seeds: tuple[int, ...] = (0,)):
    m = modules(tree)
    config, tc = m["config"], m["train_causes"]
    index = m["archive"].read_valid_index()
    cc_params, hist = config.load_params("control_charts"), config.load_params("history")
    balance = bool(config.load_params("train_causes")["balance_classes"])
    rows = []
    for system in m["history"].systems(index):
        path = config.features_path(system)
        if not path.exists():
            continue
        table = pd.read_parquet(path)
        if table["cause"].nunique() < 2:
            continue
        charter = m["control_charts"].Charter(m["store"].FrameStore.of_system(system), cc_params)
        shapes = any("shapes" in b or "onsets" in b for b in blocks_list)
        if pooled or shapes:      # shapes: the pairs again, with each counter's strongest window
            table = pooled_table(m, index, system, cc_params, hist, charter, shapes)
        failed = [t for t in m["history"].targets(index) if index[t]["system"] == system
                  and labels.get(t, {}).get("verdict") == "fail" and labels[t].get("cause") not in (None, "unknown")]
        t_rows = {t: target_rows(m, index, system, t, cc_params, hist, charter, pooled, shapes) for t in failed}
        for blocks in blocks_list:
            frame, columns = bench_design_frame(m, table, blocks)
            truth = tc.run_labels(frame)
            for learner, seed in [(lr, sd) for lr in learners for sd in seeds]:
                started = time.monotonic()
                template = tc.learners(seed)[learner]
                proba = tc.loo_probabilities(template, frame, columns, balance)
                faults = [r for r in proba.index if truth[r] != "none"]
                overall = float((proba.idxmax(axis=1) == truth.reindex(proba.index)).mean())
                loo = sum(tc.nearest_fault(proba.loc[r]) == truth[r] for r in faults) / max(1, len(faults))
                model = tc.fit_rows(template, frame, columns, balance)
                classes = sorted(truth.unique())
                hits = []
                for t, tr in t_rows.items():
                    if tr is None:
                        continue
                    designed = bench_design(m, tr, blocks).reindex(columns=columns)
                    p = tc.run_probabilities(model, designed, columns, classes)
                    hits.append(tc.nearest_fault(p) == labels[t]["cause"])
                rows.append({"set": name, "system": system, "baseline": "pooled" if pooled else "pairs",
                             "blocks": "+".join(blocks), "learner": learner, "seed": seed,
                             "LOO accuracy": round(overall, 3),
                             "history faults": len(faults), "LOO nearest cause": round(loo, 3),
                             "failed targets": len(hits),
                             "targets nearest cause": round(sum(hits) / max(1, len(hits)), 3),
                             "seconds": round(time.monotonic() - started, 1)})
                print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="+", help="name=tree:labels.json")
    ap.add_argument("--blocks", nargs="+", default=["kinds", "shifts", "kinds,shifts"])
    ap.add_argument("--learners", nargs="+", default=["random_forest", "logistic_regression"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0], help="the learners' random seeds (the spread "
                    "of a figure over seeds is its noise from the learner alone)")
    ap.add_argument("--pooled", action="store_true", help="one row per run against its pooled baseline runs")
    args = ap.parse_args()
    rows = []
    for spec in args.sets:
        name, rest = spec.split("=", 1)
        tree, labels = rest.split(":", 1)
        rows += evaluate_tree(name, Path(tree), json.loads(Path(labels).read_text()),
                              [b.split(",") for b in args.blocks], args.learners, args.pooled, tuple(args.seeds))
    print(pd.DataFrame(rows).to_markdown(index=False))


if __name__ == "__main__":
    main()
