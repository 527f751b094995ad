"""normalize -> discretize -> mine_rules -> detect -> evaluate main() on a tiny simulated lab."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from pipelines import config, detect, discretize, evaluate, mine_rules, normalize, pull, validate

CONTRACT_KEYS = {"schema_version", "run_id", "system", "verdict", "score", "flagged_counters", "counter_scores",
                 "cause", "baseline_runs", "methods"}


@pytest.fixture()
def analysed(tree, tiny_lab):
    lab, truth = tiny_lab
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["pull"]["source"] = str(lab)
    params["evaluate"]["labels"] = [str(lab / "target_labels.json")]
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    for stage in (pull, validate, normalize, discretize, mine_rules, detect, evaluate):
        stage.main()
    return tree, truth


def test_chain_writes_contract_verdicts_and_metrics(analysed):
    tree, truth = analysed
    targets = sorted(r for r in truth if "-t" in r)
    assert targets
    for run_id in targets:
        doc = json.loads((config.RUN_REPORTS / f"{run_id}.json").read_text())
        assert CONTRACT_KEYS <= set(doc)
        assert doc["schema_version"] == 1 and doc["run_id"] == run_id and doc["system"] == "shop"
        assert doc["verdict"] in ("pass", "fail") and 0.0 <= doc["score"] <= 1.0
        assert set(doc["flagged_counters"]) <= set(doc["counter_scores"])
        assert all(0.0 <= v <= 1.0 for v in doc["counter_scores"].values())
        assert sum(b["weight"] for b in doc["baseline_runs"]) == pytest.approx(1.0, abs=1e-3)
        assert {"association_rules_stacking", "association_rules_bagging", "association_rules_single"} <= set(
            doc["methods"])
        assert doc["verdict"] == doc["methods"]["association_rules_stacking"]["verdict"]
        for c in doc["flagged_counters"]:
            assert doc["details"]["violated_rules"][c]              # every flag comes with its rules
            assert doc["details"]["violation_intervals"][c]         # and the intervals they broke in
    metrics = json.loads((config.METRICS / "detection.json").read_text())
    for combiner in ("single", "bagging", "stacking"):
        m = metrics["loo"][combiner]
        assert 0.0 <= m["f"] <= 1.0 and m["runs"] == len([r for r in truth if "-r" in r])
    rows = pd.read_csv(config.METRICS / "detection_runs.csv")
    assert set(rows["combiner"]) == {"single", "bagging", "stacking"}
    assert set(rows["source"]) == {"loo", "targets"}


def test_new_night_with_nothing_new_re_mines_nothing(analysed):
    models = sorted((config.PROCESSED / "models" / "shop").glob("*.parquet"))
    stamps = {p: p.stat().st_mtime_ns for p in models}
    normalize.main()
    discretize.main()
    mine_rules.main()
    assert sorted((config.PROCESSED / "models" / "shop").glob("*.parquet")) == models
    assert all(p.stat().st_mtime_ns == stamps[p] for p in models)


def test_edges_are_learned_over_the_passed_runs_only(analysed):
    tree, truth = analysed
    spec = json.loads(discretize.edges_path("shop").read_text())
    passed = {r for r, t in truth.items() if "-r" in r and t["verdict"] == "pass"}
    assert set(spec["training_runs"]) == passed
    assert spec["reference_load"] > 0
