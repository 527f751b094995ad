"""A lab's own regresslab project: ``regresslab init`` writes it, ``regresslab stage`` runs its stages.

A project is a folder a user owns: ``params.yaml`` with only what differs from the defaults (the
archive source), ``dvc.yaml`` whose stages run the installed package (``regresslab stage NAME``)
and depend on its version (``.regresslab/version``: an upgrade re-runs the night), not on source
files the user does not have, and nothing of the example lab (no simulated lab, no simulated
commit series; the commit-series stage only with ``--commit-series``).  ``regresslab run`` there
needs nothing of the repository.

The stages are this checkout's ``dvc.yaml`` made into a project's (:func:`project_stages`), kept
in the package as ``pipelines/project_dvc.yaml``, and the DAG files are this checkout's ``dags/``,
kept as ``pipelines/project_dags/`` (``tests/unit/test_project.py`` fails when either drifts from
the checkout; ``python -m pipelines.cli.project --write-template`` writes both again).  ``init``
writes the DAG files into the project's ``dags/``, each setting ``REGRESSLAB_ROOT`` to the project
unless the workers set it.
"""
from __future__ import annotations

import argparse
import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

TEMPLATE = Path(__file__).resolve().parents[1] / "project_dvc.yaml"
DAGS = Path(__file__).resolve().parents[1] / "project_dags"      # the checkout's dags/, packaged (NAME.py.in)
OBJECTIVES_TEMPLATE = Path(__file__).resolve().parents[1] / "objectives" / "template"   # copied per system
FUTURE = "from __future__ import annotations\n"
VERSION_FILE = ".regresslab/version"
EXAMPLE_ONLY = ("labsim", "commitsim")            # the example's simulators: never in a lab's project
# the checkout's detector packages; in a lab's project, the folder of its own (registered by module path)
CHECKOUT_DETECTORS, PROJECT_DETECTORS = "pipelines/detectors", "detectors"
COMMIT_SERIES = "commit_changes"
HEADER = ("# The nightly analysis of this project, as DVC stages: each runs the installed regresslab\n"
          "# (`regresslab stage NAME`) and depends on its version (.regresslab/version, written by\n"
          "# `regresslab init` and `regresslab run`: upgrading regresslab re-runs the night) and on\n"
          "# params.yaml (what differs from the package's defaults).\n"
          "# Written by `regresslab init`; `regresslab init --force` writes it again.\n")


def installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("regresslab")
    except PackageNotFoundError:                     # a checkout run without installing
        return "0+checkout"


def project_stages(stages: dict[str, Any]) -> dict[str, Any]:
    """A checkout's ``dvc.yaml`` stages as a lab project's: the example's simulators dropped, each
    command ``regresslab stage NAME``, the package's source files as deps replaced by its version
    file, the example's data dropped from the deps.  A stage's params blocks become the file
    ``params.yaml`` itself: the project's holds only what differs from the package's defaults (which
    DVC cannot read as params), so any change to it re-runs the stages that read params.  A stage
    that reads the checkout's detector packages reads the project's own (``detectors/``: a lab's
    detectors, ``detectors.<name>.<module>:...`` in its registry), so an edit to one re-runs it."""
    out = {}
    for name, stage in stages.items():
        if name in EXAMPLE_ONLY:
            continue
        stage = dict(stage)
        stage["cmd"] = f"regresslab stage {name}"
        deps = [d for d in stage.get("deps") or []
                if not str(d).startswith(("pipelines/", "data/example"))]
        own = [PROJECT_DETECTORS] if CHECKOUT_DETECTORS in (stage.get("deps") or []) else []
        stage["deps"] = [VERSION_FILE, *(["params.yaml"] if stage.pop("params", None) else []), *own, *deps]
        out[name] = stage
    return out


def template_text(repo_dvc_yaml: Path) -> str:
    """``pipelines/project_dvc.yaml`` from a checkout's ``dvc.yaml``."""
    stages = yaml.safe_load(repo_dvc_yaml.read_text(encoding="utf-8"))["stages"]
    return HEADER + yaml.safe_dump({"stages": project_stages(stages)}, sort_keys=False, width=110)


