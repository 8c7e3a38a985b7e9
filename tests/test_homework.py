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

import os
import shutil
from pathlib import Path

import nbformat
import numpy as np
import pytest

import homework.checks
import homework.edition as hw
import lib

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
     ["import numpy as np", "value = todo('ex/id')", "from homework.edition import todo"],
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


@pytest.mark.parametrize("exercise", sorted(e for e in homework.checks.registered()
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


def test_student_command_line_help(capsys):
    import runpy

    module = runpy.run_path(str(Path(hw.ROOT, "scripts", "student.py")))
    with pytest.raises(SystemExit) as exit_:
        module["main"](["--help"])
    assert exit_.value.code == 0 and "usage" in capsys.readouterr().out.lower()


def test_question_points_of_the_setup_chapter_are_those_the_grading_cases_expect():
    """``homework.otter.question_points`` (what the instructors page tabulates) against the points
    written by hand in ``homework.cases.FULL`` for the setup homework: 3 for the tangent kernel
    (two hidden tests and the own-code point), 2 for symmetrize, 3 for gradient descent; the two
    derivations are graded by hand."""
    import homework.cases as cases
    import homework.otter as ho

    questions = ho.chapter_questions(hw.resolve_chapter("setup"))[2]
    points = {q.name: ho.question_points(q) for q in questions}
    assert {n: p for n, (p, manual) in points.items() if not manual} == cases.FULL
    assert [p for p, manual in points.values() if manual] == [ho.MANUAL_POINTS] * 2
