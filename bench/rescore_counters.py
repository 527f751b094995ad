"""Other orders of a failed run's counters, scored on the protocol's stored split trees.

    python -m bench.robustness --out build/robustness --tag base   # once: the split trees
    python -m bench.rescore_counters build/robustness               # every stored split
    python -m bench.rescore_counters build/robustness --sets trainticket --show   # one row per fault

On every target of a split that is a labelled fault and that the headline failed, where the first
counters shown name a labelled one (``robustness.labelled_counters``: its regressed counters, else
its root service's), for the order the verdict file shows and for simple alternatives computed
from the split's stored runs (nothing is re-run):

* ``shown``: the verdict file's ``flagged_counters``;
* ``robust_z``: every counter by ``|run median − m| / s`` with ``m`` the median of its baseline
  runs' medians and ``s`` their MAD (×1.4826), at least 5 % of ``|m|``;
* ``baro``: every counter by its largest distance, over the run's intervals, from the pooled median
  of its baseline runs' intervals in units of their interquartile range (BARO's RobustScorer:
  ``counter_order.anchor_order``), the plain robust anchor;
* ``anchored``: ``shown``'s first places, then ``baro``'s counters whose change matters (the tree's
  ``significance.min_effect_pct``) in the last ``report.anchor_places`` of the five (the defaults
  file's), then the rest (``counter_order.with_anchor``): the detectors' order as the report now shows it;
* ``kind_relative``: that ``z`` over the median, across the history's normal runs (each against
  the other normal runs of its lab), of the largest ``z`` among the counters of its kind: a kind
  whose counters jump in every normal run (TrainTicket's timeouts) counts less;
* ``signature_by_change``: the verdict's order with the counters of its cause's signature
  (``details.cause_signature``) taken in turn, those sorted by their change (``details.effects``),
  not by the detectors' order;
* ``component``: the components in order of the mean ``log(1 + z)`` of their three strongest
  counters, each component's counters by ``z``;
* ``robust_signature``: ``robust_z`` with the signature of the run's predicted cause first
  (``cause_signatures.explain_order``, the signature by counter then by kind);
* ``by_record``: the order a record on the history would choose: on the split's verified faults
  of the run's system that name counters, each replayed in leave-one-out with its own cause's
  signature (the label left out), the control charts' evidence (its violation ratios against its
  baselines, ``features``: the replayable part of the detectors' order) and ``robust_signature``
  are scored (a labelled counter among the first five, then first); ``robust_signature`` orders
  the run when its record is the better, else ``anchored`` does: ``counter_order.records`` and
  ``choose``, the rule the report applies.

Prints, per set, how many such faults and the share whose first counter (top 1) and whose first
five (top 5) hold a labelled one.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
from pipelines.verdict import counter_order  # noqa: E402 -- after the path is set
from pipelines.verdict.cause_signatures import FaultLabel, explain_order, in_turn, signature  # noqa: E402
from pipelines.systems.counter_kinds import counter_kind  # noqa: E402
from pipelines.stats.effects import measured_and_mattering  # noqa: E402
from pipelines import params_schema  # noqa: E402
from bench.robustness import SETS, labelled_counters  # noqa: E402

ORDERS = ("shown", "anchored", "robust_z", "baro", "kind_relative", "signature_by_change", "component", "robust_signature", "by_record")


class Medians:
    """Each stored run's counter medians (``base``: the set's normalised runs), read once."""

    def __init__(self, base: Path):
        self.base, self.cache, self.frames = base, {}, {}
        self._pool_key: tuple | None = None
        self._pool: pd.DataFrame | None = None

    def frame(self, run: str) -> pd.DataFrame:
        if run not in self.frames:
            self.frames[run] = pd.read_parquet(self.base / "data/interim/normalized" / f"{run}.parquet")
        return self.frames[run]

    def __call__(self, run: str) -> pd.Series:
        if run not in self.cache:
            self.cache[run] = self.frame(run).median()
        return self.cache[run]

    def pooled(self, run: str, baseline: list[str]) -> pd.DataFrame | None:
        """The baseline runs' intervals pooled (``run`` left out), the last pool kept: the anchor and
        ``beyond`` read the same one for a fault; None without a baseline run."""
        key = (run, tuple(baseline))
        if self._pool_key != key:
            others = [r for r in baseline if r != run]
            self._pool_key, self._pool = key, (pd.concat([self.frame(r) for r in others]) if others else None)
        return self._pool

    def beyond(self, run: str, baseline: list[str]) -> set[str]:
        """The counters whose anchor distance exceeds every baseline run's (each against the same pooled
        baseline): those that left every run of the history."""
        pooled = self.pooled(run, baseline)
        if pooled is None:
            return set()
        own = counter_order.anchor_distance(self.frame(run), pooled)
        each = pd.concat([counter_order.anchor_distance(self.frame(r), pooled) for r in baseline if r != run],
                         axis=1).max(axis=1)
        return {c for c, v in own.items() if v > each.get(c, np.inf)}

    def anchor(self, run: str, baseline: list[str]) -> list[str]:
        """The run's counters by the plain robust anchor (``counter_order.anchor_order``: BARO's
        RobustScorer over the run's intervals against the baseline runs' pooled intervals)."""
        pooled = self.pooled(run, baseline)
        return [] if pooled is None else counter_order.anchor_order(self.frame(run), pooled)

    def z(self, run: str, baseline: list[str]) -> pd.Series:
        return counter_order.robust_distance(self(run), pd.DataFrame({r: self(r) for r in baseline}).T)


def kind_scale(tree: Path, medians: Medians) -> dict[str, float]:
    """Per counter kind, the median over the history's normal runs of the largest ``z`` of its
    counters (each normal run against the other normal runs of its lab, or every other one when
    its lab has fewer than three)."""
    index = json.loads((tree / "data/interim/valid_runs.json").read_text())["valid"]
    normal = [r for r, row in index.items() if row.get("verdict") == "pass"]
    lab = {r: json.dumps(index[r].get("environment"), sort_keys=True) for r in normal}
    largest: dict[str, list[float]] = {}
    for run in normal:
        others = [o for o in normal if o != run and lab[o] == lab[run]]
        z = medians.z(run, others if len(others) >= 3 else [o for o in normal if o != run])
        for kind, value in z.groupby([counter_kind(c)[1] for c in z.index]).max().items():
            largest.setdefault(kind, []).append(float(value))
    return {k: float(np.median(v)) + 1e-9 for k, v in largest.items()}


def orders(doc: dict, z: pd.Series, scale: dict[str, float], anchor: list[str], min_effect_pct: float,
           anchor_places: int) -> dict[str, list[str]]:
    shown = list(doc["flagged_counters"])
    effects = doc["details"].get("effects") or {}
    kinds = set((doc["details"].get("cause_signature") or {}).get("kinds") or ())
    by_z = list(z.sort_values(ascending=False).index)
    relative = pd.Series({c: z[c] / scale.get(counter_kind(c)[1], 1.0) for c in z.index})
    logs = np.log1p(z)
    component = logs.groupby([c.split(".", 1)[0] for c in logs.index]).apply(lambda s: s.nlargest(3).mean())
    signature = sorted((c for c in shown if counter_kind(c)[1] in kinds), key=lambda c: -abs(effects.get(c) or 0.0))
    mattering = measured_and_mattering(anchor, effects, min_effect_pct)
    return {"shown": shown, "anchored": counter_order.with_anchor(shown, mattering, lead=counter_order.IN_FIVE - anchor_places),
            "robust_z": by_z, "baro": anchor,
            "kind_relative": list(relative.sort_values(ascending=False).index),
            "signature_by_change": in_turn(signature, shown),
            "component": [c for comp in component.sort_values(ascending=False).index
                          for c in by_z if c.split(".", 1)[0] == comp]}


def fault_labels(index: dict, system: str) -> dict[str, FaultLabel]:
    return {r: FaultLabel(str(v["cause"]), tuple(v["regressed_counters"])) for r, v in index.items()
            if v.get("system") == system and v.get("verdict") == "fail" and v.get("cause") and v.get("regressed_counters")}


def history_record(tree: Path, index: dict, system: str, medians: Medians) -> dict[str, counter_order.RankingRecord]:
    """Each ranking's record on the history's labelled faults of ``system`` (``counter_order.records``,
    as the report reads it: each fault's robust distance from the normal runs of its lab, or of
    every lab when its own has fewer than three)."""
    path = tree / "data/processed/features" / f"{system}.parquet"
    if not path.exists():
        return {}
    labels = fault_labels(index, system)
    normals = [r for r, v in index.items() if v.get("system") == system and v.get("verdict") == "pass"]
    lab = {r: json.dumps(index[r].get("environment"), sort_keys=True) for r in index}

    def passed_for(run: str) -> list[str]:
        same = [o for o in normals if lab[o] == lab[run] and o != run]
        return same if len(same) >= 3 else [o for o in normals if o != run]
    runs = sorted(set(normals) | set(labels))
    frame = pd.DataFrame({r: medians(r) for r in runs}).T if runs else pd.DataFrame()
    return counter_order.records(labels, frame, pd.read_parquet(path), {r: passed_for(r) for r in labels})


def rank(order: list[str], labelled: set[str]) -> int | None:
    return next((i for i, c in enumerate(order) if c in labelled), None)


def load_counter(base: Path, run: str) -> str | None:
    """The run's load counter (its ``workload.load_counter``, as the normalised run records it)."""
    path = base / "data/interim/normalized" / f"{run}.json"
    return json.loads(path.read_text()).get("load_counter") if path.exists() else None


