"""What the protocol would score under other ways of combining the detectors, without re-running.

    python bench/robustness.py --tag latest              # once: every split's tree under build/robustness
    python bench/rescore_combination.py build/robustness

Each split's stored verdict files keep every detector's p-value (the run against itself's too,
when it did not decide), the detectors set aside, and the weights learned from the history's
verified faults with each detector's catches; the control charts' calibration keeps the run
against itself's p-value on each of those faults.  This rescoring decides every target again
(shares ``1 +`` each detector's catches as ``decision.fault_weights`` learns them, then
``pvalues.combined_pvalue``, Simes at ``report.false_alarm_rate``) under six variants:

* ``within``: ``fallback`` — the run against itself decides only where every other detector was
  set aside (the default) — or ``every run`` — it joins every combination
  (``report.headline_detectors`` naming ``within_run``);
* ``weights``: ``equal``, ``same-lab`` (learned shares for a run judged in its lab, the default)
  or ``every run`` (learned shares whatever the run's lab).

It prints each set's worst run accuracy and the normal targets failed over every split.  A
target that would now fail is counted as failing whether or not a counter large enough to matter
is in sight (the pipeline would pass it without one), so false alarms are, if anything,
overcounted.  Nothing is re-run.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from pipelines.stats import pvalues  # noqa: E402 -- after the path is set

VARIANTS = [(within, weights) for within in ("fallback", "every run") for weights in ("equal", "same-lab", "every run")]


def within_history_faults(split: Path, system: str) -> dict[str, float]:
    path = split / "data" / "processed" / "control_charts" / "calibration" / f"{system}.json"
    if not path.exists():
        return {}
    return ((json.loads(path.read_text()).get("within_run") or {}).get("fault_pvalues")) or {}


def verdict_under(doc: dict, split: Path, within: str, weights: str, alpha: float) -> str:
    """The target's verdict under a variant (module docstring)."""
    if doc["verdict"] == "no_baseline":
        return "no_baseline"
    details = doc["details"]
    p = {k: v for k, v in details["p_values"].items() if v is not None}
    aside = set(details.get("set_aside_detectors") or {})
    used = {k: v for k, v in p.items() if k not in aside and k != "within_run"}
    if not used and "within_run" in p:
        used = {"within_run": p["within_run"]}
    elif within == "every run" and "within_run" in p:
        used["within_run"] = p["within_run"]
    if not used:
        return "no_baseline"
    recorded = details.get("detector_weights") or {}
    shares = None
    if weights != "equal" and recorded and (weights == "every run" or doc["baseline_status"] == "same_lab"):
        caught = dict(recorded["caught"])
        if "within_run" in used and "within_run" not in caught:
            faults = within_history_faults(split, doc["system"])
            caught["within_run"] = sum(1 for r, q in faults.items() if r != doc["run_id"] and q is not None and q <= alpha)
        if all(k in caught for k in used):
            shares = [1.0 + caught[k] for k in used]
    p_value = pvalues.combined_pvalue(list(used.values()), "simes", shares)
    return "fail" if p_value <= alpha else "pass"


def rescore(root: Path, alpha: float) -> dict[tuple[str, str], dict]:
    out: dict[tuple[str, str], dict] = {}
    for variant in VARIANTS:
        worst: dict[str, float] = {}
        normal = failed = 0
        for result in sorted(root.glob("*/*/result.json")):
            split, name = result.parent, result.parent.parent.name
            right = n = 0
            for run_id, target in json.loads(result.read_text())["targets"].items():
                path = split / "reports" / "runs" / f"{run_id}.json"
                if not path.exists():
                    continue
                said = verdict_under(json.loads(path.read_text()), split, *variant, alpha)
                fault = target["truth"] == "fail"
                n += 1
                right += (said == "fail") == fault
                normal += not fault
                failed += said == "fail" and not fault
            if n:
                worst[name] = min(worst.get(name, 1.0), right / n)
        out[variant] = {"worst": worst, "normal": normal, "normal_failed": failed}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", type=Path, help="a protocol run's --out")
    parser.add_argument("--false-alarm-rate", type=float, default=0.05)
    args = parser.parse_args(argv)
    scores = rescore(args.root, args.false_alarm_rate)
    sets = sorted({s for v in scores.values() for s in v["worst"]})
    print("| within | weights | " + " | ".join(f"{s} worst" for s in sets) + " | normal targets failed |")
    print("|---|---|" + "---|" * (len(sets) + 1))
    for (within, weights), v in scores.items():
        print(f"| {within} | {weights} | " + " | ".join(f"{v['worst'].get(s, float('nan')):.3f}" for s in sets)
              + f" | {v['normal_failed']}/{v['normal']} |")


if __name__ == "__main__":
    main()
