"""The detectors' record on the system's own history decides which of them the verdict follows."""
from __future__ import annotations

import pytest

from pipelines.stats import pvalues
from pipelines.detection import stage_results
from pipelines.verdict import headline, record

RULE = record.TrustRule(alpha=0.05, level=0.05, min_runs=3, combination="simes")
NORMALS = [f"n{i}" for i in range(20)]
FAULTS = [f"f{i}" for i in range(4)]


def loud_and_quiet() -> record.History:
    """``loud`` fails every normal run of the history (p 0.01) and every fault; ``quiet`` passes every
    normal run (p 0.5) and catches every fault (p 0.001)."""
    return record.History(normals={"loud": {r: 0.01 for r in NORMALS}, "quiet": {r: 0.5 for r in NORMALS}},
                          faults={"loud": {r: 0.01 for r in FAULTS}, "quiet": {r: 0.001 for r in FAULTS}})


def test_loo_pvalues_judge_each_run_against_the_others():
    # p(s, null) = the share of the others at or above s: by hand, 3 scores
    share = lambda s, null: sum(v >= s for v in null) / len(null)      # noqa: E731
    assert pvalues.loo_pvalues({"a": 1.0, "b": 2.0, "c": 3.0}, share) == {"a": 1.0, "b": 0.5, "c": 0.0}


def test_a_record_shows_how_far_its_counts_bound_the_rates_behind_them():
    """Clopper-Pearson, one-sided at 5 %, by hand: none failed of n normal runs bounds the false-alarm
    rate by 1 - 0.05^(1/n) (12 runs: 0.221, 36: 0.080, 4: 0.527); all n faults caught bounds the catch
    rate from below by 0.05^(1/n); 1 of 2 failed: the rate p with P(X <= 1 | 2, p) = 1 - p^2 = 0.05,
    p = sqrt(0.95) = 0.975; every run failed: 1; no run on record: no bound."""
    assert record.rate_bounds(0, 12, 0, 0, 0.05) == (pytest.approx(0.2209, abs=1e-4), None)
    assert record.rate_bounds(0, 36, 0, 0, 0.05)[0] == pytest.approx(0.0798, abs=1e-4)
    assert record.rate_bounds(0, 4, 4, 4, 0.05) == (pytest.approx(0.5271, abs=1e-4), pytest.approx(0.4729, abs=1e-4))
    assert record.rate_bounds(1, 2, 0, 3, 0.05) == (pytest.approx(0.9747, abs=1e-4), 0.0)
    assert record.rate_bounds(3, 3, 0, 0, 0.05) == (1.0, None)
    assert record.rate_bounds(0, 0, 0, 0, 0.05) == (None, None)


def test_a_detector_failing_every_normal_run_loses_its_say_and_the_verdict_follows_the_one_that_separates():
    hist = loud_and_quiet()
    # the target: loud says fail (0.01), quiet says pass (0.3)
    choice = record.choose({"loud": 0.01, "quiet": 0.3}, hist, RULE, lab=None)
    assert choice.detectors == ("quiet",) and choice.p_value == 0.3
    assert not choice.standings["loud"].trusted and choice.standings["quiet"].trusted
    # binomial tail of 20 false alarms in 20 runs at 5 %: 0.05 ** 20
    assert choice.standings["loud"].excess_p == pytest.approx(0.05 ** 20)
    # what 20 and 4 runs show of the rates (one-sided 95 %): 1 - 0.05^(1/20) = 0.139, 0.05^(1/4) = 0.473
    assert choice.standings["quiet"].sentence() == ("quiet: 0 of 20 normal runs failed (false alarms at most 14 %), "
                                                    "4 of 4 faults caught (at least 47 %)")
    # and when quiet sees a fault, the run fails on it alone
    assert record.choose({"loud": 0.9, "quiet": 0.002}, hist, RULE, lab=None).p_value == 0.002


def test_two_good_detectors_decide_together_when_their_records_tie():
    hist = record.History(normals={"a": {r: 0.5 for r in NORMALS}, "b": {r: 0.6 for r in NORMALS}},
                          faults={"a": {r: 0.001 for r in FAULTS}, "b": {r: 0.001 for r in FAULTS}})
    choice = record.choose({"a": 0.02, "b": 0.04}, hist, RULE, lab=None)
    # both caught all 4 faults: equal shares; Simes of (0.02, 0.04): min(2 x 0.02 / 1, 2 x 0.04 / 2) = 0.04
    assert choice.detectors == ("a", "b") and choice.weights == {"a": 1.0, "b": 1.0}
    assert choice.p_value == pytest.approx(0.04)


