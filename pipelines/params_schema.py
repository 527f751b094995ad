"""The schema of ``params.yaml``: every block typed, unknown keys refused, defaults filled in.

The defaults are one file, ``pipelines/params_defaults.yaml`` (the example's ``params.yaml`` is
that file, with every comment that says what a key does).  The schema is built from it: each key
takes the type of its default (a whole number, a number, a flag, text, a list, a block of its
own; a whole-number default of a quantity, :data:`FRACTIONAL`, takes any number), a key whose
default is ``null`` takes the type :data:`NULLABLE` gives it, a key with a fixed
set of values takes one of :data:`CHOICES`, and numbers are never negative, shares and rates lie
in [0, 1] (:data:`UNIT_INTERVAL`).  A lab's ``params.yaml`` may leave out any key: its default
applies.  It may not add one: a misspelt key would otherwise be ignored in silence (an
``alerts: {enable: true}`` that leaves alerts off), so an unknown key is an error that names the
nearest valid one.

:func:`check` raises :class:`ConfigError` with every problem, each as
``params.yaml: <block>.<key>: <what is wrong>`` and the values allowed; ``config.load_params``
calls it before any stage reads its block, and ``regresslab check`` without running anything.
Built on pydantic (models created from the defaults, ``extra="forbid"``).
"""
from __future__ import annotations

import copy
import difflib
import functools
from pathlib import Path
from typing import Any, Literal, Mapping, Optional

import yaml

DEFAULTS_FILE = Path(__file__).resolve().parent / "params_defaults.yaml"

# keys with a fixed set of values (block.key, nested keys joined by dots)
CHOICES: dict[str, tuple[str, ...]] = {
    "labsim.process_cpu": ("share", "per_core"),
    "pull.done_markers": ("optional", "required"),
    "mine_rules.algorithm": ("apriori", "fpgrowth"),
    "control_charts.method": ("percentile", "sigma"),
    "control_charts.scope": ("run", "interval"),
    "commit_changes.method": ("auto", "level_shift", "skia+mono", "mono+pelt", "skia", "mono", "pelt", "level_shift+pelt"),
    "commit_changes.skia.grouping": ("kmeans", "individual", "both"),
    "commit_changes.mono.quantile": ("normal", "student"),
    "report.combination": ("simes", "bonferroni"),
    "report.detector_weights": ("faults", "equal"),
    "report.detector_trust": ("record", "none"),
    "report.trust_reading": ("uncertain", "point"),
    "report.trust_silent": ("within", "keep"),
    "report.flag_rule": ("rules", "union"),
}
# keys whose default is null (off, unset) and the type they take when set
NULLABLE: dict[str, Any] = {
    "discretize.log_span": float,
    "detect.min_rel_change": float,
    "control_charts.threshold": float,
    "clusters.error_threshold": float,
    "commit_changes.source": str,
    "commit_changes.labels": str,
    "report.night": str,
    "report.headline_detectors": list,
    "report.junit": str,
    "compute.jobs": int,
    "ingest.timezone": str,
    "alerts.from_email": str,
    "alerts.smtp_host": str,
    "alerts.smtp_user": str,
    "alerts.index_url": str,
    "ingest.prometheus.url": str,
}
# numbers that are shares, rates or probabilities: within [0, 1]
UNIT_INTERVAL = ("false_alarm_rate", "_share", "alpha", "min_coverage", "min_support", "min_confidence",
                 "value_mostly", "null_quantile", "subsample_share", "min_magnitude", "range_slack",
                 "floor_share", "min_rel_change", "delta_threshold", "stacking_threshold", "r2_threshold",
                 "error_trim", "error_floor", "load_independent_ratio", "min_load_correlation", "min_change",
                 "max_change", "classifier_resolution", "median_change", "trust_level")
# numbers whose default is whole but that are quantities, not counts: a fraction is fine
FRACTIONAL = ("_s", "seconds", "_mb", "_pct", "sigma", "penalty", "log_base", "log_span", "_sd", "ratio",
              "standard_errors")
# keys that may hold any value (a seed's own free-form blocks)
FREE = {"pull.source", "labsim.start", "evaluate.labels", "commit_changes.skia.interesting",
        "ingest.prometheus.queries"}


class ConfigError(ValueError):
    """``params.yaml`` is not what the pipeline can run with: every problem, one per line."""


@functools.lru_cache(maxsize=1)
def defaults() -> dict[str, Any]:
    """The default of every key (``params_defaults.yaml``)."""
    return yaml.safe_load(DEFAULTS_FILE.read_text(encoding="utf-8")) or {}


