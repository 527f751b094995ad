"""The association rules on a system's history (the ``detect`` stage's library, Foo et al. 2015,
seed 003): the models of a target's baseline read and cached (:class:`DetectCache`), the rules
pruned once per history and the masks kept between nights, a target analysed (:func:`analyse`:
environment abstention, the ensembles of :mod:`pipelines.detectors.rules.ensemble`, the practical
filter and verdict of :mod:`pipelines.detectors.rules.verdict`) and the per-system calibration
(:func:`calibrate_system`: every normal run judged against the others, and across labs).
"""
from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypedDict, cast

import numpy as np
import pandas as pd
import scipy.stats  # noqa: F401 -- labs' and pvalues' tests, imported once before the analyses fork, not in each process

from pipelines import config, parallel
from pipelines.detectors.rules import mining as rule_mining
from pipelines.detectors.rules.ensemble import Encoded, Model, RulesResult, detect_run, fill_unstable, prune_models
from pipelines.detectors.rules.verdict import (change_magnitude, normal_pvalues, practical_filter, split_counters,
                                              stacking_evidence, stacking_score, verdict_document)
from pipelines.preparation import bins
from pipelines.progress import Progress
from pipelines.stats import effects
from pipelines.storage import atomic, memo, store
from pipelines.storage.run_records import Environment, ValidIndex
from pipelines.storage.stage_files import Calibration, EdgesFile, RuleDetection
from pipelines.systems import history, labs

log = logging.getLogger("regresslab.detect")


# --------------------------------------------------------------------------- I/O shell


class DetectCache:
    """What detect derives from the history, shared by the targets of one process.

    ``frames`` is the shared load-scaled frame cache (``store.FrameStore``); the others
    hold what is computed from those frames: the reference runs encoded under a set of
    bin edges, the prior runs' rule models, the rule masks of pruning (:func:`prune_models`) and the change bands.
    """

    def __init__(self, frames: store.FrameStore):
        self.frames = frames
        self.encoded: dict[tuple[str, str], Encoded] = {}
        self.unstable: dict = {}
        self.bands: dict[tuple, pd.DataFrame] = {}
        self.models: dict[tuple, pd.DataFrame] = {}

    def model(self, run_id: str, edges: bins.Edges, mine_params: rule_mining.MiningParams, directory,
              reference: float | None, tag: str) -> pd.DataFrame:
        """The rule model of a prior run under the edges ``tag`` names, read from its file once
        (the stacking calibration reads every model once per held-out run)."""
        key = (tag, run_id, mine_params, str(directory))
        if key not in self.models:
            self.models[key] = rule_mining.mine_for_run(run_id, edges, mine_params, directory, reference)
        return self.models[key]

    def encoded_run(self, run_id: str, edges: bins.Edges, reference: float | None, tag: str) -> Encoded:
        """A run binned under ``edges`` (``tag`` names the edges and reference load)."""
        if (tag, run_id) not in self.encoded:
            self.encoded[(tag, run_id)] = Encoded.of(bins.apply_edges(self.frames.at(run_id, reference), edges))
        return self.encoded[(tag, run_id)]

    def levels(self, runs: list[str], reference: float | None) -> pd.DataFrame:
        """One row per run: its median of every counter (load-scaled)."""
        return self.frames.levels(runs, reference)

    def peaks(self, runs: list[str], reference: float | None) -> pd.DataFrame:
        """One row per run: its 95th percentile of every counter's ``|x|`` (load-scaled)."""
        return self.frames.peaks(runs, reference)

    def band(self, refs: list[str], reference: float | None, pct: tuple[float, float],
             counters: list[str]) -> pd.DataFrame:
        """Rows low / level / high: the ``pct`` percentiles and the median of each of ``counters``
        over the reference runs pooled (only the counters asked: at 2,000 counters and 40 runs
        the whole pool is 80 M values, and only the flagged counters need a band)."""
        key = (reference, tuple(refs), tuple(pct), tuple(counters))
        if key not in self.bands:
            pooled = pd.concat([self.frames.columns_at(r, reference, counters) for r in refs], ignore_index=True)
            q = pooled.quantile([pct[0] / 100.0, 0.5, pct[1] / 100.0])
            self.bands[key] = q.set_axis(["low", "level", "high"], axis=0)
        return self.bands[key]


