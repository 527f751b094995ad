"""Which ranking orders a failed run's counters: the one with the better record on the system's
labelled faults (pipelines/verdict/counter_order.py), computed by hand."""
from __future__ import annotations

import pandas as pd
import pytest

from pipelines.verdict import counter_order
from pipelines.verdict.cause_signatures import FaultLabel

PASSED = ["p1", "p2", "p3", "p4"]


def medians(rows: dict[str, dict[str, float]]) -> pd.DataFrame:
    base = {"p1": {"a.cpu": 10, "b.lat": 100, "c.lat": 50}, "p2": {"a.cpu": 11, "b.lat": 102, "c.lat": 50},
            "p3": {"a.cpu": 10, "b.lat": 98, "c.lat": 51}, "p4": {"a.cpu": 11, "b.lat": 100, "c.lat": 49}}
    return pd.DataFrame({**base, **rows}).T.astype(float)


def features(ratios: dict[str, dict[str, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"target": run, "baseline": "p1", **{f"upper:{c}": v for c, v in r.items()}}
                         for run, r in ratios.items()])


def test_the_robust_distance_by_hand():
    """a.cpu: passed medians 10, 11, 10, 11 (median 10.5, MAD 0.5, x 1.4826 = 0.741); 20 is
    (20 - 10.5) / 0.741 = 12.8 away.  b.lat: 100, 102, 98, 100 (median 100, MAD 1 -> 1.483; the 5 %
    floor is 5): 110 is 10 / 5 = 2 away."""
    got = counter_order.robust_distance(pd.Series({"a.cpu": 20.0, "b.lat": 110.0, "c.lat": 50.0}),
                                        medians({}).loc[PASSED])
    assert got["a.cpu"] == pytest.approx(9.5 / (0.5 * 1.4826), rel=1e-3)
    assert got["b.lat"] == pytest.approx(2.0, rel=1e-3)
    assert counter_order.robust_order(pd.Series({"a.cpu": 20.0, "b.lat": 110.0, "c.lat": 50.0}),
                                      medians({}).loc[PASSED]) == ["a.cpu", "b.lat", "c.lat"]


def test_a_ranking_with_a_poor_record_is_set_aside_for_the_one_with_a_good_record():
    """Two verified faults of cause ``cpu`` name ``a.cpu``.  The charts never saw a.cpu move (its
    violation ratio 0: the detectors' order b.lat, c.lat cannot show it), while its median left the
    passed runs' (20, 21 against about 10.5): the robust distance, each fault with the other's
    signature (a.cpu), shows it first on both.  Records: detectors 0 of 2 in five, robust 2 of 2
    first: robust orders the run."""
    labels = {"f1": FaultLabel("cpu", ("a.cpu",)), "f2": FaultLabel("cpu", ("a.cpu",))}
    frame = medians({"f1": {"a.cpu": 20, "b.lat": 110, "c.lat": 60}, "f2": {"a.cpu": 21, "b.lat": 112, "c.lat": 58}})
    charts = features({"f1": {"a.cpu": 0.0, "b.lat": 0.9, "c.lat": 0.5}, "f2": {"a.cpu": 0.0, "b.lat": 0.8, "c.lat": 0.6}})
    got = counter_order.records(labels, frame, charts, {r: PASSED for r in labels})
    assert got["detectors"] == counter_order.RankingRecord("detectors", 2, 0, 0)
    assert got["robust"] == counter_order.RankingRecord("robust", 2, 2, 2)
    assert counter_order.choose(got) == "robust"
    assert got["robust"].sentence() == "on this system's 2 labelled fault(s): first 2, in five 2"