def project_dag(text: str, root: Path) -> str:
    """A DAG file of the package, made this project's: its tasks read and write ``root`` (unless the
    workers' ``REGRESSLAB_ROOT`` says otherwise), set before the package is imported."""
    line = (f"import os  # noqa: E402 -- written by `regresslab init`: this project's folder\n"
            f"os.environ.setdefault(\"REGRESSLAB_ROOT\", {json.dumps(str(root))})\n")
    return text.replace(FUTURE, FUTURE + "\n" + line, 1) if FUTURE in text else line + text


def params_text(source: str, lab: str, commit_series: str | None) -> str:
    """The project's ``params.yaml``: only what differs from the defaults, with pointers to the rest."""
    defaults = Path(__file__).resolve().parents[1] / "params_defaults.yaml"
    return (f"# regresslab project of the lab {lab!r}: only what differs from the defaults.\n"
            f"# Every key, its default and what it does: {defaults}\n"
            "# (also docs/operations/configuration.md). `regresslab check` validates this file.\n"
            "pull:\n"
            f"  source: {json.dumps(source)}   # a folder, s3:// or https:// location of archives, or a list of them\n"
            "commit_changes:\n"
            f"  source: {json.dumps(commit_series)}   # a CSV of one value per commit (docs/methods/commit-series.md)\n"
            "  labels: null\n"
            "evaluate:\n"
            "  labels: []          # files of known verdicts of targets, to score the detectors on them\n"
            "alerts:\n"
            "  enabled: false      # e-mail and chat alerts: docs/operations/alerts.md\n")


README = """# {lab}: regression analysis of the nightly load tests

- `regresslab check`: `params.yaml` and the archive source (`pull.source`: {source}).
- `regresslab run`: the night (`dvc repro`); `reports/index.html` lists every run with its verdict.
- `regresslab report`: the latest night's runs; `regresslab triage RUN_ID --verdict pass|fail --by NAME` confirms one.
- Nightly with Airflow: regresslab's docs, operations/airflow (set `REGRESSLAB_ROOT` to this folder).
"""

DETECTORS_README = """The lab's own detectors: one package each (`detectors/<name>/`, a module holding the class that
computes its result of a run and the function that reads it back), and one entry of params.yaml's
`report.detectors`, e.g.
  {name: spectral, result: 'detectors.spectral.detector:result', detector: 'detectors.spectral.detector:Spectral'}
The night's `detectors` stage computes it; an edit here re-runs that stage. regresslab's docs:
docs/architecture.md, "The detector protocol".
"""

TRIAGE_README = """Analysts' confirmed verdicts (`regresslab triage`), one JSON line each in log.jsonl: keep it in git;
every night reads it.
"""

GITIGNORE = """/data/raw
/data/interim
/data/processed
/data/quarantine
/data/cache
/data/.lock
/data/.lock.holder
/reports/
/metrics/*.csv
"""

DVCIGNORE = """# a pull's staging copies and every atomic write's temporary file
.incoming-*
.*.tmp
"""


MERGED = (".gitignore", ".dvcignore")        # line files: a user's lines are kept, ours appended


def merged_lines(current: str, ours: str) -> str:
    """``current`` with each line of ``ours`` it lacks appended (comments and blank lines of ours
    only where they introduce a line that is added)."""
    have = {line.strip() for line in current.splitlines()}
    missing = [line for line in ours.splitlines() if line.strip() and not line.startswith("#") and line.strip() not in have]
    if not missing:
        return current
    lead = "" if not current or current.endswith("\n") else "\n"
    return current + lead + "# regresslab (regresslab init)\n" + "\n".join(missing) + "\n"


def kept_name(path: Path) -> Path:
    """Where a file ``init --force`` replaces is kept: ``NAME.orig`` (``NAME.orig.1``, … when taken)."""
    candidate, n = path.with_name(path.name + ".orig"), 0
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.orig.{n}")
    return candidate


