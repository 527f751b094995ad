"""A system's objectives as its team declares them, in Keptn's v1 files: ``objectives/<system>/slo.yaml``
(Keptn's SLO spec, ``spec_version: '1.0'``) and ``objectives/<system>/sli.yaml`` (Keptn's
``indicators:`` map, each indicator a query ``<aggregate>(<counter>)``).

A file written for Keptn is read unchanged: ``filter`` is accepted and ignored, absent keys take the
defaults Keptn's lighthouse service gives them (no ``comparison``: one earlier result, of any score,
averaged; ``number_of_comparison_results``: 3; ``include_result_with_score``: all; ``weight``: 1).
Everything is checked before a night uses it, and a problem is a :class:`ObjectivesError` naming
the file, the key path and what would be right (docs/methods/objectives.md).

Sources: Keptn's SLO specification (keptn/spec, ``service_level_objective.md``) and its lighthouse
service (``evaluate_sli_handler.go``, ``common.go``).
"""
from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

import yaml

AGGREGATES = ("mean", "median", "p90", "p95", "p99", "max", "min")
AGGREGATE_ALIASES = {"avg": "mean", "average": "mean", "p50": "median", "maximum": "max", "minimum": "min"}
COMPARISON_AGGREGATES = ("avg", "p50", "p90", "p95")       # Keptn's aggregate_function of earlier results
COMPARE_WITH = ("single_result", "several_results")
INCLUDE = ("pass", "pass_or_warn", "all")
MAX_FILE_BYTES = 1 << 20
CRITERION_RE = re.compile(r"(<=|>=|<|>|=)([+-]?)(\d+(?:\.\d*)?|\.\d+)(%?)\Z")
QUERY_RE = re.compile(r"\s*([a-z0-9]+)\(\s*([^()\s]+)\s*\)\s*\Z")
COUNTER_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*\.[A-Za-z0-9_%/.-]+\Z")

SLO_KEYS = ("spec_version", "filter", "comparison", "objectives", "total_score")
COMPARISON_KEYS = ("compare_with", "include_result_with_score", "number_of_comparison_results",
                   "aggregate_function")
OBJECTIVE_KEYS = ("sli", "displayName", "pass", "warning", "weight", "key_sli")


Operator = Literal["<", "<=", "=", ">=", ">"]
OPERATORS: dict[str, Operator] = {"<": "<", "<=": "<=", "=": "=", ">=": ">=", ">": ">"}


class ObjectivesError(ValueError):
    """An objectives file that cannot be used: the file, the key path, what is wrong and what would do."""


@dataclass(frozen=True)
class Criterion:
    """One criterion as Keptn writes it: ``<600`` (absolute), ``<=+10%`` or ``>=-5`` (relative to the
    aggregate of earlier results: a percentage, or an amount, up with ``+``, down with ``-``; a ``%``
    alone is relative and up, as in Keptn)."""

    text: str
    operator: Operator
    value: float
    relative: bool
    percent: bool
    increase: bool

    @classmethod
    def parse(cls, text: Any) -> Criterion:
        """The criterion ``text`` means (whitespace ignored, as Keptn does); ValueError when none."""
        if not isinstance(text, (str, int, float)) or isinstance(text, bool):
            raise ValueError(f"{text!r} is not a criterion (a string such as \"<600\" or \"<=+10%\")")
        squeezed = re.sub(r"\s+", "", str(text))
        match = CRITERION_RE.match(squeezed)
        if match is None:
            raise ValueError(f"{text!r} is not a criterion: an operator (<, <=, =, >=, >) then a number, with a "
                             "sign and % for one relative to earlier results (\"<600\", \"<=+10%\", \">=-5%\")")
        operator, sign, number, percent = match.groups()
        return cls(squeezed, OPERATORS[operator], float(number), relative=bool(sign or percent),
                   percent=bool(percent), increase=sign != "-")

    def target(self, compared: float) -> float:
        """The bound this criterion sets against the aggregate of earlier results (``compared``);
        an absolute criterion's own value."""
        if not self.relative:
            return self.value
        if self.percent:
            return compared * (100.0 + self.value) / 100.0 if self.increase else compared * (100.0 - self.value) / 100.0
        return compared + self.value if self.increase else compared - self.value

    def holds(self, value: float, bound: float) -> bool:
        return {"<": value < bound, "<=": value <= bound, "=": value == bound, ">=": value >= bound,
                ">": value > bound}[self.operator]


@dataclass(frozen=True)
class Objective:
    """One objective of ``slo.yaml``: its indicator, the name shown, the ``pass`` and ``warning``
    criteria (each a tuple of lists: a list holds when all its criteria hold, the criteria hold
    when one list does), its weight and whether it is a key indicator."""

    sli: str
    display_name: str
    passes: tuple[tuple[Criterion, ...], ...]
    warnings: tuple[tuple[Criterion, ...], ...]
    weight: int
    key_sli: bool


