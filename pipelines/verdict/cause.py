"""The contract's ``cause`` of a run's verdict from its cause prediction (Nguyen 2017 ch. 8,
seed 004; docs/methods/causes.md): the most probable fault of a failed run, ``known`` only above
the classifier's own ``tau``; and the fault pattern a passed run still shows."""
from __future__ import annotations

from typing import TypedDict

from pipelines.storage.cause_files import CausePrediction
from pipelines.storage.stage_files import Cause


def cause_of(verdict: str, predicted: CausePrediction | None) -> Cause:
    """The contract's ``cause`` for the headline verdict.

    A failed run gets the most probable fault cause; it is ``known`` only when the
    classifier's own top class is that cause with a probability of at least its ``tau``.
    A passed run's cause is ``none``; a run with no baseline has none known.
    """
    if verdict == "no_baseline":
        return {"label": None, "probability": None, "known": False}
    if not predicted or predicted.get("label") is None:
        return {"label": None if verdict == "fail" else "none", "probability": None, "known": verdict != "fail"}
    if verdict == "pass":
        return {"label": "none", "probability": predicted.get("none_probability"), "known": True}
    fault = predicted.get("fault") or {}
    known = bool(predicted["known"] and predicted["label"] == fault.get("label"))
    return {"label": fault.get("label"), "probability": fault.get("probability"), "known": known}


class FaultPattern(TypedDict):
    """A fault the cause classifier sees in a passed run: its label, probability, and the training
    runs of that cause."""

    label: str | None
    probability: float | None
    runs_of_cause: int | None


def fault_pattern(verdict: str, predicted: CausePrediction | None) -> FaultPattern | None:
    """A passed run in which the cause classifier nevertheless sees a fault it knows: its own top
    class is a fault with a probability of at least its ``tau``.  The verdict stays the
    detectors' (the contract's ``cause`` stays ``none``), but the report must not print "none" as
    if nothing were seen: this says which fault pattern, how probable, and from how many runs."""
    if verdict != "pass" or not predicted or predicted.get("label") in (None, "none") or not predicted.get("known"):
        return None
    # a top class other than none is also the most probable fault: ``fault`` describes it
    return {"label": predicted["label"], "probability": predicted.get("probability"),
            "runs_of_cause": (predicted.get("fault") or {}).get("runs_of_cause")}
