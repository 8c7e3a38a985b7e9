"""What the hidden otter tests call: a checker run on fresh inputs, with fresh references.

The hidden tests run in the kernel that just ran the student's notebook. So that a cell of that
notebook cannot change the references (replace ``lib.ntk.empirical_ntk``, the checker registry,
``importlib.reload``, ...), :func:`verify` loads its own copies of ``lib`` and of the checkers
from their files, under private module names, each time it is called, and compares the answer
with them. This protects the references from monkeypatching, not against a determined
attacker in the same process (who can also patch otter itself): see ``chapters/instructors.md``.
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
    global _FRESH
    _FRESH += 1
    tag = f"_krr_ref{_FRESH}"
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