def score_set(root: Path, name: str, show: bool, anchor_places: int, beyond: bool,
              skip_load: bool = False) -> list[dict]:
    rows = []
    base = root / name / "base"
    medians = Medians(base)
    for tree in sorted(p for p in (root / name).iterdir() if (p / "result.json").exists()):
        labels = json.loads((tree / "labels.json").read_text())
        min_effect = float(yaml.safe_load((tree / "params.yaml").read_text())["significance"]["min_effect_pct"])
        scale, index, records = None, None, {}
        for path in sorted((tree / "reports" / "runs").glob("*.json")):
            doc = json.loads(path.read_text())
            truth = labels.get(doc["run_id"]) or {}
            if truth.get("verdict") != "fail" or doc["verdict"] != "fail":
                continue
            labelled = set(labelled_counters(truth, list(medians(doc["run_id"]).index)))
            if not labelled:
                continue
            scale = scale if scale is not None else kind_scale(tree, medians)
            baseline = [b["run_id"] for b in doc["baseline_runs"]]
            z = medians.z(doc["run_id"], baseline)
            anchor = medians.anchor(doc["run_id"], baseline)
            if skip_load:                    # the load the test drove, not the system's answer to it
                anchor = [c for c in anchor if c != load_counter(base, doc["run_id"])]
            ranked = orders(doc, z, scale, anchor, min_effect, anchor_places)
            index = index if index is not None else json.loads((tree / "data/interim/valid_runs.json").read_text())["valid"]
            sig = signature(fault_labels(index, doc["system"]), doc["cause"]["label"])
            ranked["robust_signature"] = explain_order(ranked["robust_z"], sig)
            if doc["system"] not in records:
                records[doc["system"]] = history_record(tree, index, doc["system"], medians)
            robust = counter_order.choose(records[doc["system"]]) == "robust"
            ranked["by_record"] = ranked["robust_signature"] if robust else ranked["anchored"]
            ranks = {k: rank(v, labelled) for k, v in ranked.items()}
            moved = medians.beyond(doc["run_id"], baseline) if beyond else set()
            rows.append({"split": tree.name, "run": doc["run_id"], "cause": truth.get("cause"),
                         "said": doc["cause"]["label"], **ranks,
                         "beyond": len(moved), "labelled_beyond": bool(moved & labelled)})
            if show:
                print(tree.name, doc["run_id"], truth.get("cause"), "->", doc["cause"]["label"], ranks)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="the protocol's --out folder")
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument("--show", action="store_true", help="one line per fault")
    parser.add_argument("--beyond", action="store_true",
                        help="per set, how many counters left every baseline run, and whether a labelled one did")
    parser.add_argument("--anchor-places", type=int, default=None,
                        help="places of the five the anchor fills in `anchored` (default: report.anchor_places)")
    parser.add_argument("--anchor-skip-load", action="store_true",
                        help="the anchor in `anchored` passes over the run's load counter (measured, not adopted)")
    args = parser.parse_args(argv)
    anchor_places = (int(params_schema.defaults()["report"]["anchor_places"]) if args.anchor_places is None
                     else args.anchor_places)               # as the report fills the five, unless asked otherwise
    print("| set | failed faults with labelled counters | " + " | ".join(f"{o} top 1 / top 5" for o in ORDERS) + " |")
    print("|---|---|" + "---|" * len(ORDERS))
    worst, every = {}, {}
    for name in args.sets:
        if not (args.root / name / "base").exists():
            continue
        rows = score_set(args.root, name, args.show, anchor_places, args.beyond, args.anchor_skip_load)
        if not rows:
            continue
        every[name] = rows
        cells = [f"{np.mean([r[o] == 0 for r in rows]):.2f} / {np.mean([r[o] is not None and r[o] < 5 for r in rows]):.2f}"
                 for o in ORDERS]
        print(f"| {name} | {len(rows)} | " + " | ".join(cells) + " |")
        splits = sorted({r["split"] for r in rows})
        worst[name] = {o: min(np.mean([r[o] is not None and r[o] < 5 for r in rows if r["split"] == s]) for s in splits)
                       for o in ORDERS}
    if args.beyond:
        print("\n| set | failed faults | a labelled counter left every baseline run | counters that did, mean |\n|---|---|---|---|")
        for name, rows in every.items():
            print(f"| {name} | {len(rows)} | {np.mean([r['labelled_beyond'] for r in rows]):.2f} | "
                  f"{np.mean([r['beyond'] for r in rows]):.1f} |")
    print("\nWorst split per set, a labelled counter among the first five:\n")
    print("| set | " + " | ".join(ORDERS) + " |")
    print("|---|" + "---|" * len(ORDERS))
    for name, cells in worst.items():
        print(f"| {name} | " + " | ".join(f"{cells[o]:.2f}" for o in ORDERS) + " |")


if __name__ == "__main__":
    main()
