"""cause_signatures: which counters a cause shows on this system, learned from its verified faults.

A failed run's first counters should be those that explain it.  The detectors rank counters by
how far each moved, and on a system whose faults spread (a slow service makes its callers slow,
timeouts move between services) what moved most is seldom where the fault is: on Nezha's
OnlineBoutique the callers' latency comes before the stressed service's CPU.  The system's own
history knows better: each verified fault names its ``regressed_counters`` (contract §1), and
faults of one cause name counters of the same *kinds* (``cartservice.cpu_usage_m`` and
``adservice.cpu_usage_m`` are both ``cpu_usage_m``: ``counter_kinds.counter_kind``) whichever
component they hit.

So when the run's cause is predicted (the cause classifier, Nguyen 2017 ch. 8, seed 004), its
**signature** on this system is read from the history's verified faults of that cause: **by
counter** first, the counters most of them named (sock-shop's four ``orders-cpu`` faults all name
``orders.cpu``: that counter, not every ``*.cpu``), **by kind** for the rest, the kinds they named
when they hit different components.  The run's counters of the signature's own counters come
first (a counter of the signature that the run moved enough to matter is shown even when no
detector flagged it: the cause's evidence), then the counters of its kinds in turn with the
detectors' own order (:func:`explain_order`).  A wrong cause prediction then costs the detectors'
first counter one place per counter of the signature.  No signature (the cause is not
predicted, or no verified fault of it names counters, as for code faults that leave no trace in
the counters) leaves the detectors' order as it is.

A run is never explained by its own label: a verified run judged in leave-one-out leaves itself
out (``leave_out``).

Measured in ``docs/results/robustness.md`` ("Counters in the order that explains the run").
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pipelines.systems.counter_kinds import counter_kind


@dataclass(frozen=True)
class FaultLabel:
    """A verified fault run of the history: its cause and the counters its label names."""

    cause: str
    counters: tuple[str, ...]


@dataclass(frozen=True)
class Signature:
    """What the history's verified faults of ``cause`` named (``runs`` of them): the ``counters``
    most of them named, and the counter ``kinds`` they named."""

    cause: str
    kinds: frozenset[str]
    runs: int
    counters: frozenset[str] = frozenset()

    def names(self, counter: str) -> bool:
        """Whether ``counter`` is one of the signature's counters or of one of its kinds."""
        return counter in self.counters or counter_kind(counter)[1] in self.kinds

    def to_json(self) -> dict[str, object]:
        return {"cause": self.cause, "counters": sorted(self.counters), "kinds": sorted(self.kinds),
                "runs": self.runs}


def fault_labels(index: Mapping[str, Mapping], system: str) -> dict[str, FaultLabel]:
    """The verified fault runs of ``system`` in the valid-run index whose label names counters."""
    return {run_id: FaultLabel(str(row["cause"]), tuple(row.get("regressed_counters") or ()))
            for run_id, row in index.items()
            if row.get("system") == system and row.get("verdict") == "fail" and row.get("cause")
            and row.get("regressed_counters")}


def signature(labels: Mapping[str, FaultLabel], cause: str | None, *, leave_out: str | None = None
              ) -> Signature | None:
    """The signature of ``cause`` in ``labels`` (``leave_out``'s own label left out); None when no
    verified fault of that cause names a counter."""
    if not cause:
        return None
    named = [lab for run_id, lab in labels.items() if lab.cause == cause and run_id != leave_out]
    kinds = frozenset(counter_kind(c)[1] for lab in named for c in lab.counters)
    counts: dict[str, int] = {}
    for lab in named:
        for c in set(lab.counters):
            counts[c] = counts.get(c, 0) + 1
    counters = frozenset(c for c, k in counts.items() if 2 * k > len(named))      # named by most of them
    return Signature(cause, kinds, len(named), counters) if kinds else None


def explain_order(flagged: list[str], sig: Signature | None) -> list[str]:
    """``flagged`` (the detectors' order) with the signature's own counters first, then the
    counters of its kinds taken in turn with the others: kind, detectors, kind, ...; each list
    keeps its own order, and a list that runs out leaves the rest to the other."""
    if sig is None:
        return list(flagged)
    own = [c for c in flagged if c in sig.counters]
    rest = [c for c in flagged if c not in sig.counters]
    matching = [c for c in rest if counter_kind(c)[1] in sig.kinds]
    return own + (in_turn(matching, rest) if matching else rest)


def in_turn(first: list[str], others: list[str]) -> list[str]:
    """``first`` and ``others`` without ``first``'s counters, taken in turn (first, other, first,
    ...); each keeps its own order, and a list that runs out leaves the rest to the other."""
    chosen = set(first)
    rest = [c for c in others if c not in chosen]
    out: list[str] = []
    for i in range(max(len(first), len(rest))):
        out += first[i:i + 1] + rest[i:i + 1]
    return out
