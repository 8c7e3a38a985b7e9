"""Otter-grader master notebooks made from the chapters, and ``otter assign`` on them.

A chapter's exercises (the course's convention, read by :mod:`homework.edition`) become the
questions of one otter assignment per chapter:

* a **coding** exercise (a ``solution``-tagged cell followed by a ``check`` cell) becomes an
  autograded question: the solution cell keeps its ``def`` lines and imports, its bodies are
  otter solution blocks (students get ``...``); public tests (worth 0 points) ship to students:
  the answer is defined and attempted and, unless it has several right answers
  (:data:`NO_PUBLIC_VALUE`), it gives the solution's value on one public input, and the points
  are in **hidden** tests that run the
  instructors' checker (``homework.checks``) on fresh random inputs drawn from keys chosen when
  the assignment is made, each test worth one point (partial credit); for an exercise that one
  ``lib`` function answers, one more hidden test makes that function unusable during the call;
* a **derivation** exercise becomes a manually graded question (otter exports it for
  Gradescope): its statement, and a Markdown answer cell in place of the solution.

The notebook holds the chapter's first code cell (imports and set-up) and its *Exercises*
section only: the chapter itself is read in the book, and a homework notebook runs in seconds.
The hidden tests and the checkers go to the autograder zip only (``autograder_files``).
"""

from __future__ import annotations

import ast
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import edition

ROOT = Path(__file__).resolve().parents[1]

# Exercises answered by one call into `lib`: the hidden test makes these unusable during the
# call (the statement asks for the computation itself).
FORBIDDEN = {
    "setup/ntk-linear-two-layer": ["lib:empirical_ntk", "lib.ntk:empirical_ntk", "jax:jacrev",
                                   "jax:jacfwd", "jax:jacobian", "jax:grad", "jax:vjp",
                                   "jax:jvp", "jax:linearize", "jax:hessian"],
    "setup/gd-least-squares": ["lib:gradient_descent", "lib.flows:gradient_descent"],
    "lazy_training/kernel-distance": ["lib:kernel_distance", "lib.kernels:kernel_distance"],
}

HIDDEN_KEYS = 2  # hidden tests (fresh keys) per coding exercise, one point each
MANUAL_POINTS = 2  # a derivation (or code without a checker): graded by hand

NO_PDF_MESSAGE = ("The PDF of your written answers could not be made on this machine (it needs "
                  "LaTeX and pandoc). Click the button to make the zip without it: your "
                  "notebook holds your answers, and the grader makes the PDF from it.")


@dataclass
class Question:
    label: str
    kind: str  # "coding" or "derivation"
    statement: list[str] = field(default_factory=list)
    solution_md: list[str] = field(default_factory=list)
    solution_code: list[str] = field(default_factory=list)
    check_id: str | None = None
    answer: str | None = None

    @property
    def name(self) -> str:
        return re.sub(r"[^A-Za-z0-9_]", "_", self.label)


