"""A new detector is one file and one entry of params.yaml: the toy ``spectral`` detector
(tests/toy_detector.py) registered beside the project's own is weighed by the record, decides the
verdict and is on the page, with no other change to the project (pipelines/protocol.py)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from pipelines import params_schema
from pipelines.detection import registry, stage_results
from pipelines.reporting import pages

NORMALS = [f"n{i}" for i in range(20)]      # enough for the record to weigh the detectors (record.n_min: 5)
FAULTS = [f"f{i}" for i in range(6)]
TOY = {"name": "spectral", "result": "tests.toy_detector:result", "file": "data/processed/spectral/{run_id}.json"}


def params_with_toy() -> dict:
    """The defaults file's params with the toy registered: the one block a lab edits."""
    report = params_schema.defaults()["report"]
    return params_schema.check({"report": {"detectors": [*report["detectors"], TOY]}})


def detection_failing_every_normal_run() -> dict:
    """``detect``'s file of run ``r``: stacking fails it (p 0.001) but failed each of the history's 20
    normal runs (p 0.01 at a rate of 0.05) and caught every fault."""
    methods = {k: {"verdict": "fail", "flagged_counters": ["app.latency_ms"], "p_value": 0.001, "null": "same_lab",
                   "normal_runs": 20} for k in stage_results.RULE_METHODS}
    methods["association_rules_stacking"].update(history_normals={r: 0.01 for r in NORMALS},
                                                 history_faults={f: 0.01 for f in FAULTS})
    return {"run_id": "r", "system": "s", "baseline_runs": [{"run_id": "n0", "weight": 1.0}],
            "counter_scores": {"app.latency_ms": 0.9}, "methods": methods,
            "details": {"effects": {"app.latency_ms": 40.0, "db.fft_peak_hz": 25.0}}}


def write_toy_result(root: Path, p_value: float) -> None:
    """The toy's stage's result of run ``r`` in the project ``root``: it passed all 20 normal runs
    of the history and caught 5 of 6 faults."""
    path = root / "data" / "processed" / "spectral" / "r.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "p_value": p_value, "flagged_counters": ["db.fft_peak_hz"], "peak_shift": 3.5,
        "history_normals": {r: 0.5 for r in NORMALS},
        "history_faults": {f: (0.001 if f != "f5" else 0.3) for f in FAULTS}}))


def test_a_toy_detector_in_one_file_and_one_params_entry_is_in_the_record_the_verdict_and_the_page(tree):
    """Stacking fails run ``r`` (p 0.001) but failed all 20 normal runs of the history: the record
    leaves it out.  The toy passed all 20 and caught 5 of 6 faults, and fails ``r`` at p 0.004: it
    decides alone (p 0.004 <= 0.05), its counter is the one shown, the record says "0 of 20 normal
    runs failed, 5 of 6 faults caught" under its title, and the page shows its line and that it decided.
    Without the entry, the same files give a verdict that never mentions it."""
    write_toy_result(tree, 0.004)
    params = params_with_toy()
    detectors = registry.registry(params["report"]["detectors"])
    assert [spec.name for spec in detectors] == ["stacking", "control_charts", "clustered_regression", "within_run",
                                               "cause_classifier", "spectral"]
    from pipelines.verdict import headline

    rule = headline.HeadlineRule.from_params(params["report"])
    doc = stage_results.verdict_of(stage_results.StageDocs(detection_failing_every_normal_run()), rule,
                                   detectors=detectors)
    trust = doc["details"]["trust"]
    assert trust["decided_by"] == ["spectral"] and doc["verdict"] == "fail" and doc["p_value"] == pytest.approx(0.004)
    # the bounds by hand: 1 - 0.05^(1/20) = 0.139; 5 of 6: x with 6x^5 - 5x^6 = 0.05, x = 0.418
    assert trust["record"]["spectral"]["sentence"] == ("spectral peaks: 0 of 20 normal runs failed (false alarms at "
                                                       "most 14 %), 5 of 6 faults caught (at least 42 %)")
    assert not trust["record"]["stacking"]["trusted"]
    assert doc["details"]["p_values"]["spectral"] == 0.004 and doc["methods"]["spectral"]["verdict"] == "fail"
    assert doc["flagged_counters"] == ["db.fft_peak_hz"]

    html = pages.render_run(doc, {"version": "1", "started_at": "2026", "environment": {}}, None,
                            pages.RunPage(baseline_envs={}, raw_href="#", raw_name="r.tar.gz"))
    assert "largest shift of a counter&#39;s spectral peak 3.50 Hz" in html
    assert "Decided by spectral peaks</strong>" in html and "spectral peaks: 0 of 20 normal runs failed" in html
    several = json.loads(json.dumps(doc))
    several["details"]["trust"]["decided_by"] = ["stacking", "control_charts", "spectral"]   # charts: not in the record
    html = pages.render_run(several, {"version": "1", "started_at": "2026", "environment": {}}, None,
                            pages.RunPage(baseline_envs={}, raw_href="#", raw_name="r.tar.gz"))
    assert "Decided by association rules (stacking), control_charts and spectral peaks</strong>" in html

    without = stage_results.verdict_of(stage_results.StageDocs(detection_failing_every_normal_run()), rule,
                                       detectors=registry.registry(params_schema.defaults()["report"]["detectors"]))
    assert "spectral" not in json.dumps(without)


