"""What ``validate``'s expectations check, derived from an archive: pure functions, no I/O.

The run's metadata as one row (:func:`meta_frame`), each host's coverage of the planned
load phase (:func:`host_coverage`), and one row per counter with the shares of its samples
that are numbers, finite and possible for its unit (:func:`counter_summary`, the unit rules
of :func:`counter_kind` and :func:`kind_bounds`); then the host frames the later stages read,
with the dropped counters left out and impossible samples made missing
(:func:`valid_host_frames`).
"""
from __future__ import annotations

import logging
import re
from typing import AbstractSet, Any, Sequence, TypedDict

import numpy as np
import pandas as pd

from pipelines import config
from pipelines.storage.run_records import DroppedCounter, Environment

log = logging.getLogger("regresslab.validate")

REQUIRED_FIELDS = ("schema_version", "run_id", "system", "version", "started_at", "duration_s",
                   "workload", "environment", "verdict", "cause")
# free text of run.json shown on pages, in mails, in JUnit files and on terminals: printable and bounded
TEXT_LIMITS = {"version": 128, "cause": 200, "environment": 200}
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable_text(value: Any, limit: int) -> bool:
    """Whether ``value`` is absent or text of at most ``limit`` characters with no control character
    (newlines and tabs included: each field is one line)."""
    if value is None:
        return True
    return isinstance(value, str) and len(value) <= limit and not _CONTROL.search(value)


def printable_environment(env: Any, limit: int) -> bool:
    """Whether every key, and every text value, of a flat environment is :func:`printable_text`."""
    if not isinstance(env, dict):
        return True                         # its shape is another check's
    return all(printable_text(str(k), limit) and (not isinstance(v, str) or printable_text(v, limit))
               for k, v in env.items())


# --------------------------------------------------------------------------- pure core


