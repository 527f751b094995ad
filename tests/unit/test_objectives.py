"""Objectives in Keptn's v1 format: the files read and refused, each criterion, objective and total
score as Keptn's lighthouse scores them, with every expected value worked out by hand."""
from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import pytest

from pipelines.objectives import files, gates, indicators
from pipelines.objectives.files import Criterion, ObjectivesError

# Keptn's own example (keptn/spec service_level_objective.md and the lighthouse service's README): a
# relative and an absolute bound, a warning band, a weighted key indicator and a total score
KEPTN_SLO = """\
spec_version: '1.0'
filter:
  handler: "HealthCheckController.getHealth"
comparison:
  compare_with: "several_results"
  include_result_with_score: "pass"
  number_of_comparison_results: 3
  aggregate_function: avg
objectives:
  - sli: response_time_p95
    pass:
      - criteria:
          - "<=+10%"
          - "<600"
    warning:
      - criteria:
          - "<=800"
    weight: 2
    key_sli: true
  - sli: request_latency_p50
    pass:
      - criteria:
          - "<=+10%"
          - "<1000"
    warning:
      - criteria:
          - "<=800"
  - sli: error_rate
    weight: 2
    pass:
      - criteria:
          - "=0"
total_score:
  pass: "90%"
  warning: "75%"
"""
KEPTN_SLI = """\
spec_version: '1.0'
indicators:
  response_time_p95: p95(app.response_time_ms)
  request_latency_p50: median(app.response_time_ms)
  error_rate: max(app.errors_per_s)
"""


def gate_in(tmp_path, slo: str = KEPTN_SLO, sli: str = KEPTN_SLI, system: str = "shop") -> files.Gate:
    folder = tmp_path / "objectives" / system
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "slo.yaml").write_text(textwrap.dedent(slo))
    (folder / "sli.yaml").write_text(textwrap.dedent(sli))
    return files.read_gate(folder, system)


@pytest.mark.parametrize("text, operator, value, relative, percent, increase", [
    ("<600", "<", 600.0, False, False, True),
    ("<= +10 %", "<=", 10.0, True, True, True),
    (">=-5%", ">=", 5.0, True, True, False),
    ("<+50", "<", 50.0, True, False, True),
    ("=0", "=", 0.0, False, False, True),
    ("<=10%", "<=", 10.0, True, True, True),          # a % alone is relative and up, as in Keptn
])
def test_a_criterion_means_what_keptn_reads_in_it(text, operator, value, relative, percent, increase):
    c = Criterion.parse(text)
    assert (c.operator, c.value, c.relative, c.percent, c.increase) == (operator, value, relative, percent, increase)


def test_a_relative_criterion_sets_its_bound_from_the_earlier_aggregate():
    assert Criterion.parse("<=+10%").target(540.0) == pytest.approx(594.0)        # 540 x 1.10
    assert Criterion.parse(">=-5%").target(200.0) == pytest.approx(190.0)         # 200 x 0.95
    assert Criterion.parse("<+50").target(540.0) == 590.0
    assert Criterion.parse("<-50").target(540.0) == 490.0
    assert Criterion.parse("<600").target(540.0) == 600.0


@pytest.mark.parametrize("bad", ["600", "<<600", "<=+10%%", "<=abc", "≤600", "", "< 6 00x"])
def test_a_criterion_that_does_not_parse_is_refused(bad):
    with pytest.raises(ValueError, match="not a criterion"):
        Criterion.parse(bad)


def test_keptns_own_file_is_read_unchanged(tmp_path):
    gate = gate_in(tmp_path)
    assert [o.sli for o in gate.objectives] == ["response_time_p95", "request_latency_p50", "error_rate"]
    p95 = gate.objectives[0]
    assert (p95.weight, p95.key_sli, p95.display_name) == (2, True, "response_time_p95")
    assert [[c.text for c in lst] for lst in p95.passes] == [["<=+10%", "<600"]]
    assert gate.comparison == files.Comparison("several_results", 3, "pass", "avg")
    assert (gate.total_pass, gate.total_warning) == (90.0, 75.0)
    assert gate.indicators["response_time_p95"] == files.Indicator("response_time_p95", "p95", "app.response_time_ms")
    assert gate.counters() == ["app.response_time_ms", "app.errors_per_s"]


