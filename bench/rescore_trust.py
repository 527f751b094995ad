"""What the protocol scores when the verdict follows each detector's record, without re-running.

    python -m bench.robustness --tag before            # once: every split's tree under build/robustness
    python -m bench.rescore_trust build/robustness     # every stored split decided again
    python -m bench.rescore_trust build/robustness --level 0.01 --min-runs 5   # another trust rule
    python -m bench.rescore_trust build/robustness --detectors stacking control_charts \
        clustered_regression cause_classifier within_run                     # the run against itself named too
    python -m bench.rescore_trust build/robustness --allowed 0               # every false alarm charged
    python -m bench.rescore_trust build/robustness --small-rate 0.15 | --classifier-rank | --classifier-logit | --forward

Each split's tree keeps what the record needs: each target's p-values per detector (its verdict
file), and each detector's calibration on the split's history (normal runs' scores, the verified
faults' p-values; the cause model's leave-one-out fault scores).  This rebuilds every detector's
record as the stages now do (``pvalues.loo_pvalues`` with each detector's own p-value), composes
every target's verdict file again with ``stage_results.verdict_of`` from the stored stage results and that
record (``report.detector_trust: record``), and prints, per set and split, the verdict so composed
beside the stored headline and each detector alone, each set's worst case and its gap to the best
detector alone, and where the first counters shown name a labelled one; each detector alone is its p-value in the
composed verdict file, so a tree whose stage results were computed again (one stage run again on
each split) is scored as it now stands.  Nothing is re-run.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

import yaml

REPO = Path(__file__).resolve().parents[1]
from pipelines.detection import stage_results
from pipelines.detectors.causes import reader as causes_reader
from pipelines.stats import pvalues
from pipelines.verdict import cause_signatures, headline
from pipelines.systems import labs
from pipelines.verdict import record
from pipelines.detectors.charts import calibration as chart_calibration
from pipelines.detectors.clusters import models as cluster_models
from pipelines.detectors.rules import verdict as rule_verdict
from pipelines.detectors.within_run import windows as within_run
from bench.robustness import DETECTORS as ALONE  # the protocol's detectors alone, by the p-value each gives

DETECTORS = {"stacking": "stacking", "control_charts": "control_charts", "clustered_regression": "cluster_models",
             "cause_classifier": "cause_classifier", "within_run": "within_run"}


def read(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def system_history(tree: Path, system: str, index: dict, resolution: float) -> record.History:
    """Every detector's record on the split's history, from its stored calibrations."""
    processed = tree / "data" / "processed"
    stacking = read(processed / "stacking_calibration" / f"{system}.json")
    charts = read(processed / "control_charts" / "calibration" / f"{system}.json")
    clusters = read(processed / "clusters" / "calibration" / f"{system}.json")
    pointer = read(processed / "cause_models" / system / "latest.json")
    meta = read(processed / "cause_models" / system / pointer["meta"]) if pointer else {}
    normals: dict[str, dict[str, float]] = {}
    faults: dict[str, dict[str, float]] = {}
    if stacking:
        normals["stacking"] = rule_verdict.normal_pvalues(stacking["normal_scores"])
        faults["stacking"] = stacking.get("fault_pvalues") or {}
    if charts:
        intervals = {r: read(tree / "data" / "interim" / "normalized" / f"{r}.json").get("n_intervals", 1)
                     for r in charts["normal_scores"]}
        normals["control_charts"] = chart_calibration.normal_pvalues(charts, intervals)
        faults["control_charts"] = charts.get("fault_pvalues") or {}
        within = charts.get("within_run") or {}
        normals["within_run"] = within_run.normal_pvalues(within.get("normal_scores") or {})
        faults["within_run"] = within.get("fault_pvalues") or {}
    if clusters:
        normals["clustered_regression"] = cluster_models.normal_pvalues(clusters["normal_scores"])
        faults["clustered_regression"] = clusters.get("fault_pvalues") or {}
    if meta.get("null_fault_scores"):
        predicted = {"history_normal_scores": meta["null_fault_scores"], "null_fault_scores":
                     list(meta["null_fault_scores"].values()),
                     "history_fault_scores": {r: v["fault_score"] for r, v in (meta.get("loo_predictions") or {}).items()
                                              if v.get("truth") not in (None, "none") and v.get("fault_score") is not None}}
        normals["cause_classifier"] = causes_reader.classifier_history_normals(predicted, resolution=resolution) or {}
        faults["cause_classifier"] = causes_reader.classifier_history_faults(predicted, resolution=resolution) or {}
    lab_of = {r: labs.lab_key(row.get("environment")) for r, row in index.items() if row.get("system") == system}
    return record.History(normals, faults, lab_of)


def compose(tree: Path, run_id: str, hist: record.History, meta_scores: dict | None,
            rule: headline.HeadlineRule, fault_labels: dict | None = None) -> dict:
    """A target's verdict file as the report stage now composes it, from the split's stored stage
    results with each detector's record added (what the stages now write beside them)."""
    processed = tree / "data" / "processed"
    detection = read(processed / "detections" / f"{run_id}.json")
    if not detection:
        return {"verdict": "missing", "flagged_counters": [], "details": {}}
    detection["methods"]["association_rules_stacking"]["history_normals"] = hist.normals.get("stacking")
    charts = read(processed / "control_charts" / "runs" / f"{run_id}.json") or None
    if charts is not None:
        charts["history_normals"] = hist.normals.get("control_charts")
        if charts.get("within_run"):
            charts["within_run"]["history_normals"] = hist.normals.get("within_run")
    clustered = read(processed / "clusters" / f"{run_id}.json") or None
    if clustered is not None:
        clustered["history_normals"] = hist.normals.get("clustered_regression")
    predicted = read(processed / "causes" / f"{run_id}.json") or None
    if predicted is not None and meta_scores:
        predicted["history_normal_scores"] = meta_scores
    return stage_results.verdict_of(stage_results.StageDocs(detection, charts, predicted, clustered=clustered), rule,
                                    lab_of=dict(hist.lab_of), fault_labels=fault_labels)