@pytest.mark.parametrize("entry,said", [
    ({"name": "Spectral", "result": "tests.toy_detector:result"}, "lower-case identifier"),
    ({"name": "spectral", "result": "tests/toy_detector.py"}, "'module:function'"),
    ({"name": "spectral", "result": "tests.toy_detector:no_such"}, "cannot read tests.toy_detector:no_such"),
    ({"name": "stacking", "result": "tests.toy_detector:result"}, "registered twice"),
    ({"name": "spectral", "result": "tests.toy_detector:result", "weight": 2}, "unknown keys"),
    ({**TOY, "file": "../elsewhere/{run_id}.json"}, "a .json path of the project naming {run_id}"),
    ({**TOY, "file": "/tmp/{run_id}.json"}, "a .json path of the project"),
    ({**TOY, "file": "data/processed/spectral/latest.json"}, "naming {run_id}"),
    ({**TOY, "name": "clusters"}, "cannot take the name of a stage's document"),
    ({"name": "clusters", "result": "tests.toy_detector:result", "detector": "tests.toy_detector:Spectral"},
     "cannot take the name of a stage's document"),
    ({"name": "spectral", "result": "tests.toy_detector:result", "detector": "tests.toy_detector:Spectral",
      "file": "data/processed/spectral/{run_id}.json"}, "under data/processed/detectors/spectral/"),
    ({"name": "spectral", "result": "tests.toy_detector:result", "detector": "tests.toy_detector:Spectral",
      "file": "data/processed/detectors/spectral/{run_id}.out.json"}, "as <run_id>.json"),
    ({"name": "spectral", "result": "tests.toy_detector:result", "detector": "tests.toy_detector:NoSuch"},
     "cannot read tests.toy_detector:NoSuch"),
    ({"name": "spectral", "result": "tests.toy_detector:result", "detector": "tests/toy_detector.py"},
     "'module:class'"),
])
def test_a_wrong_registry_entry_is_named(entry, said):
    detectors = [*params_schema.defaults()["report"]["detectors"], entry]
    with pytest.raises(ValueError, match=said):
        registry.registry(detectors)


def string_constants(path: Path) -> set[str]:
    """The strings a module's code holds (its docstrings and comments left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings}


def test_the_verdict_names_no_detector():
    """The registry is the one place that names the detectors: no module of pipelines/verdict holds a
    registered detector's name, nor a key of its page, in its code."""
    detectors = registry.registry(params_schema.defaults()["report"]["detectors"])
    names = {spec.name for spec in detectors} | set(stage_results.RULE_METHODS) | {"clustered_regression"}
    verdict = Path(stage_results.__file__).resolve().parents[1] / "verdict"
    found = {p.name: string_constants(p) & names for p in sorted(verdict.glob("*.py"))}
    assert len(found) >= 4 and not any(found.values()), found


def test_a_detectors_details_entry_cannot_take_the_verdicts_own():
    """A detector's ``details`` entry named like one the verdict writes (``trust``) or another
    detector's is refused, naming the detector: one of them would otherwise be lost without a word."""
    from pipelines.protocol import DetectorResult
    from pipelines.verdict.evidence import detector_details

    mine = DetectorResult(judged=True, details={"spectral": {"peaks": 3}})
    assert detector_details({"spectral": mine}, {"effects": {}}) == {"spectral": {"peaks": 3}}
    for clash, run_details in (({"trust": 1}, {}), ({"effects": 1}, {"effects": {}})):
        with pytest.raises(ValueError, match="detector 'toy': its details entry"):
            detector_details({"spectral": mine, "toy": DetectorResult(judged=True, details=clash)}, run_details)
    with pytest.raises(ValueError, match="'spectral'"):
        detector_details({"spectral": mine, "toy": DetectorResult(judged=True, details={"spectral": 0})}, {})


