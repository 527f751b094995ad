"""compare: any two runs side by side, every counter, sorted by what matters.

Perfherder's compare view is what people use to check a fix or argue a release: two
revisions, every test, the change and its confidence.  Here the two are runs: for each
counter both recorded, the median of each run (in the counter's unit, read as collected:
the normalised frames, not load-scaled), the change in units and in % of run A's level, a
two-sample Mann-Whitney U test on the two runs' intervals (two-sided) and its p-value
corrected for the number of counters by Benjamini-Hochberg (the false-discovery rate a
person scanning hundreds of rows expects).  The rows are sorted by practical significance,
as the verdicts are (``significance.min_effect_pct``, docs/methods/calibration.md): changes
that are both unlikely by chance and large enough to matter first, then the large ones,
then by size.  The environments and versions that differ come on top: part of a change may
be the lab's, not the build's (Foo et al. 2015, seed 003 §3).

The intervals of one run are autocorrelated, so a test on them is optimistic: the corrected
p-value ranks counters and sets aside noise, it is not a verdict (the verdicts are the
calibrated detectors' and their p-values are calibrated on the history's normal runs).

``regresslab compare RUN_A RUN_B`` prints the top rows and writes ``reports/compare/A--B.html``;
the report stage writes the page of each run against its heaviest baseline runs
(``report.compare_pages``) and links them from the run page.
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Mapping, Sequence, TypedDict

import numpy as np
import pandas as pd
from scipy.stats import mannwhitneyu     # at import: the report's pool processes are forked after it

from pipelines import config
from pipelines.stats import effects
from pipelines.reporting.summary import environment_differences, with_unit, worse_direction
from pipelines.storage.run_records import RunRecord, ValidIndex

log = logging.getLogger("regresslab.compare")

# --------------------------------------------------------------------------- pure core


def benjamini_hochberg(pvalues: list[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values, in the order given: ``q_(i) = min_{j >= i} m p_(j) / j``
    over the sorted p-values, capped at 1 (Benjamini & Hochberg 1995)."""
    p = np.asarray(pvalues, dtype=float)
    m = len(p)
    if not m:
        return []
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    q_sorted = np.minimum.accumulate(scaled[::-1])[::-1]
    q = np.empty(m)
    q[order] = np.minimum(q_sorted, 1.0)
    return [float(x) for x in q]


def two_sample_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Mann-Whitney U p-value of two runs' intervals (NaNs dropped), by the normal
    approximation with tie and continuity corrections (every counter alike, whatever its ties;
    a run has tens of intervals); 1 when either run has fewer than 2 values or both are one
    constant (nothing to test)."""
    return float(two_sample_pvalues(a[:, None], b[:, None])[0])


def two_sample_pvalues(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`two_sample_p` of every column of ``a`` (intervals x counters) against the same column
    of ``b``: the columns without a missing value in one vectorised call, the others one by one."""
    out = np.ones(a.shape[1])
    complete = np.isfinite(a).all(axis=0) & np.isfinite(b).all(axis=0)
    if len(a) >= 2 and len(b) >= 2 and complete.any():
        with np.errstate(all="ignore"):
            out[complete] = mannwhitneyu(a[:, complete], b[:, complete], alternative="two-sided", axis=0,
                                         method="asymptotic").pvalue
    for j in np.flatnonzero(~complete):
        x, y = a[:, j][np.isfinite(a[:, j])], b[:, j][np.isfinite(b[:, j])]
        if len(x) >= 2 and len(y) >= 2:
            out[j] = mannwhitneyu(x, y, alternative="two-sided", method="asymptotic").pvalue
    return np.where(np.isfinite(out), out, 1.0)


class CompareRow(TypedDict, total=False):
    """One counter of a comparison: its medians in run A and run B, the change (and in % of A's
    level), whether it matters and is significant (p, BH's q), and which way it went."""

    counter: str
    a: float
    b: float
    change: float
    change_pct: float | None
    matters: bool
    direction: str
    p: float
    q: float
    significant: bool


class Comparison(TypedDict):
    """Two runs compared (:func:`compare_frames`): the counters both recorded, in the page's order,
    and those only one of them did."""

    rows: list[CompareRow]
    only_a: list[str]
    only_b: list[str]


