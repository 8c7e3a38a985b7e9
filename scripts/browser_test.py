"""Load every page of the built book in headless Chromium and check what a reader would see.

``python scripts/browser_test.py`` serves ``_build/html`` on 127.0.0.1 (a free port), starts
Chromium with no network access beyond loopback, drives it through the Chrome DevTools Protocol
(``websocket-client``) and checks, on every page, in light and in dark mode:

* math is rendered: no raw TeX (``$...$``, ``\\(``, ``\\begin{``, ``\\alpha``, ...) is left in
  the text outside code blocks;
* every image has loaded (``naturalWidth > 0``), and every figure produced by a code cell has an
  opaque background (its corner pixels have alpha 255), so it stays legible in dark mode;
* output text and the claims table keep a readable contrast in dark mode (ratio >= 4.5);
* no JavaScript error reached the console (errors, uncaught exceptions, failed requests);
* each ``exercise`` and ``solution`` block of the source is on the page;
* on a chapter, the ``.ipynb`` download link answers with a valid notebook, and the Binder and
  Colab launch links point at the repository of ``_config.yml``;
* on a chapter, the downloaded notebook reads like the page: rendered to HTML by nbconvert's
  exporter (MathJax 3 from the book's own copy, ``_static/mathjax``, so no network), it shows
  as many MathJax formulas as the page, within ``MATH_TOLERANCE`` (see ``notebook_math``).

It saves ``_build/screenshots/<page>.png`` (light) and ``<page>-dark.png`` (dark mode). With
``--execute first`` (default) the downloaded notebook of the first chapter is executed with
nbclient in an empty folder, outside the repository and without jupytext: the notebook a reader
downloads runs in plain Jupyter (``--execute all`` runs every chapter's, ``none`` skips it).
Exit status 1 if any check fails. Chromium comes from ``$CHROMIUM`` or the PATH (Debian package
``chromium``; ``.ci/run`` installs it).
"""

from __future__ import annotations

import argparse
import base64
import functools
import http.server
import json
import os
import re
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import websocket
import yaml

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio",
         "--hide-scrollbars", "--remote-allow-origins=*", "--window-size=1280,900",
         "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=127.0.0.1"]
SKIP_DIRS = {"_static", "_sources", "_images", "_sphinx_design_static"}
EXERCISE_RE = re.compile(r"^\s*(`{3,}|:{3,})\{(exercise|exercise-start)\}", re.M)
SOLUTION_RE = re.compile(r"^\s*(`{3,}|:{3,})\{(solution|solution-start)\}", re.M)

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


