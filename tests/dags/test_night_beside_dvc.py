"""The nightly DAG and ``dvc repro`` on one checkout at once (its own file, so
that ``pytest -n 2 --dist loadfile`` runs it beside the DAG's end-to-end test, not after it)."""
from __future__ import annotations

import pytest

import json
import subprocess

from tests.dags.test_nightly_dag import PY, REPO, migrated_home

pytestmark = pytest.mark.slow     # stages end to end


def test_an_airflow_night_beside_dvc_repro_waits_says_why_and_corrupts_nothing(tmp_path, migrated_airflow_db):
    """The nightly DAG and ``dvc repro report`` (the night's stages) on one checkout at once.  A process
    holds the data folder, so both are certain to meet it: ``dvc repro`` waits in its first stage
    that locks it, the Airflow night in its first task that locks it (``pull`` or ``commit_changes``: ``dag.test()`` may take either first), and each says why (stage, holder).
    Once it is free they take turns, stage by stage; both succeed, every JSON file parses
    strictly, no temporary file is left, every target has its verdict, and no task of the night failed
    or was retried (every output a task may read is a DVC ``persist`` output, pruned by its stage
    under the lock, since DVC deletes the others before a stage's command runs).  A last ``dvc repro report``
    then finds what the Airflow night wrote as ``dvc.lock`` recorded it: it re-runs only ``pull``
    (always changed) and ``commit_changes``, whose known change clusters are state kept from night
    to night (a second night over the same series calls no cluster new), nothing else."""
    from tests.pipeline.test_concurrency import (
        _dvc,
        _dvc_env,
        _hold,
        _repro,
        _wait_for,
        dvc_checkout,
        leftovers,
        strict_json_files,
    )

    root = dvc_checkout(tmp_path / "checkout")
    subprocess.run([*_dvc(), "repro", "labsim", "commitsim"], cwd=root, env=_dvc_env(root), check=True,
                   capture_output=True, timeout=600)               # the example Airflow's pull reads
    env = migrated_home(tmp_path / "airflow_home", root, migrated_airflow_db)
    holder, release = _hold(root, tmp_path)
    dvc_log, night_log = tmp_path / "dvc.log", tmp_path / "night.log"
    try:
        repro = _repro(root, dvc_log, "report")
        _wait_for(dvc_log, ": waiting for the data folder", repro)
        night = subprocess.Popen([PY, "-c", (
            "from airflow.models.dagbag import DagBag\n"
            f"dag = DagBag(dag_folder={str(REPO / 'dags')!r}).dags['nightly_regression_analysis']\n"
            "print('STATE', dag.test().state, flush=True)\n")], env=env, stdout=open(night_log, "w"),
            stderr=subprocess.STDOUT)
        _wait_for(night_log, ": waiting for the data folder", night)    # its first task to lock (pull or commit_changes)
    finally:
        release.touch()
        holder.wait(timeout=60)
    assert night.wait(timeout=900) == 0 and "STATE success" in night_log.read_text(), night_log.read_text()[-5000:]
    # no task of the night met a file that dvc repro had deleted under it (DVC removes a stage's
    # non-persistent outputs before its command takes the data lock): no failure, no retry
    assert "Task failed with exception" not in night_log.read_text(), night_log.read_text()[-8000:]
    assert repro.wait(timeout=900) == 0, dvc_log.read_text()[-5000:]
    for log in (dvc_log, night_log):
        assert f"locked by pid {holder.pid}" in log.read_text() and "holder-test" in log.read_text()
    assert strict_json_files(root) > 10
    assert leftovers(root) == []
    valid = json.loads((root / "data" / "interim" / "valid_runs.json").read_text())["valid"]
    targets = {r for r, row in valid.items() if row["verdict"] is None}
    assert len(targets) >= 2 and {p.stem for p in (root / "reports" / "runs").glob("*.json")} == targets
    last = subprocess.run([*_dvc(), "repro", "report"], cwd=root, env=_dvc_env(root), capture_output=True,
                          text=True, timeout=900)
    assert last.returncode == 0, last.stdout[-3000:] + last.stderr[-3000:]
    ran = [line.split("'")[1] for line in last.stdout.splitlines() if line.startswith("Running stage")]
    assert set(ran) <= {"pull", "commit_changes"}, last.stdout
