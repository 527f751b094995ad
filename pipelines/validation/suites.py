"""The Great Expectations suites of ``validate``, and the runner that checks one archive with them.

Three suites run per archive (contract §1):

* ``run_meta``: ``run.json`` flattened to one row -- required fields, types, the
  identifier grammar, a parseable ``started_at``, a plausible ``duration_s``;
* ``host_coverage``: one row per host -- minimum samples in the load phase and the
  share of the planned duration its samples cover;
* ``counter_values``: one row per counter -- its name, and the shares of its samples that
  are numbers, finite, and possible for its unit.

Python only derives the rows that the expectations check (:mod:`pipelines.validation.checks`);
every verdict is Great Expectations'.  A run-level failure quarantines the run; a
counter-level failure drops that counter from the run's analysis.
"""
from __future__ import annotations

import collections
import hashlib
import html
import logging
from pathlib import Path
from typing import Any, Iterable, NamedTuple, TypedDict

import pandas as pd

from pipelines.importers import run_directory
from pipelines.storage import archive, atomic
from pipelines.validation.checks import counter_summary, host_coverage, meta_frame, parse_started_at
from pipelines.storage.run_records import DroppedCounter

log = logging.getLogger("regresslab.validate")

SUITE_VERSION = 8   # bump when an expectation or a reader's numbers change: every archive is validated again