def input_problem(source: str, name: str | None, commit_series: str | None) -> str | None:
    """What is wrong with ``init``'s arguments, if anything: a location with credentials (they
    belong to the client, docs/operations/storage.md) or control characters in any of them."""
    from pipelines.params_schema import CREDENTIALS_ELSEWHERE
    from pipelines.safe_text import control_characters, has_credentials, mask_url

    for flag, value in (("--source", source), ("--name", name), ("--commit-series", commit_series)):
        if value is None:
            continue
        bad = control_characters(value) + (["\\n"] if "\n" in value else [])
        if bad:
            return f"{flag}: control characters ({', '.join(sorted(set(bad)))}) are not allowed"
        if flag != "--name" and has_credentials(value):
            return f"{flag}: {mask_url(value)!r} holds credentials; {CREDENTIALS_ELSEWHERE}"
    return None


def init(argv: list[str]) -> int:
    """Write a lab's project in DIR (params.yaml, dvc.yaml, .gitignore, a README; git and DVC
    repositories), ready for ``regresslab run``.  In a folder that already holds files, it never
    writes over one it did not make: .gitignore and .dvcignore get the lines they lack, any other
    file of the same name is kept as it is and named (``--force`` replaces it, keeping the user's
    as NAME.orig).  Exit 1 over an existing project without ``--force``; exit 2 for a path that is
    a file, a folder it cannot write, or a source with credentials in it."""
    import os

    from pipelines.safe_text import for_terminal, mask_url

    parser = argparse.ArgumentParser(prog="regresslab init", description=init.__doc__)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--source", required=True,
                        help="where the lab's archives are: a folder, s3:// or https:// location "
                             "(credentials: the client's own, never in the location)")
    parser.add_argument("--name", help="the lab's name (default: the directory's)")
    parser.add_argument("--commit-series", metavar="CSV", help="a benchmark history, one value per commit")
    parser.add_argument("--force", action="store_true", help="write over an existing project's files "
                                                             "(each replaced file is kept as NAME.orig)")
    args = parser.parse_args(argv)
    root = args.directory.expanduser().resolve()
    problem = input_problem(args.source, args.name, args.commit_series)
    if problem:
        print(f"regresslab init: {problem}", file=sys.stderr)
        return 2
    if root.exists() and not root.is_dir():
        print(f"regresslab init: {for_terminal(str(root))} is a file, not a folder", file=sys.stderr)
        return 2
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"regresslab init: cannot make the folder {for_terminal(str(root))}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    if not os.access(root, os.W_OK | os.X_OK):
        print(f"regresslab init: cannot write in {for_terminal(str(root))} (permission denied)", file=sys.stderr)
        return 2
    mine = [root / f for f in ("params.yaml", "dvc.yaml")]
    if any(p.exists() for p in mine) and not args.force:
        print(f"regresslab init: {root} already holds a project ({', '.join(p.name for p in mine if p.exists())}); "
              "--force writes over it (keeping each file it replaces as NAME.orig)", file=sys.stderr)
        return 1
    source = args.source if "://" in args.source else str(Path(args.source).expanduser().resolve())
    lab = args.name or root.name
    stages = yaml.safe_load(TEMPLATE.read_text(encoding="utf-8"))["stages"]
    if not args.commit_series:
        produced = {next(iter(o)) if isinstance(o, dict) else o for o in stages.pop(COMMIT_SERIES).get("outs") or []}
        for other in stages.values():
            other["deps"] = [d for d in other.get("deps") or [] if d not in produced]
    files = {"dvc.yaml": HEADER + yaml.safe_dump({"stages": stages}, sort_keys=False, width=110),
             "params.yaml": params_text(source, lab, args.commit_series),
             "data/triage/README.md": TRIAGE_README, "detectors/README.md": DETECTORS_README, ".gitignore": GITIGNORE,
             "README.md": README.format(lab=lab, source=mask_url(source))}
    for template in sorted(OBJECTIVES_TEMPLATE.glob("*.yaml")):     # to copy per system: objectives/<system>/
        files[f"objectives/_template/{template.name}"] = template.read_text(encoding="utf-8")
    for dag in sorted(DAGS.glob("*.py.in")):
        files[f"dags/{dag.name.removesuffix('.in')}"] = project_dag(dag.read_text(encoding="utf-8"), root)
    kept, replaced = write_files(root, files, force=args.force)
    write_version(root)
    git = shutil.which("git")
    dvc = shutil.which("dvc") or str(Path(sys.executable).parent / "dvc")
    if git and not (root / ".git").exists():
        subprocess.run([git, "init", "-q"], cwd=root, check=True)
    if not (root / ".dvc").exists():
        subprocess.run([dvc, "init", "-q", *([] if git else ["--no-scm"])], cwd=root, check=True)
    write_files(root, {".dvcignore": DVCIGNORE}, force=args.force)
    print(f"[init] a regresslab project for {for_terminal(lab)!r} in {root}: archives from {mask_url(source)}")
    for rel in kept:
        print(f"[init] kept your {rel} (it differs from regresslab's; --force replaces it, keeping yours as "
              f"{rel}.orig)")
    for rel, orig in replaced:
        print(f"[init] replaced {rel}; yours is kept as {orig.relative_to(root)}")
    print(f"[init] next: cd {root} && regresslab check && regresslab run\n"
          f"[init] nightly with Airflow: its DAG files are in {root / 'dags'} (AIRFLOW__CORE__DAGS_FOLDER)")
    return 0


