"""Student editions and the grader (``lib.homework``), on the synthetic chapter
``tests/fixtures/homework/demo.md`` (two coding exercises with checkers it registers itself, two
derivations). Every solution there contains the marker ``HIDDENANSWER``: a student edition must
not.

The grading cases (correct, blank, exception, infinite loop, deleted cell, renamed function,
invalid JSON, a dead kernel with forged results) are graded in one call, two at a time, because
each submission starts a kernel that imports ``lib`` (slow on a loaded machine). The expected
scores are written by hand from what each submission does, not taken from a previous run.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import jupytext
import nbformat
import numpy as np
import pytest

import lib
from lib import homework as hw

FIXTURES = Path(__file__).parent / "fixtures" / "homework"
DEMO = FIXTURES / "demo.md"
MARKER = "HIDDENANSWER"
IDS = ["demo/square", "demo/total"]


# --------------------------------------------------------------------------------------------
# Reading the convention
# --------------------------------------------------------------------------------------------


def test_exercises_of_the_demo_chapter():
    found = hw.exercises(hw.chapter_notebook(DEMO))
    assert [(e.label, e.kind, e.check_id, e.answer) for e in found] == [
        ("demo-ex-square", "coding", "demo/square", "square"),
        ("demo-ex-derive", "derivation", None, None),
        ("demo-ex-total", "coding", "demo/total", "total"),
        ("demo-ex-gated-derivation", "derivation", None, None),
    ]


COLON_CHAPTER = """\
---
jupytext:
  text_representation: {extension: .md, format_name: myst}
kernelspec: {display_name: Python 3, language: python, name: python3}
---
# T

:::{exercise}
:label: t-ex
Compute.
:::

````{solution} t-ex
:class: dropdown
Nested code is part of the solution:
```python
x = 1  # HIDDENANSWER
```
````

```python
# an ordinary code block, with text that looks like a directive: {solution} kept
```

