"""The path past one machine: the nightly DAG on the CeleryExecutor, two workers, one data folder.

Real components, started by the test: PostgreSQL (Debian's server, a cluster of its own in a
scratch directory) holds Airflow's metadata and Celery's results; Redis (Debian's) is the broker;
Airflow's API server (its execution API, which the tasks call), scheduler and DAG processor; two
``airflow celery worker`` processes, each with its own name and the project's Celery configuration
(:mod:`pipelines.orchestration.celery_config`), sharing the pipeline's data folder (``REGRESSLAB_ROOT``) as workers on several
machines share it over NFS (docs/operations/airflow.md).  The scheduler starts one night of a
small lab; the verdict files must be those of the same stages run one after the other, as
``dvc repro`` runs them, and the night's tasks must have run on both workers.

``make test`` installs ``postgresql`` and ``redis-server`` from Debian when they are missing.
PostgreSQL refuses to run as root: as root the cluster runs as the ``postgres`` user the package
creates.  What is not real: the two workers are two processes of one machine, not two machines.
"""
from __future__ import annotations

import glob
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.conftest import night_tree

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
AIRFLOW = str(Path(PY).parent / "airflow")
DAG = "nightly_regression_analysis"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(check, what: str, timeout: float, every: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def postgres_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    assert found, (f"PostgreSQL's {name} is not installed: `make test` installs Debian's postgresql "
                   f"(apt-get install postgresql redis-server)")
    return found[-1]


def as_postgres(cmd: list[str]) -> list[str]:
    """``cmd`` as the ``postgres`` user when this process is root (PostgreSQL refuses root)."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def start_postgres(stack: ExitStack, logs: Path) -> int:
    """A PostgreSQL cluster of its own (trust auth on 127.0.0.1) with a database ``airflow``, its
    server's log in ``logs/postgres.log``; its port."""
    folder = Path(tempfile.mkdtemp(prefix="regresslab-pg-"))
    stack.callback(shutil.rmtree, folder, ignore_errors=True)
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    data, port = folder / "data", free_port()
    subprocess.run(as_postgres([postgres_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "airflow",
                                "--no-sync"]), check=True, capture_output=True, text=True, timeout=120)
    server = subprocess.Popen(as_postgres([postgres_bin("postgres"), "-D", str(data), "-p", str(port),
                                           "-c", "listen_addresses=127.0.0.1",
                                           "-c", f"unix_socket_directories={folder}",
                                           "-c", "fsync=off", "-c", "max_connections=200"]),
                              stdout=subprocess.DEVNULL, stderr=open(logs / "postgres.log", "w"))
    stack.callback(stop, server)
    wait_until(lambda: subprocess.run([postgres_bin("pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
                                      capture_output=True).returncode == 0, "PostgreSQL", 60, 0.5)
    subprocess.run([postgres_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "airflow", "airflow"],
                   check=True, capture_output=True, text=True, timeout=60)
    return port


def start_redis(stack: ExitStack, folder: Path) -> int:
    redis = shutil.which("redis-server") or "/usr/bin/redis-server"
    assert Path(redis).exists(), "redis-server is not installed: `make test` installs Debian's redis-server"
    port = free_port()
    server = subprocess.Popen([redis, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                               "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stack.callback(stop, server)

    def answers() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False
    wait_until(answers, "Redis", 30, 0.2)
    return port


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM) if os.getpgid(proc.pid) == proc.pid else proc.terminate()
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_a_night_on_two_celery_workers_writes_what_the_stages_write(tmp_path, cause_lab, night_without_model):
    """The Celery night against the stages' night of the same lab (``night_without_model``: pull to
    report, no cause model yet, as the retraining DAG has not run), computed beside it."""
    lab, truth = cause_lab
    # two workers of two tasks each already share the cores
    by_celery, home = night_tree(tmp_path / "celery_tree", lab, jobs=1), tmp_path / "airflow_home"
    home.mkdir()
    with ExitStack() as stack:
        logs = tmp_path / "logs"
        logs.mkdir()
        pg, broker, api = start_postgres(stack, logs), start_redis(stack, tmp_path), free_port()
        env = dict(os.environ)
        env.update({
            "AIRFLOW_HOME": str(home), "REGRESSLAB_ROOT": str(by_celery), "PYTHONPATH": str(REPO),
            "PATH": f"{Path(PY).parent}:{env.get('PATH', '')}",
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor", "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"), "AIRFLOW__CORE__PARALLELISM": "8",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg://airflow@127.0.0.1:{pg}/airflow",
            "AIRFLOW__CELERY__BROKER_URL": f"redis://127.0.0.1:{broker}/0",
            "AIRFLOW__CELERY__RESULT_BACKEND": f"db+postgresql+psycopg://airflow@127.0.0.1:{pg}/airflow",
            "AIRFLOW__API__PORT": str(api),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api}/execution/",
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
            # the DAG files do not change during the test: parsed once, not every few seconds
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
            # what docs/operations/airflow.md has a lab's workers use: the stages imported before the pool forks
            "AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS": "pipelines.orchestration.celery_config.CELERY_CONFIG",
        })
        migrated = subprocess.run([AIRFLOW, "db", "migrate"], env=env, capture_output=True, text=True, timeout=600)
        assert migrated.returncode == 0, migrated.stdout[-2000:] + migrated.stderr[-3000:]

        def start(name: str, *args: str, **extra: str) -> None:
            proc = subprocess.Popen([AIRFLOW, *args], env={**env, **extra}, stdout=open(logs / f"{name}.log", "w"),
                                    stderr=subprocess.STDOUT, start_new_session=True)
            stack.callback(stop, proc)
        start("api-server", "api-server", "--apps", "execution", "--port", str(api))    # what the tasks call
        start("scheduler", "scheduler")
        start("dag-processor", "dag-processor")
        for worker in ("worker1", "worker2"):           # each serves its task logs on a port of its own
            start(worker, "celery", "worker", "--concurrency", "2", "--celery-hostname", f"{worker}@%h",
                  AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT=str(free_port()))

        # the metadata DB is read and the DAG unpaused directly (the column `airflow dags unpause`
        # and the REST API set): each `airflow dags ...` command costs seconds of CPU for Airflow's
        # imports, and the REST API a second application in the API server (the plugin's test
        # drives the API server with all its applications)
        metadata = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        wait_until(lambda: _rows(metadata, "SELECT dag_id FROM dag WHERE dag_id = :dag"),
                   "the DAG processor to parse the DAGs", 300, 1)
        _execute(metadata, "UPDATE dag SET is_paused = false WHERE dag_id = :dag")  # tonight's run (catchup off)

        def finished() -> str | None:
            runs = _rows(metadata, "SELECT state FROM dag_run WHERE dag_id = :dag")
            return runs[0][0] if len(runs) == 1 and runs[0][0] in ("success", "failed") else None
        try:
            state = wait_until(finished, "the night to end", 900, 2)
        except AssertionError:
            raise AssertionError("the night did not end: " + _tail(logs)) from None
        assert state == "success", _tail(logs)
        celery_ids = _celery_task_ids(metadata)
    # every task of the night ran on one of the two workers, and both worked, on one data folder
    ran = {w: set(re.findall(r"execute_workload\[([0-9a-f-]+)\] succeeded", (logs / f"{w}.log").read_text()))
           for w in ("worker1", "worker2")}
    assert len(celery_ids) >= 20 and set(celery_ids) == ran["worker1"] | ran["worker2"]
    assert ran["worker1"] and ran["worker2"] and not ran["worker1"] & ran["worker2"], ran
    by_stages = night_without_model.result(timeout=900)
    targets = sorted(r for r in truth if "-t" in r)
    assert targets
    for run_id in targets:
        a = (by_celery / "reports" / "runs" / f"{run_id}.json").read_bytes()
        b = (by_stages / "reports" / "runs" / f"{run_id}.json").read_bytes()
        assert a == b, run_id                   # byte for byte


def _rows(url: str, query: str) -> list[tuple]:
    """``query`` on Airflow's metadata DB (``:dag`` is the nightly DAG's id)."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sqlalchemy.text(query), {"dag": DAG}).all()]
    except sqlalchemy.exc.ProgrammingError:          # a table not made yet
        return []
    finally:
        engine.dispose()


def _execute(url: str, statement: str) -> None:
    """``statement`` on Airflow's metadata DB, committed (``:dag`` is the nightly DAG's id)."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.begin() as conn:
            assert conn.execute(sqlalchemy.text(statement), {"dag": DAG}).rowcount == 1, statement
    finally:
        engine.dispose()


def _celery_task_ids(url: str) -> list[str]:
    """The Celery task id of each successful task instance of the night (Airflow's metadata)."""
    return [str(r[0]) for r in _rows(url, "SELECT external_executor_id FROM task_instance "
                                          "WHERE dag_id = :dag AND state = 'success'")]


def _tail(logs: Path) -> str:
    return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-1500:] for p in sorted(logs.glob("*.log")))
