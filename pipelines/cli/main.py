"""regresslab: the command for what users do.

    regresslab init DIR --source S   # a lab's own project in DIR: params.yaml, dvc.yaml, git and DVC
    regresslab check                 # the config, the project and the sources, without running anything
    regresslab run [--fail-on-regression] [DVC ARGS]   # the night through DVC (dvc repro in the project)
    regresslab ingest RUN_DIR --out DIR
    regresslab triage RUN_ID --verdict pass|fail --by NAME   (or --list, --undo)
    regresslab report [--open] [--junit FILE]   # the night index and the latest night's runs (JUnit XML for CI)
    regresslab compare RUN_A RUN_B   # two runs side by side, every counter (and reports/compare/A--B.html)
    regresslab retake RUN_ID --by NAME [--note TEXT]   # take a run's changed copy on purpose, the first kept aside
    regresslab stage NAME            # one stage of the night (what the project's dvc.yaml runs)

The project is the directory holding ``dvc.yaml`` and ``params.yaml``: ``REGRESSLAB_ROOT`` when
set, else the checkout this package lives in, else the current directory (``config``).
"""
from __future__ import annotations

import argparse
import difflib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

from pipelines import config, params_schema
from pipelines.safe_text import for_terminal, mask_url, mask_urls, one_line


def registered() -> list[Any]:
    """The detectors of ``report.detectors``, each reader imported (``registry.registry``); a
    ConfigError naming the entry when one cannot be read, or when a detector's own result files
    are not a dependency of dvc.yaml's ``report`` stage (``dvc repro`` would keep the reports it
    made before they changed): said before the night, not at its report."""
    from pipelines.detection import registry

    try:
        specs = list(registry.registry(config.load_params("report")["detectors"]))
    except ValueError as exc:
        raise params_schema.ConfigError(str(exc)) from None
    deps = report_deps()
    for spec in specs:
        if spec.file is not None and deps is not None:
            folder = spec.file.split("{run_id}")[0].rstrip("/") or spec.file
            if not any(folder == d or folder.startswith(d + "/") for d in deps):
                raise params_schema.ConfigError(
                    f"params.yaml: report.detectors ({spec.name}): its results {spec.file} are not a dependency of "
                    f"dvc.yaml's report stage: add '- {folder}' to its deps, or dvc repro keeps the reports made "
                    "before they changed")
    return specs


def dvc_stages() -> dict[str, Any]:
    """The project's dvc.yaml stages ({} when it has no readable dvc.yaml)."""
    import yaml

    try:
        return (yaml.safe_load((config.ROOT / "dvc.yaml").read_text()) or {}).get("stages") or {}
    except (OSError, yaml.YAMLError):
        return {}


def report_deps() -> list[str] | None:
    """The deps of dvc.yaml's ``report`` stage (None: the project has no such stage or no dvc.yaml)."""
    stages = dvc_stages()
    if "report" not in stages:
        return None
    return [str(d if isinstance(d, str) else next(iter(d))).rstrip("/") for d in stages["report"].get("deps") or []]


def objectives_checked() -> list[str]:
    """The systems' objectives (``objectives/<system>/``), each file read and checked, and each
    counter an indicator names looked for in the latest validated run of its system: a line per system,
    a ConfigError naming the file, the key and what would do."""
    from pipelines.objectives.files import ObjectivesError, read_gates
    from pipelines.storage import manifest

    try:
        gates = read_gates(config.OBJECTIVES_CONFIG, config.is_identifier)
    except ObjectivesError as exc:
        raise params_schema.ConfigError(f"objectives: {exc}") from None
    index = manifest.read_valid_index(every=True) if config.VALID_INDEX.exists() else {}
    lines = []
    for system, gate in gates.items():
        runs = sorted((r for r, row in index.items() if row.get("system") == system),
                      key=lambda r: str(index[r].get("started_at") or ""))
        if not runs:
            lines.append(f"{system}: {len(gate.objectives)} objective(s); no run of {system} pulled yet: its "
                         "counters are checked once one is")
            continue
        have = run_counters(runs[-1])
        for name, indicator in gate.indicators.items():
            if indicator.counter not in have:
                near = difflib.get_close_matches(indicator.counter, sorted(have), n=1)
                raise params_schema.ConfigError(
                    f"objectives: {config.objectives_dir(system) / 'sli.yaml'}: indicators.{name}: no pulled archive "
                    f"of {system} has the counter {indicator.counter!r} (the latest, {runs[-1]}, has "
                    f"{len(have)} counters" + (f"; did you mean {near[0]!r}?)" if near else ")"))
        lines.append(f"{system}: {len(gate.objectives)} objective(s), their {len(gate.indicators)} indicator(s) "
                     f"found in {runs[-1]}")
    return lines


