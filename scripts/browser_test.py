"""Load every page of the built book in headless Chromium and check what a reader would see.

``python scripts/browser_test.py`` serves ``_build/html`` on 127.0.0.1 (a free port) and drives
the system Chromium (Debian package ``chromium``; ``.ci/run`` installs it) with Playwright for
Python, offline: Playwright never downloads a browser of its own (no ``playwright install``), and
every request that leaves the machine (anything but the local server, ``file:``, ``data:`` and
``blob:``) is aborted and reported as a failure. On every page, in light and in dark mode:

* math is rendered: no raw TeX (``$...$``, ``\\(``, ``\\begin{``, ``\\alpha``, ...) is left in
  the text outside code blocks;
* every image has loaded (``naturalWidth > 0``), and every figure produced by a code cell has an
  opaque background (its corner pixels have alpha 255), so it stays legible in dark mode;
* output text and the claims table keep a readable contrast in dark mode (ratio >= 4.5);
* no JavaScript error reached the console (errors, uncaught exceptions, failed requests);
* each ``exercise`` and ``solution`` block of the source is on the page;
* accessibility: axe-core (shipped inside ``axe-playwright-python``, run in the page) finds no
  critical or serious violation caused by the course's own content or CSS. Findings that come
  from the theme and that CSS cannot fix are listed in ``THEME_KNOWN`` with the reason and the
  theme's issue; chapter figures without alternative text (axe's ``image-alt``) or whose
  alternative text is their file name (our own check: axe accepts it, a screen reader reads a
  hash) are counted as "expected, fixed by issue 19 part 1" and do not fail the run yet
  (``--strict-alt`` makes them fail). The counts per page and mode, by impact, are printed;
* keyboard (light mode): every interactive element (sidebar toggles, download and launch
  menus, dark-mode switch, search buttons, exercises' solution toggles, hidden-input dropdowns)
  is reached with Tab, and Enter and Space change its state;
* interactive figures (issue 18, ``lib.plotting.interactive``): every one the chapter's source
  displays is drawn (an SVG), has an accessible label, and changes when each of its controls is
  operated with the keyboard (a slider moved with the arrow keys, the next radio option chosen
  with an arrow key), with no console error; the Vega bundle is loaded once and the page,
  scripts included, weighs at most 8 MB (Resource Timing); every figure fits the text column
  (issue 16): neither it nor any of its containers up to the article scrolls or overflows
  sideways, after loading, after its controls moved and after a switch to dark mode (which draws
  it again with the controls' values kept);
* on a chapter, the ``.ipynb`` entry of the download menu downloads a valid notebook, and the
  Binder and Colab launch links point at the repository of ``_config.yml``.

It saves ``_build/screenshots/<page>.png`` (light) and ``<page>-dark.png`` (dark mode). With
``--execute first`` (default) the downloaded notebook of the first chapter is executed with
nbclient in an empty folder, outside the repository and without jupytext: the notebook a reader
downloads runs in plain Jupyter (``--execute all`` runs every chapter's, ``none`` skips it).
Exit status 1 if any check fails. Chromium comes from ``--chromium``, ``$CHROMIUM`` or the PATH.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import re
import shutil
import socketserver
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import urlsplit

import yaml

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars"]
VIEWPORT = {"width": 1280, "height": 900}
SKIP_DIRS = {"_static", "_sources", "_images", "_sphinx_design_static"}
EXERCISE_RE = re.compile(r"^\s*(`{3,}|:{3,})\{(exercise|exercise-start)\}", re.M)
SOLUTION_RE = re.compile(r"^\s*(`{3,}|:{3,})\{(solution|solution-start)\}", re.M)
FAILING_IMPACTS = ("critical", "serious")
IMPACTS = ("critical", "serious", "moderate", "minor")

# axe-core findings that come from the theme (sphinx-book-theme 1.3.0 / pydata-sphinx-theme
# 0.17.1 templates and scripts) or from the Sphinx/docutils HTML writer, that `_static/krr.css`
# cannot fix: (rule id, regular expression on the node's CSS selector or HTML, reason, the
# upstream issue). A finding matching one is
# counted as "theme" and does not fail the run; every other critical/serious finding does.
THEME_KNOWN: list[tuple[str, str, str, str]] = [
    ("aria-required-children", r"citation-list",
     "the bibliography's markup comes from docutils' HTML5 writer (Sphinx 7.4, docutils 0.21): "
     "<div role=\"list\" class=\"citation-list\"> whose entries carry role=\"doc-biblioentry\", "
     "a role DPUB-ARIA 1.1 deprecated because it cannot be a list's child; not the course's "
     "markup and not fixable in CSS",
     "w3c/dpub-aria#22, dequelabs/axe-core#2759"),
]

# Chapter figures without a real alternative text: issue 19 part 1 (figure numbers, captions and
# alt texts in the chapters) fixes them. Counted, reported, not failed on (unless --strict-alt).
EXPECTED_PART1 = {"image-alt", "role-img-alt", "svg-img-alt"}
FIGURE_NODE = re.compile(r"cell_output|output_png|figure|_images/")

# Runs in the page: text left outside rendered math and code, images, figure opacity, blocks.
PAGE_PROBE = r"""
(async () => {
  const out = {};
  const root = document.querySelector('article.bd-article') || document.body;
  const skip = 'pre, code, script, style, textarea, mjx-container, .MathJax, .highlight, kbd';
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const tex = /\$\$|\$[^\s$][^$]*\$|\\\(|\\\)|\\\[|\\\]|\\begin\{|\\[a-zA-Z]{2,}/;
  out.rawTex = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || el.closest(skip)) continue;
    const m = n.textContent.match(tex);
    if (m) out.rawTex.push(n.textContent.trim().slice(0, 120));
  }
  out.math = root.querySelectorAll('mjx-container').length;
  const imgs = Array.from(document.images);
  imgs.forEach(i => { i.loading = 'eager'; });
  const t0 = Date.now();
  while (imgs.some(i => !i.complete) && Date.now() - t0 < 10000) {
    await new Promise(r => setTimeout(r, 100));
  }
  out.images = imgs.length;
  out.brokenImages = imgs.filter(i => !(i.complete && i.naturalWidth > 0))
                         .map(i => i.getAttribute('src'));
  out.transparentFigures = [];
  for (const img of imgs) {
    if (!img.closest('.cell_output, .output, figure') || !(img.naturalWidth > 0)) continue;
    if ((img.getAttribute('src') || '').endsWith('.svg')) continue;
    const c = document.createElement('canvas');
    c.width = img.naturalWidth; c.height = img.naturalHeight;
    const ctx = c.getContext('2d');
    ctx.drawImage(img, 0, 0);
    const w = c.width - 1, h = c.height - 1;
    const corners = [[0, 0], [w, 0], [0, h], [w, h]]
      .map(([x, y]) => ctx.getImageData(x, y, 1, 1).data[3]);
    if (corners.some(a => a < 255)) out.transparentFigures.push(img.getAttribute('src'));
  }
  // Figures whose alternative text is their file name (what MyST-NB writes when a cell output
  // has none) or empty: axe-core accepts both, a screen reader reads a hash or nothing.
  out.fileAlts = Array.from(root.querySelectorAll('img')).filter(i => {
    const a = (i.getAttribute('alt') || '').trim();
    const fig = i.closest('.cell_output, .output, figure');
    return /_images\/|^[^\s]+\.(png|jpe?g|svg|gif)$/i.test(a) || (fig && !a);
  }).map(i => i.getAttribute('src'));
  out.exercises = root.querySelectorAll('div.exercise').length;
  out.solutions = root.querySelectorAll('div.solution').length;
  const link = (sel) => { const a = document.querySelector(sel); return a ? a.href : null; };
  out.ipynb = link('a.btn-download-notebook-button') ||
              (Array.from(document.querySelectorAll('.dropdown-download-buttons a'))
                 .map(a => a.href).find(h => h.endsWith('.ipynb')) || null);
  out.launch = Array.from(document.querySelectorAll('.dropdown-launch-buttons a'))
                 .map(a => [a.textContent.trim(), a.href]);
  out.theme = document.documentElement.dataset.theme;
  out.height = Math.max(document.body.scrollHeight, document.documentElement.scrollHeight);
  return JSON.stringify(out);
})()
"""

# Runs in dark mode: contrast of output text and tables against their effective background.
CONTRAST_PROBE = r"""
(() => {
  const parse = (c) => { const m = c.match(/[\d.]+/g); return m ? m.map(Number) : null; };
  const lum = ([r, g, b]) => {
    const f = (v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const bg = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && (c.length < 4 || c[3] > 0.5)) return c;
    }
    return [255, 255, 255];
  };
  const bad = [];
  const sel = '.cell_output pre, .output pre, .claims-ledger-table td p, .admonition p';
  for (const el of document.querySelectorAll(sel)) {
    if (!el.textContent.trim() || el.closest('.toggle-hidden, [hidden]')) continue;
    const fg = parse(getComputedStyle(el).color), b = bg(el);
    const [l1, l2] = [lum(fg), lum(b)].sort((x, y) => y - x);
    const ratio = (l1 + 0.05) / (l2 + 0.05);
    const what = el.textContent.trim().slice(0, 40);
    if (ratio < 4.5) bad.push(`${el.tagName.toLowerCase()} "${what}": ${ratio.toFixed(2)}`);
  }
  return JSON.stringify(bad.slice(0, 5));
})()
"""

# The interactive elements a keyboard user must reach and operate: (what, CSS selector, where).
# "header": the theme's buttons above the article, reached by a real Tab walk from the top of the
# page. "content": toggles inside the article, each checked from its own place in the Tab order
# (a focusable marker inserted just before it, then one Tab), since a walk through every link of
# a long chapter would take hundreds of key presses.
KEYBOARD_TARGETS = [
    ("primary sidebar toggle", "button.primary-toggle", "header"),
    ("secondary sidebar toggle", "button.secondary-toggle", "header"),
    ("download menu", ".dropdown-download-buttons > button", "header"),
    ("launch menu", ".dropdown-launch-buttons > button", "header"),
    ("dark-mode switch", "button.theme-switch-button", "header"),
    ("search button", "button.search-button__button", "header"),
    ("solution toggle", "article .solution button.toggle-button, "
                        "article .exercise button.toggle-button", "content"),
    ("dropdown", "article details > summary", "content"),
]

# Keyboard targets whose operation is broken by the theme for every input (mouse too), that
# neither CSS nor the course can fix: (what, reason, the theme's issue). They must still be
# reached with Tab; that Enter/Space changes nothing is reported as known, not failed. When one
# starts working (a theme upgrade), the run says so: remove it from this list.
KEYBOARD_KNOWN = {
    "primary sidebar toggle": (
        "sphinx-book-theme 1.3.0 binds its wide-screen handler, and pydata-sphinx-theme 0.17 its "
        "dialog handler, to document.querySelector('.primary-toggle'), the first of the two "
        "buttons: the hidden navbar one; the visible article-header button does nothing, on a "
        "click as well",
        "executablebooks/sphinx-book-theme#935 (open PRs #991, #1000); "
        "pydata/pydata-sphinx-theme#2451"),
    "secondary sidebar toggle": (
        "same binding to the first, hidden, .secondary-toggle",
        "executablebooks/sphinx-book-theme#935; pydata/pydata-sphinx-theme#2451"),
}

# On search.html the page itself is the search form: the header's search buttons move the focus
# to its field instead of opening the search dialog, a change the state signature does not see
# (found by the first CI run of this test; to be checked by hand and the probe extended).
SEARCH_PAGE_KNOWN = (
    "on the search page the search buttons focus the page's own search field; the state probe "
    "does not record focus", "course: issue 19 follow-up")

# A signature of everything a toggle can change: compared before and after a key press.
STATE_PROBE = r"""
(el) => {
  const vis = (sel) => Array.from(document.querySelectorAll(sel)).map(e => {
    const s = getComputedStyle(e), r = e.getBoundingClientRect();
    return [s.display, s.visibility, Math.round(r.width), Math.round(r.left)].join(',');
  });
  const box = el.closest('details, .admonition, .toggle, .dropdown, .dropdown-center');
  return JSON.stringify({
    html: Object.assign({}, document.documentElement.dataset),
    body: document.body.className,
    expanded: el.getAttribute('aria-expanded'),
    box: box ? [box.className, box.open === undefined ? null : box.open] : null,
    menus: Array.from(document.querySelectorAll('.dropdown-menu.show')).length,
    dialogs: Array.from(document.querySelectorAll('dialog')).map(d => d.open),
    sidebars: vis('.bd-sidebar-primary, .bd-sidebar-secondary'),
  });
}
"""


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a browser closing a connection early is not a page problem


def serve(folder):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = Server(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def find_chromium(explicit):
    for name in (explicit, os.environ.get("CHROMIUM"), "chromium", "chromium-browser",
                 "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    sys.exit("Chromium not found: install the Debian package `chromium` (see .ci/run) or set "
             "CHROMIUM")


def pages(html):
    out = []
    for path in sorted(html.rglob("*.html")):
        rel = path.relative_to(html)
        if rel.parts[0] in SKIP_DIRS:
            continue
        if 'http-equiv="Refresh"' in path.read_text(encoding="utf-8", errors="replace")[:2000]:
            continue  # index.html only redirects to the landing page
        out.append(rel)
    return out


def source_blocks(root, rel):
    """(exercises, solutions) counted in the page's source file, or None if there is none."""
    src = root / rel.with_suffix(".md")
    if not src.is_file():
        return None
    text = src.read_text(encoding="utf-8")
    # Directives shown as examples inside a longer fence (````md ... ````) are not exercises.
    text = re.sub(r"^(`{4,}|:{4,}).*?^\1\s*$", "", text, flags=re.M | re.S)
    return len(EXERCISE_RE.findall(text)), len(SOLUTION_RE.findall(text))


