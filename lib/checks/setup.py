"""Checkers for the exercises of the chapter *Setup* (``chapters/setup.md``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import flows, ntk
from . import CheckFailed, assert_close, register


def _close(got, want, what, rtol=1e-6, atol=1e-9):
    assert_close(got, want, what, rtol=rtol, atol=atol)


@register("setup/ntk-linear-two-layer")
def _ntk_linear_two_layer(answer, key):
    """``answer(U, v, x1, x2)``: closed-form tangent kernel of f(x) = v^T U x."""
    k1, k2, k3, k4 = jax.random.split(key, 4)
    m, d = 7, 4
    U = jax.random.normal(k1, (m, d))
    v = jax.random.normal(k2, (m,))
    x1 = jax.random.normal(k3, (5, d))
    x2 = jax.random.normal(k4, (3, d))

    def f(p, x):
        return p["v"] @ (p["U"] @ x)

    want = ntk.empirical_ntk(f, {"U": U, "v": v}, x1, x2)
    got = answer(U, v, x1, x2)
    if np.shape(got) == (3, 5):
        raise CheckFailed("the kernel is transposed: rows should index x1, columns x2")
    only_v = x1 @ U.T @ U @ x2.T
    if np.shape(got) == want.shape and np.allclose(got, only_v, rtol=1e-6):
        raise CheckFailed("you have the gradient with respect to v only; add the U term "
                          "||v||^2 <x, x'>")
    _close(got, want, "your kernel")


@register("setup/symmetrize")
def _symmetrize(answer, key):
    """``answer(a, B)`` returns (a2, B2) of a network with twice the units and output 0."""
    k1, k2, k3 = jax.random.split(key, 3)
    m, d = 6, 3
    a = jax.random.normal(k1, (m,))
    B = jax.random.normal(k2, (m, d))
    x = jax.random.normal(k3, (10, d))

    def f(p, xi):
        return p[0] @ jax.nn.relu(p[1] @ xi)

    out = answer(a, B)
    if not isinstance(out, tuple | list) or len(out) != 2:
        raise CheckFailed("return a pair (a2, B2)")
    if any(np.iscomplexobj(np.asarray(o)) for o in out):
        raise CheckFailed("the parameters are complex; they should be real")
    a2, B2 = (jnp.asarray(o, dtype=jnp.float64) for o in out)
    if a2.shape != (2 * m,) or B2.shape != (2 * m, d):
        raise CheckFailed(f"expected shapes ({2 * m},) and ({2 * m}, {d}), got {a2.shape} and "
                          f"{B2.shape}")
    outputs = jax.vmap(lambda xi: f((a2, B2), xi))(x)
    if not np.allclose(outputs, 0.0, atol=1e-12):
        raise CheckFailed("the symmetrized network should output exactly 0 at every x")
    K = ntk.empirical_ntk(f, (a, B), x)
    K2 = ntk.empirical_ntk(f, (a2, B2), x)
    if np.allclose(K2, 0.0):
        raise CheckFailed("the tangent kernel vanished: pair each unit with a copy whose output "
                          "weight has the opposite sign, keep the same input weights")
    _close(K2, 2 * K, "the tangent kernel of your network (expected twice the original)")


def _least_squares_loss(b, data):
    X, y = data
    return 0.5 * jnp.sum((X @ b - y) ** 2)


@register("setup/gd-least-squares")
def _gd_least_squares(answer, key):
    """``answer(X, y, eta, k)``: the k-th GD iterate on 0.5 ||X b - y||^2 from b = 0."""
    k1, k2 = jax.random.split(key)
    N, d = 4, 9
    X = jax.random.normal(k1, (N, d))
    y = jax.random.normal(k2, (N,))
    eta = 0.5 / float(jnp.linalg.norm(X, 2) ** 2)
    traj = flows.gradient_descent(_least_squares_loss, jnp.zeros(d), step_size=eta,
                                  num_steps=50, snapshots=np.array([1, 7, 50]),
                                  loss_args=(X, y))
    for i, k in enumerate((1, 7, 50)):
        got = answer(X, y, eta, k)
        _close(got, traj.params[i], f"your iterate at k = {k}", rtol=1e-7)
