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


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """``pip install --no-deps --target T <wheel>``: the package as a user gets it (its data files
    included), beside the test environment's dependencies.  The wheel is built by ``uv build`` (the
    install's uv, a PEP 517 front end like ``pip wheel``, at about 40 % of its CPU)."""
    base = tmp_path_factory.mktemp("wheel")
    subprocess.run([str(Path(sys.executable).parent / "uv"), "build", "--quiet", "--wheel", "-o", str(base / "dist"),
                    str(REPO)], check=True, capture_output=True)
    (wheel,) = (base / "dist").glob("regresslab-*.whl")
    target = base / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                    str(wheel)], check=True, capture_output=True)
    return target


def _regresslab(installed: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("REGRESSLAB_ROOT", "PYTHONPATH")}
    env["PYTHONPATH"] = str(installed)
    script = installed / "bin" / "regresslab"
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_the_wheel_carries_its_defaults_and_templates(installed):
    assert (installed / "pipelines" / "params_defaults.yaml").is_file()
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


def test_a_labs_own_project_from_the_wheel_runs_its_night(installed, tmp_path, tiny_lab):
    """``regresslab init`` on a folder of archives, with the wheel installed into a venv of its own
    (no checkout on the path): its dvc.yaml runs ``regresslab stage`` and holds no simulated lab;
    ``regresslab run`` writes a verdict for every target.  (A source gone failing the night with its
    banner and mail is tests/dags/test_alerts.py's, by the same ``regresslab run``.)"""
    import sysconfig

    import yaml

    lab, truth = tiny_lab
    # a venv of its own holding the wheel; the dependencies are the test environment's, on a .pth line
    # (a directory added so does not run that environment's .pth files: this checkout's editable
    # install stays out)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = (venv / "lib").glob("python3*/site-packages")
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (wheel,) = (installed.parent / "dist").glob("regresslab-*.whl")
    subprocess.run([str(Path(sys.executable).parent / "uv"), "pip", "install", "--quiet", "--no-deps",
                    "--python", str(venv / "bin" / "python"), str(wheel)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k not in ("REGRESSLAB_ROOT", "PYTHONPATH")}
    env.update(PATH=f"{venv / 'bin'}:{Path(sys.executable).parent}:{env['PATH']}")
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import pipelines; print(pipelines.__file__)"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(site)), where              # the wheel's package, not this checkout

    def regresslab(cwd: Path, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(venv / "bin" / "regresslab"), *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=900)
    made = regresslab(tmp_path, "init", "perf-lab", "--source", str(lab), "--name", "shop lab")
    assert made.returncode == 0, made.stderr
    project = tmp_path / "perf-lab"
    stages = yaml.safe_load((project / "dvc.yaml").read_text())["stages"]
    assert {"labsim", "commitsim", "commit_changes"}.isdisjoint(stages) and {"pull", "report", "evaluate"} <= set(stages)
    assert all(s["cmd"] == f"regresslab stage {name}" for name, s in stages.items())
    assert not any(str(d).startswith("pipelines/") for s in stages.values() for d in s["deps"])
    assert yaml.safe_load((project / "params.yaml").read_text())["pull"]["source"] == str(lab)
    assert (project / ".dvc").is_dir() and (project / ".regresslab" / "version").is_file()
    dags = sorted(p.name for p in (project / "dags").glob("*.py"))
    assert dags == ["nightly_regression_analysis.py", "retrain_cause_models.py"]
    assert f'"REGRESSLAB_ROOT", "{project}"' in (project / "dags" / dags[0]).read_text()
    assert len((project / "README.md").read_text().strip().splitlines()) <= 6
    assert regresslab(tmp_path, "init", "perf-lab", "--source", str(lab)).returncode == 1     # not over a project
    with open(project / "params.yaml", "a") as fh:
        fh.write("report:\n  junit: reports/junit.xml\n")
    night = regresslab(project, "run", "--fail-on-regression")
    regressed = [p.stem for p in (project / "reports" / "runs").glob("*.json")
                 if json.loads(p.read_text())["verdict"] == "fail"]
    assert night.returncode == (3 if regressed else 0), night.stdout[-3000:] + night.stderr[-3000:]
    assert (f"{len(regressed)} run(s) regressed" in night.stderr) == bool(regressed)
    targets = sorted(r for r in truth if "-t" in r)
    written = sorted(p.stem for p in (project / "reports" / "runs").glob("*.json"))
    assert targets and written == targets
    assert not (project / "data" / "example").exists() and not (project / "reports" / "commits").exists()
    assert "runs regressed" in (project / "reports" / "index.html").read_text()
    cases = (project / "reports" / "junit.xml").read_text()
    assert cases.count("<testcase ") == len(targets) and f'failures="{len(regressed)}"' in cases


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
