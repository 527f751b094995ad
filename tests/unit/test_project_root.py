"""Which project a command works on (pipelines/config.py: default_root)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pipelines import config

CHECKOUT = Path(config.__file__).resolve().parents[1]


def _root_seen_from(cwd: Path, env_root: str | None = None) -> str:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(CHECKOUT)}
    if env_root:
        env["REGRESSLAB_ROOT"] = env_root
    out = subprocess.run([sys.executable, "-c", "from pipelines import config; print(config.ROOT)"],
                         cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_a_lab_project_is_found_from_its_folders_even_with_the_checkout_importable(tmp_path):
    """A checkout installed in editable mode: inside a project made by ``regresslab init`` (it
    holds ``.regresslab/version``), and in any folder below it, the project is the root, not the
    checkout; elsewhere the checkout stays the root; ``REGRESSLAB_ROOT`` wins over both."""
    project = tmp_path / "lab"
    (project / ".regresslab").mkdir(parents=True)
    (project / ".regresslab" / "version").write_text("0.9.0\n")
    (project / "data" / "triage").mkdir(parents=True)
    assert _root_seen_from(project) == str(project)
    assert _root_seen_from(project / "data" / "triage") == str(project)
    assert _root_seen_from(tmp_path) == str(CHECKOUT)
    assert _root_seen_from(project, env_root=str(tmp_path / "other")) == str(tmp_path / "other")


def test_a_folder_without_the_version_file_is_no_project(tmp_path):
    (tmp_path / ".regresslab").mkdir()
    assert config.project_around(tmp_path) is None
    (tmp_path / ".regresslab" / "version").write_text("x")
    assert config.project_around(tmp_path) == tmp_path
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert config.project_around(tmp_path / "a" / "b") == tmp_path


def test_importing_config_changes_nothing_in_the_process():
    """No excepthook replaced and no path looked up on import; the names follow use_root."""
    code = ("import sys; hook = sys.excepthook; from pipelines import config; "
            "print(sys.excepthook is hook, config._PATHS is None); "
            "config.use_root('/x'); print(config.VALID, config.valid_dir('r1'))")
    out = subprocess.run([sys.executable, "-c", code], env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(CHECKOUT)},
                         capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "True True"
    assert out[1] == "/x/data/interim/valid /x/data/interim/valid/r1"


def test_a_stage_stopped_by_a_bad_params_file_says_what_is_wrong(tmp_path):
    """A stage run as DVC runs it (python -m) with a misspelt key: the message, not a traceback."""
    (tmp_path / "params.yaml").write_text("pull:\n  sourse: data/example\n")
    run = subprocess.run([sys.executable, "-m", "pipelines.stages.pull"], cwd=tmp_path, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(CHECKOUT), "REGRESSLAB_ROOT": str(tmp_path)})
    assert run.returncode == 1
    assert run.stderr.startswith("regresslab: configuration error") and "sourse" in run.stderr
    assert "Traceback" not in run.stderr
