"""Great Expectations suites against each kind of bad archive (real GX, no mocks)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipelines import config
from pipelines.validation import archives, checks, suites
from tests.helpers import START, good_frames, good_meta, members, write_tgz

PARAMS = config.load_params("validate")


@pytest.fixture(scope="module")
def validator():
    return suites.Validator(suites.suites_from_params(PARAMS), project_dir=None, docs_dir=None)


def checked(tmp_path, validator, meta=None, frames=None, name="sys-run-1", params=PARAMS):
    path = write_tgz(tmp_path / f"{name}.tar.gz", members(meta or good_meta(name), frames or good_frames()))
    return suites.validate_archive(path, validator, params)


def check(tmp_path, validator, meta=None, frames=None, name="sys-run-1"):
    return checked(tmp_path, validator, meta, frames, name).failures


def failed(failures):
    return {(f["expectation"], f.get("kwargs", {}).get("column")) for f in failures}


def test_good_archive_passes(tmp_path, validator):
    assert check(tmp_path, validator) == []


def test_parse_timestamps_accepts_epoch_and_iso_with_offset():
    ts = checks.parse_timestamps(pd.Series(["2026-01-01T00:00:10+00:00", "2026-01-01T01:00:10+01:00"]))
    assert list(ts) == [1767225610.0, 1767225610.0]
    assert list(checks.parse_timestamps(pd.Series([1.5, 2]))) == [1.5, 2.0]
    no_offset = checks.parse_timestamps(pd.Series(["2026-01-01T00:00:10", "2026-01-01T00:00:20"]))
    assert no_offset.isna().all()


@pytest.mark.parametrize("mutate,expected", [
    (lambda f: f["web01"].assign(timestamp=f["web01"]["timestamp"][::-1].values),
     ("expect_column_values_to_be_between", "ts_not_increasing")),
    (lambda f: f["web01"].assign(timestamp=f["web01"]["timestamp"].astype(object).where(
        f["web01"].index != 3, "yesterday")), ("expect_column_values_to_be_between", "ts_unparseable")),
    (lambda f: f["web01"].iloc[:8], ("expect_column_pair_values_a_to_be_greater_than_b", None)),
    (lambda f: f["web01"].iloc[:40], ("expect_column_values_to_be_between", "coverage")),
    (lambda f: f["web01"][["timestamp"]], ("expect_column_values_to_be_between", "counters")),
])
def test_each_run_level_fault_fails_the_expectation_that_guards_it(tmp_path, validator, mutate, expected):
    frames = good_frames()
    frames["web01"] = mutate(frames)
    failures = check(tmp_path, validator, frames=frames)
    assert expected in failed(failures)
    assert all("web01" in suites.describe_failure(f) for f in failures if f["suite"] == "host_coverage")


@pytest.mark.parametrize("counter,mutate,check_name,example", [
    ("web.cpu_pct", lambda v: v.astype(object).where(v.index != 5, "n/a"), "numeric_share", "n/a"),
    ("web01.cpu_pct", lambda v: v.where(v.index != 7, 140.0), "in_range_share", "140.0"),   # host-level > 100
    ("web.io_write_bytes_per_s", lambda v: -v, "in_range_share", "-"),                     # a negative rate
    ("web.io_write_bytes_per_s", lambda v: v.where(v.index != 2, np.inf), "finite_share", "inf"),
])
def test_an_impossible_counter_is_dropped_and_the_run_kept(tmp_path, validator, counter, mutate, check_name, example):
    """the data contract §1: a counter whose values are impossible for it is dropped with its reason
    (check, host, counter, example values); the run is analysed without it."""
    frames = good_frames()
    web = frames["web01"].rename(columns={"web.cpu_pct": "web01.cpu_pct"}) if counter == "web01.cpu_pct" \
        else frames["web01"]
    web[counter] = mutate(web[counter])
    frames["web01"] = web
    result = checked(tmp_path, validator, frames=frames)
    assert result.failures == []
    assert [(d["host"], d["counter"], d["checks"]) for d in result.dropped] == [("web01", counter, [check_name])]
    reason = result.dropped[0]["reason"]
    assert reason.startswith(f"host web01, counter {counter}: ") and example in reason
    kept = checks.valid_host_frames(result.frames, result.summary, result.dropped)
    assert counter not in kept["web01"].columns and "web.io_write_bytes_per_s" in kept["web01"].columns \
        or counter == "web.io_write_bytes_per_s" and "web.io_write_bytes_per_s" not in kept["web01"].columns
    assert "app.response_time_ms" in kept["lg01"].columns


def test_a_bad_counter_name_drops_that_counter(tmp_path, validator):
    frames = good_frames()
    frames["web01"] = frames["web01"].rename(columns={"web.cpu_pct": "cpu pct"})
    result = checked(tmp_path, validator, frames=frames)
    assert result.failures == [] and [d["counter"] for d in result.dropped] == ["cpu pct"]
    assert "name is not <component>.<counter>" in result.dropped[0]["reason"]


@pytest.mark.parametrize("environment,value,kept", [
    ({"cpu_cores": 8}, 380.0, True),        # tomcat on 8 cores: up to 800 (top, pidstat, PerfMon)
    ({"cpu_cores": 8}, 900.0, False),       # 900 > 808 (800 + 1 % slack)
    ({"cpu_model": "x"}, 5000.0, True),     # cores unknown: no upper bound
    ({"cpu_cores": 2, "web01.cpu_cores": 8}, 380.0, True),   # the host's own count wins
    ({"cpu_cores": 8, "web01_cpu_cores": 2}, 380.0, False),  # 380 > 202
])
def test_process_cpu_percentages_are_bounded_by_the_hosts_cores(tmp_path, validator, environment, value, kept):
    frames = good_frames()
    frames["web01"]["tomcat.cpu_pct"] = value
    frames["web01"]["web01.cpu_pct"] = 95.0                  # host-level stays within 100
    result = checked(tmp_path, validator, meta=good_meta("sys-run-1", environment=environment), frames=frames)
    assert result.failures == []
    assert ("tomcat.cpu_pct" not in {d["counter"] for d in result.dropped}) is kept


def test_kind_bounds_by_hand():
    assert checks.kind_bounds("share_pct", None, slack=0.01) == (0.0, 101.0)
    assert checks.kind_bounds("process_cpu_pct", 8.0, slack=0.0) == (0.0, 800.0)
    assert checks.kind_bounds("process_cpu_pct", None, slack=0.0) == (0.0, np.inf)
    assert checks.kind_bounds("nonneg", 4.0, slack=0.5) == (0.0, np.inf)
    assert checks.kind_bounds("any", 4.0, slack=0.5) == (-np.inf, np.inf)


@pytest.mark.parametrize("counter,host,kind", [
    ("tomcat.cpu_pct", "web01", "process_cpu_pct"),
    ("tomcat.privileged_pct", "web01", "process_cpu_pct"),
    ("web01.cpu_pct", "web01", "share_pct"),          # the component is the machine
    ("os.cpu_pct", "web01", "share_pct"),             # a host-level component
    ("tomcat.gc_time_pct", "web01", "share_pct"),     # a share of time, not CPU per core
    ("redis.hit_pct", "cache01", "share_pct"),
    ("app.response_time_ms", "lg01", "nonneg"),
    ("app.temperature", "lg01", "any"),
])
def test_counter_kind_from_the_units_table(counter, host, kind):
    assert checks.counter_kind(counter, host, units=PARAMS["units"],
                                 host_components=PARAMS["host_components"]) == kind


def test_a_users_own_rule_comes_first():
    units = [{"counter": "cpu_pct", "scope": "process", "kind": "any"}] + PARAMS["units"]
    assert checks.counter_kind("tomcat.cpu_pct", "web01", units=units, host_components=[]) == "any"


def test_a_run_that_loses_most_of_its_counters_is_quarantined(tmp_path, validator):
    frames = good_frames()
    frames["web01"]["web.cpu_pct"] = "broken"
    frames["web01"]["web.io_write_bytes_per_s"] = -1.0
    frames["lg01"]["app.response_time_ms"] = -1.0            # 3 of 4 counters dropped > 0.5
    result = checked(tmp_path, validator, frames=frames)
    assert ("expect_column_values_to_be_between", "dropped_counter_share") in failed(result.failures)
    reason = archives.quarantine_reason(result.failures, result.dropped)
    assert "3 counters dropped" in reason and "host web01, counter web.cpu_pct" in reason


def test_a_dropped_load_counter_quarantines_the_run(tmp_path, validator):
    frames = good_frames()
    frames["lg01"]["app.arrival_rate"] = -frames["lg01"]["app.arrival_rate"]
    assert ("expect_column_values_to_be_in_set", "load_counter_usable") in failed(
        check(tmp_path, validator, frames=frames))


def test_value_mostly_keeps_a_counter_and_blanks_its_impossible_samples(tmp_path, validator):
    frames = good_frames()
    frames["web01"]["web01.cpu_pct"] = 50.0
    frames["web01"].loc[4, "web01.cpu_pct"] = 150.0
    params = dict(PARAMS, value_mostly=0.9)
    lenient = suites.Validator(suites.suites_from_params(params), project_dir=None, docs_dir=None)
    result = checked(tmp_path, lenient, frames=frames, params=params)
    assert result.failures == [] and result.dropped == []
    kept = checks.valid_host_frames(result.frames, result.summary, result.dropped)["web01"]["web01.cpu_pct"]
    assert np.isnan(kept[4]) and kept.drop(index=4).eq(50.0).all()


@pytest.mark.parametrize("period,samples,required", [
    (60.0, 10, 9),     # 10 minutes sampled once a minute: floor(0.9 x 600 / 60) = 9
    (10.0, 60, 10),    # plenty of samples: min_samples_per_host
    (300.0, 2, 3),     # two samples in 10 minutes: the floor (3), so it fails
])
def test_required_samples_follow_the_duration_and_the_sampling_period(period, samples, required):
    ts = START + period * np.arange(1, samples + 1)
    frames = {"h": pd.DataFrame({"timestamp": ts, "h.x": 1.0})}
    cov = checks.host_coverage(frames, started_at=START, duration_s=600, min_samples=10, min_coverage=0.9,
                                 min_samples_floor=3)
    assert cov.loc[0, "load_samples"] == samples
    assert cov.loc[0, "required_samples"] == required


def test_a_ten_minute_run_sampled_once_a_minute_is_valid(tmp_path, validator):
    """9 samples, at 60..540 s of a 600 s run, are all such a host can give (was: 10 needed)."""
    frames = {h: f.iloc[1:].reset_index(drop=True) for h, f in good_frames(period=60.0, n_pre=0).items()}
    assert len(frames["web01"]) == 9
    assert check(tmp_path, validator, frames=frames) == []
    frames = {h: f.iloc[1:].reset_index(drop=True) for h, f in frames.items()}       # 8 of 9: too few
    assert ("expect_column_pair_values_a_to_be_greater_than_b", None) in failed(check(tmp_path, validator, frames=frames))


@pytest.mark.parametrize("change,expected", [
    ({"schema_version": 2}, ("expect_column_values_to_be_in_set", "schema_version")),
    ({"run_id": "other-run"}, ("expect_column_values_to_be_in_set", "run_id_matches_archive")),
    ({"started_at": "last tuesday"}, ("expect_column_values_to_not_be_null", "started_at_epoch")),
    ({"duration_s": "600"}, ("expect_column_values_to_be_in_set", "duration_is_number")),
    ({"duration_s": -5}, ("expect_column_values_to_be_between", "duration_s")),
    ({"verdict": "maybe"}, ("expect_column_values_to_be_in_set", "verdict")),
    ({"workload": {"profile": "p", "load_counter": "app.missing"}},
     ("expect_column_values_to_be_in_set", "load_counter_recorded")),
    ({"environment": {"nested": {"a": 1}}}, ("expect_column_values_to_be_in_set", "environment_is_flat_object")),
    ({"baseline": "r0"}, ("expect_column_values_to_be_in_set", "baseline_is_list_of_ids")),
])
def test_each_bad_run_json_fails_the_expectation_that_guards_it(tmp_path, validator, change, expected):
    meta = dict(good_meta("sys-run-1"), **change)
    assert expected in failed(check(tmp_path, validator, meta=meta))


def test_missing_required_field(tmp_path, validator):
    meta = good_meta("sys-run-1")
    del meta["system"]
    assert ("expect_column_values_to_be_in_set", "has_system") in failed(check(tmp_path, validator, meta=meta))


def test_target_with_null_verdict_is_valid(tmp_path, validator):
    assert check(tmp_path, validator, meta=good_meta("sys-run-1", verdict=None, cause=None)) == []


def test_empty_cells_are_missing_samples_not_errors(tmp_path, validator):
    frames = good_frames()
    frames["web01"].loc[[4, 9], "web.cpu_pct"] = np.nan
    assert check(tmp_path, validator, frames=frames) == []


def test_duplicate_counter_names_across_hosts(tmp_path, validator):
    frames = good_frames()
    frames["lg01"]["web.cpu_pct"] = 1.0
    assert ("unique_counter_names", None) in failed(check(tmp_path, validator, frames=frames))


def test_unsafe_archive_is_reported_not_raised(tmp_path, validator):
    files = members(good_meta("sys-run-1"), good_frames())
    files["../x"] = b"1"
    failures = suites.validate_archive(write_tgz(tmp_path / "sys-run-1.tar.gz", files), validator, PARAMS).failures
    assert failures[0]["expectation"] == "readable_safe_archive"
    assert "unsafe member path" in failures[0]["reason"]


def test_host_coverage_by_hand():
    # samples every 10 s at 20..500 s of a 600 s phase; each averages the 10 s before it,
    # so they span 10..500 s: 490 / 600
    frames = {"h": pd.DataFrame({"timestamp": START + np.arange(20, 501, 10.0), "h.x": 1.0})}
    cov = checks.host_coverage(frames, started_at=START, duration_s=600, min_samples=10, min_coverage=0.9,
                                 min_samples_floor=3)
    assert cov.loc[0, "load_samples"] == 49
    assert cov.loc[0, "coverage"] == pytest.approx(490 / 600)


def test_the_first_sample_after_the_phase_covers_its_last_seconds():
    """One sample a minute at 23, 83, ..., 503 s (the one at 563 s lost) and one at 623 s of a
    600 s phase.  The 623 s sample lies less than a period after the end, so it counts: 8 gaps
    of 60 s, the lost sample's gap of 120 s counting for one period, and the last sample's own
    period: 60 x 10 = 600 s, coverage 1.0, with 9 samples inside the phase."""
    ts = START + np.array([23, 83, 143, 203, 263, 323, 383, 443, 503, 623.0])
    frames = {"h": pd.DataFrame({"timestamp": ts, "h.x": 1.0})}
    cov = checks.host_coverage(frames, started_at=START, duration_s=600, min_samples=10, min_coverage=0.9,
                                 min_samples_floor=3)
    assert cov.loc[0, "load_samples"] == 9 and cov.loc[0, "required_samples"] == 9
    assert cov.loc[0, "coverage"] == pytest.approx(1.0)
    # a sample more than one period after the end covers nothing of the phase: 9 samples, 9 periods
    late = {"h": pd.DataFrame({"timestamp": np.append(ts[:-1], START + 700.0), "h.x": 1.0})}
    cov = checks.host_coverage(late, started_at=START, duration_s=600, min_samples=10, min_coverage=0.9,
                                 min_samples_floor=3)
    assert cov.loc[0, "coverage"] == pytest.approx(540 / 600)


@pytest.mark.parametrize("first,duration,expected", [
    (0.0, 600, 1.0),            # 10 samples at 0..540 s of 600 s: each covers its minute (the span is only 540 s)
    (0.0, 605, 600 / 605),      # the phase 5 s longer than the samples' 10 minutes: 0.992, not the span's 0.893
    (30.0, 600, 1.0),           # samples at 30..570 s
])
def test_each_sample_covers_its_period(first, duration, expected):
    frames = {"h": pd.DataFrame({"timestamp": START + first + 60.0 * np.arange(10), "h.x": 1.0})}
    cov = checks.host_coverage(frames, started_at=START, duration_s=duration, min_samples=10, min_coverage=0.9,
                               min_samples_floor=3)
    assert cov.loc[0, "coverage"] == pytest.approx(expected)


def test_a_gap_counts_for_one_period_only():
    # samples every 10 s over the first 300 s, then one at 590 s: 30 periods before the gap, one after it
    ts = START + np.append(np.arange(10, 301, 10.0), 590.0)
    cov = checks.host_coverage({"h": pd.DataFrame({"timestamp": ts, "h.x": 1.0})}, started_at=START,
                               duration_s=600, min_samples=10, min_coverage=0.9, min_samples_floor=3)
    assert cov.loc[0, "coverage"] == pytest.approx((29 * 10 + 10 + 10) / 600)


def test_numeric_columns_checked_as_one_block_match_the_cell_by_cell_checks():
    """The columns pandas read as numbers are checked together
    (``checks._numeric_rows``); the same frame with every column as text cells goes through
    the cell-by-cell path.  Both give the same summary, by hand on one column too: host CPU
    [-1, 50, 120, inf, NaN] on 2 cores has 4 samples, 1 infinite (finite share 3/4), 2 of them
    outside [0, 101] (in-range share 2/4), min -1, max 120, examples "inf, -1.0, 120.0"."""
    frame = pd.DataFrame({"timestamp": [1, 2, 3, 4, 5],
                          "web.cpu_pct": [-1.0, 50.0, 120.0, np.inf, np.nan],
                          "db.io_read_bytes_per_s": [0.0, 1.0, 2.0, 3.0, 4.0],
                          "proc.queue_length": [1, 2, 3, 4, 5],
                          "proc.up": [True, False, True, True, True],
                          "proc.heap_mb": [np.nan] * 5})
    kw = dict(units=PARAMS["units"], host_components=[c.lower() for c in PARAMS["host_components"]],
              cores_key=PARAMS["cores_key"], slack=PARAMS["range_slack"])
    block = checks.counter_summary({"web": frame}, {"cpu_cores": 2}, **kw)
    cells = checks.counter_summary({"web": frame.astype(object)}, {"cpu_cores": 2}, **kw)
    pd.testing.assert_frame_equal(block, cells)
    cpu = block.set_index("counter").loc["web.cpu_pct"]
    assert (cpu["samples"], cpu["finite_share"], cpu["in_range_share"]) == (4, 0.75, 0.5)
    assert (cpu["min_value"], cpu["max_value"], cpu["upper_bound"]) == (-1.0, 120.0, 101.0)
    assert cpu["out_of_range_examples"] == "inf, -1.0, 120.0"
    heap = block.set_index("counter").loc["proc.heap_mb"]
    assert heap["samples"] == 0 and np.isnan(heap["min_value"]) and heap["in_range_share"] == 1.0


def test_an_archive_over_its_cell_bound_is_quarantined_with_the_count(tmp_path, validator):
    """Memory per archive.  good_frames: web01 66 rows x 3 columns, lg01 66 x 3
    (the timestamp included) = 396 cells; at a bound of 395 the archive is refused before pandas
    parses it, with the count in the reason; at 396 it is valid."""
    frames = good_frames()
    assert sum(len(f) * f.shape[1] for f in frames.values()) == 396
    at_bound = {**PARAMS, "limits": {**PARAMS["limits"], "max_cells": 396}}
    assert checked(tmp_path, validator, params=at_bound).failures == []
    over = {**PARAMS, "limits": {**PARAMS["limits"], "max_cells": 395}}
    failures = checked(tmp_path, validator, name="sys-run-2", params=over).failures
    assert [f["expectation"] for f in failures] == ["readable_safe_archive"]
    assert "396 samples x counters over all hosts (more than 395" in failures[0]["reason"]


def test_a_night_renders_the_data_docs_of_its_own_runs_and_of_missing_pages_only(tmp_path):
    """The site of two runs exists; a third is validated: its results' pages, the suites' pages and
    the index are rendered, the first two runs' pages are left as they are, unless one is missing."""
    v = suites.Validator(suites.suites_from_params(PARAMS), project_dir=tmp_path / "gx", docs_dir=tmp_path / "site")
    for name in ("sys-run-1", "sys-run-2"):
        checked(tmp_path, v, name=name)
    assert v.build_docs(run_names=["sys-run-1", "sys-run-2"]) is None     # no site yet: every page
    pages = {p: p.stat().st_mtime_ns for p in (tmp_path / "site" / "validations").rglob("*.html")}
    assert len(pages) == 2 * len(v.definitions) and {p.parts[-3] for p in pages} == {"sys-run-1", "sys-run-2"}
    lost = next(p for p in pages if p.parts[-3] == "sys-run-2")
    lost.unlink()
    checked(tmp_path, v, name="sys-run-3")
    asked = v.build_docs(run_names=["sys-run-3"])
    assert asked == len(v.definitions) + len(v.definitions) + 1     # the suites, run 3's results, the lost page
    after = {p: p.stat().st_mtime_ns for p in (tmp_path / "site" / "validations").rglob("*.html")}
    assert {p.parts[-3] for p in after} == {"sys-run-1", "sys-run-2", "sys-run-3"} and lost in after
    assert all(after[p] == t for p, t in pages.items() if p != lost)      # the others untouched
    index = (tmp_path / "site" / "index.html").read_text()
    assert all(f"sys-run-{i}" in index for i in (1, 2, 3)) and suites.CSP_META in index
    assert all(suites.CSP_META in p.read_text() for p in after)


