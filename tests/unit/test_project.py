"""A lab's own project: the stages of this checkout made into a project's, kept in the package."""
from __future__ import annotations

from pathlib import Path

from pipelines.cli import project

REPO = Path(__file__).resolve().parents[2]


def test_the_packaged_stages_are_this_checkouts():
    assert project.TEMPLATE.read_text() == project.template_text(REPO / "dvc.yaml"), \
        "pipelines/project_dvc.yaml is stale: python -m pipelines.cli.project --write-template"


def test_a_projects_stages_run_the_package_and_depend_on_its_version():
    stages = {"labsim": {"cmd": "python -m pipelines.stages.labsim --out data/example", "deps": ["pipelines/x.py"]},
              "pull": {"cmd": "python -m pipelines.stages.pull", "always_changed": True,
                       "deps": ["pipelines/stages/pull.py", "data/example"], "outs": ["data/raw"]},
              "report": {"cmd": "python -m pipelines.stages.report", "deps": ["pipelines/a.py", "data/triage"],
                         "params": ["report"]}}
    assert project.project_stages(stages) == {
        "pull": {"cmd": "regresslab stage pull", "always_changed": True, "deps": [".regresslab/version"],
                 "outs": ["data/raw"]},
        "report": {"cmd": "regresslab stage report", "deps": [".regresslab/version", "params.yaml", "data/triage"]}}


def test_the_version_file_changes_only_with_the_version(tmp_path):
    assert project.write_version(tmp_path) is True
    assert (tmp_path / project.VERSION_FILE).read_text() == project.installed_version() + "\n"
    assert project.write_version(tmp_path) is False
