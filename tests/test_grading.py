"""Homework on otter-grader (``homework/``): master notebooks, hidden tests, grading a folder.

The fast tests (``make test``) check the master notebooks, the hidden tests' verifier against
cheats in the same process, the collection of submissions and its error messages, the
feedback (hints, never the hidden tests' code) and the limits cell in a real kernel (an
interrupted cell, a kernel killed on purpose). The end-to-end test (``make assign`` +
``make grade`` on every case of :mod:`homework.cases`, about 5 minutes on a loaded 2-core
machine) is marked ``slow`` and skipped by ``make test``; run it
with ``.venv/bin/python -m pytest tests/test_grading.py -m slow``.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import jax.numpy as jnp
import pytest

import homework.grade as hg
import homework.otter as ho
from homework import hidden

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------
# Master notebooks
# --------------------------------------------------------------------------------------------


def test_master_notebook_of_setup_has_questions_points_and_fresh_hidden_keys():
    nb1 = ho.master_notebook("setup")
    nb2 = ho.master_notebook("setup")
    src1 = "\n".join(c.source for c in nb1.cells)
    src2 = "\n".join(c.source for c in nb2.cells)
    assert nb1.cells[0].cell_type == "raw" and "# ASSIGNMENT CONFIG" in nb1.cells[0].source
    assert "autograder_files" in nb1.cells[0].source
    for name in ("setup_ex_ntk_linear", "setup_ex_symmetrize", "setup_ex_gd_least_squares"):
        assert f"name: {name}" in src1
    assert src1.count("manual: true") == 2  # the two derivations
    assert src1.count("hidden: true") == 3 * ho.HIDDEN_KEYS + 2  # + two one-call shortcuts
    seeds1 = sorted(int(s) for s in __import__("re").findall(r"seed=(\d+)", src1))
    seeds2 = sorted(int(s) for s in __import__("re").findall(r"seed=(\d+)", src2))
    assert seeds1 != seeds2  # every make assign draws new hidden inputs
    # the chapter's discussion code (plots, prints with chapter variables) is not in the answer
    assert "theta_small" not in src1 and "print(" not in src1.split("# BEGIN QUESTION")[1]


def test_manual_questions_are_exported_as_otter_documents_for_gradescope(tmp_path):
    """Otter's Gradescope path for manual questions: a filtered PDF in the student's zip (with
    an acknowledgement when the student's machine cannot make it) and a PDF made by the
    autograder, uploaded to the manual assignment given its ids. Grading here strips both."""
    import yaml

    nb = ho.master_notebook("setup", gradescope=("12345", "67890"))
    config = yaml.safe_load(nb.cells[0].source.split("\n", 1)[1])
    assert config["export_cell"]["pdf"] is True and config["export_cell"]["filtering"] is True
    assert "LaTeX" in config["export_cell"]["require_no_pdf_ack"]["message"]
    assert config["generate"]["pdf"] is True and config["generate"]["filtering"] is True
    assert (config["generate"]["course_id"], config["generate"]["assignment_id"]) == (
        "12345", "67890")
    assert "course_id" not in yaml.safe_load(
        ho.master_notebook("setup").cells[0].source.split("\n", 1)[1])["generate"]
    ag = tmp_path / "ag.zip"
    with zipfile.ZipFile(ag, "w") as z:
        z.writestr("otter_config.json", json.dumps({"pdf": True, "token": "secret",
                                                    "course_id": "1", "assignment_id": "2",
                                                    "filtering": True}))
        z.writestr("tests/q.py", "points = 1\n")
    local = hg.local_autograder(ag, tmp_path)
    with zipfile.ZipFile(local) as z:
        assert json.loads(z.read("otter_config.json")) == {"filtering": True}
        assert z.read("tests/q.py") == b"points = 1\n"


def test_solution_cell_keeps_signatures_and_marks_bodies():
    src = ("import numpy as np\n\ndef f(x):\n    \"\"\"Doc.\"\"\"\n    y = x + 1\n    return y\n\n"
           "value = np.pi\nother = 3\nprint(value)\n")
    out = ho.solution_cell(src, keep={"f", "value"})
    assert out.startswith("import numpy as np")
    assert "def f(x):\n    \"\"\"Doc.\"\"\"\n    # BEGIN SOLUTION\n    y = x + 1" in out
    assert "value = ...\n# BEGIN SOLUTION\nvalue = np.pi\n# END SOLUTION" in out
    assert "other" not in out and "print" not in out


def test_public_test_rejects_the_stub_and_accepts_an_answer(tmp_path):
    source = ho.PUBLIC_TEST.replace("ANSWER", repr("f"))
    code = tmp_path / "cells.py"
    code.write_text("def stub(x):\n    \"\"\"Doc.\"\"\"\n    ...\n\n\ndef real(x):\n    return x\n")
    namespace: dict = {}
    exec(compile(code.read_text(), str(code), "exec"), namespace)  # functions with a source
    for f, ok in ((namespace["stub"], False), (namespace["real"], True), (..., False)):
        env = {"f": f}
        if ok:
            exec(source, env)
        else:
            with pytest.raises(AssertionError, match="not attempted"):
                exec(source, env)


def _public_value_test(nb, answer):
    src = next(c.source for c in nb.cells if "def test_public_input" in c.source
               and repr(answer) in c.source)
    return src.split('""" # END TEST CONFIG\n', 1)[1]


def test_public_value_test_checks_the_answer_on_a_public_input():
    """``grader.check`` no longer says "All test cases passed!" for a wrong answer: the public
    test compares the answer with the solution's value on one public input (the checker's own
    key), except for exercises with several right answers."""
    import jax

    import lib

    nb = ho.master_notebook("setup")
    source = _public_value_test(nb, "ntk_linear_two_layer")
    exec(source, {"ntk_linear_two_layer": _ntk})  # the closed form passes
    for wrong, message in ((lambda U, v, x1, x2: x1 @ U.T @ U @ x2.T, "differs from the expected"),
                           (lambda U, v, x1, x2: (x1 @ x2.T).T, "has shape"),
                           (lambda U, v, x1, x2: None, "missing return")):
        with pytest.raises(AssertionError, match=message):
            exec(source, {"ntk_linear_two_layer": wrong})
    gd = _public_value_test(nb, "gd_least_squares")

    def gd_closed(X, y, eta, k):  # the k-th iterate from 0: sum_j (I - eta X^T X)^j eta X^T y
        A = jnp.eye(X.shape[1]) - eta * X.T @ X
        return sum(jnp.linalg.matrix_power(A, j) for j in range(k)) @ (eta * X.T @ y)

    exec(gd, {"gd_least_squares": gd_closed})
    with pytest.raises(AssertionError, match="differs"):
        exec(gd, {"gd_least_squares": lambda X, y, eta, k: gd_closed(X, y, eta, k + 1)})
    assert not any("def test_public_input" in c.source and "'symmetrize'" in c.source
                   for c in nb.cells)  # several right answers: attempted only
    del jax, lib


def test_the_homework_setup_cell_drops_what_nothing_uses():
    nb = ho.master_notebook("setup")
    setup = nb.cells[2].source
    assert "import jax.numpy as jnp" in setup and "import lib" in setup
    assert "N, d" not in setup and "FULL" not in setup
    # the chapter's self-check is not the handout's: its questions use grader.check
    assert "check" not in setup
    assert ho._used_setup("import lib\nfrom lib import (check,\n    two_layer)\nx = 1\n", []) == (
        "import lib\nfrom lib import two_layer\n")


def _tags_and_references(nb):
    import re

    md = [c.source for c in nb.cells if c.cell_type == "markdown"]
    tags = [t for src in md for t in re.findall(r"\\tag\{([\w.]+)\}", src)]
    return md, tags


def test_the_setup_handout_holds_the_equations_its_exercises_refer_to():
    """The handout holds the exercises only; "gradient descent on (1.1)" and "the gradient
    flow (1.2)" resolve to display math tagged 1.1 and 1.2 in a cell before the questions."""
    import re

    nb = ho._convert_markdown(ho.master_notebook("setup"), "setup")
    md, tags = _tags_and_references(nb)
    refs = {r for src in md if ho.EQUATIONS_HEADING not in src
            for r in re.findall(r"\((\d+\.\d+)\)", src)}
    assert {"1.1", "1.2"} <= refs
    assert refs <= set(tags) and len(tags) == len(set(tags))
    eqs = next(i for i, c in enumerate(nb.cells) if ho.EQUATIONS_HEADING in c.source)
    first_question = next(i for i, c in enumerate(nb.cells) if "# BEGIN QUESTION" in c.source)
    assert eqs < first_question
    assert r"\dot w(t) = -\nabla L(w(t))" in nb.cells[eqs].source  # the chapter's (1.2)


SYNTHETIC_CHAPTER = """\
---
jupytext:
  text_representation: {extension: .md, format_name: myst}
kernelspec: {display_name: Python 3, language: python, name: python3}
---
# T

$$
a = 1
$$ (t-a)

```{math}
:label: t-b
b = 2
```

```{math}
:label: t-unused
u = 0
```

## Exercises

```{exercise-start}
:label: t-ex
```
Use {eq}`t-a`, {eq}`t-b` and {eq}`t-c`, where

```{math}
:label: t-c
c = 3
```
```{exercise-end}
```
"""


def test_a_handout_gets_the_chapter_equations_it_refers_to_and_only_those(tmp_path):
    path = tmp_path / "t.md"
    path.write_text(SYNTHETIC_CHAPTER)
    nb = ho._convert_markdown(ho.master_notebook(path), str(path))
    md, tags = _tags_and_references(nb)
    text = "\n".join(md)
    assert "Use (1), (2) and (4)" in text  # numbered in the whole chapter's order
    assert sorted(tags) == ["1", "2", "4"]  # t-c once (the exercise holds it), t-unused never
    eqs = next(c.source for c in nb.cells if ho.EQUATIONS_HEADING in c.source)
    assert "a = 1\n\\tag{1}" in eqs and "b = 2\n\\tag{2}" in eqs
    assert "c = 3" not in eqs and "u = 0" not in text


@pytest.mark.parametrize("chapter", ["setup", "lazy_training", "parity", "f1_f2",
                                     "diagonal_regression", "diagonal_classification"])
def test_autograded_questions_ask_for_no_ungraded_written_answer(chapter):
    """An autograded coding question has a code cell and hidden tests only: a request for
    written reasoning in its statement (explain, deduce, why, ...?) comes after a "Not graded"
    (or a hint) marker, else the student has no answer cell and no points for it."""
    import re

    from homework import edition

    questions = ho.chapter_questions(edition.resolve_chapter(chapter))[2]
    coding = [q for q in questions if q.kind == "coding" and q.check_id]
    assert coding
    for q in coding:
        text = " ".join(q.statement)
        asks = re.search(r"\b(explain|deduce|why|compare|decide|say)\b|\?", text, re.I)
        marker = re.search(r"Not graded|\*Hint:\*", text)
        assert asks is None or (marker is not None and marker.start() < asks.start()), (
            q.label, text[asks.start() - 80:asks.end() + 20])


# --------------------------------------------------------------------------------------------
# Hidden tests in the submission's process
# --------------------------------------------------------------------------------------------


def _ntk(U, v, x1, x2):
    return (x1 @ U.T) @ (U @ x2.T) + jnp.dot(v, v) * (x1 @ x2.T)


def test_verify_passes_a_correct_answer_and_rejects_a_wrong_one():
    hidden.verify("setup/ntk-linear-two-layer", {"f": _ntk}, "f", seed=12345)
    with pytest.raises(AssertionError, match="fails"):
        hidden.verify("setup/ntk-linear-two-layer", {"f": lambda U, v, a, b: a @ b.T}, "f",
                      seed=12345)
    with pytest.raises(AssertionError, match="not attempted"):
        hidden.verify("setup/ntk-linear-two-layer", {"f": ...}, "f", seed=1)
    with pytest.raises(AssertionError, match="not defined"):
        hidden.verify("setup/ntk-linear-two-layer", {}, "f", seed=1)


def test_float32_answer_within_the_stated_tolerance_passes():
    from homework.checks import CheckFailed, assert_close

    def f32(U, v, x1, x2):
        return _ntk(U, v, x1, x2).astype(jnp.float32)

    hidden.verify("setup/ntk-linear-two-layer", {"f": f32}, "f", seed=5)
    want = jnp.array([1.0, 1e-9, 2.0])
    assert_close(want * (1 + 1e-8), want, "x")  # relative 1e-8 of the largest entry passes
    with pytest.raises(CheckFailed, match=r"off by a relative 5\.00e-04 \(tolerance 1e-06\)"):
        assert_close(want + jnp.array([0.0, 0.0, 1e-3]), want, "x")


def test_verify_ignores_a_patched_lib_and_a_patched_registry(monkeypatch):
    import homework.checks as checks
    import lib

    def zeros(f, params, x1, x2=None, **kw):
        return jnp.zeros((x1.shape[0], (x1 if x2 is None else x2).shape[0]))

    monkeypatch.setattr(lib.ntk, "empirical_ntk", zeros)
    monkeypatch.setattr(lib, "empirical_ntk", zeros)
    monkeypatch.setitem(checks._REGISTRY, "setup/ntk-linear-two-layer", lambda a, k: None)
    monkeypatch.setattr("importlib.reload", lambda m: m)
    answer = {"f": lambda U, v, x1, x2: jnp.zeros((x1.shape[0], x2.shape[0]))}
    with pytest.raises(AssertionError, match="fails"):
        hidden.verify("setup/ntk-linear-two-layer", answer, "f", seed=7)
    assert lib.ntk.empirical_ntk is zeros  # the student's modules are left as they were


def test_verify_forbids_the_one_call_shortcut():
    import lib

    def via_lib(U, v, x1, x2):
        return lib.empirical_ntk(lambda p, x: p["v"] @ (p["U"] @ x), {"U": U, "v": v}, x1, x2)

    hidden.verify("setup/ntk-linear-two-layer", {"f": via_lib}, "f", seed=3)  # right values
    with pytest.raises(AssertionError, match="without this library function"):
        hidden.verify("setup/ntk-linear-two-layer", {"f": via_lib}, "f", seed=3,
                      forbid=ho.FORBIDDEN["setup/ntk-linear-two-layer"])
    hidden.verify("setup/ntk-linear-two-layer", {"f": _ntk}, "f", seed=3,
                  forbid=ho.FORBIDDEN["setup/ntk-linear-two-layer"])
    assert callable(lib.empirical_ntk) and lib.empirical_ntk.__name__ == "empirical_ntk"


def test_hidden_tests_do_not_use_a_patched_verifier_module(monkeypatch):
    """Cheat (a): replacing ``homework.hidden.verify`` in sys.modules changes nothing, because
    the hidden tests execute the file afresh (``LOAD_VERIFY``)."""
    monkeypatch.setattr(hidden, "verify", lambda *a, **k: None)
    nb = ho.master_notebook("setup", seed_source=lambda: 4242)
    test = next(c.source for c in nb.cells if "def test_hidden_1" in c.source
                and "ntk-linear" in c.source)
    assert "from homework" not in test and "import homework" not in test
    env = {"ntk_linear_two_layer": lambda U, v, x1, x2: 0}
    with pytest.raises(AssertionError, match="fails|raised"):
        exec(test.split('""" # END TEST CONFIG\n', 1)[1].replace(
            "test_hidden_1(globals())", "test_hidden_1(ENV)"), {"ENV": env})


def test_patched_numpy_cannot_pass_zeros_the_judge_compares(monkeypatch):
    """Cheat (b): ``numpy.max = lambda *a, **k: 0.0`` in the kernel would make an in-kernel
    comparison pass for zeros; the judge (a fresh Python) runs the comparison and fails them."""
    import numpy

    def zeros(X, y, eta, k):
        return jnp.zeros(X.shape[1])

    monkeypatch.setattr(numpy, "max", lambda *a, **k: 0.0)
    with pytest.raises(AssertionError, match="off by a relative"):
        hidden.verify("setup/gd-least-squares", {"f": zeros}, "f", seed=77)


def test_the_wire_format_round_trips_values_and_refuses_objects():
    import numpy as np

    values = [None, True, 3, 2.5, "s", float("nan"), [1, 2.0], (np.float32(1.5), np.arange(3)),
              {"a": np.zeros((2, 0)), "b": np.array(1 + 2j)}, np.eye(2, dtype=np.float32),
              jnp.array([[1.0, -2.0]]), np.array(True), np.int64(7)]
    for value in values:
        data = json.loads(json.dumps(hidden.encode(value)))  # what crosses the socket
        back = hidden.decode(data)
        if isinstance(value, np.ndarray | np.generic) or type(value).__module__.startswith("jax"):
            want = np.asarray(value)
            assert back.dtype == want.dtype and back.shape == want.shape
            assert np.array_equal(back, want)
        elif isinstance(value, float) and value != value:
            assert back != back
        elif isinstance(value, tuple | dict):
            assert type(back) is type(value) and len(back) == len(value)
        else:
            assert back == value
    for bad in (object(), lambda x: x, {1: 2}, np.array(["a"]), np.array([None], dtype=object)):
        with pytest.raises(TypeError):
            hidden.encode(bad)
    for bad in ({"array": {"dtype": "object", "shape": [1], "data": [1]}},
                {"array": {"dtype": "float64", "shape": [1], "data": ["1"]}},
                {"array": {"dtype": "float64", "shape": [2], "data": [1.0]}},
                {"pickle": "gASV"}, {"tuple": 3}):
        with pytest.raises((ValueError, TypeError)):
            hidden.decode(bad)


def _started_judge(tmp_path, plan=None):
    """A judge started as make grade starts it, ``plan`` (if any) written to its stdin: its
    socket and its process (whose stdout holds the verdicts); wait until it listens."""
    import subprocess
    import sys
    import time

    sock = tmp_path / "judge.sock"
    proc = subprocess.Popen([sys.executable, "-I", str(ROOT / "homework" / "judge.py"),
                             str(ROOT), str(sock)], stdout=subprocess.PIPE,
                            stdin=subprocess.PIPE if plan else subprocess.DEVNULL)
    if plan:
        proc.stdin.write(json.dumps(plan).encode())
        proc.stdin.close()
    for _ in range(600):
        if sock.exists():
            break
        time.sleep(0.2)
    return str(sock), proc


@pytest.fixture
def judge(tmp_path):
    """A judge started as make grade starts it: its socket, and its stdout (the verdicts)."""
    sock, proc = _started_judge(tmp_path)
    yield sock, proc
    proc.kill()
    proc.wait()


def test_the_judge_runs_the_checker_and_calls_the_kernel_for_each_answer(judge):
    """The judge protocol with this process as the kernel: the judge's calls arrive as JSON,
    the verdict comes back, and every verdict is a line on the judge's stdout."""
    import socket

    path, proc = judge
    calls = []

    def right(U, v, x1, x2):
        calls.append((type(U).__module__, U.shape))
        return _ntk(U, v, x1, x2)

    request = {"op": "test", "exercise": "setup/ntk-linear-two-layer", "seed": 5,
               "kind": "value"}
    assert hidden.ask_judge(dict(request), right, path=path) == (True, "")
    assert calls and calls[0][0].startswith("jax") and calls[0][1] == (7, 4)
    ok, hint = hidden.ask_judge(dict(request), lambda U, v, x1, x2: _ntk(U, v, x1, x2) * 2,
                                path=path)
    assert not ok and "off by a relative" in hint
    ok, hint = hidden.ask_judge(dict(request), lambda *a: object(), path=path)
    assert not ok and "could not read what your function returned" in hint
    ok, hint = hidden.ask_judge(dict(request), lambda *a: 1 / 0, path=path)
    assert not ok and "ZeroDivisionError" in hint
    ok, hint = hidden.ask_judge({**request, "refused": "not attempted: x"}, None, path=path)
    assert (ok, hint) == (False, "not attempted: x")
    # a kernel that answers with something encode never writes: a failure, the judge goes on
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    stream = sock.makefile("rwb")
    hidden.send(stream, {**request, "seed": 6})
    assert hidden.receive(stream)["op"] == "call"
    hidden.send(stream, {"value": {"array": {"dtype": "object", "shape": [1], "data": [0]}}})
    verdict = hidden.receive(stream)
    assert verdict["op"] == "verdict" and verdict["ok"] is False
    sock.close()
    # the gd checker reads the source the kernel sends; None: it cannot check for loops
    gd = {"op": "test", "exercise": "setup/gd-least-squares", "seed": 1, "kind": "value",
          "source": None}
    import numpy as np

    def closed_form(X, y, eta, k):
        X, y = np.asarray(X), np.asarray(y)
        w, V = np.linalg.eigh(X.T @ X)
        shrink = np.where(w > 1e-12, (1 - (1 - eta * np.clip(w, 0, None)) ** k)
                          / np.where(w > 1e-12, w, 1), 0.0)
        return V @ (shrink * (V.T @ (X.T @ y)))

    ok, hint = hidden.ask_judge(dict(gd), closed_form, path=path)
    assert not ok and "cannot read the source" in hint
    src = "def f(X, y, eta, k):\n    for _ in range(k):\n        pass\n"
    ok, hint = hidden.ask_judge({**gd, "source": src}, closed_form, path=path)
    assert not ok and "for" in hint
    proc.kill()
    lines = [json.loads(line) for line in proc.stdout.read().decode().splitlines()]
    assert lines[0] == {"key": "setup/ntk-linear-two-layer|5|value", "ok": True, "hint": ""}
    assert [v["ok"] for v in lines] == [True] + [False] * 7
    assert hg.read_verdicts(b"junk\n" + json.dumps(lines[1]).encode() + b"\n{") == {
        "setup/ntk-linear-two-layer|5|value": (False, lines[1]["hint"])}


@pytest.fixture
def planned_judge(tmp_path):
    """A judge started as make grade starts it, with the grader's plan on its stdin."""
    loop = "def gd_least_squares(X, y, eta, k):\n    for _ in range(k):\n        pass\n"
    sock, proc = _started_judge(tmp_path, {
        "keys": ["setup/symmetrize|5|value", "setup/symmetrize|6|value",
                 "setup/gd-least-squares|1|value"],
        "sources": {"setup/symmetrize": "def symmetrize(a, B):\n    return a, B\n",
                    "setup/gd-least-squares": loop}})
    yield sock, proc
    proc.kill()
    proc.wait()


def _symmetrize(a, B):
    return jnp.concatenate([a, -a]), jnp.concatenate([B, B])


def test_the_judge_with_a_plan_refuses_unknown_and_repeated_keys_and_uses_its_source(
        planned_judge):
    """Attack 2 (forged requests): with the grader's plan on its stdin, the judge refuses a key
    it was not told about (a kind or seed the kernel made up), judges each key once (the
    second request fails, and the grader scores that key 0), and checks the source the grader
    read from the notebook, not the one the kernel sends."""
    from homework.judge import REPEAT_KEY, UNKNOWN_KEY

    path, proc = planned_judge
    sym = {"op": "test", "exercise": "setup/symmetrize", "seed": 5, "kind": "value"}
    assert hidden.ask_judge({**sym, "kind": "own"}, _symmetrize, path=path) == (
        False, UNKNOWN_KEY)
    assert hidden.ask_judge({**sym, "seed": 7}, _symmetrize, path=path) == (False, UNKNOWN_KEY)
    assert hidden.ask_judge(dict(sym), _symmetrize, path=path) == (True, "")
    assert hidden.ask_judge(dict(sym), _symmetrize, path=path) == (False, REPEAT_KEY)
    # a refusal sent first is the key's verdict: the genuine test after it is a repeat
    assert hidden.ask_judge({**sym, "seed": 6, "refused": "not attempted: x"}, None,
                            path=path) == (False, "not attempted: x")
    assert hidden.ask_judge({**sym, "seed": 6}, _symmetrize, path=path) == (False, REPEAT_KEY)
    # the kernel's clean decoy source is ignored: the grader's source has a loop
    import numpy as np

    def closed_form(X, y, eta, k):
        X, y = np.asarray(X), np.asarray(y)
        w, V = np.linalg.eigh(X.T @ X)
        shrink = np.where(w > 1e-12, (1 - (1 - eta * np.clip(w, 0, None)) ** k)
                          / np.where(w > 1e-12, w, 1), 0.0)
        return V @ (shrink * (V.T @ (X.T @ y)))

    gd = {"op": "test", "exercise": "setup/gd-least-squares", "seed": 1, "kind": "value",
          "source": "def gd_least_squares(X, y, eta, k):\n    return X.T @ y\n"}
    ok, hint = hidden.ask_judge(gd, closed_form, path=path)
    assert not ok and "uses for" in hint
    proc.kill()
    verdicts = hg.read_verdicts(proc.stdout.read())
    assert verdicts["setup/symmetrize|5|value"] == (False, hg.REPEATED)
    assert verdicts["setup/symmetrize|6|value"] == (False, hg.REPEATED)
    assert not verdicts["setup/gd-least-squares|1|value"][0]


def test_the_grader_keeps_the_first_verdict_and_fails_a_repeated_key():
    line = lambda key, ok: json.dumps({"key": key, "ok": ok, "hint": ""}).encode() + b"\n"  # noqa: E731
    assert hg.read_verdicts(line("a|1|value", False) + line("b|1|own", True)) == {
        "a|1|value": (False, ""), "b|1|own": (True, "")}
    assert hg.read_verdicts(line("a|1|value", True) + line("a|1|value", True)) == {
        "a|1|value": (False, hg.REPEATED)}


def _nb_of(*cells):
    import nbformat

    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])


