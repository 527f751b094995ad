"""triage: an analyst confirms or corrects a night's verdict (Nguyen 2017, steps S4-S5).

``python -m pipelines.cli.triage RUN_ID --verdict pass|fail [--cause C] [--counters ...]
--by NAME``, ``--undo``, ``--list``.  Decisions go to the append-only
``data/triage/log.jsonl`` (:mod:`pipelines.storage.triage_log`); ``validate`` applies them.
"""
from __future__ import annotations

import argparse
import logging
import sys
from datetime import datetime, timezone

from pipelines import config
from pipelines.systems import history
from pipelines.safe_text import for_terminal, text_problem
from pipelines.storage import locks, manifest, store
from pipelines.storage.triage_log import (VERDICTS, Replaced, append, apply_triage, decision, read_log, triage_state,
                                          undo)

log = logging.getLogger("regresslab.triage")


def main(argv: list[str] | None = None) -> None:
    """Arguments first (``--help`` and a mistake never wait), then ``--list`` without any lock (it
    reads the validated index, written atomically, and the append-only log), and a decision under
    the data lock (it appends to the log a night's ``validate`` reads)."""
    parser = argparse.ArgumentParser(prog="python -m pipelines.cli.triage", description=__doc__.split("\n")[0])
    parser.add_argument("run_id", nargs="?")
    parser.add_argument("--verdict", choices=VERDICTS)
    parser.add_argument("--cause")
    parser.add_argument("--counters", nargs="*", default=None)
    parser.add_argument("--note", help=f"why (printable, at most {NOTE_LIMIT} characters)")
    parser.add_argument("--by", help=f"who decides (required with --verdict or --undo; printable, at most "
                                     f"{BY_LIMIT} characters)")
    parser.add_argument("--undo", action="store_true", help="take back the run's last decision")
    parser.add_argument("--list", action="store_true", help="the runs awaiting triage, and the decisions in force")
    args = parser.parse_args(argv)
    if args.list:
        index = manifest.read_valid_index() if config.VALID_INDEX.exists() else {}
        state = triage_state(read_log())
        current = apply_triage(index, state)
        for run in history.targets(current):      # the runs no analyst has decided on
            print(f"awaiting  {run}  ({current[run].get('system')})")
        for run, dec in sorted(state.items()):
            print(for_terminal(f"decided   {run}  {dec['verdict']}  cause={dec['cause']}  by {dec['by']} at {dec['at']}"))
        return
    if not args.run_id or (args.undo == bool(args.verdict)):
        parser.error("give a RUN_ID and either --verdict pass|fail or --undo")
    problem = text_problem("--by", args.by, BY_LIMIT, required=True) or text_problem("--note", args.note, NOTE_LIMIT)
    if problem:
        parser.error(problem)
    with locks.data_lock("triage"):
        record_decision(args)


BY_LIMIT, NOTE_LIMIT = 200, 2000


def record_decision(args: argparse.Namespace) -> None:
    """One decision (or its undo), appended to the triage log."""
    index = manifest.read_valid_index() if config.VALID_INDEX.exists() else {}
    state = triage_state(read_log())
    if args.run_id not in index:
        print(f"[triage] {for_terminal(repr(args.run_id))} is not a validated run (see data/interim/valid_runs.json)",
              file=sys.stderr)
        raise SystemExit(2)
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    if args.undo:
        if args.run_id not in state:
            print(f"[triage] {args.run_id}: no decision to undo", file=sys.stderr)
            raise SystemExit(2)
        append(undo(args.run_id, by=args.by, at=at))
        print(f"[triage] {args.run_id}: took back {state[args.run_id]['verdict']}/{state[args.run_id]['cause']} "
              f"(by {args.by}); run `dvc repro` to re-analyse")
        return
    if args.counters:
        recorded = store.run_counters(args.run_id)
        unknown = [c for c in args.counters if c not in recorded]
        if unknown:
            shown = ", ".join(repr(for_terminal(c)) for c in unknown[:5]) + (" …" if len(unknown) > 5 else "")
            print(f"[triage] --counters: {shown} not among the {len(recorded)} counters {args.run_id} recorded "
                  f"(e.g. {', '.join(sorted(recorded)[:3])})", file=sys.stderr)
            raise SystemExit(2)
    row = apply_triage(index, state)[args.run_id]
    previous: Replaced = {"verdict": row.get("verdict"), "cause": row.get("cause"),
                          "regressed_counters": row.get("regressed_counters") or []}
    try:
        rec = decision(args.run_id, verdict=args.verdict, cause=args.cause, counters=args.counters, note=args.note,
                       by=args.by, at=at, previous=previous)
    except ValueError as exc:
        print(f"[triage] {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    append(rec)
    print(f"[triage] {args.run_id}: {previous['verdict']}/{previous['cause']} -> {rec['verdict']}/{rec['cause']} "
          f"(by {args.by}); run `dvc repro` (or wait for the night) to learn from it")


if __name__ == "__main__":
    config.install_error_hook()
    main()