def is_chapter(root, rel):
    src = root / rel.with_suffix(".md")
    return src.is_file() and "```{code-cell}" in src.read_text(encoding="utf-8")


def parse_notebook(body, what):
    import nbformat

    try:
        nb = nbformat.reads(body.decode("utf-8"), as_version=4)
        nbformat.validate(nb)
    except Exception as err:  # noqa: BLE001 (report any parse/validation problem)
        return None, f"download {what} is not a valid notebook: {err}"
    if "jupytext" in nb.metadata:
        return None, f"download {what} still carries jupytext metadata"
    return nb, None


def execute_notebook(nb, name):
    """Run a downloaded notebook with nbclient in an empty folder; return (seconds, error)."""
    from nbclient import NotebookClient

    with tempfile.TemporaryDirectory(prefix="krr-nb-") as tmp:
        env_keep = os.environ.get("KRR_CLAIMS_DIR")
        os.environ["KRR_CLAIMS_DIR"] = ""
        # the course library as `pip install -e .` provides it (CI), whatever the shell has
        path_keep = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), path_keep) if p)
        start = time.time()
        try:
            NotebookClient(nb, timeout=180, kernel_name="python3",
                           resources={"metadata": {"path": tmp}}).execute()
        except Exception as err:  # noqa: BLE001
            return time.time() - start, f"{name}.ipynb failed in plain Jupyter: " + \
                str(err).strip().splitlines()[-1][:300]
        finally:
            for var, keep in (("KRR_CLAIMS_DIR", env_keep), ("PYTHONPATH", path_keep)):
                if keep is None:
                    os.environ.pop(var, None)
                else:
                    os.environ[var] = keep
        return time.time() - start, None


