"""The rendered book, checked in a real browser (headless Chromium driven by Playwright).

Run by `make test` after the book is built (`pytest -m browser tests/test_browser.py`). The built
HTML is served on 127.0.0.1 and every request that would leave the machine is recorded and
refused: the book must render math, plotly and widgets from its own files. A screenshot of each
checked page, at 1300 and at 800 px, is kept in book/_build/screenshots/ for people to look at.

Each page is loaded once per width (the `measured` fixture): one visit takes every measurement
the checks below read, and each check asserts on its own. A page load (plotly, MathJax) costs
seconds; loading a page per check made this file take ~11 minutes of `make test`.

Beyond "it rendered", the checks are what a reader needs (issue 13), at 800 px:
- every results table's verdict column is inside the window, with no sideways scrolling;
- no printed output block (<pre>) is wider than its box (cut text, or a scrollbar to find it);
- no code cell the page shows scrolls sideways (at 1300 px too);
- no raw paper label ("tab:meb", "thm:tdof-depth") in the text a reader reads (code excepted);
- every citation links to an entry that is on the references page;
- a plotly slider, moved with the mouse, changes the figure.

And what issue 24 asks of every page (the book says what it found, with no plumbing):
- the landing page has a findings block whose verdict counts are the scorecard's, and its links
  lead to sections that exist;
- no page's text shows a commit hash, a cell id, a Python repr (dict, tuple, config) or a
  `data/` path;
- no plotly figure is wider than its container, nor its legend wider than the figure, at 800
  and at 1300 px;
- no console error on any page.

And what issue 34 asks (what the book says: current, each result once, legible):
- no page names a superseded protocol (mzlite's first reading, cpu-converged) as the one it
  reads, nor shows its table open as if it were;
- chapters 4, 5, 6 and 9 stay under their height at 800 px (RESULTS_PAGES); the scorecard is
  not narrower at 1300 px than at 800 px;
- no table is wider than its column (800 and 1300 px); no raw TeX (`$`, `\\sqrt`) in the text;
- the legend entries of one figure look different from each other, and no legend is taller
  than its plot.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
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


def _shown(cell: dict) -> bool:
    """Whether a cell's outputs reach the page (``remove-cell``/``remove-output`` keep them off)."""
    return not {"remove-cell", "remove-output"} & set(cell.get("metadata", {}).get("tags", []))


def _needs(notebook: Path) -> tuple[bool, bool]:
    """(has a plotly figure, has a widget) among the executed chapter's outputs on the page."""
    import json

    plotly = widget = False
    for cell in json.loads(notebook.read_text()).get("cells", []):
        if not _shown(cell):
            continue
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            plotly |= "plotly" in "".join(data.get("text/html", ""))
            widget |= WIDGET_VIEW in data
    return plotly, widget


def _pages() -> list[tuple[str, bool, bool]]:
    """Every executed chapter with what its outputs promise, plus the pages around them. Chapter 1
    must always carry a figure: that guards the check itself."""
    pages = [("intro.html", False, False), ("chapters/01_zonotopes.html", True, False)]
    for nb in sorted(EXECUTED.glob("[0-9][0-9]_*.ipynb")):
        if nb.stem != "01_zonotopes" and not nb.name.endswith(".partial.ipynb"):
            pages.append((f"chapters/{nb.stem}.html", *_needs(nb)))
    return pages + [("how_to_use.html", False, False), ("glossary.html", False, False)]


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
            "Debian's chromium is not installed "
            "(book/_scripts/ensure_chromium.sh installs it as root)"
        )
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_FLAGS)
        yield b
        b.close()


# The waits of a visit, each on a condition (at most 30 s: then the checks see what is there).
# MathJax's startup promise settles when its first typesetting pass is over.
_MATHJAX_DONE = """() => Promise.race([window.MathJax?.startup?.promise,
                                      new Promise(done => setTimeout(done, 30000))])
                   .then(() => true)"""