def test_without_a_comparison_block_keptns_defaults_apply(tmp_path):
    slo = "objectives:\n  - sli: p95\n    pass: [{criteria: ['<=+10%']}]\ntotal_score: {pass: '90%'}\n"
    gate = gate_in(tmp_path, slo, "indicators: {p95: p95(app.response_time_ms)}\n")
    assert gate.comparison == files.Comparison("single_result", 1, "all", "avg") and gate.comparison.results == 1
    with_block = gate_in(tmp_path, slo.replace("objectives:", "comparison: {compare_with: several_results}\nobjectives:"),
                         "indicators: {p95: p95(app.response_time_ms)}\n")
    assert with_block.comparison.results == 3 and gate.total_warning is None


@pytest.mark.parametrize("slo, sli, key", [
    (KEPTN_SLO.replace("p95\n    pass", "p95\n    passs"), KEPTN_SLI, "objectives[0].passs: unknown key (did you mean 'pass'?)"),
    (KEPTN_SLO.replace('"<600"', '"<six hundred"'), KEPTN_SLI, "objectives[0].pass[0].criteria[1]: '<six hundred' is not a criterion"),
    (KEPTN_SLO, KEPTN_SLI.replace("p95(app", "p96(app"), "indicators.response_time_p95: unknown aggregate 'p96' (did you"),
    (KEPTN_SLO, KEPTN_SLI.replace("p95(app", "avg(app"), "indicators.response_time_p95: unknown aggregate 'avg' (did you mean 'mean'?)"),
    (KEPTN_SLO, KEPTN_SLI.replace("  error_rate: max(app.errors_per_s)\n", ""), "objectives[2].sli: 'error_rate' has no indicator in sli.yaml"),
    (KEPTN_SLO.replace('pass: "90%"', 'pass: "190%"'), KEPTN_SLI, "total_score.pass: '190%' lies outside 0-100 %"),
    (KEPTN_SLO.replace('warning: "75%"', 'warning: "lots"'), KEPTN_SLI, "total_score.warning: 'lots' is not a percentage"),
    (KEPTN_SLO.replace("aggregate_function: avg", "aggregate_function: p99"), KEPTN_SLI, "comparison.aggregate_function: 'p99' is not allowed"),
    (KEPTN_SLO.replace("weight: 2\n    key_sli", "weight: -1\n    key_sli"), KEPTN_SLI, "objectives[0].weight: -1 is not a whole number"),
    (KEPTN_SLO, KEPTN_SLI.replace("max(app.errors_per_s)", "max app.errors_per_s"), "indicators.error_rate: 'max app.errors_per_s' is not a query"),
    (KEPTN_SLO.replace("total_score:\n  pass: \"90%\"\n", "total_score:\n"), KEPTN_SLI, "total_score.pass: missing"),
    ("a: &x [1]\nb: *x\n", KEPTN_SLI, "uses a YAML alias"),
])
def test_a_file_a_night_cannot_use_is_refused_naming_the_file_and_the_key(tmp_path, slo, sli, key):
    with pytest.raises(ObjectivesError) as refused:
        gate_in(tmp_path, slo, sli)
    assert key in str(refused.value) and "/objectives/shop/sl" in str(refused.value)


def test_a_missing_file_is_refused_and_a_folder_outside_the_grammar_is_not_a_system(tmp_path):
    (tmp_path / "objectives" / "shop").mkdir(parents=True)
    (tmp_path / "objectives" / "shop" / "slo.yaml").write_text(KEPTN_SLO)
    with pytest.raises(ObjectivesError, match="sli.yaml: missing"):
        files.read_gates(tmp_path / "objectives", lambda s: s[0].isalnum())
    (tmp_path / "objectives" / "shop" / "sli.yaml").write_text(KEPTN_SLI)
    (tmp_path / "objectives" / "_template").mkdir()
    assert list(files.read_gates(tmp_path / "objectives", lambda s: s[0].isalnum())) == ["shop"]