def _type_of(path: str, value: Any):
    """The annotation and pydantic field constraints of one key, from its default."""
    from pydantic import Field, StrictBool, StrictStr

    if path in FREE:
        return Any, Field(default=None)
    if path in CHOICES:
        return Literal[CHOICES[path]], Field(default=None)
    if value is None or isinstance(value, (bool, int, float, str)):
        kind = NULLABLE.get(path, Any) if value is None else type(value)
        if kind is int and path.rsplit(".", 1)[-1].endswith(FRACTIONAL):
            kind = float
        annotation = _scalar(kind)
        return (Optional[annotation] if path in NULLABLE else annotation), Field(default=None, **_range(path, kind))
    if isinstance(value, list):
        item = value[0] if value else None
        if isinstance(item, dict):
            return list[dict[str, Any]], Field(default=None)
        if isinstance(item, bool):
            return list[StrictBool], Field(default=None)
        if isinstance(item, (int, float)):
            number: type = float if any(isinstance(v, float) for v in value) else int
            return list[number], Field(default=None)  # type: ignore[valid-type]
        if isinstance(item, str):
            return list[StrictStr], Field(default=None)
        if isinstance(item, list):
            return list[list[StrictStr]], Field(default=None)
        return list[Any], Field(default=None)
    if isinstance(value, dict):
        return _model(path, value), Field(default=None)
    return Any, Field(default=None)


def _scalar(kind):
    from pydantic import StrictBool, StrictInt, StrictStr

    return {bool: StrictBool, int: StrictInt, float: float, str: StrictStr, list: list[StrictStr]}.get(kind, Any)


def _range(path: str, kind) -> dict[str, Any]:
    if kind not in (int, float):
        return {}
    if kind is float and path.rsplit(".", 1)[-1].endswith(UNIT_INTERVAL):
        return {"ge": 0, "le": 1}
    return {"ge": 0}          # pydantic reports the bound as the field's type (0.0 for a number): see _message


def _model(path: str, block: dict[str, Any]):
    from pydantic import ConfigDict, create_model

    import warnings

    fields = {key: _type_of(f"{path}.{key}" if path else key, value) for key, value in block.items()}
    name = "Params_" + (path.replace(".", "_") or "root")
    with warnings.catch_warnings():          # a block named "validate" shadows BaseModel.validate: harmless here
        warnings.simplefilter("ignore", UserWarning)
        return create_model(name, __config__=ConfigDict(extra="forbid"), **fields)


@functools.lru_cache(maxsize=1)
def schema():
    """The pydantic model of the whole file."""
    return _model("", defaults())


