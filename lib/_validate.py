"""Input checks shared by the public functions of ``lib``.

Every public function validates its arguments with these helpers so that bad input
fails early with a ``ValueError`` that names the argument, instead of producing NaN.
"""

from __future__ import annotations

import numbers

import jax.numpy as jnp
import numpy as np


def as_array(name, x, *, ndim=None, shape=None, finite=True):
    """Return ``x`` as a float64 JAX array after checking its rank, shape and finiteness.

    ``shape`` may contain ``None`` for free axes. Raises ``ValueError`` naming ``name``.
    """
    if x is None or isinstance(x, str | bytes):
        raise ValueError(f"{name} must be a numeric array, got {type(x).__name__}")
    raw = concrete(name, x)
    if np.iscomplexobj(raw):
        raise ValueError(f"{name} must be real, got complex values")
    if raw.dtype.kind not in "biuf" or raw.dtype == bool:
        raise ValueError(f"{name} must be a real numeric array, got dtype {raw.dtype}")
    try:
        arr = raw.astype(np.float64)
    except (TypeError, ValueError, OverflowError) as err:
        raise ValueError(f"{name} must be a numeric array, got {type(x).__name__}") from err
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    if shape is not None:
        mismatch = arr.ndim != len(shape) or any(
            s is not None and s != a for s, a in zip(shape, arr.shape, strict=False))
        if mismatch:
            want = shape_text(shape)
            raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    if finite and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (NaN or inf)")
    return jnp.asarray(arr)


def concrete(name, x):
    """``np.asarray(x)``, refusing a JAX tracer with a ``ValueError`` naming ``name``: the
    functions that check their input values (and compute partly in numpy) cannot run under
    ``jax.jit``, ``jax.grad`` or ``jax.vmap``."""
    import jax

    if isinstance(x, jax.core.Tracer):
        raise ValueError(f"{name} must be a concrete array: this function checks its input "
                         "values and cannot be traced (call it outside jax.jit, jax.grad and "
                         "jax.vmap)")
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        raise ValueError(f"{name} must be a real numeric array, got dtype {x.dtype}")
    try:
        return np.asarray(x)
    except TypeError as err:  # a list or tuple holding a typed PRNG key or another object
        raise ValueError(f"{name} must be a real numeric array, got {_unreadable(x)}") from err


def _unreadable(x):
    """What a list or tuple that numpy cannot convert holds, for an error message: a typed
    PRNG key (``[jax.random.key(0)]``, whose extended dtype numpy cannot read) is named as such."""
    stack = [x]
    while stack:
        v = stack.pop()
        if is_prng_key(v):
            return f"a {type(x).__name__} holding a JAX PRNG key (dtype {v.dtype})"
        if isinstance(v, list | tuple):
            stack.extend(v)
    return f"a {type(x).__name__} that numpy cannot convert to numbers"


def shape_text(shape):
    """A shape as Python prints it, ``None`` (a free axis) as ``*``: ``(6,)``, ``(*, 3)``."""
    parts = ["*" if s is None else str(s) for s in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def real_array(name, x, *, ndim=None, shape=None):
    """Return ``x`` as a float64 JAX array after checking only its dtype, rank and shape.

    Unlike :func:`as_array` it never reads the values, so it also works on JAX tracers (inside
    ``jax.jit``, ``vmap`` or ``grad``); finiteness is therefore not checked. ``shape`` may
    contain ``None`` for free axes. Raises ``ValueError`` naming ``name``.
    """
    if x is None or isinstance(x, str | bytes):
        raise ValueError(f"{name} must be a numeric array, got {type(x).__name__}")
    dtype = getattr(x, "dtype", None)
    if dtype is None:  # Python scalar or (nested) list: no tracer inside, safe to convert
        try:
            dtype = np.asarray(x).dtype
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name} must be a real numeric array, got {_unreadable(x)}") \
                from err
    try:
        dtype = np.dtype(dtype)
    except TypeError as err:  # extended dtypes numpy cannot read: typed PRNG keys key<fry>
        raise ValueError(f"{name} must be a real numeric array, got dtype {dtype}") from err
    if dtype.kind not in "iuf":
        what = "real, got complex values" if dtype.kind == "c" else \
            f"a real numeric array, got dtype {dtype}"
        raise ValueError(f"{name} must be {what}")
    arr_shape = tuple(np.shape(x))
    if ndim is not None and len(arr_shape) != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {arr_shape}")
    if shape is not None:
        mismatch = len(arr_shape) != len(shape) or any(
            s is not None and s != a for s, a in zip(shape, arr_shape, strict=False))
        if mismatch:
            want = shape_text(shape)
            raise ValueError(f"{name} must have shape {want}, got {arr_shape}")
    return jnp.asarray(x, dtype=jnp.float64)


