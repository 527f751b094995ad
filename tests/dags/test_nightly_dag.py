"""The nightly DAG: DagBag import, its settings, and a real end-to-end run with dag.test().

Real Airflow: a SQLite metadata DB migrated with `airflow db migrate`, the DAG run with
`dag.test()` in a subprocess (Airflow reads its configuration from the environment at
import time, so each run gets its own process and AIRFLOW_HOME).
"""
from __future__ import annotations

import pytest

import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from pipelines.orchestration import stage_graph
from tests.conftest import night_tree, stage_env
from tests.helpers import stages_in_processes

pytestmark = pytest.mark.slow     # stages end to end

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable


def airflow_env(home: Path, root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "REGRESSLAB_ROOT": str(root),
        "PYTHONPATH": str(REPO),
    })
    return env


def dagbag_info(home: Path) -> dict:
    code = (
        "import json\n"
        "from airflow.models.dagbag import DagBag\n"
        f"bag = DagBag(dag_folder={str(REPO / 'dags')!r})\n"
        "out = {'errors': {str(k): str(v) for k, v in bag.import_errors.items()}, 'dags': {}}\n"
        "for d in bag.dags.values():\n"
        "    out['dags'][d.dag_id] = {'tags': sorted(d.tags), 'catchup': d.catchup, 'schedule': str(d.schedule),\n"
        "        'tasks': {t.task_id: [t.retries, t.retry_exponential_backoff, bool(t.on_failure_callback),\n"
        "                  t.execution_timeout is not None,\n"
        "                  type(t).__name__.endswith('MappedOperator') or\n"
        "                  type(t.task_group).__name__ == 'MappedTaskGroup'] for t in d.tasks},\n"
        "        'outlets': {t.task_id: [str(getattr(o, 'uri', o)) for o in t.outlets] for t in d.tasks if t.outlets}}\n"
        "print(json.dumps(out))\n")
    out = subprocess.run([PY, "-c", code], env=airflow_env(home, home), capture_output=True, text=True,
                         timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_dagbag_imports_cleanly_with_tags_retries_and_fan_out(tmp_path):
    info = dagbag_info(tmp_path)
    assert info["errors"] == {}
    nightly = info["dags"]["nightly_regression_analysis"]
    assert nightly["tags"] == ["nightly", "regresslab"] and nightly["catchup"] is False
    assert "0 2 * * *" in nightly["schedule"]
    tasks = nightly["tasks"]
    for stage in ("pull", "validate", "normalize", "normalize_all", "discretize", "mine_rules", "mine_rules_all",
                  "calibrate_clusters", "commit_changes", "night_index", "summary"):
        assert stage in tasks
    # mapped tasks named after their stage, one instance per batch of runs (orchestration.runs_per_task):
    # normalise and mine the new runs, the analysis of the targets
    for mapped in ("normalize", "mine_rules", "analyse_run.detect", "analyse_run.control_charts",
                   "analyse_run.clusters",
                   "analyse_run.predict_causes", "analyse_run.report"):
        assert tasks[mapped][4] is True, mapped
    for whole in ("validate", "normalize_all", "discretize", "mine_rules_all"):
        assert tasks[whole][4] is False, whole
    for retries, backoff, callback, timeout, _ in tasks.values():
        assert retries == 2 and backoff and callback and timeout
    assert nightly["outlets"] == {"announce_verified_runs": ["regresslab://history/verified-runs"]}
    retrain = info["dags"]["retrain_cause_models"]
    assert "regresslab://history/verified-runs" in retrain["schedule"]        # asset-triggered
    assert set(retrain["tasks"]) == {"features", "train_causes", "compare_learners"} and retrain["catchup"] is False


def params_of(root: Path) -> dict:
    return yaml.safe_load((root / "params.yaml").read_text())


def dag_test(dag_id: str, env: dict) -> None:
    run = subprocess.run([PY, "-c", (
        "from airflow.models.dagbag import DagBag\n"
        f"dag = DagBag(dag_folder={str(REPO / 'dags')!r}).dags[{dag_id!r}]\n"
        "print('STATE', dag.test().state)\n")], env=env, capture_output=True, text=True, timeout=900)
    assert "STATE success" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]


MODEL_STAGES = stage_graph.select("features", through="report")     # features, train_causes, predict_causes, report


