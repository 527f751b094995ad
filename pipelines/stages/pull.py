"""pull: copy new archives from the sources into ``data/raw`` (append-only).

The machinery (sources, hashing, the manifest, refusals) is :mod:`pipelines.storage.sources`;
this stage reads ``params.yaml: pull``, runs it under the data lock and writes
``data/interim/pull_summary.json``.  A night whose sources can none be listed (a missing folder,
an unreachable server, refused credentials) **fails** here, naming each source and why: a dead
mount must not pass for a night with nothing new.  One source of several missing: the night goes
on, and the night index names it.  An archive still being copied into the source waits for a
later night (``pull.settle_s``, ``pull.done_markers``); a copy that was never readable is taken again
when a readable one arrives, the first kept aside (:mod:`pipelines.storage.sources`).
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from pipelines import config
from pipelines.storage import atomic, locks
from pipelines.storage.manifest import PullSummary
from pipelines.storage.sources import pull

log = logging.getLogger("regresslab.pull")


def source_locations(params: dict) -> list[str]:
    """``pull.source`` as a list of locations: one or several; an entry may be ``{path: ...,
    ingest: true}`` (a lab's run directory, or a folder of them); relative paths are the project's."""
    sources = params["source"]
    sources = [sources] if isinstance(sources, (str, dict)) else list(sources)
    sources = [s["path"] if isinstance(s, dict) else s for s in sources]
    return [s if "://" in s or Path(s).is_absolute() else str(config.ROOT / s) for s in sources]


def nothing_listed(summary: PullSummary, params: dict) -> bool:
    """Whether every configured source failed to be listed (a night that can read nothing)."""
    return bool(summary["missing_sources"]) and len(summary["missing_sources"]) == len(source_locations(params))


@locks.holding("pull")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = config.load_params("pull")
    summary = pull(source_locations(params), config.RAW, max_archive_bytes=int(params["max_archive_bytes"]),
                   settle_s=float(params["settle_s"]), require_done=params["done_markers"] == "required")
    atomic.write_json_atomic(config.PULL_SUMMARY, summary)
    print(f"[pull] {len(summary['new'])} new, {len(summary['known'])} already present "
          f"({summary['listed_known']} known from the listing alone), {len(summary['refused'])} refused, "
          f"{len(summary['waiting'])} still being written; {summary['bytes_read']:,} bytes read")
    for w in summary["waiting"]:
        print(f"[pull] waiting for {w['run_id']}: {w['reason']}", file=sys.stderr)
    for r in summary["retaken"]:
        print(f"[pull] taken again {r['run_id']}: {r['reason']}", file=sys.stderr)
    for m in summary["missing_sources"]:
        print(f"[pull] source skipped: {m['source']}: {m['reason']}", file=sys.stderr)
    if nothing_listed(summary, params):
        missing = "; ".join(f"{m['source']}: {m['reason']}" for m in summary["missing_sources"])
        print(f"[pull] FAILED: no pull source could be listed ({missing})", file=sys.stderr)
        raise SystemExit(1)
    for r in summary["refused"]:
        print(f"[pull] refused {r['run_id']}: {r['reason']}", file=sys.stderr)


if __name__ == "__main__":
    config.install_error_hook()
    main()