def traced_scalar(name, value):
    """A real 0-d value that may be a JAX tracer (an argument of a closure that users call
    under ``jit``/``grad``): dtype and rank are checked (bools, complex, strings, None and
    vectors are refused); when the value is concrete, finiteness too. Returns a float64
    array."""
    import jax

    arr = real_array(name, value, ndim=0)
    if not isinstance(arr, jax.core.Tracer) and not bool(jnp.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return arr


def positive(name, value, *, allow_zero=False, normal=False):
    """Check that a scalar is a finite real number > 0 (or >= 0) and return it as float.
    With ``normal``, a nonzero value below the smallest normal float64 (~2.2e-308) is refused
    too: XLA on CPU flushes subnormal numbers to zero, so e.g. a subnormal scale or tolerance
    would silently become 0 (a run to the step limit, a target that is never reached)."""
    v = scalar(name, value)
    if v < 0 or (v == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")
    if normal:
        not_subnormal(name, v)
    return v


def not_subnormal(name, v):
    """Refuse a nonzero float below the smallest normal float64 (XLA flushes it to zero)."""
    if v != 0 and abs(v) < TINY:
        raise ValueError(f"{name} = {v!r} is subnormal (below {TINY:.3e}): XLA flushes it to "
                         f"zero; pass 0 or a normal number")
    return v


TINY = float(np.finfo(np.float64).tiny)


def step_size(name, value):
    """A step size: a finite real number (or, for arrays, every entry) >= the smallest normal
    float64 (~2.2e-308). Subnormal step sizes are refused: XLA on CPU flushes them to zero, so
    no step would move and every time would be 0."""
    no_prng_key(name, value, "a positive number or a 1-D array of them")
    if np.ndim(value) == 0 or isinstance(value, str | bytes):
        v = positive(name, value)
        if v < TINY:
            raise ValueError(f"{name} = {v!r} is subnormal (below {TINY:.3e}): XLA flushes it "
                             "to zero, so no step would move; pass a larger step size")
        return v
    arr = as_array(name, value, ndim=1)
    # compared in numpy: XLA would flush subnormal entries to 0 and call them non-positive
    if arr.size == 0 or not bool(np.all(np.asarray(arr) > 0)):
        raise ValueError(f"{name} must be a non-empty array of finite numbers > 0, got "
                         f"{value!r}")
    if float(np.min(np.asarray(arr))) < TINY:
        raise ValueError(f"{name} has subnormal entries (below {TINY:.3e}): XLA flushes them "
                         "to zero, so no step would move; pass larger step sizes")
    return arr


def integer(name, value, *, minimum=None, maximum=None):
    """Check that ``value`` is an integer (not a bool) in ``[minimum, maximum]``; return it as
    int. Python ints of any size are accepted here and refused by the bounds (never an
    ``OverflowError`` later)."""
    no_prng_key(name, value, "an integer")
    if isinstance(value, jnp.ndarray) and value.ndim == 0 and jnp.issubdtype(value.dtype,
                                                                             jnp.integer):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral | np.integer):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    v = int(value)
    if minimum is not None and v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {_short(v)}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {_short(v)}")
    return v


def _short(v):
    """repr of a number, shortened for huge Python ints (10**400 has 401 digits)."""
    r = repr(v)
    return r if len(r) <= 40 else f"{r[:12]}...({len(r)} digits)"


def power(name, base, exponent):
    """``base ** exponent`` (base > 0 a float, exponent an int) as a normal float64, or a
    ``ValueError`` naming ``name`` when it overflows or falls below the smallest normal float64
    (~2.2e-308): XLA on CPU flushes subnormal numbers to zero, so e.g. ``alpha**depth =
    1e-320`` would turn ``beta / alpha**depth`` into a division by zero (NaN)."""
    with np.errstate(over="ignore", under="ignore"):
        log10 = float(exponent) * float(np.log10(base))
        value = float(np.float64(base) ** exponent) if abs(log10) < 400 else \
            (np.inf if log10 > 0 else 0.0)
    if not np.isfinite(value):
        raise ValueError(f"{name}**{exponent} overflows float64 ({name} = {base!r}, "
                         f"{name}**{exponent} ~ 1e{log10:.0f})")
    if value < TINY:
        raise ValueError(f"{name}**{exponent} ~ 1e{log10:.0f} is below the smallest normal "
                         f"float64 ({TINY:.3e}) for {name} = {base!r}: subnormal numbers are "
                         f"flushed to zero in XLA; pass a larger {name}")
    return value


def nonempty(name, X):
    """Refuse a 2-D array with no row or no column (before numpy or a solver fails on it)."""
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"{name} must have at least one row and one column, got shape "
                         f"{tuple(X.shape)}")
    return X