def test_equal_records_go_to_more_detectors():
    """``a`` and ``b`` pass every normal run and catch every fault, as does their combination: three
    equal records, read by their scores alone (``point``); the tie goes to (a, b), with faults in the
    history or without."""
    import dataclasses
    hist = record.History(normals={"a": {r: 0.5 for r in NORMALS}, "b": {r: 0.6 for r in NORMALS}},
                          faults={"a": {r: 0.001 for r in FAULTS}, "b": {r: 0.001 for r in FAULTS}})
    point = dataclasses.replace(RULE, reading="point")
    assert record.choose({"a": 0.3, "b": 0.01}, hist, point, lab=None).detectors == ("a", "b")
    no_faults = record.History(normals=hist.normals, faults={})
    assert record.choose({"a": 0.3, "b": 0.01}, no_faults, point, lab=None).detectors == ("a", "b")


def test_the_run_against_itself_never_takes_away_the_combination_of_the_others():
    """40 normal runs, no fault.  ``a`` and ``b`` pass every one (p 0.5); ``within_run`` fails 3
    (p 0.001), 7.5 % against a rate of 5 %: trusted (P(X >= 3 | 40, 0.05) = 0.32), but charged 2.5 %.
    Records: a, b and (a, b) pass all (1.0); within_run alone 0.975; (a, b, within_run) fails the
    same 3 (Simes: 3 x 0.001 = 0.003), 0.975.  Read by their scores alone (``point``), the best is
    (a, b), the tie with a and b alone going to more detectors.  Read with their uncertainty, 3 runs
    that only (a, b) got right are not beyond chance (P(X >= 3 | 3, 1/2) = 0.125): every candidate is
    as good; the best of them by its score decides."""
    import dataclasses

    runs = [f"n{i}" for i in range(40)]
    hist = record.History(normals={"a": {r: 0.5 for r in runs}, "b": {r: 0.5 for r in runs},
                                   "within_run": {r: (0.001 if r in ("n1", "n2", "n3") else 0.5) for r in runs}},
                          faults={}, self_contained=("within_run",))
    point = record.choose({"a": 0.5, "b": 0.5, "within_run": 0.001}, hist, dataclasses.replace(RULE, reading="point"),
                          lab=None)
    assert point.standings["within_run"].trusted and point.standings["within_run"].normal_failed == 3
    assert point.detectors == ("a", "b") and point.p_value == pytest.approx(0.5)
    assert point.candidates == {"a": 1.0, "b": 1.0, "within_run": 0.975, "a+b+within_run": 0.975, "a+b": 1.0}
    read = record.choose({"a": 0.5, "b": 0.5, "within_run": 0.001}, hist, RULE, lab=None)
    assert set(read.equals) == {"a", "b", "within_run", "a+b", "a+b+within_run"} and read.basis == "record"
    assert read.detectors == ("a", "b") and "not told apart from it beyond chance: a, b, within_run" in read.reason    # the best of the equals
    titled = record.choose({"a": 0.5, "b": 0.5, "within_run": 0.001},
                           dataclasses.replace(hist, titles={"within_run": "the run against itself"}), RULE, lab=None)
    assert ("not told apart from it beyond chance: a, b, the run against itself, a + b + the run against itself"
            in titled.reason)       # the page's names, each combination's members joined by " + "
    assert titled.standings["within_run"].to_json()["title"] == "the run against itself"


