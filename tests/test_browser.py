"""The rendered book, checked in a real browser (headless Chromium driven by Playwright).

Run by `make test` after the book is built (`pytest -m browser tests/test_browser.py`). The built
HTML is served on 127.0.0.1 and every request that would leave the machine is recorded and
refused: the book must render math, plotly and widgets from its own files. A screenshot of each
checked page is kept in book/_build/screenshots/ for people to look at.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "book" / "_build" / "html"
SHOTS = ROOT / "book" / "_build" / "screenshots"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
EXECUTED = ROOT / "book" / "chapters"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _needs(notebook: Path) -> tuple[bool, bool]:
    """(has a plotly figure, has a widget) among the executed chapter's outputs."""
    import json

    plotly = widget = False
    for cell in json.loads(notebook.read_text()).get("cells", []):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            plotly |= "plotly" in "".join(data.get("text/html", ""))
            widget |= WIDGET_VIEW in data
    return plotly, widget


def _pages() -> list[tuple[str, bool, bool]]:
    """Every executed chapter with what its outputs promise, plus the landing page. Chapter 1
    must always carry a figure and a widget: that guards the check itself."""
    pages = [("intro.html", False, False), ("chapters/01_zonotopes.html", True, True)]
    for nb in sorted(EXECUTED.glob("[0-9][0-9]_*.ipynb")):
        if nb.stem != "01_zonotopes" and not nb.name.endswith(".partial.ipynb"):
            pages.append((f"chapters/{nb.stem}.html", *_needs(nb)))
    return pages


# Pages and what must be on each: (page, needs plotly, needs a widget)
PAGES = _pages()


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _skip_or_fail(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: the browser check may not be skipped)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def server():
    if not (HTML / "index.html").exists():
        _skip_or_fail("the book is not built (run `make book` first)")
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser():
    exe = _chromium()
    if exe is None:
        _skip_or_fail(
            "Debian's chromium is not installed (book/_scripts/ensure_chromium.sh installs it as root)"
        )
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_FLAGS)
        yield b
        b.close()


@pytest.mark.parametrize(("page_path", "needs_plotly", "needs_widget"), PAGES)
def test_page_renders_offline(server, browser, page_path, needs_plotly, needs_widget):
    if not (HTML / page_path).exists():
        pytest.fail(f"{page_path} is missing from the built book")
    left_machine, failed_local, console_errors = [], [], []
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()

    def route(r):
        host = urlparse(r.request.url).hostname
        if r.request.url.startswith(("data:", "blob:")) or host in ("127.0.0.1", "localhost"):
            r.continue_()
        else:
            left_machine.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on(
        "requestfailed",
        lambda req: failed_local.append(req.url) if "127.0.0.1" in req.url else None,
    )
    page.on(
        "response",
        lambda resp: (
            failed_local.append(f"{resp.status} {resp.url}") if resp.status >= 400 else None
        ),
    )
    page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
    page.goto(f"{server}/{page_path}", wait_until="load")

    # MathJax 3 replaces TeX with <mjx-container> elements once it has typeset the page.
    if page.evaluate("() => document.querySelectorAll('.math').length"):
        page.wait_for_selector("mjx-container", state="attached", timeout=30_000)
    raw_tex = page.evaluate(
        "() => document.querySelectorAll('.math:not(:has(mjx-container))').length"
    )
    if needs_plotly:
        page.wait_for_selector(".js-plotly-plot svg.main-svg", timeout=30_000)
    if needs_widget:
        # The html-manager renders the saved widget state into live DOM widgets.
        page.wait_for_selector(".jupyter-widgets", timeout=30_000)
    page.wait_for_timeout(500)
    text = page.inner_text("body")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(
        path=str(SHOTS / (page_path.replace("/", "_").removesuffix(".html") + ".png")),
        full_page=True,
    )
    context.close()

    assert not left_machine, f"requests tried to leave the machine: {left_machine[:10]}"
    assert not failed_local, f"local requests failed: {failed_local[:10]}"
    assert raw_tex == 0, f"{raw_tex} math elements were left as raw TeX"
    assert "Traceback (most recent call last)" not in text, "an executed cell shows a traceback"
    assert not [e for e in console_errors if "mathjax" in e.lower() or "widget" in e.lower()], (
        console_errors
    )