def run_counters(run_id: str) -> set[str]:
    """The counters of a validated run (its host frames' columns, read from their schemas)."""
    import pyarrow.parquet as pq

    return {name for path in config.valid_dir(run_id).glob("*.parquet")
            for name in pq.read_schema(path).names if name != "ts"}


def check(argv: list[str]) -> int:
    """``params.yaml`` against its schema, the systems' objectives, then each pull source listed (not copied)."""
    argparse.ArgumentParser(prog="regresslab check", description=check.__doc__).parse_args(argv)
    from pipelines.stages.pull import source_locations
    from pipelines.storage.sources import find_archives

    problems = 0
    config.load_params()                       # a ConfigError: main() says what is wrong, exit 2
    print(f"[check] {config.PARAMS}: valid")
    print(f"[check] detectors: {', '.join(spec.name for spec in registered())}")
    for line in objectives_checked() or ["none declared (objectives/<system>/slo.yaml and sli.yaml; a template "
                                         "in objectives/_template/ after `regresslab init`)"]:
        print(f"[check] objectives: {line}")
    produced = stage_outputs()
    for location in source_locations(config.load_params("pull")):
        shown = for_terminal(mask_url(location))
        stage = produced.get(str(Path(location).resolve())) if "://" not in location else None
        if stage and not Path(location).exists():
            print(f"[check] source {shown}: not there yet, written by the {stage} stage of the night")
            continue
        try:
            found = find_archives(location)
            print(f"[check] source {shown}: {len(found)} archive(s) or run director(ies)")
        except OSError as exc:
            problems += 1
            print(f"[check] source {shown}: {for_terminal(mask_urls(str(exc)))}", file=sys.stderr)
    if shutil.which("dvc") is None and not (Path(sys.executable).parent / "dvc").exists():
        problems += 1
        print("[check] dvc: not found on PATH (pip install regresslab installs it)", file=sys.stderr)
    for needed, what in (("dvc.yaml", "the night's stages"), (".dvc", "a DVC repository")):
        if not (config.ROOT / needed).exists():
            problems += 1
            print(f"[check] {config.ROOT}: no {needed} ({what}): `regresslab init {config.ROOT} --source ...` "
                  "makes this folder a project", file=sys.stderr)
    return 1 if problems else 0


def stage_outputs() -> dict[str, str]:
    """Absolute path -> the dvc.yaml stage that writes it (a source the night itself produces,
    as the example's simulated lab)."""
    out = {}
    for name, stage in dvc_stages().items():
        for o in stage.get("outs") or []:
            path = next(iter(o)) if isinstance(o, dict) else o
            out[str((config.ROOT / path).resolve())] = name
    return out


def stage_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment ``dvc repro`` runs the stages in: this interpreter's folder first on PATH, so
    that ``dvc`` and each stage's ``python`` are those regresslab is installed in even when its
    virtual environment is not activated, and the stages' output unbuffered (shown as it comes)."""
    import os

    bin_dir = str(Path(sys.executable).parent)
    rest = [p for p in (environ.get("PATH") or "").split(os.pathsep) if p and p != bin_dir]
    return {**environ, "PATH": os.pathsep.join([bin_dir, *rest]), "PYTHONUNBUFFERED": "1"}


