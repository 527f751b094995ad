"""Great Expectations' Data Docs print the values they show without escaping them.  A counter
named like a script must reach them escaped, every page must carry the report pages' policy,
and in a real browser nothing of it runs."""
from __future__ import annotations

import pytest

from pipelines.validation import suites
from tests.browser.test_report_pages import _chrome
from tests.helpers import good_frames, good_meta, members, write_tgz

EVIL = '<img src=x onerror="window.__pwned=1">'


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    root = tmp_path_factory.mktemp("docs")
    frames = good_frames()
    frames["web01"][EVIL] = 1.0                     # a counter whose name is an HTML element
    path = write_tgz(root / "sys-run-1.tar.gz", members(good_meta("sys-run-1"), frames))
    from pipelines import config
    params = config.load_params("validate")
    validator = suites.Validator(suites.suites_from_params(params), project_dir=root / "gx", docs_dir=root / "site")
    checked = suites.validate_archive(path, validator, params)
    validator.build_docs()
    return root / "site", checked


def test_the_counter_is_dropped_and_named_as_it_is(docs):
    _, checked = docs
    assert [d["counter"] for d in checked.dropped] == [EVIL]          # our own record keeps the real name
    assert checked.failures == []


def test_no_page_carries_the_markup_and_every_page_the_policy(docs):
    site, _ = docs
    pages = list(site.rglob("*.html"))
    assert len(pages) >= 4
    texts = [p.read_text(encoding="utf-8") for p in pages]
    assert not any("onerror=" in t and "<img src=x" in t for t in texts)
    assert any("&lt;img src=x onerror=" in t for t in texts)          # shown, as text
    assert all(suites.CSP_META in t for t in texts)


def test_nothing_runs_in_a_real_browser(docs):
    site, _ = docs
    page = next(p for p in site.rglob("*.html") if "counter_values" in str(p) and "validations" in str(p))
    drv = _chrome()
    try:
        drv.get(page.as_uri())
        assert "onerror" in drv.page_source or "&lt;img" in drv.page_source
        assert drv.execute_script("return window.__pwned === undefined")
    finally:
        drv.quit()