def chapter_questions(path: str | os.PathLike):
    """``(setup_source, intro_markdown, questions)`` of a chapter file (its Exercises section)."""
    nb = edition.chapter_notebook(path)
    setup = next((c.source for c in nb.cells if c.cell_type == "code"), "")
    start = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
                  and re.search(r"^## Exercises\s*$", c.source, re.M)), None)
    if start is None:
        return setup, "", []
    title = next((m.group(0) for c in nb.cells if c.cell_type == "markdown"
                  for m in [re.search(r"^# .+$", c.source, re.M)] if m), "# Exercises")
    questions: list[Question] = []
    by_label: dict[str, Question] = {}
    current: Question | None = None  # inside an exercise statement
    solution: Question | None = None  # inside a gated solution
    pending: Question | None = None  # last coding question waiting for its check cell
    for k, cell in enumerate(nb.cells[start:]):
        if cell.cell_type == "markdown":
            lines = cell.source.split("\n")
            if k == 0:  # drop the section heading and what precedes it
                idx = next(i for i, line in enumerate(lines) if line.startswith("## Exercises"))
                lines = lines[idx + 1:]
            i = 0
            while i < len(lines):
                line = lines[i]
                opened = edition._directive(line)
                name = opened[1] if opened else None
                if solution is not None:
                    if name == "solution-end":
                        i = edition._block_end(lines, i, opened[0]) + 1
                        if solution.kind != "coding":
                            solution.kind = "derivation"
                        solution = None
                        continue
                    solution.solution_md.append(line)
                    i += 1
                    continue
                if name == "exercise-start":
                    end = edition._block_end(lines, i, opened[0])
                    label = edition._label_option(lines[i:end + 1]) or f"ex{len(questions)}"
                    current = Question(label, "derivation")
                    questions.append(current)
                    by_label[label] = current
                    i = end + 1
                    continue
                if name == "exercise-end":
                    current = None
                    i = edition._block_end(lines, i, opened[0]) + 1
                    continue
                if name == "solution-start":
                    end = edition._block_end(lines, i, opened[0])
                    label = opened[2].split()[0] if opened[2] else ""
                    solution = by_label.get(label) or (questions[-1] if questions else None)
                    i = end + 1
                    continue
                if current is not None:
                    current.statement.append(line)
                elif opened is not None:  # another directive (e.g. a figure) between exercises
                    i = edition._block_end(lines, i, opened[0]) + 1
                    continue
                i += 1
        elif cell.cell_type == "code":
            tags = edition._tags(cell)
            if solution is not None:
                if edition.SOLUTION_TAG in tags:
                    solution.kind = "coding"
                    solution.solution_code.append(cell.source)
                    pending = solution
            elif edition.CHECK_TAG in tags:
                call = edition._check_call(cell.source)
                if call and pending is not None:
                    pending.check_id, pending.answer = call
                    pending = None
    intro = (f"{title} (homework)\n\nThe exercises of the chapter, to answer in this notebook. "
             "Run the first code cell, then answer each question in the cell below it; "
             "`grader.check(\"<question>\")` runs the public tests: whether the answer is "
             "attempted and, for most questions, whether it gives the right value on one public "
             "input (a question with several right answers checks the first only). \"All test "
             "cases passed!\" is about those tests: the points come from hidden tests on other "
             "random inputs, which a partly wrong answer can still fail.")
    return setup, intro, questions


def solution_cell(source: str, keep: set[str] | None = None) -> str:
    """The master-notebook form of a solution cell: imports kept, each top-level ``def`` keeps
    its signature with its body in an otter solution block, each assignment becomes a
    ``name = ...`` prompt followed by the solution block; other statements (prints, plots using
    the chapter's variables) are dropped."""
    tree = ast.parse(source)
    lines = source.split("\n")
    out: list[str] = []
    for node in tree.body:
        seg = "\n".join(lines[node.lineno - 1:node.end_lineno])
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.append(seg)
        elif isinstance(node, ast.FunctionDef):
            body_start = node.body[0].lineno
            if (isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
                    and len(node.body) > 1):
                body_start = node.body[1].lineno  # keep the docstring
            head = "\n".join(lines[node.lineno - 1 - len(node.decorator_list):body_start - 1])
            body = lines[body_start - 1:node.end_lineno]
            indent = re.match(r"\s*", body[0]).group(0)
            out.append(f"{head}\n{indent}# BEGIN SOLUTION\n" + "\n".join(body)
                       + f"\n{indent}# END SOLUTION")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [n for t in targets for n in edition._names_assigned(t)]
            if keep is not None and not set(names) & keep:
                continue  # a value computed for the discussion, not the answer
            prompt = "\n".join(f"{n} = ..." for n in names)
            out.append(f"{prompt}\n# BEGIN SOLUTION\n{seg}\n# END SOLUTION")
    return "\n\n".join(out) + "\n"


# The public test: the answer is defined and is not the handed-out stub (a def whose body is
# `...`). It runs in the student's environment, so it imports nothing of the course.
PUBLIC_TEST = """\
def test_attempted(env):
    import ast, inspect, textwrap
    answer = env.get(ANSWER, ...)
    assert answer is not ..., 'not attempted: replace the ... by your answer'
    assert answer is not None, ANSWER + ' is None (a missing return?)'
    stub = False
    if callable(answer):
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(answer)))
            body = [n for n in tree.body[0].body if not (isinstance(n, ast.Expr)
                    and isinstance(getattr(n.value, 'value', None), str))]
            stub = len(body) == 1 and isinstance(body[0], ast.Expr) and getattr(
                body[0].value, 'value', None) is Ellipsis
        except (OSError, TypeError, SyntaxError, IndexError, AttributeError):
            stub = False
    assert not stub, 'not attempted: write the body of ' + ANSWER
test_attempted(globals())"""