def test_a_suite_that_fails_is_stored_once_in_its_full_format_and_a_passed_one_as_pass_or_fail(tmp_path):
    """Each suite asks Great Expectations for pass or fail first; a suite that fails runs again in
    its full format under the same run identifier, whose result replaces the first: one stored
    result per suite and run, the failing one naming its hosts (``COMPLETE`` with the host index)."""
    import json

    v = suites.Validator(suites.suites_from_params(PARAMS), project_dir=tmp_path / "gx", docs_dir=None)
    frames = good_frames()
    frames["web01"] = frames["web01"].iloc[:5]                   # web01 covers too little of the run
    failures = checked(tmp_path, v, frames=frames).failures
    assert ("expect_column_values_to_be_between", "coverage") in failed(failures)
    coverage = next(f for f in failures if f["kwargs"].get("column") == "coverage")
    assert coverage["unexpected_index_list"] == [{"coverage": coverage["unexpected_index_list"][0]["coverage"],
                                                  "host": "web01"}]
    stored = sorted((tmp_path / "gx").rglob("validations/*/sys-run-1/*/*.json"))
    by_suite = {p.parts[-4]: json.loads(p.read_text()) for p in stored}
    assert len(stored) == len(by_suite) == len(v.definitions)                # one result per suite
    assert by_suite["host_coverage"]["success"] is False
    assert all(r["result"] for r in by_suite["host_coverage"]["results"])        # the full format, every row
    assert by_suite["counter_values"]["success"] is True
    assert all(r["result"] == {} for r in by_suite["counter_values"]["results"])  # pass or fail only
