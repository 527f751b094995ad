"""A run the history cannot judge: no verified passed run of its system, before or after it.

Its verdict is ``no_baseline`` (contract §2, schema version 2), never a pass: its page says why,
and the night index counts it apart from the passed and failed runs."""
from __future__ import annotations

import json

import pytest
import yaml

from pipelines import config
from pipelines.simulators import labsim
from pipelines.storage import atomic
from tests.conftest import ONE_DESIGN, write_lab
from tests.helpers import run_stages

pytestmark = pytest.mark.slow     # stages end to end


def lonely_target(out, source_system: str = "shop") -> str:
    """One target of a system no other run belongs to (a copy of a simulated target, renamed)."""
    plan = labsim.LabPlan(seed=5, systems=[source_system], history_causes=[], target_causes=["extra_db_query"],
                          n_normal=0, n_per_cause=0, n_targets_normal=0, start="2026-09-01")
    for run_id, members, truth in labsim.build_lab(plan, min_effect=3.0, min_rel_change=0.05):
        meta = json.loads(members["run.json"])
        if meta["verdict"] is None:
            new_id = "lonely-" + run_id
            meta.update(run_id=new_id, system="lonely")
            members = {**members, "run.json": json.dumps(meta).encode()}
            atomic.write_tar_gz_atomic(out / f"{new_id}.tar.gz", members)
            return new_id
    raise AssertionError("the simulator wrote no target")


def test_a_run_with_no_passed_run_of_its_system_gets_no_baseline(tree, tmp_path):
    lab = tmp_path / "lab"
    write_lab(lab)
    lonely = lonely_target(lab)
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["pull"]["source"] = str(lab)
    params["train_causes"].update(learners=["random_forest"], learning_curve_learners=1, learning_curve_repeats=2,
                                  feature_designs=ONE_DESIGN)
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    run_stages("pull", through="report")
    doc = json.loads(config.run_report_path(lonely).read_text())
    assert doc["verdict"] == "no_baseline" and doc["schema_version"] == 2
    assert doc["score"] is None and doc["flagged_counters"] == [] and doc["baseline_runs"] == []
    assert doc["baseline_status"] == "none" and doc["cause"] == {"label": None, "probability": None, "known": False}
    assert "no verified passed run" in doc["details"]["no_baseline"]
    page = config.run_report_path(lonely, "html").read_text()
    assert 'id="no-baseline"' in page and "NO_BASELINE" in page
    index = config.NIGHT_INDEX.read_text()
    assert 'id="no-baseline-count">1 run(s) not judged' in index
    # the shop's targets are judged as before, with schema version 1
    shop = [json.loads(p.read_text()) for p in config.RUN_REPORTS.glob("shop-*.json")]
    assert shop and all(d["verdict"] in ("pass", "fail") and d["schema_version"] == 1 for d in shop)


def test_a_history_of_failed_runs_only_ends_the_night_with_every_target_unjudged(tree, tmp_path):
    """Verified runs, all of them faults (a lab's first day of fault injection): no stage may stop
    the night, and no target is called passed."""
    lab = tmp_path / "lab"
    truth = write_lab(lab, n_normal=0, history_causes=["cpu_hot_path", "extra_db_query"], n_per_cause=1)
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["pull"]["source"] = str(lab)
    params["train_causes"].update(learners=["random_forest"], learning_curve_learners=1, learning_curve_repeats=2,
                                  feature_designs=ONE_DESIGN)
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    run_stages("pull", through="report")
    targets = [r for r, t in truth.items() if "-t" in r]
    verdicts = {r: json.loads(config.run_report_path(r).read_text())["verdict"] for r in targets}
    assert targets and set(verdicts.values()) == {"no_baseline"}