def test_a_detectors_page_entry_cannot_take_anothers():
    from pipelines.protocol import DetectorResult
    from pipelines.verdict.evidence import gather_evidence

    first = DetectorResult(judged=True, p_value=0.5, page={"spectral": {"verdict": "pass"}})
    second = DetectorResult(judged=True, p_value=0.01, page={"spectral": {"verdict": "fail"}})
    with pytest.raises(ValueError, match="detector 'toy': its page entries \\['spectral'\\]"):
        gather_evidence({"spectral": first, "toy": second})


def test_the_toy_detectors_own_result_is_in_the_runs_report_key(tree):
    """A run's report is made again when a registered detector's own result of it changes (its
    ``file`` is hashed into the report's input key), not only when the project's own stages' do;
    the registry without the toy gives one key whatever the toy's file holds."""
    from pipelines.reporting import run_reports
    from pipelines.verdict import headline

    index = {r: {"system": "s", "verdict": "pass", "version": "1", "started_at": "2026-09-01T00:00:00"}
             for r in ("r", "n0")}
    rule_block = params_with_toy()["report"]

    def key(block: dict) -> str:
        params = run_reports.ReportParams.of(block)
        return run_reports.report_key("r", detection_failing_every_normal_run(), index, params,
                                      headline.HeadlineRule.from_params(block), [], {})
    without = {**rule_block, "detectors": params_schema.defaults()["report"]["detectors"]}
    none_yet, plain = key(rule_block), key(without)
    write_toy_result(tree, 0.004)
    first = key(rule_block)
    write_toy_result(tree, 0.3)
    second = key(rule_block)
    assert len({none_yet, first, second}) == 3
    assert key(without) == plain


def test_a_detector_whose_results_the_report_stage_does_not_read_is_refused_before_the_night(tree):
    """``regresslab check`` and ``run`` refuse a registered detector with a file of its own that
    dvc.yaml's report stage does not list among its deps (``dvc repro`` would keep reports made
    before its results changed), naming the folder to add; listed, the registry is read."""
    import yaml

    from pipelines.cli.main import registered

    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["report"]["detectors"] = [*params["report"]["detectors"], TOY]
    (tree / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    stages = {"report": {"cmd": "regresslab stage report", "deps": ["data/processed/detections", "params.yaml"]}}
    (tree / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    with pytest.raises(params_schema.ConfigError, match="add '- data/processed/spectral' to its deps"):
        registered()
    stages["report"]["deps"].append("data/processed/spectral")
    (tree / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    assert [spec.name for spec in registered()][-1] == "spectral"


def test_a_labs_own_detector_package_in_its_project_is_found_by_its_module_path(tree, monkeypatch):
    """A lab's project (the wheel installed, no checkout) keeps its detectors in ``detectors/``:
    the toy put there as ``detectors/spectral/detector.py`` is found by the entry's module path, its
    class made, and the night's ``detectors`` stage would compute it into its default file."""
    import shutil
    import sys

    import yaml

    from pipelines.stages import detectors as detectors_stage

    package = tree / "detectors" / "spectral"
    package.mkdir(parents=True)
    shutil.copyfile(Path(__file__).resolve().parents[1] / "toy_detector.py", package / "detector.py")
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in [m for m in sys.modules if m == "detectors" or m.startswith("detectors.")]:
        monkeypatch.delitem(sys.modules, name)
    entry = {"name": "spectral", "result": "detectors.spectral.detector:result",
             "detector": "detectors.spectral.detector:Spectral"}
    params = params_schema.check({"report": {"detectors": [*params_schema.defaults()["report"]["detectors"], entry]}})
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    computed = detectors_stage.registered()
    assert [d.name for d in computed] == ["spectral"]
    assert computed[0].spec.result_path("r") == tree / "data" / "processed" / "detectors" / "spectral" / "r.json"
    assert sys.modules["detectors.spectral.detector"].__file__ == str(package / "detector.py")
    for name in [m for m in sys.modules if m == "detectors" or m.startswith("detectors.")]:
        sys.modules.pop(name)               # this project's modules leave with it