# How a hidden test gets the verifier: this file's text executed afresh (never the module in
# sys.modules, which the notebook may have replaced). The verdict is the judge's, outside the
# kernel (homework/judge.py); see homework/hidden.py.
LOAD_VERIFY = """\
    import os, sys
    for _base in [os.getcwd(), *sys.path]:
        _path = os.path.abspath(os.path.join(_base or '.', 'homework', 'hidden.py'))
        if os.path.isfile(_path):
            break
    _ns = {'__name__': '_krr_hidden_fresh', '__file__': _path}
    with open(_path, 'rb') as _f:
        exec(compile(_f.read(), _path, 'exec'), _ns)
    verify = _ns['verify']
"""


# Exercises with more than one right answer (a symmetrized network: any order of units; a dual
# objective "up to an additive constant"; a bracket of alpha; a model traced by JAX): their
# public test checks that the answer is attempted only. Every other coding exercise gets a
# public test on one public input (the checker's own key, the one the chapter uses).
NO_PUBLIC_VALUE = {"setup/symmetrize", "diagonal_regression/dual-d2",
                   "diagonal_regression/alpha-for-l1", "parity/beyond-kernel"}

# The public value test: the answer on a public input against the solution's output there.
PUBLIC_VALUE_TEST = """\
def test_public_input(env):
    import numpy as np
    answer = env.get(ANSWER, ...)
    try:
        import jax.numpy as jnp
        to_input = jnp.asarray
    except ImportError:
        to_input = np.asarray
    args = [to_input(np.array(a, dtype=np.float64)) if isinstance(a, list) else a
            for a in ARGS]
    want = WANT
    assert answer is not ..., 'not attempted: replace the ... by your answer'
    got = answer(*args)
    assert got is not None, ANSWER + ' returned None on the public input (a missing return?)'
    def close(g, w, what):
        if isinstance(w, tuple):
            assert isinstance(g, (tuple, list)) and len(g) == len(w), what + ' should be ' + \\
                'a tuple of ' + str(len(w))
            for i, (gi, wi) in enumerate(zip(g, w)):
                close(gi, wi, what + '[' + str(i) + ']')
            return
        g, w = np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64)
        assert g.shape == w.shape, what + ' has shape ' + str(g.shape) + ', expected ' + \\
            str(w.shape) + ' on the public input'
        assert np.all(np.isfinite(g)), what + ' contains NaN or inf on the public input'
        err = float(np.abs(g - w).max()) if g.size else 0.0
        scale = float(np.abs(w).max()) if w.size else 0.0
        assert err <= 1e-6 * scale + 1e-9, what + ' differs from the expected value on the ' + \\
            'public input by a relative ' + format(err / max(scale, 1e-300), '.2e')
    close(got, want, 'your answer')
test_public_input(globals())"""


def _literal(value):
    """Python source of a public input or output (arrays as nested lists of floats)."""
    import numpy as np

    if isinstance(value, tuple | list):
        inner = ", ".join(_literal(v) for v in value)
        return f"({inner},)" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, np.ndarray) or type(value).__module__.startswith(("jax", "numpy")):
        arr = np.asarray(value, dtype=np.float64)
        return repr(arr.tolist()) if arr.ndim else repr(float(arr))
    return repr(value)