# The downloaded notebook must read like the page in plain Jupyter. It may show a few formulas
# more or fewer than the page and still do so: its hidden first cell defines the TeX macros (one
# formula more), and a formula the page shows in a Sphinx-made caption or title may be plain text
# in the notebook. A MyST block left unconverted (a {math} fence shown as code) loses a formula
# each, which on a chapter of 100-300 formulas the 5% tolerance catches once a few are lost, and
# fully when all are.
MATH_TOLERANCE = (3, 0.05)  # (formulas, fraction of the page's count): the larger applies


def check_downloaded_notebook_math(context, base, nb_path, page_math, name):
    """Render the downloaded notebook with nbconvert's HTML exporter (MathJax 3 from the book's
    own offline copy), open it, count its MathJax-rendered formulas and compare with the chapter
    page's ``page_math``. Returns a list of problems ([] when it reads like the page)."""
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(nb_path, as_version=4)
    mathjax = f"{base}/_static/mathjax/tex-mml-chtml.js"
    html, _ = HTMLExporter(template_name="lab", mathjax_url=mathjax).from_notebook_node(nb)
    # nbconvert's template configures MathJax 2; give MathJax 3 the same delimiters
    config = ("<script>window.MathJax = {tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], "
              "displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']], processEscapes: true, "
              "processEnvironments: true}};</script>")
    html = html.replace("<head>", "<head>" + config, 1)
    path = Path(nb_path).with_suffix(".nbconvert.html")
    path.write_text(html, encoding="utf-8")
    page = context.new_page()

    def offline(route):  # plain nbconvert pages ask CDNs for require.js etc.: not the book's
        url = route.request.url
        if url.startswith(("file:", "data:", "blob:", base)):
            route.continue_()
        else:
            route.abort("blockedbyclient")

    page.route("**/*", offline)  # page routes take precedence over the context's
    try:
        page.goto(path.as_uri(), wait_until="load")
        page.wait_for_function("() => !window.MathJax || !window.MathJax.startup || "
                               "window.MathJax.startup.promise", timeout=60_000)
        page.evaluate("() => window.MathJax && window.MathJax.startup ? "
                      "window.MathJax.startup.promise : null")
        count = page.evaluate("() => document.querySelectorAll('mjx-container').length")
    finally:
        page.close()
    allowed = max(MATH_TOLERANCE[0], MATH_TOLERANCE[1] * page_math)
    print(f"  {name}.ipynb: {count} formulas rendered by nbconvert's HTML, page {page_math}")
    if abs(count - page_math) > allowed:
        return [f"downloaded notebook shows {count} MathJax formulas in plain Jupyter "
                f"(nbconvert HTML), the page {page_math} (tolerance {allowed:.0f})"]
    return []




