"""Shared fixtures: a tiny simulated lab written as real archives, and a tree per test."""
from __future__ import annotations

import concurrent.futures
import fcntl
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines import config
from pipelines.simulators import labsim
from pipelines.storage import atomic

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
    plan = labsim.LabPlan(**{k: args.pop(k) for k in labsim.LabPlan.__dataclass_fields__})
    for run_id, members, t in labsim.build_lab(plan, **args):
        atomic.write_tar_gz_atomic(out / f"{run_id}.tar.gz", members)
        truth[run_id] = t
    atomic.write_json_atomic(out / "target_labels.json", {r: t for r, t in truth.items() if "-t" in r})
    return truth


@pytest.fixture(scope="session")
def tiny_lab(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("lab")
    return out, write_lab(out)


CAUSE_LAB = dict(history_causes=["cpu_hot_path", "extra_db_query"], n_per_cause=2,
                 target_causes=["extra_db_query", "cpu_contention"])


@pytest.fixture(scope="session")
def cause_lab(tmp_path_factory) -> tuple[Path, dict]:
    """A small lab with two causes of two runs each in the history: enough to train cause models."""
    out = tmp_path_factory.mktemp("cause_lab")
    return out, write_lab(out, **CAUSE_LAB)


@pytest.fixture()
def tree(tmp_path, monkeypatch):
    """A fresh project tree (params.yaml copied) with every pipeline path pointed at it."""
    import yaml

    from tests.helpers import QUICK_SETTLE_S

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["pull"]["settle_s"] = QUICK_SETTLE_S
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    old = config.ROOT
    config.use_root(tmp_path)
    monkeypatch.setenv("REGRESSLAB_ROOT", str(tmp_path))
    yield tmp_path
    config.use_root(old)


# the nights of the pipeline and DAG tests let the cause model see one feature design: choosing the
# design is tested where it is made (tests/unit/test_causes.py), and two designs double its training
ONE_DESIGN = [["kinds"]]


def night_tree(root: Path, lab: Path, **compute) -> Path:
    """A tree whose params.yaml reads ``lab`` and names the night 2026-11-22, with no commit
    series (the stage says so), two learning-curve repeats, one feature design (:data:`ONE_DESIGN`)
    and ``compute`` overrides (``jobs``):
    the settings of every whole night a test runs on ``cause_lab``."""
    import yaml

    from tests.helpers import QUICK_SETTLE_S

    root.mkdir(parents=True)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["pull"].update(source=str(lab), settle_s=QUICK_SETTLE_S)
    params["train_causes"]["learning_curve_repeats"] = 2
    params["train_causes"]["feature_designs"] = ONE_DESIGN
    params["report"]["night"] = "2026-11-22"
    params["commit_changes"]["source"] = None
    params["compute"].update(compute)
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return root


def stage_env(root: Path) -> dict[str, str]:
    return {**os.environ, "REGRESSLAB_ROOT": str(root), "PYTHONPATH": str(REPO)}


def _night_without_model(folder: Path) -> Path:
    """``cause_lab`` written into ``folder`` and its night by the stages, each stage's ``main()``
    in one new process (``helpers.stages_in_a_process``), pull to report with no cause model yet
    (no ``features``, no ``train_causes``): what a first Airflow night writes."""
    from pipelines.orchestration import stage_graph
    from tests.helpers import stages_in_a_process

    lab = folder / "lab"
    write_lab(lab, **CAUSE_LAB)
    tree = night_tree(folder / "tree", lab, jobs=2)
    stages_in_a_process(stage_env(tree), stage_graph.select("pull", through="report",
                                                            skip=("features", "train_causes")))
    return tree


def _night_with_model(folder: Path, night: Path) -> Path:
    """A copy of the night ``night`` (:func:`_night_without_model`) in ``folder`` with the cause
    model's stages then run on it in one new process (``features``, ``train_causes``,
    ``predict_causes``, ``report``): what the next night writes once the retraining has made a model."""
    from pipelines.orchestration import stage_graph
    from tests.helpers import stages_in_a_process

    tree = folder / "tree"
    shutil.copytree(night, tree, symlinks=True)         # file times kept: nothing of the night looks new
    stages_in_a_process(stage_env(tree), stage_graph.select("features", through="report"))
    return tree


def once_per_session(tmp_path_factory, name: str, build) -> Path:
    """The folder ``name`` of the whole test session, filled by ``build(folder)`` once: under
    ``pytest -n 2`` the first worker to take its lock builds it, the other waits for it (a worker's
    base temp is a folder of the session's; xdist names the worker in ``PYTEST_XDIST_WORKER``)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    shared = tmp_path_factory.getbasetemp().parent if worker else tmp_path_factory.getbasetemp()
    folder, lock, done = shared / name, shared / f"{name}.lock", shared / f"{name}.done"
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)           # released when the file closes
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def night_without_model(tmp_path_factory) -> concurrent.futures.Future:
    """The tree of :func:`_night_without_model`, computed once for the whole test session: the
    Airflow test and the Celery test each compare their night with it (``pytest -n 2`` runs
    them on two workers at once; the first to take the lock computes it, the other waits for it).
    A future, so that a test goes on with its own night while the stages run."""
    tmp_path_factory.getbasetemp()      # made here: made from the future's thread, it races this thread's own
    return concurrent.futures.ThreadPoolExecutor(1).submit(
        lambda: once_per_session(tmp_path_factory, "night-without-model", _night_without_model) / "tree")


@pytest.fixture(scope="session")
def night_with_model(tmp_path_factory, night_without_model) -> concurrent.futures.Future:
    """The tree of :func:`_night_with_model` on the session's night without a model, computed once
    for the whole test session (the Airflow test compares its second night with it, the detection
    chain starts from it).  A future, as :func:`night_without_model`."""
    def build(folder: Path) -> None:
        _night_with_model(folder, night_without_model.result(timeout=900))
    tmp_path_factory.getbasetemp()      # made here, not from the future's thread (see night_without_model)
    return concurrent.futures.ThreadPoolExecutor(1).submit(
        lambda: once_per_session(tmp_path_factory, "night-with-model", build) / "tree")


def _build_wheel(folder: Path) -> None:
    """The wheel (``uv build``: the install's uv, a PEP 517 front end like ``pip wheel``, at about
    40 % of its CPU) in ``folder/dist``, installed with ``uv pip install --no-deps --target folder/site``."""
    subprocess.run([str(Path(sys.executable).parent / "uv"), "build", "--quiet", "--wheel", "-o", str(folder / "dist"),
                    str(REPO)], check=True, capture_output=True)
    (wheel,) = (folder / "dist").glob("regresslab-*.whl")
    subprocess.run([str(Path(sys.executable).parent / "uv"), "pip", "install", "--quiet", "--no-deps", "--python",
                    sys.executable, "--target", str(folder / "site"), str(wheel)], check=True, capture_output=True)


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Path:
    """The package as a user gets it (its data files included), installed from its wheel into a
    folder of its own (``site``; the wheel beside it in ``../dist``), once for the test session."""
    return once_per_session(tmp_path_factory, "wheel", _build_wheel) / "site"
