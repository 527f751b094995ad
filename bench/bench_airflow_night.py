"""One night of the example lab through a real Airflow: LocalExecutor, parallel workers.

Starts ``airflow standalone`` (API server, scheduler, DAG processor, triggerer; metadata
DB on SQLite) in a scratch AIRFLOW_HOME with ``LocalExecutor`` and ``parallelism`` > 1,
points ``REGRESSLAB_ROOT`` at a scratch tree whose ``pull.source`` is the example lab,
unpauses ``nightly_regression_analysis`` (the scheduler starts tonight's run) and, with
``--with-retrain``, waits for the ``retrain_cause_models`` run its asset event starts and
triggers a second night; prints each run's wall time and how many task instances ran at
the same time (from the metadata DB).

    python -m bench.bench_airflow_night [--source data/example] [--parallelism 4] [--with-retrain]
                                        [--idle-sleep 0.2]   # the scheduler's, as the docs set it

With ``--compare``, the same night's stages then run one after the other as ``dvc repro`` runs
them (``python -m pipelines.stages.<stage>``, the stages the nightly DAG runs: not ``features`` and
``train_causes``, which the retraining DAG runs, nor the analysts' ``evaluate``) in another
scratch tree, and the ratio of the night's own duration (its DAG run's start to end in the metadata
DB) to their wall time is printed (the goal: within 1.2x).  The retraining DAG stays paused unless
``--with-retrain``: otherwise it would train beside the night on the same cores, work the compared
stages do not do.  ``--source`` may be any archive folder, e.g. the one ``bench/bench_night.py
--keep DIR`` generates (``DIR/source``).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
from pipelines.orchestration import stage_graph  # noqa: E402 -- after the path is set

AIRFLOW = str(Path(sys.executable).parent / "airflow")


def airflow(args: list[str], env: dict, timeout: int = 300) -> str:
    return subprocess.run([AIRFLOW, *args], env=env, capture_output=True, text=True, timeout=timeout,
                          check=True).stdout


def db_rows(db: Path, sql: str, args: tuple) -> list[tuple]:
    """Rows of the metadata DB (read-only, so the polling costs the night no CLI process: each
    ``airflow`` command is a Python start-up and Airflow's imports, seconds of CPU)."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            return con.execute(sql, args).fetchall()
        finally:
            con.close()
    except sqlite3.OperationalError:          # not created yet, or locked by a writer: ask again
        return []


def wait_for_run(dag_id: str, run_id: str, db: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = db_rows(db, "SELECT state FROM dag_run WHERE dag_id = ? AND run_id = ?", (dag_id, run_id))
        if rows and rows[0][0] in ("success", "failed"):
            return rows[0][0]
        time.sleep(2)
    return "timeout"


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (every core; /proc/stat)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(x) for x in fields]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")      # all but idle and iowait


def session_cpu(sid: int) -> dict[str, float]:
    """CPU seconds (user + system) of the live processes of session ``sid`` (``airflow standalone``'s
    scheduler, API server, DAG processor, triggerer and executor workers), by command."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()
        if int(rest[3]) != sid:             # field 6: the session id
            continue
        words = [w for w in cmd.split() if not w.startswith("-") and "/" not in w]
        name = " ".join(words[:2]) or "?"
        out[name] = out.get(name, 0.0) + (int(rest[11]) + int(rest[12])) / tick       # utime + stime
    return out


def concurrency(db: Path, dag_id: str, run_id: str) -> tuple[int, float, list[tuple]]:
    con = sqlite3.connect(db)
    rows = con.execute("SELECT task_id, map_index, start_date, end_date, state FROM task_instance "
                       "WHERE dag_id = ? AND run_id = ? AND start_date IS NOT NULL", (dag_id, run_id)).fetchall()
    con.close()
    events = []
    for _, _, start, end, _ in rows:
        s = datetime.fromisoformat(start).timestamp()
        e = datetime.fromisoformat(end).timestamp() if end else s
        events += [(s, 1), (e, -1)]
    level = peak = 0
    for _, step in sorted(events, key=lambda x: (x[0], x[1])):
        level += step
        peak = max(peak, level)
    starts = [datetime.fromisoformat(r[2]).timestamp() for r in rows]
    ends = [datetime.fromisoformat(r[3]).timestamp() for r in rows if r[3]]
    return peak, (max(ends) - min(starts)) if rows and ends else 0.0, rows


def run_duration(db: Path, dag_id: str, run_id: str) -> float:
    """The DAG run's own duration (the metadata DB's start and end), without this script's polling."""
    con = sqlite3.connect(db)
    row = con.execute("SELECT start_date, end_date FROM dag_run WHERE dag_id = ? AND run_id = ?",
                      (dag_id, run_id)).fetchone()
    con.close()
    if not row or not row[0] or not row[1]:
        return float("nan")
    return datetime.fromisoformat(row[1]).timestamp() - datetime.fromisoformat(row[0]).timestamp()