def compare_frames(a: pd.DataFrame, b: pd.DataFrame, directions: Sequence[Mapping[str, str]], *, min_effect_pct: float,
                   floor_share: float, alpha: float) -> Comparison:
    """Every counter both runs recorded: medians, change, p and BH-corrected q, and the sort.

    ``change_pct`` is the change in % of run A's level, measured against ``max(|level|,
    floor_share x A's 95th percentile of |x|)`` as the verdicts measure it (``effects.relative_change``),
    so a counter idling near zero is not "+400 %" for a blip.  ``matters``: at least
    ``min_effect_pct``; ``significant``: q at most ``alpha``.  Returns ``{"rows", "only_a",
    "only_b"}``; rows sorted significant-and-matters first, then matters, then by size."""
    common = [c for c in a.columns if c in b.columns and np.isfinite(a[c].to_numpy(dtype=float)).any()
              and np.isfinite(b[c].to_numpy(dtype=float)).any()]
    pvalues = two_sample_pvalues(a[common].to_numpy(dtype=float), b[common].to_numpy(dtype=float))
    rows: list[CompareRow] = []
    for c, p in zip(common, pvalues):
        va, vb = a[c].to_numpy(dtype=float), b[c].to_numpy(dtype=float)
        ma, mb = float(np.nanmedian(va)), float(np.nanmedian(vb))
        peak = float(np.nanpercentile(np.abs(va), 95))
        rel = effects.relative_change(mb, ma, peak, floor_share=floor_share)
        pct = None if not np.isfinite(rel) else 100.0 * rel
        worse = worse_direction(c, directions)
        direction = ("changed" if worse is None or ma == mb else
                     "worse" if (mb > ma) == (worse == "up") else "better")
        rows.append({"counter": c, "a": ma, "b": mb, "change": mb - ma, "change_pct": pct,
                     "matters": effects.is_significant(rel, min_effect_pct), "direction": direction,
                     "p": float(p)})
    for row, q in zip(rows, benjamini_hochberg([r["p"] for r in rows])):
        row["q"] = q
        row["significant"] = q <= alpha
    rows.sort(key=lambda r: (not (r["significant"] and r["matters"]), not r["matters"],
                             -(abs(r["change_pct"]) if r["change_pct"] is not None else np.inf), r["counter"]))
    return {"rows": rows, "only_a": sorted(set(a.columns) - set(b.columns)),
            "only_b": sorted(set(b.columns) - set(a.columns))}


def differences(meta_a: RunRecord, meta_b: RunRecord) -> list[str]:
    """What differs between the two runs besides the counters: version, system, then the lab."""
    out = [f"{k}: {meta_a.get(k, '—')} → {meta_b.get(k, '—')}" for k in ("system", "version")
           if meta_a.get(k) != meta_b.get(k)]
    return out + environment_differences(meta_b.get("environment") or {}, meta_a.get("environment") or {})


def page_name(run_a: str, run_b: str) -> str:
    """The page's file name under ``reports/compare`` (both ids checked: they become a path):
    ``A--B.html``; when either id holds ``--`` itself, ``A--B--<8 hex of the pair's hash>.html``,
    so that ``(x--y, z)`` and ``(x, y--z)`` are two pages (two ids too long for one file name are
    cut, and the hash added).  A name with one ``--`` is a pair of ids without one, read one way
    only; a name with more carries its pair's hash."""
    import hashlib

    a, b = config.identifier(run_a, "run id"), config.identifier(run_b, "run id")
    if "--" not in a and "--" not in b and len(a) + len(b) <= 240:
        return f"{a}--{b}.html"
    digest = hashlib.sha256(f"{a}\n{b}".encode()).hexdigest()[:8]
    return f"{a[:110]}--{b[:110]}--{digest}.html"          # within a file name's 255 bytes