def test_the_grader_reads_the_answers_source_from_the_notebook(tmp_path):
    """The source the judge checks comes from the submitted notebook (``ast``): the last
    top-level def with its decorators and the top-level functions it uses; None when the last
    binding of the name is not a plain def, or when the name is rebound out of sight."""
    helper = "def _step(b):\n    for _ in range(3):\n        b = b + 1\n    return b\n"
    first = "def gd(X, y, eta, k):\n    return X\n"
    last = "@functools.wraps(_decoy)\ndef gd(X, y, eta, k):\n    return _step(X)\n"
    assert hg.answer_source(_nb_of(helper, first, "%time x = 1\n" + last), "gd") == (
        last + "\n" + helper)
    assert hg.answer_source(_nb_of(first, "gd = _other\n"), "gd") is None
    assert hg.answer_source(_nb_of(first, "if True:\n    def gd(X):\n        pass\n"),
                            "gd") is None
    assert hg.answer_source(_nb_of(first, "def swap():\n    global gd\n"), "gd") is None
    assert hg.answer_source(_nb_of(first, "globals()['gd'] = 1\n"), "gd") is None
    assert hg.answer_source(_nb_of("x = 1\n"), "gd") is None
    ag = tmp_path / "ag.zip"
    with zipfile.ZipFile(ag, "w") as z:
        z.writestr("tests/q.py", "verify('setup/gd-least-squares', env, 'gd', seed=5)\n"
                   "verify('setup/gd-least-squares', env, 'gd', seed=5, forbid=['x:y'])\n")
    table = hg.hidden_tests(ag)
    assert hg.judge_plan(_nb_of(first), ag, table) == {
        "keys": ["setup/gd-least-squares|5|own", "setup/gd-least-squares|5|value"],
        "sources": {"setup/gd-least-squares": first}}