class Browser:
    """One Playwright page on the system Chromium, offline, collecting errors and requests."""

    def __init__(self, pw, chromium, base, downloads):
        self.base = base
        self.blocked: list[str] = []
        self.events: list[str] = []
        self.browser = pw.chromium.launch(executable_path=chromium, headless=True, args=ARGS)
        self.context = self.browser.new_context(viewport=VIEWPORT, accept_downloads=True,
                                                service_workers="block")
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda err: self.events.append(f"exception: {err}"))
        self.page.on("requestfailed", self._failed)
        self.downloads = downloads

    def _route(self, route):
        url = route.request.url
        parts = urlsplit(url)
        if parts.scheme in ("data", "blob", "file", "about") or \
                url.startswith(self.base + "/") or url == self.base:
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort("blockedbyclient")

    def _console(self, msg):
        if msg.type not in ("error", "assert"):
            return
        url = (msg.location or {}).get("url", "")
        if url.endswith("/favicon.ico"):
            return  # the browser asks for one; the book has none
        if "ERR_BLOCKED_BY_CLIENT" in msg.text or url in self.blocked:
            return  # reported once, as a blocked request
        self.events.append(f"console.error: {msg.text} {url}".rstrip())

    def _failed(self, request):
        if request.url in self.blocked or request.url.endswith("/favicon.ico"):
            return
        self.events.append(f"request failed: {request.url} ({request.failure})")

    def errors(self):
        found = list(self.events) + [f"request leaving the machine blocked: {u}"
                                     for u in self.blocked]
        self.events.clear()
        self.blocked.clear()
        return found

    def load(self, url, timeout=60):
        self.page.goto(url, wait_until="load", timeout=timeout * 1000)
        # MathJax typesets after load; wait for it when the page uses it
        self.page.evaluate("(async () => { if (window.MathJax && MathJax.startup && "
                           "MathJax.startup.promise) { await MathJax.startup.promise; } "
                           "await new Promise(r => setTimeout(r, 300)); return true; })()")

    def set_mode(self, mode):
        self.page.evaluate(f"localStorage.setItem('theme', '{mode}'); "
                           f"localStorage.setItem('mode', '{mode}'); true")

    def screenshot(self, path, height):
        height = int(min(max(height, VIEWPORT["height"]), 16000))
        self.page.set_viewport_size({"width": VIEWPORT["width"], "height": height})
        try:
            self.page.screenshot(path=str(path), timeout=120_000)
        finally:
            self.page.set_viewport_size(VIEWPORT)

    def close(self):
        self.context.close()
        self.browser.close()


# ------------------------------------------------------------------------------ accessibility

def axe_findings(axe, page, rel, chapter):
    """Run axe-core in the page; return (counts by impact, list of classified findings)."""
    result = axe.run(page)
    counts = Counter()
    findings = []
    for v in result.response["violations"]:
        for node in v["nodes"]:
            impact = node.get("impact") or v.get("impact") or "minor"
            counts[impact] += 1
            target = " ".join(str(t) for t in node.get("target", []))
            html = node.get("html", "")
            kind = "own"
            why = ""
            for rule, pattern, reason, issue in THEME_KNOWN:
                if rule == v["id"] and re.search(pattern, target + " " + html):
                    kind, why = "theme", f"{reason} ({issue})"
                    break
            if kind == "own" and v["id"] in EXPECTED_PART1 and chapter and \
                    FIGURE_NODE.search(target + " " + html):
                kind, why = "part1", "chapter figure alt text: issue 19 part 1"
            findings.append({"rule": v["id"], "impact": impact, "kind": kind, "why": why,
                             "target": target[:100], "html": html[:160],
                             "summary": (node.get("failureSummary") or "")[:200]})
    return counts, findings


# ------------------------------------------------------------------------------ keyboard

KNOWN_SEEN: set[str] = set()  # known theme keyboard failures met during the run


def mark_targets(page):
    """Give every keyboard target a data-kbd id; return [(id, what, where)]."""
    out = []
    for what, selector, where in KEYBOARD_TARGETS:
        ids = page.evaluate(
            """([sel, what]) => Array.from(document.querySelectorAll(sel))
                 .filter(e => { const r = e.getBoundingClientRect();
                                return r.width > 0 && r.height > 0; })
                 .map((e, i) => { const id = what + ' #' + (i + 1);
                                  e.setAttribute('data-kbd', id); return id; })""",
            [selector, what])
        out += [(i, what, where) for i in ids]
    return out


def active_kbd(page):
    return page.evaluate("(() => { const a = document.activeElement; "
                         "return a ? (a.getAttribute('data-kbd') || a.tagName) : null; })()")


