"""Every analysis stage's main() in DVC order on a small simulated lab, and the files they write."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from pipelines import config
from pipelines.detectors.causes import features as cause_features
from pipelines.detectors.rules import verdict as rule_verdict
from pipelines.stages import discretize, mine_rules, normalize, report, train_causes
from pipelines.storage import store
from tests.helpers import rooted_at, run_stages

pytestmark = pytest.mark.slow     # stages end to end

REPO = Path(__file__).resolve().parents[2]
CONTRACT_KEYS = {"schema_version", "run_id", "system", "verdict", "score", "flagged_counters", "counter_scores",
                 "cause", "baseline_runs", "methods"}


@pytest.fixture(scope="module")
def analysed(cause_lab, night_with_model, tmp_path_factory):
    """One tree analysed by every stage, shared by this module's tests (they only read it or
    re-run stages that must change nothing): a copy of the session's night of ``cause_lab`` with
    its cause model (every stage's main() in one new process, its work on two processes: ``compute.jobs: 2``),
    then ``evaluate`` here, in process, with the lab's labels."""
    lab, truth = cause_lab
    night = night_with_model.result(timeout=900)
    params = yaml.safe_load((night / "params.yaml").read_text())
    night_lab = Path(params["pull"]["source"])
    assert sorted(p.read_bytes() for p in night_lab.glob("*.tar.gz")) == \
        sorted(p.read_bytes() for p in lab.glob("*.tar.gz"))          # the same lab, written twice
    tree = tmp_path_factory.mktemp("chain") / "tree"
    shutil.copytree(night, tree)                                        # times kept: nothing looks new
    params["evaluate"]["labels"] = [str(night_lab / "target_labels.json")]
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    with rooted_at(tree):
        run_stages({"evaluate"})
        yield tree, truth


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
        assert "control_charts" in doc["methods"]
        # verdict_rule: calibrated, detector_trust: record -- the detectors whose record on the history is
        # best decide (details.trust), their p-values combined by Simes with the record's shares
        # (1 + the history's faults each caught, scaled to a mean of 1), fail at <= 5 %
        method = {"stacking": "association_rules_stacking"}
        combined = doc["details"]["combined_detectors"]
        trust = doc["details"]["trust"]
        assert combined == sorted(trust["decided_by"]) and combined
        assert set(combined) <= {"stacking", "control_charts", "clustered_regression", "cause_classifier", "within_run"}
        for name, standing in trust["record"].items():      # every detector that judged the run, with its record
            assert name in doc["details"]["p_values"] and standing["normal_runs"] >= standing["normal_failed"] >= 0
            assert standing["sentence"].count(" of ") >= 1
        weights = trust["weights"] or {d: 1.0 for d in combined}
        assert trust["basis"] in ("record", "small_history", "new_lab", "silent_null") and trust["reason"]
        if trust["basis"] != "record":      # too few normal runs, a new lab, a record that cannot weigh: said, with why
            assert trust["normal_runs"] is not None and any(
                why in trust["reason"] for why in ("too few", "lab", "finds nothing"))
        if len(combined) > 1 and trust["weights"]:
            assert sum(weights.values()) == pytest.approx(len(combined), abs=1e-3)
        ps = [doc["methods"][method.get(d, d)]["p_value"] / weights[d] for d in combined]
        simes = min(1.0, min(len(ps) * p / i for i, p in enumerate(sorted(ps), 1)))
        assert ps and doc["p_value"] == pytest.approx(simes, abs=2e-5)
        assert doc["details"]["combination"] == "simes"
        assert doc["verdict"] == ("fail" if doc["p_value"] <= 0.05 else "pass")
        ruled = set(doc["methods"]["association_rules_stacking"]["flagged_counters"]) | set(
            doc["methods"]["association_rules_bagging"]["flagged_counters"])
        charted = set(doc["methods"]["control_charts"]["flagged_counters"]) | set(
            doc["details"]["control_charts"]["counters_over_limit"])
        own = set((doc["details"].get("cause_signature") or {}).get("counters") or [])
        for c in doc["flagged_counters"]:
            if {"within_run", "cause_classifier"} & set(combined) and c not in ruled | charted or c in own:
                continue        # the run against itself names its own counters; the classifier, those that moved
                                # most; the predicted cause, the counters its verified faults named
            if c in ruled:
                assert doc["details"]["violated_rules"][c]          # every rule flag comes with its rules
                assert doc["details"]["violation_intervals"][c]     # and the intervals they broke in
            else:
                assert c in charted
        if doc["verdict"] == "fail":
            assert doc["flagged_counters"] and doc["cause"]["label"] not in (None, "none")
        else:
            assert doc["flagged_counters"] == [] and doc["cause"]["label"] == "none"
        assert (config.RUN_REPORTS / f"{run_id}.html").read_text().count(run_id) >= 2
    for r in targets:               # several deciders share the rate as their record says, or equally where
        doc = json.loads((config.RUN_REPORTS / f"{r}.json").read_text())       # no record weighs them
        trust = doc["details"]["trust"]
        assert len(doc["details"]["combined_detectors"]) == 1 or trust["weights"] or trust["basis"] != "record"
    assert "runs regressed" in (config.REPORTS / "index.html").read_text()
    metrics = json.loads((config.METRICS / "detection.json").read_text())
    for combiner in ("single", "bagging", "stacking"):
        m = metrics["loo"][combiner]
        assert 0.0 <= m["f"] <= 1.0 and m["runs"] == len([r for r in truth if "-r" in r])
    rows = pd.read_csv(config.METRICS / "detection_runs.csv")
    assert set(rows["combiner"]) == {"single", "bagging", "stacking", "headline", "control_charts", "clustered_regression",
                                     "cause_classifier", "within_run", "anchor_chart", "anchor_mannwhitney",
                                     "anchor_median"}
    for anchor in ("anchor_chart", "anchor_mannwhitney", "anchor_median"):      # the anchors beside the detectors
        assert metrics["loo"][anchor]["runs"] == len([r for r in truth if "-r" in r])
        assert metrics["targets"][anchor]["runs"] == len([r for r in truth if "-t" in r])
    assert set(rows["source"]) == {"loo", "targets"}


def test_new_night_with_nothing_new_re_mines_nothing(analysed):
    models = sorted((config.PROCESSED / "models" / "shop").glob("*.parquet"))
    stamps = {p: p.stat().st_mtime_ns for p in models}
    normalize.main()
    discretize.main()
    mine_rules.main()
    assert sorted((config.PROCESSED / "models" / "shop").glob("*.parquet")) == models
    assert all(p.stat().st_mtime_ns == stamps[p] for p in models)


def _judged_files() -> list[Path]:
    return sorted([*config.DETECTIONS.glob("*.json"), *config.STACKING_CALIBRATION.glob("*.json"),
                   *(config.CONTROL_CHARTS / "runs").glob("*.json"), *(config.CONTROL_CHARTS / "calibration").glob("*.json"),
                   *config.CLUSTERS.glob("*.json"), *(config.CLUSTERS / "calibration").glob("*.json"),
                   *config.FEATURES.glob("*.parquet"), *config.RUN_REPORTS.glob("*.json"),
                   *config.RUN_REPORTS.glob("*.html")])


def test_a_second_night_reuses_what_did_not_change_and_redoes_what_did(analysed):
    """With nothing changed, detect, control_charts, clusters,
    features and report rewrite none of their files (the night index is the night's own); when the history changes (one passed run excluded),
    every calibration and target result is computed again; put back, they come back byte for
    byte as the first night wrote them, although the first night spread each stage's runs over two
    processes (``compute.jobs: 2``) and this one computes them in one (``jobs: 1``)."""
    tree, _ = analysed
    files = _judged_files()
    assert len(files) >= 10 and any(p.suffix == ".parquet" for p in files)
    first = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files}
    stages = {"detect", "control_charts", "clusters", "features", "train_causes", "predict_causes", "report"}
    run_stages(stages)
    assert _judged_files() == files
    assert [p for p in files if p.stat().st_mtime_ns != first[p][0]] == []
    params_path = tree / "params.yaml"
    original = params_path.read_text()
    params = yaml.safe_load(original)
    index = json.loads(config.VALID_INDEX.read_text())["valid"]
    dropped = min(r for r, row in index.items() if row["verdict"] == "pass")
    params["history"]["exclude"] = [dropped]
    params_path.write_text(yaml.safe_dump(params))
    try:
        run_stages(stages)
        assert [p for p in files if p.stat().st_mtime_ns == first[p][0]] == []     # every one recomputed
        calibration = json.loads((config.STACKING_CALIBRATION / "shop.json").read_text())
        assert dropped not in calibration["runs"]
    finally:
        params = yaml.safe_load(original)
        assert params["compute"]["jobs"] == 2
        params["compute"]["jobs"] = 1
        params_path.write_text(yaml.safe_dump(params))
    try:
        run_stages(stages)
    finally:
        params_path.write_text(original)
    assert {p: p.read_bytes() for p in files} == {p: b for p, (_, b) in first.items()}