def meta_normal_scores(tree: Path, system: str) -> dict | None:
    processed = tree / "data" / "processed"
    pointer = read(processed / "cause_models" / system / "latest.json")
    return read(processed / "cause_models" / system / pointer["meta"]).get("null_fault_scores") if pointer else None


def rescore(tree: Path, level: float, min_runs: int, detectors: list[str] | None = None,
            signatures: bool = True, reading: str = "uncertain") -> dict:
    tree_params = yaml.safe_load((tree / "params.yaml").read_text())
    params = {**tree_params["report"], "headline_detectors": detectors or tree_params["report"]["headline_detectors"]}
    rule = headline.HeadlineRule.from_params(params)
    rule = headline.HeadlineRule(**{**rule.__dict__, "trust": "record", "trust_level": level, "trust_min_runs": min_runs,
                                    "trust_reading": reading,      # the practical floor the tree's night used
                                    "min_effect_pct": float(tree_params["significance"]["min_effect_pct"])})
    index = read(tree / "data" / "interim" / "valid_runs.json")["valid"]
    STARTED.update({r: str(row.get("started_at") or "") for r, row in index.items()})
    labels = read(tree / "labels.json")
    stored = read(tree / "result.json")["targets"]
    histories: dict[str, record.History] = {}
    scores: dict[str, dict | None] = {}
    out = {}
    for run_id, truth in labels.items():
        system = index[run_id]["system"]
        if system not in histories:
            histories[system] = system_history(tree, system, index, rule.classifier_resolution)
            scores[system] = meta_normal_scores(tree, system)
        doc = compose(tree, run_id, histories[system], scores[system], rule,
                      cause_signatures.fault_labels(index, system) if signatures else None)
        labelled = stored[run_id].get("labelled") or []
        p_values = doc["details"].get("p_values") or {}
        alone = {name: "fail" if p_values.get(key) is not None and p_values[key] <= params["false_alarm_rate"] else "pass"
                 for name, key in ALONE.items()}       # each detector alone, from the stage results read
        out[run_id] = {"truth": truth["verdict"], "record": doc["verdict"],
                       "by": (doc["details"].get("trust") or {}).get("decided_by") or [],
                       "basis": (doc["details"].get("trust") or {}).get("basis"),
                       "p_value": doc.get("p_value"), "p_values": p_values,
                       "beyond": (doc["details"].get("trust") or {}).get("beyond_calibration") or {},
                       "silent": sorted((doc["details"].get("trust") or {}).get("silent_nulls") or {}),
                       "first_counters": (doc["flagged_counters"] or list(doc.get("counter_scores") or {}))[:5],
                       "stored_first": stored[run_id].get("first_counters") or [], "labelled": labelled,
                       **stored[run_id]["said"], **alone}
    return out


def accuracy(rows: list[dict], method: str) -> tuple[float, int, int]:
    right = sum((r[method] == "fail") == (r["truth"] == "fail") for r in rows)
    return right / len(rows), sum(r[method] == "fail" for r in rows if r["truth"] == "pass"), \
        sum(r[method] == "fail" for r in rows if r["truth"] == "fail")