def operate(page, kbd_id, known=None):
    """Enter and Space on the focused element each change the page's state; return problems.

    For a target in KEYBOARD_KNOWN (``known`` = its (reason, issue)), "changes nothing" is
    printed as known and not returned; "works now" is printed as a reminder to drop it."""
    problems = []
    loc = page.locator(f'[data-kbd="{kbd_id}"]')
    for key in ("Enter", "Space"):
        if active_kbd(page) != kbd_id:
            loc.focus()  # a menu may have taken focus: come back to the element
        before = loc.evaluate(STATE_PROBE)
        page.keyboard.press(key)
        page.wait_for_timeout(250)  # transitions, Bootstrap's dropdown
        after = loc.evaluate(STATE_PROBE)
        if after == before and known is None:
            problems.append(f"keyboard: {key} on {kbd_id} changes nothing")
        elif after == before:
            KNOWN_SEEN.add(f"{kbd_id.split(' #')[0]}: {known[0]} ({known[1]})")
        elif known is not None:
            print(f"  note: {key} on {kbd_id} works now: remove it from KEYBOARD_KNOWN")
        page.keyboard.press("Escape")  # close a menu that opened, if any
        page.wait_for_timeout(100)
        if loc.evaluate(STATE_PROBE) != before:  # still changed (a toggle): undo with the key
            if active_kbd(page) != kbd_id:
                loc.focus()
            page.keyboard.press(key)
            page.wait_for_timeout(250)
    return problems


def keyboard_check(br, url, max_tabs=250):
    """Reach every interactive element with Tab and operate it with Enter and Space."""
    page = br.page
    br.load(url)
    targets = mark_targets(page)
    problems = []
    header = [t for t in targets if t[2] == "header"]
    content = [t for t in targets if t[2] == "content"]
    # Header controls: a real Tab walk from the top of the page.
    page.evaluate("document.activeElement && document.activeElement.blur(); "
                  "window.scrollTo(0, 0); true")
    reached = set()
    for _ in range(max_tabs):
        page.keyboard.press("Tab")
        now = active_kbd(page)
        if now in {t[0] for t in header} and now not in reached:
            reached.add(now)
            name = now.split(" #")[0]
            known = KEYBOARD_KNOWN.get(name)
            if known is None and name == "search button" and url.endswith("/search.html"):
                known = SEARCH_PAGE_KNOWN
            problems += operate(page, now, known)
        if len(reached) == len(header):
            break
    problems += [f"keyboard: {t[0]} not reached with Tab from the top of the page "
                 f"({max_tabs} presses)" for t in header if t[0] not in reached]
    # Content toggles: from a focusable marker inserted just before each, one Tab.
    for kbd_id, _, _ in content:
        # a <summary>'s siblings are hidden while its <details> is closed: mark before the latter
        page.evaluate("""(id) => { let el = document.querySelector(`[data-kbd="${id}"]`);
            if (el.tagName === 'SUMMARY') el = el.parentElement;
            const m = document.createElement('span'); m.tabIndex = 0; m.id = 'kbd-marker';
            el.parentNode.insertBefore(m, el); m.focus(); }""", kbd_id)
        page.keyboard.press("Tab")
        now = active_kbd(page)
        page.evaluate("document.getElementById('kbd-marker').remove()")
        if now != kbd_id:
            problems.append(f"keyboard: Tab does not reach {kbd_id} (focus went to {now})")
            continue
        problems += operate(page, kbd_id)
    counts = Counter(t[1] for t in targets)
    return counts, problems


# ------------------------------------------------------------------------------ interactive figures

PAGE_BUDGET = 8 * 1024 * 1024  # issue 18: no chapter page above 8 MB, scripts included

# Runs in the page: every interactive figure drawn (an SVG inside its div), and the page weight
# (the document and every resource it loaded, decoded sizes, from the Resource Timing API).
FIGURE_PROBE = r"""
(async () => {
  const t0 = Date.now();
  const figs = () => Array.from(document.querySelectorAll('div.krr-interactive'));
  // drawn, and fitted to the column (krr_interactive.js marks it ready after the last draw)
  const drawn = f => f.querySelector('svg') && f.classList.contains('krr-interactive-ready');
  while (figs().some(f => !drawn(f)) && Date.now() - t0 < 30000) {
    await new Promise(r => setTimeout(r, 100));
  }
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  const bytes = (nav ? nav.decodedBodySize : 0) +
                res.reduce((s, r) => s + (r.decodedBodySize || r.transferSize || 0), 0);
  return JSON.stringify({
    ids: figs().map(f => f.id),
    undrawn: figs().filter(f => !drawn(f)).map(f => f.id),
    unlabelled: figs().filter(f => !(f.getAttribute('aria-label') || '').trim()).map(f => f.id),
    vegaScripts: Array.from(document.scripts).filter(s => /vega-embed-bundle/.test(s.src)).length,
    bytes: bytes,
  });
})()
"""


# Runs in the page: for every interactive figure, how far it sticks out sideways (px): its own
# scrolled overflow (the figure scrolls when wider than the column) and how far its box passes
# the right edge of the padding box of each of its ancestors up to the article.
FIT_PROBE = r"""
(() => Array.from(document.querySelectorAll('div.krr-interactive')).map(el => {
  const stop = el.closest('article') || document.body;
  const right = el.getBoundingClientRect().right;
  let over = el.scrollWidth - el.clientWidth, where = 'the figure scrolls';
  for (let n = el.parentElement; n; n = n.parentElement) {
    const r = n.getBoundingClientRect();
    const out = Math.max(right - (r.left + n.clientLeft + n.clientWidth),
                         n.scrollWidth - n.clientWidth);
    if (out > over) {
      over = out;
      where = n.tagName.toLowerCase() + (n.className ? '.' + String(n.className).trim()
                                         .split(/\s+/).join('.') : '');
    }
    if (n === stop) break;
  }
  const svg = el.querySelector('svg');
  return {id: el.id, over: Math.round(over), where: where, avail: el.clientWidth,
          svg: svg ? Math.round(svg.getBoundingClientRect().width) : 0,
          scale: el.dataset.krrScale || '', layout: el.dataset.krrLayout || ''};
}))()
"""


