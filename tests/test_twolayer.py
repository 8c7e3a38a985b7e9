"""Two-layer network: initialization properties and homogeneity, checked directly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lib
from lib.twolayer import init_two_layer, two_layer, two_layer_batch


def test_symmetric_init_is_zero_and_unit_rows():
    p = lib.init_two_layer(jax.random.key(0), d=5, width=40, kappa=2.0, scale=3.0)
    X = jax.random.normal(jax.random.key(1), (20, 5))
    # zero up to the rounding of the sum (the pairs cancel exactly in exact arithmetic)
    np.testing.assert_allclose(lib.two_layer_batch(p, X, output_scale=100.0), 0.0, atol=1e-11)
    np.testing.assert_allclose(jnp.linalg.norm(p["B"], axis=1), 3.0, rtol=1e-12)
    np.testing.assert_allclose(jnp.abs(p["a"]), 6.0)


def test_batch_matches_single_and_explicit_sum():
    p = lib.init_two_layer(jax.random.key(2), d=3, width=7, symmetric=False)
    X = jax.random.normal(jax.random.key(3), (4, 3))
    explicit = np.array([sum(float(p["a"][j]) * max(float(p["B"][j] @ x), 0.0)
                             for j in range(7)) / 7 * 2.5 for x in X])
    np.testing.assert_allclose(lib.two_layer_batch(p, X, 2.5), explicit, rtol=1e-12)
    np.testing.assert_allclose(jax.vmap(lambda x: lib.two_layer(p, x, 2.5))(X), explicit,
                               rtol=1e-12)


def test_two_homogeneous_in_parameters():
    p = lib.init_two_layer(jax.random.key(4), d=3, width=8, symmetric=False)
    X = jax.random.normal(jax.random.key(5), (6, 3))
    q = jax.tree_util.tree_map(lambda v: 1.7 * v, p)
    np.testing.assert_allclose(lib.two_layer_batch(q, X), 1.7 ** 2 * lib.two_layer_batch(p, X),
                               rtol=1e-12)


@pytest.mark.parametrize("kwargs, match", [
    (dict(d=0, width=2), "d must"), (dict(d=2, width=3), "even"),
    (dict(d=2, width=2, kappa=0.0), "kappa"), (dict(d=2, width=2, scale=-1.0), "scale"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        lib.init_two_layer(jax.random.key(0), **kwargs)


# ---------------------------------------------------------------- bad input (adversarial review)

def _p():
    return {"a": jnp.array([1.0, -1.0]), "B": jnp.array([[1.0, 0.0], [0.0, 1.0]])}


@pytest.mark.parametrize("call, match", [
    (lambda: two_layer(_p(), jnp.array([jnp.nan, 1.0])), "NaN or inf"),
    (lambda: two_layer_batch(_p(), jnp.array([[1.0, jnp.inf]])), "NaN or inf"),
    (lambda: two_layer(_p(), jnp.array([1.0, 1j])), "real"),
    (lambda: two_layer(_p(), jnp.ones(2), output_scale=jnp.ones(2)), "scalar"),
    (lambda: two_layer(_p(), jnp.ones(2), output_scale=float("nan")), "output_scale"),
    (lambda: two_layer(_p(), jnp.ones(2), output_scale="a"), "output_scale"),
    (lambda: two_layer({"a": jnp.array([1e308, 1e308]), "B": jnp.ones((2, 2))},
                       jnp.array([1e308, 1e308])), "overflow"),
    (lambda: init_two_layer(jax.random.key(0), 10**10, 2), "MAX_ENTRIES"),
    (lambda: init_two_layer(jax.random.key(0), 3, 2, symmetric="no"), "symmetric"),
    (lambda: init_two_layer(0, 3, 2), "key"),
])
def test_bad_input_is_a_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_init_works_under_vmap_and_jit():
    keys = jax.random.split(jax.random.key(0), 3)
    batch = jax.vmap(lambda k: init_two_layer(k, 3, 4))(keys)
    assert batch["B"].shape == (3, 4, 3)
    one = init_two_layer(keys[1], 3, 4)
    np.testing.assert_array_equal(batch["a"][1], one["a"])
    np.testing.assert_allclose(batch["B"][1], one["B"], rtol=1e-15)


@pytest.mark.parametrize("a, B, x", [
    ([1.0], [[1.0, 1e305]], [1e-5, 1e-310]),       # subnormal input, huge weight (the finding)
    ([1e-310], [[1e300, 1.0]], [1.0, 0.0]),         # subnormal output weight
    ([1.0, -1.0], [[1e-312, 1.0], [-1.0, 0.5]], [1e300, 1e-12]),  # subnormal input weight
])
def test_subnormal_entries_are_not_flushed(a, B, x):
    """Issue 21 round 9 (F2): XLA on CPU reads a subnormal number as 0, so x = (1e-5, 1e-310)
    with b = (1, 1e305) gave 1e-5 instead of 2e-5 (the scaled recomputation ran only for
    outputs below 1e-290). Independent answer: the network's sum in exact rationals."""
    from fractions import Fraction as F

    want = sum(F(aj) * max(sum(F(bj) * F(xi) for bj, xi in zip(row, x, strict=True)), F(0))
               for aj, row in zip(a, B, strict=True)) / len(a)
    p = {"a": np.array(a), "B": np.array(B)}
    got = float(two_layer(p, np.array(x)))
    assert want != 0 and abs(F(got) - want) <= 1e-14 * abs(want), (got, float(want))
    batch = np.asarray(two_layer_batch(p, np.array([x, [1.0] * len(x)])))
    assert abs(F(float(batch[0])) - want) <= 1e-14 * abs(want)
    other = sum(F(aj) * max(sum(map(F, row)), F(0)) for aj, row in zip(a, B, strict=True))
    assert abs(F(float(batch[1])) - other / len(a)) <= 1e-14 * abs(other / len(a))