def test_the_detectors_order_stays_where_its_record_is_the_better_or_there_is_none():
    """One fault of cause ``x`` names a.cpu (no other fault of x: no signature).  The charts put it
    first (ratio 0.9); its median barely moved (10.8) while b.lat and c.lat moved far: the robust
    distance shows it third.  Both in five, only the detectors' first: the detectors' order stays.
    Without a labelled fault the charts judged, or without any, it stays too."""
    labels = {"f1": FaultLabel("x", ("a.cpu",))}
    frame = medians({"f1": {"a.cpu": 10.8, "b.lat": 200, "c.lat": 100}})
    charts = features({"f1": {"a.cpu": 0.9, "b.lat": 0.5, "c.lat": 0.4}})
    got = counter_order.records(labels, frame, charts, {"f1": PASSED})
    assert got["detectors"] == counter_order.RankingRecord("detectors", 1, 1, 1)
    assert got["robust"] == counter_order.RankingRecord("robust", 1, 0, 1)
    assert counter_order.choose(got) == "detectors"
    unseen = counter_order.records(labels, frame, features({"f9": {"a.cpu": 0.9}}), {"f1": PASSED})
    assert unseen["robust"].faults == 0 and counter_order.choose(unseen) == "detectors"
    assert counter_order.choose({}) == "detectors"


def test_the_anchor_distance_by_hand():
    """BARO's RobustScorer over intervals.  a: the passed runs' intervals 1, 2 | 3, 4, 5 pooled, median
    3, quartiles 2 and 4 (IQR 2); the run's intervals 3 and 9: the largest distance |9 - 3| / 2 = 3.
    b: 10 in every passed interval (IQR 0, counted as 1); the run's 10 and 12: 2.  c never has a value
    in the run: left out."""
    passed = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0, 5.0], "b": [10.0] * 5, "c": [1.0] * 5})
    run = pd.DataFrame({"a": [3.0, 9.0], "b": [10.0, 12.0], "c": [float("nan")] * 2})
    got = counter_order.anchor_distance(run, passed)
    assert got.to_dict() == pytest.approx({"a": 3.0, "b": 2.0})
    assert counter_order.anchor_order(run, passed) == ["a", "b"]


def test_the_detectors_lead_the_five_and_the_anchor_fills_it():
    """The detectors' first three, then the anchor's first counters not among them up to five, then
    every other flagged counter once; a short detectors' order leaves more of the five to the anchor."""
    detectors = ["d1", "d2", "d3", "d4", "d5", "d6"]
    assert counter_order.with_anchor(detectors, ["x", "d2", "y", "z"], lead=3) == ["d1", "d2", "d3", "x", "y", "d4", "d5", "d6"]
    assert counter_order.with_anchor(["d1"], ["x", "y", "z", "w", "v"], lead=3) == ["d1", "x", "y", "z", "w"]
    assert counter_order.with_anchor(detectors, [], lead=3) == detectors


def test_a_failed_runs_five_is_filled_by_the_anchors_counters_whose_change_matters(monkeypatch):
    """The report's order (``run_reports.counters_in_order``) with no labelled fault in the history: the
    deciders' flags d1, d2, d3, d4, then, in the five, the anchor's farthest counters whose change is at
    least 5 %: x (+40 %) and not y (+1 %, too small to show), then z (-30 %); d4 after them.  A passed run
    keeps its flags as they are; ``anchor_places`` 1 gives the anchor the fifth place, 0 none."""
    from pipelines.reporting import run_reports

    monkeypatch.setattr(run_reports, "anchor_of", lambda run_id, passed, read: ["y", "x", "d1", "z"])
    inputs = run_reports.ReportInputs(detection={}, raw=[], fault_labels={}, features=None, key="k")
    doc = {"verdict": "fail", "flagged_counters": ["d1", "d2", "d3", "d4"], "baseline_runs": [{"run_id": "p1"}],
           "details": {"effects": {"d1": 0.5, "d2": 0.4, "d3": 0.3, "d4": 0.2, "x": 0.4, "y": 0.01, "z": -0.3}}}
    order, ordering = run_reports.counters_in_order("t1", doc, {}, inputs, {}, 5.0, anchor_places=2)
    assert order == ["d1", "d2", "d3", "x", "z", "d4"] and ordering is None
    passed, _ = run_reports.counters_in_order("t1", {**doc, "verdict": "pass"}, {}, inputs, {}, 5.0, anchor_places=2)
    assert passed == ["d1", "d2", "d3", "d4"]
    one, _ = run_reports.counters_in_order("t1", doc, {}, inputs, {}, 5.0, anchor_places=1)
    assert one == ["d1", "d2", "d3", "d4", "x"]                          # the anchor's one place: fifth
    alone, _ = run_reports.counters_in_order("t1", doc, {}, inputs, {}, 5.0, anchor_places=0)
    assert alone == ["d1", "d2", "d3", "d4"]
