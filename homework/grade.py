"""Grade a folder of submissions with otter-grader: CSV of per-question points, feedback files.

``python -m homework.grade SUBMISSIONS [--chapter setup] [--out grades/]`` (``make grade``).

* Submissions: ``.ipynb`` files in any letter case, flat or in per-student subfolders (the
  subfolder names the student), and otter's zip exports (the notebook inside the zip).
* Engine: ``otter grade`` in Docker when a Docker daemon answers (``--docker auto``, the
  default), otherwise ``otter run`` with the autograder zip of ``make assign``, one submission
  at a time per job, each in its own session (process group), with a wall-time limit, a memory
  limit (``RLIMIT_AS``), an output cap and a per-cell time limit that interrupts the cell and
  goes on to the next. When ``unshare`` can create namespaces (:func:`namespaces_available`),
  each ``otter run`` is in its own user, PID and mount namespaces (:func:`namespace_command`):
  it sees only its own run folder of the work folder, nothing of the checkout's ``_build``,
  and its own processes, and every process it starts dies with it.
  Otherwise (one warning, ``--jobs 1``) every process the submission started is killed
  afterwards, including those that left the group and its environment: the grader is their
  subreaper (:func:`become_subreaper`) and kills every new child but the judge
  (:func:`reap_orphans`).
  The judge of the hidden tests runs outside, without a JAX cache.
* JAX compilation cache (unless ``--no-cache``): before the first submission, one run of the
  handout (instructor's code, no solutions) fills a warm cache held in the grader's memory
  (:func:`warm_cache`); each submission's kernel starts from a private copy of it in its own
  run folder, and nothing a submission writes there is read back, so no submission's cache
  entries reach another submission.
* Output: ``<out>/grades.csv`` (student, file, chapter, status, total, possible, one column per
  question, notes) and ``<out>/feedback/<student>.md`` (per question: points, a passed/failed
  line and the hint; never the hidden tests' code). Statuses: ``graded``, ``kernel died`` (the
  cell it died in is removed and the notebook graded again), ``error``, ``unreadable: <reason>``
  and ``wrong chapter: <name>`` (0 out of the chapter's points), ``flagged: <what>`` (the static
  scan of the code cells found tampering: 0 points until the instructor reviews the notebook and
  grades again with ``--accept-flagged <student>``). A cell stopped by the per-cell limit is
  named in the notes with its time; a cell with a SyntaxError is named with its line.
* Every ``.ipynb``/``.zip`` file is one row (a student with several files: ``grace``,
  ``grace-2``, with a note). A file that could not be read is a row with 0 points out of the
  chapter's, its reason in ``status`` and what to ask the student in ``notes``; so is a student
  who handed in only other files (``carol.pdf``: ``unreadable: not a notebook``). Other files
  of a student who has a submission are ``skipped`` rows naming the student (no points).
* Exit status 2 with a message when nothing gradable is found or every input is unreadable.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKEN_VAR = "KRR_GRADE_TOKEN"
JUDGE_START = 300.0  # seconds the judge may take to start (import JAX, lib, the checkers)
SOCKET_VAR = "KRR_JUDGE_SOCKET"  # homework.hidden.SOCKET_VAR: where the kernel finds the judge
IN_KERNEL = {"parity/beyond-kernel"}  # homework.hidden.IN_KERNEL: otter's result counts


class GradeError(Exception):
    """A problem with the inputs that stops grading (message for the instructor)."""


@dataclass
class Submission:
    student: str
    path: Path  # the notebook (extracted from a zip when needed)
    origin: Path  # the file as handed in
    nb: object = None
    chapter: str | None = None
    error: str | None = None
    note: str = ""  # e.g. "one of 2 files of grace"


@dataclass
class Row:
    student: str
    file: str
    chapter: str
    status: str = "graded"
    scores: dict = field(default_factory=dict)  # question -> (score, possible)
    messages: dict = field(default_factory=dict)  # question -> feedback text
    notes: str = ""
    seconds: float = 0.0
    otter_scores: dict | None = None  # a flagged row: otter's points, withheld until review

    @property
    def total(self):
        return round(sum(s for s, _ in self.scores.values()), 6)


# --------------------------------------------------------------------------------------------
# Collecting submissions
# --------------------------------------------------------------------------------------------


def _is_notebook(p: Path) -> bool:
    return p.is_file() and p.suffix.lower() == ".ipynb"


def _skip(p: Path, root: Path) -> bool:
    parts = p.relative_to(root).parts if p != root else ()
    return any(part.startswith(".") or part == "__MACOSX" for part in parts)


def collect(folder: str | os.PathLike, work: Path, skipped: list | None = None
            ) -> list[Submission]:
    """The submissions under ``folder`` (a folder or one file); zips are extracted into ``work``.

    Every ``.ipynb`` (any letter case) and ``.zip`` file is a submission; the student is the
    first subfolder under ``folder`` or else the file's name. A student with several files gets
    one row per file (``grace``, ``grace-2``, ...), each with a note naming the others. Other
    files (``.txt``, ``.pdf``, ...) are not submissions: their paths are appended to
    ``skipped`` (hidden files, ``.ipynb_checkpoints`` and ``__MACOSX`` are ignored silently).

    Raises:
        GradeError: ``folder`` does not exist or holds no ``.ipynb``/``.zip`` file.
    """
    root = Path(folder)
    if not root.exists():
        raise GradeError(f"SUBMISSIONS: {root} does not exist")
    every = [root] if root.is_file() else sorted(
        p for p in root.rglob("*") if p.is_file() and not _skip(p, root))
    files = [p for p in every if p.suffix.lower() in (".ipynb", ".zip")]
    if skipped is not None:
        skipped.extend(p for p in every if p not in files)
    if not files:
        raise GradeError(f"SUBMISSIONS: no submission in {root} (expected .ipynb files, in any "
                         "letter case, flat or in one subfolder per student, or otter zip "
                         "exports)")
    subs: list[Submission] = []
    for p in files:
        rel = p.relative_to(root) if p != root else Path(p.name)
        student = rel.parts[0] if len(rel.parts) > 1 else re.sub(r"\.(ipynb|zip)$", "", p.name,
                                                                  flags=re.I)
        if p.suffix.lower() == ".zip":
            try:
                with zipfile.ZipFile(p) as z:
                    names = [n for n in z.namelist() if n.lower().endswith(".ipynb")
                             and not Path(n).name.startswith(".") and "__MACOSX" not in n]
                    if not names:
                        subs.append(Submission(student, p, p, error="zip without a notebook"))
                        continue
                    dest = work / "unzipped" / f"{len(subs)}"
                    dest.mkdir(parents=True)
                    target = dest / Path(names[0]).name
                    target.write_bytes(z.read(names[0]))
                    subs.append(Submission(student, target, p))
            except (zipfile.BadZipFile, OSError) as err:
                subs.append(Submission(
                    student, p, p, error="broken zip (re-export)",
                    note=f"the zip does not open ({err}): run the notebook's export cell in "
                    "Jupyter in a browser and download the zip from the link it shows (or hand "
                    "in the .ipynb itself)"))
        else:
            subs.append(Submission(student, p, p))
    # one row per file: a student seen twice gets a suffix and a note in every row
    by_student: dict[str, list[Submission]] = {}
    for s in subs:
        by_student.setdefault(s.student, []).append(s)
    for name, group in by_student.items():
        if len(group) == 1:
            continue
        rows = [name] + [f"{name}-{k}" for k in range(2, len(group) + 1)]
        files = ", ".join(str(g.origin.relative_to(root) if root.is_dir() else g.origin)
                          for g in group)
        for s, row_name in zip(group, rows, strict=True):
            s.student = row_name
            s.note = (f"{name} handed in {len(group)} files ({files}), graded in the rows "
                      f"{', '.join(rows)}: keep the one that counts")
    return subs


def student_of(path: Path, root: Path) -> str:
    """The student a file under ``root`` belongs to, as :func:`collect` names them: the first
    subfolder, or else the file's name without its extension."""
    rel = path.relative_to(root) if root.is_dir() and path != root else Path(path.name)
    return rel.parts[0] if len(rel.parts) > 1 else re.sub(r"\.[^.]*$", "", rel.name)


UNREADABLE_NOTE = ("not graded, 0 points: ask {student} for the notebook itself (an .ipynb file "
                   "that opens in Jupyter) or the zip its export cell makes, then grade again")


def unreadable_rows(subs: list[Submission], skipped: list[Path], root: Path, chapter: str
                    ) -> tuple[list[Row], list[tuple[str, Path]]]:
    """CSV rows for what could not be graded. Each unreadable submission is a row (0 points, its
    reason in the status, what to ask the student in the notes); a student who handed in no
    ``.ipynb``/``.zip`` file at all, only other files, gets one such row listing them
    (``unreadable: not a notebook (.pdf file)``), so no student is missing from the CSV. The
    other skipped files (beside a student's submission) are returned as ``(student, path)``
    for a ``skipped`` row."""
    rows = [Row(s.student, str(s.origin), chapter, f"unreadable: {s.error}",
                notes="; ".join(filter(None, [s.note, UNREADABLE_NOTE.format(student=s.student)])))
            for s in subs if s.error]
    handed = {student_of(s.origin, root) for s in subs}
    alone: dict[str, list[Path]] = {}
    others: list[tuple[str, Path]] = []
    for p in skipped:
        who = student_of(p, root)
        if who in handed:
            others.append((who, p))
        else:
            alone.setdefault(who, []).append(p)
    for who, paths in alone.items():
        kinds = sorted({p.suffix.lower() or "no extension" for p in paths})
        rows.append(Row(who, ", ".join(str(p) for p in paths), chapter,
                        f"unreadable: not a notebook ({', '.join(kinds)} file"
                        f"{'s' if len(paths) > 1 else ''})",
                        notes=f"only .ipynb and .zip files are graded; {who} handed in "
                        f"{', '.join(p.name for p in paths)}; "
                        + UNREADABLE_NOTE.format(student=who)))
    return rows, others