:::{solution-start} t-ex2
:::
Colon-fenced gated solution HIDDENANSWER.
:::{solution-end}
:::
"""


def test_colon_fences_nested_blocks_and_plain_code_blocks(tmp_path):
    path = tmp_path / "t.md"
    path.write_text(COLON_CHAPTER)
    nb = hw.student_notebook(path)
    text = "\n".join(c.source for c in nb.cells)
    assert MARKER not in text
    assert "an ordinary code block" in text and "{solution} kept" in text
    assert "Compute." in text
    kinds = [(e.label, e.kind) for e in hw.exercises(hw.chapter_notebook(path))]
    assert kinds == [("t-ex", "derivation"), ("t-ex2", "derivation")]


@pytest.mark.parametrize("source, expect_names, expect_absent", [
    ("def f(a, b=2, *c, d, **e) -> int:\n    '''doc HIDDENANSWER'''\n    return a\n",
     ["def f(a, b=2, *c, d, **e) -> int:", "raise NotImplementedError"], ["return a", MARKER]),
    ("import numpy as np  # HIDDENANSWER\nvalue = np.pi\nprint(value)\n",
     ["import numpy as np", "value = todo('ex/id')", "from lib.homework import todo"],
     ["np.pi", "print", MARKER]),
    ("a, (b, *c) = 1, (2, 3, 4)\n", ["a = todo", "b = todo", "c = todo"], ["1, (2"]),
    ("class Model:\n    def fit(self):\n        return 1\n", ["class Model:",
                                                               "raise NotImplementedError"],
     ["def fit"]),
    ("%timeit 1 + 1\n", ["# Exercise ex/id"], ["timeit"]),  # not Python: comment only
])
def test_stub_source(source, expect_names, expect_absent):
    stub = hw.stub_source(source, "ex/id")
    compile(stub, "<stub>", "exec")
    for s in expect_names:
        assert s in stub
    for s in expect_absent:
        assert s not in stub


def test_stubbed_function_raises_naming_the_exercise():
    namespace: dict = {}
    exec(hw.stub_source("def square(x):\n    return x * x\n", "demo/square"), namespace)
    with pytest.raises(NotImplementedError, match="demo/square"):
        namespace["square"](2.0)


@pytest.mark.parametrize("use", [
    np.asarray, float, len, lambda t: t(1), lambda t: t + 1, lambda t: 2 * t, lambda t: t.shape,
    lambda t: t[0], lambda t: np.shape(t), bool,
])
def test_todo_placeholder_raises_not_implemented(use):
    with pytest.raises(NotImplementedError, match="demo/total"):
        use(hw.todo("demo/total"))
    assert repr(hw.todo("demo/total")) == "todo('demo/total')"


@pytest.mark.parametrize("exercise", sorted(e for e in lib.checks.registered()
                                            if e.startswith("setup/")))
def test_todo_is_not_attempted_for_real_checkers(exercise):
    assert lib.check(exercise, hw.todo(exercise), quiet=True).status == "not attempted"


# --------------------------------------------------------------------------------------------
# Student notebooks
# --------------------------------------------------------------------------------------------


def test_student_notebook_has_stubs_checks_and_no_solution_text(tmp_path):
    written = hw.write_student_notebooks([str(DEMO)], out=tmp_path)
    assert [p.name for p in written] == ["demo.ipynb"]
    raw = written[0].read_text()
    assert MARKER not in raw
    nb = nbformat.read(written[0], as_version=4)
    stubs = [c for c in nb.cells if c.metadata.get("homework", {}).get("role") == "stub"]
    assert [c.metadata["homework"]["exercise"] for c in stubs] == IDS
    checks = [c.source for c in nb.cells if "check" in c.metadata.get("tags", [])]
    assert checks == ['lib.check("demo/square", square)', 'lib.check("demo/total", total)']
    assert nb.metadata["homework"] == {"chapter": "demo", "exercises": IDS}
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert hw.find_leaks(tmp_path, hw.solution_snippets(hw.chapter_notebook(DEMO))) == []


def test_find_leaks_sees_solution_lines_through_html_markup(tmp_path):
    snippets = hw.solution_snippets(hw.chapter_notebook(DEMO))
    assert any("total = 1 + 2 + 3" in s for s in snippets)
    (tmp_path / "page.html").write_text(  # as Pygments writes it, spans and all
        '<pre><span class="n">total</span> <span class="o">=</span> <span class="mi">1</span>'
        '<span class="o">+</span><span class="mi">2</span> + 3  '
        '<span class="c1"># HIDDENANSWER</span></pre>')
    assert [s for _, s in hw.find_leaks(tmp_path, snippets)] == [
        "total = 1 + 2 + 3  # HIDDENANSWER"]


def test_code_comparisons_are_not_taken_for_html_tags(tmp_path):
    """Regression: '<' ... '>' in code (a comparison, then an arrow) once hid code lines from the
    'kept' text, so lines that students do receive were reported as leaked solutions."""
    kept = "if z.max() < 4.0:\n    print('x')\nlong_enough_line = compute(a, b)  # a -> b\n"
    assert "longenoughline=compute(a,b)#a->b" in hw._normalize(kept)  # markup (_) dropped
    html_page = "<pre>if z.max() &lt; 4.0: <span>long_enough_line</span> = compute(a, b)</pre>"
    assert hw._normalize(html_page, is_html=True) == "ifz.max()<4.0:longenoughline=compute(a,b)"


def test_student_notebook_runs_top_to_bottom(tmp_path):
    """Executed as a student receives it, every check says "not attempted", nothing raises."""
    from nbclient import NotebookClient

    nb = hw.student_notebook(DEMO)
    env_path = str(Path(hw.ROOT))
    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    with client.setup_kernel(env={**os.environ, "PYTHONPATH": env_path}):
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                client.execute_cell(cell, index)  # raises CellExecutionError on an error
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.outputs)
    assert "demo/square: not attempted" in printed
    assert "demo/total: not attempted" in printed


# --------------------------------------------------------------------------------------------
# Student site
# --------------------------------------------------------------------------------------------


def test_student_site_has_exercises_but_no_solutions(tmp_path):
    book = tmp_path / "book"
    (book / "chapters").mkdir(parents=True)
    shutil.copy(DEMO, book / "chapters" / "demo.md")
    (book / "intro.md").write_text("# Demo book\n")
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n"
                                   "  - file: chapters/demo\n")
    (book / "_config.yml").write_text(
        "title: Demo\nonly_build_toc_files: true\nexecute:\n  execute_notebooks: 'off'\n"
        "repository:\n  url: https://github.com/example/course\n  branch: main\n"
        "launch_buttons:\n  binderhub_url: https://mybinder.org\n"
        "  colab_url: https://colab.research.google.com\n"
        "sphinx:\n  extra_extensions: [sphinx_exercise]\n")
    html = hw.build_student_site(book, tmp_path / "student", strict=True, quiet=True)
    raw = (html / "chapters" / "demo.html").read_text()
    # no way from a student page to the chapter files, which carry the solutions
    for link in ("_sources", "mybinder.org", "colab.research", "btn-download"):
        assert link not in raw, link
    page = hw._normalize((html / "chapters" / "demo.html").read_text(), is_html=True)
    assert "Writesquare(x)returning" in page  # the exercise statements stay
    assert 'lib.check("demo/square",square)' in page  # and the check cells
    assert "Solution" not in page
    for path in html.rglob("*"):
        if path.is_file() and path.suffix in (".html", ".js", ".txt", ".ipynb", ".md"):
            assert MARKER not in path.read_text(errors="replace"), path


def test_student_config_hides_solutions():
    config = hw.student_config(hw.ROOT)
    assert config["sphinx"]["config"]["hide_solutions"] is True
    assert config["sphinx"]["config"]["html_copy_source"] is False
    assert config["html"]["use_download_button"] is False
    assert Path(config["sphinx"]["local_extensions"]["student_edition"]).joinpath(
        "student_edition.py").is_file()


# --------------------------------------------------------------------------------------------
# Grading
# --------------------------------------------------------------------------------------------


def _replace_stub(nb, exercise, source):
    for cell in nb.cells:
        if cell.metadata.get("homework", {}).get("exercise") == exercise:
            cell.source = source
            return nb
    raise AssertionError(exercise)


def _delete_stub(nb, exercise):
    nb.cells = [c for c in nb.cells if c.metadata.get("homework", {}).get("exercise") != exercise]
    return nb


FORGE = """\
import glob, json, os
for path in glob.glob(os.path.join(os.path.dirname(os.getcwd()), "*")) + \\
        glob.glob("/tmp/krr-grade-*/results.jsonl"):
    try:
        with open(os.path.join(path, "results.jsonl") if os.path.isdir(path) else path, "a") as f:
            for ex in ("demo/square", "demo/total"):
                f.write(json.dumps({"nonce": "guess", "exercise": ex, "status": "passes",
                                    "message": ""}) + "\\n")
    except OSError:
        pass