def test_edges_are_learned_over_the_passed_runs_only(analysed):
    tree, truth = analysed
    spec = json.loads(config.edges_path("shop").read_text())
    passed = {r for r, t in truth.items() if "-r" in r and t["verdict"] == "pass"}
    assert set(spec["training_runs"]) == passed
    assert spec["reference_load"] > 0


def test_cause_models_are_versioned_safe_files_with_metrics(analysed):
    tree, truth = analysed
    latest = json.loads(config.latest_cause_model("shop").read_text())
    meta = json.loads((config.cause_models_dir("shop") / latest["meta"]).read_text())
    assert meta["training_data_sha256"] == cause_features.frame_digest(pd.read_parquet(config.features_path("shop")))
    model = store.load_model(config.cause_models_dir("shop") / latest["model"])
    assert sorted(model.classes_) == ["cpu_hot_path", "extra_db_query", "none"]
    metrics = json.loads((config.METRICS / "causes.json").read_text())
    assert list(metrics["shop"]["learners"]) == [metrics["shop"]["best"]]       # the night trains one learner
    # evaluate compares every learner afterwards, the night's row as the night measured it
    compared = json.loads((config.METRICS / "cause_learners.json").read_text())["shop"]
    assert len(compared["learners"]) >= 6 and compared["in_use"] == metrics["shop"]["best"]
    assert compared["learners"][compared["in_use"]] == metrics["shop"]["learners"][compared["in_use"]]
    for m in compared["learners"].values():
        assert 0.0 <= m["accuracy"] <= 1.0 and m["gain"] == pytest.approx(m["accuracy"] / compared["random_accuracy"], abs=1e-3)
    curve = pd.read_csv(config.METRICS / "causes_learning_curve.csv")
    assert set(curve["learner"]) <= set(compared["learners"]) and len(curve)
    # a second night with no new verified run retrains nothing
    before = sorted(p.name for p in config.cause_models_dir("shop").iterdir())
    stamp = (config.cause_models_dir("shop") / latest["model"]).stat().st_mtime_ns
    train_causes.main()
    assert sorted(p.name for p in config.cause_models_dir("shop").iterdir()) == before
    assert (config.cause_models_dir("shop") / latest["model"]).stat().st_mtime_ns == stamp


