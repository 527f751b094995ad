"""What the protocol would score if a target that no calibrated null can judge said ``no_baseline``.

    python bench/robustness.py --tag latest              # once: every split's tree under build/robustness
    python bench/rescore_no_baseline.py build/robustness

A target whose baseline does not share its lab (``baseline_status`` adjusted or insufficient) is
judged against the normal runs judged across labs when the history has them (``null: cross_lab``);
when every passed run of the history is of one lab there are none, and its detectors fall back to
the same-lab null, which was measured on runs judged inside their own lab.  This rescoring reads
each split's stored verdict files and results, turns the headline of every such target into
``no_baseline`` (which the protocol counts as not failing) and prints, per split, the headline's
run accuracy and normal targets failed as they are and with the variant.  Nothing is re-run.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def uncalibrated(verdict: dict) -> bool:
    """A target judged outside its lab with no method on a cross-lab null."""
    nulls = {m.get("null") for m in (verdict.get("methods") or {}).values() if isinstance(m, dict)}
    return verdict.get("baseline_status") in ("adjusted", "insufficient") and "cross_lab" not in nulls


def rescore(split: Path) -> dict:
    result = json.loads((split / "result.json").read_text())
    out = {"n": 0, "right": 0, "right_variant": 0, "normal": 0, "normal_failed": 0, "normal_failed_variant": 0,
           "no_baseline": 0}
    for run_id, target in result["targets"].items():
        path = split / "reports" / "runs" / f"{run_id}.json"
        verdict = json.loads(path.read_text()) if path.exists() else {}
        said = target["said"]["headline"]
        variant = "no_baseline" if uncalibrated(verdict) else said
        fault = target["truth"] == "fail"
        out["n"] += 1
        out["right"] += (said == "fail") == fault
        out["right_variant"] += (variant == "fail") == fault
        out["no_baseline"] += variant == "no_baseline" and said != "no_baseline"
        if not fault:
            out["normal"] += 1
            out["normal_failed"] += said == "fail"
            out["normal_failed_variant"] += variant == "fail"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="the protocol's --out folder (its <set>/<split>/ trees)")
    args = parser.parse_args()
    total = {"normal": 0, "normal_failed": 0, "normal_failed_variant": 0}
    worst: dict[str, list[float]] = {}
    print("| set | split | headline | with no_baseline | normal failed | with no_baseline | turned no_baseline |")
    print("|---|---|---|---|---|---|---|")
    for split in sorted(Path(args.out).glob("*/*/result.json")):
        tree = split.parent
        r = rescore(tree)
        if not r["n"]:
            continue
        a, b = r["right"] / r["n"], r["right_variant"] / r["n"]
        worst.setdefault(tree.parent.name, [1.0, 1.0])
        worst[tree.parent.name] = [min(worst[tree.parent.name][0], a), min(worst[tree.parent.name][1], b)]
        for k in total:
            total[k] += r[k]
        print(f"| {tree.parent.name} | {tree.name} | {a:.3f} | {b:.3f} | {r['normal_failed']}/{r['normal']} | "
              f"{r['normal_failed_variant']}/{r['normal']} | {r['no_baseline']} |")
    print()
    for name, (a, b) in sorted(worst.items()):
        print(f"{name}: worst case {a:.3f} as it is, {b:.3f} with no_baseline")
    print(f"normal targets failed: {total['normal_failed']}/{total['normal']} as it is, "
          f"{total['normal_failed_variant']}/{total['normal']} with no_baseline")


if __name__ == "__main__":
    main()