def public_cases(setup: str, questions) -> dict:
    """check id -> (args, output) of the checker's first call to the chapter's own solution on
    the checker's public key (the chapter's self-check key); exercises of
    :data:`NO_PUBLIC_VALUE`, or whose call cannot be recorded, are left out."""
    import homework.checks as checks

    wanted = [q for q in questions if q.kind == "coding" and q.check_id and q.answer
              and q.check_id not in NO_PUBLIC_VALUE and q.check_id in checks._REGISTRY]
    if not wanted:
        return {}
    ns: dict = {"__name__": "__homework_public__"}
    try:
        exec(compile(setup, "<setup>", "exec"), ns)  # noqa: S102 (the chapter's own code)
        for q in wanted:  # the solution as the homework holds it (no discussion code)
            keep = set(re.findall(r"[A-Za-z_]\w*", q.answer or ""))
            for src in q.solution_code:
                exec(compile(solution_cell(src, keep), f"<{q.label}>", "exec"), ns)  # noqa: S102
    except Exception as err:  # noqa: BLE001 (no public value tests, never a failed assign)
        print(f"public value tests left out: the solutions did not run ({err})", file=sys.stderr)
        return {}
    out = {}
    for q in wanted:
        try:
            solution = eval(q.answer, ns)  # noqa: S307
        except Exception:  # noqa: BLE001
            continue
        if not callable(solution):
            continue
        calls = []

        def recorded(*args, _f=solution, _calls=calls, **kwargs):
            result = _f(*args, **kwargs)
            _calls.append((args, kwargs, result))
            return result

        try:
            checks._REGISTRY[q.check_id](recorded, checks._key(q.check_id))
        except Exception as err:  # noqa: BLE001 (reported; the question keeps its other tests)
            print(f"{q.check_id}: no public value test (the solution fails its checker: {err})",
                  file=sys.stderr)
            continue
        if calls and not calls[0][1] and all(
                "Tracer" not in type(a).__name__ for a in calls[0][0]):
            out[q.check_id] = calls[0][0], calls[0][2]
    return out


def question_points(q) -> tuple[int, bool]:
    """``(points, manual)`` of a question as :func:`master_notebook` assigns them: a coding
    question with a checker has :data:`HIDDEN_KEYS` hidden tests of one point, plus one for
    writing its own code when it is in :data:`FORBIDDEN`; anything else (a derivation, code
    without a checker) is graded by hand, :data:`MANUAL_POINTS`."""
    if q.kind == "derivation" or not q.check_id:
        return MANUAL_POINTS, True
    return HIDDEN_KEYS + (1 if q.check_id in FORBIDDEN else 0), False


def _test_cell(body: str, *, points: float, hidden: bool, failure: str | None = None) -> str:
    config = [f"points: {points}", f"hidden: {'true' if hidden else 'false'}"]
    if failure:
        config.append(f"failure_message: {json.dumps(failure)}")
    return '""" # BEGIN TEST CONFIG\n' + "\n".join(config) + '\n""" # END TEST CONFIG\n' + body


def question_cells(q: Question, seeds: list[int], public=None):
    """The master-notebook cells of one question (nbformat cells); ``public`` is the
    ``(args, output)`` of its public value test (:func:`public_cases`), or None."""
    import nbformat

    raw, md, code = nbformat.v4.new_raw_cell, nbformat.v4.new_markdown_cell, \
        nbformat.v4.new_code_cell
    statement = "\n".join(q.statement).strip("\n")
    if q.kind == "derivation":
        answer = "\n".join(q.solution_md).strip("\n") or "(see the chapter)"
        return [raw(f"# BEGIN QUESTION\nname: {q.name}\nmanual: true\npoints: {MANUAL_POINTS}"),
                md(f"**Question `{q.name}` (written answer, graded by hand).** {statement}"),
                raw("# BEGIN SOLUTION"), md(answer), raw("# END SOLUTION"),
                raw("# END QUESTION")]
    if not q.check_id:  # code without a checker: graded by hand, like a derivation
        return ([raw(f"# BEGIN QUESTION\nname: {q.name}\nmanual: true\npoints: {MANUAL_POINTS}"),
                 md(f"**Question `{q.name}` (code, graded by hand).** {statement}"),
                 raw("# BEGIN SOLUTION")]
                + [code(solution_cell(src)) for src in q.solution_code]
                + [raw("# END SOLUTION"), raw("# END QUESTION")])
    n_hidden = len(seeds) + (1 if q.check_id in FORBIDDEN else 0)  # = question_points(q)
    cells = [raw(f"# BEGIN QUESTION\nname: {q.name}\npoints: {n_hidden}"),
             md(f"**Question `{q.name}`.** {statement}")]
    keep = set(re.findall(r"[A-Za-z_]\w*", q.answer or ""))
    cells += [raw("# BEGIN SOLUTION")]
    cells += [code(solution_cell(src, keep)) for src in q.solution_code]
    cells += [raw("# END SOLUTION")]
    cells.append(raw("# BEGIN TESTS"))
    cells.append(code(_test_cell(PUBLIC_TEST.replace("ANSWER", repr(q.answer)),
                                 points=0, hidden=False)))
    if public is not None:
        args, want = public
        cells.append(code(_test_cell(
            PUBLIC_VALUE_TEST.replace("ANSWER", repr(q.answer))
            .replace("ARGS", _literal(list(args))).replace("WANT", _literal(want)),
            points=0, hidden=False)))
    for j, seed in enumerate(seeds, 1):
        cells.append(code(_test_cell(
            f"def test_hidden_{j}(env):\n"
            + LOAD_VERIFY +
            f"    verify({q.check_id!r}, env, {q.answer!r}, seed={seed})\n"
            f"test_hidden_{j}(globals())", points=1, hidden=True)))
    if q.check_id in FORBIDDEN:
        cells.append(code(_test_cell(
            "def test_own_code(env):\n"
            + LOAD_VERIFY +
            f"    verify({q.check_id!r}, env, {q.answer!r}, seed={seeds[0]},\n"
            f"           forbid={FORBIDDEN[q.check_id]!r})\n"
            "test_own_code(globals())", points=1, hidden=True)))
    cells += [raw("# END TESTS"), raw("# END QUESTION")]
    return cells


