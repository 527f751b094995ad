"""Rule mining with mlxtend, stationarity rules, bounded rules per consequent."""
from __future__ import annotations

import pandas as pd
import pytest

from pipelines.detectors.rules import mining as rule_mining

MINE = {"algorithm": "apriori", "max_rules_per_consequent": 25, "max_mined_items": None}   # the cores take no defaults


def binned(**cols):
    return pd.DataFrame({k: pd.array(v, dtype="Int64") for k, v in cols.items()})


def test_one_hot_items():
    oh = rule_mining.one_hot(binned(**{"a.x": [0, 1, 1, None], "b.y": [2, 2, 2, 2]}))
    assert list(oh.columns) == ["a.x=0", "a.x=1", "b.y=2"]
    assert oh["a.x=1"].tolist() == [False, True, True, False]


def test_one_hot_in_slices_of_counters_gives_the_same_items(monkeypatch):
    frame = binned(**{"a.x": [0, 1, 1, None], "b.y": [2, 2, 2, 2], "c.z": [None, None, None, None],
                      "d.w": [3, 0, 3, None]})
    whole = rule_mining.one_hot(frame)
    monkeypatch.setattr(rule_mining, "ONE_HOT_CELLS", 4)          # one counter of 4 intervals at a time
    sliced = rule_mining.one_hot(frame)
    assert sliced.equals(whole)
    # by hand: an item per bin a counter shows, in counter then bin order; c.z never observed has none
    assert list(whole.columns) == ["a.x=0", "a.x=1", "b.y=2", "d.w=0", "d.w=3"]
    assert whole["d.w=3"].tolist() == [True, False, True, False] and whole["b.y=2"].all()


def test_usual_range_is_the_narrowest_run_of_bins_holding_the_confidence():
    # counts per bin of a.x: [1, 4, 4, 1] over 10 intervals; 90 % needs bins 0..2 or 1..3 (9 of 10):
    # equal width and support -> the lower one
    col = [0] + [1] * 4 + [2] * 4 + [3]
    ranges = rule_mining.usual_ranges(binned(**{"a.x": col, "b.y": [1] * 10, "c.z": [0, 1] * 5}),
                                     {"a.x": 4, "b.y": 3, "c.z": 2}, min_confidence=0.9)
    assert ranges == {"a.x=0..2": pytest.approx(0.9), "b.y=1": 1.0}   # c.z would need both of its 2 bins


def test_mined_rules_have_hand_computed_support_and_confidence():
    # 10 intervals: load=1 in 6 of them, cpu=1 in 5 of those 6 and nowhere else; mem alternates
    load = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    cpu = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]
    mem = [0, 1, 0, 1, 0, 1, 0, 1, 0, 1]
    oh = rule_mining.one_hot(binned(**{"app.load": load, "x.cpu": cpu, "x.mem": mem}))
    rules = rule_mining.mine_rules(oh, min_support=0.3, min_confidence=0.9, max_len=3, **MINE)
    got = {(r.premise, r.consequent): (r.support, r.confidence) for r in rules.itertuples()}
    # cpu=1 -> load=1: support 5/10, confidence 5/5 = 1.0
    assert got[(("x.cpu=1",), "app.load=1")] == pytest.approx((0.5, 1.0))
    # load=0 -> cpu=0: support 4/10, confidence 4/4
    assert got[(("app.load=0",), "x.cpu=0")] == pytest.approx((0.4, 1.0))
    # load=1 -> cpu=1 has confidence 5/6 = 0.83 < 0.9: not a rule
    assert (("app.load=1",), "x.cpu=1") not in got
    assert all(len(c.split("=")) == 2 for c in rules["consequent"])   # single-item consequents
    assert all(rule_mining.counter_of(c) not in {rule_mining.counter_of(p) for p in ps}
               for ps, c in zip(rules["premise"], rules["consequent"]))


@pytest.mark.parametrize("algorithm", ["fpgrowth", "apriori"])
def test_both_algorithms_agree(algorithm):
    load = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0] * 3
    cpu = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0] * 3
    io = [1, 1, 1, 1, 1, 1, 0, 0, 0, 1] * 3
    oh = rule_mining.one_hot(binned(**{"app.load": load, "x.cpu": cpu, "x.io": io}))
    ref = rule_mining.mine_rules(oh, min_support=0.3, min_confidence=0.9, max_len=3, **{**MINE, "algorithm": "fpgrowth"})
    got = rule_mining.mine_rules(oh, min_support=0.3, min_confidence=0.9, max_len=3, **{**MINE, "algorithm": algorithm})
    key = ["premise", "consequent"]
    assert got.sort_values(key).reset_index(drop=True)[key].equals(ref.sort_values(key).reset_index(drop=True)[key])
    assert any(len(p) == 2 for p in ref["premise"])                      # premises of two counters occur


def test_rules_per_consequent_are_bounded():
    cols = {f"x.c{i}": [1, 1, 1, 1, 1, 1, 0, 0, 0, 0] for i in range(8)}
    oh = rule_mining.one_hot(binned(**cols))
    rules = rule_mining.mine_rules(oh, min_support=0.3, min_confidence=0.9, max_len=2, **{**MINE, "max_rules_per_consequent": 3})
    assert rules.groupby("consequent").size().max() == 3


def test_stationarity_rules_are_added_with_their_support():
    oh = rule_mining.one_hot(binned(**{"a.x": [1] * 10}))
    rules = rule_mining.mine_rules(oh, min_support=0.3, min_confidence=0.9, max_len=3, **MINE,
                                  stationarity={"a.x=1": 1.0})
    assert rules.to_dict("records") == [{"premise": (), "consequent": "a.x=1", "support": 1.0,
                                         "confidence": 1.0, "lift": 1.0}]


def test_storable_form_round_trips():
    rules = pd.DataFrame({"premise": [(), ("a.x=1", "b.y=0..2")], "consequent": ["c.z=1", "c.z=0"],
                          "support": [1.0, 0.4], "confidence": [1.0, 0.95], "lift": [1.0, 1.2]})
    back = rule_mining.rules_from_frame(rule_mining.rules_to_frame(rules))
    assert back["premise"].tolist() == rules["premise"].tolist()