def single_model(baseline: list[str], edges: bins.Edges, params: rule_mining.MiningParams, single_dir,
                 frames: store.FrameStore, reference: float | None) -> pd.DataFrame:
    """The pooled model of all baseline runs (cached by the baseline's content keys)."""
    import hashlib

    keys = [store.read_info(r)["key"] for r in baseline]
    digest = hashlib.sha256(json.dumps([keys, bins.edges_digest(edges), dict(params.block), reference,
                                        rule_mining.CODE_VERSION],
                                       sort_keys=True).encode()).hexdigest()
    path = single_dir / f"{digest[:16]}.parquet"
    if path.exists():
        return rule_mining.rules_from_frame(pd.read_parquet(path))
    binned = bins.apply_edges(pd.concat([frames.at(r, reference) for r in baseline], ignore_index=True), edges)
    rules = rule_mining.mine_model(binned, edges, params)      # the pooled values freed before the mining
    atomic.write_parquet_atomic(path, rule_mining.rules_to_frame(rules))
    return rules


class RuleKw(TypedDict):
    """How a rule is judged broken: the keywords :func:`prune_models` and :func:`detect_run` take."""

    delta_threshold: float
    min_premise_intervals: int


@dataclass(frozen=True)
class DetectParams:
    """The ``detect`` block, typed: a rule's change (``delta_threshold``) over at least
    ``min_premise_intervals`` of its premise, stacking's ``stacking_threshold``, pruning rules the
    known-good runs break (``prune_unstable_rules``), abstaining on the counters that follow the
    environment for a target in a new one (``new_environment_abstain``), and the practical-change
    filter (``min_rel_change`` outside the reference runs' ``change_band_pct`` percentiles; none when
    0 or None); ``block`` is the block as validated (the input keys hash it)."""

    delta_threshold: float
    min_premise_intervals: int
    stacking_threshold: float
    prune_unstable_rules: bool
    new_environment_abstain: bool
    min_rel_change: float | None
    change_band_pct: tuple[float, float]
    block: Mapping[str, Any] = field(compare=False, repr=False)

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> "DetectParams":
        change = block["min_rel_change"]
        return cls(delta_threshold=float(block["delta_threshold"]), min_premise_intervals=int(block["min_premise_intervals"]),
                   stacking_threshold=float(block["stacking_threshold"]),
                   prune_unstable_rules=bool(block["prune_unstable_rules"]),
                   new_environment_abstain=bool(block["new_environment_abstain"]),
                   min_rel_change=None if change is None else float(change),
                   change_band_pct=tuple(block["change_band_pct"]), block=dict(block))

    @classmethod
    def load(cls) -> "DetectParams":
        """The project's ``detect`` block (``config.load_params``), typed: the stages' one loading site."""
        return cls.of(config.load_params("detect"))

    def rule_kw(self) -> RuleKw:
        """How a rule is judged broken (:func:`prune_models`, :func:`detect_run`)."""
        return {"delta_threshold": self.delta_threshold, "min_premise_intervals": self.min_premise_intervals}


@dataclass(frozen=True)
class DetectContext:
    """What the ensembles need of a system besides the target and its baseline: the valid runs'
    index, the bin edges and the reference load they were learned at, the ``detect`` and
    ``mine_rules`` params, where the per-run and pooled models are cached, the labs' params
    (``labs.lab_params``) and the cache shared by the targets of one process."""
    index: ValidIndex
    edges: bins.Edges
    reference: float | None
    params: DetectParams
    mine_params: rule_mining.MiningParams
    models_dir: Path
    single_dir: Path
    cache: DetectCache
    lab_kw: labs.LabParams
    significance: effects.Significance

    @cached_property
    def tag(self) -> str:
        """Names the edges and reference load the cache's encodings and models were made under
        (computed once per context: a digest of every counter's edges, asked for per model and reference)."""
        return f"{bins.edges_digest(self.edges)}@{self.reference}"

    def environment(self, run_id: str) -> Environment:
        return self.index[run_id].get("environment") or {}

    def encoded(self, run_id: str) -> Encoded:
        """A run binned under the context's edges, at its reference load (kept in the cache)."""
        return self.cache.encoded_run(run_id, self.edges, self.reference, self.tag)

    @classmethod
    def of_system(cls, system: str, index: ValidIndex, spec: EdgesFile, cache: DetectCache,
                  params: DetectParams, mine_params: rule_mining.MiningParams, hist: history.HistoryParams,
                  significance: effects.Significance) -> "DetectContext":
        """A night's context for ``system``: its bin edges ``spec`` (``store.read_edges``), its
        model folders, the labs' params of ``hist`` (the ``history`` block) and the
        ``significance`` block."""
        return cls(index=index, edges=spec["counters"], reference=spec["reference_load"], params=params,
                   mine_params=mine_params, models_dir=config.models_dir(system),
                   single_dir=config.single_models_dir(system), cache=cache, lab_kw=labs.lab_params(hist),
                   significance=significance)


