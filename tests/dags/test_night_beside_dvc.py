"""The nightly DAG and two ``dvc repro`` on one checkout at once (its own file, so
that ``pytest -n 2 --dist loadfile`` runs it beside the DAG's end-to-end test, not after it)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.storage import atomic
from tests.conftest import ONE_DESIGN
from tests.dags.test_nightly_dag import PY, REPO, migrated_home
from tests.pipeline.test_concurrency import _hold

pytestmark = pytest.mark.slow     # stages end to end


TINY_EXAMPLE = {"labsim": {"systems": ["shop"], "n_normal": 3, "n_per_cause": 1, "history_causes": ["cpu_hot_path"],
                           "target_causes": ["extra_db_query"], "n_targets_normal": 1},
                "commitsim": {"n_commits": 40, "n_groups": 1, "benchmarks_per_group": 2, "runs": 3,
                              "measurements": 6, "min_gap": 8}}


def dvc_checkout(root) -> "os.PathLike":
    """A DVC project made of this repository's ``dvc.yaml``, ``pipelines/`` and ``params.yaml``
    (``dvc init --no-scm``), with a smaller embedded example (labsim, commitsim) so that a whole
    ``dvc repro`` takes a minute or two.  Its stages run ``python -m pipelines.stages.<stage>`` with the
    checkout as the working directory, hence as the project root, as on a user's clone."""
    import yaml

    root.mkdir(parents=True)
    shutil.copytree(REPO / "pipelines", root / "pipelines", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "dvc.yaml", root / "dvc.yaml")
    (root / "data" / "triage").mkdir(parents=True)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    for block, values in TINY_EXAMPLE.items():
        params[block].update(values)
    params["train_causes"].update(learning_curve_repeats=1, feature_designs=ONE_DESIGN)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    subprocess.run([*_dvc(), "init", "--no-scm", "-q"], cwd=root, check=True, env=_dvc_env(root))
    return root


def _dvc() -> list[str]:
    """DVC of the interpreter running the tests (not whatever ``dvc`` is on the PATH)."""
    return [sys.executable, "-m", "dvc"]


def _dvc_env(root, **extra):
    env = {k: v for k, v in os.environ.items() if k not in ("REGRESSLAB_ROOT", "PYTHONPATH")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"     # the stages' `python`
    return {**env, "PYTHONWARNINGS": "ignore", **extra}


def _repro(root, log, *args):
    return subprocess.Popen([*_dvc(), "repro", *args], cwd=root, env=_dvc_env(root), stdout=open(log, "w"),
                            stderr=subprocess.STDOUT)


def _wait_for(path, text, proc, timeout=600):
    deadline = time.monotonic() + timeout
    while text not in (path.read_text() if path.exists() else ""):
        assert proc.poll() is None, f"ended before {text!r}: {path.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {text!r} after {timeout} s: {path.read_text()[-3000:]}"
        time.sleep(0.2)


def strict_json_files(root) -> int:
    """Parse every JSON file under ``root`` (not DVC's own) with a parser that refuses NaN and
    Infinity; how many."""
    def refuse(token):
        raise ValueError(f"non-strict JSON constant {token}")
    n = 0
    for path in root.rglob("*.json"):
        if ".dvc" not in path.relative_to(root).parts:
            json.loads(path.read_text(), parse_constant=refuse)
            n += 1
    return n


def leftovers(root) -> list[str]:
    """Temporary files a stage left behind (``archive``'s atomic writes name them
    ``.<name>.<pid>.<random>.tmp``, pull's incoming archives ``.incoming-*``)."""
    return [str(p.relative_to(root)) for p in root.rglob(".*")
            if (p.name.endswith(atomic.TMP_SUFFIX) or p.name.startswith(".incoming"))
            and ".dvc" not in p.relative_to(root).parts]


def test_an_airflow_night_beside_two_dvc_repro_waits_says_why_and_corrupts_nothing(tmp_path, migrated_airflow_db):
    """The nightly DAG and two ``dvc repro report`` (the night's stages) on one checkout at once.  A process
    holds the data folder, so all are certain to meet it: the first ``dvc repro`` waits in its first stage
    that locks it, the Airflow night in its first task that locks it (``pull`` or ``commit_changes``: ``dag.test()`` may take either first), and each says why (stage, holder).
    The second ``dvc repro`` stops at the stage the first is running: DVC releases its repository
    lock while a stage's command runs but keeps a lock on the stage's outputs, so it gives up naming
    the first's process.
    Once it is free they take turns, stage by stage; both succeed, every JSON file parses
    strictly, no temporary file is left, every target has its verdict, and no task of the night failed
    or was retried (every output a task may read is a DVC ``persist`` output, pruned by its stage
    under the lock, since DVC deletes the others before a stage's command runs).  A last ``dvc repro report``
    then finds what the Airflow night wrote as ``dvc.lock`` recorded it: it re-runs only ``pull``
    (always changed) and ``commit_changes``, whose known change clusters are state kept from night
    to night (a second night over the same series calls no cluster new), nothing else."""
    root = dvc_checkout(tmp_path / "checkout")
    subprocess.run([*_dvc(), "repro", "labsim", "commitsim"], cwd=root, env=_dvc_env(root), check=True,
                   capture_output=True, timeout=600)               # the example Airflow's pull reads
    env = migrated_home(tmp_path / "airflow_home", root, migrated_airflow_db)
    holder, release = _hold(root, tmp_path)
    dvc_log, night_log = tmp_path / "dvc.log", tmp_path / "night.log"
    try:
        repro = _repro(root, dvc_log, "report")
        _wait_for(dvc_log, ": waiting for the data folder", repro)
        second = _repro(root, tmp_path / "second.log", "report")
        assert second.wait(timeout=300) != 0
        said = (tmp_path / "second.log").read_text()
        assert "is busy, it is being blocked by" in said and f"(PID {repro.pid})" in said, said
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