os._exit(1)
"""


CHEAT = """\
import lib.checks as _c
_c.check = lambda exercise, answer, quiet=False: _c.CheckResult(exercise, "passes", "")
"""


def _submissions(folder: Path) -> Path:
    def student():
        return hw.student_notebook(DEMO)

    correct = jupytext.read(DEMO)
    correct.metadata["homework"] = {"chapter": "demo"}
    subs = {
        "correct": correct,
        "blank": student(),
        "exception": _replace_stub(
            _replace_stub(student(), "demo/square", "def square(x):\n    return x / 0\n"),
            "demo/total", "raise RuntimeError('before total')\ntotal = 6\n"),
        "loop": _replace_stub(
            _replace_stub(student(), "demo/square", "def square(x):\n    while True:\n"
                                                    "        pass\n"),
            "demo/total", "while True:\n    pass\n"),
        "renamed_deleted": _delete_stub(
            _replace_stub(student(), "demo/square", "def sq(x):\n    return x * x\n"),
            "demo/total"),
        "dead_forger": student(),
        "cheater": student(),
    }
    subs["loop"].cells.append(nbformat.v4.new_code_cell("total = 1 + 2 + 3"))
    subs["dead_forger"].cells.insert(0, nbformat.v4.new_code_cell(FORGE))
    subs["cheater"].cells.insert(0, nbformat.v4.new_code_cell(CHEAT))
    for name, nb in subs.items():
        nbformat.write(nb, folder / f"{name}.ipynb")
    (folder / "invalid_json.ipynb").write_text('{"cells": [ not json')
    (folder / "not_a_notebook.ipynb").write_text(json.dumps({"hello": "world"}))
    return folder


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = _submissions(tmp_path_factory.mktemp("submissions"))
    out = tmp_path_factory.mktemp("grades") / "grades.csv"
    before = {p: p.read_bytes() for p in Path(hw.ROOT, "lib").rglob("*.py")}
    rows = hw.grade([folder], chapter=str(DEMO), cell_timeout=8, total_timeout=40, jobs=2)
    after = {p: p.read_bytes() for p in Path(hw.ROOT, "lib").rglob("*.py")}
    assert before == after
    csv_path, summary = hw.write_grades(rows, out)
    return {r.student: r for r in rows}, csv_path, summary


EXPECTED = {
    # student: (square score, total score, words in the square reason, in the total reason)
    "correct": (1, 1, "", ""),
    "blank": (0, 0, "not attempted", "not attempted"),
    "exception": (0, 0, "ZeroDivisionError", "not defined"),
    "loop": (0, 1, "did not finish", ""),
    "renamed_deleted": (0, 0, "`square` is not defined", "`total` is not defined"),
    "dead_forger": (0, 0, "kernel died", "kernel died"),
    "cheater": (0, 0, "not attempted", "not attempted"),
    "invalid_json": (0, 0, "invalid notebook", "invalid notebook"),
    "not_a_notebook": (0, 0, "invalid notebook", "invalid notebook"),
}


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_grade_each_case(graded, student):
    rows, _, _ = graded
    row = rows[student]
    square, total, why_square, why_total = EXPECTED[student]
    assert row.scores == {"demo/square": square, "demo/total": total}, row
    assert why_square in row.reasons["demo/square"], row
    assert why_total in row.reasons["demo/total"], row
    if square:
        assert row.reasons["demo/square"] == ""


def test_grade_notes_say_what_happened(graded):
    rows, _, _ = graded
    assert "RuntimeError: before total" in rows["exception"].notes
    assert "timeout" in rows["loop"].notes
    assert rows["correct"].notes == ""


def test_grade_csv_and_summary(graded):
    import csv

    rows, csv_path, summary = graded
    with csv_path.open() as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(EXPECTED)
    by_student = {r["student"]: r for r in table}
    for student, (square, total, _, _) in EXPECTED.items():
        assert by_student[student]["demo/square"] == str(square)
        assert by_student[student]["demo/total"] == str(total)
        assert by_student[student]["score"] == str(square + total)
        assert by_student[student]["max_score"] == "2"
    text = summary.read_text()
    assert "| demo/square | 1/9 |" in text and "| demo/total | 2/9 |" in text


class _FakeClient:
    """Stands in for nbclient: each cell's source says what the kernel does with it."""

    def __init__(self, stuck_after_interrupt=False):
        self.timeout = None
        self.km = self
        self.interrupts = 0
        self.stuck = stuck_after_interrupt
        self.ran = []

    def interrupt_kernel(self):
        self.interrupts += 1

    def execute_cell(self, cell, index):
        from nbclient.exceptions import CellTimeoutError, DeadKernelError

        self.ran.append(cell.source)
        if cell.source == "loop" or (cell.source == "pass" and self.stuck):
            raise CellTimeoutError("timed out")
        if cell.source == "die":
            raise DeadKernelError("died")
        if cell.source == "slow":
            time.sleep(0.3)
        if cell.source == "raise":
            cell.outputs = [nbformat.v4.new_output("error", ename="ValueError", evalue="bad")]


