"""The nightly DAG: DagBag import, its settings, and a real end-to-end run with dag.test().

Real Airflow: a SQLite metadata DB migrated with `airflow db migrate`, the DAG run with
`dag.test()` in a subprocess (Airflow reads its configuration from the environment at
import time, so each run gets its own process and AIRFLOW_HOME).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

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


def test_dagbag_imports_cleanly_with_tags_and_retries(tmp_path):
    code = (
        "from airflow.models.dagbag import DagBag\n"
        f"bag = DagBag(dag_folder={str(REPO / 'dags')!r})\n"
        "d = bag.dags['nightly_regression_analysis']\n"
        "import json\n"
        "print(json.dumps({'errors': {str(k): str(v) for k, v in bag.import_errors.items()},"
        " 'tags': sorted(d.tags), 'catchup': d.catchup, 'schedule': str(d.schedule),"
        " 'tasks': {t.task_id: [t.retries, t.retry_exponential_backoff, bool(t.on_failure_callback),"
        " t.execution_timeout is not None] for t in d.tasks},"
        " 'order': [t.task_id for t in d.topological_sort()] if hasattr(d, 'topological_sort') else []}))\n")
    out = subprocess.run([PY, "-c", code], env=airflow_env(tmp_path, tmp_path), capture_output=True, text=True,
                         timeout=300, check=True)
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info["errors"] == {}
    assert info["tags"] == ["nightly", "regresslab"]
    assert info["catchup"] is False
    assert "0 2 * * *" in info["schedule"]
    assert set(info["tasks"]) == {"pull", "validate", "normalize", "discretize", "mine_rules", "detect"}
    for retries, backoff, callback, timeout in info["tasks"].values():
        assert retries == 2 and backoff and callback and timeout


def prepare_tree(root: Path, lab: Path) -> None:
    root.mkdir(parents=True)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["pull"]["source"] = str(lab)
    (root / "params.yaml").write_text(yaml.safe_dump(params))


def test_nightly_dag_runs_end_to_end_and_agrees_with_the_dvc_stages(tmp_path, tiny_lab):
    lab, truth = tiny_lab
    by_airflow, by_stages = tmp_path / "airflow_tree", tmp_path / "stage_tree"
    prepare_tree(by_airflow, lab)
    prepare_tree(by_stages, lab)
    home = tmp_path / "airflow_home"
    home.mkdir()
    env = airflow_env(home, by_airflow)
    subprocess.run([str(Path(PY).parent / "airflow"), "db", "migrate"], env=env, capture_output=True, text=True,
                   timeout=600, check=True)
    run = subprocess.run([PY, "-c", (
        "from airflow.models.dagbag import DagBag\n"
        f"dag = DagBag(dag_folder={str(REPO / 'dags')!r}).dags['nightly_regression_analysis']\n"
        "print('STATE', dag.test().state)\n")], env=env, capture_output=True, text=True, timeout=900)
    assert "STATE success" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    # the same stages as `dvc repro` runs them (python -m pipelines.<stage>), in another tree
    for stage in ("pull", "validate", "normalize", "discretize", "mine_rules", "detect"):
        subprocess.run([PY, "-m", f"pipelines.{stage}"], env=airflow_env(home, by_stages), capture_output=True,
                       text=True, timeout=600, check=True)
    targets = sorted(r for r in truth if "-t" in r)
    for run_id in targets:
        a = json.loads((by_airflow / "reports" / "runs" / f"{run_id}.json").read_text())
        b = json.loads((by_stages / "reports" / "runs" / f"{run_id}.json").read_text())
        assert a == b