def _used_setup(setup: str, questions) -> str:
    """The chapter's set-up cell without the assignments nothing in the homework uses (e.g. the
    chapter's sizes ``N, d``) and without ``from lib import check`` (the chapter's self-check:
    the handout's questions use ``grader.check``); other imports and calls are kept."""
    try:
        tree = ast.parse(setup)
    except SyntaxError:
        return setup
    rewrite: dict[int, str | None] = {}  # first line of an import -> its new source (None: drop)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "lib" and any(
                a.name == "check" for a in node.names):
            names = [a for a in node.names if a.name != "check"]
            rewrite[node.lineno] = ast.unparse(ast.ImportFrom("lib", names, 0)) if names else None
    if rewrite:
        lines = setup.split("\n")
        spans = {node.lineno: node.end_lineno for node in tree.body if node.lineno in rewrite}
        out, i = [], 0
        while i < len(lines):
            if i + 1 in rewrite:
                if rewrite[i + 1] is not None:
                    out.append(rewrite[i + 1])
                i = spans[i + 1]
                continue
            out.append(lines[i])
            i += 1
        setup = "\n".join(out)
        tree = ast.parse(setup)
    used: set[str] = set()
    for q in questions:
        for src in q.solution_code:
            try:
                used |= {n.id for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Name)}
            except SyntaxError:
                return setup
    body = list(tree.body)
    while True:
        loads = set(used)
        for node in body:
            loads |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                      and isinstance(n.ctx, ast.Load)}
        drop = [node for node in body if isinstance(node, ast.Assign) and not any(
            n.id in loads for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name))]
        if not drop:
            break
        body = [node for node in body if node not in drop]
    if len(body) == len(tree.body):
        return setup
    lines = setup.split("\n")
    dropped = {i for node in tree.body if node not in body
               for i in range(node.lineno - 1, node.end_lineno)}
    text = "\n".join(line for i, line in enumerate(lines) if i not in dropped)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"