def render(result: Comparison, runs: tuple[str, str], records: tuple[RunRecord, RunRecord], *,
           alpha: float, min_effect_pct: float, limit: int, written: frozenset[str] = frozenset()) -> str:
    """The compare page of ``runs`` (a, b) and their index ``records`` (Jinja2, autoescaped: every
    run id, counter and environment value came from an archive).  At most ``limit`` rows are shown;
    the counts say how many there are.  It links to each run's page that exists or is being
    ``written`` with it (the report stage writes a run's page and its compare pages together: the
    link must not depend on which file came first)."""
    from pipelines.reporting.pages import page_environment, style_sheet

    (run_a, run_b), (meta_a, meta_b) = runs, records

    rows = [{**r, "a_text": with_unit(r["counter"], r["a"]), "b_text": with_unit(r["counter"], r["b"]),
             "change_text": with_unit(r["counter"], r["change"]),
             "pct_text": "—" if r["change_pct"] is None else f"{r['change_pct']:+.1f} %"} for r in result["rows"]]
    return page_environment().get_template("compare.html.j2").render(
        style=style_sheet(), run_a=run_a, run_b=run_b, meta_a=meta_a, meta_b=meta_b,
        pages=[r for r in (run_b, run_a) if r in written or config.run_report_path(r, "html").exists()],
        differences=differences(meta_a, meta_b), rows=rows[:limit], total=len(rows),
        both=sum(r["significant"] and r["matters"] for r in result["rows"]), alpha=alpha, min_effect_pct=min_effect_pct,
        only_a=result["only_a"], only_b=result["only_b"])


def text_table(result: Comparison, top: int) -> str:
    """The top rows as plain text (the command's output)."""
    lines = [f"{'counter':48s} {'A':>12s} {'B':>12s} {'change':>9s} {'q':>8s}"]
    for r in result["rows"][:top]:
        pct = "—" if r["change_pct"] is None else f"{r['change_pct']:+.1f}%"
        mark = " *" if r["significant"] and r["matters"] else ""
        lines.append(f"{r['counter'][:48]:48s} {with_unit(r['counter'], r['a']):>12s} "
                     f"{with_unit(r['counter'], r['b']):>12s} {pct:>9s} {r['q']:8.2g}{mark}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- I/O shell


def compare_runs(run_a: str, run_b: str, index: ValidIndex | None = None,
                 frames: dict[str, pd.DataFrame] | None = None, written: frozenset[str] = frozenset()
                 ) -> tuple[Comparison, str]:
    """(result, page HTML) of two validated and normalised runs, with the params of the night
    (``written``: the runs whose pages are written with it, :func:`render`)."""
    from pipelines.storage import manifest, store

    index = index if index is not None else manifest.read_valid_index()
    for run in (run_a, run_b):
        config.identifier(run, "run id")
        if run not in index or not config.frame_path(run).exists():
            raise LookupError(f"{run!r} is not a validated and normalised run of this project "
                              f"(see data/interim/valid_runs.json)")
    frames = frames or {}
    fa = frames[run_a] if run_a in frames else store.load_normalized(run_a)
    fb = frames[run_b] if run_b in frames else store.load_normalized(run_b)
    report, sig = config.load_params("report"), effects.Significance.load()
    alpha = float(report["false_alarm_rate"])
    result = compare_frames(fa, fb, report["directions"], min_effect_pct=sig.min_effect_pct,
                            floor_share=sig.floor_share, alpha=alpha)
    html = render(result, (run_a, run_b), (index[run_a], index[run_b]), alpha=alpha,
                  min_effect_pct=sig.min_effect_pct, limit=int(report["compare_rows"]), written=written)
    return result, html


def write_page(run_a: str, run_b: str, html: str) -> str:
    """Write the page atomically; its path."""
    from pipelines.storage import atomic

    path = config.COMPARE_REPORTS / page_name(run_a, run_b)
    atomic.write_text_atomic(path, html)
    return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="regresslab compare",
                                     description="Two runs side by side: every counter's medians, change and "
                                                 "corrected p-value, what matters first.")
    parser.add_argument("run_a", help="the reference run (e.g. the baseline)")
    parser.add_argument("run_b", help="the run compared with it")
    parser.add_argument("--top", type=int, default=20, help="rows printed (the page holds more)")
    parser.add_argument("--no-page", action="store_true", help="print only; do not write reports/compare/…")
    parser.add_argument("--open", action="store_true", help="open the page in a browser")
    args = parser.parse_args(argv)
    try:
        result, html = compare_runs(args.run_a, args.run_b)
    except (LookupError, ValueError) as exc:
        print(f"[compare] {exc}", file=sys.stderr)
        return 2
    both = sum(r["significant"] and r["matters"] for r in result["rows"])
    print(f"[compare] {args.run_a} → {args.run_b}: {len(result['rows'])} counters, {both} changed by more than "
          f"significance.min_effect_pct and unlikely by chance (*)")
    print(text_table(result, args.top))
    if not args.no_page:
        path = write_page(args.run_a, args.run_b, html)
        print(f"[compare] page: {path}")
        if args.open:
            import webbrowser
            webbrowser.open(f"file://{path}")
    return 0