def prior_models(baseline: list[str], ctx: DetectContext) -> tuple[list[Model], set[str]]:
    """The model of each baseline run, judging the counters its run recorded (and the edges
    know); and every counter the baseline runs recorded."""
    models, recorded_any = [], set()
    for b in baseline:
        recorded = set(store.read_info(b)["counters"])
        recorded_any |= recorded
        models.append(Model(b, ctx.cache.model(b, ctx.edges, ctx.mine_params, ctx.models_dir, ctx.reference, ctx.tag),
                            ctx.environment(b), frozenset(recorded & set(ctx.edges))))
    return models, recorded_any


def without_counters(models: list[Model], counters) -> list[Model]:
    """The models abstaining on ``counters``."""
    out = []
    for m in models:
        assert m.judges is not None, "a prior run's model judges the counters its run recorded"
        out.append(Model(m.run_id, m.rules, m.environment, m.judges - frozenset(counters)))
    return out


def environment_abstention(baseline: list[str], target_env: Environment, lab: labs.LabShift,
                           ctx: DetectContext, environment_from: list[str] | None) -> dict[str, float]:
    """The counters every model abstains on for a target in an environment no baseline run
    shares and whose lab's level is unknown: those whose level differs between the labs of
    ``environment_from`` (default: the baseline), ``labs.environment_dependent``."""
    envs = [ctx.environment(b) for b in baseline]
    if not (ctx.params.new_environment_abstain and baseline and target_env not in envs
            and lab["status"] != "adjusted"):
        return {}
    teachers = list(environment_from or baseline)
    return labs.environment_dependent(ctx.cache.levels(teachers, ctx.reference),
                                      [labs.lab_key(ctx.index[b].get("environment")) for b in teachers],
                                      alpha=ctx.lab_kw.environment_alpha,
                                      min_rel_change=ctx.params.min_rel_change or 0.0)


def run_effects(frame: pd.DataFrame, refs: list[str], ctx: DetectContext,
                counters: list[str] | None = None) -> dict[str, float]:
    """Each counter's relative change against the reference runs (``effects.effect_sizes``); of
    ``counters`` only, when given (each counter's change is its own: the others' are not needed)."""
    if not refs:
        return {}
    sig = ctx.significance
    if counters is not None:
        frame = frame[[c for c in counters if c in frame.columns]]
    return effects.effect_sizes(frame, ctx.cache.levels(refs, ctx.reference).median(),
                                ctx.cache.peaks(refs, ctx.reference).median(),
                                window_share=sig.window_share, min_window=sig.min_window,
                                floor_share=sig.floor_share)


def flagged_union(result: RulesResult) -> list[str]:
    """The counters any of the three combiners flagged, each once, in the combiners' order."""
    return list(dict.fromkeys(c for k in ("single", "bagging", "stacking") for c in result[k]))


