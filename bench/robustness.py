"""The robustness protocol: every labelled set judged under history/target splits fixed in advance.

    python -m bench.robustness                                   # every set, every split
    python -m bench.robustness --sets example nezha --jobs 2 --tag after
    python -m bench.robustness --compare build/robustness/before.json build/robustness/after.json  # or more
    python -m bench.robustness --show build/robustness/after.json   # the tables of a stored run

A method checked only on the split it was built on breaks on the next one.  This judges every
target of every split with the pipeline as configured, and beside it the anchors (the simple
baselines a user would otherwise run), and reports run accuracy, normal targets failed and faults
caught per method, and the worst case per set.

The sets: the example lab (simulated by ``labsim``) and the labelled real sets of the shared data
(``smd``, ``nezha``, ``hpc``; ``--shared``).  Every run's truth is known: a verified run's from its
``run.json``, a target's from the set's ``target_labels.json``.  The splits, fixed before any
result was looked at:

* ``given``: the set as delivered;
* ``chrono-40`` .. ``chrono-70``: per system, the runs in order of start; the first 40, 50, 60 or
  70 % are the history (their truth known), the others the targets;
* ``lab-<k>-<j>`` for k in 0, 1, 3: in a system whose runs span several labs (environments: the
  example's hardware, Nezha's days), the j-th lab that has both targets and verified runs keeps only
  its first k verified runs in the history; its targets are judged; the other labs keep all theirs
  (every system of the set at once, each with its own j-th lab).  ``k`` = all is ``given``;
* ``first-lab``: in such a system, the history keeps only the verified runs of its first lab (the
  one whose first verified run started first: Nezha's first day), and every target is judged;
* ``small-<n>`` for n in 2, 4, 8, 12: a young history, each system's first ``n`` verified normal runs
  (by start) and its verified faults; ``small-<n>-nofaults``: the same normal runs alone.  Every
  target of ``given`` is judged (a target of a lab the first runs do not reach is a new lab).

A split is a tree of its own under ``--out``: the set's validated and normalised runs are shared
(validated once, in ``<set>/base``), and the split's index hides the targets' truth and drops the
runs it leaves out; then every analysis stage from ``discretize`` to ``report`` runs on it.  The
cause classifiers are trained with random forest alone (the default learner unless another beats
it by a standard error) and no learning curve, to keep a split to minutes.

Scoring (fixed with the splits): a method *fails* a target when it says so — the headline's
verdict; each detector's p-value at ``report.false_alarm_rate`` (stacking, control charts,
cluster models, the cause classifier, which abstains outside its lab); each anchor's verdict (on
the target's baseline as the pipeline chooses it).  ``no_baseline`` and a method that cannot judge
(no baseline) count as not failing: no false alarm, a missed fault.  Run accuracy is the share of
targets a method gets right; the worst case per set is the smallest accuracy over its splits.

The house rule, reported for every change (:func:`house_rule`), in its order: first **the level**,
normal targets failed at most the rate (5 %) over all sets and splits, small and new-lab splits
included; then, on each set's worst case, the headline at least its best detector alone - 0.05.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
from pipelines.orchestration import stage_graph  # noqa: E402 -- after the path is set

SETS = ("example", "smd", "nezha", "hpc", "trainticket")
SET_DIRS = {"trainticket": "nezha_trainticket"}    # a set's folder under the shared data, when not its name
CHRONO = (40, 50, 60, 70)
SMALL_HISTORIES = (2, 4, 8, 12)
LAB_RUNS = (0, 1, 3)
DETECTORS = {"stacking": "stacking", "control_charts": "control_charts", "within_run": "within_run",
             "cluster_models": "clustered_regression", "cause_classifier": "cause_classifier"}
ANCHORS = ("anchor_chart", "anchor_mannwhitney", "anchor_median")
METHODS = ("headline", *DETECTORS, *ANCHORS)
BASE_STAGES = ("pull", "validate", "normalize")
SPLIT_STAGES = tuple(stage_graph.select("discretize", through="report"))


def env_for(root: Path) -> dict[str, str]:
    return {**os.environ, "REGRESSLAB_ROOT": str(root), "PYTHONPATH": str(REPO)}


def run_stages(root: Path, stages: tuple[str, ...], log: Path) -> None:
    """The stages' ``main()`` in one process rooted at ``root`` (its output in ``log``)."""
    code = ("import importlib, sys\n"
            "for name in sys.argv[1:]:\n"
            "    importlib.import_module(f'pipelines.stages.{name}').main()\n")
    with open(log, "a") as out:
        subprocess.run([sys.executable, "-c", code, *stages], env=env_for(root), cwd=REPO, check=True,
                       stdout=out, stderr=subprocess.STDOUT)