@dataclass(frozen=True)
class Comparison:
    """Which earlier results relative criteria compare with (Keptn's ``comparison``)."""

    compare_with: str = "single_result"
    number_of_comparison_results: int = 1
    include_result_with_score: str = "all"
    aggregate_function: str = "avg"

    @property
    def results(self) -> int:
        """How many earlier results: one with ``single_result`` (whatever the number says), else the number."""
        return 1 if self.compare_with == "single_result" else self.number_of_comparison_results


@dataclass(frozen=True)
class Indicator:
    """An ``sli.yaml`` indicator: ``p95(app.response_time_ms)`` is the 95th percentile of the run's raw
    samples of that counter inside its load phase."""

    name: str
    aggregate: str
    counter: str


@dataclass(frozen=True)
class Gate:
    """A system's objectives and indicators, as read from its two files (``digest``: of both files'
    bytes, what an evaluation was made from)."""

    system: str
    objectives: tuple[Objective, ...]
    comparison: Comparison
    total_pass: float
    total_warning: float | None
    indicators: dict[str, Indicator]
    digest: str

    def counters(self) -> list[str]:
        """The counters the objectives need, in the objectives' order."""
        return list(dict.fromkeys(self.indicators[o.sli].counter for o in self.objectives))


def _problem(path: Path, key: str, what: str) -> ObjectivesError:
    return ObjectivesError(f"{path}: {key}: {what}" if key else f"{path}: {what}")


def _nearest(word: str, allowed: tuple[str, ...]) -> str:
    near = difflib.get_close_matches(str(word), allowed, n=1)
    return f" (did you mean {near[0]!r}?)" if near else f" (one of {', '.join(allowed)})"


def read_yaml(path: Path) -> Any:
    """A YAML file of at most :data:`MAX_FILE_BYTES`, safely (no tags, no aliases: an alias can
    stand for unbounded data)."""
    data = path.read_bytes()
    if len(data) > MAX_FILE_BYTES:
        raise _problem(path, "", f"{len(data):,} bytes: more than {MAX_FILE_BYTES:,}")
    text = data.decode("utf-8", errors="replace")
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise _problem(path, "", f"uses a YAML alias (*{event.anchor}): write the value out")
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _problem(path, "", f"not valid YAML: {str(exc)[:300]}") from None


