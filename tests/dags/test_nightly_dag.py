"""The nightly DAG: DagBag import, its settings, and a real end-to-end run with dag.test().

Real Airflow: a SQLite metadata DB migrated with `airflow db migrate` (once a session, each test
starting from a copy of it), the DAG runs with `dag.test()` in a subprocess (Airflow reads its
configuration from the environment at import time, so each test gets its own process and
AIRFLOW_HOME; that process runs the test's DAG runs one after the other).
"""
from __future__ import annotations

import pytest

import collections
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from tests.conftest import night_tree

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


def migrated_home(home: Path, root: Path, migrated_db: Path) -> dict[str, str]:
    """``home`` made an AIRFLOW_HOME whose metadata DB is a copy of ``migrated_db`` (what
    ``airflow db migrate`` writes); the environment of a night in ``root`` there."""
    home.mkdir()
    shutil.copy(migrated_db, home / "airflow.db")
    return airflow_env(home, root)


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
                   "analyse_run.clusters", "analyse_run.detectors",
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


DRIVER = (
    "import os, sys\n"
    "from pathlib import Path\n"
    "from airflow.models.dagbag import DagBag\n"
    f"bag = DagBag(dag_folder={str(REPO / 'dags')!r})\n"
    "from pipelines import config\n"
    "for line in sys.stdin:\n"
    "    dag_id, root = line.split(maxsplit=1)\n"
    "    os.environ['REGRESSLAB_ROOT'] = root.strip()\n"
    "    config.use_root(Path(root.strip()))\n"
    "    print('STATE', dag_id, bag.dags[dag_id].test().state, flush=True)\n")


class DagTests:
    """One Python process that runs ``dag.test()`` on each DAG it is sent, one after the other, as
    a scheduler would run them against one metadata DB, each on the project folder it is sent with
    (``REGRESSLAB_ROOT``, as a worker of that project sets it): Airflow's imports, the DAG files'
    parse and ``dag.test()``'s in-process execution API are paid once, not once per DAG run."""

    def __init__(self, env: dict):
        self.proc = subprocess.Popen([PY, "-c", DRIVER], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.tail: collections.deque[str] = collections.deque(maxlen=300)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def run(self, dag_id: str, root: Path, expect: str = "success", timeout: float = 900) -> str:
        """``dag.test()`` on ``dag_id`` in the project ``root``; its output, once the run ended in
        ``expect`` (else fails with it)."""
        self.proc.stdin.write(f"{dag_id} {root}\n")
        self.proc.stdin.flush()
        deadline, out = time.monotonic() + timeout, []
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"{dag_id}: no end after {timeout:.0f} s\n" + "".join(self.tail)) from None
            if line is None:
                raise AssertionError(f"{dag_id}: the process ended\n" + "".join(self.tail))
            self.tail.append(line)
            out.append(line)
            if line.startswith(f"STATE {dag_id} "):
                assert line.split()[2] == expect, "".join(self.tail)
                return "".join(out)

    def close(self) -> None:
        self.proc.stdin.close()
        assert self.proc.wait(timeout=120) == 0, "".join(self.tail)


@pytest.fixture(scope="module")
def dag_tests(tmp_path_factory, migrated_airflow_db):
    """One :class:`DagTests` process for this module's DAG runs, on a copy of the session's
    migrated metadata DB (each test sends its runs with its own project folder); killed after."""
    home = tmp_path_factory.mktemp("dag_tests") / "airflow_home"
    dags = DagTests(migrated_home(home, home, migrated_airflow_db))
    yield dags
    if dags.proc.poll() is None:
        dags.proc.kill()
        dags.proc.wait()


def test_nightly_dag_runs_end_to_end_and_agrees_with_the_dvc_stages(tmp_path, cause_lab, night_without_model,
                                                                     night_with_model, dag_tests):
    """Night 1 (no cause model yet) writes the verdict files of the stages' night; the asset it
    emits triggers the retraining DAG; night 2 uses its model and writes what the stages write
    once ``features``, ``train_causes``, ``predict_causes`` and ``report`` have run on that night
    (``night_with_model``, computed beside the Airflow nights)."""
    lab, truth = cause_lab
    by_airflow = night_tree(tmp_path / "airflow_tree", lab)
    dags = dag_tests
    dags.run("nightly_regression_analysis", by_airflow)
    targets = sorted(r for r in truth if "-t" in r)
    first_night = night_without_model.result(timeout=900)
    for run_id in targets:
        a = json.loads((by_airflow / "reports" / "runs" / f"{run_id}.json").read_text())
        assert a == json.loads((first_night / "reports" / "runs" / f"{run_id}.json").read_text())
        assert a["cause"]["label"] in (None, "none")
    dags.run("retrain_cause_models", by_airflow)
    compared = json.loads((by_airflow / "metrics" / "cause_learners.json").read_text())      # model selection
    assert len(compared["shop"]["learners"]) == len(params_of(by_airflow)["train_causes"]["learners"])
    dags.run("nightly_regression_analysis", by_airflow)
    by_stages = night_with_model.result(timeout=900)
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



def test_a_bad_params_yaml_fails_the_night_at_once_with_the_message(tmp_path, cause_lab, dag_tests):
    """A misspelt key: the first task fails without its retries (none is scheduled: with them, the
    run would wait out their delays past the subprocess' timeout), the night with it, and the
    task's failure says which key."""
    lab, _ = cause_lab
    tree = night_tree(tmp_path / "tree", lab)
    with open(tree / "params.yaml", "a") as fh:
        fh.write("alerts:\n  enable: true\n")
    out = dag_tests.run("nightly_regression_analysis", tree, expect="failed", timeout=600)
    assert "configuration error, not retried" in out and "up_for_retry" not in out.lower()
    assert "alerts.enable: unknown key, did you mean `enabled`?" in out