def notebook_chapter(nb) -> str | None:
    """The chapter a homework notebook belongs to (its metadata), or None."""
    md = nb.get("metadata", {})
    for getter in (lambda: md["homework"]["chapter"], lambda: md["otter"]["assignment_name"]):
        try:
            value = getter()
        except (KeyError, TypeError):
            continue
        if isinstance(value, str) and value:
            return value
    return None


def read_all(subs: list[Submission]) -> None:
    import warnings

    import nbformat

    # notebooks made by hand or by older tools lack cell ids; nbformat adds them (and warns)
    warnings.filterwarnings("ignore", message="Cell is missing an id field")

    for s in subs:
        if s.error:
            continue
        try:
            s.nb = nbformat.read(s.path, as_version=4)
        except Exception as err:  # noqa: BLE001 (any unreadable file is reported, not fatal)
            s.error = f"not a notebook ({type(err).__name__}: {str(err)[:120]})"
            continue
        s.chapter = notebook_chapter(s.nb)


# --------------------------------------------------------------------------------------------
# Static scan of the code cells (before grading)
# --------------------------------------------------------------------------------------------

# Modules whose import alone is flagged: they reach the grader's machinery (imports, the
# interpreter's frames and objects, other processes).
FLAGGED_MODULES = {"importlib", "builtins", "homework", "subprocess", "gc", "ctypes",
                   "multiprocessing", "pty"}
# module attributes whose use is flagged (module, prefix of the attribute)
FLAGGED_ATTRIBUTES = [("os", "fork"), ("os", "system"), ("os", "popen"), ("os", "exec"),
                      ("os", "spawn"), ("os", "posix_spawn"), ("inspect", "currentframe"),
                      ("inspect", "stack"), ("sys", "_getframe"), ("sys", "modules"),
                      ("sys", "settrace"), ("sys", "setprofile"), ("sys", "meta_path"),
                      ("sys", "path_hooks")]
FLAGGED_CALLS = {"setattr", "delattr", "exec", "eval", "compile", "__import__", "get_ipython"}
SHELL_MAGICS = ("%system", "%sx", "%%bash", "%%sh", "%%script", "%%perl", "%%ruby", "%sc ")


@dataclass
class Scan:
    flags: list = field(default_factory=list)  # "code cell 3 (`...`): assigns numpy.max"
    syntax_errors: list = field(default_factory=list)  # (label, line, message, source)


def _root(node):
    """The name at the root of ``a.b[c].d`` or ``f(x).y`` (None if there is none)."""
    import ast

    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call | ast.Starred):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _python_of(source: str) -> tuple[str, list[str]]:
    """The cell's source with IPython magics and shell lines blanked (``pass``), and the
    shell commands found (``!ls``, ``%%bash``, ...)."""
    shell = []
    lines = source.split("\n")
    first = lines[0].strip() if lines else ""
    if first.startswith("%%"):
        if first.startswith(SHELL_MAGICS):
            shell.append(first[:40])
        if not first.startswith(("%%time", "%%timeit", "%%capture")):
            return "", shell
        lines = lines[1:]
    out = []
    for line in lines:
        stripped = line.lstrip()
        if stripped.startswith(("!", "%")):
            if stripped.startswith("!") or stripped.startswith(SHELL_MAGICS):
                shell.append(stripped[:40])
            out.append(line[:len(line) - len(stripped)] + "pass")
        else:
            out.append(line)
    return "\n".join(out), shell


