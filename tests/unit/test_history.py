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