def nonzero_matrix(name, X):
    """Refuse a design matrix whose entries are all zero or all subnormal (largest |entry|
    below the smallest normal float64, ~2.2e-308), before any computation: a zero ``X``
    carries no data (solvers then fail with their own errors), and XLA on CPU flushes
    subnormal entries to zero. Returns ``X`` (an empty ``X`` is left to the callers' own
    check)."""
    m = max_abs(X)
    if np.size(X) and m == 0.0:
        raise ValueError(f"{name} must have at least one nonzero entry, got all zeros (shape "
                         f"{tuple(np.shape(X))})")
    if 0.0 < m < TINY:
        raise ValueError(f"{name} has only subnormal entries (max |{name}| = {m:.3e}, below "
                         f"{TINY:.3e}): they carry few significant digits and XLA flushes them "
                         f"to zero; rescale {name}")
    return X


def labels(name, y, n):
    """Check a label vector of length ``n`` with entries in {-1, +1}; return it as float64."""
    arr = as_array(name, y, shape=(n,))
    if not np.all(np.isin(np.asarray(arr), (-1.0, 1.0))):
        raise ValueError(f"{name} must contain only -1 and +1")
    return arr


def boolean(name, value):
    """Check that ``value`` is a real boolean (``True``/``False`` or a numpy bool); return it.

    Strings, numbers and arrays are refused rather than coerced (``"yes"`` would be truthy).
    """
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def is_prng_key(value):
    """True for a JAX array (or tracer) of a typed PRNG key dtype (``jax.random.key(0)``,
    dtype ``key<fry>``): numpy cannot read it, so ``np.asarray`` raises a ``TypeError``."""
    import jax

    dtype = getattr(value, "dtype", None)
    try:
        return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    except TypeError:
        return False


def no_prng_key(name, value, what="a real number"):
    """Refuse a typed PRNG key passed where a number is expected, with a ``ValueError`` naming
    ``name`` (before numpy or JAX fail on its extended dtype with a ``TypeError``)."""
    if is_prng_key(value):
        raise ValueError(f"{name} must be {what}, got a JAX PRNG key (dtype {value.dtype})")
    return value


def scalar(name, value, *, minimum=None, maximum=None, allow_min=True, allow_max=True):
    """Check that ``value`` is a finite real number (not a bool, string, complex, array or
    PRNG key) in the given range; return it as float. Raises ``ValueError`` naming ``name``."""
    no_prng_key(name, value)
    if isinstance(value, bool | np.bool_) or not isinstance(
            value, numbers.Real | np.ndarray | jnp.ndarray | np.generic):
        raise ValueError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    if isinstance(value, numbers.Integral) and not isinstance(value, np.generic):
        value = _python_int(name, value)  # a Python int of any size (np.asarray: object)
    if np.ndim(value) != 0 or np.iscomplexobj(value) or np.asarray(value).dtype.kind not in "iuf":
        raise ValueError(f"{name} must be a real scalar, got {value!r}")
    try:
        v = float(value)
    except OverflowError as err:
        raise ValueError(f"{name} is too large: {value!r}") from err
    if not np.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if minimum is not None and (v < minimum or (v == minimum and not allow_min)):
        raise ValueError(f"{name} must be {'>=' if allow_min else '>'} {minimum}, got {value!r}")
    if maximum is not None and (v > maximum or (v == maximum and not allow_max)):
        raise ValueError(f"{name} must be {'<=' if allow_max else '<'} {maximum}, got {value!r}")
    return v


def _python_int(name, value):
    try:
        return float(value)
    except OverflowError as err:
        raise ValueError(f"{name} is too large: {value!r:.40}") from err


