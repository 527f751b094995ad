"""Which runs are a target's history: the named baseline only when it can be one."""
from pipelines.systems import history

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


def test_a_target_is_compared_with_its_own_labs_runs_when_the_history_has_any():
    def run(day, when, verdict="pass"):
        return {"system": "s", "verdict": verdict, "started_at": when, "environment": {"day": day}}
    index = {"a1": run(1, "2026-01-01T01:00:00Z"), "a2": run(1, "2026-01-01T02:00:00Z"),
             "t": run(2, "2026-01-02T01:00:00Z", None),
             "b1": run(2, "2026-01-02T03:00:00Z"), "bf": run(2, "2026-01-02T02:00:00Z", "fail"),
             "b2": run(2, "2026-01-02T04:00:00Z")}
    # nothing of day 2 before it, two passed runs of day 2 after it: those, not day 1's
    assert history.baseline_choice("t", index, window=40) == (["b1", "b2"], "later_lab")
    assert history.baseline_choice("t", index, window=1) == (["b1"], "later_lab")
    # a passed run of its lab before it: the newest runs before it, as always (day 1's among them)
    index["b0"] = run(2, "2026-01-02T00:30:00Z")
    assert history.baseline_choice("t", index, window=40) == (["a1", "a2", "b0"], "before")
    # its lab only in a run older than the window: that run, not the window of another lab's
    index["a3"] = run(1, "2026-01-02T00:45:00Z")
    assert history.baseline_choice("t", index, window=1) == (["b0"], "before")
    assert history.baseline_choice("t", index, window=2) == (["b0", "a3"], "before")
    # no run of its lab at all: the newest before it, whatever their lab
    del index["b0"], index["b1"], index["b2"]
    assert history.baseline_choice("t", index, window=40) == (["a1", "a2", "a3"], "before")