def master_notebook(chapter: str | os.PathLike, *, seed_source=None, gradescope=None):
    """The otter master notebook (nbformat v4) of a chapter; ``seed_source()`` gives the hidden
    tests' keys (default: fresh random integers, so every ``make assign`` draws new ones);
    ``gradescope=(course_id, manual_assignment_id)`` makes the autograder upload each
    submission's PDF of the manual questions to that Gradescope assignment (otter asks for the
    Gradescope login when ``otter assign`` runs)."""
    import nbformat
    import yaml

    path = edition.resolve_chapter(str(chapter))
    setup, intro, questions = chapter_questions(path)
    if not questions:
        raise ValueError(f"chapter: {path.stem} has no exercises to assign")
    setup = _used_setup(setup, questions)
    public = public_cases(setup, questions)
    draw = seed_source or (lambda: secrets.randbelow(2**31 - 1) + 1)
    config = {
        "name": path.stem,
        # the homework's runtime only (not the book's toolchain): requirements-runtime.txt
        "requirements": "requirements-runtime.txt",
        "overwrite_requirements": True,
        "python_version": "3.11",
        "init_cell": True,
        "check_all_cell": False,
        # Manual questions, as otter documents them for Gradescope: the export cell puts a PDF
        # of the manual questions only (filtered) in the student's zip, and the autograder makes
        # one from each submission (Gradescope's image gets LaTeX and pandoc for it) and, given
        # a course and a manual-grading assignment id, uploads it there. A student whose machine
        # cannot make the PDF (no LaTeX) acknowledges it and still gets the zip.
        "export_cell": {"pdf": True, "filtering": True,
                        "require_no_pdf_ack": {"message": NO_PDF_MESSAGE},
                        "instructions": "Run this cell in Jupyter, in a browser, to make the zip "
                        "file you hand in, and download it from the link the cell shows "
                        "(Gradescope: upload the zip; it holds the notebook and, when your "
                        "machine can make it, a PDF of your written answers). If the zip does "
                        "not open, hand in the .ipynb file itself."},
        "run_tests": True,
        "autograder_files": ["homework", "lib"],
        "generate": {"pdf": True, "filtering": True, "zips": False, "show_stdout": True,
                     **({"course_id": str(gradescope[0]), "assignment_id": str(gradescope[1])}
                        if gradescope else {})},
        "tests": {"files": True, "ok_format": False},
    }
    cells = [nbformat.v4.new_raw_cell("# ASSIGNMENT CONFIG\n" + yaml.safe_dump(config,
                                                                              sort_keys=False)),
             nbformat.v4.new_markdown_cell(intro),
             nbformat.v4.new_code_cell(setup)]
    for q in questions:
        cells += question_cells(q, [draw() for _ in range(HIDDEN_KEYS)],
                                public.get(q.check_id))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["homework"] = {"chapter": path.stem}
    return nb


def _convert_markdown(nb, chapter: str):
    """MyST roles, math and references in the Markdown cells rendered for plain Jupyter, with
    equations, theorems and figures numbered as in the whole chapter (not only its exercises)."""
    import nbformat

    sys.path.insert(0, str(ROOT / "_ext"))
    try:
        import myst_to_jupyter as m2j

        bib = m2j.read_bibliography([ROOT / "references.bib"])
        numbers = m2j.Numbers(m2j.chapter_numbers(ROOT).get(chapter))
        full = edition.chapter_notebook(edition.resolve_chapter(chapter))
        m2j._scan_numbers([c.source for c in full.cells if c.cell_type == "markdown"], numbers)
        for cell in full.cells:
            figure = ((cell.metadata.get("mystnb") or {}).get("figure") or {})
            if cell.cell_type == "code" and isinstance(figure, dict) and figure.get("name"):
                numbers.add("figure", str(figure["name"]))
        _add_used_equations(nb, full, m2j)
        cited: list[str] = []
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = "\n".join(m2j._convert_lines(cell.source.split("\n"), numbers, bib,
                                                           cited)).strip("\n")
        if cited:
            lines = ["## References", ""]
            lines += [f"- {bib[k]['entry']}" if k in bib else f"- {k}" for k in sorted(cited)]
            nb.cells.append(nbformat.v4.new_markdown_cell("\n".join(lines)))
    finally:
        sys.path.remove(str(ROOT / "_ext"))
    return nb


EQUATIONS_HEADING = "### Equations of the chapter used below"


def _add_used_equations(nb, full, m2j) -> None:
    """The handout holds the exercises only: a Markdown cell after its introduction gives each
    labelled equation of the chapter that a handout cell refers to (``{eq}``) but that no
    handout cell holds, as a labelled ``{math}`` fence (numbered like the chapter's when
    converted), so "(1.2)" in an exercise resolves in the notebook."""
    import nbformat

    md = [c.source for c in nb.cells if c.cell_type == "markdown"]
    used = m2j.equation_references("\n".join(md))
    held = m2j.labelled_equations("\n".join(md).split("\n"))
    source = m2j.labelled_equations("\n".join(
        c.source for c in full.cells if c.cell_type == "markdown").split("\n"))
    missing = [label for label in source if label in used and label not in held]  # in order
    if not missing:
        return
    lines = [EQUATIONS_HEADING, ""]
    for label in missing:
        lines += ["```{math}", f":label: {label}", *source[label], "```", ""]
    at = next((i + 1 for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), 0)
    nb.cells.insert(at, nbformat.v4.new_markdown_cell("\n".join(lines).rstrip("\n")))