def function(name, f, signature="f(params, x)", *, hashable=False):
    """Check that ``f`` is callable (and, with ``hashable``, hashable: it is then a static
    argument of ``jax.jit``, and an unhashable callable object would fail deep inside JAX)."""
    if not callable(f):
        raise ValueError(f"{name} must be a callable {signature}, got {type(f).__name__}")
    if hashable:
        try:
            hash(f)
        except TypeError as err:
            raise ValueError(f"{name} must be hashable (it is a static argument of jax.jit), "
                             f"got an unhashable {type(f).__name__}; wrap it in a function, "
                             f"e.g. lambda params, x: {name}(params, x)") from err
    return f


MAX_ELEMENTS = 2**31
"""Largest number of float64 entries one array may have (16 GiB); larger requests are refused
before any memory is allocated."""


def size(name, value, *, minimum=1, maximum=MAX_ELEMENTS):
    """An integer count (number of samples, steps, width) between ``minimum`` and ``maximum``;
    refuses sizes that would not fit in memory (e.g. ``10**30``) before anything is allocated.
    With the default ``maximum`` (a count of float64 entries) the size is also checked
    against the memory available now: more than half of it is refused, naming ``name``."""
    v = integer(name, value, minimum=minimum)
    if maximum is not None and v > maximum:
        raise ValueError(f"{name} = {v} is too large (at most {maximum}): the arrays "
                         "would not fit in memory")
    if maximum == MAX_ELEMENTS:  # a count of float64 entries: also against the memory free now
        avail = available_memory()
        if avail is not None and 8 * v > MEMORY_FRACTION * avail:
            raise ValueError(f"{name} = {v} is too large: {v} float64 entries need "
                             f"{8 * v / 2**30:.3g} GiB, more than half of the "
                             f"{avail / 2**30:.3g} GiB of memory available")
    return v


MEMORY_FRACTION = 0.5
"""A single array may use at most this fraction of the memory available when it is made."""


def available_memory():
    """Bytes of memory available now (MemAvailable of /proc/meminfo), or None if unknown."""
    import os

    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def prng_key(name, key):
    """Check a single JAX PRNG key: a typed key (``jax.random.key(seed)``, shape ``()``) or a
    legacy raw key (``jax.random.PRNGKey(seed)``, uint32 of shape ``(2,)``).

    Only the dtype and shape are read, so this also works on traced keys. Refuses ints (``0``),
    ``None``, strings, floats and split pairs (a typed key of shape ``(2,)``, a raw key of shape
    ``(2, 2)``) with a ``ValueError`` naming ``name``.
    """
    import jax

    hint = "pass one key, e.g. jax.random.key(0) (or lib.config.key(i))"
    dtype = getattr(key, "dtype", None)
    if dtype is None or isinstance(key, np.ndarray | np.generic) and dtype.kind != "u":
        raise ValueError(f"{name} must be a JAX PRNG key, got {type(key).__name__} {key!r:.60}; "
                         f"{hint}")
    shape = tuple(np.shape(key))
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        if shape != ():
            raise ValueError(f"{name} must be a single PRNG key, got an array of keys of shape "
                             f"{shape} (e.g. the pair from jax.random.split); {hint}")
        return key
    if np.dtype(dtype) == np.uint32 and shape == (2,):
        return key
    raise ValueError(f"{name} must be a JAX PRNG key (a typed key of shape () or a raw uint32 "
                     f"key of shape (2,)), got dtype {dtype} and shape {shape}; {hint}")


def real_tree(name, tree, *, finite=True):
    """Cast a pytree of real numeric arrays to float64 (for parameters); refuse an empty tree,
    None/strings/objects, complex or boolean leaves (instead of dropping the imaginary part
    with a warning) and, when ``finite`` and the leaves are concrete, NaN or inf."""
    import jax

    if tree is None:
        raise ValueError(f"{name} must be a pytree of real arrays, got None")
    leaves = jax.tree_util.tree_leaves(tree)
    if not leaves:
        raise ValueError(f"{name} must contain at least one array")
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        # dtype checks only (trace-safe); the message names the leaf, e.g. params['w']
        real_array(f"{name}{jax.tree_util.keystr(path)}", leaf)
    out = jax.tree_util.tree_map(lambda p: jnp.asarray(p, dtype=jnp.float64), tree)
    if finite:
        for leaf in jax.tree_util.tree_leaves(out):
            if not isinstance(leaf, jax.core.Tracer) and not bool(jnp.all(jnp.isfinite(leaf))):
                raise ValueError(f"{name} contains non-finite values (NaN or inf)")
    return out


