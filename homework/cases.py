"""Submissions that exercise the grader: honest, blank, broken and cheating, with their scores.

``write_cases(assign_dist, folder)`` writes them from the setup chapter's ``otter assign``
output (the solution notebook in ``dist/autograder`` and the student notebook in
``dist/student``) and returns ``{student: expected}`` where ``expected`` is ``{"status": ...,
"points": {question: points}}`` (and, for a notebook the static scan flags, ``"otter"``:
the points otter gave, withheld until the instructor reviews it); a status is matched as a
prefix ("unreadable: not a notebook" matches "unreadable: not a notebook (NotJSONError: ...)").
``SKIPPED`` lists the files that are not submissions (a CSV row each, no feedback). Used by
``tests/test_grading.py`` and ``scripts/bench_grading.py``; a folder of them is also a
demonstration for instructors.
"""

from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path

NTK, SYM, GD = "setup_ex_ntk_linear", "setup_ex_symmetrize", "setup_ex_gd_least_squares"
FULL = {NTK: 3.0, SYM: 2.0, GD: 3.0}
ZERO = {NTK: 0.0, SYM: 0.0, GD: 0.0}

SKIPPED = ["grace/notes.txt"]

# A process a submission starts in a session of its own: the grader must kill it.
ESCAPE_MARK = "krr-escaped-child-7f3a"

CELLS = {
    # replaces the checkers' registry and the reload, then answers with zeros
    "registry": """\
import importlib, sys
try:
    import homework.checks as _c
    for _k in list(_c._REGISTRY):
        _c._REGISTRY[_k] = lambda answer, key: None
except ImportError:
    pass
importlib.reload = lambda module: module
""",
    # rewrites every JSON record the grader might write (this breaks the kernel's own
    # messages: otter gets no result, the row says "error" with 0 points)
    "json": """\
import json
json.dumps = lambda *a, **k: '{"score": 100, "status": "passes"}'
""",
    # makes lib's tangent kernel return zeros, so that zeros "agree" with it
    "zeros_ntk": """\
import jax.numpy as jnp
import lib, lib.ntk
def _zeros(f, params, x1, x2=None, **kwargs):
    x2 = x1 if x2 is None else x2
    return jnp.zeros((x1.shape[0], x2.shape[0]))
lib.ntk.empirical_ntk = lib.empirical_ntk = _zeros
""",
    # replaces the hidden tests' verifier in sys.modules (answers 0): the hidden tests execute
    # homework/hidden.py afresh, so this changes nothing (and the scan flags it)
    "verifier": """\
try:
    import homework.hidden as _h
    _h.verify = lambda *a, **k: None
except ImportError:
    pass
""",
    # makes numpy.max return 0, so that assert_close's max |got - want| is 0 in the kernel: the
    # comparison in the reference process (a fresh Python) rejects the zeros
    "numpy_max": """\
import numpy
numpy.max = lambda *a, **k: 0.0
""",
    "runaway": """\
while True:
    try:
        sum(range(10**6))
    except KeyboardInterrupt:
        pass
""",
    "escape": f"""\
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)  # {ESCAPE_MARK}"],
                 start_new_session=True)
""",
    "flood": """\
for _ in range(15000):
    print("x" * 100000)
""",
    # kills its own kernel (as a segfault or the out-of-memory killer would)
    "kernel_killer": """\
import os, signal
os.kill(os.getpid(), signal.SIGKILL)
""",
}


def _code(source):
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
            "execution_count": None}


def _answer_index(nb, name):
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] == "code" and f"def {name}(" in "".join(c["source"]):
            return i
    raise KeyError(name)


def _set_answer(nb, name, source):
    nb["cells"][_answer_index(nb, name)]["source"] = source


def _insert_after_setup(nb, source):
    # after the chapter's set-up cell (the first code cell importing lib), before any answer
    i = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
             and "import lib" in "".join(c["source"]))
    nb["cells"].insert(i + 1, _code(source))


