"""An archive that takes more than its budget is quarantined with the budget named, and the night
goes on (``validate.max_seconds``, ``max_memory_mb``; ``storage.budget``)."""
from __future__ import annotations

import json

import pytest
import yaml

from pipelines import config
from pipelines.stages import pull, validate
from tests.helpers import run_stages

pytestmark = pytest.mark.slow     # stages end to end


def test_archives_beyond_their_time_budget_are_quarantined_and_the_night_ends(tree, tiny_lab):
    lab, truth = tiny_lab
    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["pull"]["source"] = str(lab)
    params["validate"]["max_seconds"] = 0.002         # no archive can be read and parsed in 2 ms
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    pull.main()
    validate.main()
    index = json.loads(config.VALID_INDEX.read_text())
    assert index["valid"] == {} and set(index["quarantined"]) == set(truth)
    for run_id in truth:
        reason = json.loads(config.quarantine_path(run_id).read_text())["reason"]
        assert reason.startswith("could not be judged: exceeded 0.002 s while validating " + run_id), reason
    run_stages("normalize", through="report")
    page = config.NIGHT_INDEX.read_text()
    assert all(run_id in page for run_id in truth)
