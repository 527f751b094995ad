"""The nightly DAG's batching (pipelines/orchestration/tasks.py): pure parts, without Airflow."""
from __future__ import annotations

import importlib

import pytest

from pipelines.orchestration import tasks


def test_batches_are_as_even_as_possible_and_never_larger_than_asked():
    runs = [f"r{i}" for i in range(10)]
    out = tasks.batches(runs, 4)        # ceil(10 / 4) = 3 tasks: 4, 3, 3 (not 4, 4, 2)
    assert [len(b) for b in out] == [4, 3, 3] and sum(out, []) == runs
    assert tasks.batches(runs, 10) == [runs] and tasks.batches(runs, 1) == [[r] for r in runs]
    assert tasks.batches([], 8) == []
    assert [len(b) for b in tasks.batches(runs[:9], 8)] == [5, 4]
    with pytest.raises(ValueError, match="runs_per_task"):
        tasks.batches(runs, 0)


def test_one_failing_run_does_not_stop_its_batch_and_is_named():
    seen = []

    def run_one(name):
        seen.append(name)
        if name == "b":
            raise ValueError("boom")

    with pytest.raises(tasks.BatchFailed, match=r"1 of 3 run\(s\).*b: ValueError: boom") as err:
        tasks.run_batch(run_one, ["a", "b", "c"], stage="detect", jobs=1)
    assert seen == ["a", "b", "c"]                  # c still ran after b failed
    assert err.value.done == ["a", "c"] and err.value.failed == {"b": "ValueError: boom"}
    assert tasks.run_batch(lambda name: None, ["a", "c"], stage="detect", jobs=1) == ["a", "c"]


