"""`detachlint lsp` driven end to end by a real LSP client (pygls's) over stdio."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from lsprotocol import types  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402

from conftest import ROOT  # noqa: E402

EVAL_LOOP = textwrap.dedent(
    """\
    import torch

    def evaluate(model, loader):
        model.eval()
        correct = 0
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
        return correct
    """
)


def apply_edits(text: str, edits) -> str:
    """Apply LSP text edits (UTF-16 positions; ASCII here) from the end backwards."""
    lines = text.splitlines(keepends=True)

    def offset(position: types.Position) -> int:
        return sum(len(line) for line in lines[: position.line]) + position.character

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


class Session:
    """A client connected to a `detachlint lsp` subprocess."""

    def __init__(self, root: Path, capabilities: types.ClientCapabilities = None) -> None:
        self.root = root
        self.capabilities = capabilities or types.ClientCapabilities()
        self.client = LanguageClient("detachlint-test", "1")
        self.diagnostics: asyncio.Queue = asyncio.Queue()
        self.messages: asyncio.Queue = asyncio.Queue()

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(params: types.PublishDiagnosticsParams) -> None:
            self.diagnostics.put_nowait(params)

        @self.client.feature(types.WINDOW_SHOW_MESSAGE)
        def shown(params: types.ShowMessageParams) -> None:
            self.messages.put_nowait(params)

        @self.client.feature(types.WINDOW_LOG_MESSAGE)
        def logged(params: types.LogMessageParams) -> None:
            pass

    async def __aenter__(self) -> "Session":
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        await self.client.start_io(sys.executable, "-m", "detachlint", "lsp", env=env, cwd=str(self.root))
        self.initialized = await self.client.initialize_async(
            types.InitializeParams(capabilities=self.capabilities, root_uri=self.root.as_uri())
        )
        self.client.initialized(types.InitializedParams())
        return self

    async def __aexit__(self, *exc) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()

    def open(self, path: Path, text: str) -> str:
        uri = path.as_uri()
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
        )
        return uri

    def change(self, uri: str, version: int, text: str) -> None:
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    async def next_diagnostics(self, uri: str) -> list:
        while True:
            params = await asyncio.wait_for(self.diagnostics.get(), timeout=60)
            if params.uri == uri:
                return list(params.diagnostics)


def run(coroutine):
    return asyncio.run(coroutine)


@pytest.mark.slow
def test_diagnostic_code_action_and_fix(tmp_path):
    async def scenario():
        async with Session(tmp_path) as session:
            uri = session.open(tmp_path / "evaluate.py", EVAL_LOOP)
            diagnostics = await session.next_diagnostics(uri)
            assert [d.code for d in diagnostics] == ["DL301"]
            diagnostic = diagnostics[0]
            assert diagnostic.source == "detachlint"
            assert (diagnostic.range.start.line, diagnostic.range.start.character) == (6, 20)
            assert diagnostic.code_description.href.endswith("#dl301-eval-loop-without-no-grad")
            assert "autograd on in this evaluation loop" in diagnostic.message

            actions = await session.client.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    range=diagnostic.range,
                    context=types.CodeActionContext(diagnostics=[diagnostic]),
                )
            )
            titles = [action.title for action in actions]
            assert titles == ["DL301: Wrap the loop in `torch.inference_mode()`", "DL301: ignore on this line"]
            fixed = apply_edits(EVAL_LOOP, actions[0].edit.changes[uri])
            assert "    with torch.inference_mode():\n        for x, y in loader:\n" in fixed

            session.change(uri, 2, fixed)
            assert await session.next_diagnostics(uri) == []

            # The other action, on the original text: a suppression the server respects.
            session.change(uri, 3, apply_edits(EVAL_LOOP, actions[1].edit.changes[uri]))
            assert await session.next_diagnostics(uri) == []

    run(scenario())


@pytest.mark.slow
def test_unparsable_document_and_project_config(tmp_path):
    async def scenario():
        (tmp_path / "pyproject.toml").write_text('[tool.detachlint]\nignore = ["DL301"]\n')
        async with Session(tmp_path) as session:
            broken = session.open(tmp_path / "broken.py", "import torch\ndef f(:\n")
            diagnostics = await session.next_diagnostics(broken)
            assert [(d.code, d.range.start.line) for d in diagnostics] == [("DL000", 1)]
            ignored = session.open(tmp_path / "evaluate.py", EVAL_LOOP)
            assert await session.next_diagnostics(ignored) == []

    run(scenario())


@pytest.mark.slow
def test_broken_config_is_one_clear_message(tmp_path):
    async def scenario():
        (tmp_path / "pyproject.toml").write_text('[tool.detachlint]\nselect = "DL1"\n')
        async with Session(tmp_path) as session:
            uri = session.open(tmp_path / "evaluate.py", EVAL_LOOP)
            assert await session.next_diagnostics(uri) == []
            message = await asyncio.wait_for(session.messages.get(), timeout=30)
            assert message.type == types.MessageType.Error
            assert "pyproject.toml" in message.message and "select" in message.message

    run(scenario())


@pytest.mark.slow
def test_hostile_documents_get_a_diagnostic_and_the_server_stays_up(tmp_path):
    hostile = {
        "deep.py": "import torch\nx = " + "(" * 5000 + "1" + ")" * 5000 + "\n",
        "bom_then_deep.py": "\ufeffimport torch\n\ufeff" + "[" * 5000 + "\n",
        "nul.py": "import torch\nx = 1\x00\n",
        "surrogate.py": "import torch\nx = '\ud800'\n",  # JSON can carry a lone surrogate
    }

    async def scenario():
        async with Session(tmp_path) as session:
            for name, text in hostile.items():
                diagnostics = await session.next_diagnostics(session.open(tmp_path / name, text))
                assert [d.code for d in diagnostics] == ["DL000"], name
            untitled = "untitled:Untitled-1"
            session.client.text_document_did_open(
                types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=untitled, language_id="python", version=1, text=EVAL_LOOP))
            )
            assert [d.code for d in await session.next_diagnostics(untitled)] == ["DL301"]
            # Code actions for a document never opened, with data the server did not write.
            here = types.Range(start=types.Position(0, 0), end=types.Position(0, 0))
            forged = types.Diagnostic(range=here, message="m", source="detachlint", code="DL301", data={"edits": [{"line": "x"}]})
            for uri in ((tmp_path / "never_opened.py").as_uri(), untitled):
                actions = await session.client.text_document_code_action_async(
                    types.CodeActionParams(types.TextDocumentIdentifier(uri=uri), here, types.CodeActionContext(diagnostics=[forged]))
                )
                assert all("ignore on this line" in action.title for action in actions or [])
            later = session.open(tmp_path / "evaluate.py", EVAL_LOOP)
            assert [d.code for d in await session.next_diagnostics(later)] == ["DL301"]

    run(scenario())


MODEL_CELL = "import torch\nfrom torch import nn\n\nmodel = nn.Linear(4, 2)"
NOTEBOOK_EVAL_CELL = "model.eval()\nouts = []\nfor x in loader:\n    outs.append(model(x).softmax(-1).tolist())"


@pytest.mark.slow
def test_notebook_documents_get_diagnostics_per_cell(tmp_path):
    """LSP 3.17 notebook sync, as VS Code sends it: one text document a cell."""

    # The client says it syncs notebooks, as VS Code does.
    notebooks = types.ClientCapabilities(
        notebook_document=types.NotebookDocumentClientCapabilities(
            synchronization=types.NotebookDocumentSyncClientCapabilities()
        )
    )

    async def scenario():
        async with Session(tmp_path, notebooks) as session:
            sync = session.initialized.capabilities.notebook_document_sync
            assert sync is not None and sync.notebook_selector
            notebook_uri = (tmp_path / "eval.ipynb").as_uri()
            cells = [
                (types.NotebookCellKind.Markup, "markdown", "# Evaluate"),
                (types.NotebookCellKind.Code, "python", MODEL_CELL),
                (types.NotebookCellKind.Code, "python", NOTEBOOK_EVAL_CELL),
            ]
            cell_uris = [f"vscode-notebook-cell:{tmp_path.as_posix()}/eval.ipynb#cell{i}" for i in range(len(cells))]
            session.client.notebook_document_did_open(
                types.DidOpenNotebookDocumentParams(
                    notebook_document=types.NotebookDocument(
                        uri=notebook_uri,
                        notebook_type="jupyter-notebook",
                        version=1,
                        cells=[types.NotebookCell(kind=kind, document=uri) for (kind, _, _), uri in zip(cells, cell_uris)],
                    ),
                    cell_text_documents=[
                        types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
                        for (_, language, text), uri in zip(cells, cell_uris)
                    ],
                )
            )
            eval_cell = await session.next_diagnostics(cell_uris[2])
            assert [d.code for d in eval_cell] == ["DL301"]
            # Line 4 of the cell, at `model(x)`: the cell's own coordinates.
            assert (eval_cell[0].range.start.line, eval_cell[0].range.start.character) == (3, 16)

            # The cell is edited into the fixed loop: its diagnostics clear.
            fixed = "model.eval()\nouts = []\nwith torch.no_grad():\n    for x in loader:\n        outs.append(model(x).softmax(-1).tolist())"
            session.client.notebook_document_did_change(
                types.DidChangeNotebookDocumentParams(
                    notebook_document=types.VersionedNotebookDocumentIdentifier(uri=notebook_uri, version=2),
                    change=types.NotebookDocumentChangeEvent(
                        cells=types.NotebookDocumentCellChanges(
                            text_content=[
                                types.NotebookDocumentCellContentChanges(
                                    document=types.VersionedTextDocumentIdentifier(uri=cell_uris[2], version=2),
                                    changes=[types.TextDocumentContentChangeWholeDocument(text=fixed)],
                                )
                            ]
                        )
                    ),
                )
            )
            assert await session.next_diagnostics(cell_uris[2]) == []

    run(scenario())


@pytest.mark.slow
def test_notebook_opened_as_json_text_gets_diagnostics_on_its_code_lines(tmp_path):
    import json

    notebook = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": MODEL_CELL.splitlines(keepends=True)},
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": NOTEBOOK_EVAL_CELL.splitlines(keepends=True)},
        ],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    text = json.dumps(notebook, indent=1) + "\n"

    async def scenario():
        async with Session(tmp_path) as session:
            uri = session.open(tmp_path / "eval.ipynb", text)
            diagnostics = await session.next_diagnostics(uri)
            assert [d.code for d in diagnostics] == ["DL301"]
            start = diagnostics[0].range.start
            assert text.splitlines()[start.line][start.character :].startswith("model(x)")
            assert diagnostics[0].message.startswith("cell 2: ")

    run(scenario())


def test_a_diagnostic_says_the_findings_severity():
    from detachlint.finding import Finding
    from detachlint.lsp import to_diagnostic

    def severity(level):
        finding = Finding(path="x.py", line=1, column=1, code="DL301", name="eval-loop-without-no-grad",
                          end_line=1, end_column=2, message="m", severity=level)
        return to_diagnostic(finding, ["x"]).severity

    assert severity("error") == types.DiagnosticSeverity.Error
    assert severity("warning") == types.DiagnosticSeverity.Warning
    assert severity("info") == types.DiagnosticSeverity.Information