def parse_timestamps(raw: pd.Series) -> pd.Series:
    """Epoch seconds (float) from ISO-8601-with-offset strings or epoch numbers; NaN when unparseable."""
    if pd.api.types.is_numeric_dtype(raw):
        return raw.astype(float)
    as_num = pd.to_numeric(raw, errors="coerce")
    if as_num.notna().all():
        return as_num.astype(float)
    parsed = pd.to_datetime(raw, errors="coerce", utc=True, format="ISO8601")
    out = (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    # an ISO string without an offset is ambiguous: the contract asks for one
    has_offset = raw.astype(str).str.contains(r"(?:Z|[+-]\d\d:?\d\d)$", regex=True)
    return out.where(has_offset)


def parse_started_at(value: Any) -> float | None:
    """Epoch seconds of ``started_at``: an ISO-8601 string with its offset (contract §1), never
    a number or a string of digits (``"1790000000"`` is not a date; sorting runs by it broke
    every later stage)."""
    if not isinstance(value, str) or not re.match(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}", value):
        return None
    ts = parse_timestamps(pd.Series([value]))
    return None if pd.isna(ts.iloc[0]) else float(ts.iloc[0])


def meta_frame(meta: dict[str, Any], *, archive_run_id: str, counters: set[str],
               dropped: AbstractSet[str] = frozenset(), hosts: int | None = None) -> pd.DataFrame:
    """``run.json`` as one row, with derived columns for the checks that need Python to see types.

    Every required field has its column (null when the file lacks it) and ``has_<field>`` says
    whether it was there, so that rows of several archives stack into one frame that Great
    Expectations checks row by row (a column-exists check would pass for a stack when any one
    archive had the field); ``hosts`` is the number of host files (at least one)."""
    row: dict[str, Any] = {f: meta.get(f) for f in REQUIRED_FIELDS}
    row.update({f"has_{f}": f in meta for f in REQUIRED_FIELDS})
    for key in ("workload", "environment", "baseline", "regressed_counters"):
        row.pop(key, None)
    if hosts is not None:
        row["hosts"] = hosts
    for key in ("run_id", "system", "version", "started_at", "verdict", "cause"):
        if key in row and row[key] is not None and not isinstance(row[key], str):
            row[key] = repr(row[key])           # a non-string becomes a value no regex accepts
    workload = meta.get("workload")
    env = meta.get("environment")
    load_counter = workload.get("load_counter") if isinstance(workload, dict) else None
    row.update({
        "run_id_matches_archive": meta.get("run_id") == archive_run_id,
        # identifiers become file names: the contract's grammar, checked in Python (a regex
        # expectation's "$" would let a trailing newline through)
        "run_id_is_identifier": config.is_identifier(meta.get("run_id")),
        "system_is_identifier": config.is_identifier(meta.get("system")),
        "started_at_epoch": parse_started_at(meta.get("started_at")),
        "duration_is_number": isinstance(meta.get("duration_s"), (int, float))
        and not isinstance(meta.get("duration_s"), bool),
        "workload_is_object": isinstance(workload, dict) and isinstance(workload.get("profile"), str),
        "load_counter_recorded": load_counter is None or load_counter in counters,
        # the offered load is what normalisation scales by: without it the run is not comparable
        "load_counter_usable": load_counter is None or load_counter not in dropped,
        "dropped_counter_share": len(dropped) / len(counters) if counters else 0.0,
        "version_is_printable": printable_text(meta.get("version"), TEXT_LIMITS["version"]),
        "cause_is_printable": printable_text(meta.get("cause"), TEXT_LIMITS["cause"]),
        "environment_is_printable": printable_environment(env, TEXT_LIMITS["environment"]),
        "environment_is_flat_object": isinstance(env, dict)
        and all(isinstance(v, (str, int, float, bool)) or v is None for v in env.values()),
        "baseline_is_list_of_ids": "baseline" not in meta or (
            isinstance(meta["baseline"], list) and all(isinstance(b, str) for b in meta["baseline"])),
        "regressed_is_list_of_counters": "regressed_counters" not in meta or (
            isinstance(meta["regressed_counters"], list)
            and all(isinstance(c, str) for c in meta["regressed_counters"])),
    })
    if not row["duration_is_number"]:
        row["duration_s"] = None
    return pd.DataFrame([row])


def host_cores(environment: Environment | None, host: str, *, cores_key: str) -> float | None:
    """The CPU count behind a per-process percentage on ``host`` (contract §1), from ``environment``.

    A key naming the host (``web01.cpu_cores``, ``web01_cpu_cores``) wins; otherwise the largest
    count any key gives (an environment often states the biggest machine's cores only, and a
    bound too low would drop good counters); ``None`` when no key gives one: no upper bound.
    ``cores_key`` is a regex that a key (after the host prefix) must fully match."""
    if not isinstance(environment, dict):
        return None
    own, anywhere = [], []
    for key, value in environment.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value <= 0:
            continue
        key = str(key)
        for prefix in (f"{host}.", f"{host}_"):
            if key.startswith(prefix) and re.fullmatch(cores_key, key[len(prefix):]):
                own.append(float(value))
        tail = re.split(r"[._]", key, maxsplit=0)
        if any(re.fullmatch(cores_key, "_".join(tail[i:])) for i in range(len(tail))):
            anywhere.append(float(value))
    if own:
        return max(own)
    return max(anywhere) if anywhere else None


def counter_kind(counter: str, host: str, *, units: list[dict[str, str]], host_components: list[str]) -> str:
    """What a counter measures, by the first rule of ``units`` that matches it (``params.yaml``).

    A rule holds ``counter``, a regex fully matching the part after ``<component>.``, an
    optional ``scope`` (``host``: the component is the machine itself, i.e. the CSV's host name
    or one of ``host_components``; ``process``: any other component) and the ``kind``:
    ``share_pct`` (0-100), ``process_cpu_pct`` (0-100 x cores), ``nonneg`` (>= 0) or ``any``."""
    component, _, name = counter.partition(".")
    scope = "host" if component in (host, config.host_component(host)) or component.lower() in host_components \
        else "process"
    for rule in units:
        if rule.get("scope") not in (None, scope):
            continue
        if re.fullmatch(rule["counter"], name):
            return rule["kind"]
    return "any"


def kind_bounds(kind: str, cores: float | None, *, slack: float) -> tuple[float, float]:
    """The values possible for a counter kind: ``slack`` widens an upper bound (rounding, sampling)."""
    if kind == "share_pct":
        return 0.0, 100.0 * (1.0 + slack)
    if kind == "process_cpu_pct":
        return 0.0, (100.0 * cores * (1.0 + slack)) if cores else float("inf")
    if kind == "nonneg":
        return 0.0, float("inf")
    return float("-inf"), float("inf")


def _examples(values: pd.Series, limit: int = 5) -> str:
    return ", ".join(str(v)[:40] for v in values.head(limit).tolist())


SUMMARY_COLUMNS = ["host", "counter", "counter_name_ok", "kind", "lower_bound", "upper_bound", "samples",
                   "numeric_share", "finite_share", "in_range_share", "min_value", "max_value",
                   "non_numeric_examples", "out_of_range_examples"]
COUNTER_NAME = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_.%/-]+")


class Shares(TypedDict):
    """The shares of a column's present samples that are numbers, finite and within its bounds."""

    numeric_share: float
    finite_share: float
    in_range_share: float


class CheckedColumn(Shares):
    """One counter's figures the ``counter_values`` suite checks: its present samples and their
    shares (:class:`Shares`), its smallest and largest finite value, and example offending cells."""

    samples: int
    min_value: float
    max_value: float
    non_numeric_examples: str
    out_of_range_examples: str