def build_suites(*, min_coverage: float, max_duration_s: float, value_mostly: float,
                 max_dropped_share: float) -> dict[str, list]:
    """The three expectation suites; each expectation says what it guards.

    ``run_meta`` and ``host_coverage`` hold run-level faults: one quarantines the run.
    ``counter_values`` holds counter-level faults: a counter that fails one is dropped from the
    run's analysis with its reason (contract §1), and ``run_meta`` quarantines the run
    only when more than ``max_dropped_share`` of its counters went, or the load counter did."""
    import great_expectations.expectations as gxe

    meta = [gxe.ExpectColumnValuesToBeInSet(column=f"has_{f}", value_set=[True]) for f in  # schema: every
            ("schema_version", "run_id", "system", "version", "started_at", "duration_s", "verdict", "cause")]
    meta += [                                                                              # field required
        gxe.ExpectColumnValuesToBeBetween(column="hosts", min_value=1),                   # at least one machine
        gxe.ExpectColumnValuesToBeInSet(column="schema_version", value_set=[1]),        # schema version we read
        gxe.ExpectColumnValuesToBeInSet(column="run_id_is_identifier", value_set=[True]),  # safe as a file name
        gxe.ExpectColumnValuesToBeInSet(column="run_id_matches_archive", value_set=[True]),  # id = archive stem
        gxe.ExpectColumnValuesToNotBeNull(column="system"),                              # runs compared per system
        gxe.ExpectColumnValuesToBeInSet(column="system_is_identifier", value_set=[True]),  # safe as a file name
        gxe.ExpectColumnValuesToNotBeNull(column="version"),
        gxe.ExpectColumnValuesToBeInSet(column="version_is_printable", value_set=[True]),  # one line, bounded
        gxe.ExpectColumnValuesToBeInSet(column="cause_is_printable", value_set=[True]),    # shown on pages, in CI
        gxe.ExpectColumnValuesToBeInSet(column="environment_is_printable", value_set=[True]),  # keys, text values
        gxe.ExpectColumnValuesToNotBeNull(column="started_at_epoch"),                    # ISO-8601 start, parseable
        gxe.ExpectColumnValuesToBeInSet(column="duration_is_number", value_set=[True]),  # units: seconds, a number
        gxe.ExpectColumnValuesToBeBetween(column="duration_s", min_value=1, max_value=max_duration_s),
        gxe.ExpectColumnValuesToBeInSet(column="workload_is_object", value_set=[True]),  # {"profile", "load_counter"}
        gxe.ExpectColumnValuesToBeInSet(column="load_counter_recorded", value_set=[True]),  # load counter exists
        gxe.ExpectColumnValuesToBeInSet(column="load_counter_usable", value_set=[True]),  # ... and was not dropped
        gxe.ExpectColumnValuesToBeInSet(column="environment_is_flat_object", value_set=[True]),  # flat env map
        gxe.ExpectColumnValuesToBeInSet(column="verdict", value_set=["pass", "fail"]),   # null allowed: a target
        gxe.ExpectColumnValuesToBeInSet(column="baseline_is_list_of_ids", value_set=[True]),
        gxe.ExpectColumnValuesToBeInSet(column="regressed_is_list_of_counters", value_set=[True]),
        gxe.ExpectColumnValuesToBeBetween(column="dropped_counter_share", max_value=max_dropped_share),  # enough left
    ]
    hosts = [
        gxe.ExpectColumnValuesToMatchRegex(column="host", regex=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z"),  # file stem
        gxe.ExpectColumnValuesToBeBetween(column="counters", min_value=1),                # each CSV has counters
        gxe.ExpectColumnValuesToBeInSet(column="timestamp_column", value_set=[True]),      # first column: timestamp
        gxe.ExpectColumnValuesToBeBetween(column="ts_unparseable", max_value=0),           # parseable timestamps
        gxe.ExpectColumnValuesToBeBetween(column="ts_not_increasing", max_value=0),        # strictly increasing
        gxe.ExpectColumnPairValuesAToBeGreaterThanB(column_A="load_samples", column_B="required_samples",
                                                    or_equal=True),                       # completeness
        gxe.ExpectColumnValuesToBeBetween(column="coverage", min_value=min_coverage),    # planned duration covered
    ]
    values = [
        gxe.ExpectColumnValuesToBeInSet(column="counter_name_ok", value_set=[True]),       # <component>.<counter>
        gxe.ExpectColumnValuesToBeBetween(column="numeric_share", min_value=value_mostly),  # numbers or empty cells
        gxe.ExpectColumnValuesToBeBetween(column="finite_share", min_value=value_mostly),   # inf is no measurement
        gxe.ExpectColumnValuesToBeBetween(column="in_range_share", min_value=value_mostly),  # units: percentages
    ]                                                                                      # in range, rates >= 0
    return {"run_meta": meta, "host_coverage": hosts, "counter_values": values}


def suites_from_params(params: dict[str, Any]) -> dict[str, list]:
    """:func:`build_suites` with the ``validate`` block of ``params.yaml``."""
    return build_suites(min_coverage=params["min_coverage"], max_duration_s=params["max_duration_s"],
                        value_mostly=params["value_mostly"], max_dropped_share=params["max_dropped_share"])


#: the columns that name the offending rows in each suite's results (GX ``unexpected_index_list``):
#: the archive first (the suites check the rows of many archives at once), then the host and counter
INDEX_COLUMNS = {"run_meta": ["archive"], "host_coverage": ["archive", "host"],
                 "counter_values": ["archive", "host", "counter"]}


CHECK_WORDS = {
    "counter_name_ok": "name is not <component>.<counter>",
    "numeric_share": "values that are not numbers",
    "finite_share": "infinite values",
    "in_range_share": "values impossible for its unit",
}


class Failure(TypedDict, total=False):
    """A failed check of one archive: the suite and expectation (a Great Expectations one, or the
    archive's own: ``readable_safe_archive``, ``unique_counter_names``), its arguments, what was
    unexpected and where (the failing rows by the suite's index columns), or the ``reason`` in a
    sentence when the archive could not be read at all."""

    suite: str
    expectation: str
    kwargs: dict[str, Any]
    unexpected_count: int | None
    unexpected_percent: float | None
    partial_unexpected_list: list[str]
    unexpected_index_list: list[dict[str, Any]]
    observed_value: str | None
    exception: str | None
    reason: str


def dropped_counters(summary: pd.DataFrame, failures: list[Failure]) -> list[DroppedCounter]:
    """The counters the ``counter_values`` suite failed, each with the checks, the host, the
    counter and example values: the run is analysed without them."""
    by_key: dict[tuple[str, str], list[str]] = {}
    for f in failures:
        column = f["kwargs"].get("column")
        for idx in f.get("unexpected_index_list") or []:
            by_key.setdefault((str(idx.get("host")), str(idx.get("counter"))), []).append(str(column))
    rows = summary.set_index(["host", "counter"])
    out: list[DroppedCounter] = []
    for (host, counter), checks in sorted(by_key.items()):
        row = rows.loc[(host, counter)]
        parts = []
        for check in checks:
            words = CHECK_WORDS.get(check, check)
            if check == "numeric_share":
                words += f" ({1 - row['numeric_share']:.0%} of samples: {row['non_numeric_examples']})"
            elif check in ("finite_share", "in_range_share"):
                bound = (f"{row['kind']}, allowed {row['lower_bound']:g} to {row['upper_bound']:g}"
                         if check == "in_range_share" else "")
                share = 1 - row[check]
                words += f" ({bound + '; ' if bound else ''}{share:.0%} of samples: {row['out_of_range_examples']})"
            parts.append(words)
        out.append({"host": host, "counter": counter, "checks": checks,
                    "reason": f"host {host}, counter {counter}: " + "; ".join(parts)})
    return out


def _text_words() -> dict[str, str]:
    from pipelines.validation.checks import TEXT_LIMITS

    return {f"{field}_is_printable": f"{field}: control characters, or more than {limit} characters"
            + (" in a key or a value" if field == "environment" else "") for field, limit in TEXT_LIMITS.items()}


def describe_failure(f: Failure) -> str:
    """One run-level failure as a sentence: the check, the column, the hosts and example values."""
    if f.get("reason"):
        return f["reason"]
    column = f["kwargs"].get("column") or ", ".join(
        str(f["kwargs"][k]) for k in ("column_A", "column_B") if k in f["kwargs"])
    text = f"{f['suite']}: {f['expectation']}({column})"
    if column in _text_words():
        return f"{text}: {_text_words()[column]}"
    where = [", ".join(f"{k}={v}" for k, v in idx.items()) for idx in (f.get("unexpected_index_list") or [])[:5]]
    if where:
        text += " failed for " + "; ".join(where)
    elif f.get("partial_unexpected_list"):
        text += " unexpected values: " + ", ".join(f["partial_unexpected_list"][:5])
    elif f.get("observed_value") is not None:
        text += f" observed {f['observed_value']}"
    return text


# the report pages' policy: nothing runs, nothing is fetched (Great Expectations' pages load their
# scripts and styles from CDNs; without them they stay readable: their tables are plain HTML)
DOCS_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{DOCS_CSP}">'


def protect_docs(docs_dir: Path) -> int:
    """Put the report pages' Content-Security-Policy at the top of every Data Docs page, so that no
    script runs in them even when they are opened from the disk (the Airflow plugin sends the same
    policy as a header); the pages changed."""
    changed = 0
    for page in Path(docs_dir).rglob("*.html"):
        text = page.read_text(encoding="utf-8", errors="replace")
        if CSP_META in text:
            continue
        head = text.find("<head>")
        text = text[:head + 6] + CSP_META + text[head + 6:] if head >= 0 else CSP_META + text
        atomic.write_text_atomic(page, text)
        changed += 1
    return changed


GX_TEXT_LIMIT = 200           # characters of a value from an archive that Great Expectations sees


def gx_text(value: Any) -> Any:
    """A value from an archive as Great Expectations may see it: text at most ``GX_TEXT_LIMIT``
    characters (a longer one cut, its length and a hash added, so two stay apart) and
    HTML-escaped, since its Data Docs print values unescaped (a counter named
    ``<img src=x onerror=...>`` would run in the reader's browser).  An identifier or a counter
    name in the contract's grammar has nothing to escape and stays as it is."""
    if not isinstance(value, str):
        return value
    text = value
    if len(text) > GX_TEXT_LIMIT:
        digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:10]
        text = f"{text[:GX_TEXT_LIMIT]}… ({len(value):,} characters, #{digest})"
    return html.escape(text, quote=True)


