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
    raw = np.asarray(x)
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
            want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    if finite and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (NaN or inf)")
    return jnp.asarray(arr)


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
            raise ValueError(f"{name} must be a numeric array, got {type(x).__name__}") from err
    dtype = np.dtype(dtype)
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
            want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{name} must have shape {want}, got {arr_shape}")
    return jnp.asarray(x, dtype=jnp.float64)


def positive(name, value, *, allow_zero=False):
    """Check that a scalar is a finite real number > 0 (or >= 0) and return it as float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | np.ndarray | jnp.ndarray):
        raise ValueError(f"{name} must be a real number, got {type(value).__name__}")
    if np.ndim(value) != 0 or np.iscomplexobj(value):
        raise ValueError(f"{name} must be a real scalar, got {value!r}")
    try:
        v = float(value)
    except OverflowError as err:
        raise ValueError(f"{name} is too large: {value!r}") from err
    if not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")
    return v


def integer(name, value, *, minimum=None):
    """Check that ``value`` is an integer (not a bool) at least ``minimum``; return it as int."""
    if isinstance(value, jnp.ndarray) and value.ndim == 0 and jnp.issubdtype(value.dtype,
                                                                             jnp.integer):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral | np.integer):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    v = int(value)
    if minimum is not None and v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {v}")
    return v


def labels(name, y, n):
    """Check a label vector of length ``n`` with entries in {-1, +1}; return it as float64."""
    arr = as_array(name, y, shape=(n,))
    if not np.all(np.isin(np.asarray(arr), (-1.0, 1.0))):
        raise ValueError(f"{name} must contain only -1 and +1")
    return arr
