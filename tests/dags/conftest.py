"""Fixtures of the Airflow tests."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import once_per_session
from tests.dags.test_nightly_dag import PY, airflow_env


def _migrate_airflow_db(folder: Path) -> None:
    """Airflow's SQLite metadata DB as ``airflow db migrate`` leaves it, in ``folder/airflow.db``."""
    subprocess.run([str(Path(PY).parent / "airflow"), "db", "migrate"], env=airflow_env(folder, folder),
                   capture_output=True, text=True, timeout=600, check=True)


@pytest.fixture(scope="session")
def migrated_airflow_db(tmp_path_factory) -> Path:
    """A metadata DB migrated by ``airflow db migrate`` once for the session; each Airflow test
    starts from a copy of it (the schema is the same whatever AIRFLOW_HOME migrates it)."""
    return once_per_session(tmp_path_factory, "airflow-db", _migrate_airflow_db) / "airflow.db"
