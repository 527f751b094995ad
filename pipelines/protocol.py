"""The shape every detector of a run takes: calibrated on a history, it judges a run against its
baseline and the history's own verified runs the same way, and says so in one record.

The verdict (:mod:`pipelines.verdict.headline`) reads nothing else: a :class:`DetectorResult`
per detector of the registry (``report.detectors`` in params.yaml, in its order: each entry a
name and the function that reads the detector's result of a run from its stored file,
:class:`ResultReader`), read at one edge (:mod:`pipelines.detection.stage_results`).  The result
says what the verdict needs to know of the detector without naming it: what its p-value was judged
against (``null_kind``, ``null_runs``), whether that null needs no other run
(``self_contained``), how its counters explain a failed run (``counters``), how the page and the
record call it (``title``).  A new detector is a module that calibrates, judges and reads back
its result as this record, and one entry of the registry; the verdict weighs it by its record on
the system's history (:mod:`pipelines.verdict.record`) like the others.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, TypedDict, TypeVar, runtime_checkable

from pipelines.stats.effects import Significance
from pipelines.storage.run_records import ValidIndex
from pipelines.storage.cause_files import CausePrediction
from pipelines.storage.stage_files import LabSummary, WeightedRun
from pipelines.storage.store import FrameStore
from pipelines.systems.history import HistoryParams


@dataclass(frozen=True)
class DetectorResult:
    """What one detector said of one run.

    ``judged``: it judged the run (its entries are on the verdict file's ``methods`` and its
    p-value, even ``None``, among the detectors' ``p_values``); a detector that did not may still
    bring its record (``history_faults``, ``history_normals``: its leave-one-out p-values on the
    history's verified fault and normal runs) or a ``reason``.  ``verdict``: ``pass``/``fail`` at
    its own threshold, ``None`` when it could not say; ``votes``: that verdict counts under the
    rules ``all``/``any``.  ``run_score`` (in [0, 1]) joins the run's score when given;
    ``counter_scores`` and ``flagged_counters`` are the counters it points to (``reserve_counters``:
    those it names when it flagged none); ``page`` its entries of the verdict file's ``methods``
    (contract §2), by method name; ``details`` its entries of the verdict file's ``details``.

    What the verdict reads of the detector itself: ``title`` (the page's and the record's name for
    it; its registry name when empty); ``null_kind`` what its p-value was judged against
    (``same_lab``: the history's normal runs, each judged inside its own lab; ``cross_lab``: judged
    across labs as a run of another lab is; None: no such null); ``null_runs`` the normal runs of
    its null (None: those of its record); ``self_contained``: its null needs no other run (the run
    against itself), so it may judge a run whose lab the others cannot, and ``alone_score`` is the
    run's score when it decides alone; ``counters``, how its counters explain a failed run
    (:data:`COUNTER_ROLES`)."""

    judged: bool
    verdict: str | None = None
    p_value: float | None = None
    votes: bool = False
    run_score: float | None = None
    counter_scores: dict[str, float] = field(default_factory=dict)
    flagged_counters: list[str] = field(default_factory=list)
    reserve_counters: list[str] = field(default_factory=list)
    history_faults: Mapping[str, float | None] | None = None
    history_normals: Mapping[str, float] | None = None
    page: dict[str, dict[str, Any]] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    title: str = ""
    null_kind: str | None = None
    null_runs: int | None = None
    self_contained: bool = False
    alone_score: float | None = None
    counters: str = "own"

    def __post_init__(self) -> None:
        if self.counters not in COUNTER_ROLES:
            raise ValueError(f"a detector's counters are one of {', '.join(COUNTER_ROLES)}, not {self.counters!r}")


class NullOf(TypedDict):
    """What a detector's page says of its null (:func:`null_of`), as :class:`DetectorResult` holds it."""

    null_runs: int | None
    null_kind: str | None


def null_of(page: Mapping[str, Any]) -> NullOf:
    """What a detector's page says of its null: the normal runs it counts (``normal_runs`` or
    ``null_runs``) and whether they were judged across labs (``null``)."""
    runs = page.get("normal_runs", page.get("null_runs"))
    return {"null_runs": None if runs is None else int(runs), "null_kind": page.get("null")}


def recorded(doc: Mapping[str, Any], **fields: Any) -> DetectorResult:
    """A stage file's result: whether it judged the run (a verdict), its record on the history,
    and what the verdict reads of the detector and of its judgement (``fields``)."""
    return DetectorResult(judged=bool(doc.get("verdict")), history_faults=doc.get("history_faults"),
                          history_normals=doc.get("history_normals"), **fields)


# How a detector's counters explain a failed run (DetectorResult.counters), in the order the
# verdict reads them (evidence.failed_counters):
#   scored    its counter scores join the run's (each counter's mean over such detectors), and its
#             flagged counters (else its reserve) are shown first, in the order of those scores
#             (report.flag_rule: the first such detector's that flagged any, or their union); its
#             flags of a change too small to matter are set aside, on its page too;
#   models    its flags when no scored detector flagged any (set aside the same way);
#   own       its flags whose change matters, when none of the above named any;
#   evidence  the counters that carried its judgement: shown first only when it decided and the
#             deciders named none, before the others' flags (never alone: the verdict cannot change).
# A self-contained detector's flags (beyond its own limits: their change matters by construction)
# are shown when it is among the deciders, and alone when it decides alone, whatever its role.
COUNTER_ROLES = ("scored", "models", "own", "evidence")


@dataclass(frozen=True)
class SystemHistory:
    """What a detector is calibrated on and judges a system's targets with: the system, the valid-run
    index, its runs' frames (at the system's reference load), the ``history`` block (its normal
    runs and verified faults, a target's baseline) and the ``significance`` block (None for a
    detector that does not read it)."""

    system: str
    index: ValidIndex
    frames: FrameStore
    hist: HistoryParams
    significance: Significance | None

    def significance_block(self) -> Significance:
        """The ``significance`` block, for a detector that reads it; a history made without it
        cannot serve such a detector (a mistake of the caller's, said at once)."""
        if self.significance is None:
            raise ValueError(f"{self.system}: this detector reads the significance block; the system's history "
                             "was made without it")
        return self.significance

    @classmethod
    def of(cls, system: str, index: ValidIndex, hist: HistoryParams, significance: Significance | None
           ) -> "SystemHistory":
        """The system's history with a frame store of its own (each run read once)."""
        return cls(system, index, FrameStore.of_system(system), hist, significance)


# a detector's calibration (stored per system) and its result of one run (stored per run)
CalibrationT = TypeVar("CalibrationT")
ResultT_co = TypeVar("ResultT_co", covariant=True)


class Detector(Protocol[CalibrationT, ResultT_co]):
    """A detector of regressed runs that compares a run with others (the association rules, the
    control charts, the cluster models).  ``calibrate`` learns from a system's history and stores
    it: its normal runs judged against the others (the null) and across labs, and its record (each
    verified fault and normal run judged as a target is); ``stored`` reads that calibration back (a
    nightly DAG batch, in a process of its own), and calibrates when none is stored (the calibration
    task did not run): never a missing or empty calibration in its place; ``kept`` is a target's result stored under the same
    inputs (the run, its baseline, the lab's verified runs, the calibration, the params and the
    code), if any; ``judge`` judges one target against its baseline under the calibration and
    stores the result under those inputs (:mod:`~pipelines.detection.judging` asks ``kept``
    first).  The verdict reads the stored
    result into a :class:`DetectorResult` (:mod:`pipelines.detection.stage_results`);
    :mod:`pipelines.detection.judging` runs a detector over a night's targets."""

    @property
    def name(self) -> str: ...

    def calibrate(self, history: SystemHistory, /) -> CalibrationT: ...

    def stored(self, history: SystemHistory, /) -> CalibrationT: ...

    def kept(self, run_id: str, history: SystemHistory, calibration: CalibrationT, /) -> ResultT_co | None: ...

    def judge(self, run_id: str, history: SystemHistory, calibration: CalibrationT, /) -> ResultT_co: ...


@runtime_checkable
class HeldOut(Protocol):
    """A detector that can judge a verified run of the history as if it were new: by a calibration
    without it, storing nothing (``held_out``, its result document of the run).  The evaluation's
    leave-one-out headline weighs a registered detector the night computes through it
    (:func:`~pipelines.evaluation.leave_one_out.loo_registered`)."""

    def held_out(self, run_id: str, history: SystemHistory, /) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class RunJudged:
    """The run a verdict is about: its identity, baseline, the rules' details (effects, lab), how its
    baseline relates to its lab (:func:`~pipelines.detection.stage_results.lab_status`) and the cause prediction, if any."""

    run_id: str
    system: str
    baseline_runs: list[WeightedRun]
    details: dict[str, Any]
    lab: LabSummary
    cause_prediction: CausePrediction | None = None


@dataclass(frozen=True)
class RunFiles:
    """What a detector's result is read from for one run (:class:`ResultReader`): the stages'
    documents of the run (``docs``: stage -> its document, None when it wrote none; ``detect``,
    ``control_charts``, ``clusters``, ``predict_causes``; and a detector registered with a result
    file of its own, ``registry.DetectorSpec.file``, that file's document under the
    detector's name), how the run's baseline relates to its lab
    (``lab``), and the two settings a p-value read at report time needs: the rate a run fails at
    and the resolution of the cause classifier's probabilities."""

    run_id: str
    docs: Mapping[str, Any]
    lab: LabSummary
    false_alarm_rate: float
    resolution: float


# reads one detector's result of a run from its stored file (None: the detector said nothing of it)
ResultReader = Callable[[RunFiles], "DetectorResult | None"]
