"""What the hidden otter tests call: a checker run on fresh inputs, compared with the reference
outside the student's kernel.

The hidden tests run in the kernel that just ran the student's notebook, so every module there
may have been patched by the notebook (``numpy.max``, ``lib.ntk.empirical_ntk``, the checker
registry, this very module in ``sys.modules``, ...). Three layers:

* the hidden test does not import this module: it executes this file's text afresh under a
  private name (a patched ``homework.hidden`` in ``sys.modules`` is never used);
* :func:`verify` loads its own copies of ``lib`` and of the checkers from their files and runs
  the checker in the kernel, **recording** every call to the student's answer (inputs, output);
* when that run passes, the record goes to a **reference process** (``homework/reference.py``,
  a fresh ``python -I`` started by the first hidden test, whose modules the notebook never
  touched), which runs the same checker with the same key on a replay of the recorded calls:
  its own inputs must equal the recorded ones and the recorded outputs must pass its own
  comparison. The test passes only if both runs pass.

An answer the checker traces with JAX (its arguments are tracers, e.g. ``parity/beyond-kernel``)
cannot be recorded: its check runs in the kernel only. None of this stops code that patches
otter, ``subprocess`` or ``builtins`` themselves: the grader's static scan flags those
(``homework/grade.py``), and ``chapters/instructors.md`` says what is and is not protected.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _locate_lib() -> Path:
    for base in (_HERE.parent, Path.cwd()):
        if (base / "lib" / "__init__.py").is_file():
            return base / "lib"
    spec = importlib.util.find_spec("lib")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the grader cannot find the course library lib")
    return Path(list(spec.submodule_search_locations)[0])


def _load_package(alias: str, folder: Path):
    spec = importlib.util.spec_from_file_location(
        alias, folder / "__init__.py", submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[alias] = module
    spec.loader.exec_module(module)
    return module


_FRESH = 0


def fresh_checks():
    """A private copy of ``homework.checks`` bound to a private copy of ``lib``."""
    import secrets

    global _FRESH
    _FRESH += 1
    tag = f"_krr_ref{_FRESH}_{secrets.token_hex(4)}"  # unique even when this file is re-executed
    saved = {k: v for k, v in sys.modules.items() if k == "lib" or k.startswith("lib.")}
    try:
        for k in saved:
            del sys.modules[k]
        ref_lib = _load_package(f"{tag}_lib", _locate_lib())
        sys.modules["lib"] = ref_lib  # the checkers' `from lib import ...` binds the copy
        for name, mod in list(sys.modules.items()):
            if name.startswith(f"{tag}_lib."):
                sys.modules["lib." + name.split(".", 1)[1]] = mod
        checks = _load_package(f"{tag}_checks", _HERE / "checks")
    finally:
        for k in [k for k in sys.modules if k == "lib" or k.startswith("lib.")]:
            del sys.modules[k]
        sys.modules.update(saved)
    return checks


def is_stub(answer) -> bool:
    """Whether ``answer`` is still the handed-out stub: ``...`` or ``None``, or a function whose
    body (after its docstring) is only ``...``, ``pass`` or ``raise NotImplementedError``.

    A function whose source cannot be read (a lambda typed elsewhere, a builtin) is not a stub.
    """
    import ast
    import inspect
    import textwrap

    if answer is ... or answer is None:
        return True
    if not callable(answer):
        return False
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(answer)))
        fn = tree.body[0]
        body = list(fn.body)
    except (OSError, TypeError, SyntaxError, IndexError, AttributeError):
        return False
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0].value, "value",
                                                                     None), str):
        body = body[1:]  # the docstring
    if len(body) != 1:
        return False
    (stmt,) = body
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return stmt.value.value is Ellipsis
    if isinstance(stmt, ast.Raise) and stmt.exc is not None:
        exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


@contextlib.contextmanager
def _forbidden(names):
    """Make ``module:attr`` entries raise while the answer runs (the student's modules)."""
    import importlib

    saved = []

    def refuse(*args, **kwargs):
        raise RuntimeError("this exercise asks you to compute it yourself, without "
                           "this library function")

    for entry in names or []:
        mod_name, attr = entry.split(":")
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        if hasattr(mod, attr):
            saved.append((mod, attr, getattr(mod, attr)))
            setattr(mod, attr, refuse)
    try:
        yield
    finally:
        for mod, attr, value in saved:
            setattr(mod, attr, value)


def _plain(value, np):
    """jax arrays as numpy arrays, recursively; raises TypeError on a JAX tracer."""
    if isinstance(value, tuple | list):
        return type(value)(_plain(v, np) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v, np) for k, v in value.items()}
    if type(value).__module__.startswith(("jax", "jaxlib")):
        if "Tracer" in type(value).__name__:
            raise TypeError("traced")
        return np.asarray(value)
    return value


def _source(answer):
    import inspect
    import textwrap

    try:
        return textwrap.dedent(inspect.getsource(answer))
    except (OSError, TypeError):
        return None


