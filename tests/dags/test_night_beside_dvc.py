"""A lab's project made by the installed wheel, its night by ``regresslab run`` twice and by its own
nightly DAG at once (its own file, so that ``pytest -n 2 --dist loadfile`` runs it beside the DAG's
end-to-end test, not after it)."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from pipelines.storage import atomic
from tests.dags.test_nightly_dag import migrated_home
from tests.pipeline.test_concurrency import _hold

pytestmark = pytest.mark.slow     # stages end to end


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


def test_a_labs_project_from_the_wheel_runs_its_night_beside_an_airflow_night(tmp_path, installed, tiny_lab,
                                                                              migrated_airflow_db):
    """A lab's own project: ``regresslab init`` on a folder of archives, with the wheel installed into
    a venv of its own (no checkout on the path); its dvc.yaml runs ``regresslab stage`` and holds no
    simulated lab, its ``dags/`` the nightly DAG rooted at the project.  Then its night three times
    at once on the one project: ``regresslab run report`` (``dvc repro``), a second ``regresslab run
    report``, and the project's own nightly DAG (``dag.test()``, by the venv's Python).

    A process holds the data folder, so all are certain to meet it: the first ``regresslab run``
    waits in its first stage that locks it, the Airflow night in its first task that locks it
    (``pull`` or ``commit_changes``: ``dag.test()`` may take either first), and each says why
    (stage, holder).  The second ``regresslab run`` stops at the stage the first is running: DVC
    releases its repository lock while a stage's command runs but keeps a lock on the stage's
    outputs, so it gives up naming the first's process, and ``regresslab run`` says another night
    holds the project, writes no failed-night banner and sends no alert.  Once the folder is free
    the night and ``dvc repro`` take turns, stage by stage; both succeed, the run exits 3 exactly
    when a run regressed (``--fail-on-regression``), every target has its verdict and its JUnit case,
    every JSON file parses strictly, no temporary file is left, and no task of the night failed or
    was retried (every output a task may read is a DVC ``persist`` output, pruned by its stage under
    the lock, since DVC deletes the others before a stage's command runs).  A last ``regresslab run
    report`` then finds what the Airflow night wrote as ``dvc.lock`` recorded it: it re-runs
    only ``pull`` (always changed), nothing else."""
    import yaml

    from tests.helpers import wheel_venv

    lab, truth = tiny_lab
    venv, env = wheel_venv(installed, tmp_path / "venv")

    def regresslab(cwd: Path, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(venv / "regresslab"), *args], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=900)
    made = regresslab(tmp_path, "init", "perf-lab", "--source", str(lab), "--name", "shop lab")
    assert made.returncode == 0, made.stderr
    project = tmp_path / "perf-lab"
    stages = yaml.safe_load((project / "dvc.yaml").read_text())["stages"]
    assert {"labsim", "commitsim", "commit_changes"}.isdisjoint(stages) and {"pull", "report", "evaluate"} <= set(stages)
    assert all(s["cmd"] == f"regresslab stage {name}" for name, s in stages.items())
    assert not any(str(d).startswith("pipelines/") for s in stages.values() for d in s["deps"])
    assert all("detectors" in stages[s]["deps"] for s in ("detectors", "report", "evaluate"))  # the lab's own
    assert "detectors.spectral.detector:Spectral" in (project / "detectors" / "README.md").read_text()
    assert yaml.safe_load((project / "params.yaml").read_text())["pull"]["source"] == str(lab)
    assert (project / ".dvc").is_dir() and (project / ".regresslab" / "version").is_file()
    dags = sorted(p.name for p in (project / "dags").glob("*.py"))
    assert dags == ["nightly_regression_analysis.py", "retrain_cause_models.py"]
    assert f'"REGRESSLAB_ROOT", "{project}"' in (project / "dags" / dags[0]).read_text()
    assert len((project / "README.md").read_text().strip().splitlines()) <= 6
    assert regresslab(tmp_path, "init", "perf-lab", "--source", str(lab)).returncode == 1     # not over a project
    with open(project / "params.yaml", "a") as fh:
        fh.write("report:\n  junit: reports/junit.xml\n")
    assert sorted(p.name for p in (project / "objectives" / "_template").iterdir()) == ["sli.yaml", "slo.yaml"]
    shop = project / "objectives" / "shop"          # the team's objective no run of the lab meets: every target fails
    shop.mkdir()
    (shop / "slo.yaml").write_text("objectives:\n  - {sli: p95, displayName: P95, key_sli: true, pass: [{criteria: ['<1']}]}\n"
                                   "total_score: {pass: '90%'}\n")
    (shop / "sli.yaml").write_text("indicators: {p95: p95(app.response_time_ms)}\n")
    assert "objectives: shop: 1 objective(s)" in regresslab(project, "check").stdout

    airflow = migrated_home(tmp_path / "airflow_home", project, migrated_airflow_db)
    airflow.pop("PYTHONPATH")
    airflow.update(PATH=env["PATH"], AIRFLOW__CORE__DAGS_FOLDER=str(project / "dags"))
    holder, release = _hold(project, tmp_path)
    run_log, night_log, second_log = tmp_path / "run.log", tmp_path / "night.log", tmp_path / "second.log"
    try:
        first = subprocess.Popen([str(venv / "regresslab"), "run", "report", "--fail-on-regression"], cwd=project,
                                 env=env, stdout=open(run_log, "w"), stderr=subprocess.STDOUT)
        _wait_for(run_log, ": waiting for the data folder", first)
        second = subprocess.run([str(venv / "regresslab"), "run", "report"], cwd=project, env=env,
                                stdout=open(second_log, "w"), stderr=subprocess.STDOUT, timeout=300)
        said = second_log.read_text()
        assert second.returncode != 0 and "is busy, it is being blocked by" in said and "(PID " in said, said
        assert "another night holds this project" in said and "FAILED" not in said, said
        night = subprocess.Popen([str(venv / "python"), "-c", (
            "from airflow.models.dagbag import DagBag\n"
            f"dag = DagBag(dag_folder={str(project / 'dags')!r}).dags['nightly_regression_analysis']\n"
            "print('STATE', dag.test().state, flush=True)\n")], env=airflow, stdout=open(night_log, "w"),
            stderr=subprocess.STDOUT)
        _wait_for(night_log, ": waiting for the data folder", night)    # its first task to lock (pull or commit_changes)
    finally:
        release.touch()
        holder.wait(timeout=60)
    assert night.wait(timeout=900) == 0 and "STATE success" in night_log.read_text(), night_log.read_text()[-5000:]
    # no task of the night met a file that dvc repro had deleted under it (DVC removes a stage's
    # non-persistent outputs before its command takes the data lock): no failure, no retry
    assert "Task failed with exception" not in night_log.read_text(), night_log.read_text()[-8000:]
    returned = first.wait(timeout=900)
    regressed = [p.stem for p in (project / "reports" / "runs").glob("*.json")
                 if json.loads(p.read_text())["verdict"] == "fail"]
    assert returned == (3 if regressed else 0), run_log.read_text()[-5000:]
    targets = sorted(r for r in truth if "-t" in r)
    assert sorted(regressed) == targets                    # the objectives fail every one, the normal ones too
    decided = {json.loads((project / "reports" / "runs" / f"{r}.json").read_text())["details"]["decision"]["decided_by"]
               for r in targets if truth[r]["verdict"] == "pass"}
    assert decided and decided <= {"objectives", "objectives and detectors"}
    assert (f"{len(regressed)} run(s) regressed" in run_log.read_text()) == bool(regressed)
    for log in (run_log, night_log):
        assert f"locked by pid {holder.pid}" in log.read_text() and "holder-test" in log.read_text()
    assert targets and sorted(p.stem for p in (project / "reports" / "runs").glob("*.json")) == targets
    assert not (project / "data" / "example").exists()
    index = (project / "reports" / "index.html").read_text()
    assert "runs regressed" in index and "regresslab:night-failed" not in index
    cases = (project / "reports" / "junit.xml").read_text()
    assert cases.count("<testcase ") == 2 * len(targets) and f'failures="{2 * len(regressed)}"' in cases
    assert all(f"{r} · P95" in cases for r in targets)
    assert strict_json_files(project) > 10
    assert leftovers(project) == []
    last = regresslab(project, "run", "report")
    assert last.returncode == 0, last.stdout[-3000:] + last.stderr[-3000:]
    ran = [line.split("'")[1] for line in last.stdout.splitlines() if line.startswith("Running stage")]
    assert set(ran) <= {"pull"}, last.stdout
