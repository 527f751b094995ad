"""A lab whose runs last 10 minutes, sampled once a minute: ten samples per host.

Every stage's main() runs on it in DVC order.  No run may be quarantined for being short,
every target gets a verdict file and a page, and the intervals are the samples the hosts have."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from pipelines.simulators import lab_systems
from pipelines.storage import atomic
from tests.conftest import write_lab
from tests.helpers import every_stage_on

pytestmark = pytest.mark.slow     # stages end to end


@pytest.fixture(scope="module")
def short_tree(tmp_path_factory):
    spec = lab_systems.SYSTEMS["shop"]
    short = replace(spec, duration_s=600, sampling_periods={h: (60,) for h in spec.sampling_periods})
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(lab_systems.SYSTEMS, "shop", short)
        lab = tmp_path_factory.mktemp("short_lab")
        truth = write_lab(lab, seed=5, n_normal=3, n_per_cause=2, history_causes=["cpu_hot_path"],
                          target_causes=["cpu_hot_path"])
    with every_stage_on(tmp_path_factory.mktemp("short_tree"), lab, learners=["decision_tree"],
                        learning_curve_repeats=2, learning_curve_learners=1) as tree:
        yield tree, truth


def test_ten_sample_runs_go_through_every_stage(short_tree):
    tree, truth = short_tree
    summary = json.loads((tree / "data" / "interim" / "valid_runs.json").read_text())
    assert sorted(summary["valid"]) == sorted(truth) and not summary["quarantined"]
    # each host really had ten samples in the load phase, and the run keeps ten intervals
    for run_id in truth:
        info = json.loads((tree / "data" / "interim" / "normalized" / f"{run_id}.json").read_text())
        assert info["n_intervals"] == 10 and set(info["sampling_periods"].values()) == {60.0}
    targets = sorted(r for r in truth if "-t" in r)
    for run_id in targets:
        doc = json.loads((tree / "reports" / "runs" / f"{run_id}.json").read_text())
        assert doc["verdict"] in {"pass", "fail"} and doc["details"]["n_intervals"] == 10
        page = (tree / "reports" / "runs" / f"{run_id}.html").read_text()
        assert 'id="short-run"' in page and "10 intervals of 60 s" in page      # the page says so
    # the cause model learned from ten-interval runs, and each target got a prediction
    assert json.loads((tree / "metrics" / "causes.json").read_text())["shop"]["runs"] == \
        sum(1 for r in truth if "-r" in r)
    for run_id in targets:
        cause = atomic.read_json(tree / "data" / "processed" / "causes" / f"{run_id}.json")
        assert cause["label"] in {"none", "cpu_hot_path"}