# --------------------------------------------------------------------------- the sets and their truth


def prepare_base(name: str, shared: Path, out: Path) -> tuple[Path, Path]:
    """The set's base tree (pulled, validated, normalised) and its labels file."""
    base = out / name / "base"
    base.mkdir(parents=True, exist_ok=True)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    if name == "example":
        source, labels = base / "example", base / "example" / "target_labels.json"
    else:
        folder = shared / "data" / SET_DIRS.get(name, name)
        source, labels = folder / "archives", folder / "target_labels.json"
    params["pull"]["source"] = str(source)
    (base / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    if name == "example" and not labels.exists():
        code = "import sys; from pipelines.stages import labsim; labsim.main(['--out', sys.argv[1]])"
        subprocess.run([sys.executable, "-c", code, str(source)], env=env_for(base), cwd=REPO, check=True,
                       stdout=subprocess.DEVNULL)
    run_stages(base, BASE_STAGES, base / "stages.log")
    return base, labels


def truths(base: Path, labels_file: Path) -> tuple[dict[str, dict], dict[str, dict]]:
    """The base tree's valid index, and every run's truth (verdict, cause, regressed counters)."""
    index = json.loads((base / "data" / "interim" / "valid_runs.json").read_text())["valid"]
    labels = json.loads(labels_file.read_text())
    truth = {}
    for run_id, row in index.items():
        known = row if row.get("verdict") in ("pass", "fail") else labels.get(run_id)
        if known:
            truth[run_id] = {"verdict": known["verdict"], "cause": known.get("cause") or
                             ("none" if known["verdict"] == "pass" else None),
                             "regressed_counters": known.get("regressed_counters") or [],
                             "root_service": known.get("root_service")}
    return index, truth


# --------------------------------------------------------------------------- the splits


def by_start(index: dict[str, dict], runs) -> list[str]:
    return sorted(runs, key=lambda r: (index[r]["started_at"], r))


def lab_of(row: dict) -> str:
    return json.dumps(row.get("environment") or {}, sort_keys=True, default=str)


def splits(index: dict[str, dict], truth: dict[str, dict]) -> dict[str, tuple[list[str], list[str]]]:
    """Split name -> (history runs, target runs)."""
    systems = sorted({index[r]["system"] for r in truth})
    given_history = [r for r in truth if index[r].get("verdict") in ("pass", "fail")]
    given_targets = [r for r in truth if r not in given_history]
    out = {"given": (given_history, given_targets)}
    for share in CHRONO:
        history, targets = [], []
        for system in systems:
            runs = by_start(index, [r for r in truth if index[r]["system"] == system])
            cut = len(runs) * share // 100
            history += runs[:cut]
            targets += runs[cut:]
        out[f"chrono-{share}"] = (history, targets)
    labs: dict[str, list[str]] = {}
    for system in systems:
        mine = [r for r in truth if index[r]["system"] == system]
        if len({lab_of(index[r]) for r in mine}) < 2:
            continue
        labs[system] = [lab for lab in sorted({lab_of(index[r]) for r in mine})
                        if any(lab_of(index[r]) == lab for r in given_targets if r in mine)
                        and any(lab_of(index[r]) == lab for r in given_history if r in mine)]
    if labs:        # the history of the first lab only (Nezha's first day): every target judged
        first = {system: min({lab_of(index[r]) for r in given_history if index[r]["system"] == system},
                             key=lambda lab: min(index[r]["started_at"] for r in given_history
                                                 if index[r]["system"] == system and lab_of(index[r]) == lab))
                 for system in labs}
        out["first-lab"] = ([r for r in given_history if first.get(index[r]["system"], lab_of(index[r]))
                             == lab_of(index[r])], list(given_targets))
    for n in SMALL_HISTORIES:      # a young history: the first n verified normal runs, with or without its faults
        firsts = [r for system in systems for r in by_start(index, [r for r in given_history if
                  index[r]["system"] == system and truth[r]["verdict"] == "pass"])[:n]]
        faults = [r for r in given_history if truth[r]["verdict"] == "fail"]
        out[f"small-{n}"] = (firsts + faults, list(given_targets))
        out[f"small-{n}-nofaults"] = (list(firsts), list(given_targets))
    for j in range(max((len(v) for v in labs.values()), default=0)):
        reduced = {system: lab_list[j] for system, lab_list in labs.items() if j < len(lab_list)}
        for k in LAB_RUNS:
            history, targets = [], []
            for r in given_history:
                lab = reduced.get(index[r]["system"])
                if lab is None or lab_of(index[r]) != lab:
                    history.append(r)
            for system, lab in reduced.items():
                own = by_start(index, [r for r in given_history if index[r]["system"] == system
                                       and lab_of(index[r]) == lab])
                history += own[:k]
                targets += [r for r in given_targets if index[r]["system"] == system and lab_of(index[r]) == lab]
            out[f"lab-{k}-{j + 1}"] = (history, targets)
    return out


def split_index(index: dict[str, dict], truth: dict[str, dict], history: list[str],
                targets: list[str]) -> dict[str, dict]:
    """The valid index of a split: the history with its truth, the targets with theirs hidden."""
    out = {}
    for r in history:
        out[r] = {**index[r], "verdict": truth[r]["verdict"], "cause": truth[r]["cause"],
                  "regressed_counters": truth[r]["regressed_counters"]}
    for r in targets:
        out[r] = {**index[r], "verdict": None, "cause": None, "regressed_counters": []}
    return out


# --------------------------------------------------------------------------- one split


def run_split(set_name: str, split: str, base: str, index: dict, truth: dict, history: list[str],
              targets: list[str], out: str, resume: bool = False) -> dict:
    """Build the split's tree, run the analysis stages, score its targets."""
    t0 = time.monotonic()
    tree, base = Path(out) / set_name / split, Path(base)
    if resume and (tree / "result.json").exists():
        return json.loads((tree / "result.json").read_text())
    if resume and (tree / "reports" / "index.html").exists() and "Traceback" not in (tree / "stages.log").read_text():
        return finish_split(set_name, split, tree, history, t0, None)   # its stages ran to the end: score it
    if tree.exists():
        shutil.rmtree(tree)
    (tree / "data" / "interim").mkdir(parents=True)
    for link in ("data/raw", "data/interim/valid", "data/interim/normalized"):
        (tree / link).symlink_to(base / link)
    sindex = split_index(index, truth, history, targets)
    (tree / "data" / "interim" / "valid_runs.json").write_text(json.dumps({"valid": sindex, "quarantined": {}}))
    labels = {r: truth[r] for r in targets}
    (tree / "labels.json").write_text(json.dumps(labels))
    params = yaml.safe_load((base / "params.yaml").read_text())
    params["train_causes"].update(learners=["random_forest"], learning_curve_learners=0)
    params["compute"]["jobs"] = os.environ.get("ROBUSTNESS_SPLIT_JOBS") and int(os.environ["ROBUSTNESS_SPLIT_JOBS"])
    params["evaluate"]["labels"] = [str(tree / "labels.json")]
    params["commit_changes"]["source"] = None
    (tree / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    error = None
    try:
        run_stages(tree, SPLIT_STAGES, tree / "stages.log")
    except subprocess.CalledProcessError:       # the night failed: its targets have no verdict, say so
        error = (tree / "stages.log").read_text()[-2000:].strip().splitlines()[-1]
    return finish_split(set_name, split, tree, history, t0, error)


def finish_split(set_name: str, split: str, tree: Path, history: list[str], t0: float, error: str | None) -> dict:
    """Score a split's targets (in its tree, in a process of its own) and keep the result there."""
    code = "import json; from bench.robustness import score_split; print(json.dumps(score_split()))"
    done = subprocess.run([sys.executable, "-c", code], env=env_for(tree), cwd=REPO, check=True,
                          capture_output=True, text=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result.update(set=set_name, split=split, history=len(history), seconds=round(time.monotonic() - t0, 1),
                  error=error)
    (tree / "result.json").write_text(json.dumps(result))
    return result


def score_split() -> dict:
    """In a split's tree: each target's truth against every method's verdict."""
    from pipelines import config
    from pipelines.systems import history
    from pipelines.evaluation.anchors import AnchorParams
    from pipelines.evaluation.leave_one_out import anchor_rows
    from pipelines.storage import manifest, store

    labels = json.loads((config.ROOT / "labels.json").read_text())
    index = manifest.read_valid_index()
    alpha = float(config.load_params("report")["false_alarm_rate"])
    hist, ev = config.load_params("history"), config.load_params("evaluate")
    rows: dict[str, dict] = {}
    for run_id, truth in labels.items():
        path = config.run_report_path(run_id)
        doc = json.loads(path.read_text()) if path.exists() else {}
        p = (doc.get("details") or {}).get("p_values") or {}
        said = {"headline": doc.get("verdict", "missing")}
        for name, key in DETECTORS.items():
            said[name] = "fail" if p.get(key) is not None and p[key] <= alpha else "pass"
        shown = list(doc.get("flagged_counters") or []) or list(doc.get("counter_scores") or {})
        rows[run_id] = {"truth": truth["verdict"], "said": said, "first_counters": shown[:5],
                        "labelled": labelled_counters(truth, index[run_id].get("counters") or shown
                                                      + list(doc.get("counter_scores") or {}))}
    for system in history.systems(index):
        mine = {r: t for r, t in labels.items() if index[r]["system"] == system}
        if not mine:
            continue
        judged = anchor_rows(system, index, store.FrameStore(None), set(hist["exclude"]), mine,
                             params=AnchorParams.of(ev["anchors"]), window=hist["window"], loo=False)
        for row in judged:
            rows[row["run_id"]]["said"][row["combiner"]] = "fail" if row["flagged"] else "pass"
    for row in rows.values():
        for name in ANCHORS:
            row["said"].setdefault(name, "pass")          # no baseline: an anchor cannot judge
    return {"targets": rows}


def labelled_counters(truth: dict, counters: list[str]) -> list[str]:
    """The counters a target's label names: its regressed counters, else those of its root service
    (Nezha's ``root_service``: ``ts-travel-service`` is the component ``ts_travel_service``)."""
    if truth.get("regressed_counters"):
        return list(truth["regressed_counters"])
    root = truth.get("root_service")
    if not root:
        return []
    component = root.replace("-", "_") + "."
    return sorted({c for c in counters if c.startswith(component)})


# --------------------------------------------------------------------------- summaries


def summarize(result: dict) -> dict:
    rows = result["targets"].values()
    normal = [r for r in rows if r["truth"] == "pass"]
    faults = [r for r in rows if r["truth"] == "fail"]
    out = {"targets": len(rows), "normal": len(normal), "faults": len(faults),
           "no_baseline": sum(r["said"]["headline"] == "no_baseline" for r in rows),
           "missing": sum(r["said"]["headline"] == "missing" for r in rows), "methods": {}}
    for m in METHODS:
        fails = lambda r: r["said"].get(m) == "fail"   # noqa: E731
        right = sum(fails(r) for r in faults) + sum(not fails(r) for r in normal)
        out["methods"][m] = {"accuracy": round(right / len(rows), 3) if rows else None,
                             "normal_failed": sum(fails(r) for r in normal),
                             "faults_caught": sum(fails(r) for r in faults)}
    return out


def table(results: list[dict]) -> list[str]:
    lines = ["| set | split | history | targets (normal/faults) | headline | stacking | charts | clusters | "
             "classifier | within run | best detector alone | gap | best anchor | no_baseline |", "|" + "---|" * 14]
    for r in results:
        s = summarize(r)
        m = s["methods"]
        cell = lambda k: f"{m[k]['accuracy']:.3f} ({m[k]['normal_failed']}/{m[k]['faults_caught']})"  # noqa: E731
        best = max(ANCHORS, key=lambda k: m[k]["accuracy"] or 0)
        alone = max(DETECTORS, key=lambda k: m[k]["accuracy"] or 0)
        gap = (m["headline"]["accuracy"] or 0) - (m[alone]["accuracy"] or 0)
        lines.append(f"| {r['set']} | {r['split']} | {r['history']} | {s['targets']} ({s['normal']}/{s['faults']}) | "
                     f"{cell('headline')} | {cell('stacking')} | {cell('control_charts')} | "
                     f"{cell('cluster_models')} | {cell('cause_classifier')} | {cell('within_run')} | "
                     f"{cell(alone)} {alone} | {gap:+.3f} | {cell(best)} {best} | "
                     f"{s['no_baseline']} |" + (f" night failed: {r['error'][:80]}" if r.get("error") else ""))
    return lines


def worst_cases(results: list[dict]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for r in results:
        s = summarize(r)
        for m, v in s["methods"].items():
            if v["accuracy"] is not None:
                cur = out.setdefault(r["set"], {}).get(m)
                out[r["set"]][m] = v["accuracy"] if cur is None else min(cur, v["accuracy"])
    for per_set in out.values():
        per_set["best_anchor"] = max(per_set[a] for a in ANCHORS if a in per_set)
        per_set["best_detector"] = max(per_set[d] for d in DETECTORS if d in per_set)
    return out


RATE = 0.05          # the house rule's level: normal targets failed over every set and split
MARGIN = 0.05        # ... then each set's worst headline at least its best detector alone minus this


def house_rule(results: list[dict]) -> list[str]:
    """The house rule, in its order: first the level (normal targets failed at most :data:`RATE`
    over every set and split, small and new-lab splits included), then each set's worst case (the
    headline at least its best detector alone - :data:`MARGIN`); each line says held or broken."""
    normal = sum(summarize(r)["normal"] for r in results)
    failed = sum(summarize(r)["methods"]["headline"]["normal_failed"] for r in results)
    level = failed <= RATE * normal
    lines = [f"1. the level: {failed}/{normal} normal targets failed over every set and split "
             f"({100 * failed / max(normal, 1):.1f} %, at most {100 * RATE:.0f} %): {'held' if level else 'BROKEN'}"]
    for name, w in worst_cases(results).items():
        gap = w["headline"] - w["best_detector"]
        lines.append(f"2. {name}: worst headline {w['headline']:.3f}, best detector alone {w['best_detector']:.3f} "
                     f"(gap {gap:+.3f}, at least {-MARGIN:+.2f}): {'held' if gap >= -MARGIN - 1e-9 else 'BROKEN'}")
    return lines


def report(results: list[dict]) -> None:
    for line in table(results):
        print(line)
    print("\nThe house rule")
    for line in house_rule(results):
        print(line)
    print("\n| set | worst: headline | stacking | charts | clusters | classifier | within run | best detector alone | "
          "gap | best anchor |\n|---|---|---|---|---|---|---|---|---|---|")
    for name, w in worst_cases(results).items():
        print(f"| {name} | {w['headline']:.3f} | {w['stacking']:.3f} | {w['control_charts']:.3f} | "
              f"{w['cluster_models']:.3f} | {w['cause_classifier']:.3f} | {w.get('within_run', float('nan')):.3f} | "
              f"{w['best_detector']:.3f} | {w['headline'] - w['best_detector']:+.3f} | {w['best_anchor']:.3f} |")
    ranks = counter_ranks(results)
    if ranks:
        print("\n| set | failed faults with labelled counters | a labelled counter first (top 1) | among the first five |\n"
              "|---|---|---|---|")
        for name, (n, top1, top5) in ranks.items():
            print(f"| {name} | {n} | {top1:.2f} | {top5:.2f} |")


def counter_ranks(results: list[dict]) -> dict[str, tuple[int, float, float]]:
    """Per set, over the fault targets the headline failed whose label names counters: the share
    whose first counter shown is a labelled one, and whose first five hold one."""
    out: dict[str, list[tuple[bool, bool]]] = {}
    for r in results:
        for row in r["targets"].values():
            labelled = set(row.get("labelled") or [])
            if row["truth"] == "fail" and labelled and row["said"].get("headline") == "fail":
                first = row.get("first_counters") or []
                out.setdefault(r["set"], []).append((bool(first[:1]) and first[0] in labelled,
                                                     bool(labelled & set(first[:5]))))
    return {k: (len(v), sum(a for a, _ in v) / len(v), sum(b for _, b in v) / len(v)) for k, v in out.items()}


def compare(paths: list[Path]) -> None:
    """Runs of the protocol side by side, oldest first: each split's headline, then each set's
    worst cases."""
    runs = [json.loads(p.read_text())["results"] for p in paths]
    names = [p.stem for p in paths]
    by_split = [{(r["set"], r["split"]): summarize(r) for r in results} for results in runs]
    cell = lambda s: (f"{s['methods']['headline']['accuracy']:.3f} ({s['methods']['headline']['normal_failed']}/"  # noqa: E731
                      f"{s['normal']} normal failed, {s['methods']['headline']['faults_caught']}/{s['faults']} caught)"
                      if s else "-")
    print("| set | split | " + " | ".join(f"headline {n}" for n in names) + f" | best anchor {names[-1]} |\n"
          + "|---|---|" + "---|" * (len(names) + 1))
    for key in dict.fromkeys(k for split in by_split for k in split):
        cells = [split.get(key) for split in by_split]
        last = next(s for s in reversed(cells) if s)
        best = max(last["methods"][k]["accuracy"] or 0 for k in ANCHORS)
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cell(s) for s in cells) + f" | {best:.3f} |")
    print()
    for name, results in zip(names, runs):
        print(f"The house rule, {name}:")
        for line in house_rule(results):
            print("  " + line)
    worst = [worst_cases(results) for results in runs]
    print("\n| set | method | " + " | ".join(f"worst {n}" for n in names) + " |\n|---|---|" + "---|" * len(names))
    for name in sorted(set().union(*worst)):
        for m in ("headline", *DETECTORS, "best_anchor"):
            print(f"| {name} | {m} | " + " | ".join(f"{w.get(name, {}).get(m, float('nan')):.3f}" for w in worst) + " |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument("--shared", default=str(REPO.parent / "shared"))
    parser.add_argument("--out", default=str(REPO / "build" / "robustness"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", nargs="*", help="split names (default: all)")
    parser.add_argument("--tag", default="latest", help="results go to <out>/<tag>.json")
    parser.add_argument("--resume", action="store_true", help="keep the splits a killed run finished (same code)")
    parser.add_argument("--compare", nargs="+", metavar="RESULTS", help="stored runs side by side, oldest first")
    parser.add_argument("--show", metavar="RESULTS", help="print the tables of a stored run (<out>/<tag>.json)")
    args = parser.parse_args(argv)
    if args.compare:
        return compare([Path(p) for p in args.compare])
    if args.show:
        return report(json.loads(Path(args.show).read_text())["results"])
    out = Path(args.out).resolve()        # the trees name their sources by absolute path
    jobs = []
    for name in args.sets:
        base, labels = prepare_base(name, Path(args.shared), out)
        index, truth = truths(base, labels)
        for split, (hist, targets) in splits(index, truth).items():
            if targets and (not args.only or split in args.only):
                jobs.append((name, split, str(base), index, truth, hist, targets, str(out), args.resume))
    print(f"{len(jobs)} splits: " + ", ".join(f"{j[0]}/{j[1]}" for j in jobs), flush=True)
    results, t0 = [], time.monotonic()
    if args.jobs > 1:       # the splits side by side: each on one core
        os.environ["ROBUSTNESS_SPLIT_JOBS"] = "1"
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_split, *job) for job in jobs]
        for i, f in enumerate(futures, 1):
            results.append(f.result())
            elapsed = time.monotonic() - t0
            print(f"[{i}/{len(jobs)}] {results[-1]['set']}/{results[-1]['split']} in {results[-1]['seconds']} s; "
                  f"{elapsed:.0f} s elapsed, eta {elapsed / i * (len(jobs) - i):.0f} s", flush=True)
    (out / f"{args.tag}.json").write_text(json.dumps({"results": results}, indent=1))
    report(results)


if __name__ == "__main__":
    main()