def gx_view(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """``frame`` with every text cell through :func:`gx_text`, and the ``counter`` labels so made,
    mapped back to the counters' own names."""
    view = frame.copy()
    names: dict[str, str] = {}
    for col in view.columns:
        if view[col].dtype == object or pd.api.types.is_string_dtype(view[col].dtype):
            view[col] = view[col].map(gx_text).astype(object)
    if "counter" in frame.columns:
        names = {str(label): str(name) for label, name in zip(view["counter"], frame["counter"])}
    return view, names


def failed_expectations(suite_name: str, result: Any) -> list[Failure]:
    """The failed expectations of one GX validation result, in a JSON-ready form."""
    failed: list[Failure] = []
    for r in result.results:
        if r.success:
            continue
        cfg = r.expectation_config
        res = r.result or {}
        failed.append({
            "suite": suite_name,
            "expectation": cfg.type,
            "kwargs": {k: v for k, v in cfg.kwargs.items() if k not in ("batch_id",)},
            "unexpected_count": res.get("unexpected_count"),
            "unexpected_percent": res.get("unexpected_percent"),
            "partial_unexpected_list": [str(v) for v in (res.get("partial_unexpected_list") or [])[:10]],
            # the rows that failed, by the suite's index columns (every counter, so it can be dropped)
            "unexpected_index_list": [{k: (v.item() if hasattr(v, "item") else v) for k, v in idx.items()}
                                      for idx in (res.get("unexpected_index_list") or [])
                                      if isinstance(idx, dict)],
            "observed_value": str(res.get("observed_value")) if "observed_value" in res else None,
            "exception": (r.exception_info or {}).get("exception_message") if isinstance(r.exception_info, dict)
            and r.exception_info.get("raised_exception") else None,
        })
    return failed


def result_format(suite_name: str) -> dict[str, Any]:
    """COMPLETE with the suite's index columns, so every failing archive, host and counter is named
    (the frames hold one row per archive, host or counter)."""
    return {"result_format": "COMPLETE", "unexpected_index_column_names": INDEX_COLUMNS[suite_name],
            "partial_unexpected_count": 10}


def for_archive(failures: list[Failure], archive_id: str, suite_name: str) -> list[Failure]:
    """The failures of one archive in the results of a stack of archives: each failed expectation
    with the rows of that archive (its index entries without the archive), its count, and, for
    ``run_meta`` (one row per archive), its value as the unexpected value."""
    label = gx_text(archive_id)
    out: list[Failure] = []
    for f in failures:
        mine = [{k: v for k, v in idx.items() if k != "archive"} for idx in f.get("unexpected_index_list") or []
                if idx.get("archive") == label]
        if not mine and (f.get("unexpected_index_list") or f.get("exception") is None):
            continue                             # another archive's rows (a check that raised is everyone's)
        column = f["kwargs"].get("column")
        one: Failure = {**f, "unexpected_count": len(mine), "unexpected_percent": None, "unexpected_index_list": mine,
                        "partial_unexpected_list": [str(idx.get(column)) for idx in mine[:10]] if column else []}
        if suite_name == "run_meta":             # one row per archive: its value says it all
            one["unexpected_index_list"] = []
        out.append(one)
    return out


class Validator:
    """A GX file context (results kept under ``data/interim/gx``) with the three suites.

    Each suite runs through its ``ValidationDefinition``, which stores the results for Data Docs
    (a ``Checkpoint`` around it would only check the definitions' freshness once more per run:
    no actions are needed): first as ``BOOLEAN_ONLY``, and only a suite that fails again in its
    :func:`result_format`, stored over the first (most suites pass, and the full formats cost
    Great Expectations most of its time).  :meth:`build_docs` renders the Data Docs site once at
    the end of the night (rendering after every archive is quadratic).
    """

    def __init__(self, suites: dict[str, list], *, project_dir: Path | None, docs_dir: Path | None):
        logging.getLogger("great_expectations").setLevel(logging.WARNING)
        import great_expectations as gx

        self.gx = gx
        if project_dir is None:
            self.context = gx.get_context(mode="ephemeral")
        else:
            project_dir.mkdir(parents=True, exist_ok=True)
            self.context = gx.get_context(mode="file", project_root_dir=str(project_dir))
        try:
            from great_expectations.data_context.types.base import ProgressBarsConfig

            self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        except Exception:  # progress bars are cosmetic; other GX versions may lack the knob
            pass
        self.docs = docs_dir is not None
        self.docs_dir = docs_dir
        if docs_dir is not None:
            site = {
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                                  "base_directory": str(docs_dir)},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            }
            for name in list(self.context.get_site_names()):
                self.context.delete_data_docs_site(name)
            self.context.add_data_docs_site(site_name="regresslab", site_config=site)
        source = self.context.data_sources.add_or_update_pandas("regresslab")
        self.definitions = {}
        for name, expectations in suites.items():
            suite = self.context.suites.add_or_update(gx.ExpectationSuite(name=name, expectations=expectations))
            asset = source.add_dataframe_asset(name)
            batch = asset.add_batch_definition_whole_dataframe("whole")
            self.definitions[name] = self.context.validation_definitions.add_or_update(
                gx.ValidationDefinition(name=name, data=batch, suite=suite))

    def run(self, suite_name: str, frame: pd.DataFrame, run_id: str) -> list[Failure]:
        """The failed expectations of ``frame`` under one suite.  Great Expectations sees the frame's
        text through :func:`gx_view` (bounded, HTML-escaped: it prints values into its Data Docs
        unescaped); the counters it names are mapped back to their own names."""
        view, names = gx_view(frame)
        definition, ident = self.definitions[suite_name], self.gx.RunIdentifier(run_name=f"{run_id}")
        batch = {"dataframe": view}
        result = definition.run(batch_parameters=batch, result_format="BOOLEAN_ONLY", run_id=ident)
        if not result.success:      # what failed, and where: the suite again in its full format, stored over it
            result = definition.run(batch_parameters=batch, result_format=result_format(suite_name), run_id=ident)
        failed = failed_expectations(suite_name, result)
        for f in failed:
            for idx in f["unexpected_index_list"]:
                if "counter" in idx:
                    idx["counter"] = names.get(idx["counter"], idx["counter"])
        return failed

    def build_docs(self, run_names: Iterable[str] | None = None) -> int | None:
        """Render the Data Docs site: every page, or, given ``run_names`` and a site that exists, the
        results of those runs, each result whose page is missing, the suites' pages and the index (a
        night renders the pages of its own archives, not the whole history's again).  How many
        pages were asked for (None: every page)."""
        if self.docs_dir is None:
            return None
        wanted = self.docs_pages(run_names)
        self.context.build_data_docs(site_names=["regresslab"], resource_identifiers=wanted)
        protect_docs(self.docs_dir)
        return None if wanted is None else len(wanted)

    def docs_pages(self, run_names: Iterable[str] | None) -> list | None:
        """The resources :meth:`build_docs` renders (GX's resource identifiers); None for all."""
        if run_names is None or self.docs_dir is None or not (self.docs_dir / "index.html").exists():
            return None
        docs_dir = self.docs_dir
        from great_expectations.data_context.types.resource_identifiers import ExpectationSuiteIdentifier

        names = set(run_names)
        wanted: list = [ExpectationSuiteIdentifier(name=name) for name in self.definitions]   # never empty
        for key in self.context.validation_results_store.list_keys():
            *folders, name = key.to_tuple()
            page = Path(docs_dir, "validations", *folders, f"{name}.html")
            if key.run_id.run_name in names or not page.exists():
                wanted.append(key)
        return wanted