# Every plotly figure of the page drawn (a figure div gets its SVG once plotly has drawn it).
_PLOTS_DRAWN = """() => [...document.querySelectorAll('.plotly-graph-div')]
  .every(div => div.querySelector('svg.main-svg'))"""
# The fonts loaded and two frames painted since: the layout has settled.
_LAID_OUT = """() => Promise.race([
  document.fonts.ready.then(() => new Promise(
    done => requestAnimationFrame(() => requestAnimationFrame(done)))),
  new Promise(done => setTimeout(done, 30000))]).then(() => true)"""


class _Visit:
    """One page opened in a fresh browser context at a given width, with every request that
    tried to leave the machine, every failed local request and every console error recorded."""

    def __init__(self, browser, server, page_path: str, width: int, needs_plotly=False):
        if not (HTML / page_path).exists():
            pytest.fail(f"{page_path} is missing from the built book")
        self.left_machine, self.failed_local, self.console_errors = [], [], []
        self.context = browser.new_context(viewport={"width": width, "height": 900})
        self.page = page = self.context.new_page()
        page.route("**/*", self._route)
        page.on(
            "requestfailed",
            lambda req: self.failed_local.append(req.url) if "127.0.0.1" in req.url else None,
        )
        page.on(
            "response",
            lambda resp: (
                self.failed_local.append(f"{resp.status} {resp.url}")
                if resp.status >= 400
                else None
            ),
        )
        page.on(
            "console",
            lambda msg: self.console_errors.append(msg.text) if msg.type == "error" else None,
        )
        page.goto(f"{server}/{page_path}", wait_until="load")
        # MathJax 3 replaces TeX with <mjx-container> elements once it has typeset the page.
        if page.evaluate("() => document.querySelectorAll('.math').length"):
            page.wait_for_selector("mjx-container", state="attached", timeout=30_000)
            page.evaluate(_MATHJAX_DONE)
        if needs_plotly:
            page.wait_for_selector(".js-plotly-plot svg.main-svg", timeout=30_000)
            page.wait_for_function(_PLOTS_DRAWN, timeout=30_000)
        page.evaluate(_LAID_OUT)
        self.shot = SHOTS / f"{page_path.replace('/', '_').removesuffix('.html')}_{width}px.png"

    def _route(self, r):
        host = urlparse(r.request.url).hostname
        if r.request.url.startswith(("data:", "blob:")) or host in ("127.0.0.1", "localhost"):
            r.continue_()
        else:
            self.left_machine.append(r.request.url)
            r.abort()

    def screenshot(self):
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(self.shot), full_page=True)

    def close(self):
        self.screenshot()
        self.context.close()


# Pages whose plotly figures a check waits for, whatever the executed chapter's outputs say
# (the results chapters and the scorecard are measured with their figures drawn).
SCORECARD_PAGE = "chapters/09_reproduction_scorecard.html"


def _awaits_plotly(page_path: str) -> bool:
    return (
        page_path in RESULTS_PAGES
        or page_path == SCORECARD_PAGE
        or any(p == page_path and plotly for p, plotly, _ in PAGES)
    )


def _needs_widget(page_path: str) -> bool:
    return any(p == page_path and widget for p, _, widget in PAGES)


class _Failed:
    """A measurement that raised: each check that reads it raises the same error."""

    def __init__(self, error: BaseException):
        self.error = error


class _Measured:
    """What the checks read from one page at one width, measured in one visit: every script
    (name -> value, or the error it raised), the page's body text, whether its widgets rendered,
    the requests that tried to leave the machine, the failed local requests and the console
    errors of the whole visit. A screenshot is kept; the page is closed."""

    def __init__(self, browser, server, page_path: str, width: int):
        visit = _Visit(browser, server, page_path, width, _awaits_plotly(page_path))
        page, self.values = visit.page, {}
        if _needs_widget(page_path):
            # The html-manager renders the saved widget state into live DOM widgets.
            self._take(
                "widgets", lambda: page.wait_for_selector(".jupyter-widgets", timeout=30_000)
            )
        self._take("body_text", lambda: page.inner_text("body"))
        for name, script in _MEASURES.items():
            self._take(name, lambda script=script: page.evaluate(script))
        visit.screenshot()  # the page as a reader sees it, before "narration" changes it
        self._take("narration", lambda: page.evaluate(_NARRATION))
        visit.context.close()
        self.left_machine = list(visit.left_machine)
        self.failed_local = list(visit.failed_local)
        self.console_errors = list(visit.console_errors)

    def _take(self, name, measure):
        try:
            self.values[name] = measure()
        except Exception as e:  # noqa: BLE001 (raised again by the check that reads it)
            self.values[name] = _Failed(e)

    def __getitem__(self, name):
        value = self.values[name]
        if isinstance(value, _Failed):
            raise value.error
        return value