def fit_check(page, when):
    """Interactive figures sticking out of the text column: (lines for the report, problems)."""
    report, problems = [], []
    for f in page.evaluate(FIT_PROBE):
        report.append(f"{f['id']} {when}: {f['svg']} px drawn in {f['avail']} px "
                      f"(scale {f['scale']}, {f['layout']})")
        if f["over"] > 1:
            problems.append(f"interactive: figure {f['id']} {when} is {f['over']} px wider than "
                            f"its container ({f['where']}): it scrolls sideways")
    return report, problems


def _svg(page, fig_id):
    return page.eval_on_selector(f"#{fig_id} svg", "e => e.outerHTML")


def _wait_for_change(page, fig_id, before, timeout=5.0):
    t0 = time.time()
    while time.time() - t0 < timeout:
        page.wait_for_timeout(100)
        if _svg(page, fig_id) != before:
            return True
    return False


def interactive_check(br, url, expected, shots=None):
    """Draw every interactive figure and operate each of its controls with the keyboard.

    Each range slider is focused and moved with the arrow keys, each group of radio buttons
    with an arrow key to a button not yet chosen; after every move the figure's SVG must have
    changed. The page must load the Vega bundle once, weigh at most 8 MB, and log no error.
    With ``shots`` (a folder), each figure is saved before and after its controls moved
    (``<figure id>-before.png``, ``-after.png``). Returns (lines for the report, problems).
    """
    page = br.page
    br.load(url)
    info = json.loads(page.evaluate(FIGURE_PROBE))
    problems, report = [], []
    if len(info["ids"]) < expected:
        problems.append(f"interactive: {len(info['ids'])} figures on the page, the source "
                        f"displays {expected}")
    problems += [f"interactive: figure {i} not drawn within 30 s" for i in info["undrawn"]]
    problems += [f"interactive: figure {i} has no aria-label" for i in info["unlabelled"]]
    if info["ids"] and info["vegaScripts"] != 1:
        problems.append(f"interactive: the Vega bundle is loaded {info['vegaScripts']} times")
    if info["bytes"] > PAGE_BUDGET:
        problems.append(f"interactive: page weight {info['bytes'] / 2**20:.2f} MB above 8 MB")
    report.append(f"page weight {info['bytes'] / 2**20:.2f} MB")
    lines, found = fit_check(page, "after loading")
    report += lines
    problems += found
    for fig_id in info["ids"]:
        if fig_id in info["undrawn"]:
            continue
        controls = page.evaluate("""(id) => Array.from(document.querySelectorAll(
            `#${id} .vega-bindings input`)).map((e, i) => [i, e.type, e.name,
            e.type === 'range' ? [e.value, e.min, e.max] : e.checked])""", fig_id)
        if not controls:
            problems.append(f"interactive: figure {fig_id} has no control")
        if shots is not None:
            page.locator(f"#{fig_id}").screenshot(path=str(shots / f"{fig_id}-before.png"))
        done_groups = set()
        for index, kind, name, state in controls:
            if kind == "radio":
                if name in done_groups:
                    continue
                done_groups.add(name)
            handle = page.locator(f"#{fig_id} .vega-bindings input").nth(index)
            before = _svg(page, fig_id)
            handle.focus()
            if kind == "range":
                value, lo, hi = (float(v) for v in state)
                key = "ArrowLeft" if value >= hi else "ArrowRight"
                for _ in range(3):
                    page.keyboard.press(key)
                what = f"slider {name!r} {value:g} -> {handle.input_value()}"
            elif kind == "radio":
                page.keyboard.press("ArrowRight")  # moves to, and chooses, the next option
                chosen = page.evaluate(f"""() => {{ const c = document.querySelector(
                    '#{fig_id} .vega-bindings input[name="{name}"]:checked');
                    return c ? c.value : null; }}""")
                what = f"option {name!r} -> {chosen}"
            else:
                page.keyboard.press("ArrowDown")
                what = f"{kind} {name!r} -> {handle.input_value()}"
            if not page.evaluate("(id) => document.activeElement.closest('#' + id) !== null",
                                 fig_id):
                problems.append(f"interactive: {fig_id} {what}: focus left the figure")
            changed = _wait_for_change(page, fig_id, before)
            report.append(f"{fig_id} {what}: figure {'changed' if changed else 'UNCHANGED'}")
            if not changed:
                problems.append(f"interactive: {fig_id} {what}: the figure did not change")
        if shots is not None:
            page.locator(f"#{fig_id}").screenshot(path=str(shots / f"{fig_id}-after.png"))
    drawn = [i for i in info["ids"] if i not in info["undrawn"]]
    if drawn:
        problems += fit_check(page, "after its controls moved")[1]
        # dark mode draws every figure again: it must still fit, with the controls' values kept
        values = lambda: page.evaluate("""() => Array.from(document.querySelectorAll(
            '.krr-interactive .vega-bindings input')).map(e => e.type === 'radio' ? e.checked
            : e.value)""")  # noqa: E731
        before = values()
        page.evaluate("document.documentElement.dataset.theme = 'dark'")
        try:
            page.wait_for_function("""(ids) => ids.every(id => {
                const el = document.getElementById(id);
                return el.dataset.krrTheme === 'dark' && el.querySelector('svg'); })""",
                                   arg=drawn, timeout=30_000)
            page.wait_for_timeout(500)
            problems += fit_check(page, "in dark mode")[1]
            if values() != before:
                problems.append("interactive: switching to dark mode reset the figures' controls")
        except Exception as err:  # noqa: BLE001 (report, then go on with the page's checks)
            problems.append(f"interactive: figures not drawn again in dark mode: "
                            f"{str(err).splitlines()[0]}")
        page.evaluate("document.documentElement.dataset.theme = 'light'")
    problems += [f"JS (interactive): {e}" for e in br.errors()]
    return report, problems