def test_the_record_is_read_in_the_runs_lab_when_the_history_has_enough_of_it():
    # day 1: 16 normal runs, none failed by either detector; day 2: 4, every one failed by "rules";
    # day 3: one normal run.  21 in all: enough for the record to weigh the detectors (19)
    day1 = [f"n{i}" for i in range(16)]
    normals = {"rules": {**{r: 0.5 for r in day1}, "d1": 0.01, "d2": 0.02, "d3": 0.01, "d4": 0.01, "e1": 0.5},
               "self": {**{r: 0.5 for r in day1}, "d1": 0.4, "d2": 0.6, "d3": 0.7, "d4": 0.5, "e1": 0.5}}
    lab_of = {**{r: "day1" for r in day1}, **{f"d{i}": "day2" for i in range(1, 5)}, "e1": "day3"}
    hist = record.History(normals, {}, lab_of, self_contained=("self",))
    day2 = record.choose({"rules": 0.001, "self": 0.5}, hist, RULE, lab="day2")
    assert day2.detectors == ("self",) and day2.standings["rules"].situation == "this lab"
    assert (day2.standings["rules"].normal_runs, day2.standings["rules"].normal_failed) == (4, 4)
    # a day-1 run: 16 normal runs of its lab, none failed by either: both decide (Simes of 0.001, 0.5 = 0.002)
    on_day1 = record.choose({"rules": 0.001, "self": 0.5}, hist, RULE, lab="day1")
    assert on_day1.detectors == ("rules", "self") and on_day1.p_value == pytest.approx(0.002)
    assert "(16 verified normal runs of this lab)" in on_day1.reason          # the one count it is read on
    # a lab with fewer than min_runs normal runs on record reads every lab's record: 4 of 21 failed,
    # binomial tail P(X >= 4 | 21, 0.05) = 0.0189 <= 0.05: rules still loses its say
    other = record.choose({"rules": 0.001, "self": 0.5}, hist, RULE, lab="day3")
    assert other.standings["rules"].situation == "every lab" and other.standings["rules"].normal_runs == 21
    assert other.standings["rules"].excess_p == pytest.approx(0.0189, abs=5e-4) and other.detectors == ("self",)
    assert "(21 verified normal runs)" in other.reason     # read on every lab: one count


def test_a_run_of_the_history_is_left_out_of_its_own_record():
    hist = loud_and_quiet()
    choice = record.choose({"quiet": 0.5}, hist, RULE, lab=None, leave_out="n0")
    assert choice.standings["quiet"].normal_runs == 19


def test_when_nothing_is_trusted_the_fewest_false_alarms_decide_and_say_so():
    hist = record.History(normals={"a": {r: 0.01 for r in NORMALS}, "b": {r: (0.01 if r < "n5" else 0.5)
                                                                           for r in NORMALS}}, faults={})
    choice = record.choose({"a": 0.001, "b": 0.2}, hist, RULE, lab=None)
    assert choice.detectors == ("b",) and "fewest false alarms" in choice.reason


def test_compose_follows_the_detector_with_the_clean_record():
    """The verdict file: stacking says fail (p 0.001) but failed every normal run of the history;
    the run against itself passes it (p 0.4) and passed them all: the run passes, and the page says why."""
    lab = {"status": "same_lab", "lab_runs": [], "reason": None, "largest_shifts": {}}
    det = {"run_id": "r", "system": "s", "baseline_runs": [{"run_id": "n0", "weight": 1.0}],
           "counter_scores": {"a": 0.9}, "details": {"lab": lab, "effects": {"a": 0.5}},
           "methods": {k: {"verdict": "fail", "flagged_counters": ["a"], "p_value": 0.001, "null": "same_lab"}
                       for k in stage_results.RULE_METHODS}}
    det["methods"]["association_rules_stacking"].update(history_normals={r: 0.01 for r in NORMALS},
                                                        history_faults={r: 0.01 for r in FAULTS})
    charts = {"verdict": None, "within_run": {"verdict": "pass", "score": 0.5, "p_value": 0.4, "normal_runs": 10,
                                              "flagged_counters": [], "counters_beyond_limit": [], "changes": {},
                                              "counter_scores": {}, "history_normals": {r: 0.5 for r in NORMALS},
                                              "history_faults": {r: 0.001 for r in FAULTS}}}
    rule = headline.HeadlineRule(verdict_rule="calibrated", false_alarm_rate=0.05,
                                 detectors=("stacking", "within_run"), trust="record")
    doc = stage_results.verdict_of(stage_results.StageDocs(det, charts, None), rule)
    assert doc["verdict"] == "pass" and doc["p_value"] == pytest.approx(0.4)
    assert doc["details"]["trust"]["decided_by"] == ["within_run"]
    assert doc["details"]["trust"]["record"]["stacking"]["normal_failed"] == 20
    # the same run under the old rule (every named detector, Simes): 2 x 0.001 fails it
    old = stage_results.verdict_of(stage_results.StageDocs(det, charts),
                                   headline.HeadlineRule(verdict_rule="calibrated", false_alarm_rate=0.05,
                                                         detectors=("stacking", "within_run"), trust="none",
                                                         detector_weights="equal"))
    assert old["verdict"] == "fail"


