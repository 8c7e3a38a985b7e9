"""lib.diagonal against independent answers: the simulated gradient flow of the network itself,
scalar root finding and quadrature (scipy), the convex l1/l2 programs (cvxpy), autodiff."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, optimize

import lib
from lib import diagonal as dg
from lib import diagonal_classification as dc


def _problem(N=5, d=12, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((N, d)), rng.standard_normal(N)


def _h_numpy(z, D):
    if D == 2:
        return 2 * np.sinh(z)
    p = D / (D - 2)  # expm1/log1p: no cancellation near 0
    return np.expm1(-p * np.log1p(-z)) - np.expm1(-p * np.log1p(z))


# ---------------------------------------------------------------- scalar functions


@pytest.mark.parametrize("D", [2, 3, 4, 5])
def test_H_derivative_is_h(D):
    z = np.array([-0.9, -0.3, -1e-3, 0.0, 0.02, 0.04, 0.06, 0.5, 0.95])
    grad = jax.vmap(jax.grad(lambda t: dg.H_D(t, D)))(jnp.asarray(z))
    np.testing.assert_allclose(grad, _h_numpy(z, D), rtol=1e-12, atol=1e-15)
    assert float(dg.H_D(0.0, D)) == 0.0


@pytest.mark.parametrize("D", [3, 4, 5])
def test_series_and_closed_form_agree_at_switch(D):
    z = np.array([0.0499999, 0.0500001, 1e-6])
    np.testing.assert_allclose(dg.h_D(z, D), _h_numpy(z, D), rtol=1e-13)
    H_quad = [integrate.quad(lambda t: _h_numpy(t, D), 0, zi, epsabs=0, epsrel=1e-13)[0]
              for zi in z]
    np.testing.assert_allclose(dg.H_D(z, D), H_quad, rtol=1e-11)


@pytest.mark.parametrize("D", [2, 3, 4, 5])
@pytest.mark.parametrize("u", [1e-9, 1e-3, 0.7, 5.0, 1e3, 1e9, 1e15])
def test_h_inverse_against_brentq(D, u):
    # independent inverse: brentq on the gap g = 1 - z in log space (D >= 3), or arcsinh
    if D == 2:
        want_z, want_gap = np.arcsinh(u / 2), None
    elif u < 10:
        want_z = optimize.brentq(lambda t: _h_numpy(t, D) - u, 0, 0.999, xtol=1e-300,
                                 rtol=1e-15)
        want_gap = None
    else:
        p = D / (D - 2)
        f = lambda lg: np.log(np.exp(lg) ** (-p) - (2 - np.exp(lg)) ** (-p)) - np.log(u)  # noqa
        lg = optimize.brentq(f, -60, np.log(1 - 1e-15), xtol=1e-15, rtol=1e-15)
        want_gap = np.exp(lg)
        want_z = 1 - want_gap
    got = float(dg.h_D_inverse(u, D))
    assert got == pytest.approx(want_z, rel=1e-9, abs=1e-300)
    assert float(dg.h_D_inverse(-u, D)) == pytest.approx(-got, rel=1e-15)
    if want_gap is not None:
        assert float(dg._gap_of(jnp.float64(u), D)) == pytest.approx(want_gap, rel=1e-9)
    if u < 1e-3:  # h_D'(0) = 2 for D = 2, 2D/(D-2) for D >= 3
        slope = 2.0 if D == 2 else 2 * D / (D - 2)
        assert got == pytest.approx(u / slope, rel=1e-6)


@pytest.mark.parametrize("D", [2, 3, 5])
@pytest.mark.parametrize("u", [1e-6, 0.3, 4.0, 1e4])
def test_q_is_integral_of_h_inverse(D, u):
    def inv(v):
        if D == 2:
            return np.arcsinh(v / 2)
        return optimize.brentq(lambda z: _h_numpy(z, D) - v, 0, 1 - 1e-16, xtol=1e-16)
    want = integrate.quad(inv, 0, u, epsabs=0, epsrel=1e-12, limit=200)[0]
    assert float(dg.q_D(u, D)) == pytest.approx(want, rel=1e-8)
    assert float(dg.q_D(-u, D)) == pytest.approx(want, rel=1e-12)


def test_q_closed_form_D2():
    z = np.array([0.0, 1e-8, 0.5, 3.0, 1e6])
    want = 2 - np.sqrt(4 + z ** 2) + z * np.arcsinh(z / 2)
    # (the closed form cancels catastrophically at 1e-8; q_D does not: q ~ u^2 / 4 there)
    np.testing.assert_allclose(dg.q_D(z, 2)[2:], want[2:], rtol=1e-12)
    assert float(dg.q_D(1e-8, 2)) == pytest.approx(1e-16 / 4, rel=1e-10)


@pytest.mark.parametrize("D", [2, 3, 4])
def test_Q_limits_l1_and_l2(D):
    beta = np.array([1.0, -2.0, 0.5, 0.0])
    # alpha -> infinity: alpha^D Q -> ||beta||^2 / (2 h'(0))
    slope = 2.0 if D == 2 else 2 * D / (D - 2)
    big = 1e4
    assert float(dg.Q(beta, big, D)) * big ** D == pytest.approx(
        np.sum(beta ** 2) / (2 * slope), rel=1e-6)
    # alpha -> 0: Q grows like ||beta||_1 (times log(1/alpha^2) for D = 2, -> ||beta||_1 for
    # D >= 3): the ratio of Q at two vectors tends to the ratio of their l1 norms
    other = np.array([3.0, 0.0, 0.0, 0.0])
    small = 1e-30 if D == 2 else 1e-8
    ratio = float(dg.Q(beta, small, D)) / float(dg.Q(other, small, D))
    assert ratio == pytest.approx(np.abs(beta).sum() / 3.0, rel=0.03)


# ---------------------------------------------------------------- the model


@pytest.mark.parametrize("D", [2, 3, 4])
@pytest.mark.parametrize("alpha", [0.3, 2.0])
def test_tangent_kernel_at_init(D, alpha):
    X, _ = _problem()

    def f(params, x):
        return jnp.dot(dg.beta_of(params, D), x)

    K = lib.empirical_ntk(f, dg.init_diagonal(X.shape[1], alpha), X)
    np.testing.assert_allclose(K, 2 * D ** 2 * alpha ** (2 * D - 2) * X @ X.T, rtol=1e-12)


# ---------------------------------------------------------------- implicit_bias_limit

FLOW_CASES = [(2, 1e-4), (2, 1e-2), (2, 1.0), (2, 1e3), (3, 1e-2), (3, 1.0), (3, 1e3),
              (4, 0.3), (4, 1e3), (5, 0.5), (5, 1e3)]


@pytest.mark.parametrize("D,alpha", FLOW_CASES)
def test_limit_matches_simulated_flow(D, alpha):
    X, y = _problem()
    run = dg.gradient_flow_path(X, y, alpha, D)
    assert run.converged
    beta = dg.implicit_bias_limit(X, y, alpha, D)
    err = np.linalg.norm(run.final_beta - beta) / np.linalg.norm(beta)
    assert err < 1e-8, err


@pytest.mark.parametrize("D", [3, 4, 5])
@pytest.mark.parametrize("alpha", [1e-4, 1e-3])
def test_small_scale_optimality_conditions(D, alpha):
    """Where the flow is too stiff to integrate (alpha^(D-2) tiny), check the KKT conditions
    of min Q s.t. X beta = y directly: X beta = y and h_D^{-1}(beta / alpha^D) in range(X^T),
    with the inverse computed independently (in the gap, by brentq)."""
    X, y = _problem(seed=1)
    beta = np.asarray(dg.implicit_bias_limit(X, y, alpha, D))
    assert np.linalg.norm(X @ beta - y) <= 1e-10 * np.linalg.norm(y)
    p = D / (D - 2)
    z = []
    for u in beta / alpha ** D:
        f = lambda lg: np.log(np.exp(lg) ** (-p) - (2 - np.exp(lg)) ** (-p)) - np.log(abs(u))  # noqa
        if abs(u) > 10:
            z.append(np.sign(u) * (1 - np.exp(optimize.brentq(f, -200, -1e-12, xtol=1e-14))))
        else:
            z.append(optimize.brentq(lambda t, u=u: _h_numpy(t, D) - u, -0.99, 0.99,
                                     xtol=1e-16))
    z = np.array(z)
    coef = np.linalg.lstsq(X.T, z, rcond=None)[0]
    assert np.linalg.norm(X.T @ coef - z) < 1e-9


@pytest.mark.parametrize("D", [2, 3, 4])
def test_limits_l1_and_l2(D):
    X, y = _problem(N=6, d=20, seed=2)
    l1 = np.asarray(lib.min_norm_interpolant(X, y, p=1))
    l2 = np.asarray(lib.min_norm_interpolant(X, y, p=2))
    small = {2: 1e-30, 3: 1e-8, 4: 1e-6}[D]
    b_small, b_big = dg.implicit_bias_limit(X, y, np.array([small, 1e4]), D)
    assert np.linalg.norm(b_small - l1) / np.linalg.norm(l1) < 0.02 * (D == 2) + 1e-4
    assert np.linalg.norm(b_big - l2) / np.linalg.norm(l2) < 1e-6


def test_grid_equals_single_solves_in_any_order():
    X, y = _problem()
    alphas = np.array([1.0, 1e-3, 30.0, 0.1])
    grid = dg.implicit_bias_limit(X, y, alphas, 3)
    assert grid.shape == (4, X.shape[1])
    for a, b in zip(alphas, grid, strict=True):
        np.testing.assert_allclose(b, dg.implicit_bias_limit(X, y, a, 3), rtol=1e-9,
                                   atol=1e-12)


def test_dual_objective_minimised_at_solution():
    X, y = _problem()
    beta, info = dg.implicit_bias_limit(X, y, 0.5, 3, return_info=True)
    nu = info.nu
    base = float(dg.dual_objective(nu, X, y, 0.5, 3))
    rng = np.random.default_rng(3)
    for _ in range(5):
        e = 1e-4 * rng.standard_normal(nu.shape)
        assert float(dg.dual_objective(nu + e, X, y, 0.5, 3)) > base
    np.testing.assert_allclose(0.5 ** 3 * dg.h_D(X.T @ nu, 3), beta, rtol=1e-10)


def test_gradient_descent_small_step_tracks_flow():
    X, y = _problem()
    flow = dg.gradient_flow_path(X, y, 1.0, 2)
    eta = 1e-4
    gd = dg.gradient_descent_path(X, y, 1.0, 2, step_size=eta, num_steps=400_000, target=1e-20)
    gap = np.linalg.norm(gd.final_beta - flow.final_beta) / np.linalg.norm(flow.final_beta)
    assert gap < 1e-2


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("kwargs,match", [
    (dict(X=np.ones((3, 3)), y=np.ones(3)), "fewer rows"),
    (dict(X=np.vstack([np.ones((1, 6)), np.ones((1, 6))]), y=np.ones(2)), "full row rank"),
    (dict(X=np.vstack([np.ones((1, 6)), np.ones((1, 6))]), y=np.array([1.0, 2.0])),
     "inconsistent"),
    (dict(X=np.full((2, 5), np.nan), y=np.ones(2)), "X contains non-finite"),
    (dict(y=np.array([1.0, np.inf])), "y contains non-finite"),
    (dict(alpha=0.0), "alpha"),
    (dict(alpha=-1.0), "alpha"),
    (dict(alpha=np.array([1.0, np.nan])), "alpha"),
    (dict(depth=1), "depth"),
    (dict(depth=2.5), "depth"),
])
def test_bad_input_raises(kwargs, match):
    rng = np.random.default_rng(0)
    args = dict(X=rng.standard_normal((2, 5)), y=np.ones(2), alpha=1.0, depth=2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        dg.implicit_bias_limit(**args)


def test_not_converged_raises_with_residual():
    X, y = _problem()
    with pytest.raises(RuntimeError, match="residual"):
        dg.implicit_bias_limit(X, y, 1e-4, 3, max_iter=1)


def test_Q_bad_input():
    with pytest.raises(ValueError, match="alpha"):
        dg.Q(np.ones(3), 0.0)
    with pytest.raises(ValueError, match="beta"):
        dg.Q(np.array([1.0, np.nan]), 1.0)


@pytest.mark.parametrize("depth", [2, 3, 4])
@pytest.mark.parametrize("z", [1e-310, -3e-315, 2.5e-320])
def test_h_D_and_inverse_at_subnormal_arguments(depth, z):
    """Issue 21 round 9 (F5): XLA reads a subnormal input as 0, so h_D(1e-310, 2) and
    h_D_inverse(1e-310, 3) returned 0. Independent answer: h_D in exact rationals,
    (1 - z)^-p - (1 + z)^-p with p = D / (D - 2) an integer for D = 3, 4, and for D = 2 the
    series 2 sinh z = 2z + z^3 / 3 + ... (the cubic term ~1e-930 is far below any float)."""
    from fractions import Fraction as F

    def h_exact(t):
        t = F(t)
        if depth == 2:
            return 2 * t + t ** 3 / 3
        p = depth // (depth - 2)
        return (1 - t) ** -p - (1 + t) ** -p

    spacing = F(2.0 ** -1074)  # the subnormal grid: one rounding of the result
    got = float(dg.h_D(np.array([z, 0.5]), depth)[0])
    assert abs(F(got) - h_exact(z)) <= spacing / 2, (got, float(h_exact(z)))
    inv = float(dg.h_D_inverse(np.array([z, 0.5]), depth)[0])
    assert inv != 0 and np.sign(inv) == np.sign(z)
    # h_D(inv) = z to within what rounding inv to the grid allows (h_D' (0) grid steps)
    slope = 2 if depth == 2 else 2 * depth // (depth - 2)
    assert abs(h_exact(inv) - F(z)) <= slope * spacing


@pytest.mark.parametrize("depth", [3, 10, 1000, 10**5, 10**6])
def test_q_D_at_large_depth_against_quadrature(depth):
    """Issue 21 round 9 (F4): q_D(0.2, D) was 5e-12 off at D = 1e3 and 4.7e-9 at D = 1e6
    (g^-q + (2 - g)^-q - 2 cancels for q = 2 / (D - 2) small). Independent answer:
    q_D(u) = int_0^z t h_D'(t) dt at z = h_D^{-1}(u) (integration by parts of u z - H_D(z)),
    a sum of positive terms integrated by scipy's quad, z by Brent's method on the closed
    form of h_D."""
    p = depth / (depth - 2)

    def h(t):
        return (1 - t) ** (-p) - (1 + t) ** (-p)

    def slope(t):
        return t * p * ((1 - t) ** (-p - 1) + (1 + t) ** (-p - 1))

    for u in (0.2, 0.5, 3.0):
        z = optimize.brentq(lambda t, u=u: h(t) - u, 0.0, 1 - 1e-15, xtol=1e-300,
                            rtol=8.9e-16, maxiter=500)
        want = integrate.quad(slope, 0.0, z, epsabs=0.0, epsrel=1.2e-14, limit=200)[0]
        assert float(dg.q_D(u, depth)) == pytest.approx(want, rel=1e-13, abs=0)


@pytest.mark.parametrize("rtol", [1e-4, 1e-6, 1e-8, 1e-10])
def test_gradient_flow_path_default_target_is_reachable_for_rtol(rtol):
    """Issue 21 round 9 (F7): with the default target 1e-20 ||y||^2 the run failed after
    300 000 steps for every rtol above 1e-10 (the integrator's error leaves a loss floor near
    rtol^2 ||y||^2). The default is now max(1e-20, rtol^2) ||y||^2; the final beta's loss,
    recomputed here, is below it."""
    X, y = np.array([[1.0, 2.0, 0.5]]), np.array([1.0])
    run = dg.gradient_flow_path(X, y, 1.0, rtol=rtol)
    loss = float(np.sum((X @ np.asarray(run.final_beta) - y) ** 2))
    assert run.converged and loss <= max(1e-20, rtol ** 2) * float(y @ y)


def test_gradient_flow_path_unreachable_target_is_named():
    # the failure names the target and rtol, not only "the integrator failed"
    with pytest.raises(RuntimeError, match=r"on the way to target = 1\.000e-20 with rtol = "
                                           r"1\.0e-06"):
        dg.gradient_flow_path(np.array([[1.0, 2.0, 0.5]]), np.array([1.0]), 1.0, rtol=1e-6,
                              target=1e-20)


def _null_space_limit(X, y):
    """The D = 2, alpha = 1 limit for a 2 x 3 X by a different algorithm: beta = beta0 + t n
    over the exact solution set (n = r1 x r2 and beta0 with beta_1 = 0, in exact rationals),
    t the root of the stationarity condition n . arcsinh(beta / 2) = 0 (Brent's method)."""
    from fractions import Fraction as F

    r1, r2 = ([F(float(v)) for v in row] for row in X)
    n = [r1[1] * r2[2] - r1[2] * r2[1], r1[2] * r2[0] - r1[0] * r2[2],
         r1[0] * r2[1] - r1[1] * r2[0]]
    det = r1[0] * r2[2] - r1[2] * r2[0]
    y1, y2 = F(float(y[0])), F(float(y[1]))
    b0 = [(y1 * r2[2] - r1[2] * y2) / det, F(0), (r1[0] * y2 - y1 * r2[0]) / det]
    scale = max(abs(v) for v in n)
    nf = [v / scale for v in n]

    def beta(t):
        return np.array([float(b0[i] + F(t) * nf[i]) for i in range(3)])

    t = optimize.brentq(lambda t: float(np.array([float(v) for v in nf])
                                        @ np.arcsinh(beta(t) / 2.0)),
                        -1e12, 1e12, xtol=1e-30, rtol=8.9e-16, maxiter=2000)
    return beta(t)


def test_implicit_bias_limit_nearly_parallel_rows():
    """Issue 21 round 9 (F6): rows differing by 1e-10 (condition number 4.7e10, accepted up
    to 1e12): Newton stalled at residual 0.2 after 500 iterations even for tol = 1e-3. Now
    retried on the equivalent system with orthonormal rows: at tol = 1e-3 the limit matches
    the null-space reference; at tol = 1e-9, below what rounding the limit (|beta| ~ 5e9)
    allows, it is refused naming X."""
    X = np.array([[1.0, 2.0, 0.5], [1.0, 2.0, 0.5 + 1e-10]])
    y = np.array([1.0, 1.5])
    beta = np.asarray(dg.implicit_bias_limit(X, y, 1.0, 2, tol=1e-3))
    want = _null_space_limit(X, y)
    assert np.linalg.norm(X @ beta - y) <= 1e-3 * np.linalg.norm(y)
    np.testing.assert_allclose(beta, want, rtol=0, atol=1e-8 * np.abs(want).max())
    with pytest.raises(ValueError, match=r"^X is too ill-conditioned for tol = 1\.0e-09: "
                                         r"condition number 4\.69"):
        dg.implicit_bias_limit(X, y, 1.0, 2)


def _decimal_limit(X, y, alpha, depth, digits=60, iters=100):
    """The limit alpha^D h_D(X^T nu) with X alpha^D h_D(X^T nu) = y, by Newton's method on nu
    in ``digits``-digit decimal arithmetic (independent of lib: its own h_D and h_D')."""
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = digits
        k = Decimal(depth) / Decimal(depth - 2) if depth > 2 else None

        def h(z):
            if depth == 2:
                return z.exp() - (-z).exp()
            return ((1 - z).ln() * -k).exp() - ((1 + z).ln() * -k).exp()

        def hp(z):
            if depth == 2:
                return z.exp() + (-z).exp()
            return k * (((1 - z).ln() * (-k - 1)).exp() + ((1 + z).ln() * (-k - 1)).exp())

        Xd = [[Decimal(float(v)) for v in row] for row in X]
        yd = [Decimal(float(v)) for v in y]
        a = Decimal(float(alpha)) ** depth
        N, d = len(Xd), len(Xd[0])
        nu = [Decimal(0)] * N
        for _ in range(iters):
            z = [sum(Xd[n][j] * nu[n] for n in range(N)) for j in range(d)]
            F = [sum(Xd[n][j] * a * h(z[j]) for j in range(d)) - yd[n] for n in range(N)]
            J = [[sum(Xd[n][j] * a * hp(z[j]) * Xd[m][j] for j in range(d)) for m in range(N)]
                 + [F[n]] for n in range(N)]
            for c in range(N):  # Gaussian elimination, partial pivoting
                p = max(range(c, N), key=lambda i, c=c: abs(J[i][c]))
                J[c], J[p] = J[p], J[c]
                for i in range(c + 1, N):
                    f = J[i][c] / J[c][c]
                    J[i] = [u - f * v for u, v in zip(J[i], J[c], strict=True)]
            s = [Decimal(0)] * N
            for i in reversed(range(N)):
                s[i] = (J[i][N] - sum(J[i][m] * s[m] for m in range(i + 1, N))) / J[i][i]
            t = Decimal(1)
            while depth > 2 and max(abs(sum(Xd[n][j] * (nu[n] - t * s[n]) for n in range(N)))
                                    for j in range(d)) >= 1:
                t /= 2
            nu = [nu[i] - t * s[i] for i in range(N)]
        assert max(abs(v) for v in F) < Decimal(10) ** (20 - digits)
        z = [sum(Xd[n][j] * nu[n] for n in range(N)) for j in range(d)]
        return np.array([float(a * h(zj)) for zj in z])


@pytest.mark.parametrize("e, alpha, depth", [(1e-9, 1.0, 2), (1e-8, 1000.0, 3), (1e-8, 1.0, 2),
                                            (1e-8, 1.0, 3), (1e-7, 10.0, 2)])
def test_implicit_bias_limit_error_in_beta_is_bounded(e, alpha, depth):
    """Issue 21 round 10: rows (1, 2, 0.5) and (1, 2, 0.5 + e), y = (1, 1 + e). Newton on X
    used all 500 iterations and stopped at residual 4e-10 <= tol |y| with beta [0.18, 0.37,
    0.17] (e = 1e-9) or [0.112, 0.224, 0.880] (e = 1e-8, D = 3), far from the limit [0.0999,
    0.2000, 1.0000] / [0.1, 0.2, 1.0] (60-digit decimal Newton); with e = 1e-8, alpha = 1
    it converged to a residual below tol with beta 1.9e-4 off. Now exhausting max_iter is a
    failure and the error in beta is estimated from the exact residual: at tol = 1e-6 the
    answer is within 1e-6 of the reference; at tol = 1e-9, below what these X allow
    (cond(X) eps ~ 1e-8 .. 1e-6), the call refuses naming X."""
    X = np.array([[1.0, 2.0, 0.5], [1.0, 2.0, 0.5 + e]])
    y = np.array([1.0, 1.0 + e])
    want = _decimal_limit(X, y, alpha, depth)
    beta = dg.implicit_bias_limit(X, y, alpha, depth, tol=1e-6)
    assert np.linalg.norm(np.asarray(beta) - want) <= 1e-6 * np.linalg.norm(want)
    with pytest.raises(ValueError, match=r"^X is too ill-conditioned for tol = 1\.0e-09"):
        dg.implicit_bias_limit(X, y, alpha, depth)


def test_exponential_loss_path_tiny_margin_names_x_not_separability():
    """Issue 21 round 11: rows (1, 1e-12) and (-1, 1e-12), labels +1, are separated by
    w = (0, 1) (margin 1e-12 after dividing by max ||x_n|| ~ 1: both rows give 1e-12 > 0,
    checked below in exact arithmetic), yet were called "not linearly separable". The path
    cannot follow a margin that small (order 1e24 steps): a ValueError naming X and the
    margin, never "not separable"."""
    from fractions import Fraction

    X = np.array([[1.0, 1e-12], [-1.0, 1e-12]])
    assert all(Fraction(r[0]) * 0 + Fraction(r[1]) * 1 > 0 for r in X)
    with pytest.raises(ValueError, match=r"^X: the data \(X, y\) are separable only with a "
                                         r"margin below the resolvable relative size") as err:
        dc.exponential_loss_path(X, np.ones(2), 1.0)
    assert "not linearly separable" not in str(err.value)


def test_implicit_bias_limit_below_the_normal_range_is_refused_or_right():
    """Issue 21 round 12 (item 2): for X = [[c, c]], y = [t] the limit is (t / 2c, t / 2c) at
    every alpha (the problem is symmetric in the two coordinates and Q is strictly convex).
    c = 1e200, t = 1e-200: 5e-401, below float64's range, was returned as [0, 0]; now refused
    naming the underflow. t = 1e-100: 5e-301, a normal number, is returned to tol."""
    X = np.array([[1e200, 1e200]])
    with pytest.raises(ValueError, match=r"the limit beta: the result underflows float64"):
        lib.implicit_bias_limit(X, np.array([1e-200]), 1e-200)
    beta = np.asarray(lib.implicit_bias_limit(X, np.array([1e-100]), 1e-100))
    np.testing.assert_allclose(beta, [1e-100 / 2e200] * 2, rtol=1e-9, atol=0)