def test_the_kernel_sends_the_code_objects_source_and_refuses_a_wrapper():
    """Attack 4 (``functools.wraps`` decoy) on the ``otter run`` path: the kernel's source is
    that of the answer's own code, and an answer with ``__wrapped__`` is refused."""
    import functools

    def decoy(X, y, eta, k):
        return X

    @functools.wraps(decoy)
    def wrapped(X, y, eta, k):
        return y

    assert "return y" in hidden._source(wrapped) and "return X" not in hidden._source(wrapped)
    with pytest.raises(AssertionError, match="has __wrapped__"):
        hidden.verify("setup/gd-least-squares", {"f": wrapped}, "f", seed=1)


def test_the_own_code_check_refuses_a_forbidden_function_by_its_code():
    """Attack 3: ``jax._src.api.jacrev`` (an alias the attribute patch misses) and a lib
    function held in a namespace are refused by the profile hook on their code objects; the
    previous profile hook is restored."""
    import sys
    import types

    import jax

    import lib

    names = ho.FORBIDDEN["setup/ntk-linear-two-layer"]

    def via_src(U, v, x1, x2):
        jr = jax._src.api.jacrev
        return jr(lambda p: p["v"] @ (p["U"] @ x1[0]))({"U": U, "v": v})["v"] * 0 + _ntk(
            U, v, x1, x2)

    box = types.SimpleNamespace(run=lib.empirical_ntk)

    def via_box(U, v, x1, x2):
        return box.run(lambda p, x: p["v"] @ (p["U"] @ x), {"U": U, "v": v}, x1, x2)

    assert hidden.forbidden_objects(via_box, names) == []  # the identity inspection misses it
    before = sys.getprofile()
    for answer in (via_src, via_box):
        with pytest.raises(AssertionError, match="without this library function"):
            hidden.verify("setup/ntk-linear-two-layer", {"f": answer}, "f", seed=3,
                          forbid=names)
        assert sys.getprofile() is before
    hidden.verify("setup/ntk-linear-two-layer", {"f": _ntk}, "f", seed=3, forbid=names)

    def catches(U, v, x1, x2):  # catches the refusal, then calls it again (the hook is gone)
        try:
            box.run(lambda p, x: p["v"] @ (p["U"] @ x), {"U": U, "v": v}, x1, x2)
        except Exception:  # noqa: BLE001
            pass
        return box.run(lambda p, x: p["v"] @ (p["U"] @ x), {"U": U, "v": v}, x1, x2)

    with pytest.raises(RuntimeError, match="without this library function"):
        with hidden._forbidden(names):
            catches(jnp.ones((3, 4)), jnp.ones(3), jnp.ones((2, 4)), jnp.ones((2, 4)))
    assert sys.getprofile() is before


def test_a_row_whose_otter_feedback_says_failed_with_points_is_flagged():
    """Attack 7: otter patched in the kernel gives an IN_KERNEL question full points with the
    feedback "failed: not attempted": the row is flagged and its points withheld."""
    row = hg.Row("s", "s.ipynb", "parity", scores={"p": (2.0, 2.0), "q": (1.0, 2.0)},
                 messages={"p": ["- hidden (2 / 2): failed: not attempted: replace the ..."],
                           "q": ["- hidden (1 / 2): failed: off"]})
    hg.flag_contradictions(row, accepted=False)
    assert row.status.startswith("flagged") and row.total == 0
    assert row.otter_scores == {"p": (2.0, 2.0), "q": (1.0, 2.0)}
    assert "--accept-flagged s" in row.notes
    fine = hg.Row("t", "t.ipynb", "parity", scores={"q": (1.0, 2.0)},
                  messages={"q": ["- hidden (1 / 2): failed: off",
                                  "- hidden test 1 (1 / 1): passed"]})
    hg.flag_contradictions(fine, accepted=False)
    assert fine.status == "graded" and fine.total == 1.0


def test_the_own_code_inspection_finds_forbidden_objects_by_identity():
    """Cheat 7: ``def f(x, _jr=jax.jacrev)`` keeps jacrev away from the run-time patch of the
    module attribute; the inspection finds it in defaults, keyword defaults, closure cells,
    globals, partials and the student's helper functions."""
    import functools

    import jax

    import lib

    names = ho.FORBIDDEN["setup/ntk-linear-two-layer"]

    def default(U, v, x1, x2, _jr=jax.jacrev):
        return _jr

    def kwdefault(U, v, x1, x2, *, g=jax.grad):
        return g

    hold = jax.jacfwd

    def closure(U, v, x1, x2):
        return hold

    def helper(x):
        return _ALIAS(x)  # noqa: F821 (set below, a global of this module)

    def via_helper(U, v, x1, x2):
        return helper(U)

    partial = functools.partial(lambda f, *a: f, lib.empirical_ntk)
    globals()["_ALIAS"] = jax.vjp
    try:
        assert hidden.forbidden_objects(default, names) == ["jax:jacrev"]
        assert hidden.forbidden_objects(kwdefault, names) == ["jax:grad"]
        assert hidden.forbidden_objects(closure, names) == ["jax:jacfwd"]
        assert hidden.forbidden_objects(via_helper, names) == ["jax:vjp"]
        assert hidden.forbidden_objects(partial, names) == ["lib:empirical_ntk"]
        assert hidden.forbidden_objects(_ntk, names) == []
        with pytest.raises(AssertionError, match="without this library function"):
            hidden.verify("setup/ntk-linear-two-layer", {"f": default}, "f", seed=3,
                          forbid=names)
    finally:
        del globals()["_ALIAS"]