def practical_changes(result: RulesResult, frame: pd.DataFrame, refs: list[str],
                      ctx: DetectContext) -> None:
    """The practical-change filters on ``result`` (in place): a flagged counter stays flagged when
    its change matters (``effects``: at least ``significance.min_effect_pct`` of its level; the
    others in ``small_effects``, with their change in %) and it sits far enough outside the band of
    the reference runs (:func:`change_magnitude` at least ``min_rel_change``; the others in
    ``small_changes``)."""
    _, result["small_effects"] = effects.split_by_effect(flagged_union(result), result["effects"],
                                                         ctx.significance.min_effect_pct)
    small = result["small_effects"]
    result["single"], result["bagging"], result["stacking"] = (
        [c for c in result[k] if c not in small] for k in ("single", "bagging", "stacking"))
    result["small_changes"] = {}
    if not (ctx.params.min_rel_change and refs):
        return
    flagged = set(flagged_union(result))
    q = ctx.cache.band(refs, ctx.reference, ctx.params.change_band_pct, sorted(flagged & set(frame.columns)))
    magnitude = {c: change_magnitude(frame[c].to_numpy(dtype=float), result["intervals"].get(c),
                                     float(q.at["low", c]), float(q.at["level", c]), float(q.at["high", c]))
                 for c in flagged if c in frame.columns and c in q.columns}
    kept, result["small_changes"] = practical_filter({k: result[k] for k in ("single", "bagging", "stacking")},
                                                     magnitude, ctx.params.min_rel_change)
    result["single"], result["bagging"], result["stacking"] = kept["single"], kept["bagging"], kept["stacking"]


def analyse(run_id: str, baseline: list[str], ctx: DetectContext, *, lab_runs: dict[str, str],
            with_single: bool = True, environment_from: list[str] | None = None) -> tuple[RulesResult, RuleDetection]:
    """Detect on one run against a baseline; return (detect_run result, verdict document).

    Steps: the prior runs' models; when no run of the target's nearest lab shares its lab, the
    target moved by its lab's level (:func:`labs.lab_shift`, from ``lab_runs``: verified run ->
    verdict), or else abstention on environment-dependent counters
    (:func:`environment_abstention`); pruning of rules that the target environment's passed
    runs break; the three combiners; the practical-change filter.  ``with_single=False`` computes only
    what stacking's score needs, as the calibration does: no pooled model, and the effects of the
    flagged counters alone (the practical-change filter reads no other).  ``environment_from``
    (default: the baseline) are the runs whose labs teach which counters follow the
    environment: the cross-lab null (:func:`labs.cross_lab_null`) judges a normal run by the
    other labs only, on the counters a new-lab target is judged on (learned from the whole
    history, its own lab included)."""
    params, cache = ctx.params, ctx.cache
    target_env = ctx.environment(run_id)
    refs = history.most_similar({b: ctx.environment(b) for b in baseline}, target_env)  # the nearest lab's runs
    lab = labs.lab_shift(run_id, refs, {r: ctx.environment(r) for r in [run_id, *refs, *lab_runs]},
                         lab_runs, lambda runs: cache.levels(runs, ctx.reference), **ctx.lab_kw.shift_kw())
    frame = labs.shifted(cache.frames.at(run_id, ctx.reference), lab["shift"])
    models, model_counters = prior_models(baseline, ctx)
    env_dependent = environment_abstention(baseline, target_env, lab, ctx, environment_from)
    models = without_counters(models, [*env_dependent, *lab["unstable"]])
    dropped: dict[str, int] = {}
    if params.prune_unstable_rules and models:
        models, dropped = prune_models(models, refs, ctx.encoded, **params.rule_kw(), memo=cache.unstable,
                                       memo_tag=ctx.tag)
    single = (single_model(baseline, ctx.edges, ctx.mine_params, ctx.single_dir, cache.frames, ctx.reference)
              if baseline and with_single else None)
    result = detect_run(bins.apply_edges(frame, ctx.edges), target_env, models, single,
                        **params.rule_kw(), stacking_threshold=params.stacking_threshold)
    result["pruned_rules"] = dropped
    result["single"] = [c for c in result["single"] if c not in env_dependent and c not in set(lab["unstable"])]
    result["environment_dependent"] = env_dependent
    result["effects"] = run_effects(frame, refs, ctx, None if with_single else flagged_union(result))
    practical_changes(result, frame, refs, ctx)
    not_analysed = split_counters(frame, ctx.edges, model_counters)
    if env_dependent:
        not_analysed["environment_dependent_in_new_environment"] = sorted(env_dependent)
    if lab["unstable"]:
        not_analysed["wander_between_runs_of_this_lab"] = list(lab["unstable"])
    doc = verdict_document(run_id, ctx.index[run_id], result, interval_s=store.read_info(run_id)["interval_s"],
                           not_analysed=not_analysed)
    doc["details"]["lab"] = labs.summary(lab)
    return result, doc


