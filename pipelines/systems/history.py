"""Which runs are history (models, training set) and which are targets.

A *target* is a validated run whose ``verdict`` is null (not analysed yet).  Its
history is the passed verified runs of the same system that started before it, the
newest ``window`` of them (Foo et al. 2015: a sliding window of prior runs), unless the run
names its own ``baseline``.  Analysts remove a run from the repository by listing it in
``params.yaml: history.exclude``.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from pipelines import config
from pipelines.storage.run_records import Environment, ValidIndex


def lab_key(env: Environment | None) -> str:
    """A lab's identity: its whole environment, canonically serialised."""
    return json.dumps(env or {}, sort_keys=True, default=str)


def passed_runs(index: ValidIndex, system: str, *, exclude: AbstractSet[str] = frozenset(),
                before: str | None = None, window: int | None = None) -> list[str]:
    """Passed verified runs of ``system``, oldest first, optionally before a time and windowed."""
    runs = [(row["started_at"], rid) for rid, row in index.items()
            if row.get("system") == system and row.get("verdict") == "pass" and rid not in exclude
            and (before is None or row["started_at"] < before)]
    runs.sort()
    ids = [rid for _, rid in runs]
    return ids[-window:] if window else ids


def verified_runs(index: ValidIndex, system: str, *, exclude: AbstractSet[str] = frozenset()) -> list[str]:
    """The runs of ``system`` an analyst has verified (passed or failed), by run_id."""
    return [r for r in sorted(index) if index[r].get("system") == system
            and index[r].get("verdict") in ("pass", "fail") and r not in exclude]


def verdicts(index: ValidIndex, system: str, *, exclude: AbstractSet[str] = frozenset()) -> dict[str, str]:
    """The verified runs of ``system`` with their verdict (``pass``/``fail``)."""
    return {r: str(index[r]["verdict"]) for r in verified_runs(index, system, exclude=exclude)}   # pass or fail


def fault_runs(verdicts: dict[str, str]) -> list[str]:
    """The verified fault runs of :func:`verdicts`, in its order (what each calibration also judges
    as a target, for ``decision.fault_weights``)."""
    return [r for r, v in verdicts.items() if v == "fail"]


def targets(index: ValidIndex) -> list[str]:
    """Runs nobody has analysed yet (``verdict`` null), oldest first."""
    return [rid for rid, row in sorted(index.items(), key=lambda kv: (kv[1]["started_at"], kv[0]))
            if row.get("verdict") is None]


def usable_baseline(run_id: str, named: list[str], index: ValidIndex, *,
                    exclude: AbstractSet[str] = frozenset()) -> list[str]:
    """The runs of a named ``baseline`` that can be one: validated, of the same system, passed,
    started before the run, not the run itself and not excluded (a failed, later or unknown run,
    or the run itself, would make the comparison meaningless)."""
    row = index[run_id]
    return [b for b in dict.fromkeys(named) if b != run_id and b in index and b not in exclude
            and index[b].get("system") == row["system"] and index[b].get("verdict") == "pass"
            and index[b]["started_at"] < row["started_at"]]


def baseline_choice(run_id: str, index: ValidIndex, *, window: int,
                    exclude: AbstractSet[str] = frozenset()) -> tuple[list[str], str]:
    """The passed runs a target is compared with, and where they come from:

    * ``named``: its own ``baseline``, when it names usable runs (:func:`usable_baseline`);
    * ``before``: else the newest ``window`` passed runs before it, when one of them shares its lab
      (``labs.lab_key``) or no passed run of its lab exists;
    * ``later_lab``: else the earliest ``window`` passed runs *of its lab* verified after it: a run
      is compared with its own lab's runs when the history has any, time deciding only among them
      (a lab's levels differ in every counter, which no shift learned from a few runs undoes as
      well as the lab's own runs do: Foo et al. 2015 §3.3, seed 003, weigh models by the
      similarity of their environment to the target's);
    * ``later``: else, when no passed run precedes it, the earliest ``window`` passed runs after
      it (a run analysed after later runs were verified: its page says so);
    * ``none``: no passed run at all: nothing to judge it against (the verdict ``no_baseline``)."""
    row = index[run_id]
    named = usable_baseline(run_id, row.get("baseline") or [], index, exclude=exclude)
    if named:
        return named, "named"
    passed = passed_runs(index, row["system"], exclude=exclude | {run_id})
    before = [r for r in passed if index[r]["started_at"] < row["started_at"]]
    later = [r for r in passed if index[r]["started_at"] > row["started_at"]]
    chosen, origin = (before[-window:], "before") if before else (later[:window], "later" if later else "none")
    lab = lab_key(row.get("environment"))
    own = {r for r in passed if lab_key(index[r].get("environment")) == lab}
    if not own.isdisjoint(chosen):
        return chosen, origin
    own_before, own_later = [r for r in before if r in own], [r for r in later if r in own]
    if own_before:
        return own_before[-window:], "before"
    if own_later:
        return own_later[:window], "later_lab" if before else "later"
    return chosen, origin


def baseline_for(run_id: str, index: ValidIndex, *, window: int,
                 exclude: AbstractSet[str] = frozenset()) -> list[str]:
    """The prior passed runs a target is compared with (:func:`baseline_choice`)."""
    return baseline_choice(run_id, index, window=window, exclude=exclude)[0]


def systems(index: ValidIndex) -> list[str]:
    return sorted({row["system"] for row in index.values()})


def most_similar(prior_envs: dict[str, Environment], target_env: Environment) -> list[str]:
    """The prior runs whose environment shares the most components with the target's.

    Used to pick the known-good runs of the target's own lab: the reference runs of
    rule pruning (detect) and the baseline of the control charts.
    """
    if not prior_envs:
        return []
    equal = {r: sum(1 for k, v in target_env.items() if k in env and env[k] == v) for r, env in prior_envs.items()}
    best = max(equal.values())
    return [r for r, e in equal.items() if e == best]


@dataclass(frozen=True)
class HistoryParams:
    """The ``history`` params block, typed: the newest ``window`` passed runs of a system are its
    history, less the runs an analyst removed (``exclude``); ``block`` is the block as validated
    (the input keys hash it, ``labs.lab_params`` reads its labs' keys).  The runs it makes a
    system's history (:meth:`passed`, :meth:`verified`, :meth:`verdicts`) and a target's baseline
    (:meth:`baseline`, :meth:`baseline_choice`)."""

    window: int
    exclude: frozenset[str]
    block: Mapping[str, Any] = field(compare=False, repr=False)

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> "HistoryParams":
        return cls(window=int(block["window"]), exclude=frozenset(block.get("exclude") or ()), block=dict(block))

    @classmethod
    def load(cls) -> "HistoryParams":
        """The project's ``history`` block (``config.load_params``), typed: the stages' one loading site."""
        return cls.of(config.load_params("history"))

    def passed(self, index: ValidIndex, system: str) -> list[str]:
        """:func:`passed_runs` of the window."""
        return passed_runs(index, system, exclude=set(self.exclude), window=self.window)

    def verified(self, index: ValidIndex, system: str) -> list[str]:
        return verified_runs(index, system, exclude=set(self.exclude))

    def verdicts(self, index: ValidIndex, system: str) -> dict[str, str]:
        return verdicts(index, system, exclude=set(self.exclude))

    def baseline_choice(self, run_id: str, index: ValidIndex) -> tuple[list[str], str]:
        return baseline_choice(run_id, index, window=self.window, exclude=set(self.exclude))

    def baseline(self, run_id: str, index: ValidIndex) -> list[str]:
        return baseline_for(run_id, index, window=self.window, exclude=set(self.exclude))
