"""Which runs are a target's history: the named baseline only when it can be one."""
from pipelines.calibration import history

INDEX = {
    "p1": {"system": "s", "verdict": "pass", "started_at": "2026-01-01T00:00:00Z"},
    "p2": {"system": "s", "verdict": "pass", "started_at": "2026-01-02T00:00:00Z"},
    "f1": {"system": "s", "verdict": "fail", "started_at": "2026-01-03T00:00:00Z"},
    "o1": {"system": "other", "verdict": "pass", "started_at": "2026-01-03T00:00:00Z"},
    "t": {"system": "s", "verdict": None, "started_at": "2026-01-04T00:00:00Z"},
    "p3": {"system": "s", "verdict": "pass", "started_at": "2026-01-05T00:00:00Z"},     # after the target
}


def test_a_named_baseline_keeps_only_earlier_passed_runs_of_the_system():
    index = {**INDEX, "t": {**INDEX["t"], "baseline": ["t", "f1", "p3", "o1", "nope", "p2", "p2"]}}
    assert history.baseline_for("t", index, window=40) == ["p2"]


def test_a_named_baseline_with_nothing_usable_falls_back_to_the_window():
    index = {**INDEX, "t": {**INDEX["t"], "baseline": ["nope", "t", "f1"]}}
    assert history.baseline_for("t", index, window=40) == ["p1", "p2"]      # was [] (an empty baseline)
    assert history.baseline_for("t", index, window=1) == ["p2"]
    assert history.baseline_for("t", index, window=40, exclude={"p1"}) == ["p2"]


def test_where_a_targets_baseline_comes_from():
    assert history.baseline_choice("t", INDEX, window=40) == (["p1", "p2"], "before")
    named = {**INDEX, "t": {**INDEX["t"], "baseline": ["p1"]}}
    assert history.baseline_choice("t", named, window=40) == (["p1"], "named")
    # no passed run before it: the passed runs verified after it, the earliest first
    early = {**INDEX, "t": {**INDEX["t"], "started_at": "2025-12-31T00:00:00Z"}}
    assert history.baseline_choice("t", early, window=40) == (["p1", "p2", "p3"], "later")
    assert history.baseline_choice("t", early, window=2) == (["p1", "p2"], "later")
    # no passed run of the system at all
    alone = {"t": INDEX["t"], "f1": INDEX["f1"], "o1": INDEX["o1"]}
    assert history.baseline_choice("t", alone, window=40) == ([], "none")
    assert history.baseline_for("t", alone, window=40) == []