def test_grading_aborts_when_the_graders_own_files_change(tmp_path, monkeypatch):
    """Cheat 1 aimed at the instructor's checkout: a submission that writes to the grader's
    ``homework/`` or ``lib/`` stops the grading, naming the submission."""
    root = tmp_path / "root"
    for folder in ("homework", "lib"):
        (root / folder).mkdir(parents=True)
        (root / folder / "x.py").write_text("x = 1\n")
    monkeypatch.setattr(hg, "ROOT", root)
    before = hg.grader_digest()
    assert hg.changed_files(before, hg.grader_digest()) == []
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("ann", "ben"):
        (subs / f"{name}.ipynb").write_text(json.dumps(
            {"cells": [], "metadata": {"homework": {"chapter": "setup"}}, "nbformat": 4,
             "nbformat_minor": 5}))
    ag = tmp_path / "ag.zip"
    with zipfile.ZipFile(ag, "w") as z:
        z.writestr("tests/q.py", "points = 1\nverify('setup/symmetrize', env, 'f', seed=5)\n")
    assert hg.hidden_tests(ag) == {"q": ["setup/symmetrize|5|value"]}

    def run_local(sub, chapter, *args, **kwargs):
        if sub.student == "ben":
            (root / "homework" / "x.py").write_text("x = 2\n")
        return hg.Row(sub.student, str(sub.origin), chapter)

    monkeypatch.setattr(hg, "run_local", run_local)
    with pytest.raises(hg.GradeError, match=r"grader's own files changed while ben .*"
                       r"homework/x\.py"):
        hg.grade(subs, out=tmp_path / "out", autograder=ag, docker="no", cache=False,
                 log=lambda *a: None)


def test_the_judges_verdicts_replace_otters_hidden_results():
    row = hg.Row("s", "s.ipynb", "setup", scores={"q": (3.0, 3.0), "p": (1.0, 1.0)},
                 messages={"q": ["- hidden (3 / 3): passed"]})
    table = {"q": ["e|1|value", "e|2|value", "e|1|own"], "p": ["parity/beyond-kernel|1|value"]}
    hg.apply_verdicts(row, table, {"e|1|value": (True, ""), "e|2|value": (False, "fails: x")})
    assert row.scores == {"q": (1.0, 3.0), "p": (1.0, 1.0)}  # the in-kernel one keeps otter's
    assert row.messages["q"] == ["- hidden test 1 (1 / 1): passed",
                                 "- hidden test 2 (0 / 1): failed: x",  # not "failed: fails: x"
                                 f"- hidden test 3 (0 / 1): failed: {hg.NO_VERDICT}"]


def test_feedback_hint_drops_the_judges_fails_prefix():
    """Issue 16: the feedback read "failed: fails: <hint>" (the judge's and the kernel's
    message starts with "fails: ")."""
    assert hg.feedback_hint("fails: off by a relative 1e-3") == "off by a relative 1e-3"
    assert hg.feedback_hint("Fails:  fails: x") == "x"
    assert hg.feedback_hint("not attempted: replace the ...") == "not attempted: replace the ..."
    assert hg.feedback_hint("fails:") == "the test failed (no message)"
    assert hg._hint("...\nAssertionError: fails: wrong sign\n") == "wrong sign"


def test_the_static_scan_flags_tampering_and_not_the_handout():
    import nbformat

    nb = ho.master_notebook("setup")
    code = [c for c in nb.cells if c.cell_type == "code" and "BEGIN TEST CONFIG" not in c.source]
    code += [nbformat.v4.new_code_cell(c) for c in (  # what otter adds to the student notebook
        '# Initialize Otter\nimport otter\ngrader = otter.Notebook("setup.ipynb")',
        'grader.check("setup_ex_ntk_linear")',
        "# Save your notebook first, then run this cell to export your submission.\n"
        "grader.export(run_tests=True)")]
    assert hg.scan_notebook(nbformat.v4.new_notebook(cells=code)).flags == []  # set-up, answers
    cells = ["import numpy as np\nimport lib\nimport json",
             "np.max = lambda *a, **k: 0.0",
             "import homework.hidden as _h\n_h.verify = None",
             "lib.ntk.empirical_ntk = lib.empirical_ntk = None",
             "import sys\nsys.modules['numpy'] = None",
             "setattr(np, 'max', None)",
             "import importlib, subprocess, gc, builtins",
             "import os\nos.fork()",
             "import inspect\ninspect.currentframe()",
             "!ls",
             "x = 1\nx.y = 2\nd = {}\nd['k'] = 3",  # not a module: not flagged
             "def f(:\n    pass"]
    scan = hg.scan_notebook(nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c) for c in cells]))
    text = "\n".join(scan.flags)
    for what in ("code cell 2 (`np.max = lambda *a, **k: 0.0`): assigns np.max",
                 "imports homework", "assigns _h.verify", "assigns lib.ntk.empirical_ntk",
                 "assigns sys.modules['numpy']", "calls setattr()", "imports importlib",
                 "imports subprocess", "imports gc", "imports builtins", "uses os.fork",
                 "uses inspect.currentframe", "shell command `!ls`"):
        assert what in text, (what, text)
    assert "code cell 11" not in text
    assert [(label, line) for label, line, _, _ in scan.syntax_errors] == [
        ("code cell 12 (`def f(:`)", 1)]


def test_a_flagged_row_gets_zero_until_accepted_and_a_syntax_error_is_named():
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in (
        "import numpy\nnumpy.max = None", "def f(x):\n    return (x\n")])
    scan = hg.scan_notebook(nb)

    def row():
        r = hg.Row("ann", "ann.ipynb", "setup")
        r.scores = {"q": (2.0, 3.0)}
        r.messages = {"q": ["- hidden (0 / 1): failed: f is not defined (cell deleted or "
                            "renamed?)"]}
        return r

    flagged = row()
    hg.apply_scan(flagged, scan, accepted=False)
    assert flagged.status == "flagged: assigns numpy.max"
    assert flagged.scores == {"q": (0.0, 3.0)} and flagged.otter_scores == {"q": (2.0, 3.0)}
    assert "--accept-flagged ann" in flagged.notes and "otter's points: 2 / 3" in flagged.notes
    assert "f is not defined: code cell 2 (`def f(x):`) has a SyntaxError at line 2" in \
        flagged.messages["q"][0]
    accepted = row()
    hg.apply_scan(accepted, scan, accepted=True)
    assert accepted.status == "graded" and accepted.scores == {"q": (2.0, 3.0)}
    assert "flag reviewed and accepted" in accepted.notes


# --------------------------------------------------------------------------------------------
# Collecting submissions and reporting bad inputs
# --------------------------------------------------------------------------------------------


def _nb(chapter="setup"):
    return {"cells": [], "metadata": {"homework": {"chapter": chapter}}, "nbformat": 4,
            "nbformat_minor": 5}


def test_collect_flat_subfolders_zips_and_any_case(tmp_path):
    (tmp_path / "in" / "carol").mkdir(parents=True)
    (tmp_path / "in" / "ann.ipynb").write_text(json.dumps(_nb()))
    (tmp_path / "in" / "BEN.IPYNB").write_text(json.dumps(_nb()))
    (tmp_path / "in" / "carol" / "setup.Ipynb").write_text(json.dumps(_nb()))
    (tmp_path / "in" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "in" / ".ipynb_checkpoints" / "x.ipynb").write_text("{}")
    with zipfile.ZipFile(tmp_path / "in" / "dan.zip", "w") as z:
        z.writestr("setup.ipynb", json.dumps(_nb()))
    (tmp_path / "work").mkdir()
    subs = hg.collect(tmp_path / "in", tmp_path / "work")
    hg.read_all(subs)
    assert sorted(s.student for s in subs) == ["BEN", "ann", "carol", "dan"]
    assert all(s.error is None and s.chapter == "setup" for s in subs)


def test_several_files_of_one_student_other_files_and_a_broken_zip_are_reported(tmp_path):
    folder = tmp_path / "in"
    (folder / "grace").mkdir(parents=True)
    (folder / "grace" / "setup.ipynb").write_text(json.dumps(_nb()))
    with zipfile.ZipFile(folder / "grace" / "bob.zip", "w") as z:
        z.writestr("setup.ipynb", json.dumps(_nb()))
    (folder / "grace" / "notes.txt").write_text("notes")
    (folder / "ann.zip").write_bytes(b"PK\x03\x04" + b"\0" * 20)  # an export cut short
    (tmp_path / "work").mkdir()
    skipped: list = []
    subs = {s.student: s for s in hg.collect(folder, tmp_path / "work", skipped)}
    assert sorted(subs) == ["ann", "grace", "grace-2"]
    assert skipped == [folder / "grace" / "notes.txt"]
    for name in ("grace", "grace-2"):
        assert "grace handed in 2 files (grace/bob.zip, grace/setup.ipynb)" in subs[name].note
    assert subs["ann"].error == "broken zip (re-export)" and "export cell" in subs["ann"].note
    lines: list = []
    rows, csv_path = hg.grade(folder, chapter="setup", out=tmp_path / "g",
                              autograder=_autograder(tmp_path / "ag.zip"), docker="no",
                              log=lines.append, jobs=1, timeout=1)
    text = "\n".join(lines)
    assert "grace handed in 2 files" in text and "skipped 1 file(s)" in text, text
    assert "ann: unreadable: broken zip (re-export) 0" in text
    import csv

    with open(csv_path) as f:
        recs = list(csv.DictReader(f))
    skipped_rows = [r for r in recs if r["status"].startswith("skipped: not a submission")]
    assert [(r["student"], Path(r["file"]).name) for r in skipped_rows] == [("grace",
                                                                             "notes.txt")]
    assert "grace's submission is graded in its own row" in skipped_rows[0]["notes"]
    assert not (tmp_path / "g" / "feedback" / "notes.md").exists()
    ann = next(r for r in recs if r["student"] == "ann")  # the broken zip: zeros and a note
    assert (ann["total"], ann["q1"], ann["q2"]) == ("0", "0", "0")
    assert "export cell" in ann["notes"] and "not graded, 0 points: ask ann" in ann["notes"]


def test_progress_lines_are_cut_at_a_word():
    row = hg.Row("ann", "ann.ipynb", "setup", notes="word " * 100)
    line = hg._progress(row, width=80)
    assert line.endswith("word ...") and len(line) <= 80