@pytest.fixture(scope="module")
def measured(server, browser):
    """``measured(page_path, width)``: that page's measurements, the page loaded on first use
    only. A visit that failed (a missing page, a figure never drawn) fails every check that
    reads it, with the same error, without loading the page again."""
    cache: dict[tuple[str, int], _Measured | _Failed] = {}

    def get(page_path: str, width: int) -> _Measured:
        key = (page_path, width)
        if key not in cache:
            try:
                cache[key] = _Measured(browser, server, page_path, width)
            except (Exception, pytest.fail.Exception) as e:
                cache[key] = _Failed(e)
        if isinstance(cache[key], _Failed):
            raise cache[key].error
        return cache[key]

    return get


@pytest.mark.parametrize(("page_path", "needs_plotly", "needs_widget"), PAGES)
def test_page_renders_offline(measured, page_path, needs_plotly, needs_widget):
    visit = measured(page_path, 1300)
    raw_tex = visit["raw_tex"]
    if needs_widget:
        visit["widgets"]  # the widgets rendered (a TimeoutError otherwise)
    text = visit["body_text"]
    scrolling = visit["scrolling"]

    assert not visit.left_machine, f"requests tried to leave the machine: {visit.left_machine[:10]}"
    assert not visit.failed_local, f"local requests failed: {visit.failed_local[:10]}"
    assert raw_tex == 0, f"{raw_tex} math elements were left as raw TeX"
    assert "Traceback (most recent call last)" not in text, "an executed cell shows a traceback"
    assert not visit.console_errors, f"console errors: {visit.console_errors[:5]}"
    assert not scrolling, f"code cells scroll sideways at 1300 px: {scrolling[:3]}"


# What a reader sees at 800 px, measured in the page (JavaScript returns the offenders): every
# results table (mzlite.repro.render) ends inside the window, keeps its fixed column widths and has
# no
# cell whose content spills out of it, and wherever a table has a verdict column,
# that column is inside the window and no box around the table scrolls sideways.
_VERDICTS_OUT_OF_VIEW = """() => {
  const W = document.documentElement.clientWidth, bad = [];
  for (const table of document.querySelectorAll('article table')) {
    const heads = [...table.querySelectorAll('thead th')]
      .map(th => th.innerText.trim().toLowerCase());
    const col = heads.findIndex(h => h.startsWith('verdict'));
    const right = table.getBoundingClientRect().right;
    if (table.classList.contains('mz-results')) {
      if (right > W + 1)
        bad.push(`results table "${heads.join(' | ')}" ends at x=${Math.round(right)}`);
      // the fixed layout keeps every column at its declared width, whatever a cell holds
      if (getComputedStyle(table).tableLayout !== 'fixed')
        bad.push(`results table "${heads.join(' | ')}" is laid out by its content`);
      for (const td of table.querySelectorAll('td'))
        if (td.scrollWidth > td.clientWidth + 1)
          bad.push(`"${td.innerText.trim().slice(0, 40)}" is wider than its cell in ` +
                   `"${heads.join(' | ')}"`);
    }
    if (col < 0) continue;
    for (let el = table.parentElement; el && el.tagName !== 'ARTICLE'; el = el.parentElement) {
      if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible')
        bad.push(`a box around the table "${heads.join(' | ')}" scrolls sideways`);
    }
    for (const row of table.querySelectorAll('tbody tr')) {
      const cell = row.children[col];
      if (!cell) continue;
      const r = cell.getBoundingClientRect();
      if (r.right > W + 1 || r.left < 0)
        bad.push(`verdict "${cell.innerText.trim().slice(0, 40)}" at x=${Math.round(r.left)}-` +
                 `${Math.round(r.right)} in a ${W} px window`);
    }
  }
  return bad;
}"""
_OVERFLOWING_OUTPUTS = """() =>
  [...document.querySelectorAll('article .cell_output pre, article .output pre')]
  .filter(pre => pre.scrollWidth > pre.clientWidth + 1)
  .map(pre => `${pre.scrollWidth} px of text in a ${pre.clientWidth} px box: ` +
              pre.innerText.split('\\n').find(l => l.length > 60)?.slice(0, 70))"""