# ------------------------------------------------------------------------------ downloads

def download_notebook(br, info, rel):
    """Download the chapter's .ipynb through its menu entry; return (nb, path, problem)."""
    page = br.page
    href = info["ipynb"]
    link = page.locator('.dropdown-download-buttons a[href$=".ipynb"]').first
    try:
        page.locator(".dropdown-download-buttons > button").first.click()
        with page.expect_download(timeout=30_000) as dl:
            link.click()
        download = dl.value
        path = br.downloads / f"{rel.stem}.ipynb"
        download.save_as(path)
    except Exception as err:  # noqa: BLE001 (report why the download did not happen)
        return None, None, f"the download menu's .ipynb entry ({href}) did not download: " \
                           f"{str(err).splitlines()[0]}"
    finally:
        page.keyboard.press("Escape")
    nb, err = parse_notebook(path.read_bytes(), href)
    return nb, path, err


# ------------------------------------------------------------------------------ main

def print_audit(audit, strict_alt):
    print("\naxe-core audit (violating nodes by impact; crit/ser/mod/min):")
    print(f"  {'page':34s} {'light':>15s} {'dark':>15s}   own  theme  part1")
    totals = Counter()
    for rel, modes in audit.items():
        cells = []
        kinds = Counter()
        for mode in ("light", "dark"):
            counts, findings = modes.get(mode, (Counter(), []))
            cells.append("/".join(str(counts[i]) for i in IMPACTS))
            for f in findings:
                if f["impact"] in FAILING_IMPACTS:
                    kinds[f["kind"]] += 1
            totals.update({f"{mode} {i}": counts[i] for i in IMPACTS})
        totals.update(kinds)
        print(f"  {str(rel):34s} {cells[0]:>15s} {cells[1]:>15s}   {kinds['own']:3d}  "
              f"{kinds['theme']:5d}  {kinds['part1']:5d}")
    light = "/".join(str(totals[f'light {i}']) for i in IMPACTS)
    dark = "/".join(str(totals[f'dark {i}']) for i in IMPACTS)
    print(f"  {'total':34s} {light:>15s} {dark:>15s}   {totals['own']:3d}  "
          f"{totals['theme']:5d}  {totals['part1']:5d}")
    print("  own = critical/serious from the course's content or CSS (fail); theme = listed in "
          "THEME_KNOWN; part1 = chapter figures' alt text (issue 19 part 1"
          f"{', failing with --strict-alt' if strict_alt else ', expected, not failed yet'})")
    rules = Counter()
    for modes in audit.values():
        for _, findings in modes.values():
            rules.update(f"{f['rule']} ({f['impact']}"
                         f"{', ' + f['kind'] if f['impact'] in FAILING_IMPACTS else ''})"
                         for f in findings)
    if rules:
        print("  by rule: " + "; ".join(f"{r}: {n}" for r, n in rules.most_common()))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--screenshots", type=Path, default=ROOT / "_build" / "screenshots")
    parser.add_argument("--chromium", default=None)
    parser.add_argument("--execute", choices=["first", "all", "none"], default="first",
                        help="which downloaded chapter notebooks to execute with nbclient")
    parser.add_argument("-k", dest="select", default=None,
                        help="only pages whose path contains this string")
    parser.add_argument("--skip", action="append", default=[],
                        help="leave out pages whose path contains this string (repeatable)")
    parser.add_argument("--strict-alt", action="store_true",
                        help="fail on chapter figures' missing alt text too (issue 19 part 1)")
    parser.add_argument("--no-keyboard", action="store_true", help="skip the keyboard checks")
    parser.add_argument("--axe-json", type=Path, default=None,
                        help="write every axe finding (page, mode, rule, node) to this file")
    args = parser.parse_args(argv)
    if not (args.html / "index.html").is_file():
        sys.exit(f"no built book in {args.html}: run `make book` first")
    # Playwright must use the system Chromium and never fetch a browser build of its own.
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from axe_playwright_python.sync_playwright import Axe
    from playwright.sync_api import sync_playwright

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    repo_url = config["repository"]["url"].rstrip("/")
    repo_path = repo_url.split("github.com/")[-1]
    chromium = find_chromium(args.chromium)

    args.screenshots.mkdir(parents=True, exist_ok=True)
    if not args.select and not args.skip:
        for old in args.screenshots.glob("*.png"):
            old.unlink()
    server, base = serve(args.html)
    downloads = Path(tempfile.mkdtemp(prefix="krr-downloads-"))
    failures, executed = [], 0
    audit: dict[Path, dict[str, tuple[Counter, list]]] = defaultdict(dict)
    keys = Counter()
    axe = Axe()
    t_start = time.time()
    try:
        with sync_playwright() as pw:
            br = Browser(pw, chromium, base, downloads)
            try:
                selected = [p for p in pages(args.html)
                            if (not args.select or args.select in str(p))
                            and not any(s in str(p) for s in args.skip)]
                # localStorage (the theme choice) needs the origin: open a page first
                br.load(f"{base}/{(selected or [Path('index.html')])[0].as_posix()}")
                br.errors()
                for rel in selected:
                    problems = check_page(br, axe, rel, base, args, repo_url, repo_path,
                                          audit, keys, executed)
                    executed += sum(1 for p in problems if p == "__executed__")
                    problems = [p for p in problems if p != "__executed__"]
                    failures += [(rel, p) for p in problems]
            finally:
                br.close()
        print(f"\n{len(selected)} pages checked in light and dark mode in "
              f"{time.time() - t_start:.0f} s; screenshots in {args.screenshots}")
        if not args.no_keyboard:
            print("keyboard: reached with Tab and operated with Enter and Space: " +
                  ", ".join(f"{n} x {w}" for w, n in sorted(keys.items())))
            for k in sorted(KNOWN_SEEN):
                print(f"  known, from the theme (not failed): {k}")
        print_audit(audit, args.strict_alt)
        if args.axe_json:
            rows = [{"page": str(rel), "mode": mode, **f}
                    for rel, modes in audit.items() for mode, (_, fs) in modes.items()
                    for f in fs]
            args.axe_json.write_text(json.dumps(rows, indent=1))
    finally:
        server.shutdown()
        shutil.rmtree(downloads, ignore_errors=True)
    if failures:
        print(f"{len(failures)} problem(s) on {len({r for r, _ in failures})} page(s)")
        return 1
    print("all browser checks passed")
    return 0