def _shares(n_present: int, non_numeric: int, infinite: int, outside: int) -> Shares:
    if not n_present:
        return {"numeric_share": 1.0, "finite_share": 1.0, "in_range_share": 1.0}
    return {"numeric_share": 1.0 - non_numeric / n_present, "finite_share": 1.0 - infinite / n_present,
            "in_range_share": 1.0 - outside / n_present}


def _text_column_row(raw: pd.Series, low: float, high: float) -> CheckedColumn:
    """The checks of one column pandas did not read as numbers (text cells among them)."""
    value = pd.to_numeric(raw, errors="coerce").astype(float)
    present = raw.notna() & (raw.astype(str).str.strip() != "")
    n_present = int(present.sum())
    non_numeric = present & value.isna()
    infinite = np.isinf(value)
    finite = value[np.isfinite(value)]
    outside = finite[(finite < low) | (finite > high)]
    return {"samples": n_present, **_shares(n_present, int(non_numeric.sum()), int(infinite.sum()), len(outside)),
            "min_value": float(finite.min()) if len(finite) else np.nan,
            "max_value": float(finite.max()) if len(finite) else np.nan,
            "non_numeric_examples": _examples(raw[non_numeric]),
            "out_of_range_examples": _examples(pd.concat([value[infinite], outside]))}