def scan_notebook(nb) -> Scan:
    """Flag code that tampers with modules or the grader, and find cells that do not parse.

    Flagged: an assignment (or ``del``) to an attribute or item of an imported module
    (``numpy.max = ...``, ``lib.ntk.empirical_ntk = ...``, ``sys.modules[...] = ...``) or to a
    ``__dict__``/``vars()``; importing :data:`FLAGGED_MODULES`; the attributes of
    :data:`FLAGGED_ATTRIBUTES`; the calls of :data:`FLAGGED_CALLS`; ``__builtins__``; shell
    commands (``!cmd``, ``%%bash``). Honest answers do none of these."""
    import ast

    result = Scan()
    parsed = []
    imported: set[str] = set()
    for src, label in _code_cells(nb):
        code, shell = _python_of(src)
        for cmd in shell:
            result.flags.append(f"{label}: shell command `{cmd}`")
        try:
            tree = ast.parse(code)
        except SyntaxError as err:
            result.syntax_errors.append((label, err.lineno, err.msg, src))
            continue
        parsed.append((label, tree))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                imported.update(a.asname or a.name for a in node.names)
    for label, tree in parsed:
        found: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                for mod in mods:
                    if mod.split(".")[0] in FLAGGED_MODULES:
                        found.append(f"imports {mod.split('.')[0]}")
                    for m, attr in FLAGGED_ATTRIBUTES:
                        if mod.startswith(f"{m}.{attr}"):
                            found.append(f"uses {m}.{attr}")
            elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
                targets = (node.targets if isinstance(node, ast.Assign | ast.Delete)
                           else [node.target])
                stack = list(targets)
                while stack:
                    t = stack.pop(0)
                    if isinstance(t, ast.Tuple | ast.List):
                        stack.extend(t.elts)
                        continue
                    if not isinstance(t, ast.Attribute | ast.Subscript | ast.Starred):
                        continue
                    text = ast.unparse(t)
                    if _root(t) in imported or "__dict__" in text or "vars(" in text:
                        found.append(f"{'deletes' if isinstance(node, ast.Delete) else 'assigns'}"
                                     f" {text[:60]}")
            elif isinstance(node, ast.Attribute):
                base = _root(node)
                for m, attr in FLAGGED_ATTRIBUTES:
                    if node.attr.startswith(attr) and isinstance(node.value, ast.Name) and \
                            node.value.id == m:
                        found.append(f"uses {m}.{node.attr}")
                if node.attr in ("__builtins__", "__globals__", "__code__", "__subclasses__"):
                    found.append(f"uses {node.attr}")
                del base
            elif isinstance(node, ast.Name) and node.id in ("__builtins__", "__import__"):
                found.append(f"uses {node.id}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in FLAGGED_CALLS:
                found.append(f"calls {node.func.id}()")
        for what in dict.fromkeys(found):  # once each, in order
            result.flags.append(f"{label}: {what}")
    return result


def _flag_status(flags: list[str]) -> str:
    whats = list(dict.fromkeys(f.split(": ", 1)[1] for f in flags))
    return "flagged: " + "; ".join(whats[:3]) + (f" (+{len(whats) - 3} more)" if len(whats) > 3
                                                 else "")


def apply_scan(row: "Row", scan: Scan, accepted: bool) -> None:
    """Report syntax errors and flags on a graded row; a flagged row gets 0 on every autograded
    question (the flag cannot be attributed to one question) until the instructor reviews the
    notebook and regrades with ``--accept-flagged <student>``."""
    import re as _re

    notes = [row.notes] if row.notes else []
    for label, line, msg, src in scan.syntax_errors:
        notes.append(f"{label} has a SyntaxError at line {line} ({msg}): it did not run, so "
                     "what it defines is missing")
        defined = set(_re.findall(r"^\s*def\s+(\w+)\s*\(|^\s*(\w+)\s*=", src, _re.M))
        names = {a or b for a, b in defined}
        for q, lines in row.messages.items():
            row.messages[q] = [
                _re.sub(r"(\w+) is not defined \(cell deleted or renamed\?\)",
                        lambda m, label=label, line=line, msg=msg, names=names: (
                            f"{m.group(1)} is not defined: {label} has a SyntaxError at "
                            f"line {line} ({msg}); fix it and run the cell")
                        if m.group(1) in names else m.group(0), text) for text in lines]
    if scan.flags:
        otter_total = row.total
        possible = sum(p for _, p in row.scores.values())
        if accepted:
            notes.append("flag reviewed and accepted (--accept-flagged): " + "; ".join(scan.flags))
        else:
            row.otter_scores = dict(row.scores)
            row.status = _flag_status(scan.flags)
            row.scores = {q: (0.0, p) for q, (_, p) in row.scores.items()}
            notes.append("flagged by the static scan of the code cells: " + "; ".join(scan.flags)
                         + f". Points withheld until review (otter's points: {otter_total:g} / "
                           f"{possible:g}); to accept them, grade again with --accept-flagged "
                           f"{row.student}")
    row.notes = "; ".join(notes)


def flag_contradictions(row: "Row", accepted: bool) -> None:
    """Flag a row whose feedback for a question says "failed" (with full points) or "not
    attempted" while otter gave it points: otter's in-kernel result (the :data:`IN_KERNEL`
    questions) was changed by the notebook (e.g. ``otter.execute.Checker`` patched). Its points
    are withheld, as for a flag of the static scan, until ``--accept-flagged``."""
    bad = []
    for q, lines in row.messages.items():
        for line in lines:
            m = re.match(r"- \w+(?: test \d+)? \(([\d.]+) / ([\d.]+)\): failed: (.*)", line)
            if m and float(m.group(1)) > 0 and (float(m.group(1)) >= float(m.group(2))
                                                or "not attempted" in m.group(3)):
                bad.append(q)
                break
    if not bad:
        return
    what = (f"otter gave points to {', '.join(sorted(bad))} while its feedback says the tests "
            "failed (otter's results changed in the kernel?)")
    if accepted:
        row.notes = "; ".join(filter(None, [row.notes, f"flag reviewed and accepted: {what}"]))
        return
    if row.otter_scores is None:
        row.otter_scores = dict(row.scores)
    total = sum(s for s, _ in row.otter_scores.values())
    possible = sum(p for _, p in row.otter_scores.values())
    if not row.status.startswith("flagged"):
        row.status = "flagged: otter's points contradict its feedback"
    row.scores = {q: (0.0, p) for q, (_, p) in row.scores.items()}
    row.notes = "; ".join(filter(None, [row.notes, (
        f"flagged: {what}. Points withheld until review (otter's points: {total:g} / "
        f"{possible:g}); to accept them, grade again with --accept-flagged {row.student}")]))


# --------------------------------------------------------------------------------------------
# Running one submission without containers
# --------------------------------------------------------------------------------------------

LIMITS_CELL = r'''
# Added by the course's grader (homework/grade.py): per-cell time limit, output cap, and a log of
# the cells run (so that an interrupted cell or a kernel death can be reported).
def _krr_grader_limits(limit={cell_timeout}, cap={output_cap}, cells={cells!r}):
    import hashlib, json, os, re, signal, sys, time
    class CellTimeLimit(BaseException):
        """Raised in a cell that ran longer than the per-cell limit (not a KeyboardInterrupt)."""
    events = os.environ.get("{events_var}")
    state = {{"cell": None, "start": 0.0}}
    def log(**record):
        if events:
            with open(events, "a") as f:
                f.write(json.dumps(record) + "\n")
    cell_file = re.compile(r"(ipykernel_\d+[/\\]\d+\.py|<ipython-input-[\d-]+>)$")
    def in_cell(frame):
        while frame is not None:
            if cell_file.search(frame.f_code.co_filename):
                return True
            frame = frame.f_back
        return False
    def alarm(signum, frame):
        # raise only while the cell's own code is on the stack: raised in IPython's or the
        # kernel's code (e.g. while it shows the previous interruption), it would kill the kernel
        if state["cell"] is None or not in_cell(frame):
            return
        seconds = time.monotonic() - state["start"]
        log(event="interrupted", cell=state["cell"], seconds=round(seconds, 1), limit=limit)
        raise CellTimeLimit(f"cell stopped by the grader after {{limit}} s")
    ip = get_ipython()
    def pre(info=None):
        src = getattr(info, "raw_cell", "") or ""
        if "otter" in src and (".check(" in src or "GradingResults" in src or "Checker" in src):
            return  # otter's own grading cells: no limit
        digest = hashlib.sha1(src.strip().encode()).hexdigest()
        first = next((line for line in src.splitlines() if line.strip()), "")[:60]
        state["cell"] = cells.get(digest) or first or "?"
        state["start"] = time.monotonic()
        log(event="start", cell=state["cell"])
        signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, limit, 0.5)
    def post(result=None):
        signal.setitimer(signal.ITIMER_REAL, 0)
        if state["cell"] is not None:
            log(event="end", cell=state["cell"])
        state["cell"] = None
    ip.events.register("pre_run_cell", pre)
    ip.events.register("post_run_cell", post)
    class Capped:
        def __init__(self, stream):
            self._s, self._n, self._warned = stream, 0, False
        def write(self, text):
            self._n += len(text)
            if self._n <= cap:
                return self._s.write(text)
            if not self._warned:
                self._warned = True
                self._s.write("\n[output truncated by the grader]\n")
            return len(text)
        def __getattr__(self, name):
            return getattr(self._s, name)
    sys.stdout, sys.stderr = Capped(sys.stdout), Capped(sys.stderr)
_krr_grader_limits()
del _krr_grader_limits
'''
EVENTS_VAR = "KRR_GRADE_EVENTS"
DEAD_CELL = "# removed by the grader: the kernel died while this cell ran\n"


def _digest(source) -> str:
    import hashlib

    src = source if isinstance(source, str) else "".join(source)
    return hashlib.sha1(src.strip().encode()).hexdigest()


def _cell_labels(nb) -> dict[str, str]:
    """sha1 of each code cell's stripped source -> "code cell <n> (`first line`)", n counting
    the code cells of the notebook as handed in, from 1."""
    labels = {}
    for src, label in _code_cells(nb):
        labels.setdefault(_digest(src), label)
    return labels


def _code_cells(nb):
    """Each code cell's source with its label "code cell <n> (`first line`)", n counting the
    code cells of the notebook as handed in, from 1."""
    n = 0
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        n += 1
        src = c.source if isinstance(c.source, str) else "".join(c.source)
        first = next((line for line in src.splitlines() if line.strip()), "").strip()[:60]
        yield src, f"code cell {n} (`{first}`)"


def _limited_copy(sub: Submission, dest: Path, chapter: str, cell_timeout: float,
                  output_cap: int, drop: frozenset = frozenset()) -> Path:
    import copy

    import nbformat

    nb = copy.deepcopy(sub.nb)
    labels = _cell_labels(nb)
    for c in nb.cells:  # the cell the kernel died in (second run): replaced by a comment
        if c.cell_type == "code" and labels.get(_digest(c.source)) in drop:
            c.source = DEAD_CELL
    cell = nbformat.v4.new_code_cell(LIMITS_CELL.format(
        cell_timeout=cell_timeout, output_cap=output_cap, cells=labels, events_var=EVENTS_VAR))
    nb.cells.insert(0, cell)
    for c in nb.cells:  # stale outputs are not graded and only cost memory
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{chapter}.ipynb"
    nbformat.write(nb, path)
    return path


EVENT_NAMES = ("start", "end", "interrupted")
EVENT_CELL_MAX = 200  # characters of a cell's name in an event (the grader writes < 80)


def valid_event(record) -> dict | None:
    """The record as the grader uses it, or None when it is not one the limits cell writes:
    ``event`` one of :data:`EVENT_NAMES`, ``cell`` a str of at most :data:`EVENT_CELL_MAX`
    characters, ``seconds`` (when present, and always in ``interrupted``) a finite number. The
    events file is written inside the kernel, so a notebook can add any line to it."""
    import math

    if not isinstance(record, dict) or record.get("event") not in EVENT_NAMES:
        return None
    cell = record.get("cell")
    if not isinstance(cell, str) or not cell or len(cell) > EVENT_CELL_MAX:
        return None
    out = {"event": record["event"], "cell": cell}
    if "seconds" in record or record["event"] == "interrupted":
        seconds = record.get("seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or \
                not math.isfinite(seconds):
            return None
        out["seconds"] = float(seconds)
    return out


def read_events(path: Path) -> list[dict]:
    """The records the limits cell wrote (start, end, interrupted), oldest first; lines that
    are not such records (:func:`valid_event`) are dropped."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = valid_event(json.loads(line))
        except (ValueError, RecursionError):
            continue  # a line cut by the kernel's death
        if record is not None:
            out.append(record)
    return out


def interrupted_cells(events: list[dict]) -> list[tuple[str, float]]:
    """(cell, seconds) of each cell stopped by the per-cell limit, once per cell."""
    seen: dict[str, float] = {}
    for e in events:
        if e.get("event") == "interrupted" and e.get("cell") not in seen:
            seen[e["cell"]] = float(e.get("seconds", 0.0))
    return list(seen.items())


def running_cell(events: list[dict]) -> str | None:
    """The cell that started last and never ended (where the kernel died), or None."""
    current = None
    for e in events:
        if e.get("event") == "start":
            current = e.get("cell")
        elif e.get("event") == "end":
            current = None
    return current


# --------------------------------------------------------------------------------------------
# Isolation of one submission: namespaces (util-linux unshare, setpriv), or the fallback
# --------------------------------------------------------------------------------------------

NAMESPACES_VAR = "KRR_GRADE_NAMESPACES"  # "0": never use namespaces (the fallback, for tests)
# Run inside the new user, PID and mount namespaces, before the submission: hide a folder of
# the instructor's (``hide``: the checkout's _build, with the master notebooks, the autograder
# zips and any JAX cache of an earlier grader: nothing of it stays visible) and the grading
# work folder (every submission's run folder, judge socket and events) behind tmpfs, bind back
# this submission's own run folder (with its private JAX cache) at its path, give it a
# /dev/shm of its own, then run the command with no capabilities and no way to gain any (so it
# cannot unmount the tmpfs). The run folder is opened (fd 3) before anything is hidden and
# bound from /proc/self/fd, so the order holds wherever it is: the work folder may be inside
# the hidden one (TMPDIR in _build); the bind comes last.
# First, each folder of ``readonly`` (the checkout and the venv: code the judge loads, with
# its __pycache__) is bound onto itself read-only; the run folder stays writable inside one,
# as a bind takes the flags of the mount it comes from (fd 3 was opened before).
NAMESPACE_SCRIPT = r"""set -e
work="$1"; box="$2"; net="$3"; hide="$4"; n="$5"; shift 5
if [ "$net" = net ]; then ip link set lo up; fi
exec 3<"$box"
while [ "$n" -gt 0 ]; do
  mount --bind --no-canonicalize "$1" "$1"
  mount -o remount,bind,ro --no-canonicalize "$1"
  n=$((n - 1)); shift
done
if [ "$hide" != - ]; then mount -t tmpfs -o mode=0755,size=1m krr-grade-hidden "$hide"; fi
mkdir -p "$work"
mount -t tmpfs -o mode=0755,size=1m krr-grade-hidden "$work"
mkdir -p "$box"
mount --bind --no-canonicalize /proc/self/fd/3 "$box"
exec 3<&-
cd "$box"
mount -t tmpfs -o mode=1777 krr-grade-shm /dev/shm 2>/dev/null || true
exec setpriv --no-new-privs --bounding-set -all --inh-caps -all -- "$@"
"""
NO_NAMESPACES = ("warning: `unshare` (util-linux) cannot create user, PID and mount namespaces "
                 "here, so the submissions are not isolated: grading one at a time (--jobs 1); "
                 "every process a notebook starts, even one detached from its session and "
                 "environment, is killed after it (the grader is their subreaper), but while "
                 "it runs a notebook sees every process and file of your user: it can kill its "
                 "own judge, read the master notebooks in _build (solutions and hidden seeds), "
                 "and leave a process started by another service of yours (systemd --user, "
                 "cron, at) that outlives grading")
_namespaces: bool | None = None  # the probe's answer, once per grader process
_network = False  # and whether a network namespace (loopback only) works too


def readonly_folders() -> tuple[Path, ...]:
    """The folders a submission must not write inside its namespaces: the checkout (``lib/``
    and ``homework/`` with their ``__pycache__``, code the judge loads) and the Python
    environment grading runs in (``sys.prefix``: the venv), when it is not inside the
    checkout."""
    prefix = Path(sys.prefix).resolve()
    root = ROOT.resolve()
    return (root,) if prefix.is_relative_to(root) else (root, prefix)


def namespace_command(work: Path, box: Path, command: list[str], net: bool | None = None,
                      hide: Path | None = None, readonly: tuple[Path, ...] = ()) -> list[str]:
    """``command`` in new user, PID and mount namespaces in which only ``box`` of ``work`` is
    visible, ``hide`` (when it exists) is an empty folder (except the folders on the way to
    ``box``, when ``box`` is inside it), each folder of ``readonly`` (bound onto itself first,
    so ``box`` and ``hide`` inside one stay as described) cannot be written, and nothing has
    capabilities; every process it starts dies with it. With ``net`` (default: when the
    probe found it works, :func:`namespaces_available`) also a network namespace with only a
    loopback interface: no network, and no TCP port of another submission's kernel or of the
    machine (the judge's socket is a file: it still works).

    Raises:
        ValueError: a folder of ``readonly`` is not an existing folder.
    """
    if net is None:
        net = bool(namespaces_available()) and _network
    for folder in readonly:
        if not Path(folder).is_dir():
            raise ValueError(f"readonly: {folder} is not an existing folder")
    hidden = str(hide) if hide is not None and Path(hide).is_dir() else "-"
    return ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child",
            "--mount-proc", "--mount", *(["--net"] if net else []), "--", "sh", "-c",
            NAMESPACE_SCRIPT, "krr-grade-box", str(work), str(box), "net" if net else "-",
            hidden, str(len(readonly)), *map(str, readonly), *command]


PROBE = ('test "$$" = 1 && test ! -e "$0/other" && test -e "$0/run-probe/mine" && '
         '! touch "$0/ro/planted" 2>/dev/null && touch "$0/run-probe/written" && '
         'test ! -e "$0/build/secret" && test ! -e "$0/build/cache" && '
         'grep -q "^CapEff:[[:space:]]*0*$" /proc/self/status && echo krr-namespaces-ok')


def _probe_namespaces() -> bool:
    global _network
    _network = False
    if os.environ.get(NAMESPACES_VAR) == "0":
        return False
    if shutil.which("ip") and _probe(net=True):
        _network = True
        return True
    return _probe(net=False)


def _probe(net: bool) -> bool:
    if not (shutil.which("unshare") and shutil.which("setpriv") and shutil.which("sh")):
        return False
    with tempfile.TemporaryDirectory(prefix="krr-probe-") as d:
        work = Path(d)
        (work / "run-probe").mkdir()
        (work / "run-probe" / "mine").touch()
        (work / "other").touch()
        (work / "build" / "cache").mkdir(parents=True)
        (work / "build" / "secret").touch()
        (work / "ro").mkdir()
        try:
            proc = subprocess.run(namespace_command(work, work / "run-probe",
                                                    ["sh", "-c", PROBE, str(work)], net=net,
                                                    hide=work / "build",
                                                    readonly=(work / "ro",)),
                                  capture_output=True, text=True, timeout=60,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return False
    return proc.returncode == 0 and "krr-namespaces-ok" in proc.stdout


def namespaces_available(refresh: bool = False) -> bool:
    """Whether each ``otter run`` can run in its own namespaces (:func:`namespace_command`):
    probed once per process (``KRR_GRADE_NAMESPACES=0`` says no)."""
    global _namespaces
    if _namespaces is None or refresh:
        _namespaces = _probe_namespaces()
    return _namespaces


def _prctl():
    """libc's ``prctl``, loaded before any fork (a ``preexec_fn`` must not import)."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


_PRCTL = _prctl()
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _die_with(parent: int) -> None:
    """In a child before ``exec``: be killed when ``parent`` (the grader) dies, even if it
    died already (then the child's parent is no longer ``parent``: exit at once)."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def become_subreaper() -> bool:
    """Make this process (the grader) the reaper of its orphaned descendants
    (``PR_SET_CHILD_SUBREAPER``): a process whose parent exits becomes the grader's child
    instead of init's, whatever its session and environment, so :func:`reap_orphans` finds
    what a submission detached. Whether it took effect (False: not Linux)."""
    return _PRCTL is not None and _PRCTL(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def children() -> set[int]:
    """The pids of this process's children (of all its threads; zombies included), from
    ``/proc/self/task/*/children`` when the kernel has it, else from the parent pid of every
    process in ``/proc/*/stat``."""
    me = os.getpid()
    found: set[int] = set()
    lists = list(Path(f"/proc/{me}/task").glob("*/children"))
    for f in lists:
        try:
            found.update(int(pid) for pid in f.read_text().split())
        except OSError:
            pass  # a thread that ended
    if lists:
        return found
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue  # a process that ended
        if int(stat.rsplit(")", 1)[1].split()[1]) == me:  # field 4: ppid (the name may hold ")")
            found.add(int(d.name))
    return found


def reap_orphans(before: set[int], keep=()) -> int:
    """Kill (SIGKILL) and reap every child of this process that is neither in ``before`` (its
    children before the run) nor in ``keep`` (the live judge), until none is left: with
    :func:`become_subreaper`, every process the run left behind, even one in a session of its
    own with a clean environment (the children of a killed one become ours in turn and go in
    the next round). How many."""
    spared = set(before) | set(keep)
    killed = 0
    for _ in range(100):
        new = children() - spared
        if not new:
            break
        for pid in new:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in new:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass  # reaped elsewhere
        killed += len(new)
    return killed


# every judge and otter run of this grader, killed by :func:`stop_all` (SIGTERM)
_live: set = set()
_stopping = False


class Stopped(Exception):
    """Grading was stopped (SIGTERM): no new submission starts."""


def stop_all() -> None:
    """Kill every judge and ``otter run`` (with its session) this grader started, and start no
    other."""
    global _stopping
    _stopping = True
    for p in list(_live):
        for kill in (lambda p=p: os.killpg(p.pid, signal.SIGKILL), p.kill):
            try:
                kill()
            except OSError:
                pass


def _kill_tagged(token: str) -> int:
    """Kill every process whose environment holds ``KRR_GRADE_TOKEN=token``; how many."""
    needle = f"{TOKEN_VAR}={token}".encode()
    killed = 0
    for _ in range(3):
        found = 0
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == os.getpid():
                continue
            try:
                env = (d / "environ").read_bytes()
            except OSError:
                continue
            if needle in env.split(b"\0"):
                try:
                    os.kill(int(d.name), signal.SIGKILL)
                    found += 1
                except OSError:
                    pass
        killed += found
        if not found:
            break
        time.sleep(0.2)
    return killed


# The JAX persistent compilation cache of a submission's kernel (set in :func:`_otter_run`):
# its folder, and the thresholds that make every compilation an entry. Each run gets a private
# folder in its run folder, filled from a snapshot held in the grader's memory
# (:func:`warm_cache`: the entries written by a trusted run of the handout); what a
# submission writes there is never read back, so no submission's cache reaches another.
CACHE_VARS = ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
              "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES")
CACHE_SUFFIX = "-cache"  # JAX's entry files (jax._src.lru_cache); -atime and .lockfile are not
CACHE_FOLDER = "jax-cache"  # in each run folder


def read_cache(folder: Path) -> dict[str, bytes]:
    """The entries of a JAX cache folder: ``{file name: content}`` of its regular files (not
    symbolic links) named ``*-cache``, at its top level; ``{}`` when ``folder`` is not a
    folder."""
    entries = {}
    if folder.is_dir() and not folder.is_symlink():
        for p in sorted(folder.iterdir()):
            if p.name.endswith(CACHE_SUFFIX) and not p.is_symlink() and p.is_file():
                entries[p.name] = p.read_bytes()
    return entries


def write_cache(entries: dict[str, bytes], folder: Path) -> Path:
    """A new cache folder ``folder`` holding ``entries`` (:func:`read_cache`); returns it.

    Raises:
        ValueError: a name of ``entries`` is not a plain file name ending in ``-cache``.
        FileExistsError: ``folder`` exists.
    """
    for name in entries:
        if Path(name).name != name or name in ("", ".", "..") or \
                not name.endswith(CACHE_SUFFIX):
            raise ValueError(f"entries: {name!r} is not the file name of a JAX cache entry")
    folder.mkdir(parents=True)
    for name, data in entries.items():
        (folder / name).write_bytes(data)
    return folder


def trusted_notebook(autograder: Path, chapter: str) -> Path | None:
    """The notebook that fills the warm cache (:func:`warm_cache`): the handout of
    ``chapter`` that ``make assign`` wrote beside ``autograder``
    (``dist/student/<chapter>.ipynb`` for ``dist/autograder/*.zip``): instructor's code with
    no solution in it, so the compiled code it leaves in the cache tells a student nothing
    the handout does not (an entry holds the computation's HLO and source locations; a
    cache filled by the solutions would hand out their compiled form). None when there is no
    such file or it names another chapter."""
    path = Path(autograder).resolve().parent.parent / "student" / f"{chapter}.ipynb"
    if not path.is_file():
        return None
    try:
        import nbformat

        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 (an unreadable handout: no warm cache, grading goes on)
        return None
    return path if notebook_chapter(nb) in (None, chapter) else None


def judge_environment(env: dict) -> dict:
    """The judge's environment: ``env`` (the submission's) without the JAX cache variables
    (:data:`CACHE_VARS`: the submission writes its cache folder, and an entry planted there
    would be compiled code the judge runs), the token and the events file."""
    return {k: v for k, v in env.items() if k not in (*CACHE_VARS, TOKEN_VAR, EVENTS_VAR)}


def otter_command(autograder: Path, out: Path, notebook: Path) -> list[str]:
    """The command that grades ``notebook`` with ``autograder`` into the folder ``out``."""
    return [sys.executable, "-m", "otter", "run", "-a", str(autograder), "-o", str(out),
            "--no-logo", str(notebook)]


def _otter_run(sub: Submission, chapter: str, autograder: Path, work: Path, *, timeout: float,
               cell_timeout: float, memory: int, output_cap: int,
               cache: dict[str, bytes] | None, drop: frozenset = frozenset(),
               isolate: bool | None = None, plan: dict | None = None,
               return_cache: bool = False) -> dict:
    """One ``otter run`` of a submission in its own session, with limits; killed afterwards.
    With ``isolate`` (default: :func:`namespaces_available`) it runs in its own namespaces
    (:func:`namespace_command`): it sees only its own run folder of ``work``, nothing of the
    checkout's ``_build``, and its own processes, and every process it starts dies with it.
    Without it, the grader becomes the subreaper of what the run detaches and, after the run,
    kills every new child but the judge (:func:`reap_orphans`; one run at a time). With
    ``cache`` (entries, :func:`read_cache`) the kernel's JAX compilation cache is a new
    private folder of the run folder holding a copy of them (:data:`CACHE_FOLDER`), removed
    with the run folder; None: no cache. The judge runs outside, without it
    (:func:`judge_environment`). ``plan`` (:func:`judge_plan`) goes to the judge's stdin,
    then closed.

    Returns ``{"results": dict | None, "log": str, "events": list, "timed_out": bool,
    "verdicts": dict}``, and with ``return_cache`` also ``"cache"``: the entries of the
    private cache folder after the run (only for a trusted notebook: :func:`warm_cache`)."""
    if _stopping:
        raise Stopped("grading was stopped")
    if isolate is None:
        isolate = namespaces_available()
    token = secrets.token_hex(8)
    box = work / f"run-{token}"
    nb_path = _limited_copy(sub, box / "in", chapter, cell_timeout, output_cap, drop)
    if isolate:  # the rest of work (where a local copy of the zip may be) is hidden
        autograder = Path(shutil.copy(autograder, box / autograder.name))
    out = box / "out"
    out.mkdir()
    events = box / "events.jsonl"
    env = dict(os.environ)
    env[TOKEN_VAR] = token
    env[EVENTS_VAR] = str(events)
    env.pop("KRR_FULL", None)
    env["PYTHONPATH"] = ""  # the submission imports lib from the autograder's copy
    env["MPLBACKEND"] = "Agg"
    env["JUPYTER_RUNTIME_DIR"] = str(box / "runtime")  # the kernel's connection file (its key)
    private = box / CACHE_FOLDER
    if cache is not None:  # a private copy of the trusted entries; never read back for a grade
        env.update(zip(CACHE_VARS, (str(write_cache(cache, private)), "0", "0"), strict=True))

    grader = os.getpid()
    if not isolate:  # what the run detaches becomes our child: killed after it
        become_subreaper()
    before = children()

    def limits():
        _die_with(grader)
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    # the judge of the hidden tests: the instructor's checkout, its stdout a pipe of ours
    judge_env = judge_environment(env)
    judge_log = open(box / "judge.log", "wb")  # noqa: SIM115 (closed below)
    judge = subprocess.Popen(
        [sys.executable, "-I", str(ROOT / "homework" / "judge.py"), str(ROOT),
         str(box / "judge.sock")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=judge_log, env=judge_env, start_new_session=True,
        preexec_fn=lambda: _die_with(grader))
    _live.add(judge)
    try:  # the grader decides what is judged: read before the judge listens
        judge.stdin.write(json.dumps(plan).encode() if plan else b"")
        judge.stdin.close()
    except OSError:
        pass  # a judge that died at once: no socket, no verdict
    env[SOCKET_VAR] = str(box / "judge.sock")
    # otter's temporary files, among them the kernel's connection file with its key (a
    # process that reads another kernel's key can run code in it): in the run folder
    (box / "tmp").mkdir()
    env["TMPDIR"] = str(box / "tmp")
    ready = time.monotonic() + JUDGE_START
    while not (box / "judge.sock").exists() and judge.poll() is None and \
            time.monotonic() < ready:  # its start (JAX) is not charged to a cell's time limit
        time.sleep(0.1)
    log = box / "otter.log"
    timed_out = False
    command = otter_command(autograder, out, nb_path)
    if isolate:  # the checkout's _build (master notebooks, autograder zips) hidden
        command = namespace_command(work, box, command, hide=ROOT / "_build",
                                    readonly=readonly_folders())
    with open(log, "wb") as logf:
        try:
            if _stopping:
                raise Stopped("grading was stopped")
            proc = subprocess.Popen(
                command, cwd=box, env=env, stdout=logf, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=limits)
        except BaseException:
            judge.kill()
            judge.wait()
            _live.discard(judge)
            judge_log.close()
            raise
        _live.add(proc)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            _live.discard(proc)
            _kill_tagged(token)
            if not isolate:  # one run at a time: every other new child is the submission's
                reap_orphans(before, keep={judge.pid})
            judge.kill()  # the notebook is gone: what the judge wrote is final
            written = judge.stdout.read()
            judge.wait()
            _live.discard(judge)
            judge_log.close()
    results = out / "results.json"
    run = {"results": json.loads(results.read_text()) if results.is_file() else None,
           "log": log.read_bytes()[-4000:].decode(errors="replace"),
           "events": read_events(events), "timed_out": timed_out,
           "verdicts": read_verdicts(written)}
    if return_cache:
        run["cache"] = read_cache(private)
    return run


REPEATED = ("this hidden test reached the grader's judge more than once (the notebook sent its "
            "own requests to the judge): it scores 0")


def read_verdicts(written: bytes) -> dict[str, tuple[bool, str]]:
    """The judge's verdicts (its stdout): ``exercise|seed|kind`` -> (ok, hint), the FIRST of
    each key; a key with two or more lines (a notebook that sent its own requests) fails with
    :data:`REPEATED`."""
    verdicts: dict[str, tuple[bool, str]] = {}
    repeated = set()
    for line in written.decode(errors="replace").splitlines():
        try:
            v = json.loads(line)
            key = str(v["key"])
            if key in verdicts:
                repeated.add(key)
            else:
                verdicts[key] = (v.get("ok") is True, str(v.get("hint", "")))
        except (ValueError, KeyError, TypeError):
            continue
    for key in repeated:
        verdicts[key] = (False, REPEATED)
    return verdicts


def _verify_calls(autograder: Path):
    """``(test file name, call node)`` for every ``verify(...)`` call of the autograder zip's
    test files (``tests/*.py``, parsed with ``ast``; files that do not parse are skipped)."""
    import ast

    with zipfile.ZipFile(autograder) as z:
        for n in sorted(z.namelist()):
            if not (n.startswith("tests/") and n.endswith(".py")):
                continue
            try:
                tree = ast.parse(z.read(n).decode(errors="replace"))
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "verify":
                    yield n, node


def hidden_answers(autograder: Path) -> dict[str, str]:
    """exercise -> the answer's name in the notebook (the third argument of ``verify(...)``)."""
    import ast

    found: dict[str, str] = {}
    for _, node in _verify_calls(autograder):
        if len(node.args) >= 3 and all(isinstance(a, ast.Constant)
                                       for a in (node.args[0], node.args[2])):
            found[str(node.args[0].value)] = str(node.args[2].value)
    return found


def answer_source(nb, name: str) -> str | None:
    """The source of the answer ``name`` as the submitted notebook defines it, read with ``ast``
    (never from the kernel): the last top-level ``def name``, followed by the source of the
    top-level functions it calls (by name, recursively). None when the notebook's last
    top-level binding of ``name`` is not a plain ``def`` (an assignment, an import, a class, a
    ``def`` inside ``if``/``try``...), or when there is no such ``def``."""
    import ast

    defs: dict[str, str] = {}
    bound_last: dict[str, str] = {}  # name -> "def" or "other", for the last top-level binding
    hidden: set[str] = set()  # rebound out of sight: `global name` in a function, a string

    def binds(node):
        """The names a module-level statement binds (not inside function bodies)."""
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            yield node.id
        elif isinstance(node, ast.alias):
            yield (node.asname or node.name).split(".")[0]
        for child in ast.iter_child_nodes(node):
            yield from binds(child)

    for src, _ in _code_cells(nb):
        code = _python_of(src)[0]
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Global | ast.Nonlocal):
                hidden.update(node.names)
            elif isinstance(node, ast.Constant) and type(node.value) is str:
                hidden.add(node.value)
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef):
                start = (stmt.decorator_list[0] if stmt.decorator_list else stmt).lineno - 1
                defs[stmt.name] = "\n".join(code.split("\n")[start:stmt.end_lineno])
                bound_last[stmt.name] = "def"
            else:
                for t in binds(stmt):
                    bound_last[t] = "other"
    if name in hidden:
        return None
    if bound_last.get(name) != "def":
        return None
    parts, seen, todo = [], set(), [name]
    while todo:
        fn = todo.pop(0)
        if fn in seen or bound_last.get(fn) != "def":
            continue
        seen.add(fn)
        parts.append(defs[fn])
        for node in ast.walk(ast.parse(defs[fn])):
            if isinstance(node, ast.Name) and node.id in defs and node.id not in seen:
                todo.append(node.id)
    return "\n\n".join(parts) + "\n"


# CPython 3.11's ast module counts its recursion depth per interpreter, not per thread: two
# grading jobs parsing at once raised "SystemError: AST constructor recursion depth mismatch"
# (cpython gh-106905), an `error` row; the jobs' parsing (:func:`judge_plan`) takes turns.
_AST_LOCK = threading.Lock()


def judge_plan(nb, autograder: Path, table: dict[str, list[str]]) -> dict:
    """What the grader gives the judge on its stdin: the announced keys and, per exercise, the
    answer's source read from the submitted notebook (:func:`answer_source`)."""
    keys = sorted({k for ks in table.values() for k in ks})
    sources = {}
    with _AST_LOCK:
        names = hidden_answers(autograder)
        for ex in sorted({k.split("|")[0] for k in keys}):
            name = names.get(ex)
            sources[ex] = answer_source(nb, name) if name and name.isidentifier() else None
    return {"keys": keys, "sources": sources}


def hidden_tests(autograder: Path) -> dict[str, list[str]]:
    """question -> the keys ``exercise|seed|kind`` of its hidden tests (one point each), read
    from the ``verify(...)`` calls of the autograder zip's test files (``kind``: ``own`` for
    the own-code test, ``value`` otherwise)."""
    import ast

    keys: dict[str, list[tuple[int, str]]] = {}
    for n, node in _verify_calls(autograder):
        if node.args and isinstance(node.args[0], ast.Constant):
            kw = {k.arg: k.value for k in node.keywords}
            if isinstance(kw.get("seed"), ast.Constant):
                keys.setdefault(Path(n).stem, []).append(
                    (node.lineno, f"{node.args[0].value}|{kw['seed'].value}|"
                                  f"{'own' if 'forbid' in kw else 'value'}"))
    return {q: [k for _, k in sorted(found)] for q, found in keys.items()}


NO_VERDICT = ("this test never reached the grader's judge (the notebook stopped it or changed "
              "the tests)")


def feedback_hint(hint: str) -> str:
    """A test's hint as the feedback line shows it after "failed: ": without the "fails: " that
    the judge and the kernel put before a checker's message (the line would read "failed:
    fails: ...")."""
    hint = str(hint).strip()
    while hint.lower().startswith("fails:"):
        hint = hint[len("fails:"):].strip()
    return hint or "the test failed (no message)"


def apply_verdicts(row: Row, table: dict[str, list[str]], verdicts: dict) -> None:
    """The judge's verdicts replace otter's in-kernel results of the hidden tests: one point per
    test the judge passed; a test without a verdict scores 0 with :data:`NO_VERDICT`. A question
    checked in the kernel (:data:`IN_KERNEL`) keeps otter's points."""
    for q, keys in table.items():
        if any(k.split("|")[0] in IN_KERNEL for k in keys):
            continue
        lines = []
        score = 0.0
        for j, key in enumerate(keys, 1):
            ok, hint = verdicts.get(key, (False, NO_VERDICT))
            score += 1.0 if ok else 0.0
            lines.append(f"- hidden test {j} ({1 if ok else 0} / 1): "
                         + ("passed" if ok else f"failed: {feedback_hint(hint)[:500]}"))
        possible = row.scores.get(q, (0.0, float(len(keys))))[1]
        row.scores[q] = (score, possible)
        row.messages[q] = lines


def grader_digest() -> dict[str, str]:
    """sha256 of every file of the instructor's ``homework/`` and ``lib/`` (not caches)."""
    import hashlib

    out = {}
    for folder in ("homework", "lib"):
        for p in sorted((ROOT / folder).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
                out[str(p.relative_to(ROOT))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def warm_cache(notebook: Path | None, chapter: str, autograder: Path, work: Path, *,
               table: dict, **limits) -> dict[str, bytes]:
    """The trusted warm cache that every submission's private cache starts from: the entries
    (:func:`read_cache`) one ``otter run`` of ``notebook`` (:func:`trusted_notebook`: the
    handout, instructor's code) compiles from an empty cache, run as a submission is
    (``limits``: those of :func:`_otter_run`, ``isolate`` among them); held in the grader's
    memory, never written where a submission can reach it. ``{}`` when ``notebook`` is None
    (every submission then starts from an empty private cache).

    Raises:
        Stopped: grading was stopped.
    """
    if notebook is None:
        return {}
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    sub = Submission("warm-up", notebook, notebook, nb=nb, chapter=chapter)
    run = _otter_run(sub, chapter, autograder, work, cache={}, return_cache=True,
                     plan=judge_plan(nb, autograder, table), **limits)
    return run["cache"]


def kernel_died(log: str) -> bool:
    """Whether otter's output says the notebook's kernel died (nbclient's DeadKernelError)."""
    return "DeadKernelError" in log or "Kernel died" in log


def run_local(sub: Submission, chapter: str, autograder: Path, work: Path, *, timeout: float,
              cell_timeout: float, memory: int, output_cap: int,
              cache: dict[str, bytes] | None, table: dict | None = None,
              isolate: bool | None = None) -> Row:
    """Grade one submission with ``otter run`` in its own session, with limits.

    A cell stopped by the per-cell limit is named in the notes (with its time). When the kernel
    dies, the cell it died in is replaced by a comment and the submission is run once more:
    the status is ``kernel died`` and the other cells' answers keep their points."""
    row = Row(sub.student, str(sub.origin), chapter)
    table = hidden_tests(autograder) if table is None else table
    opts = dict(timeout=timeout, cell_timeout=cell_timeout, memory=memory,
                output_cap=output_cap, cache=cache, isolate=isolate,
                plan=judge_plan(sub.nb, autograder, table))
    start = time.perf_counter()
    run = _otter_run(sub, chapter, autograder, work, **opts)
    notes = []
    if run["results"] is None and not run["timed_out"] and kernel_died(run["log"]):
        dead = running_cell(run["events"]) or "an unknown cell"
        row.status = "kernel died"
        notes.append(f"the kernel died while {dead} ran")
        if dead != "an unknown cell":
            again = _otter_run(sub, chapter, autograder, work, drop=frozenset({dead}), **opts)
            if again["results"] is not None:
                notes.append("graded again without that cell: the other cells' answers count")
            else:
                notes.append("graded again without that cell, which gave no result either")
            run = {**again, "events": run["events"] + again["events"]}
    for cell, seconds in interrupted_cells(run["events"]):
        notes.append(f"{cell} was interrupted by the per-cell limit after {seconds:g} s "
                     f"(limit {cell_timeout:g} s); the next cells ran")
    if run["timed_out"]:
        notes.append(f"stopped after the total limit of {timeout:.0f} s")
    row.seconds = time.perf_counter() - start
    if run["results"] is None:
        if row.status == "graded":
            row.status = "error"
        tail = run["log"][-600:]
        notes.append(f"otter run gave no result; last output: {tail!r}")
    else:
        _fill_from_results(row, run["results"])
        apply_verdicts(row, table, run["verdicts"])
    row.notes = "; ".join(notes)
    return row


def _hint(output: str) -> str:
    """The message of a failed test, without its code: the last ``AssertionError: ...`` line of
    otter's output (the hidden tests' code holds their keys and forbidden lists)."""
    found = re.findall(r"AssertionError: (.+)", output)
    if found:
        return feedback_hint(found[-1])[:500]
    found = re.findall(r"^\w*(?:Error|Exception|Interrupt|Limit): (.+)$", output, re.M)
    if found:
        return feedback_hint(found[-1])[:500]
    return "the test failed (no message)"


def _fill_from_results(row: Row, data: dict) -> None:
    """Per-question points from otter's (Gradescope-format) results.json, and per test a pass or
    fail line with its hint; the tests' code (in otter's output) is never kept."""
    for test in data.get("tests", []):
        name = str(test.get("name", ""))
        q = re.sub(r"\s*\((Public|Hidden).*$", "", name).split(" - ")[0].strip()
        if not q or q == "Public Tests" or test.get("max_score") is None:
            continue  # otter's summary entry, not a question
        score = float(test.get("score") or 0.0)
        possible = float(test.get("max_score") or 0.0)
        old = row.scores.get(q, (0.0, 0.0))
        row.scores[q] = (old[0] + score, old[1] + possible)
        row.messages.setdefault(q, []).extend(_test_lines(name, q, test, score, possible))


def _test_lines(name: str, q: str, test: dict, score: float, possible: float) -> list[str]:
    """Feedback lines of one otter results entry: ``passed``/``failed: <hint>`` per test."""
    output = str(test.get("output") or "")
    kind = "hidden" if "Hidden" in name or test.get("visibility") == "hidden" else \
        "public" if "Public" in name else "tests"
    failed = (score < possible) or bool(re.search(r"❌|failed|Error", output))
    if not failed:
        return [f"- {kind} ({score:g} / {possible:g}): passed"]
    return [f"- {kind} ({score:g} / {possible:g}): failed: {_hint(output)}"]


# --------------------------------------------------------------------------------------------
# Docker path
# --------------------------------------------------------------------------------------------


def docker_available() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def docker_arguments(folder: Path, autograder: Path, out: Path, timeout: float,
                     jobs: int) -> list[str]:
    """The arguments of ``otter grade`` (otter 7: the submissions' folder is positional), with
    networking off in the containers."""
    return [str(folder), "-a", str(autograder), "-o", str(out), "--ext", "ipynb",
            "--timeout", str(int(timeout)), "--containers", str(jobs), "--no-network"]


def run_docker(subs: list[Submission], chapter: str, autograder: Path, work: Path,
               timeout: float, jobs: int) -> list[Row]:
    """``otter grade`` (one container per submission) on a folder of the notebooks."""
    folder = work / "docker-in"
    folder.mkdir()
    names = {}
    for s in subs:
        target = folder / f"{s.student}.ipynb"
        shutil.copy(s.path, target)
        names[target.stem] = s
    out = work / "docker-out"
    proc = subprocess.run([sys.executable, "-m", "otter", "grade",
                           *docker_arguments(folder, autograder, out, timeout, jobs)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise GradeError(f"otter grade failed:\n{proc.stdout}\n{proc.stderr}")
    rows = []
    with open(out / "final_grades.csv") as f:
        for rec in csv.DictReader(f):
            stem = Path(rec.get("file", "")).stem
            s = names.get(stem)
            row = Row(s.student if s else stem, str(s.origin) if s else stem, chapter)
            for k, v in rec.items():
                if k not in ("file", "total", "possible", "percent_correct", "grading_status"):
                    row.scores[k] = (float(v or 0), float("nan"))
            rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------


def _progress(row: Row, width: int = 160) -> str:
    """One console line per submission; the notes are cut at a word, with an ellipsis."""
    line = f"{row.student}: {row.status} {row.total if row.scores else 0:g}"
    if row.seconds:
        line += f" ({row.seconds:.1f} s)"
    if row.notes:
        room = max(20, width - len(line) - 3)
        notes = row.notes if len(row.notes) <= room else \
            row.notes[:room].rsplit(" ", 1)[0].rstrip(",;:") + " ..."
        line += " - " + notes
    return line


def _duplicates(subs: list[Submission]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for s in subs:
        if " handed in " in s.note:
            found.setdefault(s.note.split(" handed in ")[0], []).append(
                f"{s.student} ({s.origin.name})")
    return found


def find_autograder(chapter: str) -> Path:
    found = sorted((ROOT / "_build" / "assign" / chapter / "dist" / "autograder").glob(
        "*autograder*.zip"))
    if not found:
        raise GradeError(f"no autograder zip for {chapter}: run `make assign` first (or pass "
                         "--autograder)")
    return found[-1]


def write_outputs(rows: list[Row], out: Path, questions: list[str],
                  possible: dict[str, float] | None = None, skipped=()) -> Path:
    """``grades.csv`` and ``feedback/<student>.md``. ``possible`` (question -> points of the
    chapter) is the denominator of the rows that were not graded (unreadable, wrong chapter,
    no result): their total is 0 out of the chapter's full points, not "0 / 0"."""
    possible = possible or {}
    full = sum(possible.values())
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "grades.csv"

    def denominator(r):
        return sum(p for _, p in r.scores.values()) if r.scores else full

    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "file", "chapter", "status", "total", "possible", *questions,
                    "notes"])
        for r in rows:
            w.writerow([r.student, r.file, r.chapter, r.status, f"{r.total if r.scores else 0:g}",
                        f"{denominator(r):g}", *[f"{r.scores.get(q, (0.0, 0.0))[0]:g}"
                                                for q in questions], r.notes])
        for item in skipped:  # beside a submission: a row that says so, no points or feedback
            who, p = item if isinstance(item, tuple) else ("", item)
            w.writerow([who, str(p), "", "skipped: not a submission (only .ipynb and .zip "
                        "files are graded)", "", "", *["" for _ in questions],
                        f"not graded; {who}'s submission is graded in its own row" if who
                        else "not graded"])
    fb = out / "feedback"
    fb.mkdir(exist_ok=True)
    for r in rows:
        lines = [f"# Feedback: {r.student} ({r.chapter})", "",
                 f"Status: {r.status}. Points: {r.total if r.scores else 0:g} / "
                 f"{denominator(r):g}", "",
                 "Only the autograded questions are counted here: written answers (derivations), "
                 "if the homework has any, are graded separately by your instructor.", ""]
        if r.status.startswith(("unreadable", "wrong chapter")):
            lines += ["This file was not graded: every question counts 0 points. "
                      + ("Hand in the notebook of this chapter." if r.status.startswith("wrong")
                         else "Hand in the notebook itself (an .ipynb file that opens in "
                              "Jupyter) or the zip its last cell makes."), ""]
        if r.notes:
            lines += [f"Notes: {r.notes}", ""]
        for q in questions:
            s, p = r.scores.get(q, (0.0, possible.get(q, 0.0)))
            lines.append(f"## {q}: {s:g} / {p:g}")
            tests = r.messages.get(q) or []
            if tests:
                lines += [""] + list(tests)
            elif r.status == "graded":
                lines += ["", "- no test result for this question"]
            lines.append("")
        (fb / f"{r.student}.md").write_text("\n".join(lines))
    return csv_path


def autograder_points(autograder: Path) -> dict[str, float]:
    """Points of each autograded question of an autograder zip, read from otter's
    exception-format test files (``tests/<question>.py``): the module's ``points = N`` when
    there is one, else the sum of its ``@test_case(points=...)``."""
    points: dict[str, float] = {}
    with zipfile.ZipFile(autograder) as z:
        for n in z.namelist():
            if not (n.startswith("tests/") and n.endswith(".py")):
                continue
            text = z.read(n).decode(errors="replace")
            total = re.search(r"^points\s*=\s*([0-9.]+)\s*$", text, re.M)  # the question's
            cases = re.findall(r"test_case\(\s*points\s*=\s*([0-9.]+)", text)
            points[Path(n).stem] = float(total.group(1)) if total else sum(map(float, cases))
    return points


def local_autograder(autograder: Path, work: Path) -> Path:
    """A copy of the autograder zip for grading here: no PDF of the manual questions (it needs
    LaTeX, and the manual questions are graded on Gradescope or by reading the notebooks) and
    no Gradescope token, so grading here never uploads anything."""
    with zipfile.ZipFile(autograder) as z:
        names = z.namelist()
        if "otter_config.json" not in names:
            return autograder
        config = json.loads(z.read("otter_config.json"))
        if not (config.get("pdf") or config.get("token")):
            return autograder
        for key in ("pdf", "token", "course_id", "assignment_id"):
            config.pop(key, None)
        copy = work / f"local-{autograder.name}"
        with zipfile.ZipFile(copy, "w", zipfile.ZIP_DEFLATED) as out:
            for info in z.infolist():
                data = (json.dumps(config, indent=2).encode() if info.filename ==
                        "otter_config.json" else z.read(info))
                out.writestr(info, data)
    return copy


def grade(folder, *, chapter: str | None = None, out: str | os.PathLike = "grades",
          autograder: str | os.PathLike | None = None, docker: str = "auto", jobs: int = 1,
          timeout: float = 600, cell_timeout: float = 60, memory_gb: float = 6,
          output_mb: float = 20, cache: bool = True, accept_flagged=(),
          log=print) -> tuple[list[Row], Path]:
    """Grade the submissions in ``folder``; write the CSV and the feedback files under ``out``.

    Raises:
        GradeError: no submission, every input unreadable, an unknown chapter or no autograder.
    """
    global _stopping
    out = Path(out)
    work = Path(tempfile.mkdtemp(prefix="krr-grade-"))
    _stopping = False
    handler = None

    def on_term(signum, frame):
        stop_all()  # the judges and the notebooks first, so that the workers return at once
        raise Stopped(f"grading stopped by signal {signum}: no grades written")

    if threading.current_thread() is threading.main_thread():
        handler = signal.signal(signal.SIGTERM, on_term)
    try:
        skipped: list[Path] = []
        subs = collect(folder, work, skipped)
        read_all(subs)
        readable = [s for s in subs if s.error is None]
        if not readable:
            raise GradeError("SUBMISSIONS: every input is unreadable: " + "; ".join(
                f"{s.origin}: {s.error}" for s in subs))
        if chapter is None:
            named = [s.chapter for s in readable if s.chapter]
            if not named:
                raise GradeError("no submission names its chapter: pass CHAPTER=<chapter>")
            chapter = max(set(named), key=named.count)
        ag = Path(autograder) if autograder else find_autograder(chapter)
        points = autograder_points(ag)
        handout = trusted_notebook(ag, chapter)
        ag = local_autograder(ag, work)
        table = hidden_tests(ag)
        digest = grader_digest()
        questions = sorted(points)
        todo: list[Submission] = []
        rows, skipped = unreadable_rows(subs, skipped, Path(folder), chapter)
        for s in subs:
            if s.error:
                continue  # a row of unreadable_rows
            elif s.chapter and s.chapter != chapter:
                rows.append(Row(s.student, str(s.origin), chapter,
                                f"wrong chapter: {s.chapter}",
                                notes="; ".join(filter(None, [
                                    f"this is the notebook of chapter {s.chapter!r}, not "
                                    f"{chapter!r}: not graded (grade it with CHAPTER="
                                    f"{s.chapter})", s.note]))))
            else:
                todo.append(s)
        use_docker = docker == "yes" or (docker == "auto" and docker_available())
        scans = {s.student: scan_notebook(s.nb) for s in todo}
        accepted = set(accept_flagged or ())

        def finish(s, row):
            apply_scan(row, scans[s.student], s.student in accepted)
            flag_contradictions(row, s.student in accepted)
            if s.note:
                row.notes = "; ".join(filter(None, [row.notes, s.note]))
            return row

        if use_docker and todo:
            by_name = {s.student: s for s in todo}
            rows += [finish(by_name[r.student], r) if r.student in by_name else r
                     for r in run_docker(todo, chapter, ag, work, timeout, jobs)]
        else:
            isolate = namespaces_available()
            if not isolate:
                log(NO_NAMESPACES)
                jobs = 1
            limits = dict(timeout=timeout, cell_timeout=cell_timeout,
                          memory=int(memory_gb * 2**30), output_cap=int(output_mb * 2**20))
            warm = None  # --no-cache: no JAX cache at all
            if cache and todo:  # the handout compiles, every submission starts from a copy
                start = time.perf_counter()
                try:
                    warm = warm_cache(handout, chapter, ag, work, table=table,
                                      isolate=isolate, **limits)
                except Stopped:
                    raise
                except Exception as err:  # noqa: BLE001 (grading goes on, from empty caches)
                    if _stopping:
                        raise Stopped("grading was stopped") from err
                    warm, handout = {}, None
                    log(f"JAX cache: the handout's warm-up failed ({type(err).__name__}: "
                        f"{str(err)[:200]})")
                size = sum(map(len, warm.values())) / 1e3
                log(f"JAX cache: {len(warm)} entries compiled by the handout ({size:.0f} kB) "
                    f"in {time.perf_counter() - start:.0f} s; each submission starts from a "
                    "private copy" if handout else "JAX cache: no handout beside the "
                    "autograder zip (or its run failed); each submission starts from an "
                    "empty private cache")

            def one(s):
                if _stopping:
                    raise Stopped("grading was stopped")
                start = time.perf_counter()
                try:
                    row = run_local(s, chapter, ag, work, cache=warm, table=table,
                                    isolate=isolate, **limits)
                except Stopped:
                    raise
                except Exception as err:  # noqa: BLE001 (one submission never stops the rest)
                    if _stopping:
                        raise Stopped("grading was stopped") from err
                    row = Row(s.student, str(s.origin), chapter, "error",
                              notes=f"the grader failed on this submission: "
                              f"{type(err).__name__}: {str(err)[:300]}",
                              seconds=time.perf_counter() - start)
                row = finish(s, row)
                changed = changed_files(digest, grader_digest())
                if changed:  # the judge and the checkers come from these files
                    also = " (or a submission graded at the same time)" if jobs > 1 else ""
                    raise GradeError(
                        f"grading aborted: the grader's own files changed while {s.student} "
                        f"({s.origin}) was graded{also}: {', '.join(changed[:5])}; restore "
                        "them (git status) and review that notebook before grading again")
                log(_progress(row))
                return row

            with ThreadPoolExecutor(max(1, jobs)) as pool:
                rows += list(pool.map(one, todo))
        rows.sort(key=lambda r: r.student)
        for r in rows:
            if not r.status.startswith(("graded", "kernel died", "error", "flagged")):
                log(_progress(r))  # unreadable, wrong chapter: not run, said here too
        for name, group in _duplicates(subs).items():
            log(f"note: {name} handed in {len(group)} files, graded in separate rows: "
                + ", ".join(group))
        if skipped:
            log(f"skipped {len(skipped)} file(s) that are not submissions (only .ipynb and "
                ".zip are): " + ", ".join(str(p) for _, p in skipped))
        csv_path = write_outputs(rows, out, questions, points, skipped=skipped)
        return rows, csv_path
    finally:
        if handler is not None:
            signal.signal(signal.SIGTERM, handler)
        stop_all()  # nothing of this run outlives it (a no-op after a normal end)
        _stopping = False
        shutil.rmtree(work, ignore_errors=True)


def parser() -> argparse.ArgumentParser:
    """The command line of ``make grade`` (``python -m homework.grade``), with its defaults."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("submissions", help="a folder (flat, per-student subfolders, zips) or a file")
    p.add_argument("--chapter", default=None, help="chapter to grade against (None: the one "
                   "most notebooks name in their metadata)")
    p.add_argument("--out", default="grades", help="folder for grades.csv and feedback/")
    p.add_argument("--autograder", default=None,
                   help="autograder zip (None: the newest one of make assign)")
    p.add_argument("--docker", choices=["auto", "yes", "no"], default="auto",
                   help="otter grade in Docker (auto: when a Docker daemon answers)")
    p.add_argument("--jobs", type=int, default=1, help="submissions graded at the same time")
    p.add_argument("--timeout", type=float, default=600, help="seconds per submission")
    p.add_argument("--cell-timeout", type=float, default=60, help="seconds per cell")
    p.add_argument("--memory-gb", type=float, default=6, help="address-space limit")
    p.add_argument("--output-mb", type=float, default=20, help="printed output kept per stream")
    p.add_argument("--no-cache", action="store_true",
                   help="no JAX compilation cache (by default each submission starts from a "
                   "private copy of the entries a run of the handout compiled)")
    p.add_argument("--accept-flagged", default="", metavar="STUDENTS",
                   help="comma-separated students whose flagged notebook you reviewed and "
                   "accept: their otter points count")
    return p


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    try:
        rows, csv_path = grade(a.submissions, chapter=a.chapter, out=a.out,
                               autograder=a.autograder, docker=a.docker, jobs=a.jobs,
                               timeout=a.timeout, cell_timeout=a.cell_timeout,
                               memory_gb=a.memory_gb, output_mb=a.output_mb,
                               cache=not a.no_cache,
                               accept_flagged=[x.strip() for x in a.accept_flagged.split(",")
                                               if x.strip()])
    except (GradeError, Stopped) as err:
        print(f"grade: {err}", file=sys.stderr)
        return 2
    print(f"{len(rows)} submissions -> {csv_path} and {csv_path.parent / 'feedback'}/")
    return 0 if any(r.status == "graded" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