def passed_runs_key(system: str, ctx: DetectContext, passed: list[str]) -> str:
    """The input key of what detect keeps of a system's ``passed`` runs between nights (``memo``),
    the pruning masks between them and their levels: the runs (their frames' keys: their models,
    encodings and levels), the edges and reference load (``ctx.tag``), the params of detection and
    mining, and the code."""
    return memo.input_key("detect", ctx.index, {"passed": passed}, system=system, tag=ctx.tag, detect=ctx.params.block,
                          mine_rules=ctx.mine_params.block)


def save_pruning(system: str, ctx: DetectContext, passed: list[str]) -> int:
    """Write the masks ``ctx.cache.unstable`` holds between ``passed`` (under :func:`passed_runs_key`),
    atomically, for the next night's targets, whose references and models are these runs; how many."""
    inside = set(passed)
    pairs = sorted((m, r) for (tag, m, r) in ctx.cache.unstable if tag == ctx.tag and m in inside and r in inside)
    masks = [np.asarray(ctx.cache.unstable[(ctx.tag, m, r)], dtype=bool) for m, r in pairs]
    atomic.write_keyed_npz(config.pruning_masks_path(system), passed_runs_key(system, ctx, passed),
                           pairs=np.array(pairs, dtype=str).reshape(-1, 2),
                           offsets=np.cumsum([0, *(len(x) for x in masks)]),
                           masks=np.concatenate(masks) if masks else np.zeros(0, dtype=bool))
    return len(pairs)


def load_pruning(system: str, ctx: DetectContext, passed: list[str]) -> int:
    """The masks :func:`save_pruning` wrote, into ``ctx.cache.unstable``, when written under the
    key of these runs, edges, params and code; how many (0: none, or another key's).  Read with
    ``allow_pickle=False``; a torn or foreign file is ignored (the masks are computed again)."""
    kept = atomic.read_keyed_npz(config.pruning_masks_path(system), passed_runs_key(system, ctx, passed),
                                 ("pairs", "offsets", "masks"))
    if kept is None:
        return 0
    pairs, offsets, masks = kept["pairs"], kept["offsets"], kept["masks"]
    for i, (m, r) in enumerate(pairs):
        ctx.cache.unstable.setdefault((ctx.tag, str(m), str(r)), masks[offsets[i]:offsets[i + 1]].copy())
    return len(pairs)


def save_summaries(system: str, ctx: DetectContext, passed: list[str]) -> int:
    """Write the medians and peaks the frame store holds of ``passed`` (``FrameStore.save_summaries``,
    under :func:`passed_runs_key`), for the next night's targets, whose reference runs these are:
    a new target's effects would otherwise read every reference run again; how many series."""
    return ctx.cache.frames.save_summaries(config.run_summaries_path(system), passed,
                                           passed_runs_key(system, ctx, passed))


def load_summaries(system: str, ctx: DetectContext, passed: list[str]) -> int:
    """The series :func:`save_summaries` wrote, into the frame store, when written under the key of
    these runs, edges, params and code; how many (0: none, or another key's)."""
    return ctx.cache.frames.load_summaries(config.run_summaries_path(system), passed_runs_key(system, ctx, passed))


def load_kept(system: str, ctx: DetectContext, passed: list[str]) -> tuple[int, int]:
    """What a night before kept of ``passed`` for this night's targets: the pruning masks
    (:func:`load_pruning`) and the runs' levels (:func:`load_summaries`); how many of each."""
    return load_pruning(system, ctx, passed), load_summaries(system, ctx, passed)


