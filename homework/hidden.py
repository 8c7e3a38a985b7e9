"""What the hidden otter tests call: the student's side of a check judged outside the kernel.

The hidden tests run in the kernel that just ran the student's notebook, where everything may
have been patched (``numpy.max``, otter, this file on disk, the frames of any function). So the
verdict is not computed there: a **judge** (``homework/judge.py``, a fresh ``python -I``) runs
the checker, and every call the checker makes to the student's answer becomes a request to the
kernel over a Unix socket, in JSON (arrays as ``{dtype, shape, data}``; no pickle anywhere).
The kernel evaluates the student's function and answers in JSON; the reference values never
exist in the kernel.

* ``make grade`` starts the judge per submission from the instructor's checkout and gives its
  socket in ``KRR_JUDGE_SOCKET``; the judge's verdicts go to the grader over the judge's stdout
  (a pipe the kernel does not hold) and replace otter's in-kernel results for the hidden tests.
  The grader also tells the judge which keys exist and the answers' source read from the
  notebook: the ``kind``, ``source`` and repeated requests a kernel sends cannot change that.
* ``otter run`` on the autograder zip alone (Gradescope): no ``KRR_JUDGE_SOCKET``; the first
  hidden test starts a judge from the autograder's copy and the verdict comes back to the
  kernel, where otter counts it (the notebook can tamper with that: see the instructors page).

What the kernel still decides, and can only decide against itself: "not attempted", a name not
defined, and the own-code points (a forbidden library function reached at run time, or found
by identity in the answer's defaults, closure cells or globals: :func:`forbidden_objects`, or
reached by its code object under any name: the profile hook of :func:`_forbidden`).
An answer the checker traces with JAX (:data:`IN_KERNEL`, e.g. ``parity/beyond-kernel``) cannot
be sent as JSON: its check runs in the kernel, as before, and counts as otter says.
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


# --------------------------------------------------------------------------------------------
# The wire format: JSON values, arrays as {dtype, shape, data}; no pickle, no code
# --------------------------------------------------------------------------------------------

SOCKET_VAR = "KRR_JUDGE_SOCKET"
IN_KERNEL = {"parity/beyond-kernel"}  # the checker traces the answer with JAX (jax.grad, vmap)
MAX_LINE = 64 * 2**20  # one message; an answer larger than this fails


class Traced(TypeError):
    """An argument or output that is a JAX tracer (it cannot be sent)."""


def encode(value):
    """``value`` as JSON data: numbers, strings, None, lists; ``{"tuple": [...]}``,
    ``{"dict": {...}}`` (string keys) and ``{"array": {"dtype", "shape", "data"}}`` (numpy and
    JAX arrays and scalars; ``data`` a flat list of numbers, ``[re, im]`` pairs if complex).

    Raises:
        Traced: a JAX tracer; TypeError: anything else (a function, an object, ...).
    """
    import numpy as np

    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) is tuple:
        return {"tuple": [encode(v) for v in value]}
    if type(value) is list:
        return [encode(v) for v in value]
    if type(value) is dict:
        if not all(type(k) is str for k in value):
            raise TypeError("a dict whose keys are not strings")
        return {"dict": {k: encode(v) for k, v in value.items()}}
    if "Tracer" in type(value).__name__:
        raise Traced("a JAX tracer")
    if isinstance(value, np.ndarray | np.generic) or type(value).__module__.startswith(
            ("jax", "jaxlib")):
        arr = np.asarray(value)
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"an array of {arr.dtype}")
        flat = arr.ravel()
        data = ([[float(z.real), float(z.imag)] for z in flat.tolist()]
                if arr.dtype.kind == "c" else flat.tolist())
        return {"array": {"dtype": arr.dtype.name, "shape": list(arr.shape), "data": data}}
    raise TypeError(f"a {type(value).__name__}")


def decode(data, asarray=None):
    """The value :func:`encode` wrote (arrays as numpy arrays, or through ``asarray``).

    Raises:
        ValueError: data that :func:`encode` does not write.
    """
    import numpy as np

    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is list:
        return [decode(v, asarray) for v in data]
    if type(data) is dict and len(data) == 1:
        (tag, body), = data.items()
        if tag == "tuple" and type(body) is list:
            return tuple(decode(v, asarray) for v in body)
        if tag == "dict" and type(body) is dict:
            return {str(k): decode(v, asarray) for k, v in body.items()}
        if tag == "array" and type(body) is dict:
            dtype = np.dtype(str(body.get("dtype")))
            shape = tuple(int(n) for n in body.get("shape", ()))
            flat = body.get("data")
            if dtype.kind not in "biufc" or type(flat) is not list or any(n < 0 for n in shape):
                raise ValueError("a malformed array")
            if dtype.kind == "c":
                if not all(type(z) is list and len(z) == 2 and all(type(t) in (int, float)
                                                                   for t in z) for z in flat):
                    raise ValueError("a malformed complex array")
                flat = [complex(z[0], z[1]) for z in flat]
            elif not all(type(x) in (bool, int, float) for x in flat):
                raise ValueError("an array with entries that are not numbers")
            arr = np.array(flat, dtype=dtype).reshape(shape)
            return asarray(arr) if asarray is not None else arr
    raise ValueError(f"unexpected data of type {type(data).__name__}")


def send(stream, message: dict) -> None:
    import json

    stream.write(json.dumps(message).encode() + b"\n")
    stream.flush()


def receive(stream) -> dict | None:
    """The next message, or None when the other side closed the connection."""
    import json

    line = stream.readline(MAX_LINE + 1)
    if not line:
        return None
    if len(line) > MAX_LINE:
        raise ValueError("a message larger than the grader accepts")
    message = json.loads(line)
    if type(message) is not dict:
        raise ValueError("a message that is not a JSON object")
    return message


# --------------------------------------------------------------------------------------------
# Own-code points: forbidden objects, at run time and by identity
# --------------------------------------------------------------------------------------------

AUTODIFF = ["jax:grad", "jax:jacrev", "jax:jacfwd", "jax:jacobian", "jax:vjp", "jax:jvp",
            "jax:linearize", "jax:hessian", "jax:value_and_grad"]


def _targets(names):
    import importlib

    found = []
    for entry in names or []:
        mod_name, attr = entry.split(":")
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        if hasattr(mod, attr):
            found.append((entry, getattr(mod, attr)))
    return found


def _foreign_code(code) -> bool:
    """Whether a code object comes from an installed package, the standard library or the
    course's ``lib`` (not the student's own code)."""
    import sysconfig

    filename = code.co_filename or ""
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.add(str(_HERE.parent / "lib"))
    return any(r and filename.startswith(r) for r in roots)


def forbidden_objects(answer, names) -> list[str]:
    """The ``module:attr`` entries of ``names`` whose object the answer holds: in its defaults,
    keyword defaults, closure cells, the globals its code names, ``__wrapped__``, partials,
    bound methods and containers, recursively through the student's own functions. Catches
    ``def f(x, _jr=jax.jacrev)``, which the run-time patch of ``jax.jacrev`` does not see."""
    import functools
    import types

    targets = _targets(names)
    hits: list[str] = []
    seen: set[int] = set()

    def names_of(code):
        out = set(code.co_names)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                out |= names_of(const)
        return out

    def visit(obj, depth=0):
        if depth > 40 or id(obj) in seen or isinstance(obj, types.ModuleType):
            return
        seen.add(id(obj))
        for entry, target in targets:
            if obj is target:
                hits.append(entry)
                return
        if isinstance(obj, functools.partial):
            for v in (obj.func, *obj.args, *obj.keywords.values()):
                visit(v, depth + 1)
        elif isinstance(obj, types.MethodType):
            visit(obj.__func__, depth + 1)
            visit(obj.__self__, depth + 1)
        elif isinstance(obj, list | tuple | set | frozenset):
            for v in list(obj)[:1000]:
                visit(v, depth + 1)
        elif isinstance(obj, dict):
            for v in list(obj.values())[:1000]:
                visit(v, depth + 1)
        elif isinstance(obj, types.FunctionType):
            if _foreign_code(obj.__code__):
                return
            for v in (obj.__defaults__ or ()):
                visit(v, depth + 1)
            for v in (obj.__kwdefaults__ or {}).values():
                visit(v, depth + 1)
            for cell in obj.__closure__ or ():
                try:
                    visit(cell.cell_contents, depth + 1)
                except ValueError:  # an empty cell
                    pass
            glob = obj.__globals__
            for name in sorted(names_of(obj.__code__)):
                if name in glob:
                    visit(glob[name], depth + 1)
            if "__wrapped__" in vars(obj):
                visit(vars(obj)["__wrapped__"], depth + 1)
        elif callable(obj) and not isinstance(obj, type | types.BuiltinFunctionType):
            call = vars(type(obj)).get("__call__")
            if isinstance(call, types.FunctionType):
                visit(call, depth + 1)
                visit(getattr(obj, "__dict__", {}), depth + 1)

    visit(answer)
    return list(dict.fromkeys(hits))


OWN_CODE_HINT = ("this exercise asks you to compute it yourself, without this library function "
                 "(your function calls it or holds it)")


def _refuse(names):
    def refuse(*args, **kwargs):
        raise RuntimeError(OWN_CODE_HINT)

    saved = [(__import__("importlib").import_module(e.split(":")[0]), e.split(":")[1], obj)
             for e, obj in _targets(names)]
    for mod, attr, _ in saved:
        setattr(mod, attr, refuse)
    return saved


def forbidden_codes(names) -> dict:
    """code object -> ``module:attr`` for each forbidden function of ``names``: the code of the
    function at the end of its ``__wrapped__`` chain (:func:`inspect.unwrap`), which every call
    reaches, and of the wrappers on the way that are not closures. A closure wrapper (a
    decorator's ``def wrapper(*args)`` around ``fun``, e.g. ``jax``'s ``api_boundary``) shares
    its code with every function it decorates (``jax.jit`` too): it is left out."""
    codes = {}
    for entry, obj in _targets(names):
        seen = set()
        while obj is not None and id(obj) not in seen:
            seen.add(id(obj))
            code = getattr(obj, "__code__", None)
            inner = vars(obj).get("__wrapped__") if hasattr(obj, "__dict__") else None
            if code is not None and (inner is None or not code.co_freevars):
                codes[code] = entry
            obj = inner
    return codes


class _Refused(RuntimeError):
    pass


@contextlib.contextmanager
def _forbidden(names):
    """Make ``module:attr`` entries raise while the answer runs: the module attributes are
    replaced, and a ``sys.setprofile`` hook raises on a call of the forbidden functions' CODE
    (:func:`forbidden_codes`), whatever name reached it (``jax._src.api.jacrev``, an object's
    attribute, a namespace, ``getattr`` with a string). The previous hook is restored after."""
    codes = forbidden_codes(names)  # before the attributes are replaced
    saved = _refuse(names)
    previous = sys.getprofile()

    hits = []

    def hook(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            hits.append(codes[frame.f_code])
            sys.setprofile(None)  # a hook that raised is dropped by Python anyway
            raise _Refused(OWN_CODE_HINT)

    if codes:
        sys.setprofile(hook)
    try:
        yield
        if hits:  # the answer caught the refusal (and Python dropped the hook): still refused
            raise _Refused(OWN_CODE_HINT)
    finally:
        if codes:
            sys.setprofile(previous)
        for mod, attr, value in saved:
            setattr(mod, attr, value)


# --------------------------------------------------------------------------------------------
# The kernel's side: answer the judge's calls
# --------------------------------------------------------------------------------------------


def _source(answer):
    """The source of ``answer``'s own code object (``inspect.getsource`` of the function would
    follow ``__wrapped__`` to a decoy), or None."""
    import inspect
    import textwrap

    try:
        return textwrap.dedent(inspect.getsource(answer.__code__))
    except (OSError, TypeError, AttributeError):
        return None


def _start_judge() -> str:
    """The socket of a judge started from this folder's ``homework/judge.py`` (the ``otter run``
    path without ``make grade``), started once per kernel."""
    import os
    import subprocess
    import tempfile
    import types

    holder = sys.modules.get("_krr_judge")
    if holder is None or holder.proc.poll() is not None:
        folder = tempfile.mkdtemp(prefix="krr-judge-")
        path = os.path.join(folder, "judge.sock")
        holder = types.ModuleType("_krr_judge")
        holder.path = path
        holder.proc = subprocess.Popen(
            [sys.executable, "-I", str(_HERE / "judge.py"), str(_HERE.parent), path],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sys.modules["_krr_judge"] = holder
    return holder.path


def _connect(path: str, wait: float = 300.0):
    import socket
    import time

    deadline = time.monotonic() + wait
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except OSError as err:
            sock.close()
            if not isinstance(err, FileNotFoundError):  # a judge that stopped: no waiting
                raise AssertionError(f"the grader's judge does not answer ({err}): ask your "
                                     "instructor") from None
            if time.monotonic() > deadline:
                raise AssertionError("the grader's judge does not answer (ask your "
                                     "instructor)") from None
            time.sleep(0.2)


def ask_judge(request: dict, answer=None, forbid=None, path: str | None = None):
    """Send one hidden test to the judge and answer its calls with ``answer``; returns
    ``(ok, hint)``. A ``request`` with ``"refused"`` is a failure the kernel found itself."""
    import os

    try:
        import jax.numpy as jnp
        asarray = jnp.asarray
    except ImportError:  # pragma: no cover
        asarray = None
    given = path or os.environ.get(SOCKET_VAR)
    # the grader starts its judge and waits for the socket before the notebook runs: a missing
    # socket then means the judge is gone, not starting (no 300 s wait per test)
    sock = _connect(given, wait=2.0) if given else _connect(_start_judge())
    stream = sock.makefile("rwb")
    try:
        send(stream, request)
        while True:
            message = receive(stream)
            if message is None:
                return False, "the grader's judge stopped (ask your instructor)"
            if message.get("op") == "verdict":
                return bool(message.get("ok")), str(message.get("hint", ""))
            try:
                args = decode(message.get("args"), asarray)
                kwargs = decode(message.get("kwargs"), asarray)
                with _forbidden(forbid):
                    out = answer(*args, **kwargs)
            except (Exception, SystemExit) as err:  # noqa: BLE001 (the answer raised)
                reply = {"raise": [type(err).__name__, str(err)[:300]]}
            else:
                try:
                    reply = {"value": encode(out)}
                except TypeError as err:
                    reply = {"raise": ["TypeError", "the grader could not read what your "
                                       f"function returned ({err}): return arrays or numbers"]}
            try:
                send(stream, reply)
            except OSError:
                pass  # the judge gave up waiting: its verdict is the next message
    finally:
        stream.close()
        sock.close()


def _check_in_kernel(exercise, answer, seed, forbid):
    """The check of an answer the checker traces with JAX (:data:`IN_KERNEL`), in the kernel."""
    import jax

    checks = fresh_checks()
    if forbid and callable(answer):
        import functools

        inner = answer

        @functools.wraps(inner)
        def answer(*args, **kwargs):
            with _forbidden(forbid):
                return inner(*args, **kwargs)

    try:
        checks._REGISTRY[exercise](answer, jax.random.key(seed))
    except NotImplementedError:
        raise AssertionError("not attempted: replace the ... of the answer cell by your "
                             "answer") from None
    except checks.CheckFailed as err:
        raise AssertionError(f"fails: {err}") from None
    except Exception as err:  # noqa: BLE001 (the answer raised)
        raise AssertionError(f"your code raised {type(err).__name__}: {err}") from None


def verify(exercise: str, env: dict, answer_expr: str, *, seed: int, forbid=None) -> None:
    """One hidden test: the answer ``answer_expr`` (evaluated in the notebook's globals ``env``)
    judged on the checker's inputs drawn from ``jax.random.key(seed)``, by the judge.

    Raises:
        AssertionError: with the judge's hint when the answer fails, "not attempted" when the
            answer is still the stub's value (:func:`is_stub`), and the own-code hint when
            ``forbid`` entries are used or held by the answer (:func:`forbidden_objects`).
    """
    kind = "own" if forbid else "value"
    request = {"op": "test", "exercise": exercise, "seed": int(seed), "kind": kind}
    refused = None
    answer = None
    try:
        answer = eval(answer_expr, dict(env))  # noqa: S307 (an expression of the chapter)
    except NameError:
        refused = f"{answer_expr} is not defined (cell deleted or renamed?)"
    except Exception as err:  # noqa: BLE001
        refused = f"{answer_expr} raised {type(err).__name__}: {err}"
    if refused is None and is_stub(answer):  # the blank notebook: say so, not "has shape ()"
        refused = "not attempted: replace the ... of the answer cell by your answer"
    if refused is None and callable(answer) and "__wrapped__" in getattr(answer, "__dict__", {}):
        refused = ("your function is a wrapper (it has __wrapped__, e.g. from functools.wraps): "
                   "define the answer itself with def")
    if refused is None and forbid and forbidden_objects(answer, forbid + AUTODIFF * (
            "jax:grad" in forbid)):
        refused = OWN_CODE_HINT
    if refused is None and exercise in IN_KERNEL:
        _check_in_kernel(exercise, answer, seed, forbid)
        return
    if refused is not None:
        request["refused"] = refused
    elif callable(answer):
        request["source"] = _source(answer)
    else:
        try:
            request["value"] = encode(answer)
        except TypeError as err:
            request["refused"] = (f"the grader could not read {answer_expr} ({err}): it should "
                                  "be a function, an array or a number")
    ok, hint = ask_judge(request, answer if callable(answer) else None, forbid)
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
