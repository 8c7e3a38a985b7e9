"""Sphinx extension: the claims ledger table, generated from what the chapters recorded.

Chapters call :func:`lib.claims.record` where they assert a claim; each call appends a JSON line
to ``_build/claims/<chapter>.jsonl`` (or to ``$KRR_CLAIMS_DIR``). The directive

````md
```{claims-ledger}
- source: Malach et al. (2021), Theorem 3
  statement: what the paper claims and the course does not check (optional list, YAML)
```
````

leaves a placeholder that is filled in *after every page has been read*, i.e. after every chapter
has executed (``doctree-resolved``), so the table shows this build's values. The page holding the
directive is re-read on every build (``env-get-outdated``), so it never shows stale numbers.

For each chapter only the records of its latest execution are kept (one row per claim id). A
record whose check failed is shown as *failed* and raises a build warning (``-W`` turns it into
an error): a failed claim can never be listed as reproduced. With the configuration value
``claims_require_every_chapter = True`` a chapter (a page under ``chapters/``) that recorded no
claim also raises a warning.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import yaml
from docutils import nodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

STATUS_CLASS = {"reproduced": "claim-reproduced", "reduced size": "claim-reduced",
                "no size in source": "claim-nosize",
                "failed": "claim-failed", "not covered": "claim-not-covered"}


class claims_ledger(nodes.General, nodes.Element):  # noqa: N801 (docutils node naming)
    """Placeholder replaced by the table once every page has been read."""


class ClaimsLedgerDirective(SphinxDirective):
    has_content = True

    def run(self):
        text = "\n".join(self.content).strip()
        try:
            extra = yaml.safe_load(text) if text else []
        except yaml.YAMLError as err:
            raise self.error(f"claims-ledger: content is not valid YAML: {err}") from err
        if not isinstance(extra, list) or not all(
                isinstance(e, dict) and {"source", "statement"} <= set(e) for e in extra):
            raise self.error("claims-ledger: content must be a YAML list of mappings with "
                             "'source' and 'statement' (and optionally 'chapter')")
        docs = getattr(self.env, "claims_ledger_docs", set())
        docs.add(self.env.docname)
        self.env.claims_ledger_docs = docs
        node = claims_ledger()
        node["not_covered"] = extra
        return [node]


def claims_folder(app) -> Path:
    env = os.environ.get("KRR_CLAIMS_DIR", "")
    return Path(env) if env else Path(app.srcdir) / "_build" / "claims"


def build_run() -> tuple[int, bool]:
    """The seed and size this build executes (``KRR_SEED``, ``KRR_FULL``, as the kernels see
    them): the ledger's "this build" column shows only records of that kind of run."""
    seed = os.environ.get("KRR_SEED", "").strip()
    return (int(seed) if seed.isdigit() else 0), os.environ.get("KRR_FULL", "") == "1"


def load_records(folder: Path, run: tuple[int, bool] | None = None) -> dict[str, list[dict]]:
    """Latest run of each chapter: ``{chapter: [record, ...]}``, one record per claim id.

    With ``run = (seed, full)`` only records of runs at that seed and size count, so that a
    chapter executed under another ``KRR_SEED`` or at ``KRR_FULL=1`` (e.g. by
    ``scripts/run_tests.py``) does not replace this build's values (records without these
    fields count as seed 0, default size)."""
    out = {}
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        rows = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                logger.warning(f"claims ledger: {path}:{number} is not valid JSON")
        if run is not None:
            rows = [r for r in rows
                    if (int(r.get("seed", 0)), bool(r.get("full", False))) == run]
        if not rows:
            continue
        latest = rows[-1]["run"]
        by_id = {}
        for row in rows:
            if row["run"] == latest:
                by_id[row["claim"]] = row
        out[path.stem] = list(by_id.values())
    return out