# Code the page shows (not a collapsed hide-input or solution cell) that scrolls sideways: its
# lines must fit (book.css sets the size, tests/test_book_conventions.py the line length).
_SCROLLING_CODE = """() =>
  [...document.querySelectorAll('article .cell_input pre')]
  .filter(pre => !pre.closest('details:not([open])') && pre.scrollWidth > pre.clientWidth + 1)
  .map(pre => `${pre.scrollWidth} px of code in a ${pre.clientWidth} px box: ` +
              pre.innerText.split('\\n').reduce((a, l) => (l.length > a.length ? l : a), ''))"""
# Text a reader reads: prose and outputs. Code (cell inputs, inline literals) may name labels, and
# so may a collapsed run log (the runner's own log lines), which a reader opens only on request.
_READER_TEXT = """() => {
  const skip = 'script, style, .cell_input, code, div[class*="highlight-"]:not(.output), ' +
               'mjx-container, .headerlink, ' +
               'details:not([open]) > :not(summary)';  // a collapsed run log, opened on request
  const walker = document.createTreeWalker(document.querySelector('article') || document.body,
                                           NodeFilter.SHOW_TEXT);
  const parts = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode())
    if (!n.parentElement.closest(skip)) parts.push(n.textContent);
  return parts.join(' ');
}"""


@pytest.mark.parametrize(("page_path", "needs_plotly", "needs_widget"), PAGES)
def test_page_reads_at_800px(measured, page_path, needs_plotly, needs_widget):
    from mzlite.repro.paper import RAW_LABEL

    visit = measured(page_path, 800)
    verdicts = visit["verdicts"]
    overflowing = visit["overflowing"]
    scrolling = visit["scrolling"]
    labels = sorted(set(RAW_LABEL.findall(visit["reader_text"])))
    assert not verdicts, f"results out of view at 800 px: {verdicts[:5]}"
    assert not overflowing, f"output blocks wider than the page at 800 px: {overflowing[:5]}"
    assert not scrolling, f"code cells scroll sideways at 800 px: {scrolling[:3]}"
    assert not labels, f"raw paper labels in the text: {labels} (name them: mzlite.repro.paper)"


def test_every_citation_is_on_the_references_page(measured):
    entries = set(measured("references.html", 1300)["ids"])
    missing = []
    for page_path, _, _ in PAGES:
        html = (HTML / page_path).read_text(encoding="utf-8")
        for target in re.findall(r'href="(?:\.\./)?references\.html#([^"]+)"', html):
            if target not in entries:
                missing.append(f"{page_path} -> #{target}")
    assert not missing, f"citations without an entry on the references page: {missing[:10]}"
    cited = sum(
        len(re.findall(r'href="(?:\.\./)?references\.html#', (HTML / p).read_text("utf-8")))
        for p, _, _ in PAGES
    )
    assert cited > 10, "the chapters cite the paper and its sources: the check found no citations"


# Pages whose teaching slider must work on the static page (plotly frames, no kernel).
SLIDER_PAGES = [
    "chapters/01_zonotopes.html",
    "chapters/03_mzattn_from_scratch.html",
    "chapters/07_inside_a_trained_layer.html",
]
_FIGURE_STATE = """gd => JSON.stringify([gd.data.map(t => [t.x, t.y, t.z]), gd.layout.title])"""