def test_control_chart_results_and_metrics(analysed):
    tree, truth = analysed
    cal = json.loads(config.calibration_path("shop").read_text())
    assert cal["threshold"] == pytest.approx(max(cal["normal_scores"].values()))
    for run_id in (r for r in truth if "-t" in r):
        res = json.loads(config.chart_path(run_id).read_text())
        # calibrated: Bonferroni's minimum of the run score's and the window score's p-values
        assert res["p_value"] == pytest.approx(min(1.0, 2 * min(res["p_run"], res["p_window"])), abs=3e-6)  # 6 decimals each
        assert res["verdict"] == ("fail" if res["p_value"] <= res["false_alarm_rate"] else "pass")
        assert len(cal["normal_scores"]) == len(cal["window_scores"]) >= 2
        assert all(0.0 <= v <= 1.0 for v in res["counter_scores"].values())
    metrics = json.loads((config.METRICS / "control_charts.json").read_text())
    assert metrics["loo"]["runs"] == len([r for r in truth if "-r" in r])


def test_rule_flags_respect_the_practical_change_and_new_environment_filters(analysed):
    tree, truth = analysed
    from pipelines.systems import history
    from pipelines.storage import atomic
    index = atomic.read_json(config.VALID_INDEX)["valid"]
    new_env = [r for r, t in truth.items() if t.get("new_environment")]
    assert new_env
    for run_id in sorted(r for r in truth if "-t" in r):
        doc = json.loads((config.DETECTIONS / f"{run_id}.json").read_text())
        flagged = {c for m in doc["methods"].values() for c in m["flagged_counters"]}
        small = doc["details"]["below_min_rel_change"]
        assert all(v < 0.02 for v in small.values()) and not set(small) & flagged
        skipped = set(doc["details"]["not_analysed"].get("environment_dependent_in_new_environment", []))
        assert not skipped & flagged
        baseline = history.baseline_for(run_id, index, window=40)
        seen = [index[b]["environment"] for b in baseline]
        if index[run_id]["environment"] in seen or len({json.dumps(e, sort_keys=True) for e in seen}) < 2:
            assert not skipped               # a known lab, or a history of one lab: nothing to skip


