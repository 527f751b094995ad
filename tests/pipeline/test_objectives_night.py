"""A team's objectives on a night: Keptn's own example file evaluated on a simulated lab's runs, every
value worked out here from the archives' raw samples; and a new system whose response time doubled,
which its detectors cannot yet judge and its objectives fail."""
from __future__ import annotations

import io
import json
import shutil
import tarfile
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest
import yaml

from pipelines import config
from pipelines.cli import main as cli
from pipelines.simulators import labsim
from pipelines.storage import atomic
from tests.helpers import run_stages
from tests.unit.test_objectives import KEPTN_SLO

pytestmark = pytest.mark.slow     # stages end to end

# Keptn's example objectives (keptn/spec and the lighthouse service's README) on the example's counters
SLI = """\
spec_version: '1.0'
indicators:
  response_time_p95: p95(app.response_time_ms)
  request_latency_p50: median(app.response_time_ms)
  error_rate: max(app.errors_per_s)
"""


def members_of(path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tf:
        return {m.name: tf.extractfile(m).read() for m in tf if m.isfile()}


def load_phase(members: dict[str, bytes], counter: str) -> np.ndarray:
    """The counter's samples inside the run's load phase, read from its archive's CSV (by hand)."""
    meta = json.loads(members["run.json"])
    start = pd.Timestamp(meta["started_at"]).timestamp()
    for name, data in members.items():
        if name.endswith(".csv"):
            frame = pd.read_csv(io.BytesIO(data))
            if counter in frame.columns:
                ts = frame["timestamp"].astype(float) if pd.api.types.is_numeric_dtype(frame["timestamp"]) else \
                    (pd.to_datetime(frame["timestamp"], utc=True, format="mixed")
                     - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
                inside = (ts >= start) & (ts <= start + float(meta["duration_s"]))
                values = frame.loc[inside, counter].to_numpy(dtype=float)
                return values[np.isfinite(values)]
    raise AssertionError(f"no host measured {counter}")


def write_objectives(tree, system: str, slo: str, sli: str) -> None:
    folder = tree / "objectives" / system
    folder.mkdir(parents=True)
    (folder / "slo.yaml").write_text(slo)
    (folder / "sli.yaml").write_text(sli)


def test_keptns_example_on_a_lab_night_every_value_worked_out_by_hand(tree, tiny_lab):
    """Each run of the shop, in the order the runs started: p95 and median of its response time in its
    load phase (numpy on the archive's CSV), compared with the average of the three newest earlier
    runs whose evaluation passed; the error rate has no counter in this lab (no value, not scored).
    Scoring: p95 passes at <= +10 % of that average and < 600 (2 points), warns at <= 800 (1); the
    median passes at <= +10 % and < 1000 (1 point), warns at <= 800 (0.5); with nothing earlier, the
    relative criteria are not judged.  The score over the 3 points judged: >= 90 % passes, >= 75 %
    warns; a failed p95 (a key objective) fails the run."""
    lab, truth = tiny_lab
    write_objectives(tree, "shop", KEPTN_SLO, SLI)
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["pull"]["source"] = str(lab)
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    run_stages({"pull", "validate", "objectives"})

    runs = sorted(truth, key=lambda r: json.loads(members_of(lab / f"{r}.tar.gz")["run.json"])["started_at"])
    earlier: list[tuple[str, dict[str, float], str]] = []           # (run, values, result), oldest first
    for run_id in runs:
        rt = load_phase(members_of(lab / f"{run_id}.tar.gz"), "app.response_time_ms")
        values = {"response_time_p95": float(np.percentile(rt, 95)), "request_latency_p50": float(np.median(rt))}
        chosen = [e for e in reversed(earlier) if e[2] == "pass"][:3]
        compared = {k: (sum(e[1][k] for e in chosen) / len(chosen) if chosen else None) for k in values}
        points, results = 0.0, {}
        for sli, weight, cap in (("response_time_p95", 2, 600.0), ("request_latency_p50", 1, 1000.0)):
            bound = compared[sli] * 1.10 if compared[sli] is not None else None
            passed = values[sli] < cap and (bound is None or values[sli] <= bound)
            results[sli] = "pass" if passed else "warning" if values[sli] <= 800.0 else "fail"
            points += {"pass": weight, "warning": weight / 2, "fail": 0}[results[sli]]
        pct = 100.0 * points / 3
        result = ("fail" if results["response_time_p95"] == "fail" else
                  "pass" if pct >= 90.0 else "warning" if pct >= 75.0 else "fail")

        stored = json.loads(config.evaluation_path(run_id).read_text())["evaluation"]
        got = {o["sli"]: o for o in stored["objectives"]}
        assert stored["compared_with"] == [e[0] for e in chosen], run_id
        for sli in values:
            assert got[sli]["value"] == pytest.approx(values[sli], rel=1e-5), (run_id, sli)
            assert (got[sli]["compared_value"] is None) == (compared[sli] is None)
            if compared[sli] is not None:
                assert got[sli]["compared_value"] == pytest.approx(compared[sli], rel=1e-5)
            assert got[sli]["result"] == results[sli], (run_id, sli)
            assert got[sli]["not_judged"] == ([] if chosen else ["<=+10%"])
        assert got["error_rate"]["result"] == "no_value" and got["error_rate"]["score"] == 0
        assert (stored["result"], stored["score_pct"]) == (result, pytest.approx(pct, abs=0.01)), run_id
        earlier.append((run_id, values, result))
    assert earlier[0][2] == "pass" and len(runs) == len(truth)


def shifted(members: dict[str, bytes], run_id: str, days: int, factor: float, verdict: str | None) -> dict[str, bytes]:
    """A run of the same lab and load as ``members``, ``days`` later, every response-time sample times ``factor``."""
    meta = json.loads(members["run.json"])
    start = pd.Timestamp(meta["started_at"]) + pd.Timedelta(days=days)
    out = {"run.json": json.dumps({**meta, "run_id": run_id, "verdict": verdict, "cause": "none" if verdict else None,
                                   "started_at": start.strftime("%Y-%m-%dT%H:%M:%SZ")}).encode()}
    for name, data in members.items():
        if name.endswith(".csv"):
            frame = pd.read_csv(io.BytesIO(data))
            if pd.api.types.is_numeric_dtype(frame["timestamp"]):
                frame["timestamp"] = frame["timestamp"] + days * 86400
            else:
                frame["timestamp"] = (pd.to_datetime(frame["timestamp"], utc=True, format="mixed")
                                      + pd.Timedelta(days=days)).dt.strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")
            for column in ("app.response_time_ms", "app.response_time_p95_ms"):
                if column in frame.columns:
                    frame[column] = frame[column] * factor
            out[name] = frame.to_csv(index=False).encode()
    return out


def doubled_lab(out) -> tuple[list[str], str]:
    """A new system: a verified passed run, a second of the same lab and load a day later (response
    times 2 % higher), and a target two days later whose every response-time sample is twice the first's."""
    plan = labsim.LabPlan(seed=3, systems=["shop"], history_causes=[], target_causes=[], n_normal=1, n_per_cause=0,
                          n_targets_normal=0, start="2026-09-01")
    (run_id, members, _), = [r for r in labsim.build_lab(plan, min_effect=3.0, min_rel_change=0.05)
                             if json.loads(r[1]["run.json"])["verdict"] == "pass"]
    out.mkdir()
    runs = {run_id: members, "shop-2026-09-02-p001": shifted(members, "shop-2026-09-02-p001", 1, 1.02, "pass"),
            "shop-2026-09-03-t900": shifted(members, "shop-2026-09-03-t900", 2, 2.0, None)}
    for name, files in runs.items():
        atomic.write_tar_gz_atomic(out / f"{name}.tar.gz", files)
    return [run_id, "shop-2026-09-02-p001"], "shop-2026-09-03-t900"


def test_a_new_system_whose_response_time_doubled_fails_on_its_objective(tree, tmp_path, capsys):
    """Two passed runs are too few for the detectors' record (5 needed): the run is judged against
    itself, which cannot see a whole-run shift, and passes.  The team's objective, "p95 under 600 ms
    and within +10 % of the last good runs", fails it: its verdict is fail, decided by the
    objectives, its page opens with them, its JUnit case and its objective's case fail."""
    lab = tmp_path / "lab"
    passed, target = doubled_lab(lab)
    slo = ("objectives:\n  - sli: response_time_p95\n    displayName: Response time P95\n    key_sli: true\n"
           "    pass:\n      - criteria: ['<=+10%', '<600']\n"
           "comparison: {compare_with: several_results, number_of_comparison_results: 3, include_result_with_score: pass}\n"
           "total_score: {pass: '90%', warning: '75%'}\n")
    write_objectives(tree, "shop", slo, "indicators:\n  response_time_p95: p95(app.response_time_ms)\n")
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["pull"]["source"] = str(lab)
    params["report"]["junit"] = "reports/junit.xml"
    params["train_causes"].update(learners=["decision_tree"], learning_curve_repeats=2, learning_curve_learners=1)
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    run_stages("pull", through="report", skip=("features", "train_causes"))

    doc = json.loads(config.run_report_path(target).read_text())
    assert doc["verdict"] == "fail" and doc["schema_version"] == 2
    decision = doc["details"]["decision"]
    assert decision["decided_by"] == "objectives" and decision["statistical_verdict"] == "pass"
    assert doc["details"]["trust"]["basis"] == "small_history" and doc["details"]["trust"]["normal_runs"] == 2
    (p95,) = doc["objectives"]["objectives"]
    values = [float(np.percentile(load_phase(members_of(lab / f"{r}.tar.gz"), "app.response_time_ms"), 95))
              for r in passed]
    assert doc["objectives"]["compared_with"] == list(reversed(passed))
    assert p95["compared_value"] == pytest.approx(sum(values) / 2, rel=1e-5)
    assert values[1] == pytest.approx(1.02 * values[0], rel=1e-9)
    assert p95["value"] == pytest.approx(2 * values[0], rel=1e-5)                   # every sample doubled
    assert p95["change_pct"] == pytest.approx(100 * (2 / 1.01 - 1), abs=0.01)       # against their mean, 1.01x
    assert p95["result"] == "fail" and p95["violated"] == ["<=+10%"] and doc["objectives"]["result"] == "fail"
    assert doc["flagged_counters"][0] == "app.response_time_ms"
    assert doc["summary"].startswith("Objectives failed (score 0 %): Response time P95 ")
    page = config.run_report_path(target, "html").read_text()
    assert page.index('id="objectives"') < page.index('id="cause"')               # under the headline sentence
    assert "The objectives decided this verdict: the detectors found no regression." in page
    cases = ET.parse(tree / "reports" / "junit.xml").getroot()
    failed = {c.get("name") for c in cases.iter("testcase") if c.find("failure") is not None}
    assert failed == {target, f"{target} · Response time P95"}
    assert cli.main(["report", "--junit", str(tmp_path / "again.xml")]) == 0
    assert (tmp_path / "again.xml").read_text().count(f"{target} · Response time P95") == 1
    assert 'class="objectives-cell"' in config.NIGHT_INDEX.read_text()
    # advisory: the same night reports the failed objectives and the detectors' verdict stands
    params["objectives"] = {"advisory": True}
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    run_stages({"objectives", "report"})
    advised = json.loads(config.run_report_path(target).read_text())
    assert advised["verdict"] == "pass" and advised["objectives"]["advisory"] is True
    assert "Objectives fail, advisory (score 0 %)" in advised["summary"]
    shutil.rmtree(tree / "objectives" / "shop")                                   # objectives removed: none judged
    run_stages({"objectives", "report"})
    assert "objectives" not in json.loads(config.run_report_path(target).read_text())
    assert not config.evaluation_path(target).exists()