def test_keptns_percentile_of_earlier_results_interpolates_at_rank_p_times_n_plus_one():
    values = [10.0, 20.0, 30.0, 40.0]
    # p50: rank 0.5 x 5 = 2.5 -> 20 + 0.5 x (30 - 20) = 25; p90: rank 4.5 >= 4 -> the largest, 40
    assert gates.keptn_percentile(values, 0.5) == 25.0 and gates.keptn_percentile(values, 0.9) == 40.0
    assert gates.keptn_percentile([5.0], 0.95) == 5.0 and gates.keptn_percentile(values, 0.1) == 10.0
    assert gates.aggregate_earlier(values, "avg") == 25.0 and gates.aggregate_earlier(values, "p50") == 25.0


def evaluation(result: str, **values: float) -> gates.Evaluation:
    """An earlier evaluation with these indicator values (only what the comparison reads)."""
    return gates.Evaluation(result=result, score_pct=0.0, advisory=False, compared_with=(), judged=0,
                            objectives=tuple(gates.ObjectiveResult(sli=k, display_name=k, counter="c", aggregate="p95",
                                                                   value=v, compared_value=None, change_pct=None,
                                                                   key_sli=False, weight=1, result="pass", score=1.0,
                                                                   passes=(), warnings=(), violated=(), not_judged=())
                                             for k, v in values.items()))


def test_keptns_example_scored_by_hand(tmp_path):
    """The three earlier results that passed, newest first: r4 (fail: left out), r3, r2, r1, r0.
    Compared with the average of r3, r2 and r1: response_time_p95 (500 + 560 + 560) / 3 = 540, so
    <=+10% sets 594; request_latency_p50 (300 + 330 + 300) / 3 = 310, so 341.

    This run: response_time_p95 590 (<= 594 and < 600: pass, 2 points of 2), request_latency_p50 400
    (> 341: the pass list fails; <= 800: warning, 0.5 of 1), error_rate 0.0 (= 0: pass, 2 of 2).
    Score (2 + 0.5 + 2) / 5 = 90 %: >= 90 %, pass."""
    gate = gate_in(tmp_path)
    earlier = [("r4", evaluation("fail", response_time_p95=900.0, request_latency_p50=900.0)),
               ("r3", evaluation("pass", response_time_p95=500.0, request_latency_p50=300.0)),
               ("r2", evaluation("pass", response_time_p95=560.0, request_latency_p50=330.0)),
               ("r1", evaluation("pass", response_time_p95=560.0, request_latency_p50=300.0)),
               ("r0", evaluation("pass", response_time_p95=1.0, request_latency_p50=1.0))]
    done = gates.evaluate(gate, {"response_time_p95": 590.0, "request_latency_p50": 400.0, "error_rate": 0.0}, earlier)
    assert done.compared_with == ("r3", "r2", "r1")
    p95, p50, errors = done.objectives
    assert (p95.result, p95.score, p95.compared_value, p95.violated) == ("pass", 2.0, pytest.approx(540.0), ())
    assert p95.change_pct == pytest.approx(100 * 50 / 540)
    assert dict(p95.targets) == {"<=+10%": pytest.approx(594.0), "<600": 600.0}
    assert (p50.result, p50.score, p50.compared_value, p50.violated) == ("warning", 0.5, pytest.approx(310.0), ("<=+10%",))
    assert (errors.result, errors.score, errors.compared_value) == ("pass", 2.0, None)
    assert (done.result, done.score_pct, done.judged) == ("pass", pytest.approx(90.0), 3)
    # response time 620: the key indicator fails its pass list (> 594, > 600) and its warning (<= 800) holds:
    # warning, 1 of 2; total (1 + 0.5 + 2) / 5 = 70 % < 75 %: fail
    worse = gates.evaluate(gate, {"response_time_p95": 620.0, "request_latency_p50": 400.0, "error_rate": 0.0}, earlier)
    assert worse.objectives[0].result == "warning" and worse.objectives[0].violated == ("<=+10%", "<600")
    assert (worse.result, worse.score_pct) == ("fail", pytest.approx(70.0))
    # a failed key indicator fails the evaluation whatever the score: 900 > 800
    key = gates.evaluate(gate, {"response_time_p95": 900.0, "request_latency_p50": 300.0, "error_rate": 0.0}, earlier)
    assert key.objectives[0].result == "fail" and key.key_failed == ("response_time_p95",)
    assert key.result == "fail" and key.score_pct == pytest.approx(60.0) and key.fails_run
    assert not gates.Evaluation(**{**key.__dict__, "advisory": True}).fails_run