def test_n_min_is_the_fewest_normal_runs_that_tell_a_detector_from_a_coin():
    """0.5^4 = 0.0625 > 0.05 >= 0.5^5 = 0.031: 5 normal runs at 5 %; 7 at 1 % (0.5^7 = 0.0078)."""
    assert record.n_min(0.05) == 5 and record.n_min(0.01) == 7 and record.n_min(0.1) == 4


def test_four_normal_runs_cannot_weigh_the_detectors_and_the_run_against_itself_decides_and_says_why():
    """A history of 4 normal runs.  ``stacking`` passed each in leave-one-out (p 0.5) and ``within_run``
    too: a perfect record for both, which 4 runs cannot tell from a detector failing 40 %.  New normal
    runs: stacking fails half of them at p 0.0048, below 1/(4 + 1) = 0.2, what 4 runs can support;
    the run against itself passes them all (p 0.6).  The verdict follows the run against itself and
    says why; stacking's p-value is named as beyond what the history can calibrate."""
    runs = [f"n{i}" for i in range(4)]
    hist = record.History(normals={"stacking": {r: 0.5 for r in runs}, "within_run": {r: 0.5 for r in runs}},
                          faults={}, self_contained=("within_run",))
    nulls = {"stacking": record.Null(4, "same_lab"), "within_run": record.Null(4, None)}
    verdicts = []
    for i in range(6):                                   # six new normal runs, stacking "fails" every other one
        p = {"stacking": 0.0048 if i % 2 == 0 else 0.4, "within_run": 0.6}
        choice = record.choose(p, hist, RULE, lab=None, nulls=nulls)
        assert choice.detectors == ("within_run",) and choice.basis == "small_history" and choice.normal_runs == 4
        assert choice.reason.startswith("4 verified normal runs: too few to weigh the detectors (5 are needed")
        assert choice.short == "4 verified normal runs, too few to weigh the detectors (5 needed)"
        assert "run against itself" in choice.reason
        assert (choice.beyond == {"stacking": pytest.approx(0.2)}) == (i % 2 == 0)
        verdicts.append("fail" if choice.p_value <= 0.05 else "pass")
    assert verdicts == ["pass"] * 6
    # read by their scores alone, both records are perfect and the tie went to more detectors: Simes of
    # (0.0048, 0.6) = 2 x 0.0048 = 0.0096 failed half the new normal runs
    import dataclasses
    point = record.choose({"stacking": 0.0048, "within_run": 0.6}, hist, dataclasses.replace(RULE, reading="point"),
                          lab=None)
    assert point.detectors == ("stacking", "within_run") and point.p_value == pytest.approx(0.0096)
    # the run against itself cannot judge (a run too short to compare with itself): not judged, and why
    alone = record.choose({"stacking": 0.0048}, hist, RULE, lab=None, nulls=nulls)
    assert alone.detectors == () and alone.unjudged and "cannot be compared with itself" in alone.unjudged


def test_the_small_history_rule_counts_the_runs_of_the_lab_the_record_is_read_on():
    """A system of 13 normal runs, 9 of lab A and 4 of lab B, and no verified fault; a target of lab
    B.  Its record is read on lab B's 4 (at least ``min_runs`` there): too few to weigh the detectors
    (0.5^4 = 0.0625 > 0.05), so the run against itself decides (p 0.5: pass) although the rules fail
    it at p 6e-5, and the reason gives the one count it used.  A target of lab A is read on A's 9:
    the record weighs the detectors.  With verified faults beside lab B's 4, the record holds more
    runs and weighs them."""
    lab_of = {**{f"a{i}": "A" for i in range(9)}, **{f"b{i}": "B" for i in range(4)}}
    hist = record.History({"rules": {r: 0.5 for r in lab_of}, "self": {r: 0.5 for r in lab_of}}, {}, lab_of,
                          self_contained=("self",))
    on_b = record.choose({"rules": 6e-5, "self": 0.5}, hist, RULE, lab="B")
    assert on_b.basis == "small_history" and on_b.detectors == ("self",) and on_b.p_value == 0.5
    assert on_b.normal_runs == 4 and "13" not in on_b.reason
    assert on_b.reason.startswith("4 verified normal runs of this lab: too few to weigh the detectors")
    assert on_b.short == "4 verified normal runs of this lab, too few to weigh the detectors (5 needed)"
    on_a = record.choose({"rules": 6e-5, "self": 0.5}, hist, RULE, lab="A")
    assert on_a.basis == "record" and on_a.normal_runs == 9 and "(9 verified normal runs of this lab)" in on_a.reason
    # the same lab of 4 beside 3 verified faults (each caught by the rules at p 0.001, missed by the run
    # against itself): a record of 7 runs, one a detector right on all 7 is told from a coin by
    # (0.5^7 = 0.008 <= 0.05): the record weighs the detectors, the rules decide and fail the run
    faults = {"rules": {f"f{i}": 0.001 for i in range(3)}, "self": {f"f{i}": 0.6 for i in range(3)}}
    taught = record.History(hist.normals, faults, {**lab_of, "f0": "A", "f1": "A", "f2": "A"},
                            self_contained=("self",))
    on_b = record.choose({"rules": 6e-5, "self": 0.5}, taught, RULE, lab="B")
    assert on_b.basis == "record" and "rules" in on_b.detectors and on_b.p_value <= 0.05
    assert "(4 verified normal runs of this lab)" in on_b.reason
    two = record.History(hist.normals, {d: dict(list(v.items())[:1]) for d, v in faults.items()}, lab_of,
                         self_contained=("self",))     # 4 normal runs and 1 fault: 0.5^5 = 0.031, enough
    assert record.choose({"rules": 6e-5, "self": 0.5}, two, RULE, lab="B").basis == "record"