def test_a_batch_on_two_processes_runs_every_run_once_and_names_each_failure(tmp_path):
    """The runs spread over two processes: each ran exactly once (a file per run, written by the
    process that ran it), both processes took part, and the failures come back by run, in order."""
    import os
    import time

    def run_one(name):
        (tmp_path / name).write_text(str(os.getpid()))
        time.sleep(0.05)                            # long enough that both processes get runs
        if name in ("b", "e"):
            raise KeyError(name)

    runs = ["a", "b", "c", "d", "e", "f"]
    with pytest.raises(tasks.BatchFailed) as err:
        tasks.run_batch(run_one, runs, stage="clusters", jobs=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == runs
    pids = {(tmp_path / r).read_text() for r in runs}
    assert len(pids) == 2 and str(os.getpid()) not in pids
    assert err.value.done == ["a", "c", "d", "f"]
    assert err.value.failed == {"b": "KeyError: 'b'", "e": "KeyError: 'e'"}


def test_a_stage_with_a_batch_context_gives_its_runs_its_function_and_closes_it():
    events = []

    class WithBatch:
        @staticmethod
        def run_one(name):
            raise AssertionError("a stage with batch() is not called run by run")

        @staticmethod
        def batch():
            from contextlib import contextmanager

            @contextmanager
            def ctx():
                events.append("open")
                yield lambda name: events.append(name)
                events.append("closed")
            return ctx()

    class Plain:
        run_one = staticmethod(lambda name: events.append(f"plain {name}"))

    with tasks.per_run(WithBatch) as one:
        assert tasks.run_batch(one, ["x", "y"], stage="detect", jobs=1) == ["x", "y"]
    with tasks.per_run(Plain) as one:
        tasks.run_batch(one, ["z"], stage="report", jobs=1)
    assert events == ["open", "x", "y", "closed", "plain z"]


class CountingDetector:
    """A detector by hand: its calibration is the system's passed runs; judging a target says which
    calibration it saw; the result of a run named ``*-kept`` is kept (stored under the same inputs)."""

    name = "counting"

    def __init__(self):
        self.calibrated, self.read_back, self.judged = [], [], []

    def calibrate(self, seen):
        self.calibrated.append(seen.system)
        return {"system": seen.system, "runs": seen.hist.passed(seen.index, seen.system)}

    def stored(self, seen):
        self.read_back.append(seen.system)
        return {"system": seen.system, "runs": ["stored"]}

    def kept(self, run_id, seen, calibration):
        return {"run_id": run_id, "system": seen.system, "null": calibration["runs"]} if run_id.endswith("-kept") else None

    def judge(self, run_id, seen, calibration):
        self.judged.append(run_id)
        return {"run_id": run_id, "system": seen.system, "null": calibration["runs"]}


def judging_tree(tree):
    """Two systems: a passes a-1, a-2 and has targets a-t1, a-t2-kept; b passes b-1 and has b-t1."""
    from pipelines import config
    from pipelines.storage import atomic
    rows = {"a-1": ("a", "pass"), "a-2": ("a", "pass"), "a-t1": ("a", None), "a-t2-kept": ("a", None),
            "b-1": ("b", "pass"), "b-t1": ("b", None)}
    index = {r: {"system": s, "verdict": v, "started_at": f"2026-01-{i:02d}T00:00:00Z"}
             for i, (r, (s, v)) in enumerate(rows.items(), 1)}
    atomic.write_json_atomic(config.VALID_INDEX, {"valid": index})
    for system in ("a", "b"):
        atomic.write_json_atomic(config.edges_path(system), {"system": system, "reference_load": None, "counters": {}})
    return index


def test_a_night_calibrates_each_system_once_and_judges_its_targets_under_it(tree):
    from pipelines.systems import history
    from pipelines.detection import judging
    from pipelines.progress import Progress
    import logging
    index = judging_tree(tree)
    detector, said = CountingDetector(), []
    targets = ["a-t1", "a-t2-kept", "b-t1"]
    hist = history.HistoryParams.load()
    kept = judging.judge_night(detector, targets, index, hist, None, Progress(logging.getLogger("t"), "t", 3),
                               lambda run_id, out: said.append((run_id, out[0]["null"], out[1])) or run_id)
    assert detector.calibrated == ["a", "b"] and detector.read_back == []
    assert sorted(said) == [("a-t1", ["a-1", "a-2"], False), ("a-t2-kept", ["a-1", "a-2"], True),
                            ("b-t1", ["b-1"], False)]
    assert kept == 1 and detector.judged == ["a-t1", "b-t1"]         # a kept result is not judged again
    assert judging.calibrate_every_system(detector, hist) == ["a", "b"] and detector.calibrated[2:] == ["a", "b"]


def test_a_dag_batch_reads_each_systems_stored_calibration_once(tree):
    from pipelines.systems import history
    from pipelines.detection import judging
    judging_tree(tree)
    detector = CountingDetector()
    with judging.batch(detector, history.HistoryParams.load(), None, lock="test batch") as one:
        out = [one(r) for r in ("a-t1", "a-t2-kept", "b-t1")]
    assert detector.read_back == ["a", "b"] and detector.calibrated == []
    assert [o["null"] for o in out] == [["stored"]] * 3 and [o["system"] for o in out] == ["a", "a", "b"]
    assert detector.judged == ["a-t1", "b-t1"] and out[1]["run_id"] == "a-t2-kept"  # a kept result is not judged again


@pytest.mark.parametrize("module,detector_of,path_of", [
    ("charts", lambda m: m.ControlCharts(params=None), "calibration_path"),
    ("clusters", lambda m: m.ClusterModels(params=None), "cluster_calibration_path"),
    ("rules", lambda m: m.AssociationRules(params=None, mine_params=None), "stacking_calibration_path"),
])
def test_every_detector_reads_its_stored_calibration_back_and_calibrates_when_none_is_stored(
        tree, monkeypatch, module, detector_of, path_of):
    """``stored`` means the same for each detector: the calibration its ``calibrate`` wrote, and,
    when none was written (the DAG's calibration task did not run), a calibration made now, never a
    missing or empty one in its place."""
    import importlib

    from pipelines import config
    from pipelines.protocol import SystemHistory
    from pipelines.storage import atomic
    from pipelines.systems import history

    judging_tree(tree)
    runs = importlib.import_module(f"pipelines.detectors.{module}.runs")
    made = []

    def calibrate_system(system, *args, **kw):
        made.append(system)
        atomic.write_json_atomic(getattr(config, path_of)(system), {"normal_scores": {f"{system}-1": 0.5}, "n": len(made)})
        return {"normal_scores": {f"{system}-1": 0.5}, "n": len(made)}
    monkeypatch.setattr(runs, "calibrate_system", calibrate_system)
    if module == "rules":
        monkeypatch.setattr(runs.AssociationRules, "context", lambda self, seen, kept_too=True: None)
    detector = detector_of(runs)
    from pipelines.stats import effects

    seen = SystemHistory.of("a", {}, history.HistoryParams.load(), effects.Significance.load())
    assert not getattr(config, path_of)("a").exists()
    assert detector.stored(seen) == {"normal_scores": {"a-1": 0.5}, "n": 1} and made == ["a"]
    assert detector.stored(seen) == {"normal_scores": {"a-1": 0.5}, "n": 1} and made == ["a"]     # read back


def test_a_celery_worker_imports_every_stage_before_its_pool_forks():
    """The worker's Celery configuration is Airflow's with every stage module (and the tasks that
    run them) among the modules Celery imports when a worker starts, before its pool forks."""
    from pathlib import Path

    from airflow.providers.celery.executors.default_celery import DEFAULT_CELERY_CONFIG
    from celery import Celery

    from pipelines.orchestration.celery_config import CELERY_CONFIG

    stages = {f"pipelines.stages.{p.stem}" for p in (Path(tasks.__file__).parents[1] / "stages").glob("*.py")
              if p.stem != "__init__"}
    assert len(stages) >= 15 and "pipelines.stages.validate" in stages
    assert set(CELERY_CONFIG["imports"]) == stages | {"pipelines.orchestration.tasks"}
    assert {k: v for k, v in CELERY_CONFIG.items() if k != "imports"} == \
        {k: v for k, v in DEFAULT_CELERY_CONFIG.items() if k != "imports"}
    app = Celery("regresslab-test", config_source=CELERY_CONFIG)
    assert set(app.loader.default_modules) >= stages    # what the worker's loader imports at init


def test_a_celery_worker_computes_every_stages_code_digest_before_its_pool_forks():
    """On the signal a worker sends before its pool forks (``worker_init``), and only then."""
    from celery.signals import worker_init

    from pipelines import codebase
    from pipelines.orchestration import celery_config

    codebase.code_digest.cache_clear()
    importlib.reload(celery_config)                         # what a scheduler reading the configuration does
    assert codebase.code_digest.cache_info().currsize == 0
    worker_init.send(sender=None)
    before = codebase.code_digest.cache_info()
    digests = {codebase.code_digest(codebase.stage_module(s)) for s in celery_config.STAGES}
    after = codebase.code_digest.cache_info()
    assert after.misses == before.misses and after.hits - before.hits == len(celery_config.STAGES) >= 15
    assert len(digests) == len(celery_config.STAGES)        # each stage's own code