def run(argv: list[str]) -> int:
    """The night through DVC: ``dvc repro`` in the project, any further arguments passed on.  Its
    output is shown as it comes; when a stage fails, the night's alert says which and why
    (``params.yaml: alerts``, off by default).  ``--fail-on-regression``: exit 3 when a run of the
    night regressed (a CI job's pass or fail)."""
    import collections
    import os

    fail_on_regression = "--fail-on-regression" in argv
    argv = [a for a in argv if a != "--fail-on-regression"]
    config.load_params()                       # a bad params.yaml stops here, before any stage
    registered()                               # and a detector the report could not read
    config.OBJECTIVES_CONFIG.mkdir(exist_ok=True)   # the objectives stage reads it (a project of an earlier version)
    objectives_checked()                       # and objectives a night could not use
    from pipelines.cli import project
    if (config.ROOT / project.VERSION_FILE).exists() and project.write_version(config.ROOT):
        print(f"[run] regresslab {project.installed_version()}: a new version, the night's stages run again")
    env = stage_env(os.environ)
    dvc = shutil.which("dvc", path=env["PATH"]) or "dvc"
    tail: collections.deque[str] = collections.deque(maxlen=80)
    with subprocess.Popen([dvc, "repro", *argv], cwd=config.ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace", env=env) as proc:
        assert proc.stdout is not None          # stdout=PIPE
        for line in proc.stdout:
            line = mask_urls(line)              # a client's error may quote a location with its credentials
            sys.stdout.write(line)
            sys.stdout.flush()
            tail.append(line)
    if proc.returncode:
        from pipelines.reporting import alerts

        busy = another_night(list(tail))
        if busy:                                # not this night's failure: the night that holds the project goes on
            print(f"[run] another night holds this project, so this one did not start (nothing written, "
                  f"no alert): {busy}", file=sys.stderr)
            return proc.returncode
        stage, reason = failed_stage(list(tail))
        if not alerts.is_skip(reason):
            from pipelines.reporting.pages import write_failed_night
            print(f"[run] night FAILED at {stage}: the night index says so: {write_failed_night(stage, reason)}",
                  file=sys.stderr)
        print(f"[run] alerts: {alerts.notify_stopped(stage, reason, where='dvc repro')}", file=sys.stderr)
        return proc.returncode
    if fail_on_regression:
        failed = sorted(r for r, row in ((latest_night() or {}).get("runs") or {}).items() if row.get("verdict") == "fail")
        if failed:
            print(f"[run] {len(failed)} run(s) regressed: {', '.join(failed)} (--fail-on-regression: exit 3)",
                  file=sys.stderr)
            return 3
    return 0


def another_night(lines: list[str]) -> str | None:
    """DVC's line saying that another ``dvc repro`` holds the project (its repository lock, or the
    outputs of the stage it is running), None when the night failed for another reason."""
    for line in reversed(lines):
        if "is busy, it is being blocked by" in line or "Unable to acquire lock" in line:
            return line.strip()
    return None


def failed_stage(lines: list[str]) -> tuple[str, str]:
    """(stage, reason) of a failed ``dvc repro`` from the end of its output: DVC's ``failed to
    reproduce 'STAGE'`` names the stage; the reason is the stage's last lines before it (its
    exception) and DVC's own line."""
    import re

    for i in range(len(lines) - 1, -1, -1):
        found = re.search(r"failed to reproduce '([^']+)'", lines[i])
        if found:
            before = [ln.rstrip() for ln in lines[max(0, i - 12):i] if ln.strip()]
            return found.group(1), "\n".join(before[-6:] + [lines[i].strip()])
    return "dvc repro", "\n".join(ln.rstrip() for ln in lines[-8:] if ln.strip())


def latest_night() -> dict | None:
    """The latest night's summary (``reports/nights/<night>.json``: its runs), None without one."""
    nights = sorted(config.NIGHTS.glob("*.json")) if config.NIGHTS.exists() else []
    for path in reversed(nights):
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return None


def report(argv: list[str]) -> int:
    """Where the night index is, and the latest night's runs with their verdicts."""
    parser = argparse.ArgumentParser(prog="regresslab report", description=report.__doc__)
    parser.add_argument("--open", action="store_true", help="open the night index in a browser")
    parser.add_argument("--junit", type=Path, metavar="FILE",
                        help="also write the latest night as JUnit XML (one test case per target run)")
    args = parser.parse_args(argv)
    if not config.NIGHT_INDEX.exists():
        print(f"[report] no night yet: {config.NIGHT_INDEX} does not exist (regresslab run)", file=sys.stderr)
        return 1
    print(f"[report] night index: {config.NIGHT_INDEX}")
    night = latest_night()
    runs = sorted((night or {}).get("runs") or {}) if night else sorted(p.stem for p in config.RUN_REPORTS.glob("*.json"))
    docs = {}
    for run_id in runs:
        path = config.run_report_path(run_id) if config.is_identifier(run_id) else None
        try:
            docs[run_id] = json.loads(path.read_text()) if path else None
        except (OSError, ValueError):
            continue
        doc = docs[run_id]
        if doc is not None:
            print("  " + report_line(doc, run_id))
    if args.junit:
        from pipelines.reporting import junit
        from pipelines.storage import atomic

        atomic.write_text_atomic(args.junit, junit.night_xml(str((night or {}).get("night") or "latest"),
                                                              {k: v for k, v in docs.items() if v},
                                                              index=config.NIGHT_INDEX))
        print(f"[report] JUnit XML: {args.junit}")
    if args.open:
        import webbrowser
        webbrowser.open(config.NIGHT_INDEX.as_uri())
    return 0


def report_line(doc: dict, stem: str) -> str:
    """One run as the night index shows it: verdict, "insufficient baseline" when nothing in the
    history teaches its lab, and its cause ("unknown (nearest X)" when the classifier is unsure)."""
    verdict = str(doc.get("verdict", "?"))
    if doc.get("baseline_status") == "insufficient" and verdict in ("pass", "fail"):
        verdict += " (insufficient baseline)"
    cause = doc.get("cause") or {}
    label = cause.get("label")
    if doc.get("verdict") != "fail":
        said = ""
    elif cause.get("known"):
        said = str(label)
    else:
        said = "unknown" + (f" (nearest {label})" if label else "")
    return for_terminal(one_line(f"{doc.get('run_id', stem):40s} {verdict:36s} {said}".rstrip()))


def ingest(argv: list[str]) -> int:
    from pipelines.cli import ingest as command
    command.main(argv)
    return 0


def compare(argv: list[str]) -> int:
    from pipelines.reporting import compare as command
    return command.main(argv)


def triage(argv: list[str]) -> int:
    from pipelines.cli import triage as command
    command.main(argv)
    return 0


def retake(argv: list[str]) -> int:
    """Take the sources' copy of a run whose content changed, on purpose: the copy in ``data/raw`` is
    kept aside, byte for byte, in ``data/raw/set_aside/`` and the manifest says who took the new one
    and why; the next night analyses it.  Exit 0 when the new copy is taken, 1 when there is none to
    take (the same content, not at any source, still being written, or refused), 2 on a bad call."""
    parser = argparse.ArgumentParser(prog="regresslab retake", description=retake.__doc__)
    parser.add_argument("run_id")
    parser.add_argument("--by", required=True, help="who takes the new copy (kept in the manifest)")
    parser.add_argument("--note", default="", help="why (kept in the manifest)")
    args = parser.parse_args(argv)
    from pipelines.stages.pull import source_locations
    from pipelines.storage import locks, manifest, sources

    if not config.RUN_ID_RE.match(args.run_id):
        print(f"regresslab retake: {for_terminal(args.run_id)!r} is not a run_id", file=sys.stderr)
        return 2
    if args.run_id not in manifest.read_manifest():
        print(f"regresslab retake: no copy of {args.run_id} in data/raw: the next night takes it as a new archive",
              file=sys.stderr)
        return 2
    params = config.load_params("pull")
    why = f"replaced on purpose by {one_line(args.by)}" + (f": {one_line(args.note)}" if args.note else "")
    with locks.data_lock("retake"):
        summary = sources.pull(source_locations(params), config.RAW, max_archive_bytes=int(params["max_archive_bytes"]),
                               settle_s=float(params["settle_s"]), require_done=params["done_markers"] == "required",
                               accept={args.run_id: why}, only={args.run_id})
    if args.run_id in summary["new"]:
        aside = manifest.read_manifest()[args.run_id].set_aside[-1]
        print(f"[retake] {args.run_id}: the new copy taken; the earlier one kept at data/raw/{aside['file']}; "
              "the next night (regresslab run) analyses it")
        return 0
    said = [f"{r['reason']}" for key in ("refused", "waiting") for r in summary[key] if r["run_id"] == args.run_id]
    if args.run_id in summary["known"]:
        said.append("the sources hold the same content as data/raw: nothing to take")
    for m in summary["missing_sources"]:
        said.append(f"source {m['source']} skipped: {m['reason']}")
    print(f"[retake] {args.run_id}: not taken: " + ("; ".join(for_terminal(x) for x in said) or "at no source"),
          file=sys.stderr)
    return 1


def init(argv: list[str]) -> int:
    from pipelines.cli import project
    return project.init(argv)


def stage(argv: list[str]) -> int:
    from pipelines.cli import project
    return project.stage(argv)


COMMANDS = {"init": init, "check": check, "run": run, "stage": stage, "ingest": ingest, "triage": triage,
            "report": report, "compare": compare, "retake": retake}


def main(argv: list[str] | None = None) -> int:
    from pipelines.safe_text import mask_logging

    mask_logging()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print(__doc__.strip())
        if argv and argv[0] not in ("-h", "--help"):
            print(f"\nregresslab: unknown command {argv[0]!r} (one of {', '.join(COMMANDS)})", file=sys.stderr)
            return 2
        return 0
    try:
        return COMMANDS[argv[0]](argv[1:])
    except params_schema.ConfigError as exc:
        print(f"regresslab: configuration error\n{exc}", file=sys.stderr)
        return 2


def entry() -> None:
    """The console script; its output piped into a reader that stops early (``| head``) ends it quietly."""
    import os

    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())     # no second error at exit
        code = 0
    raise SystemExit(code)


if __name__ == "__main__":
    entry()
