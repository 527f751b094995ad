"""The night as JUnit XML: the handshake CI servers already read for load tests.

Jenkins, GitLab and GitHub show a JUnit file's test cases where test results appear (as the
Jenkins Performance plugin and Taurus' pass/fail criteria report a load test).  One test suite per
night, one test case per target run (``classname`` its system): a regressed run is a failure whose
message is the run's summary sentence and whose text names its page; a run not judged
(``no_baseline``) is skipped with its reason.  A run whose system declares objectives adds one test
case per objective, named ``<run_id> · <objective>`` (a failed objective a failure when it fails the
evaluation and the evaluation fails the run, a warning or an advisory failure in its output, an
objective not judged skipped), as k6 prints one line per threshold.  Pure: verdict files in, XML text out.  Every
text and attribute is cleared of the characters XML 1.0 forbids (a cause or version from an
archive may hold any), so the file parses whatever the archives held.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Mapping

from pipelines.safe_text import for_xml
from pipelines.storage.stage_files import VerdictFile


def xml_safe(root: ET.Element) -> ET.Element:
    """``root`` with every text, tail and attribute value cleared by :func:`for_xml`, in place."""
    for element in root.iter():
        element.text = None if element.text is None else for_xml(element.text)
        element.tail = None if element.tail is None else for_xml(element.tail)
        for key, value in list(element.attrib.items()):
            element.set(key, for_xml(value))
    return root


def objective_cases(suite: ET.Element, run_id: str, doc: VerdictFile) -> tuple[int, int, int]:
    """One test case per objective of the run's evaluation (module docstring); (cases, failures, skipped)."""
    gate = doc.get("objectives")
    cases = failures = skipped = 0
    if gate is None:
        return cases, failures, skipped
    for o in gate["objectives"]:
        case = ET.SubElement(suite, "testcase", classname=f"{doc.get('system') or 'regresslab'}.objectives",
                             name=f"{run_id} · {o.get('display_name') or o.get('sli')}", time="0")
        cases += 1
        value = "no value" if o.get("value") is None else f"{o['value']:.6g}"
        text = (f"{o.get('aggregate')}({o.get('counter')}) = {value}; compared with {o.get('compared_value')}; "
                f"pass {o.get('pass')}; warning {o.get('warning')}; violated {o.get('violated')}")
        if o.get("result") == "fail" and gate.get("result") == "fail" and not gate.get("advisory"):
            failures += 1
            ET.SubElement(case, "failure", message=f"objective failed: {', '.join(o.get('violated') or ())}",
                          type="objective").text = text
        elif o.get("result") in ("no_comparison", "no_value", "info"):
            skipped += 1
            ET.SubElement(case, "skipped", message=f"not judged: {o.get('result')}")
        else:
            ET.SubElement(case, "system-out").text = f"{o.get('result')}: {text}"
    return cases, failures, skipped


def night_xml(night: str, docs: dict[str, VerdictFile], *, index: Path | None = None) -> str:
    """The JUnit XML of one night from its runs' verdict files (run id -> verdict document)."""
    failed = [d for d in docs.values() if d.get("verdict") == "fail"]
    skipped = [d for d in docs.values() if d.get("verdict") == "no_baseline"]
    suite = ET.Element("testsuite", name=f"regresslab night {night}", tests=str(len(docs)),
                       failures=str(len(failed)), errors="0", skipped=str(len(skipped)))
    counts = [len(docs), len(failed), len(skipped)]
    if index is not None:
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="night_index", value=str(index))
    for run_id, doc in sorted(docs.items()):
        case = ET.SubElement(suite, "testcase", classname=str(doc.get("system") or "regresslab"), name=run_id,
                             time="0")
        summary = str(doc.get("summary") or "")
        page = f"reports/runs/{run_id}.html"
        if doc.get("verdict") == "fail":
            cause: Mapping[str, Any] = doc.get("cause") or {}
            label = cause.get("label") if cause.get("known") else ("unknown" + (f" (nearest {cause.get('label')})"
                                                                                 if cause.get("label") else ""))
            element = ET.SubElement(case, "failure", message=summary or "regressed", type="regression")
            element.text = (f"{summary}\nprobable cause: {label}\nflagged: "
                            f"{', '.join((doc.get('flagged_counters') or [])[:10])}\npage: {page}")
        elif doc.get("verdict") == "no_baseline":
            reason = ((doc.get("details") or {}).get("no_baseline") or "no baseline")
            ET.SubElement(case, "skipped", message=f"not judged: {reason}")
        elif summary:
            out = ET.SubElement(case, "system-out")
            out.text = f"{summary}\npage: {page}"
        counts = [a + b for a, b in zip(counts, objective_cases(suite, run_id, doc))]
    suite.set("tests", str(counts[0]))
    suite.set("failures", str(counts[1]))
    suite.set("skipped", str(counts[2]))
    ET.indent(xml_safe(suite))
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