def test_a_target_in_a_new_lab_is_not_judged_on_counters_that_differ_between_labs(tree, tmp_path_factory):
    """Eight passed runs over the simulator's labs, then a normal run on a lab none of them used.

    The history has no failed run (as SMD's): every later stage must still write its outputs."""
    from pipelines.systems import history
    from pipelines.storage import atomic
    from tests.conftest import write_lab

    lab = tmp_path_factory.mktemp("labs")
    truth = write_lab(lab, history_causes=[], n_per_cause=0, target_causes=[], n_normal=8, n_targets_normal=0)
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["pull"]["source"] = str(lab)
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    run_stages("pull")
    assert config.CAUSE_MODELS.is_dir() and json.loads((config.METRICS / "causes.json").read_text()) == {}
    index = atomic.read_json(config.VALID_INDEX)["valid"]
    new = [r for r, t in truth.items() if t.get("new_environment")]
    verdict = json.loads((config.RUN_REPORTS / f"{new[0]}.json").read_text())
    assert CONTRACT_KEYS <= set(verdict)
    assert json.loads((config.METRICS / "detection.json").read_text())["loo"]["stacking"]["normal_runs"] == 8
    assert len(new) == 1
    baseline = history.baseline_for(new[0], index, window=40)
    assert len({json.dumps(index[b]["environment"], sort_keys=True) for b in baseline}) >= 2
    doc = json.loads((config.DETECTIONS / f"{new[0]}.json").read_text())
    skipped = doc["details"]["not_analysed"]["environment_dependent_in_new_environment"]
    levels = pd.DataFrame({b: store.load_scaled(b, json.loads(config.edges_path("shop").read_text())
                                                     ["reference_load"]).median() for b in baseline}).T
    # every skipped counter's lab medians really differ by >= 2 % of its level
    for c in skipped:
        by_lab = levels[c].groupby([json.dumps(index[b]["environment"], sort_keys=True) for b in baseline]).median()
        assert (by_lab.max() - by_lab.min()) / abs(levels[c].median()) >= 0.02
    assert skipped and not set(skipped) & {c for m in doc["methods"].values() for c in m["flagged_counters"]}
    # judged by the normal runs judged across labs as it is, not by the same-lab null
    stacking = doc["methods"]["association_rules_stacking"]
    calibration = json.loads(config.stacking_calibration_path("shop").read_text())
    null = calibration["cross_lab_scores"]["insufficient"]
    assert doc["details"]["lab"]["status"] == "insufficient" and stacking["null"] == "cross_lab"
    assert stacking["normal_runs"] == len(null) >= 2 and set(null) <= set(baseline)
    assert stacking["p_value"] == pytest.approx(rule_verdict.stacking_pvalue(stacking["score"], list(null.values()),
                                                                       len(doc["baseline_runs"])), abs=1e-6)
    chart = json.loads(config.chart_path(new[0]).read_text())
    charted = json.loads(config.calibration_path("shop").read_text())["cross_lab"]["insufficient"]
    assert chart["null"] == "cross_lab" and chart["threshold"] == pytest.approx(max(charted["normal_scores"].values()),
                                                                                abs=1e-4)
    assert verdict["methods"]["control_charts"]["null"] == "cross_lab"
    # this normal run of a new lab fails against the same-lab null; judged as the normal runs
    # judged across labs, it passes
    same_lab = rule_verdict.stacking_pvalue(stacking["score"], list(calibration["normal_scores"].values()),
                                      len(doc["baseline_runs"]))
    assert same_lab <= 0.05 < stacking["p_value"]
    assert verdict["verdict"] == "pass" and verdict["cause"] == {"label": "none", "probability": None, "known": True}