def check_page(br, axe, rel, base, args, repo_url, repo_path, audit, keys, executed):
    name = str(rel.with_suffix("")).replace("/", "__")
    url = f"{base}/{rel.as_posix()}"
    chapter = is_chapter(ROOT, rel)
    problems = []
    t0 = time.time()
    for mode in ("light", "dark"):
        br.set_mode(mode)
        br.load(url)
        info = json.loads(br.page.evaluate(PAGE_PROBE))
        tag = "" if mode == "light" else " (dark)"
        if info["theme"] != mode and rel.name not in ("genindex.html",):
            problems.append(f"theme is {info['theme']!r}, expected {mode!r}")
        problems += [f"raw TeX{tag}: {t!r}" for t in info["rawTex"][:5]]
        problems += [f"image not loaded{tag}: {s}" for s in info["brokenImages"]]
        problems += [f"figure with a transparent background{tag}: {s}"
                     for s in info["transparentFigures"]]
        problems += [f"JS{tag}: {e}" for e in br.errors()]
        if mode == "dark":
            problems += [f"low contrast in dark mode: {b}"
                         for b in json.loads(br.page.evaluate(CONTRAST_PROBE))]
        counts, findings = axe_findings(axe, br.page, rel, chapter)
        findings += [{"rule": "figure alt is a file name or empty (own check)",
                      "impact": "serious", "kind": "part1", "html": "", "summary": "",
                      "why": "chapter figure alt text: issue 19 part 1", "target": src}
                     for src in info["fileAlts"]]
        audit[rel][mode] = (counts, findings)
        for f in findings:
            if f["impact"] in FAILING_IMPACTS and (
                    f["kind"] == "own" or (f["kind"] == "part1" and args.strict_alt)):
                problems.append(f"axe{tag}: {f['impact']} {f['rule']} at {f['target']}: "
                                f"{f['html']}")
        br.screenshot(args.screenshots / f"{name}{'' if mode == 'light' else '-dark'}.png",
                      info["height"])
        br.errors()  # resizing for the screenshot may log benign messages
    br.set_mode("light")
    blocks = source_blocks(ROOT, rel)
    if blocks is not None and blocks != (info["exercises"], info["solutions"]):
        problems.append(f"source has {blocks[0]} exercises and {blocks[1]} solutions, "
                        f"page shows {info['exercises']} and {info['solutions']}")
    n_keys = Counter()
    if not args.no_keyboard:
        n_keys, kproblems = keyboard_check(br, url)
        keys.update(n_keys)
        problems += kproblems
        problems += [f"JS (keyboard): {e}" for e in br.errors()]
    if chapter:
        expected = len(re.findall(r"lib\.plotting\.interactive\(",
                                  (ROOT / rel.with_suffix(".md")).read_text(encoding="utf-8")))
        lines, iproblems = interactive_check(br, url, expected, args.screenshots)
        problems += iproblems
        for line in lines:
            print(f"       interactive: {line}")
        if not info["ipynb"]:
            problems.append("no .ipynb download link")
        else:
            br.load(url)
            nb, path, err = download_notebook(br, info, rel)
            if err:
                problems.append(err)
            else:
                problems += check_downloaded_notebook_math(br.context, base, path,
                                                           info["math"], name)
                if args.execute == "all" or (args.execute == "first" and executed == 0):
                    seconds, err = execute_notebook(nb, name)
                    problems.append("__executed__")
                    print(f"  executed {rel.with_suffix('.ipynb')} with nbclient in "
                          f"{seconds:.0f} s{' (FAILED)' if err else ''}")
                    if err:
                        problems.append(err)
            problems += [f"JS (download): {e}" for e in br.errors()]
        launch = dict(info["launch"])
        for provider in ("Binder", "Colab"):
            if repo_path not in launch.get(provider, ""):
                problems.append(f"{provider} launch link missing or not pointing at "
                                f"{repo_url}: {launch.get(provider)}")
    real = [p for p in problems if p != "__executed__"]
    light_counts = audit[rel]["light"][0]
    dark_counts = audit[rel]["dark"][0]
    axe_s = "/".join(str(light_counts[i] + dark_counts[i]) for i in IMPACTS)
    print(f"{'FAIL' if real else 'ok  '} {rel}  ({info['images']} images, {info['math']} "
          f"formulas, {info['exercises']} exercises, axe {axe_s}, keyboard "
          f"{sum(n_keys.values())} elements; {time.time() - t0:.0f} s)", flush=True)
    for p in real:
        print(f"       - {p}")
    return problems


if __name__ == "__main__":
    sys.exit(main())
