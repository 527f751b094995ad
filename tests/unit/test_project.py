"""A lab's own project: the stages of this checkout made into a project's, kept in the package."""
from __future__ import annotations

from pathlib import Path

from pipelines.cli import project

REPO = Path(__file__).resolve().parents[2]


def test_the_packaged_stages_and_dags_are_this_checkouts():
    stale = "stale: python -m pipelines.cli.project --write-template"
    assert project.TEMPLATE.read_text() == project.template_text(REPO / "dvc.yaml"), stale
    ours = {p.name: p.read_text() for p in (REPO / "dags").glob("*.py")}
    assert ours and {p.name.removesuffix(".in"): p.read_text() for p in project.DAGS.glob("*.py.in")} == ours, stale


def test_a_projects_dag_sets_its_root_before_the_package_is_imported(tmp_path):
    text = '"""doc"""\nfrom __future__ import annotations\n\nfrom pipelines.orchestration import tasks\n'
    made = project.project_dag(text, tmp_path / "lab x")
    lines = made.splitlines()
    assert lines[:2] == ['"""doc"""', "from __future__ import annotations"]
    assert lines.index(f'os.environ.setdefault("REGRESSLAB_ROOT", "{tmp_path / "lab x"}")') < \
        lines.index("from pipelines.orchestration import tasks")
    compile(made, "dag.py", "exec")


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
