"""JUnit XML, as CI test-report viewers read it: one testcase per linted
file, failing with its findings."""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, Sequence
from xml.etree import ElementTree

from detachlint.finding import Finding


def render_junit(findings: Sequence[Finding], context) -> str:
    by_file: Dict[str, List[Finding]] = defaultdict(list)
    for finding in findings:
        by_file[finding.path].append(finding)
    files = sorted(set(context.files) | set(by_file))
    failures = sum(1 for path in files if by_file.get(path))
    counts = {"tests": str(len(files)), "failures": str(failures), "errors": "0", "skipped": "0"}
    root = ElementTree.Element("testsuites", name="detachlint", **counts)
    suite = ElementTree.SubElement(root, "testsuite", name="detachlint", **counts)
    for path in files:
        case = ElementTree.SubElement(suite, "testcase", name=path, classname="detachlint", file=path)
        found = by_file.get(path)
        if found:
            failure = ElementTree.SubElement(
                case,
                "failure",
                message=f"{len(found)} finding{'s' if len(found) != 1 else ''}",
                type="detachlint",
            )
            failure.text = "".join(f"{f.location}: {f.code} {f.message}\n" for f in found)
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"