def _snapshot(*dirs: Path, skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    return {str(p.relative_to(config.ROOT)): p.read_bytes() for d in dirs for p in sorted(d.rglob("*"))
            if p.is_file() and not any(s in p.name for s in skip)}


def _temporaries() -> list[str]:
    return sorted(str(p) for d in (config.DATA, config.REPORTS, config.METRICS) for p in d.rglob("*.tmp"))


def _killed(code: str, tree: Path) -> int:
    """Run ``code`` in a child process of the tree; it ends by ``os._exit`` at the injected point."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "REGRESSLAB_ROOT": str(tree), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True).returncode


def test_a_report_killed_between_a_verdict_file_and_its_page_resumes_byte_identical(analysed):
    """A hard exit after a run's verdict JSON and before its HTML leaves a run
    with half its outputs; the next report rewrites everything byte for byte, no temporary left.
    On one process the stage itself dies; on two, a worker dies and the stage stops with an error
    (its pool broken); either way the next report restores every file."""
    import shutil
    tree, truth = analysed
    report.main()
    before = _snapshot(config.RUN_REPORTS, skip=(".tmp",))
    for jobs in (1, 2):
        shutil.rmtree(config.RUN_REPORTS)
        code = ("import os; from pipelines import config, parallel; from pipelines.stages import report\n"
                "from pipelines.storage import atomic\n"
                f"parallel.set_jobs({jobs})\n"
                "write = atomic.write_text_atomic\n"
                "def dying(path, text):\n"
                "    if str(path).endswith('.html') and config.RUN_REPORTS in __import__('pathlib').Path(path).parents:\n"
                "        os._exit(9)\n"
                "    write(path, text)\n"
                "atomic.write_text_atomic = dying; report.main()")
        code_seen = _killed(code, tree)
        left = sorted(p.name for p in config.RUN_REPORTS.iterdir())
        assert left and all(name.endswith(".json") for name in left)       # verdicts without their pages
        if jobs == 1:
            assert code_seen == 9 and len(left) == 1
        else:
            assert code_seen not in (0, 9) and len(left) <= 2          # a worker died, the stage did not finish
        report.main()
        assert _snapshot(config.RUN_REPORTS) == before
        assert _temporaries() == []


def test_a_lone_new_report_writes_its_compare_pages_on_two_processes_as_one_would(analysed, tmp_path, monkeypatch):
    """One target's report gone (a second night's one new archive): the stage writes it in its own
    process and its compare pages on the two processes of ``compute.jobs``; every file of the
    run pages and compare pages comes back byte for byte as the night wrote it."""
    import os

    from pipelines import parallel
    from pipelines.reporting import compare

    tree, _ = analysed
    report.main()
    before = _snapshot(config.RUN_REPORTS, config.COMPARE_REPORTS)
    run_id = sorted(p.stem for p in config.RUN_REPORTS.glob("*.json"))[0]
    for path in [*config.RUN_REPORTS.glob(f"{run_id}.*"), *config.COMPARE_REPORTS.glob(f"*{run_id}*")]:
        path.unlink()
    from pipelines.verdict import headline

    pids = tmp_path / "pids"

    def spy(module, name: str) -> None:
        original = getattr(module, name)

        def spied(*args, **kw):
            with open(pids, "a") as fh:
                fh.write(f"{name} {os.getpid()}\n")
            return original(*args, **kw)
        monkeypatch.setattr(module, name, spied)
    spy(compare, "compare_runs")
    spy(headline, "compose")
    parallel.set_jobs(2)
    try:
        report.main()
    finally:
        parallel.set_jobs(None)
    assert _snapshot(config.RUN_REPORTS, config.COMPARE_REPORTS) == before
    seen = [line.split() for line in pids.read_text().splitlines()]
    assert [pid for name, pid in seen if name == "compose"] == [str(os.getpid())]     # the run, here
    pages = [pid for name, pid in seen if name == "compare_runs"]
    assert len(pages) >= 2 and str(os.getpid()) not in pages                          # its pages, in workers


def test_a_training_killed_inside_the_model_cache_resumes_with_no_temporary_left(analysed):
    """A hard exit while the skops model is written (inside ``atomic_path``,
    before its rename) leaves ``.<version>.skops.<pid>.*.tmp`` and no model; the next run removes the
    temporary, trains the same model again (same bytes) and points ``latest`` at it.  One quick
    learner and one feature design keep the three trainings short; the module's tree is restored afterwards."""
    import shutil
    tree, truth = analysed
    params_text = (tree / "params.yaml").read_text()
    kept = {p: p.read_bytes() for p in [config.METRICS / "causes.json"]}
    shutil.copytree(config.CAUSE_MODELS, tree / "cause_models.bak")
    try:
        params = yaml.safe_load(params_text)
        params["train_causes"].update(learners=["logistic_regression"], learning_curve_repeats=1,
                                      learning_curve_learners=1, feature_designs=[["kinds"]])   # one design: no choosing
        (tree / "params.yaml").write_text(yaml.safe_dump(params))
        shutil.rmtree(config.CAUSE_MODELS)
        train_causes.main()                                  # the reference: one quick model
        models = config.cause_models_dir("shop")
        before = _snapshot(models, skip=(".json",))
        latest = config.latest_cause_model("shop").read_bytes()
        shutil.rmtree(models)
        code = ("import os; from pipelines.stages import train_causes; from pipelines.storage import atomic\n"
                "replace = os.replace\n"
                "def dying(src, dst):\n"
                "    if str(dst).endswith('.skops'):\n"
                "        os._exit(9)\n"
                "    replace(src, dst)\n"
                "atomic.os.replace = dying; train_causes.main()")
        assert _killed(code, tree) == 9
        assert [p.name.endswith(".tmp") for p in models.iterdir()] == [True]
        train_causes.main()
        assert _snapshot(models, skip=(".json",)) == before
        assert config.latest_cause_model("shop").read_bytes() == latest
        assert _temporaries() == []
    finally:
        (tree / "params.yaml").write_text(params_text)
        shutil.rmtree(config.CAUSE_MODELS)
        shutil.move(str(tree / "cause_models.bak"), str(config.CAUSE_MODELS))
        for path, data in kept.items():
            path.write_bytes(data)


