"""validate: check every pulled archive against the data contract with Great Expectations.

The suites and the checks are :mod:`pipelines.validation.suites`; judging the archives (stored
results, budgeted children, run directories swapped in, quarantine files) is
:mod:`pipelines.validation.archives`.  This stage validates
each archive of ``data/raw`` not validated under the current suites, writes the valid runs'
host frames to ``data/interim/valid/<run_id>/``, the quarantine file of every failed
archive, the Data Docs, and the index of valid runs every later stage starts from
(analysts' triage decisions applied).  Archives are judged by ``compute.jobs`` budgeted children
at once; what the stage writes does not depend on how many.
"""
from __future__ import annotations

import logging
import time

from pipelines import config
from pipelines.storage import atomic, locks, manifest, triage_log
from pipelines.validation.archives import clean_stale, judge_all, new_validator

log = logging.getLogger("regresslab.validate")


@locks.holding("validate")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = config.load_params("validate")
    params["ingest"] = config.load_params("ingest")      # run directories are converted when read
    entries = manifest.read_manifest()
    config.VALID.mkdir(parents=True, exist_ok=True)
    config.QUARANTINE.mkdir(parents=True, exist_ok=True)
    clean_stale(config.VALID)
    index, quarantined, validator, done, checked_as = judge_all(sorted(entries.values(), key=lambda e: e.run_id),
                                                                params)
    if validator is None and not (config.VALIDATION_DOCS / "index.html").exists():
        validator = new_validator(params)
    if validator is not None:               # nothing validated and the site exists: it is current
        t_docs = time.monotonic()
        pages = validator.build_docs(run_names=checked_as)
        log.info("Data Docs: %s in %.1fs", "every page" if pages is None else f"{pages} page(s) rendered",
                 time.monotonic() - t_docs)
    # the analysts' decisions win over the archives' verdicts (storage/triage_log.py): a triaged target joins the history
    decisions = triage_log.triage_state(triage_log.read_log())
    index = triage_log.apply_triage(index, decisions)
    # runs that left the manifest cannot exist (raw is append-only); stale dirs of other keys are replaced above
    atomic.write_json_atomic(config.VALID_INDEX, {"valid": index, "quarantined": quarantined})
    print(f"[validate] {len(index)} valid, {len(quarantined)} quarantined ({len(done)} validated this time; "
          f"{sum(r in index for r in decisions)} triaged); Data Docs: {config.VALIDATION_DOCS / 'index.html'}")


if __name__ == "__main__":
    config.install_error_hook()
    main()