def test_verified_normal_runs_count_though_no_detector_has_a_record_of_them():
    """Two verified passed runs of the target's lab, too few to hold one out: no detector has a record,
    yet the lab is not new.  The run is judged against itself, and the reason says what holds."""
    hist = record.History({}, {}, {"p1": "A", "p2": "A", "t": "A"}, self_contained=("self",),
                          verified=frozenset({"p1", "p2"}))
    choice = record.choose({"rules": 0.001, "self": 0.4}, hist, RULE, lab="A")
    assert choice.basis == "small_history" and choice.detectors == ("self",) and choice.normal_runs == 2
    assert choice.short == "2 verified normal runs of this lab, too few to weigh the detectors (5 needed)"
    elsewhere = record.choose({"rules": 0.001, "self": 0.4}, hist, RULE, lab="B")
    assert elsewhere.basis == "new_lab"                  # lab B has none of them: a new lab


def test_a_new_lab_is_judged_by_the_detectors_whose_null_crosses_labs():
    """30 normal runs of lab A; the run is of lab B, which has none.  The record read on lab A is not
    this run's: the charts, judged against normal runs across labs, decide (p 0.3: pass), not the run
    against itself (p 0.002) nor the rules, whose null is lab A's."""
    runs = [f"n{i}" for i in range(30)]
    hist = record.History(normals={d: {r: 0.5 for r in runs} for d in ("stacking", "control_charts", "within_run")},
                          faults={}, lab_of={r: "A" for r in runs}, self_contained=("within_run",))
    nulls = {"stacking": record.Null(30, "same_lab"), "control_charts": record.Null(30, "cross_lab"),
             "within_run": record.Null(30, None)}
    choice = record.choose({"stacking": 0.01, "control_charts": 0.3, "within_run": 0.002}, hist, RULE, lab="B",
                           nulls=nulls)
    assert choice.detectors == ("control_charts",) and choice.p_value == 0.3 and choice.basis == "new_lab"
    assert "no verified normal run" in choice.reason
    without = record.choose({"stacking": 0.01, "within_run": 0.2}, hist, RULE, lab="B", nulls=nulls)
    assert without.detectors == ("within_run",)             # no null across labs: the run against itself
    same_lab = record.choose({"stacking": 0.01, "control_charts": 0.3, "within_run": 0.002}, hist, RULE, lab="A",
                             nulls=nulls)
    assert same_lab.basis == "record"                       # its own lab's 30 runs: the record weighs them


def test_a_candidate_is_better_only_beyond_chance():
    """Exact McNemar, one-sided: 5 runs only a got right, none only b: P(X >= 5 | 5, 1/2) = 1/32 = 0.031
    <= 0.05; 4 of them: 1/16 = 0.0625, not beyond chance."""
    a = {f"r{i}": True for i in range(20)}
    b5 = {**a, **{f"r{i}": False for i in range(5)}}
    b4 = {**a, **{f"r{i}": False for i in range(4)}}
    assert record.better(a, b5, 0.05) and not record.better(a, b4, 0.05) and not record.better(b5, a, 0.05)


