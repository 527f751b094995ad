"""Identifiers become file names only through config's path functions, which refuse anything
outside the contract's grammar (contract §1)."""
from __future__ import annotations

import pytest

from pipelines import config, params_schema


@pytest.mark.parametrize("value", ["a", "7", "shop-2026-09-01-r000", "A.b_c-9", "x" * 128, "a..b", "smd-1-6"])
def test_identifiers_in_the_grammar_are_accepted(value):
    assert config.is_identifier(value) and config.identifier(value) == value


@pytest.mark.parametrize("value", [
    "", ".", "..", "...", "../../../../x", "/tmp/x", "a/b", "a\\b", "a\n", "a\r\n", "\na", "-a", "_a", "x" * 129,
    "a b", "a\x00b", "é", "😀" * 100, "a:b", None, 1, ["a"],
])
def test_anything_else_is_refused(value):
    assert not config.is_identifier(value)
    with pytest.raises(ValueError, match="not an identifier"):
        config.identifier(value)


@pytest.mark.parametrize("make", [config.valid_dir, config.quarantine_path, config.frame_path, config.info_path,
                                  config.detection_path, config.chart_path, config.cause_path,
                                  config.run_report_path, config.edges_path, config.models_dir,
                                  config.calibration_path, config.features_path, config.cause_models_dir,
                                  config.latest_cause_model, config.loo_cache_dir, config.single_models_dir,
                                  config.stacking_calibration_path])
@pytest.mark.parametrize("bad", ["../../../../x", "/tmp/x", "..", "a\n"])
def test_no_path_function_builds_a_path_from_a_non_identifier(make, bad):
    with pytest.raises(ValueError):
        make(bad)


def test_path_functions_stay_inside_the_tree(tmp_path):
    old = config.ROOT
    config.use_root(tmp_path)
    try:
        for path in (config.edges_path("shop"), config.run_report_path("r.1", "html"), config.valid_dir("r-1")):
            assert tmp_path in path.resolve().parents
        with pytest.raises(ValueError):
            config.run_report_path("r1", "sh")
    finally:
        config.use_root(old)


def test_params_are_parsed_once_per_version_and_every_caller_gets_its_own_copy(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("detect:\n  delta_threshold: 0.2\n")
    first = config.load_params("detect", path)
    first["delta_threshold"] = 99                            # a caller's change stays its own
    assert config.load_params("detect", path)["delta_threshold"] == 0.2
    path.write_text("detect:\n  delta_threshold: 0.3\n")     # a new version, even of the same size, is read
    assert config.load_params("detect", path)["delta_threshold"] == 0.3
    whole = config.load_params(None, path)
    assert whole["detect"]["delta_threshold"] == 0.3
    # every key left out takes its default
    assert whole["detect"]["min_premise_intervals"] == params_schema.defaults()["detect"]["min_premise_intervals"]
    assert whole["ingest"] == params_schema.defaults()["ingest"]
