"""The schema of params.yaml: each kind of mistake gives its own message, naming the file, the key
path and what is allowed; a key left out takes its default; the example's params are the
defaults."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from pipelines import config, params_schema

BAD = [
    ({"alerts": {"enable": True}}, "params.yaml: alerts.enable: unknown key, did you mean `enabled`?"),
    ({"repport": {"night": "x"}}, "params.yaml: repport: unknown key, did you mean `report`?"),
    ({"commit_changes": {"skia": {"windw": 50}}}, "commit_changes.skia.windw: unknown key, did you mean `window`?"),
    ({"ingest": {"max_labels": "fifty"}}, "params.yaml: ingest.max_labels: 'fifty' is not a whole number"),
    ({"ingest": {"max_labels": 2.5}}, "ingest.max_labels: 2.5 is not a whole number"),
    ({"report": {"combination": "fisher"}}, "report.combination: 'fisher' is not one of simes, bonferroni"),
    ({"report": {"false_alarm_rate": 1.5}}, "report.false_alarm_rate: 1.5 is out of range (allowed: from 0 to 1)"),
    ({"normalize": {"interval_s": -30}}, "normalize.interval_s: -30 is out of range (allowed: at least 0)"),
    ({"alerts": {"enabled": "yes please"}}, "alerts.enabled: 'yes please' is not true or false"),
    ({"alerts": {"to": "ops@example.com"}}, "alerts.to: 'ops@example.com' is not a list"),
    ({"history": "all"}, "history: 'all' is not a block of keys (window, exclude,"),
    ({"control_charts": {"threshold": "high"}}, "control_charts.threshold: 'high' is not a number"),
    ({"report": {"trust_silent": "loud"}}, "report.trust_silent: 'loud' is not one of within, keep"),
    ({"report": {"trust_ties": "more"}}, "params.yaml: report.trust_ties: unknown key"),
    ({"report": {"verdict_rule": "stackng"}}, "report.verdict_rule: 'stackng' is not one of calibrated, all, any "
                                              "nor a registered detector (stacking, control_charts, clustered_regression, "
                                              "within_run, cause_classifier)"),
    ({"report": {"headline_detectors": ["stacking", "charts"]}},
     "report.headline_detectors.1: 'charts' is not a registered detector"),
    ({"report": {"trust_corroborate": "maybe"}}, "report.trust_corroborate: 'maybe' is not true or false"),
]


@pytest.mark.parametrize("params,message", BAD, ids=[m.split(":")[1].strip() for _, m in BAD])
def test_each_mistake_gives_its_message(params, message):
    with pytest.raises(params_schema.ConfigError) as err:
        params_schema.check(params)
    assert message in str(err.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(params_schema.ConfigError) as err:
        params_schema.check({"alerts": {"enable": True}, "ingest": {"max_labels": "fifty"}})
    assert len(str(err.value).splitlines()) == 2


def test_a_left_out_key_takes_its_default_and_a_null_where_allowed_is_kept():
    full = params_schema.check({"report": {"night": "2026-11-24"}, "detect": {"min_rel_change": None},
                                "commit_changes": {"source": None, "labels": None}})
    assert full["commit_changes"]["source"] is None and full["commit_changes"]["labels"] is None
    # a quantity whose default is whole may be a fraction (seconds, MB); a count may not
    assert params_schema.check({"validate": {"max_seconds": 0.05, "max_memory_mb": 512.5}})["validate"]["max_seconds"] \
        == 0.05
    with pytest.raises(params_schema.ConfigError, match="history.window: 40.5 is not a whole number"):
        params_schema.check({"history": {"window": 40.5}})
    assert full["report"]["night"] == "2026-11-24"
    assert full["report"]["false_alarm_rate"] == params_schema.defaults()["report"]["false_alarm_rate"]
    assert full["detect"]["min_rel_change"] is None
    assert full["labsim"] == params_schema.defaults()["labsim"]


def test_the_example_params_are_the_defaults():
    """params.yaml (the example's, which DVC tracks) and params_defaults.yaml (what a lab's own
    file falls back on) say the same: the one place where every default and its meaning live."""
    assert yaml.safe_load(config.PARAMS.read_text()) == params_schema.defaults()


def test_a_stage_on_a_bad_file_stops_before_running_with_the_message_not_a_traceback(tmp_path):
    (tmp_path / "params.yaml").write_text("alerts:\n  enable: true\n")
    proc = subprocess.run([sys.executable, "-m", "pipelines.stages.report"], capture_output=True, text=True,
                          env={"REGRESSLAB_ROOT": str(tmp_path), "PYTHONPATH": str(config.ROOT)}, cwd=tmp_path)
    assert proc.returncode != 0
    assert "alerts.enable: unknown key, did you mean `enabled`?" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_verdict_may_follow_any_registered_detector_alone():
    """``verdict_rule`` names a detector of the registry, the project's own or one a lab adds."""
    assert params_schema.check({"report": {"verdict_rule": "clustered_regression"}})["report"]["verdict_rule"] == \
        "clustered_regression"
    detectors = [*params_schema.defaults()["report"]["detectors"], {"name": "spectral", "result": "m:f"}]
    checked = params_schema.check({"report": {"detectors": detectors, "verdict_rule": "spectral",
                                              "headline_detectors": ["spectral", "stacking"]}})
    assert checked["report"]["verdict_rule"] == "spectral"
