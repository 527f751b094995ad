"""memo: what makes a stage's result reusable, and what does not (the second night)."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from pipelines import codebase, config
from pipelines.storage import atomic, memo


def write_info(run_id: str, key: str) -> None:
    config.info_path(run_id).parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json_atomic(config.info_path(run_id), {"run_id": run_id, "key": key})


@pytest.fixture()
def index(tree):
    for r in ("s-1", "s-2", "s-3"):
        write_info(r, f"frame-{r}")
    return {r: {"system": "s", "verdict": "pass", "environment": {"db": "a"}, "started_at": f"2026-01-0{i}"}
            for i, r in enumerate(("s-1", "s-2", "s-3"), 1)}


def test_the_key_moves_with_what_the_stage_read_and_nothing_else(index):
    key = memo.input_key("detect", index, {"passed": ["s-1", "s-2"]}, detect={"a": 1})
    assert key == memo.input_key("detect", index, {"passed": ["s-1", "s-2"]}, detect={"a": 1})
    # a new target of the same system, which this result did not read: the same key
    assert key == memo.input_key("detect", {**index, "s-4": {"system": "s", "verdict": None}},
                                 {"passed": ["s-1", "s-2"]}, detect={"a": 1})
    moved = [
        memo.input_key("detect", index, {"passed": ["s-1", "s-3"]}, detect={"a": 1}),               # another run
        memo.input_key("detect", index, {"passed": ["s-1", "s-2"]}, detect={"a": 2}),               # a param
        memo.input_key("detect", {**index, "s-2": {**index["s-2"], "verdict": "fail"}},            # a triage
                       {"passed": ["s-1", "s-2"]}, detect={"a": 1}),
        memo.input_key("control_charts", index, {"passed": ["s-1", "s-2"]}, detect={"a": 1}),       # other code
    ]
    write_info("s-2", "frame-s-2-renormalised")                                                    # new frame
    moved.append(memo.input_key("detect", index, {"passed": ["s-1", "s-2"]}, detect={"a": 1}))
    assert len({key, *moved}) == len(moved) + 1


def test_the_code_digest_covers_the_stage_and_what_it_imports():
    """The detect stage imports the rule ensemble, which imports the p-values; the config
    imports one project module, the schema of its parameters."""
    known = {"pipelines.config", "pipelines.stats.pvalues", "pipelines.storage.store"}
    assert codebase.project_imports("from pipelines import config\nfrom pipelines.stats import pvalues\n"
                                    "import pipelines.storage.store\n", known) == known
    assert codebase.project_imports("def f():\n    from pipelines.stats.pvalues import simes\n",
                                    known) == {"pipelines.stats.pvalues"}
    assert {"pipelines.detectors.rules.ensemble", "pipelines.stats.pvalues"} <= codebase.closure(
        "pipelines.stages.detect")
    assert codebase.closure("pipelines.config") == {"pipelines.config", "pipelines.params_schema", "pipelines.safe_text"}
    assert codebase.code_digest("pipelines.stages.detect") != codebase.code_digest("pipelines.stages.control_charts")
    assert len(codebase.code_digest("pipelines.config")) == 64


def test_a_closure_read_module_by_module_is_the_closure_in_the_whole_graph():
    """``closure`` reads only the modules it reaches; the set is the one the whole graph gives,
    for every module, and the whole package is not read for one stage's key."""
    codebase.imports_of.cache_clear()
    codebase.closure("pipelines.stages.pull")
    read = codebase.imports_of.cache_info().currsize
    assert read == len(codebase.closure("pipelines.stages.pull")) < len(codebase.module_files())
    graph = codebase.import_graph()
    for module in graph:
        assert codebase.closure(module) == codebase.closure(module, graph), module


def test_a_result_is_reused_only_under_its_own_key(tree):
    path = tree / "out" / "r.json"
    assert memo.reuse(path, "k1") is None                                    # nothing written yet
    written = memo.write(path, {"verdict": "pass"}, "k1")
    assert written == {"verdict": "pass", "input_key": "k1"}
    assert memo.reuse(path, "k1") == written and memo.reuse(path, "k2") is None
    path.write_text('{"verdict": "pa')                                        # torn: computed again
    assert memo.reuse(path, "k1") is None
    table = tree / "out" / "t.parquet"
    assert not memo.reuse_parquet(table, "k1")
    frame = pd.DataFrame({"x": [1.0, 2.0]}, index=["a", "b"])
    memo.write_parquet(table, frame, "k1")
    assert memo.reuse_parquet(table, "k1") and not memo.reuse_parquet(table, "k2")
    pd.testing.assert_frame_equal(pd.read_parquet(table), frame)
    assert json.loads(json.dumps(memo.reuse(path.with_name("none.json"), "k1"))) is None


def test_a_page_carries_its_key_in_its_head(tree):
    key = "ab" * 32
    html = memo.stamp_html("<!doctype html><html><head><title>t</title></head><body></body></html>", key)
    assert html.startswith('<!doctype html><html><head><meta name="regresslab-input-key" content="' + key + '">')
    page = tree / "p.html"
    assert not memo.reuse_html(page, key)
    page.write_text(html)
    assert memo.reuse_html(page, key) and not memo.reuse_html(page, "cd" * 32)
    with pytest.raises(ValueError, match="<head>"):
        memo.stamp_html("<p>no head</p>", key)


def test_a_comment_or_a_docstring_is_no_change_of_the_code():
    """The code's part of a stored result's key (codebase.code_form): the same for a source with
    other comments, docstrings and layout; another for a changed constant, name or statement."""
    base = 'def f(x):\n    return x + 1\n'
    same = ('"""A module doc."""\n# a comment\n\n\ndef f(x):   # trailing\n    """What f does."""\n'
            '    return (x +\n            1)\n')
    assert codebase.code_form(base) == codebase.code_form(same)
    for changed in ('def f(x):\n    return x + 2\n', 'def g(x):\n    return x + 1\n',
                    'def f(x):\n    print(x)\n    return x + 1\n', 'def f(x):\n    "doc"\n    return x\n'):
        assert codebase.code_form(changed) != codebase.code_form(base)
    # a function that is only a docstring still is a function
    assert codebase.code_form('def f():\n    """doc"""\n') == codebase.code_form('def f():\n    pass\n')
