"""Shared fixtures: a tiny simulated lab written as real archives, and a tree per test."""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from pipelines import config
from pipelines.simulators import labsim
from pipelines.storage import archive

REPO = Path(__file__).resolve().parent.parent
logging.getLogger("great_expectations").setLevel(logging.WARNING)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: runs stages end to end (a whole night, DVC, Airflow); "
                                       "`pytest -m 'not slow'` leaves them out, `make test` runs them")


def write_lab(out: Path, **kw) -> dict:
    """Simulate a small lab into ``out``; return the truth per run."""
    out.mkdir(parents=True, exist_ok=True)
    args = dict(seed=11, systems=["shop"], history_causes=["cpu_hot_path"], target_causes=["extra_db_query"],
                n_normal=3, n_per_cause=1, n_targets_normal=1, start="2026-09-01", min_effect=3.0,
                min_rel_change=0.05)
    args.update(kw)
    truth = {}
    for run_id, members, t in labsim.build_lab(**args):
        archive.write_tar_gz_atomic(out / f"{run_id}.tar.gz", members)
        truth[run_id] = t
    archive.write_json_atomic(out / "target_labels.json", {r: t for r, t in truth.items() if "-t" in r})
    return truth


@pytest.fixture(scope="session")
def tiny_lab(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("lab")
    return out, write_lab(out)


@pytest.fixture(scope="session")
def cause_lab(tmp_path_factory) -> tuple[Path, dict]:
    """A small lab with two causes of two runs each in the history: enough to train cause models."""
    out = tmp_path_factory.mktemp("cause_lab")
    return out, write_lab(out, history_causes=["cpu_hot_path", "extra_db_query"], n_per_cause=2,
                          target_causes=["extra_db_query", "cpu_contention"])


@pytest.fixture()
def tree(tmp_path, monkeypatch):
    """A fresh project tree (params.yaml copied) with every pipeline path pointed at it."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    old = config.ROOT
    config.use_root(tmp_path)
    monkeypatch.setenv("REGRESSLAB_ROOT", str(tmp_path))
    yield tmp_path
    config.use_root(old)