def _run(sources, n_student, total=10.0, stuck=False):
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    client = _FakeClient(stuck)
    job = {"warmup": "import lib", "startup_timeout": 60, "cell_timeout": 5, "probe_timeout": 1,
           "total_timeout": total}
    log = {"cells": [], "kernel_stuck": False, "deadline_hit": False, "kernel_died": False}
    hw._interrupt = lambda c: c.km.interrupt_kernel()  # the fake is synchronous
    hw._run_cells(client, nb, n_student, job, log, CellTimeoutError, DeadKernelError)
    return [e["status"] for e in log["cells"]], log, client


@pytest.fixture
def _restore_interrupt():
    saved = hw._interrupt
    yield
    hw._interrupt = saved


@pytest.mark.usefixtures("_restore_interrupt")
@pytest.mark.parametrize("sources, n_student, total, stuck, statuses, flags", [
    # an error does not stop the run; the grading cell (last) still runs
    (["ok", "raise", "ok", "grade"], 3, 10, False, ["ok", "error", "ok", "ok"], {}),
    # a time-out interrupts the kernel, which recovers: the run goes on
    (["loop", "ok", "grade"], 2, 10, False, ["timeout", "ok", "ok"], {}),
    # the interrupt is ignored: everything after is skipped, grading included
    (["loop", "ok", "grade"], 2, 10, True, ["timeout", "skipped", "skipped"],
     {"kernel_stuck": True}),
    # the kernel dies
    (["die", "ok", "grade"], 2, 10, False, ["died", "skipped", "skipped"],
     {"kernel_died": True}),
    # the total limit: student cells after it are skipped, the grading cells still run
    (["slow", "slow", "ok", "grade"], 3, 0.2, False, ["ok", "skipped", "skipped", "ok"],
     {"deadline_hit": True}),
])
def test_run_cells_limits(sources, n_student, total, stuck, statuses, flags):
    got, log, client = _run(sources, n_student, total, stuck)
    assert got == statuses
    for flag in ("kernel_stuck", "kernel_died", "deadline_hit"):
        assert log[flag] == flags.get(flag, False), flag
    assert client.ran[-1] != "import lib" and "import lib" in client.ran  # warm-up first
    assert client.interrupts == sources.count("loop")


