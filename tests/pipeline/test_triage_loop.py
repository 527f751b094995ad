"""The analysts' loop (part 2; Nguyen 2017 process steps S4-S5): triage targets with
a cause the models have never seen, run the stages again, and the runs are history, the
cause is learned (a new class), the retraining asset fires, and a later similar run gets
that cause. Stage mains run in dvc.yaml's order, as `dvc repro` runs them; that the triage
log is a dependency of `validate` (so `dvc repro` re-runs from there) is checked on dvc.yaml
by tests/unit/test_dvc_graph.py."""
from __future__ import annotations

import pytest

import json

import yaml

from pipelines import config
from pipelines.systems import history
from pipelines.cli import triage
from pipelines.stages import train_causes, validate
from pipelines.storage import manifest, triage_log
from tests.conftest import ONE_DESIGN, write_lab
from tests.helpers import run_stages

pytestmark = pytest.mark.slow     # stages end to end


def model_classes(system: str) -> list[str]:
    from pipelines.storage import store
    latest = json.loads(config.latest_cause_model(system).read_text())
    return [str(c) for c in store.load_model(config.cause_models_dir(system) / latest["model"]).classes_]


def night():
    run_stages("pull", through="report", skip=("clusters",))


def test_triage_a_target_then_the_night_learns_its_cause(tree, tmp_path, capsys):
    src = tmp_path / "lab"
    truth = write_lab(src, history_causes=["cpu_hot_path", "extra_db_query"], n_per_cause=2, n_normal=4,
              target_causes=["cpu_contention", "cpu_contention", "cpu_contention"], n_targets_normal=0)
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["pull"]["source"] = str(src)
    # two learners and short learning curves: the loop, not the model choice, is under test here
    params["train_causes"].update(learners=["logistic_regression", "random_forest"], learning_curve_repeats=2,
                                  learning_curve_learners=1, feature_designs=ONE_DESIGN)
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    night()
    index = manifest.read_valid_index()
    targets = history.targets(index)
    faulty = [t for t in targets if truth[t]["cause"] == "cpu_contention"]
    assert len(faulty) == 3
    first, second, later = faulty
    assert train_causes.verified_runs_changed() == []                  # the models are current
    assert "cpu_contention" not in model_classes("shop")
    page = config.run_report_path(first, "html").read_text()
    assert f"regresslab triage {first} --verdict" in page and 'id="triage"' in page

    for bogus in ("../../x", "<script>"):              # a counter the run never recorded is no regressed counter
        with pytest.raises(SystemExit) as refused:
            triage.main([first, "--verdict", "fail", "--counters", "tomcat.cpu_pct", bogus, "--by", "ana"])
        assert refused.value.code == 2
    assert "not among the" in capsys.readouterr().err and not triage_log.read_log()
    for run in (first, second):
        triage.main([run, "--verdict", "fail", "--cause", "cpu_contention", "--counters", "tomcat.cpu_pct",
                     "--note", "noisy neighbour", "--by", "ana"])
    assert "fail/cpu_contention" in capsys.readouterr().out
    validate.main()
    index = manifest.read_valid_index()
    assert index[first]["verdict"] == "fail" and index[first]["cause"] == "cpu_contention"
    assert index[first]["_triage"]["by"] == "ana" and index[first]["_triage"]["archive_verdict"] is None
    assert first in history.verified_runs(index, "shop") and first not in history.targets(index)
    assert train_causes.verified_runs_changed() == ["shop"]            # the retraining asset fires
    night()
    assert train_causes.verified_runs_changed() == []
    assert "cpu_contention" in model_classes("shop")                   # a new class
    predicted = json.loads(config.cause_path(later).read_text())
    assert predicted["fault"]["label"] == "cpu_contention"             # a later similar run gets the cause
    assert "Decisions in force" in config.NIGHT_INDEX.read_text() and "noisy neighbour" in config.NIGHT_INDEX.read_text()

    triage.main([second, "--undo", "--by", "ana"])                      # append-only: the undo is a line too
    validate.main()
    index = manifest.read_valid_index()
    assert index[second]["verdict"] is None and second in history.targets(index)
    assert len(triage_log.read_log()) == 3