def _mapping(path: Path, key: str, value: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _problem(path, key, f"must be a mapping, not {type(value).__name__}")
    for k in value:
        if k not in allowed:
            raise _problem(path, f"{key}.{k}" if key else str(k), "unknown key" + _nearest(k, allowed))
    return value


def _choice(path: Path, key: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise _problem(path, key, f"{value!r} is not allowed" + _nearest(str(value), allowed))
    return str(value)


def _percentage(path: Path, key: str, value: Any) -> float:
    text = str(value).strip()
    try:
        number = float(text[:-1] if text.endswith("%") else text)
    except ValueError:
        raise _problem(path, key, f"{value!r} is not a percentage (\"90%\")") from None
    if not 0.0 <= number <= 100.0:
        raise _problem(path, key, f"{value!r} lies outside 0-100 %")
    return number


def _criteria(path: Path, key: str, value: Any) -> tuple[tuple[Criterion, ...], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _problem(path, key, "must be a list of {criteria: [...]} entries")
    out = []
    for i, entry in enumerate(value):
        where = f"{key}[{i}]"
        entry = _mapping(path, where, entry, ("criteria",))
        items = entry.get("criteria")
        if not isinstance(items, list) or not items:
            raise _problem(path, f"{where}.criteria", "must be a non-empty list of criteria (\"<600\", \"<=+10%\")")
        parsed = []
        for j, text in enumerate(items):
            try:
                parsed.append(Criterion.parse(text))
            except ValueError as exc:
                raise _problem(path, f"{where}.criteria[{j}]", str(exc)) from None
        out.append(tuple(parsed))
    return tuple(out)


def _objective(path: Path, i: int, raw: Any) -> Objective:
    key = f"objectives[{i}]"
    raw = _mapping(path, key, raw, OBJECTIVE_KEYS)
    sli = raw.get("sli")
    if not isinstance(sli, str) or not sli.strip():
        raise _problem(path, f"{key}.sli", "the indicator's name is missing")
    weight = raw.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
        raise _problem(path, f"{key}.weight", f"{weight!r} is not a whole number >= 0")
    key_sli = raw.get("key_sli", False)
    if not isinstance(key_sli, bool):
        raise _problem(path, f"{key}.key_sli", f"{key_sli!r} is not true or false")
    name = raw.get("displayName") or sli
    return Objective(sli=sli, display_name=str(name), passes=_criteria(path, f"{key}.pass", raw.get("pass")),
                     warnings=_criteria(path, f"{key}.warning", raw.get("warning")), weight=weight or 1,
                     key_sli=key_sli)


def _comparison(path: Path, raw: Any) -> Comparison:
    if raw is None:
        return Comparison()
    raw = _mapping(path, "comparison", raw, COMPARISON_KEYS)
    number = raw.get("number_of_comparison_results") or 3
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise _problem(path, "comparison.number_of_comparison_results", f"{number!r} is not a whole number >= 1")
    return Comparison(
        compare_with=_choice(path, "comparison.compare_with", raw.get("compare_with", "single_result"), COMPARE_WITH),
        number_of_comparison_results=number,
        include_result_with_score=_choice(path, "comparison.include_result_with_score",
                                          raw.get("include_result_with_score") or "all", INCLUDE),
        aggregate_function=_choice(path, "comparison.aggregate_function", raw.get("aggregate_function") or "avg",
                                   COMPARISON_AGGREGATES))


def parse_query(text: Any) -> tuple[str, str]:
    """``p95(app.response_time_ms)`` -> (aggregate, counter); ValueError saying what is allowed."""
    match = QUERY_RE.match(str(text)) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not a query <aggregate>(<counter>), e.g. \"p95(app.response_time_ms)\"")
    aggregate, counter = match.groups()
    if aggregate not in AGGREGATES:
        alias = AGGREGATE_ALIASES.get(aggregate)
        raise ValueError(f"unknown aggregate {aggregate!r}"
                         + (f" (did you mean {alias!r}?)" if alias else _nearest(aggregate, AGGREGATES)))
    if not COUNTER_RE.match(counter):
        raise ValueError(f"{counter!r} is not a counter name <component>.<counter>")
    return aggregate, counter


def read_indicators(path: Path) -> dict[str, Indicator]:
    """``sli.yaml``: Keptn's ``indicators:`` map, each query ``<aggregate>(<counter>)``."""
    doc = _mapping(path, "", read_yaml(path) or {}, ("spec_version", "indicators"))
    indicators = doc.get("indicators")
    if not isinstance(indicators, dict) or not indicators:
        raise _problem(path, "indicators", "must map each indicator's name to a query \"p95(app.response_time_ms)\"")
    out = {}
    for name, query in indicators.items():
        try:
            aggregate, counter = parse_query(query)
        except ValueError as exc:
            raise _problem(path, f"indicators.{name}", str(exc)) from None
        out[str(name)] = Indicator(str(name), aggregate, counter)
    return out


def read_gate(folder: Path, system: str) -> Gate:
    """A system's objectives from ``folder`` (``objectives/<system>/``): both files read and checked
    against each other (each objective's ``sli`` an indicator of ``sli.yaml``)."""
    slo_path, sli_path = folder / "slo.yaml", folder / "sli.yaml"
    for needed in (slo_path, sli_path):
        if not needed.is_file():
            raise _problem(needed, "", "missing: a system's objectives need both slo.yaml and sli.yaml "
                                       "(`regresslab init` writes a template of each in objectives/_template/)")
    doc = _mapping(slo_path, "", read_yaml(slo_path) or {}, SLO_KEYS)
    if str(doc.get("spec_version", "1.0")) not in ("1.0", "1", "0.1.0", "0.1.1"):
        raise _problem(slo_path, "spec_version", f"{doc.get('spec_version')!r}: Keptn's v1 format is '1.0'")
    raw_objectives = doc.get("objectives")
    if not isinstance(raw_objectives, list) or not raw_objectives:
        raise _problem(slo_path, "objectives", "must be a non-empty list of objectives (sli, pass, warning, ...)")
    objectives = tuple(_objective(slo_path, i, o) for i, o in enumerate(raw_objectives))
    total = _mapping(slo_path, "total_score", doc.get("total_score") or {}, ("pass", "warning"))
    if "pass" not in total:
        raise _problem(slo_path, "total_score.pass", "missing: the score in percent at which the evaluation "
                                                     "passes (\"90%\")")
    indicators = read_indicators(sli_path)
    for i, objective in enumerate(objectives):
        if objective.sli not in indicators:
            raise _problem(slo_path, f"objectives[{i}].sli", f"{objective.sli!r} has no indicator in {sli_path.name}"
                           + _nearest(objective.sli, tuple(indicators)))
    digest = hashlib.sha256(slo_path.read_bytes() + b"\0" + sli_path.read_bytes()).hexdigest()
    return Gate(system=system, objectives=objectives, comparison=_comparison(slo_path, doc.get("comparison")),
                total_pass=_percentage(slo_path, "total_score.pass", total["pass"]),
                total_warning=(_percentage(slo_path, "total_score.warning", total["warning"])
                               if total.get("warning") is not None else None),
                indicators={k: v for k, v in indicators.items() if k in {o.sli for o in objectives}}, digest=digest)


def read_gates(root: Path, is_system: Callable[[str], bool]) -> dict[str, Gate]:
    """Every system's objectives under ``root`` (``objectives/``): one folder per system (a folder
    whose name is not a system's grammar, such as ``_template``, is not read)."""
    if not root.is_dir():
        return {}
    return {folder.name: read_gate(folder, folder.name) for folder in sorted(root.iterdir())
            if folder.is_dir() and is_system(folder.name)}