def pow2_scale(x):
    """The power of two ``s`` with ``max |x| / s`` in ``[0.5, 1)`` (1.0 for a zero array;
    ``[1, 2)`` for ``max |x| >= 2**1023``, see :func:`pow2_of`).

    Dividing by ``s`` is exact (no rounding), so results computed on ``x / s`` and multiplied
    back are bit-for-bit those computed on ``x`` whenever the latter neither overflows nor
    underflows; use it in numpy before a JAX call (XLA on CPU flushes subnormal numbers to 0).
    """
    m = max_abs(x)
    if m == 0.0 or not np.isfinite(m):
        return 1.0
    return float(pow2_of(m))


def pow2_of(m):
    """Element-wise power of two ``s`` with ``m / s`` in ``[0.5, 1)`` for ``m > 0`` (in
    ``[1, 2)`` for ``m >= 2**1023``, whose scale 2**1024 would overflow), 1 for ``m = 0``."""
    m = np.asarray(m, dtype=np.float64)
    e = np.frexp(np.where(m > 0, m, 1.0))[1]
    return np.ldexp(1.0, np.where(m > 0, np.minimum(e, 1023), 0))


SAFE_SCALES = (1e-290, 1e290)
"""Scales ``s`` for which ``x / s`` inside JAX is exact to rounding: XLA on CPU may divide as
``x * (1 / s)`` and flushes subnormal numbers to zero, so outside this range (``1 / s`` or
``s`` subnormal) a JAX division returns zeros or NaN."""


def safe_scale(s):
    """True when every entry of ``s`` is 0 or within :data:`SAFE_SCALES`."""
    a = np.abs(np.asarray(s, dtype=np.float64))
    return bool(np.all((a == 0) | ((a >= SAFE_SCALES[0]) & (a <= SAFE_SCALES[1]))))


def np_div(x, s):
    """``x / s`` as a JAX array: computed in JAX as before when ``s`` is a safe scale (so
    results in the ordinary range are bit-for-bit unchanged), else in numpy (XLA on CPU
    flushes subnormal operands and results to zero, so scaling a tiny array, or dividing by
    a huge scale, inside JAX returns zeros)."""
    if safe_scale(s):
        return jnp.asarray(x, dtype=jnp.float64) / s
    return jnp.asarray(np.asarray(x, dtype=np.float64) / s)