class Checked(NamedTuple):
    """What validating one archive found: the run, its host frames as read, the run-level
    failures (any quarantines the run), the counters dropped from it and the counter summary."""
    raw: archive.RawRun | None
    frames: dict[str, pd.DataFrame]
    failures: list[Failure]
    dropped: list[DroppedCounter]
    summary: pd.DataFrame | None


class Read(NamedTuple):
    """An archive read for the suites, before any of them runs: its ``run.json``, its hosts and
    the counters they recorded, the rows the suites check (the counter summary and the hosts'
    coverage; its ``run.json`` row needs the counters the summary's suite drops, so it is made
    after), and the faults found in reading it (any quarantines it; None rows then).  ``raw`` and
    ``frames`` are the archive as read, kept where it was read (a worker child stages the frames
    and sends the rest)."""
    archive: str                      # the run_id the archive's name gives: its rows' ``archive``
    meta: dict[str, Any] | None
    hosts: list[str]
    counters: list[str]
    summary: pd.DataFrame | None
    cover: pd.DataFrame | None
    failures: list[Failure]
    raw: archive.RawRun | None = None
    frames: dict[str, pd.DataFrame] = {}


def read_archive(path: Path, params: dict[str, Any]) -> Read:
    """Read and parse one archive and derive the rows the suites check; any fault of reading or
    interpreting it is a failure, never an exception."""
    expected_id = (archive.archive_stem(path) or path.name) if path.is_file() else path.name
    try:
        return _read_archive(path, expected_id, params)
    except archive.ArchiveError as exc:
        return Read(expected_id, None, [], [], None, None, [{"suite": "archive", "expectation": "readable_safe_archive",
                                                             "reason": str(exc)}])
    except (Exception, RecursionError, MemoryError) as exc:      # noqa: BLE001 -- any fault of one archive
        # raw data is immutable: an archive that breaks a reader would break every night; it is
        # quarantined with the fault named, and the night goes on (a fault of ours shows in the log)
        log.exception("could not read or interpret %s", path.name)
        return Read(expected_id, None, [], [], None, None, [_uninterpretable(exc)])


