"""`--format html`: one self-contained page, checked as rendered by a real
headless Chromium (through chromedriver), not only as text."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

from detachlint.finding import Finding, Fix, Edit, Verification
from detachlint.report import ReportContext
from detachlint.report.html import render_html


def _browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.skip("Chromium and chromedriver are not installed (.ci/run installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1200,2000",
    ):
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=driver_path)
    return webdriver.Chrome(options=options, service=service)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """The example project and a notebook of it, verified, as one HTML report."""
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("html")
    shutil.copytree(ROOT / "examples", folder / "examples")
    cell = {"cell_type": "code", "id": "c1", "execution_count": None, "metadata": {}, "outputs": [],
            "source": (ROOT / "examples" / "train.py").read_text().replace("from models import Classifier\n", "").splitlines(keepends=True)}
    (folder / "train.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1))
    accumulate = (
        "import torch\nfrom torch import nn\n\n\ndef fit(model, loader, optimizer, criterion):\n"
        "    running = 0\n    for x, y in loader:\n        loss = criterion(model(x), y)\n"
        "        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n        running += loss\n    return running\n"
    )
    (folder / "fit.py").write_text(accumulate)
    result = run_cli("check", "examples", "train.ipynb", "fit.py", "--verify", "--format", "html", "-o", "report.html", cwd=folder)
    assert result.returncode == 1, result.stderr.decode()
    return folder / "report.html"


def test_the_page_is_self_contained(report):
    text = report.read_text()
    # Nothing is loaded from anywhere when the page is viewed.
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""", text)
    assert "<script" not in text and "@import" not in text


@pytest.mark.slow
def test_rendered_page_shows_every_finding_and_picture(report, tmp_path):
    data = json.loads(run_cli("check", "examples", "train.ipynb", "fit.py", "--format", "json", cwd=report.parent).stdout)
    browser = _browser()
    try:
        browser.get(report.as_uri())
        by = pytest.importorskip("selenium.webdriver.common.by").By
        articles = browser.find_elements(by.CSS_SELECTOR, "article.finding")
        # Every finding, each shown with its place, message, code and verdict.
        assert len(articles) == len(data)
        shown = {(a.get_attribute("data-code"), a.find_element(by.CLASS_NAME, "where").text) for a in articles}
        expected = set()
        for d in data:
            cell = f"cell {d['cell']}:" if d["cell"] else ""
            expected.add((d["code"], f"{d['path']}:{cell}{d['line']}:{d['column']}"))
        assert shown == expected
        for article in articles:
            assert article.is_displayed() and article.size["height"] > 40
            assert article.find_element(by.CSS_SELECTOR, "pre.excerpt .hit").is_displayed()
            verdict = article.find_element(by.CSS_SELECTOR, ".verdict")
            assert verdict.text.split(":")[0] in ("confirmed", "plausible", "refuted", "inconclusive")
        # The freeze: the model's tree, static and measured, with the cut-off parts in red.
        freeze = next(a for a in articles if a.get_attribute("data-code") == "DL201")
        static = freeze.find_element(by.CSS_SELECTOR, "figure.model-tree.static svg")
        measured = freeze.find_element(by.CSS_SELECTOR, "figure.model-tree.measured svg")
        for svg in (static, measured):
            assert svg.size["width"] > 200 and svg.size["height"] > 60
        assert "encoder" in static.text and "head" in measured.text
        red = [c for c in measured.find_elements(by.CSS_SELECTOR, "circle[data-state=none]")]
        assert len(red) >= 4  # encoder and its conv1, bn1, conv2
        # The evaluation loops and the accumulation: a chart of what stayed alive per step.
        charts = browser.find_elements(by.CSS_SELECTOR, "figure.chart svg")
        codes_with_charts = {c.find_element(by.XPATH, "ancestor::article").get_attribute("data-code") for c in charts}
        assert {"DL301", "DL401"} <= codes_with_charts
        for chart in charts:
            bars = chart.find_elements(by.CSS_SELECTOR, "rect.bar")
            assert len(bars) >= 2 and all(bar.size["height"] > 0 for bar in bars)
        # The fix as a diff, where one exists.
        assert browser.find_elements(by.CSS_SELECTOR, "details.fix pre.diff .add")
        browser.save_screenshot(str(tmp_path / "report.png"))
        assert (tmp_path / "report.png").stat().st_size > 10_000
    finally:
        browser.quit()


def test_a_report_without_verification_or_source_still_renders():
    finding = Finding(
        "gone.py", 3, 5, "DL101", name="data-inplace", end_line=3, end_column=9, message="m <b>",
        fix=Fix("t", "safe", (Edit(3, 5, 3, 9, "x"),)), verification=Verification("refuted", "e & f"),
    )
    page = render_html([finding], ReportContext(files=["gone.py"]))
    assert "m &lt;b&gt;" in page and "e &amp; f" in page
    assert page.count('<article class="finding') == 1
    assert render_html([], ReportContext(files=["a.py"])).count("No findings.") == 1