def _reference_process():
    """The reference process of this kernel (started once, kept in a private module)."""
    import subprocess
    import types

    holder = sys.modules.get("_krr_reference_process")
    if holder is None:
        holder = types.ModuleType("_krr_reference_process")
        holder.proc = None
        sys.modules["_krr_reference_process"] = holder
    if holder.proc is None or holder.proc.poll() is not None:
        holder.proc = subprocess.Popen(
            [sys.executable, "-I", str(_HERE / "reference.py"), str(_HERE.parent)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True)
    return holder.proc


def _compare_outside(exercise: str, seed: int, record: dict) -> tuple[bool, str]:
    import json
    import os
    import pickle
    import tempfile

    fd, path = tempfile.mkstemp(prefix="krr-record-", suffix=".pkl")
    try:
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(record, f)
        except Exception as err:  # noqa: BLE001 (an output that is not plain data)
            return False, (f"the grader could not record what your function returned "
                           f"({type(err).__name__}): return arrays or numbers")
        proc = _reference_process()
        proc.stdin.write(json.dumps({"exercise": exercise, "seed": seed, "record": path}) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            return False, "the grader's reference process stopped (ask your instructor)"
        answer = json.loads(line)
        return bool(answer.get("ok")), str(answer.get("hint", ""))
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


def verify(exercise: str, env: dict, answer_expr: str, *, seed: int, forbid=None) -> None:
    """Run the checker of ``exercise`` on the answer ``answer_expr`` (evaluated in the
    notebook's globals ``env``) with inputs drawn from ``jax.random.key(seed)``.

    Raises:
        AssertionError: with the checker's hint when the answer fails, "not attempted" when the
            answer is still the stub's value (``None``, ``...``, a body ``...``, ``pass`` or
            ``raise NotImplementedError``: :func:`is_stub`), and "the answer calls a library
            function the exercise forbids" when ``forbid`` entries were used.
    """
    import jax

    try:
        answer = eval(answer_expr, dict(env))  # noqa: S307 (an expression of the chapter)
    except NameError:
        raise AssertionError(f"{answer_expr} is not defined (cell deleted or renamed?)") from None
    except Exception as err:  # noqa: BLE001
        raise AssertionError(f"{answer_expr} raised {type(err).__name__}: {err}") from None
    checks = fresh_checks()
    if exercise not in checks._REGISTRY:
        raise AssertionError(f"no checker for {exercise}")
    if is_stub(answer):  # the blank notebook's answer: say so, not "has shape ()"
        raise AssertionError("not attempted: replace the ... of the answer cell by your answer")
    checker = checks._REGISTRY[exercise]
    record = {"calls": [], "source": _source(answer) if callable(answer) else None,
              "replayable": True}
    if callable(answer):
        import functools

        import numpy as np

        student = answer

        @functools.wraps(student)  # keeps the source readable (inspect follows __wrapped__)
        def answer(*args, **kwargs):
            try:
                out = student(*args, **kwargs)
            except BaseException as err:
                _record(args, kwargs, "raise", (type(err).__name__, str(err)[:300]))
                raise
            _record(args, kwargs, "return", out)
            return out

        def _record(args, kwargs, kind, out):
            try:
                record["calls"].append((_plain(args, np), _plain(kwargs, np), kind,
                                        _plain(out, np) if kind == "return" else out))
            except TypeError:  # traced by JAX: checked in the kernel only
                record["replayable"] = False
    if forbid and callable(answer):
        import functools

        inner = answer

        @functools.wraps(inner)  # keeps the source readable (inspect follows __wrapped__)
        def answer(*args, **kwargs):
            with _forbidden(forbid):
                return inner(*args, **kwargs)

    try:
        checker(answer, jax.random.key(seed))
    except NotImplementedError:
        raise AssertionError("not attempted: replace the ... of the answer cell by your "
                             "answer") from None
    except checks.CheckFailed as err:
        raise AssertionError(f"fails: {err}") from None
    except AssertionError:
        raise
    except Exception as err:  # noqa: BLE001 (the answer raised)
        raise AssertionError(f"your code raised {type(err).__name__}: {err}") from None
    if record["replayable"] and record["calls"]:
        ok, hint = _compare_outside(exercise, seed, record)
        if not ok:
            raise AssertionError(hint)


def load_verify(folder=None):
    """:func:`verify` from a fresh execution of this file (not from ``sys.modules``): what the
    hidden tests call. ``folder`` holds ``homework/hidden.py`` (default: found from the current
    directory and ``sys.path``)."""
    import os

    for base in ([folder] if folder else [os.getcwd(), *sys.path]):
        path = os.path.join(base or ".", "homework", "hidden.py")
        if os.path.isfile(path):
            break
    else:
        raise AssertionError("the grader cannot find homework/hidden.py")
    path = os.path.abspath(path)
    namespace = {"__name__": "_krr_hidden_fresh", "__file__": path}
    with open(path, "rb") as f:
        exec(compile(f.read(), path, "exec"), namespace)  # noqa: S102
    return namespace["verify"]
