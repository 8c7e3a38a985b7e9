"""The run's size and seed, read from the environment, and the random keys derived from the seed.

Every chapter takes all of its randomness (data, initializations, noise) from two switches:

* ``KRR_FULL=1`` runs the papers' own sizes instead of the default, reduced ones.
* ``KRR_SEED=s`` (a whole number >= 0, default 0) changes every random draw of the chapter.

A chapter never writes ``jax.random.key(3)`` or ``np.random.default_rng(3)`` itself; it writes
``lib.config.key(3)`` or ``lib.config.rng(3)``, where 3 only tells the chapter's streams apart.
Seed 0 gives exactly the historical draws ``jax.random.key(i)`` and ``np.random.default_rng(i)``;
seed ``s > 0`` folds ``s`` into them, so every stream changes and streams stay independent.

Example:
    >>> import lib
    >>> key = lib.config.key(3)          # this chapter's stream 3 under the run's seed
    >>> FULL = lib.config.full()         # paper-scale sizes?
"""

from __future__ import annotations

import os

import jax
import numpy as np

__all__ = ["full", "key", "rng", "seed"]


def seed() -> int:
    """The run's seed, from the environment variable ``KRR_SEED`` (default 0).

    Returns:
        int: the seed, a whole number >= 0.

    Raises:
        ValueError: ``KRR_SEED`` is set but is not a whole number in ``[0, 2**31)`` written in
            plain decimal digits (``"1_000"`` or ``"+3"`` are refused; the message names it).

    Example:
        >>> import os
        >>> os.environ["KRR_SEED"] = "2"; seed()
        2
        >>> del os.environ["KRR_SEED"]; seed()
        0
    """
    raw = os.environ.get("KRR_SEED", "0").strip() or "0"
    # plain decimal digits only: int() would also accept "1_000", "+3" or non-ASCII digits
    if not (raw.isascii() and raw.isdigit()):
        raise ValueError(f"KRR_SEED must be a whole number >= 0 (decimal digits only), got "
                         f"{raw!r}")
    value = int(raw)
    if value < 0 or value >= 2**31:
        raise ValueError(f"KRR_SEED must be a whole number in [0, 2**31), got {value}")
    return value


def full() -> bool:
    """Whether the papers' own sizes are asked for: ``KRR_FULL=1`` in the environment.

    Returns:
        bool: True when ``KRR_FULL`` is ``"1"``, False when it is unset, empty or ``"0"``.

    Raises:
        ValueError: ``KRR_FULL`` is set to anything else (the message names it).

    Example:
        >>> import os
        >>> os.environ.pop("KRR_FULL", None) is None or True
        True
        >>> full()
        False
    """
    raw = os.environ.get("KRR_FULL", "0").strip()
    if raw in ("", "0"):
        return False
    if raw == "1":
        return True
    raise ValueError(f"KRR_FULL must be 0 or 1, got {raw!r}")


def _stream(stream) -> int:
    if isinstance(stream, bool | np.bool_) or not isinstance(stream, int | np.integer):
        raise ValueError(f"stream must be a whole number >= 0, got {stream!r}")
    if not 0 <= int(stream) < 2**31:
        raise ValueError(f"stream must be a whole number in [0, 2**31), got {stream}")
    return int(stream)


def key(stream: int = 0) -> jax.Array:
    """A JAX PRNG key for one random stream of a chapter, derived from the run's seed.

    ``key(i)`` is ``jax.random.key(i)`` at seed 0 and ``jax.random.fold_in(jax.random.key(i), s)``
    at seed ``s > 0`` (``KRR_SEED``), so one environment variable changes every draw.

    Args:
        stream: a whole number in [0, 2**31) naming the stream (chapters number theirs).

    Returns:
        jax.Array: a typed PRNG key (``jax.random.key``), shape ().

    Raises:
        ValueError: ``stream`` is not a whole number in range, or ``KRR_SEED`` is invalid.

    Example:
        >>> import jax
        >>> k = key(3)                  # jax.random.key(3) when KRR_SEED is 0 or unset
        >>> x = jax.random.normal(k, (2,))
    """
    base = jax.random.key(_stream(stream))
    s = seed()
    return base if s == 0 else jax.random.fold_in(base, s)


def rng(stream: int = 0) -> np.random.Generator:
    """A NumPy generator for one random stream of a chapter, derived from the run's seed.

    ``rng(i)`` is ``np.random.default_rng(i)`` at seed 0 and ``np.random.default_rng((i, s))`` at
    seed ``s > 0`` (``KRR_SEED``).

    Args:
        stream: a whole number in [0, 2**31) naming the stream.

    Returns:
        numpy.random.Generator

    Raises:
        ValueError: ``stream`` is not a whole number in range, or ``KRR_SEED`` is invalid.

    Example:
        >>> import os
        >>> os.environ.pop("KRR_SEED", None) is None or True
        True
        >>> float(rng(0).random()) == float(__import__("numpy").random.default_rng(0).random())
        True
    """
    i = _stream(stream)
    s = seed()
    return np.random.default_rng(i if s == 0 else (i, s))
