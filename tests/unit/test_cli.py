"""The `regresslab` command: installed from a wheel of this checkout into a folder of its own, it
works in a lab's directory (its params.yaml, partial, completed by the defaults the wheel
carries) and says what is wrong with a bad one; the subcommands are reachable."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines import config
from pipelines.cli import main as cli

REPO = Path(__file__).resolve().parents[2]


def _regresslab(installed: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("REGRESSLAB_ROOT", "PYTHONPATH")}
    env["PYTHONPATH"] = str(installed)
    script = installed / "bin" / "regresslab"
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_the_wheel_carries_its_defaults_and_templates(installed):
    assert (installed / "pipelines" / "params_defaults.yaml").is_file()
    assert (installed / "pipelines" / "objectives" / "template" / "slo.yaml").is_file()
    assert (installed / "pipelines" / "reporting" / "templates" / "run.html.j2").is_file()
    assert (installed / "bin" / "regresslab").is_file()


def test_check_in_a_labs_directory(installed, tmp_path):
    lab = tmp_path / "lab"
    (lab / "archives").mkdir(parents=True)
    (lab / "params.yaml").write_text("pull:\n  source: archives\n")
    bare = _regresslab(installed, lab, "check")
    assert bare.returncode == 1 and "no dvc.yaml" in bare.stderr and "regresslab init" in bare.stderr
    (lab / "params.yaml").unlink()
    made = _regresslab(installed, tmp_path, "init", "lab", "--source", "lab/archives")
    assert made.returncode == 0, made.stderr
    (lab / "params.yaml").write_text("pull:\n  source: archives\nalerts:\n  enabled: true\n  to: [perf@example.com]\n")
    ok = _regresslab(installed, lab, "check")
    assert ok.returncode == 0, ok.stderr
    assert f"[check] {lab / 'params.yaml'}: valid" in ok.stdout
    assert "archives: 0 archive(s)" in ok.stdout
    (lab / "params.yaml").write_text("pull:\n  source: [archives, missing-dir]\nalerts:\n  enable: true\n")
    bad = _regresslab(installed, lab, "check")
    assert bad.returncode == 2
    assert "alerts.enable: unknown key, did you mean `enabled`?" in bad.stderr
    (lab / "params.yaml").write_text("pull:\n  source: [archives, missing-dir]\n")
    missing = _regresslab(installed, lab, "check")
    assert missing.returncode == 1 and "missing-dir" in missing.stderr and "is not a directory" in missing.stderr
    # the lab's own detector, registered: a module of the lab's folder is read as the report stage reads it
    from pipelines import params_schema

    own = [*params_schema.defaults()["report"]["detectors"], {"name": "spectral", "result": "lab_spectral:result"}]
    (lab / "params.yaml").write_text(json.dumps({"pull": {"source": "archives"}, "report": {"detectors": own}}))
    unreadable = _regresslab(installed, lab, "check")
    assert unreadable.returncode == 2 and "report.detectors[5] (spectral): cannot read lab_spectral:result" \
        in unreadable.stderr
    (lab / "lab_spectral.py").write_text("def result(files):\n    return None\n")
    readable = _regresslab(installed, lab, "check")
    assert readable.returncode == 0, readable.stderr
    assert "[check] detectors: stacking, control_charts, clustered_regression, within_run, cause_classifier, spectral" \
        in readable.stdout


def test_unknown_command_and_help(capsys):
    assert cli.main(["frobnicate"]) == 2
    assert "unknown command 'frobnicate'" in capsys.readouterr().err
    assert cli.main([]) == 0
    assert "regresslab run" in capsys.readouterr().out


def test_report_lists_the_runs_of_the_night(tmp_path, capsys):
    old = config.ROOT
    try:
        config.use_root(tmp_path)
        assert cli.main(["report"]) == 1
        config.RUN_REPORTS.mkdir(parents=True)
        config.NIGHT_INDEX.write_text("<html></html>")
        (config.RUN_REPORTS / "shop-1.json").write_text('{"run_id": "shop-1", "verdict": "fail", '
                                                        '"cause": {"label": "cpu_hot_path"}}')
        assert cli.main(["report"]) == 0
        out = capsys.readouterr().out
        assert "shop-1" in out and "fail" in out and "cpu_hot_path" in out
    finally:
        config.use_root(old)


def test_report_says_what_the_index_says(tmp_path, capsys):
    old = config.ROOT
    try:
        config.use_root(tmp_path)
        config.RUN_REPORTS.mkdir(parents=True)
        config.NIGHT_INDEX.write_text("<html></html>")
        docs = {"a-1": {"verdict": "pass", "baseline_status": "insufficient", "cause": {"label": "none", "known": True}},
                "a-2": {"verdict": "fail", "baseline_status": "same_lab",
                        "cause": {"label": "cpu_hot_path", "known": False}},
                "a-3": {"verdict": "no_baseline", "baseline_status": "none", "cause": {"label": None, "known": False}},
                "a-4": {"verdict": "fail", "baseline_status": "same_lab", "cause": {"label": "memory_bloat", "known": True}}}
        for run_id, doc in docs.items():
            (config.RUN_REPORTS / f"{run_id}.json").write_text(json.dumps({"run_id": run_id, **doc}))
        assert cli.main(["report"]) == 0
        lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines()[1:]}
        assert "pass (insufficient baseline)" in lines["a-1"]
        assert lines["a-2"].endswith("fail                                 unknown (nearest cpu_hot_path)")
        assert "no_baseline" in lines["a-3"] and lines["a-4"].endswith("memory_bloat")
        assert cli.main(["report", "--junit", str(tmp_path / "night.xml")]) == 0
        xml = (tmp_path / "night.xml").read_text()
        assert xml.count("<testcase ") == 4 and 'failures="2"' in xml and 'skipped="1"' in xml
    finally:
        config.use_root(old)


def test_the_stages_run_with_this_interpreter_without_an_activated_environment():
    """`.venv/bin/regresslab run` from a shell whose PATH finds another python: dvc and the stages'
    `python` must be those of the interpreter regresslab runs in, its folder first and only once."""
    import os
    import sys

    from pipelines.cli.main import stage_env

    here = os.path.dirname(sys.executable)
    env = stage_env({"PATH": os.pathsep.join(["/usr/bin", here, "/bin"]), "HOME": "/home/x"})
    assert env["PATH"].split(os.pathsep) == [here, "/usr/bin", "/bin"]
    assert env["HOME"] == "/home/x" and env["PYTHONUNBUFFERED"] == "1"
    assert stage_env({})["PATH"] == here



def test_objectives_a_night_cannot_use_are_refused_before_any_stage(tree, tiny_lab, capsys):
    """``regresslab check`` and ``regresslab run`` read every system's objectives first: a criterion that
    does not parse, and, once a run of the system is pulled, a counter none of its archives has, each
    refused with the file, the key path and a suggestion (exit 2, no stage run)."""
    import yaml

    from tests.helpers import run_stages

    folder = tree / "objectives" / "shop"
    folder.mkdir(parents=True)
    (folder / "slo.yaml").write_text("objectives:\n  - {sli: p95, pass: [{criteria: ['< 6OO']}]}\n"
                                     "total_score: {pass: '90%'}\n")
    (folder / "sli.yaml").write_text("indicators: {p95: p95(app.response_time_msec)}\n")
    for command in (["check"], ["run"]):
        assert cli.main(command) == 2
        said = capsys.readouterr().err
        assert "objectives/shop/slo.yaml: objectives[0].pass[0].criteria[0]: '< 6OO' is not a criterion" in said
    assert not config.RAW.exists()                                                   # no stage ran
    (folder / "slo.yaml").write_text("objectives:\n  - {sli: p95, pass: [{criteria: ['<600']}]}\n"
                                     "total_score: {pass: '90%'}\n")
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["pull"]["source"] = str(tiny_lab[0])
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    run_stages({"pull", "validate"})
    capsys.readouterr()
    assert cli.main(["check"]) == 2
    said = capsys.readouterr().err
    assert ("objectives/shop/sli.yaml: indicators.p95: no pulled archive of shop has the counter "
            "'app.response_time_msec'") in said and "did you mean 'app.response_time_ms'?" in said
    (folder / "sli.yaml").write_text("indicators: {p95: p95(app.response_time_ms)}\n")
    cli.main(["check"])
    assert "[check] objectives: shop: 1 objective(s), their 1 indicator(s) found in shop-" in capsys.readouterr().out
