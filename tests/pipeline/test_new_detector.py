"""Adding a detector is one package and one entry of params.yaml: in a copy of the project, the toy
``spectral`` detector (tests/toy_detector.py) put in ``pipelines/detectors/spectral/`` and named by
one entry of ``report.detectors`` is computed by the night's ``detectors`` stage and weighed by
every target's verdict, with no other file of the project changed."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipelines.detection import registry
from tests.conftest import REPO, stage_env
from pipelines.storage import manifest
from pipelines.systems import history
from tests.helpers import rooted_at, stages_in_a_process

pytestmark = pytest.mark.slow     # stages end to end

ENTRY = {"name": "spectral", "result": "pipelines.detectors.spectral.detector:result",
         "detector": "pipelines.detectors.spectral.detector:Spectral"}


def project_copy(root: Path) -> Path:
    """The project's code and pipeline (pipelines/, dvc.yaml) in ``root``, as a lab's checkout."""
    shutil.copytree(REPO / "pipelines", root / "pipelines", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(REPO / "dvc.yaml", root / "dvc.yaml")
    return root


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / "pipelines").rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts} | {"dvc.yaml": (root / "dvc.yaml").read_bytes()}


def test_a_detector_added_as_one_package_and_one_entry_is_computed_and_weighed_by_the_night(tmp_path,
                                                                                          night_without_model):
    """The session's night of ``cause_lab`` (pull to report, no cause model), copied with the
    project's code; the toy added as ``pipelines/detectors/spectral/`` (an empty ``__init__.py`` and
    the toy's file) and one registry entry; then the night again, each stage from the copy's
    dvc.yaml in the graph's order, by the copy's code.  The ``detectors`` stage (before ``report``
    in the graph) writes the toy's result of every target; every target's verdict file lists the
    toy among the detectors' p-values, with the p-value of that file and its page entry; a target
    judged in its own lab has the toy's record (its normal runs failed and faults caught at the
    rate, counted here from the toy's file), one of a new lab not (its record is the detectors'
    judged across labs); the night before the toy names it nowhere.  The
    copy differs from the project by the package and params.yaml alone."""
    night = night_without_model.result(timeout=900)
    lab = project_copy(tmp_path / "lab")
    before = files_of(lab)
    package = lab / "pipelines" / "detectors" / "spectral"
    package.mkdir()
    (package / "__init__.py").write_text("")
    shutil.copyfile(REPO / "tests" / "toy_detector.py", package / "detector.py")
    for folder in ("data", "reports"):
        shutil.copytree(night / folder, lab / folder, symlinks=True)
    params = yaml.safe_load((night / "params.yaml").read_text())
    params["report"]["detectors"].append(ENTRY)
    (lab / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    after = files_of(lab)
    assert sorted(set(after) - set(before)) == ["pipelines/detectors/spectral/__init__.py",
                                                "pipelines/detectors/spectral/detector.py"]
    assert all(after[k] == v for k, v in before.items())

    env = {**stage_env(lab), "PYTHONPATH": f"{lab}:{REPO}"}     # the copy's code first; tests/ of the checkout
    order = subprocess.run([sys.executable, "-m", "pipelines.orchestration.stage_graph", "pull"], cwd=lab, env=env,
                           capture_output=True, text=True, check=True).stdout.split()
    assert order.index("detectors") < order.index("report")
    stages_in_a_process(env, [s for s in order if s not in ("features", "train_causes", "predict_causes")], cwd=lab)

    with rooted_at(lab):
        targets = history.targets(manifest.read_valid_index())
    assert len(targets) == 4
    same_lab: list[str] = []
    for run_id in targets:
        own = json.loads((lab / "data" / "processed" / "detectors" / "spectral" / f"{run_id}.json").read_text())
        doc = json.loads((lab / "reports" / "runs" / f"{run_id}.json").read_text())
        assert doc["details"]["p_values"]["spectral"] == own["p_value"]
        assert doc["methods"]["spectral"]["p_value"] == own["p_value"]
        trust = doc["details"]["trust"]
        if trust["basis"] == "new_lab":          # the record across labs: the toy's null is its own lab's
            assert "spectral" not in trust["record"]
        else:
            same_lab.append(run_id)
            failed = sum(p <= 0.05 for p in own["history_normals"].values())
            caught = sum(p <= 0.05 for p in own["history_faults"].values())
            sentence = trust["record"]["spectral"]["sentence"]
            assert sentence.startswith(f"spectral peaks: {failed} of {len(own['history_normals'])} normal runs "
                                       "failed"), sentence
            assert f"{caught} of {len(own['history_faults'])} faults caught" in sentence, sentence
        before_doc = json.loads((night / "reports" / "runs" / f"{run_id}.json").read_text())
        assert "spectral" not in json.dumps(before_doc)
    assert same_lab


def test_the_evaluations_leave_one_out_weighs_a_registered_detector_by_its_held_out_results(tmp_path,
                                                                                         night_without_model):
    """The leave-one-out record of the session's night (``evaluate``'s headline) with the toy
    registered: every verified run of the lab is judged by the toy without it
    (``loo_registered``: its p-value and its record those of :func:`toy_detector.judged` on a
    calibration without it, computed here again), and the held-out headline of a verified normal
    run lists the toy among its p-values."""
    from pipelines.evaluation.leave_one_out import loo_registered
    from pipelines.detection import stage_results
    from pipelines.protocol import SystemHistory
    from pipelines.stats import effects
    from pipelines.verdict import headline
    from pipelines import params_schema
    from tests import toy_detector as toy

    night = night_without_model.result(timeout=900)
    entry = {"name": "spectral", "result": "tests.toy_detector:result", "detector": "tests.toy_detector:Spectral"}
    specs = registry.registry([*params_schema.defaults()["report"]["detectors"], entry])
    with rooted_at(night):
        index = manifest.read_valid_index()
        hist, significance = history.HistoryParams.load(), effects.Significance.load()
        seen = SystemHistory.of("shop", index, hist, significance)
        verified = hist.verified(index, "shop")
        held = loo_registered(specs, seen, verified)
        full = toy.Spectral().calibrate(seen)
    assert sorted(held) == sorted(verified) and len(verified) == 7
    for run_id in verified:
        own = full.normals if run_id in full.normals else full.faults
        without = toy.Calibration({r: v for r, v in full.normals.items() if r != run_id},
                                  {r: v for r, v in full.faults.items() if r != run_id})
        assert held[run_id]["spectral"] == toy.judged(own[run_id], without)
        assert run_id not in held[run_id]["spectral"]["history_normals"]
    normal = next(r for r in verified if index[r]["verdict"] == "pass")
    rule = headline.HeadlineRule.from_params(params_schema.defaults()["report"], significance)
    run_id = history.targets(index)[0]          # a stored detection, as the held-out run's (its p-values aside)
    stored = json.loads((night / "data" / "processed" / "detections" / f"{run_id}.json").read_text())
    doc = stage_results.verdict_of(stage_results.StageDocs({**stored, "run_id": normal}, own=held[normal]), rule,
                                   detectors=specs)
    assert doc["details"]["p_values"]["spectral"] == held[normal]["spectral"]["p_value"]


def test_the_toy_judges_a_held_out_run_by_a_calibration_without_it(tree):
    """The toy's ``held_out`` of a normal run: its p-value is the rank of that run's peak shift among
    the other normal runs' (computed here by hand from the toy's own functions), and its record
    holds the other normal runs only."""
    from tests import toy_detector as toy

    normals = {"a": {"x": 0.1}, "b": {"x": 0.1}, "c": {"x": 0.2}, "d": {"x": 0.4}}
    without_d = toy.Calibration({r: p for r, p in normals.items() if r != "d"}, {})
    doc = toy.judged(normals["d"], without_d)
    # d shifts 0.3 from the median 0.1 of a, b, c; their leave-one-out shifts: a 0.05, b 0.05, c 0.1
    assert doc["peak_shift"] == pytest.approx(0.3) and doc["flagged_counters"] == ["x"]
    assert doc["p_value"] == pytest.approx(1 / 4)
    assert set(doc["history_normals"]) == {"a", "b", "c"}
    # c's own p-value against a and b's shifts (0.05 each): 1 / 3
    assert doc["history_normals"]["c"] == pytest.approx(1 / 3)
    assert registry.registry([ENTRY | {"result": "tests.toy_detector:result",
                                       "detector": "tests.toy_detector:Spectral"}])[0].file == \
        "data/processed/detectors/spectral/{run_id}.json"


def test_the_dags_batch_of_a_registered_detector_writes_what_the_stage_writes(tmp_path, night_without_model):
    """The nightly DAG's ``analyse_run.detectors`` task (``detectors.batch``, per batch of targets)
    and the stage's ``main`` write the same file for each target: a copy of the session's night
    with the toy registered, the stage's files kept, then every target's file written again by the
    batch, byte for byte."""
    from pipelines.stages import detectors as detectors_stage

    night = night_without_model.result(timeout=900)
    tree = tmp_path / "tree"
    shutil.copytree(night, tree, symlinks=True)
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["report"]["detectors"].append({"name": "spectral", "result": "tests.toy_detector:result",
                                          "detector": "tests.toy_detector:Spectral"})
    (tree / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    folder = tree / "data" / "processed" / "detectors" / "spectral"
    with rooted_at(tree):
        detectors_stage.main()
        by_stage = {p.name: p.read_bytes() for p in folder.glob("*.json")}
        for p in folder.glob("*.json"):
            p.unlink()
        targets = history.targets(manifest.read_valid_index())
        with detectors_stage.batch() as one:
            docs = {run_id: one(run_id)["spectral"] for run_id in targets}
    assert sorted(by_stage) == sorted(f"{r}.json" for r in targets)
    assert {p.name: p.read_bytes() for p in folder.glob("*.json")} == by_stage
    assert all(json.loads(by_stage[f"{r}.json"]) == docs[r] for r in targets)
