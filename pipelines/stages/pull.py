"""pull: copy new archives from the sources into ``data/raw`` (append-only).

The machinery (sources, hashing, the manifest, refusals) is :mod:`pipelines.storage.sources`;
this stage reads ``params.yaml: pull``, runs it under the data lock and writes
``data/interim/pull_summary.json``.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from pipelines import config
from pipelines.storage import archive, locks
from pipelines.storage.sources import pull

log = logging.getLogger("regresslab.pull")


@locks.holding("pull")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = config.load_params("pull")
    sources = params["source"]
    sources = [sources] if isinstance(sources, (str, dict)) else list(sources)
    # an entry may be {path: ..., ingest: true}: a lab's run directory (run.yaml), or a folder of them
    sources = [s["path"] if isinstance(s, dict) else s for s in sources]
    sources = [s if "://" in s or Path(s).is_absolute() else str(config.ROOT / s) for s in sources]
    summary = pull(sources, config.RAW, max_archive_bytes=int(params["max_archive_bytes"]))
    archive.write_json_atomic(config.PULL_SUMMARY, summary)
    print(f"[pull] {len(summary['new'])} new, {len(summary['known'])} already present, "
          f"{len(summary['refused'])} refused")
    for r in summary["refused"]:
        print(f"[pull] refused {r['run_id']}: {r['reason']}", file=sys.stderr)


if __name__ == "__main__":
    main()