def assign(chapters=None, out: str | os.PathLike | None = None, *, run_tests: bool = True,
           seed_source=None, gradescope=None) -> dict[str, Path]:
    """Write each chapter's master notebook and run ``otter assign`` on it.

    Output, per chapter, under ``out`` (default ``_build/assign``): ``<chapter>/master/`` (the
    master notebook, with the support files), ``<chapter>/dist/student/<chapter>.ipynb`` (hand
    this folder out: notebook, public tests) and ``<chapter>/dist/autograder/`` holding
    ``<chapter>-autograder_*.zip`` (hidden tests: keep it, upload it to Gradescope or grade with
    ``make grade``). Returns chapter -> its ``dist`` folder.

    Raises:
        ValueError: a chapter name is unknown or has no exercises.
        RuntimeError: ``otter assign`` failed (its output is in the message).
    """
    import nbformat

    out = Path(out or ROOT / "_build" / "assign")
    every = not chapters
    chapters = chapters or [p.stem for p in edition.toc_chapters()]
    done = {}
    for name in chapters:
        if every and not chapter_questions(edition.resolve_chapter(name))[2]:
            continue  # a page without exercises (e.g. this instructors page)
        nb = master_notebook(name, seed_source=seed_source, gradescope=gradescope)
        stem = nb.metadata["homework"]["chapter"]
        try:
            _convert_markdown(nb, stem)
        except Exception as err:  # noqa: BLE001 (rendering is cosmetic; never block assign)
            print(f"{stem}: Markdown left as MyST ({err})", file=sys.stderr)
        if not run_tests:
            cfg = nb.cells[0].source.replace("run_tests: true", "run_tests: false")
            nb.cells[0].source = cfg
        base = out / stem
        shutil.rmtree(base, ignore_errors=True)
        master = base / "master"
        master.mkdir(parents=True)
        shutil.copy(ROOT / "requirements-runtime.txt", master / "requirements-runtime.txt")
        # the hidden tests' support: the checkers and the library they compare against
        shutil.copytree(ROOT / "homework", master / "homework",
                        ignore=shutil.ignore_patterns("__pycache__", "*.md"))
        shutil.copytree(ROOT / "lib", master / "lib", ignore=shutil.ignore_patterns("__pycache__"))
        nbformat.write(nb, master / f"{stem}.ipynb")
        dist = base / "dist"
        proc = subprocess.run([sys.executable, "-m", "otter", "assign", "--no-pdfs",
                               f"{stem}.ipynb", str(dist.resolve())], cwd=master,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"otter assign failed for {stem}:\n{proc.stdout}\n{proc.stderr}")
        for made in list((dist / "student").glob("*.ipynb")) + list(
                (dist / "autograder").glob("*.ipynb")):
            _drop_trailing_empty_cells(made)
        _check_student_folder(dist / "student", nb)
        done[stem] = dist
    return done


def _drop_trailing_empty_cells(path: Path) -> None:
    """Otter ends the notebook with an empty Markdown cell after the export cell: drop it."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    n = len(nb.cells)
    while nb.cells and nb.cells[-1].cell_type == "markdown" and not nb.cells[-1].source.strip():
        nb.cells.pop()
    if len(nb.cells) != n:
        nbformat.write(nb, path)


def _check_student_folder(student: Path, nb) -> None:
    """Nothing of the hidden tests, the checkers or the solutions is in the student folder."""
    leaks = [p for p in student.rglob("*") if p.name in ("homework", "hidden.py", "checks")]
    text = "\n".join(p.read_text(errors="replace") for p in student.rglob("*")
                     if p.is_file() and p.suffix in (".ipynb", ".py"))
    for cell in nb.cells:
        if "# BEGIN SOLUTION" in cell.source:
            body = cell.source.split("# BEGIN SOLUTION", 1)[1].split("# END SOLUTION")[0]
            for line in body.split("\n"):
                if len(line.strip()) >= 16 and line.strip() in text:
                    leaks.append(f"solution line {line.strip()!r}")
        if "hidden: true" in cell.source and "verify(" in cell.source:
            if "homework.hidden" in text:
                leaks.append("a hidden test")
    if leaks:
        raise RuntimeError(f"the student folder {student} leaks: {leaks}")