@pytest.mark.parametrize("page_path", SLIDER_PAGES)
def test_plotly_slider_moves_the_figure(server, browser, page_path):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    visit = _Visit(browser, server, page_path, 1300, needs_plotly=True)
    page = visit.page
    figures = page.locator(".js-plotly-plot:has(.slider-rail-touch-rect)")
    n = figures.count()
    moved = []
    for i in range(n):
        fig = figures.nth(i)
        fig.scroll_into_view_if_needed()
        before = fig.evaluate(_FIGURE_STATE)
        rail = fig.locator(".slider-rail-touch-rect").first.bounding_box()
        page.mouse.click(rail["x"] + 0.7 * rail["width"], rail["y"] + rail["height"] / 2)
        try:  # the figure changes within a few seconds of the click, or it did not move
            page.wait_for_function(
                f"([gd, before]) => ({_FIGURE_STATE})(gd) !== before",
                arg=[fig.element_handle(), before],
                timeout=5_000,
            )
            moved.append(True)
        except PlaywrightTimeout:
            moved.append(False)
    visit.context.close()  # the screenshot at 1300 px is the page as loaded (`measured`)
    assert n >= 1, f"{page_path} has no plotly figure with a slider"
    assert all(moved), f"moving the slider did not change figure(s) {moved} on {page_path}"


# ---------------------------------------------------------------------------------------------
# Issue 24: findings first, no plumbing on the page, figures that fit
# ---------------------------------------------------------------------------------------------

_FINDINGS = """() => {
  const ul = document.querySelector('ul.mz-findings-counts');
  if (!ul) return null;
  const counts = {};
  for (const li of ul.querySelectorAll('li.mz-count')) counts[li.dataset.verdict] = +li.dataset.n;
  const links = [...document.querySelectorAll('div.mz-findings ~ p a')].map(a => a.href);
  return {total: +ul.dataset.total, counts, links};
}"""


def test_landing_page_says_what_the_book_found(measured):
    from mzlite.repro.experiments.scorecard import scorecard

    visit = measured("intro.html", 1300)
    found = visit["findings"]
    top = visit["findings_top"]
    assert found is not None, "the landing page has no findings block"
    sc = scorecard()
    assert found["total"] == len(sc)
    assert found["counts"] == {v: n for v, n in sc.counts().items() if n}
    assert top is not None and top < 1300, f"the findings start {top} px down the page"
    assert len(found["links"]) >= 4, found["links"]
    for href in found["links"]:  # every sentence links to a section that exists
        url = urlparse(href)
        page = (HTML / url.path.lstrip("/")).read_text(encoding="utf-8")
        assert url.fragment and f'id="{url.fragment}"' in page, f"{href}: no such section"


_HEADLINE = """() => {
  const h = document.querySelector('p.mz-headline');
  const box = document.querySelector('div.mz-protocols');
  const table = box && box.querySelector('table');
  const rows = table ? [...table.querySelectorAll('tbody tr')].map(
    tr => [...tr.querySelectorAll('td')].map(td => td.innerText.trim())) : [];
  return {headline: h ? h.innerText.trim() : null, rows,
          fits: table ? table.scrollWidth <= box.clientWidth + 1 : null,
          top: h ? h.getBoundingClientRect().top : null};
}"""


@pytest.mark.parametrize("width", [800, 1300])
def test_landing_page_states_a_headline_and_the_protocols(measured, width):
    from mzlite.repro.experiments.findings import findings

    got = measured("intro.html", width)["headline"]
    f = findings(price=False)
    assert got["headline"] == f.headline, "the headline is not the scorecard's"
    assert got["top"] is not None and got["top"] < 1300, f"the headline is {got['top']} px down"
    # the paper's protocol first, then each of ours that decided a verdict, every cell filled
    assert [r[0] for r in got["rows"]] == [r["protocol"] for r in f.protocols]
    assert got["rows"][0][0] == "the paper" and len(got["rows"]) >= 2
    assert all(all(cell for cell in row) for row in got["rows"]), got["rows"]
    assert got["fits"], f"the protocol table is wider than its column at {width} px"


