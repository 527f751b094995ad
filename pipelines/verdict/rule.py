"""How the detectors' results become one verdict: the ``report`` block of params.yaml, typed
once (:class:`HeadlineRule`).  The rules themselves: docs/methods/calibration.md."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Mapping

from pipelines import params_schema
from pipelines.stats import effects


VERDICT_RULES = params_schema.VERDICT_RULES     # or a detector's name: its own verdict decides
DETECTOR_WEIGHTS = ("equal", "faults")
DETECTOR_TRUST = ("record", "none")


# report's keys in params.yaml -> the rule's fields, with the type each is read as
PARAM_FIELDS: dict[str, tuple[str, Any]] = {
    "verdict_rule": ("verdict_rule", str), "flag_rule": ("flag_rule", str),
    "false_alarm_rate": ("false_alarm_rate", float),
    "headline_detectors": ("detectors", lambda v: None if v is None else tuple(v)),
    "classifier_resolution": ("classifier_resolution", float), "combination": ("combination", str),
    "detector_weights": ("detector_weights", str), "detector_trust": ("trust", str),
    "trust_level": ("trust_level", float), "trust_min_runs": ("trust_min_runs", int),
    "trust_reading": ("trust_reading", str),
    "trust_corroborate": ("trust_corroborate", bool),
    "trust_silent": ("trust_silent", str)}


@functools.lru_cache(maxsize=1)
def _defaults() -> dict[str, Any]:
    return params_schema.defaults()


def _default_of(name: str) -> Any:
    """The defaults file's value of the rule's field ``name``, read as :data:`PARAM_FIELDS` reads
    params.yaml (the practical floor: ``significance.min_effect_pct``)."""
    if name == "min_effect_pct":
        return float(_defaults()["significance"]["min_effect_pct"])
    key, read = next((key, read) for key, (field_name, read) in PARAM_FIELDS.items() if field_name == name)
    return read(_defaults()["report"][key])


def _param(name: str) -> Any:
    """A field of the rule whose default is the defaults file's (the one place it is written)."""
    return field(default_factory=functools.partial(_default_of, name))


@dataclass(frozen=True)
class HeadlineRule:
    """How the detectors' results become one verdict: the ``report`` block of ``params.yaml``,
    checked once; a setting left out is the defaults file's (``pipelines/params_defaults.yaml``:
    ``HeadlineRule()`` is the rule of a project that changed nothing).

    ``verdict_rule``: ``calibrated`` (the detectors' p-values combined by ``combination``, a run
    failing at ``false_alarm_rate``), ``all``, ``any``, or a detector's name (its own verdict decides).
    ``flag_rule`` names the flagged counters of a failed run: ``rules`` (stacking's when it
    failed the run, else the charts') or ``union``.  ``detectors`` names the p-values the
    calibrated decision combines (every one when None); ``classifier_resolution`` is the smallest
    difference of the cause classifier's probabilities that counts.  ``min_effect_pct``: a counter
    counts as regressed only when its change is at least this % of its level (``effects``); a run
    fails only with such a counter.  ``detector_weights``: ``equal`` shares of the rate, or
    ``faults``: shares learned from the history's verified faults (:func:`fault_weights`)."""
    verdict_rule: str = _param("verdict_rule")
    flag_rule: str = _param("flag_rule")
    false_alarm_rate: float = _param("false_alarm_rate")
    detectors: tuple[str, ...] | None = _param("detectors")
    classifier_resolution: float = _param("classifier_resolution")
    combination: str = _param("combination")
    min_effect_pct: float = _param("min_effect_pct")
    detector_weights: str = _param("detector_weights")
    trust: str = _param("trust")
    trust_level: float = _param("trust_level")
    trust_min_runs: int = _param("trust_min_runs")
    trust_reading: str = _param("trust_reading")
    trust_corroborate: bool = _param("trust_corroborate")
    trust_silent: str = _param("trust_silent")

    def __post_init__(self) -> None:
        if self.flag_rule not in ("union", "rules"):
            raise ValueError(f"report.flag_rule must be union or rules, not {self.flag_rule!r}")
        if not isinstance(self.verdict_rule, str) or not self.verdict_rule:
            raise ValueError(f"report.verdict_rule must be one of {', '.join(VERDICT_RULES)} or a detector's name, "
                             f"not {self.verdict_rule!r}")
        if self.detector_weights not in DETECTOR_WEIGHTS:
            raise ValueError(f"report.detector_weights must be one of {', '.join(DETECTOR_WEIGHTS)}, "
                             f"not {self.detector_weights!r}")
        if self.trust not in DETECTOR_TRUST:
            raise ValueError(f"report.detector_trust must be one of {', '.join(DETECTOR_TRUST)}, not {self.trust!r}")
        if self.detectors is not None:
            object.__setattr__(self, "detectors", tuple(self.detectors))

    @classmethod
    def from_params(cls, params: Mapping[str, Any], significance: effects.Significance | None = None) -> "HeadlineRule":
        """The rule of ``params.yaml: report``, and ``significance.min_effect_pct``; a key left
        out is the defaults file's."""
        kw: dict[str, Any] = {field_name: read(params[key]) for key, (field_name, read) in PARAM_FIELDS.items()
                              if key in params}
        if significance is not None:
            kw["min_effect_pct"] = significance.min_effect_pct
        return cls(**kw)