def _numeric_rows(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> list[CheckedColumn]:
    """:func:`_text_column_row` of every column of a numeric block at once (rows = samples):
    no cell is text, a missing sample is NaN.  The same figures, without a string per cell."""
    present = ~np.isnan(values)
    infinite = np.isinf(values)
    finite = present & ~infinite
    outside = finite & ((values < low) | (values > high))
    n_present, n_inf, n_out, n_finite = present.sum(0), infinite.sum(0), outside.sum(0), finite.sum(0)
    lo = np.where(finite, values, np.inf).min(0, initial=np.inf)
    hi = np.where(finite, values, -np.inf).max(0, initial=-np.inf)
    rows: list[CheckedColumn] = []
    for j in range(values.shape[1]):
        examples = ""
        if n_inf[j] or n_out[j]:         # the infinite values first, then the out-of-range ones, as text
            col = values[:, j]
            examples = _examples(pd.Series(np.concatenate([col[infinite[:, j]], col[outside[:, j]]])))
        rows.append({"samples": int(n_present[j]), **_shares(int(n_present[j]), 0, int(n_inf[j]), int(n_out[j])),
                     "min_value": float(lo[j]) if n_finite[j] else np.nan,
                     "max_value": float(hi[j]) if n_finite[j] else np.nan,
                     "non_numeric_examples": "", "out_of_range_examples": examples})
    return rows


def counter_summary(frames: dict[str, pd.DataFrame], environment: Environment | None, *,
                    units: list[dict[str, str]], host_components: list[str], cores_key: str,
                    slack: float) -> pd.DataFrame:
    """One row per (host, counter): its kind and bounds, and the shares of its samples that are
    numbers, finite and within the bounds, with example offending values; the ``counter_values``
    suite checks these shares, so a counter is judged alone (contract §1, "What is
    quarantined").  One row per counter, not per cell: the frame stays small at 2,000 counters
    over 8 hours.  The columns pandas read as numbers are checked together as one array
    (:func:`_numeric_rows`); only a column holding text is checked cell by cell
    (:func:`_text_column_row`): per column, that took 70 % of validating an archive."""
    rows = []
    for host, frame in frames.items():
        cores = host_cores(environment, host, cores_key=cores_key)
        heads, numeric, stats = [], [], {}
        for i, col in enumerate(frame.columns):
            if col == "timestamp":
                continue
            name = str(col)
            kind = counter_kind(name, host, units=units, host_components=host_components)
            low, high = kind_bounds(kind, cores, slack=slack)
            heads.append((i, {"host": host, "counter": name, "counter_name_ok": bool(COUNTER_NAME.fullmatch(name)),
                              "kind": kind, "lower_bound": low, "upper_bound": high}))
            raw = frame.iloc[:, i]
            if pd.api.types.is_numeric_dtype(raw.dtype):
                numeric.append(i)
            else:
                stats[i] = _text_column_row(raw, low, high)
        if numeric:
            bounds = {i: (h["lower_bound"], h["upper_bound"]) for i, h in heads}
            block = frame.iloc[:, numeric].to_numpy(dtype=float)
            stats.update(zip(numeric, _numeric_rows(block, np.array([bounds[i][0] for i in numeric]),
                                                    np.array([bounds[i][1] for i in numeric]))))
        rows += [{**head, **stats[i]} for i, head in heads]
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def covered_time(ts: np.ndarray, start: float, end: float, period: float) -> float:
    """Seconds of the phase ``[start, end]`` that samples every ``period`` seconds cover.

    A sample covers one period: the one before it or the one after it, as its collector
    averages, so its direction is not assumed.  The samples inside the phase count, with the
    last one before it and the first one after it when they lie less than a period outside (they
    average part of the phase); consecutive samples cover the time between them up to a period,
    so a gap counts for one period and ``n`` regular samples cover ``n`` periods: a 10-minute run
    sampled once a minute is covered whole whatever its first sample's offset."""
    ts = np.sort(ts)
    inside = ts[(ts >= start) & (ts <= end)]
    if period <= 0 or inside.size == 0:
        return 0.0
    before = ts[(ts < start) & (ts > start - period)][-1:]
    after = ts[(ts > end) & (ts < end + period)][:1]
    near = np.concatenate([before, inside, after])
    return float(min(end - start, np.minimum(np.diff(near), period).sum() + period * (1 if near.size else 0)))


def host_coverage(frames: dict[str, pd.DataFrame], *, started_at: float | None, duration_s: float | None,
                  min_samples: int, min_coverage: float, min_samples_floor: int) -> pd.DataFrame:
    """Per host: its counters, its timestamps (parseable, strictly increasing), the samples inside
    the planned load phase, the share of it their span covers, and the samples it must have.

    The share covered is :func:`covered_time`'s.  The samples required follow the run's planned
    duration and the host's sampling period: ``min(min_samples, floor(min_coverage x duration /
    period))``, never below ``min_samples_floor``; a 10-minute run sampled once a minute needs 9,
    not 10."""
    rows = []
    for host, frame in frames.items():
        if "timestamp" in frame.columns:
            ts = parse_timestamps(frame["timestamp"])
        else:
            ts = pd.Series(np.nan, index=frame.index)
        unparsed = ts.isna()
        step = ts.diff()
        backwards = step.notna() & (step <= 0)
        row = {"host": host, "counters": sum(1 for c in frame.columns if c != "timestamp"),
               "timestamp_column": "timestamp" in frame.columns,
               "ts_unparseable": int(unparsed.sum()), "ts_not_increasing": int(backwards.sum()),
               "ts_examples": _examples(frame["timestamp"][unparsed | backwards]) if "timestamp" in frame.columns
               else "no timestamp column",
               "load_samples": 0, "coverage": 0.0, "period_s": np.nan, "required_samples": min_samples}
        if started_at is not None and duration_s and duration_s > 0:
            end = started_at + duration_s
            inside = ts[(ts >= started_at) & (ts <= end)].dropna()
            if not inside.empty:
                period = float(np.nanmedian(np.diff(np.sort(inside.values)))) if len(inside) > 1 else 0.0
                row.update(load_samples=int(len(inside)), period_s=period,
                           coverage=covered_time(ts.dropna().to_numpy(dtype=float), started_at, end, period)
                           / duration_s)
                if period > 0:
                    row["required_samples"] = max(min_samples_floor, min(
                        min_samples, int(np.floor(min_coverage * duration_s / period + 1e-9))))
        rows.append(row)
    return pd.DataFrame(rows)


def valid_host_frames(frames: dict[str, pd.DataFrame], summary: pd.DataFrame | None = None,
                      dropped: Sequence[DroppedCounter] = ()) -> dict[str, pd.DataFrame]:
    """Host frames in the form later stages read: float ``ts`` column plus numeric counters.

    The dropped counters are left out; in the counters kept (``value_mostly`` < 1 tolerates a
    few), a value impossible for the counter's unit becomes a missing sample."""
    gone = {(d["host"], d["counter"]) for d in dropped}
    bounds = ({} if summary is None else
              {(r.host, r.counter): (r.lower_bound, r.upper_bound) for r in summary.itertuples()})
    out = {}
    for host, frame in frames.items():
        if "timestamp" not in frame.columns:      # no frame to write: the suites quarantine the run, naming the host
            continue
        keep = [c for c in frame.columns if c != "timestamp" and (host, str(c)) not in gone]
        names = [str(c) for c in keep]
        values = np.empty((len(frame), len(keep)))            # one array: 2,000 counters, no per-column frames
        for j, c in enumerate(keep):
            col = frame[c]
            values[:, j] = (col.to_numpy(dtype=float) if pd.api.types.is_numeric_dtype(col)
                            else pd.to_numeric(col, errors="coerce").to_numpy(dtype=float, na_value=np.nan))
        low, high = np.array([bounds.get((host, n), (-np.inf, np.inf)) for n in names], dtype=float).reshape(-1, 2).T
        with np.errstate(invalid="ignore"):
            possible = np.isfinite(values) & (values >= low) & (values <= high)
        numeric = pd.DataFrame(np.where(possible, values, np.nan), columns=names)
        numeric.insert(0, "ts", parse_timestamps(frame["timestamp"]).values)
        out[host] = numeric
    return out


# --------------------------------------------------------------------------- GX runner
