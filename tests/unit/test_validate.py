"""Great Expectations suites against each kind of bad archive (real GX, no mocks)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipelines import config, validate
from tests.helpers import START, good_frames, good_meta, members, write_tgz

PARAMS = config.load_params("validate")


@pytest.fixture(scope="module")
def validator():
    return validate.Validator(validate.build_suites(
        min_samples_per_host=PARAMS["min_samples_per_host"], min_coverage=PARAMS["min_coverage"],
        max_duration_s=PARAMS["max_duration_s"], pct_range=tuple(PARAMS["pct_range"]),
        value_mostly=PARAMS["value_mostly"]), project_dir=None, docs_dir=None)


def check(tmp_path, validator, meta=None, frames=None, name="sys-run-1"):
    path = write_tgz(tmp_path / f"{name}.tar.gz", members(meta or good_meta(name), frames or good_frames()))
    _, _, failures = validate.validate_archive(path, validator, PARAMS)
    return failures


def failed(failures):
    return {(f["expectation"], f.get("kwargs", {}).get("column")) for f in failures}


def test_good_archive_passes(tmp_path, validator):
    assert check(tmp_path, validator) == []


def test_parse_timestamps_accepts_epoch_and_iso_with_offset():
    ts = validate.parse_timestamps(pd.Series(["2026-01-01T00:00:10+00:00", "2026-01-01T01:00:10+01:00"]))
    assert list(ts) == [1767225610.0, 1767225610.0]
    assert list(validate.parse_timestamps(pd.Series([1.5, 2]))) == [1.5, 2.0]
    no_offset = validate.parse_timestamps(pd.Series(["2026-01-01T00:00:10", "2026-01-01T00:00:20"]))
    assert no_offset.isna().all()


@pytest.mark.parametrize("mutate,expected", [
    (lambda f: f["web01"].assign(**{"web.cpu_pct": f["web01"]["web.cpu_pct"].astype(object).where(
        f["web01"].index != 5, "n/a")}), ("expect_column_values_to_be_in_set", "value_is_number")),
    (lambda f: f["web01"].assign(timestamp=f["web01"]["timestamp"][::-1].values),
     ("expect_column_values_to_be_between", "ts_step")),
    (lambda f: f["web01"].assign(timestamp=f["web01"]["timestamp"].astype(object).where(
        f["web01"].index != 3, "yesterday")), ("expect_column_values_to_not_be_null", "ts")),
    (lambda f: f["web01"].assign(**{"web.cpu_pct": np.where(f["web01"].index == 7, 140.0, f["web01"]["web.cpu_pct"])}),
     ("expect_column_values_to_be_between", "pct_value")),
    (lambda f: f["web01"].assign(**{"web.io_write_bytes_per_s": -f["web01"]["web.io_write_bytes_per_s"]}),
     ("expect_column_values_to_be_between", "nonneg_value")),
    (lambda f: f["web01"].rename(columns={"web.cpu_pct": "cpu pct"}),
     ("expect_column_values_to_be_in_set", "counter_name_ok")),
    (lambda f: f["web01"].iloc[:8], ("expect_column_values_to_be_between", "load_samples")),
    (lambda f: f["web01"].iloc[:40], ("expect_column_values_to_be_between", "coverage")),
])
def test_each_bad_counter_file_fails_the_expectation_that_guards_it(tmp_path, validator, mutate, expected):
    frames = good_frames()
    frames["web01"] = mutate(frames)
    assert expected in failed(check(tmp_path, validator, frames=frames))


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
    assert ("expect_column_to_exist", "system") in failed(check(tmp_path, validator, meta=meta))


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
    _, _, failures = validate.validate_archive(write_tgz(tmp_path / "sys-run-1.tar.gz", files), validator, PARAMS)
    assert failures[0]["expectation"] == "readable_safe_archive"
    assert "unsafe member path" in failures[0]["reason"]


def test_host_coverage_by_hand():
    # samples every 10 s at 20..500 s of a 600 s phase; each averages the 10 s before it,
    # so they span 10..500 s: 490 / 600
    frames = {"h": pd.DataFrame({"timestamp": START + np.arange(20, 501, 10.0), "h.x": 1.0})}
    cov = validate.host_coverage(frames, started_at=START, duration_s=600)
    assert cov.loc[0, "load_samples"] == 49
    assert cov.loc[0, "coverage"] == pytest.approx(490 / 600)