def calibrate_system(system: str, ctx: DetectContext, hist: history.HistoryParams) -> Calibration:
    """The stacking scores of the history's normal runs, each against the models of the others
    (the null of :func:`stacking_pvalue`); written to ``config.stacking_calibration_path``.
    With passed runs in several labs, also ``cross_lab_scores``: each normal run judged by the
    other labs' models only (:func:`labs.cross_lab_null`), the null of a target whose baseline
    does not share its lab (:func:`labs.matched_null`).  ``fault_pvalues``: each verified fault run
    whose baseline shares its lab, judged as a target is, and its p-value against that null (what
    ``decision.fault_weights`` learns each detector's share of the rate from); ``normal_pvalues``:
    each normal run's p-value against the others' scores (its record's false alarms, ``record``).

    The bin edges are the system's (learned with every passed run, the judged one included:
    a normal run looks slightly more normal than a new one would, so the null is a little
    low and the p-values a little strict, never lenient)."""
    index, params, mine_params = ctx.index, ctx.params, ctx.mine_params
    passed = hist.passed(index, system)
    verdicts = hist.verdicts(index, system)
    path = config.stacking_calibration_path(system)
    key = memo.input_key("detect", index, {"passed": passed, "verified": list(verdicts)}, system=system,
                         edges=memo.file_digest(config.edges_path(system)), detect=params.block, mine_rules=mine_params.block,
                         history=hist.block, significance=dataclasses.asdict(ctx.significance))
    kept_masks, kept_levels = load_kept(system, ctx, passed)     # kept by the night before, for this night's targets
    done = memo.reuse(path, key)
    if done is not None:        # the same normal runs, bins, params and code: the same scores
        log.info("detect calibration %s: %d normal runs unchanged, reused (%d pruning masks, %d run levels)",
                 system, len(passed), kept_masks, kept_levels)
        return cast(Calibration, done)
    lab_of = {r: labs.lab_key(index[r].get("environment")) for r in {*passed, *verdicts}}
    faults = history.fault_runs(verdicts)
    progress = Progress(log, f"detect calibration {system}",
                        len(passed) + 2 * len(labs.judged_across(passed, lab_of)) + len(faults), what="analyses")

    def judge(run_id: str, baseline: list[str], lab_runs: dict[str, str], across: bool = True) -> tuple[str, float]:
        result, doc = analyse(run_id, baseline, ctx, lab_runs=lab_runs, with_single=False,
                              environment_from=[r for r in passed if r != run_id] if across else None)
        return doc["details"]["lab"]["status"], round(stacking_score(result), 6)

    for r in passed:            # loaded here once, before the processes fork: they share them, not load them again
        ctx.cache.model(r, ctx.edges, ctx.mine_params, ctx.models_dir, ctx.reference, ctx.tag)
        ctx.encoded(r)
    ctx.cache.levels(passed, ctx.reference)             # every run is some analysis' reference: its levels too
    ctx.cache.peaks(passed, ctx.reference)
    save_summaries(system, ctx, passed)
    # every pruning mask between the passed runs, each once, before the analyses fork (each process
    # would otherwise evaluate the pairs its analyses meet, the same pair in several processes); kept
    # for the next night's targets, whose models and references are these runs
    if params.prune_unstable_rules:
        masks = Progress(log, f"detect pruning {system}", len(passed), what="reference runs")
        fill_unstable(prior_models(passed, ctx)[0], passed, ctx.encoded, ctx.cache.unstable, memo_tag=ctx.tag,
                      **params.rule_kw(),
                      progress=masks.each())
        save_pruning(system, ctx, passed)

    def mapper(fn, jobs: list) -> list:       # every analysis on the stage's processes, counted here
        return parallel.map_ordered(fn, jobs, progress=progress.each())
    same = mapper(lambda r: judge(r, [b for b in passed if b != r], verdicts, across=False)[1], passed)
    scores = dict(zip(passed, same))
    cross = labs.cross_lab_null(passed, lab_of, verdicts, judge, mapper=mapper)

    def judge_fault(run_id: str) -> float | None:
        """A verified fault run judged as a target of its lab is: its stacking p-value (None outside its lab)."""
        baseline = hist.baseline(run_id, index)
        if not baseline:
            return None
        result, doc = analyse(run_id, baseline, ctx, lab_runs=verdicts, with_single=False)
        if doc["details"]["lab"]["status"] != "same_lab":
            return None
        return stacking_evidence(result, list(scores.values()))["p_value"]
    fault_p = dict(zip(faults, mapper(judge_fault, faults)))
    calibration: Calibration = {"system": system, "runs": passed, "normal_scores": scores, "cross_lab_scores": cross,
                                "fault_pvalues": {r: p for r, p in fault_p.items() if p is not None},
                                "normal_pvalues": normal_pvalues(scores)}
    return memo.write(path, calibration, key)
