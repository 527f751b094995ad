"""The `regresslab` command: installed from a wheel of this checkout into a folder of its own, it
works in a lab's directory (its params.yaml, partial, completed by the defaults the wheel
carries) and says what is wrong with a bad one; the subcommands are reachable."""
from __future__ import annotations

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