def _plumbing() -> list[tuple[str, re.Pattern]]:
    from mzlite.repro import experiments as ex

    ids = sorted({c.id for t in ex.TABLES for c in ex.get_table(t).cells}, key=len, reverse=True)
    return [
        # hex of 7-40 digits with a digit and two letters, not part of a number ("4.44e-16")
        (
            "a commit hash",
            re.compile(
                r"(?<![\w.+-])(?=[0-9a-f]*\d)(?=(?:[0-9]*[a-f]){2})[0-9a-f]{7,40}(?![\w.+-])"
            ),
        ),
        ("a cell id", re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, ids)) + r")(?![\w-])")),
        ("a dict repr", re.compile(r"\{'\w[^']*': |\{\d+: (?:True|False|None)")),
        ("a tuple repr", re.compile(r"\('[^']*', '[^']*'")),
        ("a config repr", re.compile(r"\b\w+Config\(\w+=")),
        ("a data/ path", re.compile(r"\bdata/(?:results|paper|cache|checkpoints)\b")),
    ]


@pytest.mark.parametrize(("page_path", "needs_plotly", "needs_widget"), PAGES)
def test_no_plumbing_in_the_page_text(measured, page_path, needs_plotly, needs_widget):
    text = measured(page_path, 1300)["narration"]
    found = [f"{what}: {m.group(0)!r}" for what, rx in _plumbing() for m in rx.finditer(text)]
    assert not found, f"plumbing in the text of {page_path}: {sorted(set(found))[:8]}"


_FIGURES_OUT_OF_PLACE = """() => {
  const bad = [];
  for (const fig of document.querySelectorAll('article .js-plotly-plot')) {
    const svg = fig.querySelector('svg.main-svg');
    if (!svg) continue;
    const box = svg.getBoundingClientRect();
    const room = fig.parentElement.getBoundingClientRect();
    const title = (fig.querySelector('.gtitle')?.textContent || '').slice(0, 40);
    if (box.width > room.width + 1)
      bad.push(`"${title}" is ${Math.round(box.width)} px wide in ${Math.round(room.width)} px`);
    const legend = fig.querySelector('g.legend');
    if (legend) {
      const lb = legend.getBoundingClientRect();
      if (lb.right > box.right + 1 || lb.left < box.left - 1)
        bad.push(`the legend of "${title}" runs past the figure`);
    }
  }
  return bad;
}"""


@pytest.mark.parametrize("width", [800, 1300])
@pytest.mark.parametrize(
    "page_path", [p for p, plotly, _ in PAGES if plotly] or ["chapters/01_zonotopes.html"]
)
def test_plotly_figures_fit_the_text_column(measured, page_path, width):
    assert _awaits_plotly(page_path), f"{page_path} is measured without waiting for plotly"
    bad = measured(page_path, width)["figures_out_of_place"]
    assert not bad, f"figures out of place at {width} px on {page_path}: {bad[:5]}"


# ---------------------------------------------------------------------------------------------
# What the book says (issue 34): current and consistent, each result once, legible
# ---------------------------------------------------------------------------------------------