def load_results(srcdir: Path, kind: str) -> tuple[dict, dict[str, list[dict]]]:
    """A committed sweep (``results/full`` or ``results/seeds``): its ``run.json`` and its
    records by claim id (``{}`` and ``{}`` when it was never recorded)."""
    folder = Path(srcdir) / "results" / kind
    try:
        meta = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}, {}
    by_claim: dict[str, list[dict]] = {}
    for path in sorted((folder / "claims").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                by_claim.setdefault(rec["claim"], []).append(rec)
    return meta, by_claim


def is_stale(srcdir: Path, meta: dict, chapter: str) -> bool:
    """Whether the chapter's source or ``lib/`` differ from the commit a sweep was run at (also
    when that run was made on uncommitted changes, or git cannot tell)."""
    commit = meta.get("commit")
    if not commit or meta.get("dirty") is not False:
        return True
    result = subprocess.run(
        ["git", "diff", "--quiet", commit, "--", "lib", f"chapters/{chapter}.md"],
        cwd=srcdir, capture_output=True)
    return result.returncode != 0


def chapter_run(meta: dict, chapter: str) -> dict:
    """The paper-size run that recorded ``chapter``: ``results/full/run.json`` keeps one entry
    per chapter (``make full -k NAME RECORD=1`` re-records a single chapter)."""
    return meta.get("chapters", {}).get(chapter, {})


def _full_cell(srcdir, meta, recs, chapter):
    meta = chapter_run(meta, chapter)
    if not recs:
        return nodes.paragraph(text="not run" if meta else "no paper-size run recorded")
    rec = recs[-1]
    status = rec["status"] if rec.get("passed") else "failed"
    para = nodes.paragraph()
    para += nodes.inline(text=status, classes=[STATUS_CLASS[status]])
    para += nodes.Text(f" {_fmt(rec.get('value'))} ({meta.get('date', '?')[:10]}, "
                       f"{str(meta.get('commit') or '?')[:7]})")
    if is_stale(srcdir, meta, chapter):
        para += nodes.Text(" ")
        para += nodes.inline(text="stale", classes=["claim-stale"])
    return para


def _seeds_cell(srcdir, meta, recs, chapter, passed_here):
    """k/n: seed 0 is this build; the other seeds come from the recorded sweep. A seed under
    which the chapter failed before recording the claim counts as not passed."""
    meta = chapter_run(meta, chapter)
    seeds = [int(s) for s in meta.get("seeds", [])]
    failed_seeds = {int(s) for s in meta.get("failed_seeds", [])}
    passed = {int(r["seed"]) for r in recs if r.get("passed") and "seed" in r}
    ran = {int(r["seed"]) for r in recs if "seed" in r} | (failed_seeds & set(seeds))
    k = int(bool(passed_here)) + len(passed & set(seeds))
    n = 1 + len(ran & set(seeds))
    para = nodes.paragraph(text=f"{k}/{n}")
    if meta and is_stale(srcdir, meta, chapter):
        para += nodes.Text(" ")
        para += nodes.inline(text="stale", classes=["claim-stale"])
    return para


def _book_order(env):
    """Docnames in table-of-contents order (depth first from the root document)."""
    order, seen = [], set()

    def walk(doc):
        if doc in seen:
            return
        seen.add(doc)
        order.append(doc)
        for child in env.toctree_includes.get(doc, []):
            walk(child)

    walk(env.config.root_doc)
    return order


def _flatten(v):
    return [w for u in v for w in _flatten(u)] if isinstance(v, list) else [v]


def _fmt(v):
    if v is None:
        return "not finite"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        flat = _flatten(v)
        if len(flat) <= 2:
            return ", ".join(_fmt(u) for u in flat)
        nums = [u for u in flat if u is not None]
        if not nums:
            return "not finite"
        return f"{len(flat)} values in [{_fmt(min(nums))}, {_fmt(max(nums))}]"
    return str(v)


def _check_text(check):
    kind = check.get("kind")
    if kind == "close":
        return f"{_fmt(check['expected'])} ± {_fmt(check['tolerance'])}"
    if kind == "bounds":
        lo, hi = check.get("lo"), check.get("hi")
        if lo is not None and hi is not None:
            return f"in [{_fmt(lo)}, {_fmt(hi)}]"
        if lo is not None:
            return f"≥ {_fmt(lo)}"
        if hi is not None:
            return f"≤ {_fmt(hi)}"
        return "finite"
    return "checked in the chapter"


def _inline(text):
    """Paragraph with ``$...$`` segments as math nodes and the rest as text."""
    para = nodes.paragraph()
    for i, part in enumerate(re.split(r"(?<!\\)\$", text)):
        if not part:
            continue
        para += nodes.math(part, part) if i % 2 else nodes.Text(part)
    return para


def _row(cells):
    row = nodes.row()
    for cell in cells:
        entry = nodes.entry()
        entry += cell if isinstance(cell, nodes.Node) else nodes.paragraph(text=str(cell))
        row += entry
    return row


def _table(rows):
    headers = ["Claim", "Status", "Measured", "Check", "Paper size", "Seeds passed", "Source",
               "Chapter"]
    widths = [30, 9, 10, 10, 14, 6, 13, 8]
    table = nodes.table(classes=["claims-ledger-table"])
    group = nodes.tgroup(cols=len(headers))
    table += group
    for w in widths:
        group += nodes.colspec(colwidth=w)
    head = nodes.thead()
    head += _row([nodes.paragraph(text=h) for h in headers])
    group += head
    body = nodes.tbody()
    for r in rows:
        body += r
    group += body
    return table


def _chapter_link(app, fromdoc, docname):
    """Link to the chapter, labelled with its number and the short title (before a colon)."""
    title = app.env.titles[docname].astext() if docname in app.env.titles else docname
    title = title.split(":", 1)[0]
    number = app.env.toc_secnumbers.get(docname, {}).get("", ())
    if number:
        title = ".".join(map(str, number)) + ". " + title
    ref = nodes.reference("", "", internal=True,
                          refuri=app.builder.get_relative_uri(fromdoc, docname))
    ref += nodes.Text(title)
    para = nodes.paragraph()
    para += ref
    return para


def fill(app, doctree, fromdoc):
    placeholders = list(doctree.findall(claims_ledger))
    if not placeholders:
        return
    records = load_records(claims_folder(app), build_run())
    srcdir = Path(app.srcdir)
    full_meta, full_recs = load_results(srcdir, "full")
    seeds_meta, seed_recs = load_results(srcdir, "seeds")
    order = _book_order(app.env)
    chapter_docs = {}
    for doc in order:
        chapter_docs.setdefault(doc.rsplit("/", 1)[-1], doc)
    require = app.config.claims_require_every_chapter
    for doc in order:
        stem = doc.rsplit("/", 1)[-1]
        if require and doc.startswith("chapters/") and not records.get(stem):
            logger.warning(f"claims ledger: chapter {doc} recorded no claim "
                           "(call lib.claims.record where it asserts one)", location=fromdoc)

    rows, counts = [], {s: 0 for s in STATUS_CLASS}
    for chapter in sorted(records, key=lambda c: order.index(chapter_docs[c])
                          if c in chapter_docs else len(order)):
        doc = chapter_docs.get(chapter)
        if doc is None:
            logger.info(f"claims ledger: skipping records of {chapter!r}, not a page of the book")
            continue
        for rec in records[chapter]:
            status = rec["status"] if rec.get("passed") else "failed"
            if status == "failed":
                logger.warning(f"claims ledger: claim {rec['claim']} failed in the latest run of "
                               f"{doc} (value {_fmt(rec.get('value'))})", location=fromdoc)
            counts[status] += 1
            claim = _inline(rec["statement"])
            claim.insert(0, nodes.literal(text=rec["claim"]))
            claim.insert(1, nodes.Text(": "))
            status_node = nodes.paragraph()
            status_node += nodes.inline(text=status, classes=[STATUS_CLASS[status]])
            rows.append(_row([claim, status_node,
                              nodes.paragraph(text=_fmt(rec.get("value"))),
                              nodes.paragraph(text=_check_text(rec.get("check", {}))),
                              _full_cell(srcdir, full_meta, full_recs.get(rec["claim"], []),
                                         chapter),
                              _seeds_cell(srcdir, seeds_meta, seed_recs.get(rec["claim"], []),
                                          chapter, rec.get("passed")),
                              _inline(rec["source"]), _chapter_link(app, fromdoc, doc)]))
    for node in placeholders:
        extra_rows = []
        for e in node["not_covered"]:
            doc = chapter_docs.get(str(e.get("chapter", "")))
            where = _chapter_link(app, fromdoc, doc) if doc else nodes.paragraph(text="")
            status_node = nodes.paragraph()
            status_node += nodes.inline(text="not covered", classes=[STATUS_CLASS["not covered"]])
            extra_rows.append(_row([_inline(e["statement"]), status_node,
                                    nodes.paragraph(text=""), nodes.paragraph(text=""),
                                    nodes.paragraph(text=""), nodes.paragraph(text=""),
                                    _inline(e["source"]), where]))
        total = dict(counts, **{"not covered": counts["not covered"] + len(extra_rows)})
        text = "This build: " + ", ".join(f"{n} {s}" for s, n in total.items()) + "."
        for label, meta in (("Paper size", full_meta), ("Seeds", seeds_meta)):
            runs = list(meta.get("chapters", {}).values()) or ([meta] if meta else [])
            if not runs:
                continue
            dates = sorted(r.get("date", "?")[:10] for r in runs)
            span = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
            seeds = sorted({int(s) for r in runs for s in r.get("seeds", [])})
            which = f" {', '.join(map(str, seeds))} besides 0 (this build)," if seeds else ""
            text += (f" {label}:{which} runs of {span}, {len(runs)} chapter"
                     f"{'s' if len(runs) != 1 else ''}.")
        summary = nodes.paragraph(text=text)
        if rows or extra_rows:
            node.replace_self([summary, _table(rows + extra_rows)])
        else:
            node.replace_self(nodes.paragraph(text="No claim has been recorded yet."))


def always_reread(app, env, added, changed, removed):
    return sorted(getattr(env, "claims_ledger_docs", set()) - set(removed))


def purge(app, env, docname):
    getattr(env, "claims_ledger_docs", set()).discard(docname)


def merge(app, env, docnames, other):
    env.claims_ledger_docs = getattr(env, "claims_ledger_docs", set()) | (
        getattr(other, "claims_ledger_docs", set()) & set(docnames))


def setup(app):
    app.add_config_value("claims_require_every_chapter", False, "env")
    app.add_node(claims_ledger)
    app.add_directive("claims-ledger", ClaimsLedgerDirective)
    app.connect("doctree-resolved", fill)
    app.connect("env-get-outdated", always_reread)
    app.connect("env-purge-doc", purge)
    app.connect("env-merge-info", merge)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
