"""The closed-form two-layer ReLU tangent kernel against Monte Carlo on the sphere and the
empirical kernel of a wide network."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lib


@pytest.mark.parametrize("d,kappa", [(2, 0.0), (3, 1.0), (5, 2.5)])
def test_relu_ntk_monte_carlo(d, kappa):
    """E over b uniform on S^(d-1) of (b.x)+(b.x')+ + kappa^2 <x,x'> 1{b.x>0} 1{b.x'>0}."""
    rng = np.random.default_rng(d)
    X = rng.standard_normal((4, d))
    b = rng.standard_normal((400_000, d))
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    pre = X @ b.T
    mc = (np.maximum(pre, 0) @ np.maximum(pre, 0).T
          + kappa**2 * (X @ X.T) * ((pre > 0).astype(float) @ (pre > 0).T)) / b.shape[0]
    np.testing.assert_allclose(lib.relu_ntk(X, kappa=kappa), mc, rtol=0.02, atol=2e-3)


def test_relu_ntk_special_angles_and_symmetry():
    x = jnp.array([[2.0, 0.0], [0.0, 3.0], [-1.0, 0.0]])
    K = np.asarray(lib.relu_ntk(x, kappa=1.0))
    # phi = 0: ||x||^2 (1/(2d) + kappa^2/2); phi = pi/2: ||x|| ||x'|| / (2 pi d); phi = pi: 0
    assert K[0, 0] == pytest.approx(4 * (0.25 + 0.5))
    assert K[0, 1] == pytest.approx(6 / (4 * np.pi))
    assert K[0, 2] == pytest.approx(0.0, abs=1e-15)
    np.testing.assert_allclose(K, K.T)
    assert np.linalg.eigvalsh(K).min() > -1e-12
    np.testing.assert_allclose(lib.relu_ntk(x, x[:2], kappa=1.0), K[:, :2])


def test_relu_ntk_against_wide_network():
    X = jax.random.normal(jax.random.key(0), (5, 3))
    m = 40_000
    p = lib.init_two_layer(jax.random.key(1), 3, m, kappa=0.7, symmetric=False)
    K_m = lib.empirical_ntk(lambda q, x: lib.two_layer(q, x, output_scale=np.sqrt(m)), p, X)
    K = lib.relu_ntk(X, kappa=0.7)
    assert float(jnp.linalg.norm(K_m - K) / jnp.linalg.norm(K)) < 0.03


def test_relu_ntk_errors():
    with pytest.raises(ValueError, match="x1"):
        lib.relu_ntk(jnp.ones(3))
    with pytest.raises(ValueError, match="d >= 2"):
        lib.relu_ntk(jnp.ones((3, 1)))
    with pytest.raises(ValueError, match="same dimension"):
        lib.relu_ntk(jnp.ones((2, 3)), jnp.ones((2, 4)))
    with pytest.raises(ValueError, match="kappa"):
        lib.relu_ntk(jnp.ones((2, 3)), kappa=-1.0)
    with pytest.raises(ValueError, match="non-finite"):
        lib.relu_ntk(jnp.array([[1.0, jnp.nan]]))


def _ref_relu_ntk(x, xp, kappa):
    """The closed form at 60 digits: phi = atan2(sqrt(|x|^2 |x'|^2 - <x, x'>^2), <x, x'>) with
    the squares and inner product in exact rationals of the float64 inputs, then
    |x| |x'| / (2 pi d) (sin phi + (pi - phi) cos phi) + kappa^2 <x, x'> (pi - phi) / (2 pi)
    with Decimal series for atan, sin and cos (60 digits absorb the cancellation near pi)."""
    import decimal
    from fractions import Fraction as F

    D = decimal.Decimal
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        pi = D("3.14159265358979323846264338327950288419716939937510582097494459")
        tiny = D(10) ** -70

        def dec(q):
            return D(q.numerator) / D(q.denominator)

        def atan(z):  # z >= 0: halve the argument below 0.1, then the series
            k = 0
            while z > D("0.1"):
                z, k = z / (1 + (1 + z * z).sqrt()), k + 1
            total, term, n = D(0), z, 0
            while abs(term) > tiny:
                total += (term if n % 2 == 0 else -term) / (2 * n + 1)
                term, n = term * z * z, n + 1
            return total * 2 ** k

        fx, fp = [F(float(v)) for v in x], [F(float(v)) for v in xp]
        dot = sum(a * b for a, b in zip(fx, fp, strict=True))
        xx, pp = sum(a * a for a in fx), sum(b * b for b in fp)
        cross = dec(xx * pp - dot * dot).sqrt()
        if dot > 0:
            phi = atan(cross / dec(dot))
        elif dot == 0:
            phi = pi / 2
        else:
            phi = pi - atan(cross / dec(-dot))
        s, c, term, n = D(0), D(0), D(1), 0
        while abs(term) > tiny or n < 4:
            if n % 4 == 0:
                c += term
            elif n % 4 == 1:
                s += term
            elif n % 4 == 2:
                c -= term
            else:
                s -= term
            n, term = n + 1, term * phi / (n + 1)
        first = dec(xx * pp).sqrt() / (2 * pi * len(x)) * (s + (pi - phi) * c)
        return float(first + dec(F(kappa) ** 2 * dot) * (pi - phi) / (2 * pi))


@pytest.mark.parametrize("kappa", [0.0, 1.0])
def test_relu_ntk_sweep_of_angles_to_relative_rounding(kappa):
    """Issue 21 round 14 (F2): just outside the old near-antiparallel window (cosine within
    1e-4 of -1, pi - phi < 0.01414) sin phi + (pi - phi) cos phi cancelled: at
    pi - phi = 0.0142, kappa = 0, 7.594954159759277e-08 for 7.594954164954698e-08 (6.8e-10
    relative; 9e-10 at 0.015, 5e-12 at 0.03). Against 60-digit references, every angle now
    within 1e-14 (measured 1.7e-15 at worst)."""
    import math
    x = np.array([1.0, 0.0])
    for gap in (1e-8, 1e-4, 0.0141, 0.0142, 0.015, 0.02, 0.03, 0.1, 0.3, 0.5, 1.0, 1.04, 1.05,
                1.5, 2.0, 2.1, 3.0, 3.1, 3.14):
        xp = np.array([math.cos(math.pi - gap), math.sin(math.pi - gap)])
        got = float(lib.relu_ntk(x[None], xp[None], kappa=kappa)[0, 0])
        assert got == pytest.approx(_ref_relu_ntk(x, xp, kappa), rel=1e-14, abs=0), gap


@pytest.mark.parametrize("d", [3, 5, 16])
def test_relu_ntk_near_antiparallel_in_higher_dimension(d):
    """x' = -t x + (a perturbation of size 1e-9 to 2): relative error within 1e-14 of the
    60-digit reference, in one (n1, n2) call (the vectorized path)."""
    rng = np.random.default_rng(d)
    X = rng.standard_normal((6, d))
    Xp = -rng.uniform(0.1, 3.0, (6, 1)) * X + rng.standard_normal((6, d)) * 10.0 ** rng.uniform(
        -9, 0.3, (6, 1))
    for kappa in (0.0, 0.7):
        K = np.asarray(lib.relu_ntk(X, Xp, kappa=kappa))
        for i in range(6):
            for j in range(6):
                want = _ref_relu_ntk(X[i], Xp[j], kappa)
                assert K[i, j] == pytest.approx(want, rel=1e-14, abs=0), (i, j)


def test_relu_ntk_exactly_antiparallel_pairs_give_exactly_zero():
    """Issue 21 round 14 (F3): x' = -3 x (exactly, checked in rationals) has phi = pi, where
    the kernel is exactly 0 at every kappa; it was -1.47e-33 for x = (1, 0), -2.9e-33 for the
    pair below, and ~1e-95 for kappa = 1e-100 (a rounding residue of the angle). Now +0.0."""
    from fractions import Fraction as F
    x = np.array([[1.0, 0.0], [0.24642804129674445, -0.657326452909182], [1.0, 2.0]])
    xp = -3.0 * x
    assert all(F(float(b)) == -3 * F(float(a)) for a, b in zip(x.ravel(), xp.ravel(),
                                                                   strict=True))
    for kappa in (1.0, 1e-100, 0.0, 1e100):
        K = np.asarray(lib.relu_ntk(x, xp, kappa=kappa))
        diag = np.diag(K)
        assert np.all(diag == 0.0) and not np.any(np.signbit(diag)), (kappa, diag)
    for i in range(3):  # kappa^2 beyond float64's range (the scaled branch), one pair at a time
        k = float(lib.relu_ntk(x[i:i + 1], xp[i:i + 1], kappa=1e200)[0, 0])
        assert k == 0.0 and not np.signbit(k), (i, k)


def test_relu_ntk_of_one_set_with_near_parallel_rows_is_exactly_symmetric():
    """The accurate angle pivots on the second row's largest entry, so K(x_i, x_j) and
    K(x_j, x_i) could differ by a rounding: with x2 = None the upper triangle is mirrored.
    Entries still match the 60-digit reference within 1e-14."""
    rng = np.random.default_rng(7)
    base = rng.standard_normal(3)
    X = np.stack([s * base + 1e-6 * rng.standard_normal(3) for s in (1.0, -2.0, 0.5, -1.0)])
    K = np.asarray(lib.relu_ntk(X, kappa=0.5))
    assert np.array_equal(K, K.T)
    for i in range(4):
        for j in range(4):
            assert K[i, j] == pytest.approx(_ref_relu_ntk(X[i], X[j], 0.5), rel=1e-14, abs=0)