# The results chapters and the height each stays under at 800 px: each result is shown once, the
# verdicts are chapter 9's, the rest is collapsed; about 15 screens each (measured 14.8K, 14.6K,
# 14.8K and 14.0K px when the limit was set; 21.6K, 19.0K, 19.0K and 16.2K px before). Chapter 9
# names under every verdict the regime it was read at, one line a claim that no toggle may hide.
RESULTS_PAGES = {
    "chapters/04_training_on_gpu.html": 15_000,
    "chapters/05_minimum_enclosing_ball.html": 15_000,
    "chapters/06_relational_benchmarks.html": 15_000,
    "chapters/09_reproduction_scorecard.html": 15_000,
}
# Sentences that present a superseded protocol (mzlite's first reading, cpu-converged, whose MZ
# trained at 3e-3) as the one a page reads. The first reading may be shown, labelled as such.
_SUPERSEDED = [
    re.compile(r"results this chapter reads[^.]*\bcpu-converged\b(?![^.]*first reading)"),
    re.compile(r"converged (?:CPU )?protocol trains MZ at a learning rate of 3e-3"),
    re.compile(r"Converged CPU results \(cpu-converged"),
    re.compile(r"\b3 seeds, CPU\b[^.]*\bon NVIDIA"),
]
# A visible report caption (not inside a collapsed toggle): [its paper table, the profile].
_OPEN_REPORT_PROFILES = """() => [...document.querySelectorAll('article p.mz-caption')]
  .filter(p => !p.closest('details:not([open])'))
  .map(p => p.innerText.match(/^(Table \\d+).*\\(profile (\\S+?)\\s*\\)/))
  .filter(Boolean).map(m => [m[1], m[2]])"""


def _superseded_open(opened: list[list[str]]) -> list[str]:
    """The open tables of a superseded profile whose paper table has cpu-annealed results (a
    table that only the first reading has run may show it: it is all there is)."""
    from mzlite.repro import experiments as ex
    from mzlite.repro.render import table_name

    annealed = {table_name(t, title=False) for t in ex.TABLES if ex.load_results(t, "cpu-annealed")}
    return [f"{t} under {p}" for t, p in opened if p in ("cpu-converged", "cpu") and t in annealed]


@pytest.mark.parametrize(("page_path", "needs_plotly", "needs_widget"), PAGES)
def test_no_page_names_a_superseded_protocol_as_current(
    measured, page_path, needs_plotly, needs_widget
):
    visit = measured(page_path, 1300)
    text = " ".join(visit["reader_text"].split())
    opened = visit["open_reports"]
    found = [m.group(0)[:90] for rx in _SUPERSEDED for m in rx.finditer(text)]
    assert not found, f"{page_path} names a superseded protocol as current: {found[:3]}"
    old = _superseded_open(opened)
    assert not old, f"{page_path} shows {old[0]} open, as if it were the one it reads"


@pytest.mark.parametrize(("page_path", "limit"), sorted(RESULTS_PAGES.items()))
def test_results_chapters_stay_under_their_height_at_800px(measured, page_path, limit):
    height = measured(page_path, 800)["height"]
    assert height <= limit, f"{page_path} is {height} px tall at 800 px (at most {limit})"


# Every table (results, markdown, the reading page's) ends inside the column that holds it.
_WIDE_TABLES = """() => {
  const article = document.querySelector('article');
  if (!article) return [];
  const right = article.getBoundingClientRect().right;
  return [...article.querySelectorAll('table')]
    .filter(t => !t.closest('details:not([open])') && t.offsetParent !== null)
    .filter(t => t.getBoundingClientRect().right > right + 1 ||
                 t.scrollWidth > t.parentElement.clientWidth + 1)
    .map(t => `${Math.round(t.getBoundingClientRect().width)} px table in a ` +
              `${Math.round(t.parentElement.clientWidth)} px column: ` +
              (t.querySelector('th, td')?.innerText || '').trim().slice(0, 40));
}"""


@pytest.mark.parametrize("width", [800, 1300])
@pytest.mark.parametrize(("page_path", "needs_plotly", "needs_widget"), PAGES)
def test_no_table_is_wider_than_its_column(measured, page_path, needs_plotly, needs_widget, width):
    wide = measured(page_path, width)["wide_tables"]
    assert not wide, f"tables wider than their column on {page_path} at {width} px: {wide[:3]}"


def test_the_scorecard_uses_the_page_width_at_1300px(measured):
    """At 1300 px the scorecard is not narrower than at 800 px (the theme's right-hand page
    navigation gives its room to the article on that page)."""
    widths = {width: measured(SCORECARD_PAGE, width)["scorecard_width"] for width in (800, 1300)}
    assert widths[1300] >= widths[800], widths