def test_clustered_regression_models_reach_the_verdict_file_and_the_page(analysed):
    """The clusters stage models every target; the verdict file carries
    the contract's ``methods.clustered_regression`` (verdict, max_prediction_error) and the page
    lists the clusters, worst first."""
    tree, truth = analysed
    targets = sorted(r for r in truth if "-t" in r)
    for run_id in targets:
        result = json.loads(config.cluster_path(run_id).read_text())
        assert result["verdict"] in ("pass", "fail") and result["baseline_runs"]
        excess = [c["excess_error"] for c in result["clusters"]]           # worst first
        assert excess == sorted(excess, reverse=True) and result["max_excess_error"] == excess[0]
        assert result["max_prediction_error"] == max(c["error"] for c in result["clusters"])
        assert all(c["excess_error"] == pytest.approx(c["error"] - c["baseline_error"], abs=2e-6)
                   for c in result["clusters"])
        assert result["verdict"] == ("fail" if result["p_value"] <= result["false_alarm_rate"] else "pass")
        doc = json.loads(config.run_report_path(run_id).read_text())
        method = doc["methods"]["clustered_regression"]
        assert method["verdict"] == result["verdict"]
        assert method["max_prediction_error"] == result["max_prediction_error"]
        page = config.run_report_path(run_id, "html").read_text()
        assert "Clustered regression models" in page and 'id="clusters"' in page
    metrics = json.loads((config.METRICS / "detection.json").read_text())
    assert metrics["targets"]["clustered_regression"]["runs"] == len(targets)