def test_a_clean_record_from_a_null_that_finds_nothing_is_said_to_say_little():
    """Eight normal runs, no fault.  Stacking's p-values on them are 0.125 once and 1 seven times (its
    rules found nothing: a score of 0): under the null at least 4 of 8 would lie at or below 1/2 about
    as often as not, and 1 of 8 has P(Binomial(8, 1/2) <= 1) = 9/256 = 0.035 <= 0.05.  Its clean record
    decides (the others failed one or two normal runs), and the choice says the record cannot show what
    it would catch; with a verified fault in the history, its catches are on record and nothing is said."""
    runs = [f"n{i}" for i in range(8)]
    normals = {"stacking": {r: (0.125 if r == "n0" else 1.0) for r in runs},
               "charts": {r: (0.01 if r in ("n1", "n2") else 0.3 + 0.05 * i) for i, r in enumerate(runs)}}
    hist = record.History(normals=normals, faults={})
    choice = record.choose({"stacking": 1.0, "charts": 0.2}, hist, RULE, lab=None)
    assert choice.detectors == ("stacking",)
    assert set(choice.silent) == {"stacking"} and "above 1/2 on 7 of its 8 normal runs" in choice.silent["stacking"]
    assert choice.to_json()["silent_nulls"] == choice.silent
    assert record.silent_null("charts", hist, set(runs), 0.05) is None      # 5 of 8 at or below 1/2
    with_fault = record.History(normals=normals, faults={"stacking": {"f0": 0.01}, "charts": {"f0": 0.5}})
    assert record.choose({"stacking": 1.0, "charts": 0.2}, with_fault, RULE, lab=None).silent == {}


def test_a_record_that_cannot_weigh_a_silent_null_leaves_the_run_to_itself():
    """Eight normal runs, no fault.  Stacking's rules found nothing in 7 of them (p 1, a score of 0) and
    0.125 in one: a clean record, by construction.  The run against itself failed one of the eight
    (p 0.002; 1 of 8 at 5 % is P(X >= 1 | 8, 0.05) = 0.34: kept).  Read by their records stacking is
    the best (0 of 8 against 1 of 8), but with no fault the record cannot show what a null that finds
    nothing would catch, so the run against itself decides, and says why: a new run that shifts inside
    itself (its p 0.001) fails, where stacking (p 1) would have passed it.  With ``silent: keep``
    stacking decides (the page only says so); with one verified fault on record, the record decides."""
    import dataclasses
    runs = [f"n{i}" for i in range(8)]
    normals = {"stacking": {r: (0.125 if r == "n0" else 1.0) for r in runs},
               "within_run": {r: (0.002 if r == "n1" else 0.1 + 0.1 * i) for i, r in enumerate(runs)}}
    hist = record.History(normals=normals, faults={}, self_contained=("within_run",),
                          titles={"stacking": "association rules"})
    assert record.silent_null("within_run", hist, set(runs), 0.05) is None     # at or below 1/2 on 5 of 8
    shifted = {"stacking": 1.0, "within_run": 0.001}
    choice = record.choose(shifted, hist, RULE, lab=None)
    assert choice.detectors == ("within_run",) and choice.p_value == 0.001 and choice.basis == "silent_null"
    assert choice.reason.startswith("no verified fault in the history, and the best record on its 8 normal runs "
                                    "(association rules) comes from a null that finds nothing unusual")
    assert "decided by the run against itself" in choice.reason and set(choice.silent) == {"stacking"}
    assert choice.to_json()["basis"] == "silent_null" and choice.candidates["stacking"] > choice.candidates["within_run"]
    kept = record.choose(shifted, hist, dataclasses.replace(RULE, silent="keep"), lab=None)
    assert kept.detectors == ("stacking",) and kept.p_value == 1.0 and kept.basis == "record"
    with_fault = record.History(normals=normals, faults={"stacking": {"f0": 0.01}, "within_run": {"f0": 0.5}},
                                self_contained=("within_run",))
    on_record = record.choose(shifted, with_fault, RULE, lab=None)
    assert on_record.detectors == ("stacking",) and on_record.basis == "record" and on_record.silent == {}
    # the run against itself cannot judge this run: the best record decides, and the page says what it cannot show
    alone = record.choose({"stacking": 1.0}, hist, RULE, lab=None)
    assert alone.detectors == ("stacking",) and set(alone.silent) == {"stacking"}