def variants_of_the_evidence(args: argparse.Namespace) -> None:
    """Measured variants that replace a function of the pipeline for this process (none adopted;
    docs/results/robustness.md, "The record's size, a record read forward, a rank for the classifier")."""
    if args.small_rate is not None:       # 0.5^n <= level is the adopted rule: a rate of 1/2 ruled out
        need = max(1, math.ceil(math.log(args.level) / math.log(1.0 - args.small_rate) - 1e-9))
        record.n_min = lambda level: need
        print(f"the record decides from {need} verified normal runs")
    if args.classifier_rank:
        def rank(score: float, null: list[float], *, resolution: float) -> float:
            values = np.asarray(null, dtype=float)
            if score <= 0.5:
                return 1.0
            return float("nan") if values.size < 2 else float((1 + np.sum(values >= score)) / (values.size + 1))
        causes_reader.classifier_pvalue = rank
    if args.classifier_logit:
        def odds(v: float, resolution: float) -> float:
            return float(v) / max(1.0 - float(v), resolution)

        def logit_tail(score: float, null: list[float], *, resolution: float) -> float:
            """The project's tail (``pvalues.calibrated_pvalue``, on ``log(x + resolution)``) fitted to the
            fault scores' odds: their logits, where a score is not within ``resolution`` of 1."""
            if score <= 0.5:
                return 1.0
            return pvalues.calibrated_pvalue(odds(score, resolution), [odds(v, resolution) for v in null],
                                             resolution=resolution)
        causes_reader.classifier_pvalue = logit_tail
    if args.forward:
        def forward(scores: Mapping[str, float], pvalue: Callable[[float, list[float]], float]) -> dict[str, float]:
            order = sorted(scores, key=lambda r: (STARTED.get(r) or "", r))
            out = {}
            for i, run in enumerate(order):
                p = pvalue(float(scores[run]), [float(scores[q]) for q in order[:i]])
                if p is not None and np.isfinite(p):
                    out[run] = round(float(p), 6)
            return out

        def charts_forward(calibration: dict, intervals: dict[str, int]) -> dict[str, float]:
            runs, windows = calibration["normal_scores"], calibration["window_scores"]
            order = sorted(runs, key=lambda r: (STARTED.get(r) or "", r))
            out = {}
            for i, r in enumerate(order):
                resolution = 1.0 / max(1, intervals.get(r, 1))
                p_run = pvalues.calibrated_pvalue(runs[r], [runs[q] for q in order[:i]], resolution=resolution)
                p_window = pvalues.calibrated_pvalue(windows.get(r, 0.0), [windows.get(q, 0.0) for q in order[:i]],
                                                     resolution=resolution)
                p = pvalues.combined_pvalue([p_run, p_window])
                if np.isfinite(p):
                    out[r] = round(float(p), 6)
            return out
        pvalues.loo_pvalues = forward
        chart_calibration.normal_pvalues = charts_forward