def test_the_first_run_judges_absolute_criteria_and_says_what_it_could_not_compare(tmp_path):
    """No earlier result: ``<=+10%`` is not judged, ``<600`` judges the pass list (590: pass); an
    objective whose criteria are all relative is ``no_comparison`` and not scored; a counter the run
    lacks is ``no_value`` and not scored.  Score 2 of 2 (error_rate has no value): 100 %, pass."""
    slo = KEPTN_SLO.replace('"<=+10%"\n          - "<1000"', '"<=+10%"')
    gate = gate_in(tmp_path, slo)
    first = gates.evaluate(gate, {"response_time_p95": 590.0, "request_latency_p50": 400.0, "error_rate": None}, [])
    p95, p50, errors = first.objectives
    assert (p95.result, p95.not_judged, p95.compared_value) == ("pass", ("<=+10%",), None)
    assert (p50.result, p50.score, p50.not_judged) == ("no_comparison", 0.0, ("<=+10%",))
    assert (errors.result, errors.value) == ("no_value", None)
    assert (first.result, first.score_pct, first.judged, first.compared_with) == ("pass", 100.0, 1, ())
    # 650 on the first run: <600 fails the pass list, <=800 holds: warning, 1 of 2 = 50 % < 75 %: fail
    high = gates.evaluate(gate, {"response_time_p95": 650.0, "request_latency_p50": 400.0, "error_rate": None}, [])
    assert high.objectives[0].result == "warning" and (high.result, high.score_pct) == ("fail", 50.0)
    # nothing judged at all: Keptn's rule, a pass at 100 %
    none = gates.evaluate(gate, {"response_time_p95": None, "request_latency_p50": 1.0, "error_rate": None}, [])
    assert (none.result, none.score_pct, none.judged) == ("pass", 100.0, 0)


def test_the_lists_are_alternatives_and_include_result_with_score_chooses_the_earlier_results(tmp_path):
    slo = """\
    comparison: {compare_with: single_result, include_result_with_score: pass_or_warn}
    objectives:
      - sli: p95
        pass:
          - criteria: ["<=+10%"]
          - criteria: ["<100"]
    total_score: {pass: "100%"}
    """
    gate = gate_in(tmp_path, slo, "indicators: {p95: p95(app.response_time_ms)}\n")
    earlier = [("r2", evaluation("fail", p95=50.0)), ("r1", evaluation("warning", p95=200.0)),
               ("r0", evaluation("pass", p95=10.0))]
    # compared with r1 alone (the newest passed or warned): 200 x 1.1 = 220; 150 > 100 but <= 220: pass
    ok = gates.evaluate(gate, {"p95": 150.0}, earlier)
    assert ok.compared_with == ("r1",) and ok.objectives[0].result == "pass" and ok.objectives[0].violated == ("<100",)
    assert gates.evaluate(gate, {"p95": 250.0}, earlier).objectives[0].violated == ("<=+10%", "<100")
    # both lists fail: 250 > 220 and > 100
    assert gates.evaluate(gate, {"p95": 250.0}, earlier).result == "fail"


def test_an_indicator_is_its_aggregate_over_the_load_phase_samples():
    """Samples every 10 s from t = 0 to 100; the load phase 20..60 holds t = 20, 30, 40, 50, 60 with
    response times 10, 20, 30, 40, 50 (a NaN at t = 40 is left out: 10, 20, 40, 50).  Mean 30,
    median 30, p95 of four values by linear interpolation at rank 0.95 x 3 = 2.85: 40 + 0.85 x 10 = 48.5."""
    ts = np.arange(0.0, 101.0, 10.0)
    rt = np.where(ts == 40.0, np.nan, ts - 10.0)
    frames = {"web01": pd.DataFrame({"ts": ts, "app.response_time_ms": rt})}
    wanted = {name: files.Indicator(name, name, "app.response_time_ms") for name in ("mean", "median", "p95", "max", "min")}
    wanted["gone"] = files.Indicator("gone", "mean", "app.missing")
    got = indicators.indicator_values(frames, wanted, start=20.0, duration_s=40.0)
    assert got == {"mean": 30.0, "median": 30.0, "p95": pytest.approx(48.5), "max": 50.0, "min": 10.0, "gone": None}