def test_read_results_rejects_malformed_forged_and_duplicated(tmp_path):
    path = tmp_path / "r.jsonl"
    good = {"nonce": "n", "exercise": "a", "status": "passes", "message": ""}
    lines = [json.dumps(good), "not json", json.dumps([1, 2]),
             json.dumps({**good, "exercise": "b", "nonce": "forged"}),
             json.dumps({**good, "exercise": "c", "status": "excellent"}),
             json.dumps({**good, "exercise": "d"}), json.dumps({**good, "exercise": "d"}),
             json.dumps({**good, "exercise": "e", "message": 3})]
    path.write_text("\n".join(lines))
    assert hw._read_results(path, "n") == {"a": good}
    assert hw._read_results(tmp_path / "missing.jsonl", "n") == {}


@pytest.mark.parametrize("kwargs, match", [
    ({"cell_timeout": 0}, "cell_timeout"),
    ({"total_timeout": -1}, "total_timeout"),
    ({"jobs": 0}, "jobs"),
    ({"chapter": "no-such-chapter"}, "chapter"),
])
def test_grade_rejects_bad_arguments(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        hw.grade([tmp_path], **kwargs)


def test_grade_rejects_missing_path(tmp_path):
    with pytest.raises(ValueError, match="submissions"):
        hw.grade([tmp_path / "nope.ipynb"], chapter=str(DEMO))


def test_chapter_from_metadata_or_reason(tmp_path):
    nb = hw.student_notebook(DEMO)
    nb.metadata["homework"]["chapter"] = "not-a-chapter"
    nbformat.write(nb, tmp_path / "x.ipynb")
    (row,) = hw.grade([tmp_path / "x.ipynb"])
    assert row.scores == {} and "which chapter" in row.notes


@pytest.mark.parametrize("script", ["student.py", "grade.py"])
def test_command_line_help(script, capsys):
    import runpy

    module = runpy.run_path(str(Path(hw.ROOT, "scripts", script)))  # lib is already imported
    with pytest.raises(SystemExit) as exit_:
        module["main"](["--help"])
    assert exit_.value.code == 0 and "usage" in capsys.readouterr().out.lower()


def test_grade_command_line_rejects_a_missing_folder(tmp_path, capsys):
    import runpy

    module = runpy.run_path(str(Path(hw.ROOT, "scripts", "grade.py")))
    with pytest.raises(SystemExit) as exit_:
        module["main"]([str(tmp_path / "nope"), "--out", str(tmp_path / "g.csv")])
    assert exit_.value.code == 2 and "does not exist" in capsys.readouterr().err