def max_abs(x):
    """Largest absolute entry of a concrete array (a Python float, 0.0 for an empty array)."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    return float(a.max()) if a.size else 0.0


def norm(x):
    """Euclidean (Frobenius) norm of a concrete array computed in scaled form, ``2^e ||x / 2^e||``
    with ``2^e`` the power of two of the largest absolute entry (:func:`norm_pow2`), so it
    neither overflows (entries above 1e154) nor underflows (entries below 1e-154) while the norm
    itself is within float64's range. A norm in the subnormal range is rounded once, to that
    grid; use :func:`norm_pow2` when the norm is an intermediate result (e.g. of a ratio)."""
    mant, exp = norm_pow2(x)
    with np.errstate(over="ignore", under="ignore"):
        return float(np.ldexp(mant, exp))


def norm_pow2(x):
    """Euclidean norm of a concrete array as ``(mant, exp)`` with ``||x|| = mant * 2**exp``,
    ``mant`` a float in ``[0.5, sqrt(size))`` (0.0 and 0 for a zero array): ``x`` is divided by
    the power of two of its largest entry (exact), so no rounding to the subnormal grid and no
    overflow happens, whatever the scale of ``x``."""
    a = np.asarray(x, dtype=np.float64)
    m = max_abs(a)
    if m == 0.0:
        return 0.0, 0
    e = int(np.frexp(m)[1])
    with np.errstate(under="ignore"):
        r = np.ldexp(a, -e)  # exact (a power of two), except entries 2^-1074 below the largest
        return float(np.sqrt(np.sum(r * r))), e


def unit(x):
    """``(x / ||x||, ||x||)`` for a concrete nonzero array, computed in scaled form."""
    s = max_abs(x)
    r = np.asarray(x, dtype=np.float64) / s
    nr = float(np.sqrt(np.sum(r * r)))
    return r / nr, s * nr


def scalar_model(name, f, params, point_shape, *, params_name="params", x_name="X",
                 signature=None):
    """Check that ``f(params, x)`` runs on one input of shape ``point_shape`` and returns a
    scalar, by tracing shapes only (``jax.eval_shape``: nothing is computed). A shape mismatch
    between the model and the parameters or inputs, or a vector output, raises a
    ``ValueError`` naming ``name``, ``params_name`` and ``x_name`` instead of an error from deep
    inside JAX."""
    import jax

    function(name, f, signature or f"{name}(params, x)")
    point = jax.ShapeDtypeStruct(tuple(point_shape), jnp.float64)
    try:
        out = jax.eval_shape(lambda p, xi: f(p, xi), params, point)
    except Exception as err:  # noqa: BLE001  (any failure of the user's model while tracing)
        raise ValueError(f"{name}({params_name}, x) fails for one input x of shape "
                         f"{tuple(point_shape)} (a row of {x_name}): {type(err).__name__}: "
                         f"{str(err)[:300]}; check that {params_name} and {x_name} match "
                         f"the model") from err
    if not hasattr(out, "shape") or out.shape != ():
        got = getattr(out, "shape", type(out).__name__)
        raise ValueError(f"{name} must return a scalar for one input x of shape "
                         f"{tuple(point_shape)}, got output shape {got}; a vector-output model "
                         "is not supported here")
    if np.dtype(out.dtype).kind != "f":
        raise ValueError(f"{name} must return a real floating-point scalar, got dtype "
                         f"{out.dtype} (gradients need a float output; an integer-valued "
                         "model has no tangent kernel)")
    return f


def relative_difference(new_name, new, ref_name, ref):
    """``||new - ref|| / ||ref||`` (Frobenius). The difference is taken first, on the raw
    entries (so nearly equal inputs keep their accuracy: dividing by ``max |ref|`` before
    subtracting would round both operands first); only when ``new - ref`` overflows is it
    taken on both inputs divided by the power of two of their largest entry (exact). Both
    norms are kept as mantissa and power of two (:func:`norm_pow2`) and the ratio is formed
    from them, so it is accurate to rounding also when the difference (or ``ref``) is in the
    subnormal range. Raises ``ValueError`` naming the arguments when ``ref`` is zero or the
    ratio overflows float64."""
    s = max_abs(ref)
    if s == 0:
        raise ValueError(f"{ref_name} must not be all zero")
    new_a = np.asarray(new, dtype=np.float64)
    ref_a = np.asarray(ref, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        diff = new_a - ref_a
    shift = 0
    if not np.all(np.isfinite(diff)):
        shift = int(np.frexp(max(s, max_abs(new_a)))[1])
        with np.errstate(under="ignore"):
            diff = np.ldexp(new_a, -shift) - np.ldexp(ref_a, -shift)
    md, ed = norm_pow2(diff)
    mr, er = norm_pow2(ref_a)
    with np.errstate(over="ignore", under="ignore"):
        ratio = float(np.ldexp(md / mr, ed + shift - er))
    if not np.isfinite(ratio):
        raise ValueError(f"{new_name} is too large relative to {ref_name} (the ratio "
                         f"||{new_name} - {ref_name}|| / ||{ref_name}|| ~ 2^{ed + shift - er} "
                         f"overflows float64; max |{ref_name}| = {s:.3e})")
    return ratio


def row_norms_pow2(B):
    """Euclidean norms of the rows of a concrete 2-D array as ``(mant, exp)`` with
    ``||B[j]|| = mant[j] * 2**exp[j]``: each row is scaled by the power of two of its largest
    entry first (exact), so neither a norm above float64's range nor squares of entries below
    1e-154 (flushed to zero) spoil it, also when rows have very different scales. A zero row
    gives ``(0, 0)``."""
    Bn = np.asarray(B, dtype=np.float64)
    e = np.frexp(np.max(np.abs(Bn), axis=1))[1] if Bn.shape[1] else np.zeros(Bn.shape[0], int)
    U = np.ldexp(Bn, -e[:, None])
    with np.errstate(under="ignore"):
        return np.sqrt(np.sum(U * U, axis=1)), e


def pow2_sum(mant, exp, axis=None):
    """``sum(mant * 2**exp)`` along ``axis`` (all entries for None) as ``(m, e)`` with the
    value ``m * 2**e`` (``m`` in [0.5, 1) or 0, numpy's frexp): mantissas of moderate size,
    integer exponents of any size. Each term is shifted relative to the largest exponent of a
    nonzero term along the axis, so nothing overflows and only terms below 2**-1074 times the
    largest one are lost (negligible beside it); an all-zero slice gives ``(0, 0)``."""
    mant = np.asarray(mant, dtype=np.float64)
    exp = np.broadcast_to(np.asarray(exp, dtype=np.int64), mant.shape)
    if axis is None:
        mant, exp, axis = mant.ravel(), exp.ravel(), 0
    live = mant != 0
    low = np.iinfo(np.int64).min
    top = np.max(np.where(live, exp, low), axis=axis, keepdims=True, initial=low)
    top = np.where(top == low, 0, top)
    with np.errstate(under="ignore"):
        total = np.sum(np.ldexp(mant, np.where(live, exp - top, 0)), axis=axis)
    m, e = np.frexp(total)
    return m, e + np.squeeze(top, axis=axis)


def pow2_total(mant, exp):
    """:func:`pow2_sum` over all entries as a Python float: ``inf`` when the sum is beyond
    float64's range, subnormal or 0 below it."""
    m, e = pow2_sum(mant, exp)
    with np.errstate(over="ignore", under="ignore"):
        return float(np.ldexp(m, e))


def finite_result(value, message):
    """Return ``value`` if it is a tracer (inside ``jit``/``grad``: not checked) or finite;
    else raise ``ValueError(message)``: a true value outside float64's range must not be
    returned as ``inf`` (or NaN) in silence."""
    import jax

    if not isinstance(value, jax.core.Tracer) and not bool(jnp.all(jnp.isfinite(value))):
        raise ValueError(message)
    return value


def two_product(a, b):
    """Error-free product (Dekker): ``a * b = p + e`` exactly, element-wise, for entries of
    magnitude at most about 1 (no overflow in the split) whose products are not subnormal.
    Returns ``(p, e)``, arrays of the broadcast shape."""
    split = 134217729.0  # 2**27 + 1
    ca, cb = split * a, split * b
    ah = ca - (ca - a)
    al = a - ah
    bh = cb - (cb - b)
    bl = b - bh
    p = a * b
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def scaled_result(v, num, den, *, tol, what, names):
    """``v * num / den`` as a float64 numpy array, the factor applied as one power of two (an
    exact shift) after its mantissa, so intermediate products neither overflow nor flush to
    zero: only the result itself is rounded, to the subnormal grid where it lies below
    2.2e-308. Raises ``ValueError`` naming ``names`` when the result overflows float64, or
    when rounding it to the subnormal grid (absolute error up to 2**-1075 per entry, the
    whole entry for one that becomes 0) costs more than ``tol`` of its norm: the result
    underflows float64 (a zero or subnormal answer to a nonzero problem would be wrong in
    silence). Entries negligible beside the largest one may underflow freely."""
    v = np.asarray(v, dtype=np.float64)
    mn, en = np.frexp(float(num))
    md, ed = np.frexp(float(den))
    with np.errstate(over="ignore", under="ignore"):
        out = np.ldexp(v * (mn / md), int(en) - int(ed))
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{what}: the result overflows float64 (it scales as {names}): "
                         f"rescale them")
    mant, exp = norm_pow2(v * (mn / md))
    if mant == 0.0:
        return out
    lost = (out != 0) & (np.abs(out) < TINY) | ((out == 0) & (v != 0))
    if np.any(lost):
        # log2 of (sqrt(#lost) 2^-1075) / (exact norm = mant 2^(exp + en - ed))
        log2_rel = (0.5 * np.log2(np.count_nonzero(lost)) - 1075.0
                    - (np.log2(mant) + exp + int(en) - int(ed)))
        if log2_rel > np.log2(tol):
            raise ValueError(
                f"{what}: the result underflows float64: its largest entry is about 2^"
                f"{int(np.floor(np.log2(max_abs(v * (mn / md))))) + int(en) - int(ed)} "
                f"(it scales as {names}), below the normal range (2.2e-308), where rounding "
                f"to float64 would cost a relative error "
                f"{'of 1 (it becomes 0)' if log2_rel >= 0 else f'~ 2^{log2_rel:.0f}'} > "
                f"tol = {tol:.0e}: rescale them")
    return out