_RAW_TEX = re.compile(r"\$|\\(?:sqrt|frac|mathrm|mathbb|hat|sum|lVert|rVert|le|ge|in)\b")


@pytest.mark.parametrize(("page_path", "needs_plotly", "needs_widget"), PAGES)
def test_no_raw_tex_in_the_rendered_text(measured, page_path, needs_plotly, needs_widget):
    text = measured(page_path, 1300)["reader_text"]
    raw = sorted({text[max(0, m.start() - 30) : m.end() + 30] for m in _RAW_TEX.finditer(text)})
    assert not raw, f"raw TeX in the text of {page_path}: {raw[:4]}"


# Per plotly figure, the legend entries (a trace with a name, shown in the legend) that look the
# same: colour, dash, marker symbol and fill pattern, as plotly resolved them.
_LOOKALIKE_LEGENDS = """() => {
  const bad = [];
  for (const gd of document.querySelectorAll('article .js-plotly-plot')) {
    const seen = new Map();
    for (const t of gd._fullData || []) {
      if (t.showlegend === false || !t.name || t.visible === false) continue;
      const m = t.marker || {}, l = t.line || {};
      const key = JSON.stringify([t.type, t.mode, l.color, l.dash, m.color, m.symbol,
                                  (m.pattern || {}).shape, t.fillcolor]);
      const other = seen.get(key);
      if (other !== undefined && other !== t.name)
        bad.push(`"${other}" and "${t.name}" look alike`);
      seen.set(key, t.name);
    }
    const legend = gd.querySelector('g.legend'), plot = gd._fullLayout?._size;
    if (legend && plot && legend.getBoundingClientRect().height > plot.h + 1)
      bad.push(`a legend ${Math.round(legend.getBoundingClientRect().height)} px tall beside ` +
               `a ${Math.round(plot.h)} px plot`);
  }
  return bad;
}"""


@pytest.mark.parametrize(
    "page_path", [p for p, plotly, _ in PAGES if plotly] or ["chapters/01_zonotopes.html"]
)
def test_legend_entries_of_a_figure_are_distinguishable(measured, page_path):
    assert _awaits_plotly(page_path), f"{page_path} is measured without waiting for plotly"
    bad = measured(page_path, 1300)["lookalike_legends"]
    assert not bad, f"legend entries that look the same on {page_path}: {bad[:4]}"


# Every script a check reads (name -> JavaScript), evaluated in each visit of `measured`.
_MEASURES = {
    "raw_tex": "() => document.querySelectorAll('.math:not(:has(mjx-container))').length",
    "scrolling": _SCROLLING_CODE,
    "verdicts": _VERDICTS_OUT_OF_VIEW,
    "overflowing": _OVERFLOWING_OUTPUTS,
    "reader_text": _READER_TEXT,
    "ids": "() => [...document.querySelectorAll('[id]')].map(e => e.id)",
    "findings": _FINDINGS,
    "findings_top": (
        "() => document.querySelector('ul.mz-findings-counts')?.getBoundingClientRect().top"
    ),
    "headline": _HEADLINE,
    "figures_out_of_place": _FIGURES_OUT_OF_PLACE,
    "open_reports": _OPEN_REPORT_PROFILES,
    "height": "() => document.body.scrollHeight",
    "wide_tables": _WIDE_TABLES,
    "scorecard_width": (
        "() => document.querySelector('table.mz-scorecard').getBoundingClientRect().width"
    ),
    "lookalike_legends": _LOOKALIKE_LEGENDS,
}
# The text a reader reads less the exercise cells, taken after the screenshot (it removes those
# cells from the page): an exercise's own output (the inputs it hands the student, e.g. a dict
# of seeds) is material to work with, not narration, and is left out, as its code is.
_NARRATION = (
    """() => {
  document.querySelectorAll('div.cell').forEach(c => {
    if ((c.querySelector('.cell_input')?.innerText || '').includes('check("')) c.remove(); });
  return ("""
    + _READER_TEXT
    + """)();
}"""
)
