"""SARIF 2.1.0, the format code-scanning services (GitHub, GitLab, Azure)
ingest: rule metadata with help text, results with locations, fixes and
the verifier's verdict."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, List, Sequence
from urllib.parse import quote

from detachlint import HOME_URL, __version__, rule_url
from detachlint.finding import Finding

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _uri(path: str) -> dict:
    posix = Path(path).as_posix()
    if Path(path).is_absolute():
        return {"uri": Path(path).as_uri()}
    return {"uri": quote(posix), "uriBaseId": "%SRCROOT%"}


def _section(docs: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}\n+(.*?)(?=\n## |\Z)", docs, re.S | re.M)
    return " ".join(match.group(1).split()) if match else ""


def _rule(rule) -> dict:
    docs = rule.docs()
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary()},
        "fullDescription": {"text": _section(docs, "What it does") or rule.summary()},
        "help": {"text": docs, "markdown": docs},
        "helpUri": rule_url(rule.code, rule.name),
        "defaultConfiguration": {"enabled": bool(rule.default_enabled), "level": _LEVEL.get(rule.severity, "error")},
        "properties": {"fixable": rule.fix_title is not None, "tags": ["pytorch", "autograd"]},
    }


PARSE_ERROR_RULE = {
    "id": "DL000",
    "name": "parse-error",
    "shortDescription": {"text": "The file could not be parsed, so no rule could check it."},
    "defaultConfiguration": {"enabled": True, "level": "error"},
}


def _region(line: int, column: int, end_line: int, end_column: int) -> dict:
    return {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column}


def _result(finding: Finding, index: Dict[str, int]) -> dict:
    location = {"artifactLocation": _uri(finding.path)}
    text = finding.message
    if finding.cell is None:
        location["region"] = _region(finding.line, finding.column, finding.end_line, finding.end_column)
    else:
        # A notebook cell's lines are not lines of the .ipynb file: the
        # location is the file, the cell and line go in the message and in
        # the result's properties.
        text = f"cell {finding.cell}, line {finding.line}: {text}"
    result = {
        "ruleId": finding.code,
        "level": _LEVEL.get(finding.severity, "error"),
        "message": {"text": text},
        "locations": [{"physicalLocation": location}],
    }
    if finding.code in index:
        result["ruleIndex"] = index[finding.code]
    if finding.fix is not None and finding.fix.edits and finding.cell is None:
        result["fixes"] = [
            {
                "description": {"text": f"{finding.fix.title} ({finding.fix.applicability} fix)"},
                "artifactChanges": [
                    {
                        "artifactLocation": _uri(finding.path),
                        "replacements": [
                            {
                                "deletedRegion": _region(e.line, e.column, e.end_line, e.end_column),
                                "insertedContent": {"text": e.content},
                            }
                            for e in finding.fix.edits
                        ],
                    }
                ],
            }
        ]
    properties = {"name": finding.name}
    if finding.cell is not None:
        properties.update(cell=finding.cell, line=finding.line, column=finding.column)
    if finding.fix is not None:
        properties["fixApplicability"] = finding.fix.applicability
    if finding.verification is not None:
        properties["verification"] = finding.verification.to_json()
    result["properties"] = properties
    return result


def render_sarif(findings: Sequence[Finding], context) -> str:
    rules: List[dict] = [PARSE_ERROR_RULE] + [_rule(rule) for _, rule in sorted(context.rules.items())]
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    invocation = {"executionSuccessful": not context.errors}
    if context.errors:
        invocation["toolExecutionNotifications"] = [
            {"level": "error", "message": {"text": error}} for error in context.errors
        ]
    run = {
        "tool": {
            "driver": {
                "name": "detachlint",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": HOME_URL,
                "rules": rules,
            }
        },
        "invocations": [invocation],
        "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": [_result(finding, index) for finding in findings],
    }
    document = {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}
    return json.dumps(document, indent=2) + "\n"