def write_files(root: Path, files: dict[str, str], *, force: bool) -> tuple[list[str], list[tuple[str, Path]]]:
    """Each of ``files`` (path relative to ``root`` -> text) written unless a file is there with
    other text: :data:`MERGED` files get the lines they lack; another file is kept (listed first in
    what is returned) or, with ``force``, moved to NAME.orig and written (listed second)."""
    kept: list[str] = []
    replaced: list[tuple[str, Path]] = []
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_file() and path.name in MERGED:
            current = path.read_text(encoding="utf-8", errors="replace")
            if merged_lines(current, text) != current:
                path.write_text(merged_lines(current, text), encoding="utf-8")
            continue
        if path.exists() and (not path.is_file() or path.read_text(encoding="utf-8", errors="replace") != text):
            if not force or not path.is_file():
                kept.append(rel)
                continue
            orig = kept_name(path)
            path.rename(orig)
            replaced.append((rel, orig))
        path.write_text(text, encoding="utf-8")
    return kept, replaced


def write_version(root: Path) -> bool:
    """The installed package's version in the project's version file (what every stage depends
    on); whether it changed."""
    path = root / VERSION_FILE
    now = installed_version() + "\n"
    if path.is_file() and path.read_text() == now:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(now)
    return True


def known_stages() -> list[str]:
    folder = Path(__file__).resolve().parents[1] / "stages"
    return sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")


def stage(argv: list[str]) -> int:
    """Run one stage of the night in the current project (what its dvc.yaml calls)."""
    parser = argparse.ArgumentParser(prog="regresslab stage", description=stage.__doc__)
    parser.add_argument("name", choices=known_stages())
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)          # the name is one of the package's stage modules (choices)
    module = importlib.import_module(f"pipelines.stages.{args.name}")
    if args.rest:
        module.main(args.rest)
    else:
        module.main()
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-template"]:
        checkout = Path(__file__).resolve().parents[2]
        TEMPLATE.write_text(template_text(checkout / "dvc.yaml"))
        DAGS.mkdir(exist_ok=True)
        for stale in DAGS.glob("*.py.in"):
            stale.unlink()
        for dag in sorted((checkout / "dags").glob("*.py")):
            shutil.copyfile(dag, DAGS / f"{dag.name}.in")
        print(f"wrote {TEMPLATE} and {DAGS}")