def report_run(dag_id: str, run_id: str, state: str, wall: float, db: Path) -> float:
    """Print the run's figures; return its own duration (start to end in the metadata DB)."""
    peak, span, rows = concurrency(db, dag_id, run_id)
    own = run_duration(db, dag_id, run_id)
    print(f"{dag_id} ({run_id}): {state} in {own:.0f} s from its start to its end ({wall:.0f} s from the unpause "
          f"or trigger to this script seeing it end; task span {span:.0f} s), {len(rows)} task instances, "
          f"at most {peak} running at once", flush=True)
    print("its tasks (instances: first start .. last end after the first task's start, seconds in all): "
          + "; ".join(task_spans(rows)), flush=True)
    return own


def task_spans(rows: list[tuple]) -> list[str]:
    """Per task: its instances, when the first started and the last ended (seconds after the run's
    first task started) and the seconds its instances took in all, in order of start."""
    if not rows:
        return []
    t0 = min(datetime.fromisoformat(r[2]).timestamp() for r in rows)
    spans: dict[str, list[float]] = {}
    for task, _, start, end, _ in rows:
        s = datetime.fromisoformat(start).timestamp() - t0
        e = (datetime.fromisoformat(end).timestamp() - t0) if end else s
        first, last, n, total = spans.get(task, [s, e, 0, 0.0])
        spans[task] = [min(first, s), max(last, e), n + 1, total + e - s]
    return [f"{task} x{n}: {first:.0f}..{last:.0f} ({total:.0f} s)"
            for task, (first, last, n, total) in sorted(spans.items(), key=lambda kv: kv[1][0])]


def first_run(dag_id: str, db: Path, timeout: float) -> str | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = db_rows(db, "SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id", (dag_id,))
        if rows:
            return rows[-1][0]
        time.sleep(2)
    return None


def night(dag_id: str, env: dict, timeout: float, db: Path, *, trigger: bool, sid: int) -> float:
    """Wait for the run the scheduler starts (unpausing a cron DAG, or an asset event), or trigger one;
    return the run's own duration.  Prints the CPU seconds the machine spent meanwhile and those of
    Airflow's own long-lived processes (what the tasks did not use)."""
    started, busy, own = time.monotonic(), busy_seconds(), session_cpu(sid)
    if trigger:
        run_id = f"bench_{dag_id}_{int(time.time())}"
        airflow(["dags", "trigger", dag_id, "--run-id", run_id], env)
    else:
        run_id = first_run(dag_id, db, timeout)
        if run_id is None:
            print(f"{dag_id}: no run started", flush=True)
            return float("nan")
    state = wait_for_run(dag_id, run_id, db, timeout)
    duration = report_run(dag_id, run_id, state, time.monotonic() - started, db)
    busy, after = busy_seconds() - busy, session_cpu(sid)
    spent = {name: after[name] - own.get(name, 0.0) for name in after}
    print(f"CPU meanwhile: {busy:.0f} s busy on {os.cpu_count()} cores; Airflow's own processes "
          f"{sum(spent.values()):.0f} s (" + ", ".join(f"{k} {v:.0f}" for k, v in sorted(spent.items(), key=lambda kv: -kv[1])
                                                   if v >= 0.5) + ")", flush=True)
    return duration


NIGHT_STAGES = stage_graph.select("pull", through="report", skip=("features", "train_causes"),
                                  also=("commit_changes",))


