"""One battery of checks on every registered detector, as scikit-learn's ``check_estimator`` runs one
on every estimator: the project's own (the defaults file's registry) and the toy that computes its
own results (tests/toy_detector.py), each through its registry entry alone.

Its reader, given no document, says nothing; given the documents of a real night (the session's
night of ``cause_lab`` with its cause model), it returns for every target either nothing or a
:class:`~pipelines.protocol.DetectorResult` that keeps the contract, leaves the documents it read
as they were and is the same when read again; a detector the night computes names a class with the
protocol's methods, under its registry name."""
from __future__ import annotations

import copy
import dataclasses
import math

import pytest

from pipelines import config, params_schema
from pipelines.detection import registry, stage_results
from pipelines.protocol import COUNTER_ROLES, DetectorResult, RunFiles
from pipelines.storage import manifest, store
from pipelines.systems import history
from tests.helpers import rooted_at

pytestmark = pytest.mark.slow     # reads a whole night's documents

TOY = {"name": "spectral", "result": "tests.toy_detector:result", "detector": "tests.toy_detector:Spectral"}
REGISTERED = registry.registry([*params_schema.defaults()["report"]["detectors"], TOY])
LAB = {"status": "same_lab", "lab_runs": [], "reason": None, "largest_shifts": {}}


def ids(spec: registry.DetectorSpec) -> str:
    return spec.name


@pytest.fixture(scope="module")
def night_files(night_with_model) -> tuple[dict[str, RunFiles], set[str]]:
    """Every target's documents in the session's night with its cause model, as the edge hands
    them to a reader (stage_results.from_stages), and the night's run ids."""
    tree = night_with_model.result(timeout=900)
    out = {}
    with rooted_at(tree):
        index = manifest.read_valid_index()
        for run_id in history.targets(index):
            detection = store.read_optional(config.detection_path(run_id))
            charts = store.read_optional(config.chart_path(run_id))
            docs = {"detect": detection, "control_charts": charts,
                    "clusters": store.read_optional(config.cluster_path(run_id)),
                    "predict_causes": store.read_optional(config.cause_path(run_id))}
            out[run_id] = RunFiles(run_id, docs, stage_results.lab_status(detection, charts), 0.05, 0.01)
    return out, set(index)


@pytest.mark.parametrize("spec", REGISTERED, ids=ids)
def test_a_reader_given_no_document_says_nothing(spec):
    assert spec.read(RunFiles("r", {}, LAB, 0.05, 0.01)) is None


@pytest.mark.parametrize("spec", REGISTERED, ids=ids)
def test_a_readers_result_keeps_the_contract_and_its_documents(spec, night_files):
    files, runs = night_files
    said = 0
    for run_id, run in files.items():
        before = copy.deepcopy(dict(run.docs))
        result = spec.read(run)
        assert dict(run.docs) == before, f"{spec.name} changed the documents of {run_id}"
        assert spec.read(run) == result, f"{spec.name} read {run_id} twice and said two things"
        if result is None:
            continue
        said += 1
        assert isinstance(result, DetectorResult)
        with pytest.raises(dataclasses.FrozenInstanceError):
            result.verdict = "pass"                                     # type: ignore[misc]
        assert result.counters in COUNTER_ROLES and result.title
        assert result.verdict in ("pass", "fail", None)
        assert result.p_value is None or 0.0 <= result.p_value <= 1.0
        if not result.judged:
            assert result.verdict is None and result.p_value is None and result.page == {}
        assert result.null_kind in (None, "same_lab", "cross_lab")
        assert result.null_runs is None or result.null_runs >= 0
        for record in (result.history_normals or {}, result.history_faults or {}):
            assert set(record) <= runs and run_id not in record, f"{spec.name}: a record of runs not in the history"
            assert all(p is None or 0.0 <= p <= 1.0 for p in record.values())
        assert all(isinstance(c, str) for c in [*result.flagged_counters, *result.reserve_counters])
        assert all(isinstance(c, str) and math.isfinite(v) for c, v in result.counter_scores.items())
        assert all(isinstance(entry, dict) for entry in result.page.values())
        assert result.run_score is None or 0.0 <= result.run_score <= 1.0
    if spec.file is None:           # the project's own read the stages' documents: each says something of every run
        assert said == len(files), f"{spec.name} said nothing of {len(files) - said} target(s)"


@pytest.mark.parametrize("spec", [s for s in REGISTERED if s.detector is not None], ids=ids)
def test_a_detector_the_night_computes_names_a_class_with_the_protocols_methods(spec):
    detector = spec.detector()
    assert detector.name == spec.name
    for method in ("calibrate", "stored", "kept", "judge"):
        assert callable(getattr(detector, method, None)), method
    assert spec.file == f"data/processed/detectors/{spec.name}/{{run_id}}.json"