def test_empty_folder_and_unreadable_inputs_exit_non_zero(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert hg.main([str(tmp_path / "empty"), "--out", str(tmp_path / "g")]) == 2
    assert "no submission" in capsys.readouterr().err
    assert hg.main([str(tmp_path / "missing"), "--out", str(tmp_path / "g")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.ipynb").write_text("not json")
    (tmp_path / "bad" / "y.zip").write_text("not a zip")
    assert hg.main([str(tmp_path / "bad"), "--out", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err
    assert "every input is unreadable" in err and "x.ipynb" in err and "y.zip" in err


def _autograder(path):
    """A stand-in autograder zip with test files written as otter 7 writes them: q1 with the
    question's ``points = 2`` and its cases' points (0, 1, 1), q2 with its cases' only."""
    with zipfile.ZipFile(path, "w") as z:
        for q, total, pts in (("q1", "points = 2\n", (0, 1, 1)), ("q2", "", (2,))):
            z.writestr(f"tests/{q}.py", f"OK_FORMAT = False\n\nname = {q!r}\n{total}\n" + "".join(
                f"@test_case(points={p}, hidden=False)\ndef t{i}(env): pass\n"
                for i, p in enumerate(pts)))
    return path


def test_other_chapter_and_unreadable_are_reported_with_the_chapter_total(tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "lost.ipynb").write_text(json.dumps(_nb("lazy_training")))
    (folder / "garbage.ipynb").write_text("{")
    (folder / "carol.pdf").write_bytes(b"%PDF-1.4")  # handed in a PDF only
    (folder / "dave").mkdir()
    (folder / "dave" / "answers.py").write_text("x = 1\n")
    (folder / "dave" / "notes.txt").write_text("notes\n")
    ag = _autograder(tmp_path / "ag.zip")
    assert hg.autograder_points(ag) == {"q1": 2.0, "q2": 2.0}
    rows, csv_path = hg.grade(folder, chapter="setup", out=tmp_path / "g", autograder=ag,
                              docker="no")
    status = {r.student: (r.status, r.notes) for r in rows}
    assert status["lost"][0] == "wrong chapter: lazy_training"
    assert "'lazy_training'" in status["lost"][1]
    assert status["garbage"][0].startswith("unreadable: not a notebook (NotJSONError")
    import csv

    with open(csv_path) as f:
        recs = {r["student"]: r for r in csv.DictReader(f)}
    assert list(recs["lost"])[:8] == ["student", "file", "chapter", "status", "total",
                                      "possible", "q1", "q2"]
    # issue 16: a student whose files could not be read has a row of zeros with a note, never
    # an empty or missing row
    assert status["carol"][0] == "unreadable: not a notebook (.pdf file)"
    assert status["dave"][0] == "unreadable: not a notebook (.py, .txt files)"
    assert "answers.py" in status["dave"][1] and "notes.txt" in status["dave"][1]
    for student in ("garbage", "carol", "dave"):
        assert "not graded, 0 points: ask " + student in recs[student]["notes"]
        assert (recs[student]["q1"], recs[student]["q2"]) == ("0", "0")
    for student in ("lost", "garbage", "carol", "dave"):  # 0 out of the chapter's 4, not 0 / 0
        assert (recs[student]["total"], recs[student]["possible"]) == ("0", "4")
        text = (tmp_path / "g" / "feedback" / f"{student}.md").read_text()
        assert "Points: 0 / 4" in text and "was not graded" in text
        assert "Only the autograded questions are counted" in text  # written ones: by hand
        assert recs[student]["status"] in text
    assert "## q2: 0 / 2" in (tmp_path / "g" / "feedback" / "lost.md").read_text()


# What otter 7 writes in results.json for a question whose hidden tests failed: the output
# holds the test's code (keys, forbidden functions) in the traceback.
_OTTER_OUTPUT = """q - 2 result:
    ❌ Test case failed
    Error at line 3 in test q:
          verify('setup/ntk-linear-two-layer', env, 'ntk_linear_two_layer', seed=1234567,
                 forbid=['lib:empirical_ntk', 'jax:jacrev'])
    AssertionError: fails: this exercise asks you to compute it yourself
"""


def test_feedback_shows_points_pass_fail_and_hints_never_the_hidden_tests(tmp_path):
    row = hg.Row("ann", "ann.ipynb", "setup")
    hg._fill_from_results(row, {"tests": [
        {"name": "q - Public Tests", "score": 0, "max_score": 0, "output": "q results: All "
         "test cases passed!", "visibility": "visible"},
        {"name": "q - Hidden Tests", "score": 1, "max_score": 3, "output": _OTTER_OUTPUT,
         "visibility": "hidden"},
        {"name": "r - Hidden Tests", "score": 2, "max_score": 2, "output": "r results: All "
         "test cases passed!\n   verify('x', env, 'r', seed=7654321)", "visibility": "hidden"},
    ]})
    assert row.scores == {"q": (1.0, 3.0), "r": (2.0, 2.0)}
    hg.write_outputs([row], tmp_path, ["q", "r"], {"q": 3.0, "r": 2.0})
    text = (tmp_path / "feedback" / "ann.md").read_text()
    assert "## q: 1 / 3" in text and "## r: 2 / 2" in text
    assert "- public (0 / 0): passed" in text
    assert "- hidden (1 / 3): failed: this exercise asks you to compute it yourself" in text
    assert "fails:" not in text  # the judge's "fails: " prefix is not doubled after "failed: "
    assert "- hidden (2 / 2): passed" in text
    for secret in ("verify(", "seed=", "1234567", "7654321", "forbid", "jax:jacrev",
                   "lib:empirical_ntk"):
        assert secret not in text, secret


def test_blank_answers_are_not_attempted_and_a_missing_return_is_not(tmp_path):
    code = tmp_path / "answers.py"
    code.write_text("def dots(U, v, x1, x2):\n    ...\n\n"
                    "def passes(U, v, x1, x2):\n    \"\"\"Doc.\"\"\"\n    pass\n\n"
                    "def todo(U, v, x1, x2):\n    raise NotImplementedError\n\n"
                    "def no_return(U, v, x1, x2):\n    x1 @ x2.T\n")
    env: dict = {}
    exec(compile(code.read_text(), str(code), "exec"), env)
    for name in ("dots", "passes", "todo"):
        assert hidden.is_stub(env[name])
        with pytest.raises(AssertionError, match="not attempted"):
            hidden.verify("setup/ntk-linear-two-layer", env, name, seed=11)
    assert hidden.is_stub(None) and hidden.is_stub(...)
    assert not hidden.is_stub(env["no_return"]) and not hidden.is_stub(_ntk)
    with pytest.raises(AssertionError) as err:
        hidden.verify("setup/ntk-linear-two-layer", env, "no_return", seed=11)
    assert "not attempted" not in str(err.value)


def _run_with_limits(tmp_path, cells, cell_timeout=2.0):
    """Run ``cells`` after the grader's limits cell in a fresh kernel (nbclient, no otter);
    returns (the error nbclient raised or None, the events the limits cell logged)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    sub = hg.Submission("x", tmp_path / "x.ipynb", tmp_path / "x.ipynb", nb=nb)
    path = hg._limited_copy(sub, tmp_path / "in", "setup", cell_timeout, 10**6)
    events = tmp_path / "events.jsonl"
    os.environ[hg.EVENTS_VAR] = str(events)
    try:
        run = nbformat.read(path, as_version=4)
        client = NotebookClient(run, timeout=60, kernel_name="python3",
                                allow_errors=True, resources={"metadata": {"path": tmp_path}})
        try:
            client.execute()
            error = None
        except Exception as exc:  # noqa: BLE001 (DeadKernelError is what we look for)
            error = exc
    finally:
        del os.environ[hg.EVENTS_VAR]
    return error, hg.read_events(events)


def test_a_runaway_cell_is_interrupted_and_named_with_its_time(tmp_path):
    error, events = _run_with_limits(tmp_path, [
        "x = 1",
        "while True:\n    try:\n        sum(range(10**5))\n    except KeyboardInterrupt:\n"
        "        pass",
        "y = x + 1"])
    assert error is None
    stopped = hg.interrupted_cells(events)
    assert len(stopped) == 1
    cell, seconds = stopped[0]
    assert cell == "code cell 2 (`while True:`)"
    assert 2.0 <= seconds < 30.0
    # the cell after it ran and ended (the kernel survived the interruption)
    assert {"event": "end", "cell": "code cell 3 (`y = x + 1`)"} in events
    assert hg.running_cell(events) is None


def test_an_interruption_does_not_kill_a_kernel_whose_hooks_are_slow(tmp_path):
    """The flaky "DeadKernelError: Kernel died" of the runaway case: the per-cell alarm repeats
    every 0.5 s until IPython's post_run_cell hook stops it; when the work IPython does after
    the interruption (post_execute hooks such as matplotlib's, the traceback) takes longer, as
    under load, the next alarm was raised in IPython's code and killed the kernel (5 deaths in
    5 runs with the limits cell before the fix). The alarm now raises only inside the cell."""
    error, events = _run_with_limits(tmp_path, [
        "import functools, time\n"
        "get_ipython().events.register('post_execute', functools.partial(time.sleep, 1.5))",
        "while True:\n    try:\n        sum(range(10**5))\n    except KeyboardInterrupt:\n"
        "        pass",
        "y = 2"], cell_timeout=1.0)
    assert error is None, error
    assert [c for c, _ in hg.interrupted_cells(events)] == ["code cell 2 (`while True:`)"]
    assert {"event": "end", "cell": "code cell 3 (`y = 2`)"} in events


def test_a_kernel_death_names_the_cell_it_died_in(tmp_path):
    error, events = _run_with_limits(tmp_path, [
        "x = 1", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "y = 2"])
    assert error is not None and hg.kernel_died(f"{type(error).__name__}: {error}")
    assert hg.running_cell(events) == "code cell 2 (`import os, signal`)"


# --------------------------------------------------------------------------------------------
# End to end: make assign, then make grade on every case (slow)
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_assign_and_grade_every_case(tmp_path):
    from homework.cases import DETACHED_MARK, ESCAPE_MARK, write_cases

    dist = ho.assign(["setup"], tmp_path / "assign", run_tests=False)["setup"]
    expected = write_cases(dist, tmp_path / "subs", redteam=hg.namespaces_available())
    ag = next((dist / "autograder").glob("*.zip"))
    master = next((dist.parent / "master").glob("*.ipynb")).read_text()
    hidden_seeds = sorted(set(__import__("re").findall(r"env, '[^']*', seed=(\d+)", master)))
    assert len(hidden_seeds) == 3 * ho.HIDDEN_KEYS
    hidden_seeds = [k for k in hidden_seeds if len(k) >= 5]  # a short one could occur by chance
    rows, csv_path = hg.grade(tmp_path / "subs", out=tmp_path / "grades", autograder=ag,
                              docker="no", jobs=2, cell_timeout=20, timeout=400)
    got = {r.student: r for r in rows}
    assert sorted(got) == sorted(expected)
    for student, want in expected.items():
        row = got[student]
        assert row.status.startswith(want["status"]), (student, row.status, row.notes)
        for q, points in want["points"].items():
            assert row.scores.get(q, (0.0, 0.0))[0] == points, (student, q, row.scores)
        if "otter" in want:  # flagged: otter's own points (withheld) are those expected too
            assert row.otter_scores is not None, (student, row.status)
            for q, points in want["otter"].items():
                assert row.otter_scores.get(q, (0.0, 0.0))[0] == points, (student, q,
                                                                          row.otter_scores)
            assert f"--accept-flagged {student}" in row.notes
        text = (tmp_path / "grades" / "feedback" / f"{student}.md").read_text()
        # points, pass/fail lines and hints; never the hidden tests' code, keys or forbidden list
        for secret in ("verify(", "seed=", "forbid", "homework.hidden", *hidden_seeds):
            assert secret not in text, (student, secret)
        assert f"Points: {row.total if row.scores else 0:g} / 8" in text, (student, text[:300])
    assert "failed: not attempted" in (tmp_path / "grades" / "feedback" / "blank.md").read_text()
    assert "has shape ()" not in (tmp_path / "grades" / "feedback" / "blank.md").read_text()
    syntax = (tmp_path / "grades" / "feedback" / "syntax_error.md").read_text()
    assert "ntk_linear_two_layer is not defined: code cell" in syntax
    assert "has a SyntaxError at line 2" in syntax and "cell deleted or renamed" not in syntax
    for name in ("grace", "grace-2"):
        assert "grace handed in 2 files" in got[name].notes, got[name].notes
    assert "re-export" in (tmp_path / "grades" / "feedback" / "broken.md").read_text()
    csv_text = csv_path.read_text()
    assert "notes.txt" in csv_text and "skipped: not a submission" in csv_text
    runaway = got["runaway"].notes
    assert "was interrupted by the per-cell limit after" in runaway and "`while True:`" in runaway
    assert "`while True:`" in (tmp_path / "grades" / "feedback" / "runaway.md").read_text()
    assert "the kernel died while code cell" in got["kernel_killer"].notes
    assert "kernel died" in (tmp_path / "grades" / "feedback" / "kernel_killer.md").read_text()
    # nothing left running: the child that left the process group was killed too
    leftovers = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmdline = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if ESCAPE_MARK.encode() in cmdline or DETACHED_MARK.encode() in cmdline:
                leftovers.append(d.name)
    assert not leftovers, leftovers
    # redteam16: the proxy and the saboteur ran but found no other submission's judge
    if hg.namespaces_available():
        red = (tmp_path / "krr-redteam16.log").read_text()
        assert "proxy start" in red and "saboteur start" in red, red
        assert "proxy in front of" not in red and "saboteur killed" not in red, red
    assert os.path.getsize(csv_path) > 0
    # the seven cheats: nothing unpickled, the disk cheat's tests never reached the judge
    assert not (tmp_path / "krr-unpickled-mark").exists()
    assert hg.NO_VERDICT in (tmp_path / "grades" / "feedback" / "cheat_disk.md").read_text()
    assert "without this library function" in (
        tmp_path / "grades" / "feedback" / "cheat_jacrev_default.md").read_text()
    # round 16: the forged requests are repeats or refused, the wrapper is refused, the
    # aliases of the forbidden functions are refused by their code
    assert "without this library function" in (
        tmp_path / "grades" / "feedback" / "attack_alias.md").read_text()


@pytest.mark.slow
def test_the_instructors_sample_grades_as_the_page_says(tmp_path):
    """The harmless sample of the instructors page (``write_sample``): the correct notebook gets
    every point, the partly wrong one loses the points of ``symmetrize`` only; neither is
    flagged, and the feedback names the failed question's hint once ("failed: ", no "fails:")."""
    from homework.cases import SYM, write_sample

    dist = ho.assign(["setup"], tmp_path / "assign", run_tests=False)["setup"]
    expected = write_sample(dist, tmp_path / "subs")
    ag = next((dist / "autograder").glob("*.zip"))
    with zipfile.ZipFile(ag) as z:  # the autograder installs the runtime pins, not the book's
        env = z.read("environment.yml").decode()  # otter writes the requirements' pins there
    assert "- otter-grader==" in env and "- jax==" in env and "jupyter-book" not in env
    rows, csv_path = hg.grade(tmp_path / "subs", out=tmp_path / "grades", autograder=ag,
                              docker="no", jobs=2, cell_timeout=60, timeout=600)
    got = {r.student: r for r in rows}
    assert sorted(got) == ["correct", "partly_wrong"]
    for student, want in expected.items():
        assert got[student].status == want["status"], (student, got[student].notes)
        assert {q: s for q, (s, _) in got[student].scores.items()} == want["points"]
    text = (tmp_path / "grades" / "feedback" / "partly_wrong.md").read_text()
    assert f"## {SYM}: 0 / 2" in text and "failed: " in text and "fails:" not in text


@pytest.mark.slow
def test_a_patched_otter_cannot_keep_the_points_of_an_in_kernel_question(tmp_path):
    """Round 16's attack 7: the parity blank notebook with otter patched in the kernel."""
    from homework.cases import write_parity_cases

    dist = ho.assign(["parity"], tmp_path / "assign", run_tests=False)["parity"]
    expected = write_parity_cases(dist, tmp_path / "subs")
    ag = next((dist / "autograder").glob("*.zip"))
    rows, _ = hg.grade(tmp_path / "subs", out=tmp_path / "grades", autograder=ag, docker="no",
                       jobs=2, cell_timeout=120, timeout=600)
    got = {r.student: r for r in rows}
    for student, want in expected.items():
        row = got[student]
        assert row.status.startswith(want["status"]), (student, row.status, row.notes)
        for q, points in want["points"].items():
            assert row.scores.get(q, (0.0, 0.0))[0] == points, (student, q, row.scores)
        for q, points in want.get("otter", {}).items():
            assert row.otter_scores.get(q, (0.0, 0.0))[0] == points, (student, q)


def test_docker_arguments_parse_with_otter_grade(tmp_path):
    """The Docker path cannot run here (no Docker), but its command line must be one that
    ``otter grade`` accepts: parse it with otter's own command-line definition."""
    from otter.cli import grade_cli

    (tmp_path / "in").mkdir()
    (tmp_path / "ag.zip").write_bytes(b"")
    args = hg.docker_arguments(tmp_path / "in", tmp_path / "ag.zip", tmp_path / "out", 600, 2)
    ctx = grade_cli.make_context("grade", list(args))
    assert ctx.params["paths"] == (str(tmp_path / "in"),)
    assert ctx.params["autograder"] == str(tmp_path / "ag.zip")
    assert ctx.params["timeout"] == 600 and ctx.params["containers"] == 2
    assert ctx.params["no_network"] is True


# --------------------------------------------------------------------------------------------
# Robustness and isolation of the local path (redteam16: attacks 1, 5, 6, 8, 9)
# --------------------------------------------------------------------------------------------


def test_forged_event_records_are_dropped_not_fatal(tmp_path):
    """Attack 9: the events file is written inside the kernel; a record the limits cell never
    writes is dropped (it crashed the whole run: no CSV for anyone)."""
    path = tmp_path / "events.jsonl"
    good = [{"event": "start", "cell": "code cell 2 (`x = 1`)"},
            {"event": "interrupted", "cell": "code cell 2 (`x = 1`)", "seconds": 61.5,
             "limit": 60},
            {"event": "end", "cell": "code cell 2 (`x = 1`)"}]
    bad = [{"event": "interrupted", "cell": "code cell 1", "seconds": "boom"},
           {"event": "interrupted", "cell": ["a list"], "seconds": 1.0},
           {"event": "interrupted", "cell": "c", "seconds": float("nan")},
           {"event": "interrupted", "cell": "c", "seconds": True},
           {"event": "interrupted", "cell": "c"},
           {"event": "start", "cell": "x" * 10**4},
           {"event": "start", "cell": ""},
           {"event": "started", "cell": "c"},
           ["start", "c"], "start", 3]
    lines = [json.dumps(r) for r in bad[:2] + good[:1] + bad[2:] + good[1:]]
    path.write_text("\n".join(lines + ['{"event": "end", "cell": ', "NaN", "[" * 10**5]) + "\n")
    events = hg.read_events(path)
    assert events == [good[0], {"event": "interrupted", "cell": "code cell 2 (`x = 1`)",
                                "seconds": 61.5}, good[2]]
    assert hg.interrupted_cells(events) == [("code cell 2 (`x = 1`)", 61.5)]
    assert hg.running_cell(events) is None


def test_the_judge_starts_without_the_compilation_cache():
    """Issue 16, gap 1: a submission writes its JAX cache folder; an entry planted there is
    compiled code, so the judge's environment has none of the cache variables (nor the token
    and the events file); the rest of the submission's environment is kept."""
    assert hg.CACHE_VARS == ("JAX_COMPILATION_CACHE_DIR",
                             "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                             "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES")
    rest = {"PATH": "/usr/bin", "MPLBACKEND": "Agg", "JAX_ENABLE_X64": "1"}
    env = {**rest, **{v: "/tmp/cache" for v in hg.CACHE_VARS}, hg.TOKEN_VAR: "t",
           hg.EVENTS_VAR: "/tmp/events"}
    assert hg.judge_environment(env) == rest
    assert set(env) - set(rest) == {*hg.CACHE_VARS, hg.TOKEN_VAR, hg.EVENTS_VAR}  # unchanged


def test_cache_entries_are_read_and_written_as_plain_files(tmp_path):
    """``read_cache`` keeps JAX's ``*-cache`` files (not ``-atime``, the lock file, a symbolic
    link or a subfolder); ``write_cache`` writes them into a new folder and refuses a name that
    would leave it."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "jit_f-1-cache").write_bytes(b"\x00one")
    (src / "jit_f-1-atime").write_bytes(b"t")
    (src / ".lockfile").write_bytes(b"")
    (tmp_path / "elsewhere-cache").write_bytes(b"outside")
    (src / "link-cache").symlink_to(tmp_path / "elsewhere-cache")
    (src / "sub-cache").mkdir()
    entries = hg.read_cache(src)
    assert entries == {"jit_f-1-cache": b"\x00one"}
    dest = hg.write_cache(entries, tmp_path / "dest")
    assert {p.name: p.read_bytes() for p in dest.iterdir()} == entries
    assert hg.read_cache(tmp_path / "missing") == {}
    for bad in ("../x-cache", "a/b-cache", "x-atime", ".."):
        with pytest.raises(ValueError, match="entries: "):
            hg.write_cache({bad: b""}, tmp_path / "bad")
    with pytest.raises(FileExistsError):
        hg.write_cache({}, dest)


def test_the_warm_cache_comes_from_the_handout_beside_the_zip(tmp_path):
    """``trusted_notebook``: ``dist/student/<chapter>.ipynb`` for ``dist/autograder/*.zip`` (what
    ``make assign`` writes), never the solution notebook beside the zip; None without it or when
    it names another chapter."""
    import nbformat

    dist = tmp_path / "dist"
    (dist / "autograder").mkdir(parents=True)
    (dist / "student").mkdir()
    ag = dist / "autograder" / "setup-autograder.zip"
    ag.write_bytes(b"")
    nbformat.write(nbformat.v4.new_notebook(metadata={"homework": {"chapter": "setup"}}),
                   dist / "autograder" / "setup.ipynb")  # the solutions: not a candidate
    assert hg.trusted_notebook(ag, "setup") is None
    nbformat.write(nbformat.v4.new_notebook(metadata={"homework": {"chapter": "parity"}}),
                   dist / "student" / "setup.ipynb")
    assert hg.trusted_notebook(ag, "setup") is None
    nbformat.write(nbformat.v4.new_notebook(metadata={"homework": {"chapter": "setup"}}),
                   dist / "student" / "setup.ipynb")
    assert hg.trusted_notebook(ag, "setup") == (dist / "student" / "setup.ipynb").resolve()
    assert hg.trusted_notebook(ag, "parity") is None


PRIVATE_CACHE = r"""
import json, os, sys, time
nb_path, report = sys.argv[1:3]
start = time.time()
nb = json.load(open(nb_path))
role = next(line.split(":", 1)[1].strip() for c in nb["cells"]
            for line in "".join(c["source"]).splitlines() if line.startswith("# role:"))
cache = os.environ.get("JAX_COMPILATION_CACHE_DIR")
out = {"cache": cache, "cwd": os.getcwd(), "start": start}
out["seen"] = ({n: open(os.path.join(cache, n)).read() for n in sorted(os.listdir(cache))}
               if cache else None)
if role == "handout":  # the trusted run compiles two entries
    for name in ("jit_a-1-cache", "jit_b-2-cache"):
        with open(os.path.join(cache, name), "w") as f:
            f.write("compiled by the handout")
elif role == "attacker":  # plants a new entry and overwrites one of the handout's
    with open(os.path.join(cache, "jit_planted-9-cache"), "w") as f:
        f.write("planted")
    with open(os.path.join(cache, "jit_a-1-cache"), "w") as f:
        f.write("overwritten")
    out["after"] = {n: open(os.path.join(cache, n)).read() for n in sorted(os.listdir(cache))}
judges = []
for d in os.listdir("/proc"):
    try:
        if d.isdigit() and b"judge.py" in open(f"/proc/{d}/cmdline", "rb").read() and \
                os.getcwd().encode() in open(f"/proc/{d}/cmdline", "rb").read():
            judges.append(open(f"/proc/{d}/environ", "rb").read())
    except OSError:
        pass
out["judge_cache"] = [b"JAX_COMPILATION_CACHE_DIR=" in e for e in judges]
out["end"] = time.time()
with open(os.path.join(report, role + ".json"), "w") as f:
    json.dump(out, f)
"""


@pytest.mark.parametrize("namespaces", [
    pytest.param(True, marks=pytest.mark.skipif(
        not hg.namespaces_available(), reason="unshare cannot create namespaces here")),
    False], ids=["namespaces", "fallback"])
def test_a_submission_cannot_change_the_cache_another_one_starts_from(tmp_path, monkeypatch,
                                                                      namespaces):
    """Issue 16: the JAX cache is compiled code that kernels load. Through ``grade``, with the
    otter command replaced by a script that reports the cache it starts from: the handout
    (beside the autograder zip, as ``make assign`` writes it) runs first and compiles two
    entries; the attacker (graded first) plants a new entry and overwrites one of them in its
    cache folder, and succeeds there; the victim, graded after it, starts from exactly the
    handout's two entries, in a folder of its own run folder. The judges have no cache
    variable. Both with the namespaces and without them."""
    import sys

    import nbformat

    dist = tmp_path / "dist"
    (dist / "autograder").mkdir(parents=True)
    (dist / "student").mkdir()
    _, ag = _two_submissions(tmp_path, names=())
    ag = Path(ag.replace(dist / "autograder" / "setup-autograder.zip"))

    def notebook(role):
        return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"# role: {role}")],
                                        metadata={"homework": {"chapter": "setup"}})

    nbformat.write(notebook("handout"), dist / "student" / "setup.ipynb")
    subs = tmp_path / "subs"
    for student, role in (("ann", "attacker"), ("ben", "victim")):
        nbformat.write(notebook(role), subs / f"{student}.ipynb")
    report = tmp_path / "report"
    report.mkdir()
    script = tmp_path / "private_cache.py"
    script.write_text(PRIVATE_CACHE)
    monkeypatch.setattr(hg, "otter_command", lambda ag, out, nb: [
        sys.executable, str(script), str(nb), str(report)])
    if not namespaces:
        monkeypatch.setenv(hg.NAMESPACES_VAR, "0")
    monkeypatch.setattr(hg, "_namespaces", None)
    logged = []
    hg.grade(subs, out=tmp_path / "out", autograder=ag, docker="no", jobs=1, timeout=120,
             log=logged.append)
    got = {p.stem: json.loads(p.read_text()) for p in report.glob("*.json")}
    assert sorted(got) == ["attacker", "handout", "victim"]
    handout = {"jit_a-1-cache": "compiled by the handout",
               "jit_b-2-cache": "compiled by the handout"}
    assert got["handout"]["seen"] == {}
    assert any("JAX cache: 2 entries compiled by the handout" in line for line in logged)
    assert got["attacker"]["seen"] == handout
    assert got["attacker"]["after"] == {"jit_a-1-cache": "overwritten",
                                        "jit_b-2-cache": "compiled by the handout",
                                        "jit_planted-9-cache": "planted"}
    assert got["attacker"]["end"] < got["victim"]["start"]  # the attack came first
    assert got["victim"]["seen"] == handout
    for role, run in got.items():  # a folder of its own run folder; the judges: no cache
        assert Path(run["cache"]) == Path(run["cwd"]) / hg.CACHE_FOLDER, (role, run)
        assert run["judge_cache"] == ([] if namespaces else [False]), (role, run)


def _two_submissions(tmp_path, names=("ann", "ben")):
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in names:
        (subs / f"{name}.ipynb").write_text(json.dumps(_nb()))
    ag = tmp_path / "ag.zip"
    with zipfile.ZipFile(ag, "w") as z:
        z.writestr("tests/q.py", "points = 1\nverify('setup/symmetrize', env, 'f', seed=5)\n")
    return subs, ag


def test_one_submissions_failure_is_its_own_error_row(tmp_path, monkeypatch):
    subs, ag = _two_submissions(tmp_path)

    def run_local(sub, chapter, *args, **kwargs):
        if sub.student == "ann":
            raise ValueError("could not convert string to float: 'boom'")
        return hg.Row(sub.student, str(sub.origin), chapter, scores={"q": (1.0, 1.0)})

    monkeypatch.setattr(hg, "run_local", run_local)
    monkeypatch.setattr(hg, "_namespaces", True)
    rows, csv_path = hg.grade(subs, out=tmp_path / "out", autograder=ag, docker="no",
                              cache=False, jobs=2, log=lambda *a: None)
    got = {r.student: r for r in rows}
    assert got["ann"].status == "error" and "ValueError: could not convert" in got["ann"].notes
    assert got["ben"].status == "graded" and got["ben"].total == 1.0
    assert "ann" in csv_path.read_text()


def test_without_namespaces_a_warning_and_one_submission_at_a_time(tmp_path, monkeypatch):
    import threading
    import time

    subs, ag = _two_submissions(tmp_path, ("ann", "ben", "cy"))
    monkeypatch.setenv(hg.NAMESPACES_VAR, "0")
    monkeypatch.setattr(hg, "_namespaces", None)
    assert hg.namespaces_available() is False  # probed, then cached
    monkeypatch.delenv(hg.NAMESPACES_VAR)
    assert hg.namespaces_available() is False
    running, most, seen = [0], [0], []
    lock = threading.Lock()

    def run_local(sub, chapter, *args, isolate=None, **kwargs):
        seen.append(isolate)
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.3)
        with lock:
            running[0] -= 1
        return hg.Row(sub.student, str(sub.origin), chapter)

    monkeypatch.setattr(hg, "run_local", run_local)
    logged = []
    hg.grade(subs, out=tmp_path / "out", autograder=ag, docker="no", cache=False, jobs=3,
             log=logged.append)
    assert logged[0] == hg.NO_NAMESPACES and most[0] == 1 and seen == [False] * 3


def test_reap_orphans_kills_the_new_children_but_the_kept_ones():
    """``children`` lists the processes this one started (their pids from Popen, an independent
    record); ``reap_orphans`` kills and reaps the new ones except ``keep``."""
    import subprocess

    before = hg.children()
    kept, new = (subprocess.Popen(["sleep", "300"]) for _ in range(2))
    try:
        assert {kept.pid, new.pid} <= hg.children() and not {kept.pid, new.pid} & before
        assert hg.reap_orphans(before, keep={kept.pid}) == 1
        assert kept.poll() is None and not Path(f"/proc/{new.pid}").exists()  # reaped too
        assert hg.children() - before == {kept.pid}
    finally:
        kept.kill()
        kept.wait()


DETACHING = r'''
import os, shutil, sys
mark, cache_var = sys.argv[1:3]
if os.fork() == 0:  # the child: a session of its own, then the grandchild, then it exits
    os.setsid()
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.execve(shutil.which("sleep"), [mark, "300"], {})  # a clean environment
    os._exit(0)
os.wait()
def cmdline(d):
    try:
        return open(f"/proc/{d}/cmdline", "rb").read()
    except OSError:
        return b""
box = os.getcwd().encode()  # the run folder: its judge's socket is in it
judges = [d for d in os.listdir("/proc") if d.isdigit() and b"judge.py" in cmdline(d)
          and box in cmdline(d)]
judge_env = open(f"/proc/{judges[0]}/environ", "rb").read().split(b"\0")
print(f"judges {len(judges)}; own cache {cache_var in os.environ}; judge's cache "
      f"{any(v.startswith(cache_var.encode() + b'=') for v in judge_env)}", flush=True)
'''


def test_without_namespaces_a_detached_process_dies_after_the_run(tmp_path, monkeypatch):
    """Issue 16, gap 3: with namespaces off, a submission's command double-forks a ``sleep
    300`` in a session of its own with an empty environment (the process group's kill and the
    token's miss it); the grader, its subreaper, kills it after the run. The same run with
    ``reap_orphans`` switched off leaves it running (what the test would miss). The command
    also sees the JAX cache in its environment and none in its judge's (gap 1)."""
    import sys
    import tempfile
    import time

    import nbformat

    mark = f"krr-test-detached-{os.getpid()}"
    script = tmp_path / "detaching.py"
    script.write_text(DETACHING)
    monkeypatch.setenv(hg.NAMESPACES_VAR, "0")
    monkeypatch.setattr(hg, "_namespaces", None)
    monkeypatch.setattr(hg, "otter_command", lambda ag, out, nb: [
        sys.executable, str(script), mark, hg.CACHE_VARS[0]])
    sub = hg.Submission("ann", tmp_path / "ann.ipynb", tmp_path / "ann.ipynb",
                        nb=nbformat.from_dict(_nb()))

    def run():
        work = Path(tempfile.mkdtemp(dir=tmp_path))
        return hg._otter_run(sub, "setup", tmp_path / "ag.zip", work, timeout=120,
                             cell_timeout=10, memory=0, output_cap=10**6, cache={})

    try:
        with monkeypatch.context() as m:
            m.setattr(hg, "reap_orphans", lambda before, keep=(): 0)
            run()
        assert len(_marked(mark)) == 1  # without the reaping the detached process survives
        for pid in _marked(mark):
            os.kill(pid, 9)
            os.waitpid(pid, 0)  # our child: the grader (this process) is its subreaper
        out = run()
        assert "judges 1; own cache True; judge's cache False" in out["log"], out["log"]
        time.sleep(0.2)
        assert _marked(mark) == []
    finally:
        for pid in _marked(mark):
            os.kill(pid, 9)


needs_namespaces = pytest.mark.skipif(
    not hg.namespaces_available(), reason="unshare cannot create user, PID and mount namespaces")


@needs_namespaces
def test_the_namespace_probe_says_yes_here():
    assert hg._probe_namespaces() is True


INSIDE = r'''
import asyncio, json, os, signal, socket, sys
work, mine, other, judge_pid, port = sys.argv[1:6]
mark = os.environ["KRR_TEST_MARK"]
out = {"listing": sorted(os.listdir(work)), "pid": os.getpid()}
try:
    os.rename(os.path.join(other, "judge.sock"), os.path.join(other, "x.sock"))
    out["rename"] = "done"
except OSError as e:
    out["rename"] = type(e).__name__
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(os.path.join(other, "judge.sock"))
    out["connect"] = "done"
except OSError as e:
    out["connect"] = type(e).__name__
try:
    socket.create_connection(("127.0.0.1", int(port)), timeout=5).close()
    out["tcp"] = "done"
except OSError as e:
    out["tcp"] = type(e).__name__
out["judge_seen"] = any(mark.encode() in open(f"/proc/{d}/cmdline", "rb").read()
                        for d in os.listdir("/proc") if d.isdigit())
try:
    os.kill(int(judge_pid), signal.SIGKILL)
    out["kill"] = "done"
except OSError as e:
    out["kill"] = type(e).__name__
out["umount"] = os.system(f"umount {work} 2>/dev/null")
out["listing_after"] = sorted(os.listdir(work))
try:
    bytearray(3 * 2**30)
    out["memory"] = "allocated"
except MemoryError:
    out["memory"] = "MemoryError"
async def go():  # attack 6: detached, no token in its environment, a session of its own
    await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(600)  # " + mark + "-child",
        env={"PATH": os.environ.get("PATH", "")}, start_new_session=True,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL)
asyncio.run(go())
print(json.dumps(out))
'''


def _marked(mark):
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if mark.encode() in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
            except OSError:
                pass
    return found


@needs_namespaces
def test_a_submission_in_its_namespaces_cannot_reach_another_and_leaves_nothing(tmp_path):
    """Attacks 1, 5 and 6 in miniature: inside the namespaces of its run folder, a process
    cannot list, rename or connect to another run folder's judge socket, cannot see or kill
    that judge, cannot unmount what hides them; the memory limit holds; a child it detaches
    (clean environment, own session) dies with it."""
    import resource
    import socket
    import subprocess
    import sys
    import time

    mark = f"krr-test-judge-{os.getpid()}"
    work = tmp_path / "krr-grade-x"
    mine, other = work / "run-a", work / "run-b"
    mine.mkdir(parents=True)
    other.mkdir()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(other / "judge.sock"))
    server.listen(1)
    judge = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep(300)  # {mark}"])
    tcp = socket.socket()  # a port of the machine (another kernel's, say)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(1)
    script = mine / "inside.py"
    script.write_text(INSIDE)

    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    try:
        start = time.perf_counter()
        proc = subprocess.run(hg.namespace_command(work, mine, [
            sys.executable, str(script), str(work), str(mine), str(other), str(judge.pid),
            str(tcp.getsockname()[1])]),
            capture_output=True, text=True, timeout=120, preexec_fn=limits, cwd=mine,
            env={**os.environ, "KRR_TEST_MARK": mark})
        seconds = time.perf_counter() - start
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert out["listing"] == ["run-a"] and out["listing_after"] == ["run-a"]
        assert out["rename"] == "FileNotFoundError" and out["connect"] == "FileNotFoundError"
        assert out["judge_seen"] is False and out["kill"] == "ProcessLookupError"
        assert out["umount"] != 0 and out["memory"] == "MemoryError"
        assert out["pid"] < 100  # its own PID namespace
        assert out["tcp"] == ("ConnectionRefusedError" if hg._network else "done")
        assert judge.poll() is None and (other / "judge.sock").exists()
        time.sleep(0.5)
        assert _marked(f"{mark}-child") == []  # the detached child died with the namespace
        assert seconds < 30
    finally:
        judge.kill()
        judge.wait()
        server.close()
        tcp.close()
        for pid in _marked(f"{mark}-child"):
            os.kill(pid, 9)


HIDDEN_BUILD = r'''
import json, os, sys
hide, keep, work, box = sys.argv[1:5]
out = {"hide": sorted(os.listdir(hide)), "work": sorted(os.listdir(work))}
for name, path in (("master", os.path.join(hide, "assign", "setup", "master", "setup.ipynb")),
                   ("assign", os.path.join(hide, "assign")),
                   ("cached", os.path.join(keep, "entry-cache"))):
    try:
        out[name] = open(path).read() if name != "assign" else os.listdir(path)
    except OSError as e:
        out[name] = type(e).__name__
try:
    with open(os.path.join(keep, "planted-cache"), "w") as f:
        f.write("from the box")
    out["planted"] = "written"
except OSError as e:
    out["planted"] = type(e).__name__
with open(os.path.join(box, "out.txt"), "w") as f:
    f.write("run folder")
out["box"] = open(os.path.join(box, "out.txt")).read()
for name, path in (("pycache", os.path.join(hide, "..", "lib", "__pycache__", "lib.cpython.pyc")),
                   ("checkout", os.path.join(hide, "..", "planted.py"))):
    try:
        with open(path, "w") as f:
            f.write("code the judge would load")
        out[name] = "written"
    except OSError as e:
        out[name] = type(e).__name__
print(json.dumps(out))
'''


@needs_namespaces
@pytest.mark.parametrize("layout", ["apart", "work inside _build"])
def test_the_namespaces_hide_the_whole_build_folder(tmp_path, layout):
    """Issue 16, gap 2: inside the namespaces the checkout's ``_build`` (master notebooks with
    the solutions and seeds, autograder zips, the JAX cache folder of an earlier grader) is an
    empty folder: the master notebook cannot be read, ``assign/`` and the cache folder cannot
    be listed, nothing can be planted in the cache folder; the run folder works, also when the
    work folder is itself inside ``_build``; the rest of the checkout (``lib/__pycache__``:
    code the judge loads) cannot be written."""
    import subprocess
    import sys

    build = tmp_path / "checkout" / "_build"
    (tmp_path / "checkout" / "lib" / "__pycache__").mkdir(parents=True)
    master = build / "assign" / "setup" / "master" / "setup.ipynb"
    master.parent.mkdir(parents=True)
    master.write_text("the solutions")
    keep = build / "grade-cache" / "jax"
    keep.mkdir(parents=True)
    (keep / "entry-cache").write_text("compiled")
    work = (build / "tmp" if layout != "apart" else tmp_path) / "krr-grade-x"
    box = work / "run-a"
    box.mkdir(parents=True)
    (work / "run-b").mkdir()
    script = box / "inside.py"
    script.write_text(HIDDEN_BUILD)
    proc = subprocess.run(hg.namespace_command(work, box, [
        sys.executable, str(script), str(build), str(keep), str(work), str(box)],
        hide=build, readonly=(tmp_path / "checkout",)), capture_output=True,
        text=True, timeout=120, cwd=box)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # _build shows only the folders on the way to the run folder (when it is inside)
    assert out["hide"] == ([] if layout == "apart" else ["tmp"])
    assert out["master"] == "FileNotFoundError" and out["assign"] == "FileNotFoundError"
    assert out["cached"] == "FileNotFoundError" and out["planted"] == "FileNotFoundError"
    assert out["work"] == ["run-a"]
    assert out["box"] == "run folder" and (box / "out.txt").read_text() == "run folder"
    assert sorted(p.name for p in keep.iterdir()) == ["entry-cache"]  # nothing planted
    assert master.read_text() == "the solutions" and (work / "run-b").is_dir()
    assert out["pycache"] == "OSError" and out["checkout"] == "OSError"  # EROFS
    assert not list((tmp_path / "checkout" / "lib" / "__pycache__").iterdir())
    with pytest.raises(ValueError, match="readonly: "):
        hg.namespace_command(work, box, ["true"], readonly=(tmp_path / "missing",))


def test_a_child_dies_with_the_grader_even_one_that_died_first(tmp_path):
    """Attack 8: the judge is started with PR_SET_PDEATHSIG, and exits at once when the grader
    is gone before that took effect."""
    import subprocess
    import sys
    import time

    mark = f"krr-test-orphan-{os.getpid()}"  # built in the scripts: not in their own argv
    grader = subprocess.Popen([sys.executable, "-c", f"""
import os, subprocess, sys, time
sys.path.insert(0, {str(ROOT)!r})
import homework.grade as hg
me = os.getpid()
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)  # krr-test-orphan-"
                  + {str(os.getpid())!r}], start_new_session=True,
                 preexec_fn=lambda: hg._die_with(me))
print("started", flush=True)
time.sleep(300)
"""], stdout=subprocess.PIPE, text=True)
    assert grader.stdout.readline().strip() == "started"
    assert len(_marked(mark)) == 1
    grader.kill()
    grader.wait()
    for _ in range(50):
        if not _marked(mark):
            break
        time.sleep(0.1)
    assert _marked(mark) == []
    late = subprocess.Popen(["sleep", "300"], preexec_fn=lambda: hg._die_with(os.getpid() + 1))
    assert late.wait(timeout=10) == 1


def test_sigterm_stops_grading_and_cleans_up(tmp_path):
    """Attack 8: a grader stopped with SIGTERM kills its judges and notebooks and removes its
    work folder."""
    import signal
    import subprocess
    import sys
    import time

    subs, ag = _two_submissions(tmp_path)
    mark = f"krr-test-term-{os.getpid()}"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", f"""
import subprocess, sys
sys.path.insert(0, {str(ROOT)!r})
import homework.grade as hg
def run_local(sub, chapter, work, *args, **kwargs):
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)  # "
                          + "krr-test-term-" + {str(os.getpid())!r}], start_new_session=True)
    hg._live.add(p)
    p.wait()
    return hg.Row(sub.student, str(sub.origin), chapter)
hg.run_local = lambda s, c, ag, work, **k: run_local(s, c, work)
hg._namespaces = True
sys.exit(hg.main([{str(subs)!r}, "--autograder", {str(ag)!r}, "--docker", "no",
                  "--no-cache", "--out", {str(tmp_path / "out")!r}]))
"""], env={**os.environ, "TMPDIR": str(tmp)}, stderr=subprocess.PIPE, text=True)
    for _ in range(300):
        if _marked(mark):
            break
        time.sleep(0.1)
    assert len(_marked(mark)) == 1 and len(list(tmp.glob("krr-grade-*"))) == 1
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 2
    assert "stopped by signal" in proc.stderr.read()
    time.sleep(0.3)
    assert _marked(mark) == [] and list(tmp.glob("krr-grade-*")) == []
    assert not (tmp_path / "out" / "grades.csv").exists()


def test_a_missing_judge_socket_fails_at_once(tmp_path):
    import time

    start = time.monotonic()
    with pytest.raises(AssertionError, match="judge does not answer"):
        hidden.ask_judge({"op": "test"}, path=str(tmp_path / "gone.sock"))
    assert time.monotonic() - start < 10