def write_cases(dist: str | Path, folder: str | Path, *, slow: bool = True) -> dict:
    """Write the case submissions into ``folder``; return the expected outcome of each."""
    dist, folder = Path(dist), Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    solved = json.loads(next((dist / "autograder").glob("*.ipynb")).read_text())
    blank = json.loads(next((dist / "student").glob("*.ipynb")).read_text())
    expected: dict[str, dict] = {}

    def put(name, nb, points, status="graded", path=None, otter=None):
        target = folder / (path or f"{name}.ipynb")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(nb))
        expected[name] = {"status": status, "points": dict(points)}
        if otter is not None:
            expected[name]["otter"] = dict(otter)

    put("correct", solved, FULL)
    put("blank", blank, ZERO)
    put("alice", solved, FULL, path="alice/Setup.IPYNB")  # per-student folder, upper case
    # otter's zip export
    with zipfile.ZipFile(folder / "bob.zip", "w") as z:
        z.writestr("setup.ipynb", json.dumps(solved))
        z.writestr("setup.otter", "{}")
    expected["bob"] = {"status": "graded", "points": dict(FULL)}

    nb = copy.deepcopy(blank)
    _insert_after_setup(nb, CELLS["registry"])
    for name in ("ntk_linear_two_layer", "symmetrize", "gd_least_squares"):
        src = "".join(nb["cells"][_answer_index(nb, name)]["source"])
        _set_answer(nb, name, src.replace("...", "return 0"))
    put("cheat_registry", nb, ZERO, status="flagged", otter=ZERO)

    nb = copy.deepcopy(blank)
    _insert_after_setup(nb, CELLS["verifier"])
    for name in ("ntk_linear_two_layer", "symmetrize", "gd_least_squares"):
        src = "".join(nb["cells"][_answer_index(nb, name)]["source"])
        _set_answer(nb, name, src.replace("...", "return 0"))
    put("cheat_verifier", nb, ZERO, status="flagged: imports homework", otter=ZERO)

    nb = copy.deepcopy(blank)
    _insert_after_setup(nb, CELLS["numpy_max"])
    _set_answer(nb, "ntk_linear_two_layer", "def ntk_linear_two_layer(U, v, x1, x2):\n"
                "    return jnp.zeros((x1.shape[0], x2.shape[0]))\n")
    _set_answer(nb, "symmetrize", "def symmetrize(a, B):\n"
                "    return jnp.zeros(2 * a.shape[0]), jnp.zeros((2 * B.shape[0], B.shape[1]))\n")
    _set_answer(nb, "gd_least_squares", "def gd_least_squares(X, y, eta, k):\n"
                "    return jnp.zeros(X.shape[1])\n")
    put("cheat_numpy", nb, ZERO, status="flagged: assigns numpy.max", otter=ZERO)

    # a SyntaxError in an answer cell: the feedback names the cell and the line
    nb = copy.deepcopy(solved)
    _set_answer(nb, "ntk_linear_two_layer", "def ntk_linear_two_layer(U, v, x1, x2):\n"
                "    return (x1 @ U.T) @ (U @ x2.T) + (v @ v) * (x1 @ x2.T\n")
    put("syntax_error", nb, {**FULL, NTK: 0.0})

    # one student, two files (a notebook and a zip): two rows with a note; a text file beside
    # them is not a submission (a "skipped" line in the CSV and the console)
    put("grace", solved, FULL, path="grace/setup.ipynb")
    with zipfile.ZipFile(folder / "grace" / "bob.zip", "w") as z:
        z.writestr("setup.ipynb", json.dumps(solved))
    expected["grace-2"] = {"status": "graded", "points": dict(FULL)}
    (folder / "grace" / "notes.txt").write_text("my notes\n")

    # the export cell run without a browser: a zip that does not open
    (folder / "broken.zip").write_bytes(b"PK\x03\x04" + b"\0" * 20)
    expected["broken"] = {"status": "unreadable: broken zip (re-export)", "points": dict(ZERO)}

    nb = copy.deepcopy(blank)
    _insert_after_setup(nb, CELLS["json"])
    put("cheat_json", nb, ZERO, status="flagged: assigns json.dumps", otter=ZERO)  # (error)

    nb = copy.deepcopy(solved)
    _insert_after_setup(nb, CELLS["zeros_ntk"])
    _set_answer(nb, "ntk_linear_two_layer",
                "def ntk_linear_two_layer(U, v, x1, x2):\n"
                "    return jnp.zeros((x1.shape[0], x2.shape[0]))\n")
    put("cheat_zeros", nb, ZERO, status="flagged: assigns lib.ntk.empirical_ntk",
        otter={**FULL, NTK: 0.0})

    nb = copy.deepcopy(solved)
    _set_answer(nb, "ntk_linear_two_layer",
                "def ntk_linear_two_layer(U, v, x1, x2):\n"
                "    f = lambda p, x: p['v'] @ (p['U'] @ x)\n"
                "    return lib.empirical_ntk(f, {'U': U, 'v': v}, x1, x2)\n")
    put("uses_lib", nb, {**FULL, NTK: 2.0})  # right values, but the forbidden shortcut

    nb = copy.deepcopy(solved)
    _set_answer(nb, "symmetrize", "def symmetrize(a, B):\n"
                "    jnp.concatenate([a, -a]), jnp.concatenate([B, B])\n")
    put("no_return", nb, {**FULL, SYM: 0.0})

    nb = copy.deepcopy(blank)
    nb["metadata"]["homework"] = {"chapter": "lazy_training"}
    nb["metadata"]["otter"] = {"assignment_name": "lazy_training"}
    put("other_chapter", nb, ZERO, status="wrong chapter: lazy_training")

    (folder / "garbage.ipynb").write_text("this is not a notebook {")
    expected["garbage"] = {"status": "unreadable: not a notebook", "points": dict(ZERO)}

    if slow:
        for case in ("runaway", "escape", "flood", "kernel_killer"):
            nb = copy.deepcopy(solved)
            nb["cells"].insert(len(nb["cells"]) - 2, _code(CELLS[case]))
            # the kernel killer's cell is removed and the notebook graded again: full points;
            # the escape imports subprocess: flagged, its points withheld until review
            if case == "escape":
                put(case, nb, ZERO, status="flagged: imports subprocess", otter=FULL)
            else:
                put(case, nb, FULL, status="kernel died" if case == "kernel_killer" else "graded")
    return expected