def test_nightly_dag_runs_end_to_end_and_agrees_with_the_dvc_stages(tmp_path, cause_lab, night_without_model):
    """Night 1 (no cause model yet) writes the verdict files of the stages' night; the asset it
    emits triggers the retraining DAG; night 2 uses its model and writes what the stages write
    once ``features``, ``train_causes``, ``predict_causes`` and ``report`` have run on that night."""
    lab, truth = cause_lab
    by_airflow = night_tree(tmp_path / "airflow_tree", lab)
    home = tmp_path / "airflow_home"
    home.mkdir()
    env = airflow_env(home, by_airflow)
    subprocess.run([str(Path(PY).parent / "airflow"), "db", "migrate"], env=env, capture_output=True, text=True,
                   timeout=600, check=True)
    dag_test("nightly_regression_analysis", env)
    targets = sorted(r for r in truth if "-t" in r)
    first_night = night_without_model.result(timeout=900)
    for run_id in targets:
        a = json.loads((by_airflow / "reports" / "runs" / f"{run_id}.json").read_text())
        assert a == json.loads((first_night / "reports" / "runs" / f"{run_id}.json").read_text())
        assert a["cause"]["label"] in (None, "none")
    # the stages' night with a model: that night's tree, then the model's stages (the trees share nothing),
    # in a thread beside the Airflow retraining and night 2
    by_stages = tmp_path / "stage_tree"
    shutil.copytree(first_night, by_stages, symlinks=True)
    stage_runs = concurrent.futures.ThreadPoolExecutor(1).submit(stages_in_processes, stage_env(by_stages),
                                                                 MODEL_STAGES)
    dag_test("retrain_cause_models", env)
    compared = json.loads((by_airflow / "metrics" / "cause_learners.json").read_text())      # model selection
    assert len(compared["shop"]["learners"]) == len(params_of(by_airflow)["train_causes"]["learners"])
    dag_test("nightly_regression_analysis", env)
    stage_runs.result(timeout=900)
    for run_id in targets:
        a = json.loads((by_airflow / "reports" / "runs" / f"{run_id}.json").read_text())
        b = json.loads((by_stages / "reports" / "runs" / f"{run_id}.json").read_text())
        assert a == b
        assert (by_airflow / "reports" / "runs" / f"{run_id}.html").exists()
    # night 2 used the model the asset-triggered retraining made: every target has a cause prediction from
    # it (the headline may still pass a run: with three normal runs the calibrated charts rarely fail one)
    model = json.loads((by_airflow / "data" / "processed" / "cause_models" / "shop" / "latest.json").read_text())
    for run_id in targets:
        cause = json.loads((by_airflow / "data" / "processed" / "causes" / f"{run_id}.json").read_text())
        assert cause["model_version"] == model["version"] and cause["label"] is not None
    assert "runs regressed" in (by_airflow / "reports" / "index.html").read_text()



def test_a_bad_params_yaml_fails_the_night_at_once_with_the_message(tmp_path, cause_lab):
    """A misspelt key: the first task fails without its retries (none is scheduled: with them, the
    run would wait out their delays past the subprocess' timeout), the night with it, and the
    task's failure says which key."""
    lab, _ = cause_lab
    tree = night_tree(tmp_path / "tree", lab)
    with open(tree / "params.yaml", "a") as fh:
        fh.write("alerts:\n  enable: true\n")
    home = tmp_path / "airflow_home"
    home.mkdir()
    env = airflow_env(home, tree)
    subprocess.run([str(Path(PY).parent / "airflow"), "db", "migrate"], env=env, capture_output=True, text=True,
                   timeout=600, check=True)
    run = subprocess.run([PY, "-c", (
        "from airflow.models.dagbag import DagBag\n"
        f"dag = DagBag(dag_folder={str(REPO / 'dags')!r}).dags['nightly_regression_analysis']\n"
        "print('STATE', dag.test().state)\n")], env=env, capture_output=True, text=True, timeout=600)
    out = run.stdout + run.stderr
    assert "STATE failed" in run.stdout, out[-4000:]
    assert "configuration error, not retried" in out and "up_for_retry" not in out.lower()
    assert "alerts.enable: unknown key, did you mean `enabled`?" in out
