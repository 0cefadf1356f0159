"""`detachlint lsp`: diagnostics and quick fixes for editors, over stdio.

Each open document is linted the way `detachlint check - --stdin-filename
PATH` would lint it: the project's config (found upward from the file),
per-file ignores and suppression comments all apply. Linting runs on open,
on save, and a short pause after the last change.

Jupyter notebooks come two ways. An editor that syncs notebooks (LSP 3.17
notebook documents, as VS Code does) sends each cell as a text document:
the cells are linted together as one program and each cell gets its own
diagnostics. An `.ipynb` opened as plain text (JSON) is linted the same
way, its diagnostics placed on the JSON lines that hold the cells' code.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Dict, List, Optional

from lsprotocol import types
from pygls import uris
from pygls.lsp.server import LanguageServer

from detachlint import __version__, rule_url
from detachlint.analysis.index import hash_nodes_natively
from detachlint.api import CheckOptions, check
from detachlint.errors import UsageError
from detachlint.finding import Edit, Finding
from detachlint.notebook import NotebookError, Program, is_notebook

DEBOUNCE_SECONDS = 0.3
SOURCE = "detachlint"


def _utf16_column(line_text: str, column: int) -> int:
    """A 1-based code-point column as LSP's default 0-based UTF-16 offset."""
    return len(line_text[: column - 1].encode("utf-16-le")) // 2


def _position(lines: List[str], line: int, column: int) -> types.Position:
    if line - 1 >= len(lines):
        return types.Position(line=len(lines), character=0)
    return types.Position(line=line - 1, character=_utf16_column(lines[line - 1], column))


def _range(lines: List[str], line: int, column: int, end_line: int, end_column: int) -> types.Range:
    return types.Range(start=_position(lines, line, column), end=_position(lines, end_line, end_column))


def _edit_json(edit: Edit) -> dict:
    return {"line": edit.line, "column": edit.column, "end_line": edit.end_line,
            "end_column": edit.end_column, "content": edit.content}


def _on_json_lines(finding: Finding, source: bytes, lines: List[str]) -> Finding:
    """A notebook finding placed on the JSON line that holds its code."""
    if finding.cell is None:
        return finding
    try:
        program = Program.from_bytes(source)
    except NotebookError:
        program = None
    where = program.json_position(finding.cell, finding.line, finding.column) if program else None
    end = program.json_position(finding.cell, finding.end_line, finding.end_column) if program else None
    if where is None:
        return dataclasses.replace(finding, cell=None, line=1, column=1, end_line=1, end_column=1, fix=None,
                                   message=f"cell {finding.cell}, line {finding.line}: {finding.message}")
    end = end or where
    # The edits are in the cell's coordinates: not offered on the JSON text.
    return dataclasses.replace(finding, cell=None, line=where[0], column=where[1], end_line=end[0], end_column=end[1], fix=None,
                               message=f"cell {finding.cell}: {finding.message}")


def to_diagnostic(finding: Finding, lines: List[str]) -> types.Diagnostic:
    data = None
    if finding.fix is not None:
        data = {
            "title": finding.fix.title,
            "applicability": finding.fix.applicability,
            "edits": [_edit_json(e) for e in finding.fix.edits],
        }
    severity = {"warning": types.DiagnosticSeverity.Warning, "info": types.DiagnosticSeverity.Information}.get(
        finding.severity, types.DiagnosticSeverity.Error
    )
    return types.Diagnostic(
        range=_range(lines, finding.line, finding.column, finding.end_line, finding.end_column),
        message=finding.message,
        severity=severity,
        code=finding.code,
        code_description=types.CodeDescription(href=rule_url(finding.code, finding.name)) if finding.code != "DL000" else None,
        source=SOURCE,
        data=data,
    )


def _text_edits(data, lines: List[str]) -> Optional[List[types.TextEdit]]:
    """The edits `to_diagnostic` stored in a diagnostic's data; None for data
    of any other shape (the client sends it back, possibly changed)."""
    try:
        return [
            types.TextEdit(
                range=_range(lines, int(e["line"]), int(e["column"]), int(e["end_line"]), int(e["end_column"])),
                new_text=str(e["content"]),
            )
            for e in data["edits"]
        ]
    except (KeyError, TypeError, ValueError):
        return None


NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithCells(
            notebook=types.NotebookDocumentFilterNotebookType(notebook_type="jupyter-notebook"),
            cells=[types.NotebookCellLanguage(language="python")],
        )
    ],
    save=True,
)