def merged(params: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, Any]:
    """``params`` over the defaults: a block or key left out takes its default (lists and
    free-form values are replaced whole, blocks merged key by key)."""
    out = copy.deepcopy(defaults() if base is None else base)
    for key, value in (params or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key not in FREE:
            out[key] = merged(value, out[key])
        else:
            out[key] = copy.deepcopy(value)
    return out


def check(params: Any, *, source: str = "params.yaml") -> dict[str, Any]:
    """``params`` checked against the schema and completed with the defaults; ConfigError with
    every problem otherwise."""
    from pydantic import ValidationError

    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ConfigError(f"{source}: the file must be a mapping of blocks (labsim:, pull:, …), "
                          f"not {type(params).__name__}")
    from pipelines.safe_text import mask_urls

    full = merged(params)
    try:
        schema().model_validate(full)
    except ValidationError as exc:
        raise ConfigError(mask_urls("\n".join(_message(source, err) for err in exc.errors()))) from None
    problems = [f"{source}: {where}: {why}" for where, why in location_problems(full) + registry_problems(full)]
    if problems:
        raise ConfigError(mask_urls("\n".join(problems)))
    return full


# how the detectors decide, besides following one registered detector alone
VERDICT_RULES = ("calibrated", "all", "any")


def registry_problems(full: dict[str, Any]) -> list[tuple[str, str]]:
    """The report block's keys that name a detector (``verdict_rule`` when it follows one alone,
    ``headline_detectors``) against the registry's names (``report.detectors``)."""
    report = full.get("report") or {}
    names = [e.get("name") for e in report.get("detectors") or [] if isinstance(e, dict)]
    shown = ", ".join(str(n) for n in names)
    problems = []
    rule = report.get("verdict_rule")
    if isinstance(rule, str) and rule not in VERDICT_RULES and rule not in names:
        problems.append(("report.verdict_rule", f"{rule!r} is not one of {', '.join(VERDICT_RULES)} nor a registered "
                                                f"detector ({shown})"))
    for i, name in enumerate(report.get("headline_detectors") or []):
        if name not in names:
            problems.append((f"report.headline_detectors.{i}", f"{name!r} is not a registered detector ({shown})"))
    return problems


# the keys that name a location (a folder, a file or a URL) the pipeline reads from or links to
LOCATION_KEYS = ("pull.source", "commit_changes.source", "commit_changes.labels", "ingest.prometheus.url",
                 "alerts.index_url")
CREDENTIALS_ELSEWHERE = ("give credentials to the client instead, never in params.yaml: for s3:// the AWS "
                         "credential chain (AWS_PROFILE, AWS_ACCESS_KEY_ID, ~/.aws/credentials, an instance role), "
                         "for https:// a ~/.netrc entry for the host or a header in the environment variable "
                         "REGRESSLAB_HTTP_AUTHORIZATION (docs/operations/storage.md)")


def _locations(full: dict[str, Any]) -> list[tuple[str, Any]]:
    """(where, value) of every location the file names (``pull.source`` may be a list, an entry
    a block with a ``path``)."""
    out = []
    for key in LOCATION_KEYS:
        node: Any = full
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        entries = node if isinstance(node, list) else [node]
        for i, entry in enumerate(entries):
            where = key if not isinstance(node, list) else f"{key}.{i}"
            if isinstance(entry, dict):
                entry, where = entry.get("path"), f"{where}.path"
            if entry is not None:
                out.append((where, entry))
    return out


def location_problems(full: dict[str, Any]) -> list[tuple[str, str]]:
    """What is wrong with the locations ``full`` names: text with control characters (a newline
    would split the project's files and messages), or credentials written into a URL."""
    from pipelines.safe_text import control_characters, has_credentials, mask_url

    problems = []
    for where, value in _locations(full):
        if not isinstance(value, str):
            continue                         # a type the schema already named
        bad = control_characters(value) + (["\\n"] if "\n" in value else [])
        if bad:
            problems.append((where, f"control characters ({', '.join(sorted(set(bad)))}) in a location"))
        elif has_credentials(value):
            problems.append((where, f"{mask_url(value)!r} holds credentials; {CREDENTIALS_ELSEWHERE}"))
    return problems


def _allowed_keys(loc: tuple) -> list[str]:
    node: Any = defaults()
    for part in loc:
        if not isinstance(node, dict) or part not in node:
            return []
        node = node[part]
    return list(node) if isinstance(node, dict) else []


def _message(source: str, err: Mapping[str, Any]) -> str:
    loc = tuple(str(p) for p in err["loc"])
    where = ".".join(loc)
    kind, given = err["type"], err.get("input")
    if kind == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        near = difflib.get_close_matches(loc[-1], allowed, n=1, cutoff=0.5)
        hint = f", did you mean `{near[0]}`?" if near else ""
        block = ".".join(loc[:-1]) or "the file"
        return (f"{source}: {where}: unknown key{hint} ({block} takes: {', '.join(allowed)})")
    path = ".".join(p for p in loc if not p.isdigit())
    if kind == "literal_error" and path in CHOICES:
        return f"{source}: {where}: {given!r} is not one of {', '.join(CHOICES[path])}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"{source}: {where}: {given!r} is not a whole number"
    if kind in ("float_type", "float_parsing"):
        return f"{source}: {where}: {given!r} is not a number"
    if kind in ("bool_type", "bool_parsing"):
        return f"{source}: {where}: {given!r} is not true or false"
    if kind in ("string_type",):
        return f"{source}: {where}: {given!r} is not text"
    if kind in ("list_type",):
        return f"{source}: {where}: {given!r} is not a list"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"{source}: {where}: {given!r} is not a block of keys ({', '.join(_allowed_keys(loc))})"
    if kind in ("greater_than_equal", "less_than_equal"):
        ctx = err.get("ctx") or {}
        low, high = (0, 1) if "le" in ctx or kind == "less_than_equal" else (ctx.get("ge", 0), None)
        low = int(low) if float(low).is_integer() else low
        span = f"from {low} to {high}" if high is not None else f"at least {low}"
        return f"{source}: {where}: {given!r} is out of range (allowed: {span})"
    return f"{source}: {where}: {err['msg']} (given {given!r})"