STARTED: dict[str, str] = {}      # each run's start, for --forward (every tree's valid runs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--level", type=float, default=0.05)
    parser.add_argument("--min-runs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write every target's rescoring here")
    parser.add_argument("--detectors", nargs="+", choices=list(DETECTORS),
                        help="the detectors the verdict may follow (default: the tree's report.headline_detectors)")
    parser.add_argument("--allowed", type=float, default=None,
                        help="share of normal runs a candidate fails uncharged (default: the rate; 0: every one)")
    parser.add_argument("--no-small", action="store_true", help="no rule of its own for a history too small")
    parser.add_argument("--no-new-lab", action="store_true", help="no rule of its own for a lab with no normal run")
    parser.add_argument("--corroboration", action="store_true",
                        help="a failure resting on one detector's tail beyond its null needs a second detector")
    parser.add_argument("--silent", choices=("within", "keep"), default=None,
                        help="no verified fault, the best record a silent null's: the run against itself decides "
                             "(within) or that record does (keep)")
    parser.add_argument("--reading", choices=("uncertain", "point"), default="uncertain",
                        help="how the record is read (report.trust_reading): its size and noise, or scores alone")
    parser.add_argument("--detectors-order", action="store_true",
                        help="a failed run's counters in the detectors' order alone (no cause signature)")
    parser.add_argument("--small-rate", type=float, default=None,
                        help="the record decides from the fewest normal runs in which a detector that failed none "
                             "is shown to fail fewer than this share of them (adopted: 1/2, record.n_min)")
    parser.add_argument("--classifier-rank", action="store_true",
                        help="the cause classifier's p-value as its score's rank among the normal runs' (no tail)")
    parser.add_argument("--classifier-logit", action="store_true",
                        help="the cause classifier's tail fitted to the odds of the fault scores (the logit scale)")
    parser.add_argument("--forward", action="store_true",
                        help="the record read forward: each verified normal run judged by the normal runs before it")
    args = parser.parse_args(argv)
    variants_of_the_evidence(args)
    variant = {k: v for k, v in (("allowed", args.allowed),
                                 ("corroborate", True if args.corroboration else None), ("silent", args.silent),
                                 ("small", False if args.no_small else None),
                                 ("new_lab", False if args.no_new_lab else None)) if v is not None}
    if variant:                              # a variant of record.choose, for the comparison
        import dataclasses
        chooser = record.choose
        record.choose = lambda p, h, rule, **kw: chooser(p, h, dataclasses.replace(rule, **variant), **kw)
    methods = ("record", "headline", *DETECTORS.values())
    print("| set | split | targets (normal/faults) | record | stored headline | best detector alone | gap | not judged |\n"
          "|---|---|---|---|---|---|---|---|")
    worst: dict[str, dict[str, float]] = {}
    normal_failed = normal = stored_failed = 0
    every = {}
    for result in sorted(args.out.glob("*/*/result.json")):
        tree = result.parent
        rows = list(rescore(tree, args.level, args.min_runs, args.detectors, signatures=not args.detectors_order,
                            reading=args.reading).values())
        every[f"{tree.parent.name}/{tree.name}"] = rows
        acc = {m: accuracy(rows, m) for m in methods}
        best = max(DETECTORS.values(), key=lambda m: acc[m][0])
        cell = lambda m: f"{acc[m][0]:.3f} ({acc[m][1]}/{acc[m][2]})"   # noqa: E731
        n_normal = sum(r["truth"] == "pass" for r in rows)
        unjudged = sum(r["record"] == "no_baseline" for r in rows)
        print(f"| {tree.parent.name} | {tree.name} | {len(rows)} ({n_normal}/{len(rows) - n_normal}) | {cell('record')} | "
              f"{cell('headline')} | {cell(best)} {best} | {acc['record'][0] - acc[best][0]:+.3f} | {unjudged} |")
        normal += n_normal
        normal_failed += acc["record"][1]
        stored_failed += acc["headline"][1]
        for m in methods:
            cur = worst.setdefault(tree.parent.name, {}).get(m)
            worst[tree.parent.name][m] = acc[m][0] if cur is None else min(cur, acc[m][0])
    print(f"\nrecord: {normal_failed}/{normal} normal targets failed ({100 * normal_failed / max(1, normal):.1f} %); "
          f"stored headline: {stored_failed}/{normal} ({100 * stored_failed / max(1, normal):.1f} %)")
    print("\n| set | worst: record | stored headline | " + " | ".join(DETECTORS.values())
          + " | best detector | gap |\n|---|" + "---|" * (len(DETECTORS) + 4))
    for name, w in worst.items():
        best = max(w[m] for m in DETECTORS.values())
        print(f"| {name} | {w['record']:.3f} | {w['headline']:.3f} | "
              + " | ".join(f"{w[m]:.3f}" for m in DETECTORS.values()) + f" | {best:.3f} | {w['record'] - best:+.3f} |")
    print("\n| set | faults caught: given | small-4 | small-4-nofaults | share (small-4, small-4-nofaults) | "
          "not judged on small-4 |\n|---|---|---|---|---|---|")
    for name in sorted({k.split("/")[0] for k in every}):
        caught = {split: sum(r["record"] == "fail" for r in every.get(f"{name}/{split}", []) if r["truth"] == "fail")
                  for split in ("given", "small-4", "small-4-nofaults")}
        if f"{name}/given" not in every:
            continue
        base = max(1, caught["given"])
        unjudged = sum(r["record"] == "no_baseline" for r in every.get(f"{name}/small-4", []))
        print(f"| {name} | {caught['given']} | {caught['small-4']} | {caught['small-4-nofaults']} | "
              f"{caught['small-4'] / base:.2f}, {caught['small-4-nofaults'] / base:.2f} | {unjudged} |")
    print("\n| set | failed faults with labelled counters | a labelled counter first (top 1) | among the first five |"
          "\n|---|---|---|---|")
    ranks: dict[str, list[tuple[bool, bool]]] = {}
    for name, rows in every.items():
        for r in rows:
            labelled = set(r["labelled"])
            for key, said, first in (("record", r["record"], r["first_counters"]),
                                     ("stored", r["headline"], r["stored_first"])):
                if r["truth"] == "fail" and said == "fail" and labelled:
                    ranks.setdefault((name.split("/")[0], key), []).append((bool(first) and first[0] in labelled,
                                                                            bool(labelled & set(first[:5]))))
    for (name, key), v in sorted(ranks.items()):
        print(f"| {name} ({key}) | {len(v)} | {sum(a for a, _ in v) / len(v):.2f} | {sum(b for _, b in v) / len(v):.2f} |")
    if args.json:
        args.json.write_text(json.dumps(every, indent=1, default=list))


if __name__ == "__main__":
    main()