def notebook_json(cells: List[tuple]) -> bytes:
    """A minimal nbformat 4 notebook of (kind, source) cells, for the engine."""
    return json.dumps(
        {
            "cells": [{"cell_type": kind, "metadata": {}, "source": source} for kind, source in cells],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    ).encode("utf-8", "surrogatepass")


class DetachlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "detachlint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=NOTEBOOK_SYNC,
        )
        self._pending: Dict[str, asyncio.Task] = {}
        self._config_error: Optional[str] = None

    def _run(self, source: bytes, path: str, uris: List[str]):
        """`check` on one document's text; None (and the editor told) when
        the config is broken."""
        options = CheckOptions(stdin=source, stdin_filename=path, no_cache=True)
        try:
            run = check(["-"], options)
        except UsageError as error:
            # A broken config: say so once, and clear stale diagnostics.
            message = f"detachlint: {error}"
            if message != self._config_error:
                self._config_error = message
                self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))
            self.window_log_message(types.LogMessageParams(type=types.MessageType.Error, message=message))
            for uri in uris:
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
            return None
        self._config_error = None
        for error in run.errors:
            self.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=error))
        return run

    def lint(self, uri: str) -> None:
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            self.lint_notebook(notebook.uri)
            return
        document = self.workspace.get_text_document(uri)
        path = document.path or uri
        # An editor can send lone surrogates; they reach the engine as bytes
        # it cannot decode, and so as a DL000 rather than a silent failure.
        source = document.source.encode("utf-8", "surrogatepass")
        run = self._run(source, path, [uri])
        if run is None:
            return
        lines = document.source.splitlines()
        findings = run.findings
        if is_notebook(path):
            findings = [_on_json_lines(f, source, lines) for f in findings]
        diagnostics = [to_diagnostic(finding, lines) for finding in findings]
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, version=document.version, diagnostics=diagnostics)
        )

    def lint_notebook(self, notebook_uri: str) -> None:
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if notebook is None:
            return
        documents = [self.workspace.get_text_document(cell.document) for cell in notebook.cells]
        cells = [
            ("code" if cell.kind == types.NotebookCellKind.Code else "markdown", document.source)
            for cell, document in zip(notebook.cells, documents)
        ]
        path = uris.to_fs_path(notebook_uri) or notebook_uri
        if not is_notebook(path):
            path += ".ipynb"
        run = self._run(notebook_json(cells), path, [cell.document for cell in notebook.cells])
        if run is None:
            return
        by_cell: Dict[int, List[Finding]] = {}
        for finding in run.findings:
            by_cell.setdefault(finding.cell or 1, []).append(finding)
        for number, (cell, document) in enumerate(zip(notebook.cells, documents), start=1):
            lines = document.source.splitlines()
            diagnostics = [to_diagnostic(f, lines) for f in by_cell.get(number, [])]
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=cell.document, version=document.version, diagnostics=diagnostics)
            )

    def lint_later(self, uri: str, notebook: bool = False) -> None:
        pending = self._pending.pop(uri, None)
        if pending is not None:
            pending.cancel()

        async def run() -> None:
            await asyncio.sleep(DEBOUNCE_SECONDS)
            self._pending.pop(uri, None)
            if notebook:
                self.lint_notebook(uri)
            else:
                self.lint(uri)

        self._pending[uri] = asyncio.ensure_future(run())


server = DetachlintServer()


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: DetachlintServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.lint(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: DetachlintServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.lint_later(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: DetachlintServer, params: types.DidSaveTextDocumentParams) -> None:
    ls.lint(params.text_document.uri)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
def notebook_did_open(ls: DetachlintServer, params: types.DidOpenNotebookDocumentParams) -> None:
    ls.lint_notebook(params.notebook_document.uri)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
def notebook_did_change(ls: DetachlintServer, params: types.DidChangeNotebookDocumentParams) -> None:
    ls.lint_later(params.notebook_document.uri, notebook=True)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
def notebook_did_save(ls: DetachlintServer, params: types.DidSaveNotebookDocumentParams) -> None:
    ls.lint_notebook(params.notebook_document.uri)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
def notebook_did_close(ls: DetachlintServer, params: types.DidCloseNotebookDocumentParams) -> None:
    for cell in params.cell_text_documents:
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell.uri, diagnostics=[]))


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: DetachlintServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
)
def code_action(ls: DetachlintServer, params: types.CodeActionParams) -> List[types.CodeAction]:
    uri = params.text_document.uri
    document = ls.workspace.text_documents.get(uri)
    if document is None:  # not open in the editor: nothing of ours to fix
        return []
    lines = document.source.splitlines()
    actions: List[types.CodeAction] = []
    for diagnostic in params.context.diagnostics:
        if diagnostic.source != SOURCE:
            continue
        data = diagnostic.data
        edits = _text_edits(data, lines)
        if edits:
            unsafe = data.get("applicability") == "unsafe"
            actions.append(
                types.CodeAction(
                    title=f"{diagnostic.code}: {data['title']}" + (" (changes behaviour: review it)" if unsafe else ""),
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    is_preferred=not unsafe,
                    edit=types.WorkspaceEdit(changes={uri: edits}),
                )
            )
        if diagnostic.code and diagnostic.code != "DL000":
            line = diagnostic.range.start.line
            if line < len(lines) and "noqa" not in lines[line]:
                end = types.Position(line=line, character=len(lines[line].encode("utf-16-le")) // 2)
                actions.append(
                    types.CodeAction(
                        title=f"{diagnostic.code}: ignore on this line",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        edit=types.WorkspaceEdit(
                            changes={uri: [types.TextEdit(range=types.Range(start=end, end=end),
                                                          new_text=f"  # noqa: {diagnostic.code}")]}
                        ),
                    )
                )
    return actions


def serve() -> None:
    hash_nodes_natively()
    server.start_io()