def _uninterpretable(exc: BaseException) -> Failure:
    return {"suite": "archive", "expectation": "readable_safe_archive",
            "reason": f"could not read or interpret the archive: {type(exc).__name__}: {str(exc)[:300]}"}


def _read_archive(path: Path, expected_id: str, params: dict[str, Any]) -> Read:
    raw = run_directory.read_run(path, params["limits"], params.get("ingest") or {})
    archive.check_cells(raw.csv_bytes, params["limits"])
    frames = {h: archive.parse_counter_csv(b, h, params["limits"]) for h, b in sorted(raw.csv_bytes.items())}
    counts = collections.Counter(str(c) for f in frames.values() for c in f.columns if c != "timestamp")
    dupes = sorted(c for c, n in counts.items() if n > 1)
    failures: list[Failure] = []
    if dupes:
        failures.append({"suite": "archive", "expectation": "unique_counter_names",
                         "reason": f"counter names repeated across hosts: {dupes[:10]}"})
    meta = raw.meta if isinstance(raw.meta, dict) else {}
    summary = counter_summary(frames, meta.get("environment"), units=params["units"],
                              host_components=[c.lower() for c in params["host_components"]],
                              cores_key=params["cores_key"], slack=params["range_slack"])
    started = parse_started_at(meta.get("started_at"))
    duration = meta.get("duration_s")
    duration = float(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool) else None
    cover = host_coverage(frames, started_at=started, duration_s=None if duration is None or pd.isna(duration)
                          else duration, min_samples=params["min_samples_per_host"],
                          min_coverage=params["min_coverage"], min_samples_floor=params["min_samples_floor"])
    return Read(expected_id, raw.meta, sorted(frames), sorted(counts), summary, cover, failures, raw, frames)