class CDP:
    """Minimal Chrome DevTools Protocol client over one page's websocket."""

    def __init__(self, ws_url):
        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events = []

    def send(self, method, params=None, timeout=60):
        self.next_id += 1
        msg_id = self.next_id
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params or {}}))
        deadline = time.time() + timeout
        while time.time() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(f"{method}: no answer in {timeout} s")

    def wait_event(self, name, timeout=60):
        for i, ev in enumerate(self.events):
            if ev["method"] == name:
                return self.events.pop(i)
        deadline = time.time() + timeout
        while time.time() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == name:
                return msg
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(f"no {name} in {timeout} s")

    def evaluate(self, expression, timeout=60):
        res = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                             "returnByValue": True}, timeout=timeout)
        if "exceptionDetails" in res:
            raise RuntimeError(f"page script failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def errors(self):
        """Console errors, uncaught exceptions and failed loads since the last call."""
        found = []
        for ev in self.events:
            method, p = ev["method"], ev.get("params", {})
            if method == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                found.append("exception: " + d.get("exception", {}).get("description",
                                                                         d.get("text", "")))
            elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                found.append("console.error: " + " ".join(
                    str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
                if p["entry"].get("url", "").endswith("/favicon.ico"):
                    continue  # the browser asks for one; the book has none
                found.append(f"log: {p['entry'].get('text', '')} {p['entry'].get('url', '')}")
        self.events.clear()
        return found


def serve(folder):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    class Server(socketserver.ThreadingTCPServer):
        def handle_error(self, request, client_address):
            pass  # a browser closing a connection early is not a page problem

    server = Server(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def find_chromium(explicit):
    for name in (explicit, os.environ.get("CHROMIUM"), "chromium", "chromium-browser",
                 "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    sys.exit("Chromium not found: install the Debian package `chromium` (see .ci/run) or set "
             "CHROMIUM")


def start_chromium(binary, profile):
    proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}",
                             "--remote-debugging-port=0", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = Path(profile) / "DevToolsActivePort"
    deadline = time.time() + 60
    while time.time() < deadline:
        if port_file.is_file() and len(port_file.read_text().split()) >= 2:
            port = port_file.read_text().split()[0]
            targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                return proc, pages[0]["webSocketDebuggerUrl"]
        if proc.poll() is not None:
            sys.exit(f"Chromium exited with status {proc.returncode}")
        time.sleep(0.2)
    proc.kill()
    sys.exit("Chromium did not open its DevTools port in 60 s")


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


def fetch(url):
    with urllib.request.urlopen(url, timeout=30) as resp:
        return resp.status, resp.read()


def check_notebook(url):
    import nbformat

    status, body = fetch(url)
    if status != 200:
        return None, f"download {url} answered {status}"
    try:
        nb = nbformat.reads(body.decode("utf-8"), as_version=4)
        nbformat.validate(nb)
    except Exception as err:  # noqa: BLE001 (report any parse/validation problem)
        return None, f"download {url} is not a valid notebook: {err}"
    if "jupytext" in nb.metadata:
        return None, f"download {url} still carries jupytext metadata"
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


# The notebook may show a few formulas more or fewer than the page and still read like it: its
# hidden first cell defines the TeX macros (one formula more), and a formula the page shows in a
# Sphinx-made caption or title may be plain text in the notebook. A MyST block left unconverted
# (a {math} fence shown as code, the bug of issue 17) loses a formula each, which on a chapter
# of 100-300 formulas the 5% tolerance catches once a few are lost, and fully when all are.
MATH_TOLERANCE = (3, 0.05)  # (formulas, fraction of the page's count): the larger applies
COUNT_MATH = ("(() => { const r = document.querySelector('article.bd-article') || "
              "document.querySelector('main') || document.body; "
              "return r.querySelectorAll('mjx-container').length; })()")


def notebook_math(cdp, nb, base, page_count, name, tmp):
    """Render the downloaded notebook ``nb`` with nbconvert's HTML exporter, open it, count
    its MathJax-rendered formulas and compare with the page's ``page_count``. Returns
    (count, problem or None)."""
    from nbconvert import HTMLExporter

    mathjax = f"{base}/_static/mathjax/tex-mml-chtml.js"  # the book's offline MathJax 3
    html, _ = HTMLExporter(template_name="lab", mathjax_url=mathjax).from_notebook_node(nb)
    # nbconvert's template configures MathJax 2; give MathJax 3 the same delimiters
    config = ("<script>window.MathJax = {tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], "
              "displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']], processEscapes: true, "
              "processEnvironments: true}};</script>")
    html = html.replace("<head>", "<head>" + config, 1)
    path = Path(tmp) / f"{name}.html"
    path.write_text(html, encoding="utf-8")
    load(cdp, path.as_uri())
    count = int(cdp.evaluate(COUNT_MATH))
    cdp.errors()  # a plain notebook page may request CDN scripts (require.js): not ours
    allowed = max(MATH_TOLERANCE[0], MATH_TOLERANCE[1] * page_count)
    if abs(count - page_count) > allowed:
        return count, (f"downloaded notebook shows {count} MathJax formulas in plain Jupyter "
                       f"(nbconvert HTML), the page {page_count} (tolerance {allowed:.0f})")
    return count, None


def screenshot(cdp, path, height):
    height = int(min(max(height, 900), 16000))
    cdp.send("Emulation.setDeviceMetricsOverride",
             {"width": 1280, "height": height, "deviceScaleFactor": 1, "mobile": False})
    shot = cdp.send("Page.captureScreenshot", {"format": "png"}, timeout=120)
    cdp.send("Emulation.clearDeviceMetricsOverride")
    path.write_bytes(base64.b64decode(shot["data"]))


def load(cdp, url, timeout=60):
    cdp.events = [e for e in cdp.events if e["method"] != "Page.loadEventFired"]
    cdp.send("Page.navigate", {"url": url})
    cdp.wait_event("Page.loadEventFired", timeout=timeout)
    # MathJax typesets after load; wait for it when the page uses it
    for attempt in range(3):
        try:
            cdp.evaluate("(async () => { if (window.MathJax && MathJax.startup && "
                         "MathJax.startup.promise) { await MathJax.startup.promise; } "
                         "await new Promise(r => setTimeout(r, 300)); return true; })()")
            return
        except RuntimeError as err:  # the page replaced itself (e.g. a redirect): wait again
            if "navigated" not in str(err) or attempt == 2:
                raise
            cdp.wait_event("Page.loadEventFired", timeout=timeout)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--screenshots", type=Path, default=ROOT / "_build" / "screenshots")
    parser.add_argument("--chromium", default=None)
    parser.add_argument("--execute", choices=["first", "all", "none"], default="first",
                        help="which downloaded chapter notebooks to execute with nbclient")
    parser.add_argument("-k", dest="select", default=None,
                        help="only pages whose path contains this string")
    args = parser.parse_args(argv)
    if not (args.html / "index.html").is_file():
        sys.exit(f"no built book in {args.html}: run `make book` first")
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    repo_url = config["repository"]["url"].rstrip("/")
    repo_path = repo_url.split("github.com/")[-1]

    args.screenshots.mkdir(parents=True, exist_ok=True)
    if not args.select:
        for old in args.screenshots.glob("*.png"):
            old.unlink()
    server, base = serve(args.html)
    profile = tempfile.mkdtemp(prefix="krr-chromium-")
    proc, ws_url = start_chromium(find_chromium(args.chromium), profile)
    failures, executed = [], 0
    t_start = time.time()
    try:
        cdp = CDP(ws_url)
        for domain in ("Page", "Runtime", "Log"):
            cdp.send(f"{domain}.enable")
        selected = [p for p in pages(args.html) if not args.select or args.select in str(p)]
        # localStorage (the theme choice) needs the origin: open a page that does not redirect
        load(cdp, f"{base}/{(selected or [Path('index.html')])[0].as_posix()}")
        cdp.errors()
        for rel in selected:
            name = str(rel.with_suffix("")).replace("/", "__")
            url = f"{base}/{rel.as_posix()}"
            problems = []
            for mode in ("light", "dark"):
                cdp.evaluate(f"localStorage.setItem('theme', '{mode}'); "
                             f"localStorage.setItem('mode', '{mode}'); true")
                load(cdp, url)
                info = json.loads(cdp.evaluate(PAGE_PROBE))
                tag = "" if mode == "light" else " (dark)"
                if info["theme"] != mode and rel.name not in ("genindex.html",):
                    problems.append(f"theme is {info['theme']!r}, expected {mode!r}")
                problems += [f"raw TeX{tag}: {t!r}" for t in info["rawTex"][:5]]
                problems += [f"image not loaded{tag}: {s}" for s in info["brokenImages"]]
                problems += [f"figure with a transparent background{tag}: {s}"
                             for s in info["transparentFigures"]]
                problems += [f"JS{tag}: {e}" for e in cdp.errors()]
                if mode == "dark":
                    problems += [f"low contrast in dark mode: {b}"
                                 for b in json.loads(cdp.evaluate(CONTRAST_PROBE))]
                screenshot(cdp, args.screenshots / f"{name}{'' if mode == 'light' else '-dark'}"
                           ".png", info["height"])
                cdp.errors()  # resizing for the screenshot may log benign messages
            blocks = source_blocks(ROOT, rel)
            if blocks is not None and blocks != (info["exercises"], info["solutions"]):
                problems.append(f"source has {blocks[0]} exercises and {blocks[1]} solutions, "
                                f"page shows {info['exercises']} and {info['solutions']}")
            if is_chapter(ROOT, rel):
                if not info["ipynb"]:
                    problems.append("no .ipynb download link")
                else:
                    nb, err = check_notebook(info["ipynb"])
                    if not err:
                        page_count = int(cdp.evaluate(COUNT_MATH))
                        nb_count, math_err = notebook_math(cdp, nb, base, page_count, name,
                                                           profile)
                        print(f"  {rel.with_suffix('.ipynb')}: {nb_count} formulas rendered, "
                              f"page {page_count}")
                        if math_err:
                            problems.append(math_err)
                    if err:
                        problems.append(err)
                    elif args.execute == "all" or (args.execute == "first" and executed == 0):
                        seconds, err = execute_notebook(nb, name)
                        executed += 1
                        print(f"  executed {rel.with_suffix('.ipynb')} with nbclient in "
                              f"{seconds:.0f} s{' (FAILED)' if err else ''}")
                        if err:
                            problems.append(err)
                launch = dict(info["launch"])
                for provider in ("Binder", "Colab"):
                    if repo_path not in launch.get(provider, ""):
                        problems.append(f"{provider} launch link missing or not pointing at "
                                        f"{repo_url}: {launch.get(provider)}")
            print(f"{'FAIL' if problems else 'ok  '} {rel}  ({info['images']} images, "
                  f"{info['exercises']} exercises)")
            for p in problems:
                print(f"       - {p}")
            failures += [(rel, p) for p in problems]
        print(f"\n{len(selected)} pages checked in light and dark mode in "
              f"{time.time() - t_start:.0f} s; screenshots in {args.screenshots}")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)
    if failures:
        print(f"{len(failures)} problem(s) on {len({r for r, _ in failures})} page(s)")
        return 1
    print("all browser checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