def stages_night(params: dict, scratch: Path) -> float:
    """Wall seconds of the night's stages run one after the other in a fresh tree, as ``dvc repro`` does."""
    root = scratch / "stages_tree"
    root.mkdir()
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    env = dict(os.environ, REGRESSLAB_ROOT=str(root), PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    start = time.monotonic()
    seconds = {}
    for stage in NIGHT_STAGES:
        t = time.monotonic()
        subprocess.run([sys.executable, "-m", f"pipelines.stages.{stage}"], cwd=REPO, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds[stage] = time.monotonic() - t
    print("the stages' seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()), flush=True)
    return time.monotonic() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=str(REPO / "data" / "example"))
    ap.add_argument("--parallelism", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--with-retrain", action="store_true")
    ap.add_argument("--compare", action="store_true", help="then time the same stages run one after the other")
    ap.add_argument("--airflow-jobs", type=int, default=None,
                    help="compute.jobs of the Airflow tree only (default: params.yaml's, as the stages' tree)")
    ap.add_argument("--idle-sleep", type=float, default=0.2,
                    help="[scheduler] scheduler_idle_sleep_time: 0.2 s as docs/operations/airflow.md sets it "
                         "(Airflow's default: 1)")
    ap.add_argument("--runs-per-task", type=int, default=None,
                    help="orchestration.runs_per_task of the Airflow tree (default: params.yaml's)")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="regresslab-airflow-"))
    home, root = scratch / "airflow_home", scratch / "tree"
    home.mkdir()
    root.mkdir()
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["pull"]["source"] = str(Path(args.source).resolve())
    for key in ("source", "labels"):          # the example's commit series, from this checkout
        if params["commit_changes"].get(key):
            params["commit_changes"][key] = str(REPO / params["commit_changes"][key])
    airflow_params = dict(params, compute=dict(params["compute"], jobs=args.airflow_jobs)) \
        if args.airflow_jobs is not None else params
    if args.runs_per_task is not None:
        airflow_params = dict(airflow_params, orchestration=dict(params["orchestration"],
                                                                 runs_per_task=args.runs_per_task))
    (root / "params.yaml").write_text(yaml.safe_dump(airflow_params))
    port = 8080 + os.getpid() % 500
    env = dict(os.environ, AIRFLOW_HOME=str(home), REGRESSLAB_ROOT=str(root), PYTHONPATH=str(REPO),
               AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "dags"), AIRFLOW__CORE__PLUGINS_FOLDER=str(REPO / "plugins"),
               AIRFLOW__CORE__LOAD_EXAMPLES="False", AIRFLOW__CORE__EXECUTOR="LocalExecutor",
               AIRFLOW__CORE__PARALLELISM=str(args.parallelism),
               AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home / 'airflow.db'}",
               AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="5", AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL="5",
               AIRFLOW__API__PORT=str(port), AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://localhost:{port}/execution/")
    # how soon a finished task's successor is scheduled (the night is a chain of short tasks)
    env["AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME"] = str(args.idle_sleep)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    airflow(["db", "migrate"], env, timeout=600)
    log = open(scratch / "standalone.log", "w")
    proc = subprocess.Popen([AIRFLOW, "standalone"], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        for _ in range(120):                              # wait for the DAG processor to parse the DAGs
            out = airflow(["dags", "list", "-o", "json"], env)
            if "nightly_regression_analysis" in out:
                break
            time.sleep(5)
        print(f"Airflow {airflow(['version'], env).strip()}, LocalExecutor, parallelism {args.parallelism}, "
              f"scheduler idle sleep {args.idle_sleep} s, source {args.source}")
        db = home / "airflow.db"
        # unpausing the cron DAG starts tonight's run (catchup=False: the latest interval only);
        # with --with-retrain its asset event then starts the retraining DAG, and a second night is
        # triggered by hand.  Without it the retraining DAG stays paused: it would run beside the
        # night on the same cores, doing work (features, train_causes) the compared stages leave out
        if args.with_retrain:
            airflow(["dags", "unpause", "retrain_cause_models"], env)
        airflow(["dags", "unpause", "nightly_regression_analysis"], env)
        first = night("nightly_regression_analysis", env, args.timeout, db, trigger=False, sid=proc.pid)
        if args.with_retrain:
            night("retrain_cause_models", env, args.timeout, db, trigger=False, sid=proc.pid)
            night("nightly_regression_analysis", env, args.timeout, db, trigger=True, sid=proc.pid)
        print(f"reports: {root / 'reports' / 'index.html'}; logs: {scratch}")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    if args.compare:
        stages = stages_night(params, scratch)
        print(f"the same stages one after the other (as dvc repro): {stages:.0f} s; "
              f"Airflow's first night / stages = {first / stages:.2f}"
              + (" (the retraining ran beside the night)" if args.with_retrain else ""), flush=True)
    if os.environ.get("KEEP_SCRATCH") != "1":
        shutil.rmtree(root / "data", ignore_errors=True)
        shutil.rmtree(scratch / "stages_tree", ignore_errors=True)


if __name__ == "__main__":
    main()