def check_reads(reads: list[Read], validator: "Validator", run_name: str) -> list[tuple[list[Failure],
                                                                                       list[DroppedCounter]]]:
    """The three suites on the rows of every archive read at once (one validation per suite, under
    ``run_name``, instead of three per archive: each costs Great Expectations the same whatever its
    rows); per archive, in ``reads``' order, its failures and the counters dropped from it.

    ``counter_values`` runs first: its failures drop counters, and ``run_meta`` then checks that
    enough of them (and the load counter) are left."""
    readable = [r for r in reads if r.summary is not None]
    found: dict[str, tuple[list[Failure], list[DroppedCounter]]] = {r.archive: (list(r.failures), []) for r in reads}
    if readable:
        values = validator.run("counter_values", _stack([(r.archive, r.summary) for r in readable]), run_name)
        rows = []
        for r in readable:
            dropped = dropped_counters(r.summary, for_archive(values, r.archive, "counter_values"))
            found[r.archive] = (found[r.archive][0], dropped)
            try:
                assert r.meta is not None, "an archive with counters has its run.json"
                rows.append((r.archive, meta_frame(r.meta, archive_run_id=r.archive, counters=set(r.counters),
                                                   dropped={d["counter"] for d in dropped}, hosts=len(r.hosts))))
            except (Exception, RecursionError) as exc:      # noqa: BLE001 -- a run.json no check can read
                found[r.archive][0].append(_uninterpretable(exc))
        for name, stacked in (("run_meta", _stack(rows)), ("host_coverage", _stack([(r.archive, r.cover)
                                                                                    for r in readable]))):
            if stacked is None:
                continue
            failed = validator.run(name, stacked, run_name)
            for r in readable:
                found[r.archive][0].extend(for_archive(failed, r.archive, name))
    return [found[r.archive] for r in reads]


def _stack(parts: list[tuple[str, pd.DataFrame]]) -> pd.DataFrame | None:
    """The frames of several archives as one, each row marked with its ``archive`` first."""
    frames = [f.assign(archive=a)[["archive", *f.columns]] for a, f in parts if f is not None]
    return pd.concat(frames, ignore_index=True) if frames else None


def validate_archive(path: Path, validator: Validator, params: dict[str, Any]) -> Checked:
    """Validate one archive (:func:`read_archive`, then :func:`check_reads` on it alone); any
    fault of reading or interpreting it is a failure, never an exception."""
    read = read_archive(path, params)
    (failures, dropped), = check_reads([read], validator, read.archive)
    return Checked(read.raw, read.frames, failures, dropped, read.summary)
