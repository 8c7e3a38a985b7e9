"""Convex references against closed forms and hand-solved problems."""

import numpy as np
import pytest

import lib


def test_min_l2_is_pseudo_inverse():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 15))
    y = rng.standard_normal(6)
    np.testing.assert_allclose(lib.min_norm_interpolant(X, y, 2), np.linalg.pinv(X) @ y,
                               rtol=1e-10, atol=1e-12)


def test_min_l1_hand_solved_with_negative_entries():
    """x1 + x2 + x3 = 1 and x1 - x2 = -3: l1-minimal point is (-1.5, 1.5, 1).

    Parametrize x1 = s - 3/2... directly: x2 = x1 + 3, x3 = -2 - 2 x1; |x1| + |x1+3| + |2+2x1|
    is minimal (value 4) at x1 = -1, giving (-1, 2, 0)."""
    X = np.array([[1.0, 1.0, 1.0], [1.0, -1.0, 0.0]])
    y = np.array([1.0, -3.0])
    beta = lib.min_norm_interpolant(X, y, 1)
    np.testing.assert_allclose(beta, [-1.0, 2.0, 0.0], atol=1e-8)
    assert beta[0] < 0


def test_min_l1_sparse_recovery_against_lp_bound():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((30, 60))
    beta_star = np.zeros(60)
    beta_star[[3, 17]] = [2.0, -1.5]
    beta = lib.min_norm_interpolant(X, X @ beta_star, 1)
    np.testing.assert_allclose(beta, beta_star, atol=1e-7)


def test_inconsistent_system():
    X = np.array([[1.0, 0.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match="inconsistent"):
        lib.min_norm_interpolant(X, np.array([1.0, 2.0]), 1)
    with pytest.raises(ValueError, match="inconsistent"):
        lib.min_norm_interpolant(X, np.array([1.0, 2.0]), 2)


def test_max_margin_hand_solved_2d():
    """Points (2, 1) labelled +1 and (-1, 1) labelled -1 (a margin problem through 0).

    l2: minimise |w|^2 s.t. 2 w1 + w2 >= 1 and w1 - w2 >= 1: both active gives w = (2/3, -1/3).
    l1: minimise |w1| + |w2|: w = (1, 0) meets both constraints with norm 1, and any w with
    |w|_1 < 1 has 2 w1 + w2 < ... (checked by the LP optimum 1 below)."""
    X = np.array([[2.0, 1.0], [-1.0, 1.0]])
    y = np.array([1.0, -1.0])
    np.testing.assert_allclose(lib.max_margin(X, y, 2), [2 / 3, -1 / 3], atol=1e-8)
    w1 = lib.max_margin(X, y, 1)
    assert np.abs(w1).sum() == pytest.approx(1.0, abs=1e-8)
    assert np.all(y * (X @ w1) >= 1 - 1e-8)


def test_max_margin_not_separable():
    X = np.array([[1.0, 0.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match="not linearly separable"):
        lib.max_margin(X, np.array([1.0, -1.0]), 2)


@pytest.mark.parametrize("bad, match", [
    (dict(p=3), "p must"), (dict(p=True), "p must"),
    (dict(y=np.array([1.0, 0.0])), "-1 and \\+1"),
    (dict(X=np.ones(2)), "X must have 2"),
    (dict(X=np.array([[np.inf, 0.0], [1.0, 1.0]])), "X contains non-finite"),
    (dict(y=np.array([1.0])), "y must have shape"),
])
def test_bad_input(bad, match):
    args = dict(X=np.array([[1.0, 0.0], [0.0, 1.0]]), y=np.array([1.0, -1.0]), p=2)
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        lib.max_margin(args["X"], args["y"], args["p"])


@pytest.mark.parametrize("N", [100, 150, 200])
def test_min_l1_paper_problem_verifies(N):
    """Issue 17: Woodworth et al. (2020, Fig. 2)'s sparse problem, d = 1000, 5-sparse target,
    Gaussian X. Clarabel stopped at "optimal_inaccurate" here for every seed at N >= 100; the
    LP is now solved by HiGHS and accepted on its certificate. Independent answers: the
    5-sparse beta* is the unique minimum-l1 interpolant at these N (compressed sensing: N far
    above 2 k log(d / k) ~ 53), and weak duality bounds y^T lambda by ||beta*||_1."""
    d, k = 1000, 5
    for seed in range(5):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((N, d))
        beta_star = np.zeros(d)
        beta_star[rng.choice(d, k, replace=False)] = 1 / np.sqrt(k)
        y = X @ beta_star
        beta, cert = lib.min_norm_interpolant(X, y, 1, return_certificate=True)
        assert cert.verified() and cert.solver == "HiGHS"
        assert cert.residual < 1e-12 and cert.gap < 1e-9
        np.testing.assert_allclose(np.asarray(beta), beta_star, atol=1e-9)


def test_min_l1_certificate_rejects_a_wrong_point():
    """The certificate is a real check: a feasible but non-optimal point with its best dual
    multipliers has a duality gap far above the tolerance."""
    from lib.convex import Certificate

    bad = Certificate("test", "made up", residual=0.0, dual_infeasibility=0.0, gap=0.1)
    assert not bad.verified()
    assert Certificate("test", "ok", 1e-15, 0.0, 1e-12).verified()


def _exact_min_l1(X, y):
    """min ||b||_1 s.t. X b = y by support enumeration in exact rationals (Fractions): the
    optimum of the LP is attained at a basic solution, a support of at most N columns on which
    the system has a unique exact solution. Returns the minimizer as Fractions."""
    import itertools
    from fractions import Fraction as F

    def solve(A, b):  # exact Gauss-Jordan; None if rank-deficient or inconsistent
        n, k = len(A), len(A[0])
        M = [list(r) + [v] for r, v in zip(A, b, strict=True)]
        for c in range(k):
            p = next((i for i in range(c, n) if M[i][c] != 0), None)
            if p is None:
                return None
            M[c], M[p] = M[p], M[c]
            for i in range(n):
                if i != c and M[i][c] != 0:
                    f = M[i][c] / M[c][c]
                    M[i] = [a - f * e for a, e in zip(M[i], M[c], strict=True)]
        if any(M[i][k] != 0 for i in range(k, n)):
            return None
        return [M[i][k] / M[i][i] for i in range(k)]

    N, d = X.shape
    Xf = [[F(float(v)) for v in r] for r in X]
    yf = [F(float(v)) for v in y]
    best = None
    for k in range(1, N + 1):
        for S in itertools.combinations(range(d), k):
            sol = solve([[Xf[i][j] for j in S] for i in range(N)], yf)
            if sol is not None and (best is None or sum(map(abs, sol)) < best[0]):
                full = [F(0)] * d
                for j, v in zip(S, sol, strict=True):
                    full[j] = v
                best = (sum(map(abs, sol)), full)
    return best[1]


def test_min_l1_nearly_parallel_rows_match_exact_rationals():
    """Issue 21 round 9 (F1): two nearly parallel rows (condition number 1e9 to 4e12) gave a
    beta 2e-8 to 5e-5 (relative) off the exact optimum while the certificate, computed on the
    solver's scaled or whitened system, said residual 1e-16. The answer is now refined on its
    support with exact residuals and certified on the caller's X and y. Independent answer:
    support enumeration in exact rationals."""
    rng = np.random.default_rng(0)
    conds = []
    for _ in range(12):
        r = rng.standard_normal(4)
        X = np.vstack([r, r + 10.0 ** rng.uniform(-12, -9) * rng.standard_normal(4)])
        y = rng.standard_normal(2)
        beta, cert = lib.min_norm_interpolant(X, y, 1, return_certificate=True)
        want = np.array([float(v) for v in _exact_min_l1(X, y)])
        conds.append(np.linalg.cond(X))
        assert cert.verified(), cert
        np.testing.assert_allclose(np.asarray(beta), want, rtol=1e-13, atol=0)
    assert max(conds) > 1e11 and min(conds) > 1e8  # the range the finding was in


def test_min_l1_certificate_catches_an_inaccurate_point():
    """The certificate of the refined answer is measured on the caller's X and y in exact
    arithmetic: the unrefined float64 answer of the finding's kind (5e-5 off), or the exact
    optimum perturbed by 1e-7 relative, fails it (residual or forward error above 1e-9)."""
    from lib.convex import Certificate, _certify_original

    X = np.array([[1.0, 2.0, 0.5], [1.0, 2.0, 0.5 + 1e-11]])
    y = np.array([1.0, 1.5])
    want = np.array([float(v) for v in _exact_min_l1(X, y)])
    beta = np.asarray(lib.min_norm_interpolant(X, y, 1))
    np.testing.assert_allclose(beta, want, rtol=1e-14)
    base = Certificate("test", "ok", 0.0, 0.0, 0.0)
    assert _certify_original(base, beta, X, y, 0.0).verified()
    for bad in (want * (1 + 1e-7), want + np.array([0.0, 1e-7, 0.0]) * np.abs(want).max()):
        with pytest.raises(ValueError, match="^X is too ill-conditioned"):
            _certify_original(base, bad, X, y, 0.0)


@pytest.mark.parametrize("e", [1e-9, 3e-9, 1e-10, 1e-11])
def test_min_l1_never_certifies_a_point_off_the_interpolants(e):
    # rows (1, 2, 3) and (1, 2, 3 + e), y = (1, 1): the rows' difference gives e beta_3 = 0, so
    # beta_3 = 0 and min |b1| + |b2| s.t. b1 + 2 b2 = 1 is [0, 1/2, 0] (by hand). The LP's
    # vertex [0, 0, 1/(3 + e/2)] fits y to 1.7e-10 only: it was returned, certified (issue 21).
    # A correct answer or a ValueError naming X; never another point
    X = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0 + e]])
    y = np.array([1.0, 1.0])
    try:
        beta, cert = lib.convex.min_norm_interpolant(X, y, p=1, return_certificate=True)
    except ValueError as err:
        assert "X is too ill-conditioned" in str(err)
        return
    assert cert.verified()
    np.testing.assert_allclose(np.asarray(beta), [0.0, 0.5, 0.0], atol=1e-9)


@pytest.mark.parametrize("p", [1, 2])
def test_max_margin_tiny_margin_is_solved_not_called_non_separable(p):
    """Issue 21 round 11: rows (1, e) and (-1, e), labels +1, e = 1e-12, are separated by
    w = (0, 1) with margin e. By hand: the constraints w1 + e w2 >= 1 and -w1 + e w2 >= 1 give
    e w2 >= 1 + |w1|, so both |w|_1 and |w|_2 are smallest at w = (0, 1/e) (e as rounded to
    float64, the exact rational used below)."""
    from fractions import Fraction

    e = 1e-12
    X = np.array([[1.0, e], [-1.0, e]])
    want = np.array([0.0, float(1 / Fraction(e))])
    w = np.asarray(lib.max_margin(X, np.ones(2), p))
    assert np.abs(w - want).max() <= 1e-8 * want[1]


def test_max_margin_unresolvable_dynamic_range_names_x():
    """Issue 21 round 11: rows (1e20, 1) and (1, 1e-20), labels (1, -1), gave a RuntimeError
    (p = 1, HiGHS status 4) or "not separable" (p = 2). In exact arithmetic on the float64
    entries the rows are linearly independent (det = 1 - 1e20 fl(1e-20) = 5.5e-17 != 0,
    Fraction below), so the data ARE separable, with a margin far below what a solver
    resolves: the answer is a ValueError naming X that says so."""
    from fractions import Fraction

    X = np.array([[1e20, 1.0], [1.0, 1e-20]])
    assert Fraction(1e20) * Fraction(1e-20) - Fraction(1.0) * Fraction(1.0) != 0
    for p in (1, 2):
        with pytest.raises(ValueError, match=r"^X: .* or are separable only with a margin "
                                             r"below the resolvable relative size"):
            lib.max_margin(X, np.array([1.0, -1.0]), p)



@pytest.mark.parametrize("p", [1, 2])
def test_min_norm_interpolant_underflowing_interpolant_is_refused(p):
    """Issue 21 round 12 (items 2 and 4): X = [[1e300, 1]], y = [1e-300]. Every interpolant
    has |beta_1| 1e300 + |beta_2| >= 1e-300, so some entry is at least 5e-601 (l2: beta =
    x y / |x|^2 = (1e-600, 1e-900); l1: (1e-600, 0)): below float64's range. p = 2 returned
    [0, 0] (not an interpolant) and p = 1 raised ZeroDivisionError; both now refuse naming
    the underflow. A nearby representable case, y = [1e-10], returns the closed form."""
    X = np.array([[1e300, 1.0]])
    with pytest.raises(ValueError, match=r"the interpolant beta: the result underflows float64"):
        lib.min_norm_interpolant(X, np.array([1e-300]), p)
    beta = np.asarray(lib.min_norm_interpolant(X, np.array([1e-10]), p))
    assert beta[0] == pytest.approx(1e-310, rel=1e-9) and abs(beta[1]) <= 1e-300


def _cramer2(X, y):
    """The unique solution of a 2 x 2 system in exact rationals on the float entries."""
    from fractions import Fraction as F

    (a, b), (c, e) = [[F(float(v)) for v in row] for row in X]
    y1, y2 = F(float(y[0])), F(float(y[1]))
    det = a * e - b * c
    return np.array([float((e * y1 - b * y2) / det), float((a * y2 - c * y1) / det)])


@pytest.mark.parametrize("p", [1, 2])
def test_min_norm_interpolant_rows_of_very_different_scales(p):
    """Issue 21 round 12 (item 1): rows at very different scales are retried as the
    equivalent row-scaled system, and the answer is checked on the caller's X and y.
    Rows (1, 2) and (1e-300, 1e-300), y = (1, 1) were "inconsistent" (p = 1) or "too
    ill-conditioned" (p = 2); X is invertible, so both minimizers are its unique solution
    (Cramer's rule in exact rationals). X = [[1, 1e20], [1, 0]], y = (0, 1): the solution is
    (1, -1e-20); the reverted attempt returned (1, 0), which leaves residual 1 in the first
    row. The row (1e-300, 2e-300, 1) with y = 1e-300: both minimizers are (0, 0, 1e-300) to
    rounding (the third column is 1e300 times cheaper per unit of y); p = 1 said "relative
    error inf at condition number 1"."""
    for X, y in ((np.array([[1.0, 2.0], [1e-300, 1e-300]]), np.ones(2)),
                 (np.array([[1.0, 1e20], [1.0, 0.0]]), np.array([0.0, 1.0]))):
        beta = np.asarray(lib.min_norm_interpolant(X, y, p))
        np.testing.assert_allclose(beta, _cramer2(X, y), rtol=1e-14, atol=0)
    beta = np.asarray(lib.min_norm_interpolant(np.array([[1e-300, 2e-300, 1.0]]),
                                               np.array([1e-300]), p))
    assert beta[0] == 0.0 and beta[1] == 0.0 and beta[2] == pytest.approx(1e-300, rel=1e-15)


def test_min_norm_interpolant_l1_consistent_singular_to_rounding_is_not_inconsistent():
    """Issue 21 round 12 (item 1): rows (1, 1, 0.5) and (1, 1 + 2**-52, 0.5), y = (1, 2) were
    called inconsistent for p = 1; beta = (1 - 2**52, 2**52, 0) solves them exactly (checked
    in exact rationals below), so the refusal must name the conditioning, not inconsistency
    (p = 2 already did). A duplicated row with another target is still inconsistent."""
    from fractions import Fraction as F

    X = np.array([[1.0, 1.0, 0.5], [1.0, 1.0 + 2.0 ** -52, 0.5]])
    y = np.array([1.0, 2.0])
    b = [F(1) - F(2) ** 52, F(2) ** 52, F(0)]
    assert all(sum(F(float(x)) * bj for x, bj in zip(row, b, strict=True)) == F(float(t))
               for row, t in zip(X, y, strict=True))
    for p in (1, 2):
        with pytest.raises(ValueError, match=r"^X is too ill-conditioned") as err:
            lib.min_norm_interpolant(X, y, p)
        assert "inconsistent" not in str(err.value)
    with pytest.raises(ValueError, match=r"inconsistent"):
        lib.min_norm_interpolant(np.array([[1.0, 1.0, 0.5], [1.0, 1.0, 0.5]]), y, 1)


def test_min_l1_certificate_reports_the_exact_residual():
    """Issue 21 round 12 (item 5): rows (2, -3, -1, -3), (2.0000000000993303, -3, -1, -3),
    (-1, 3, -2, 0), y = (-2, -3, -2). The certificate said residual 0.0 (its residual left out
    what rounding beta ~ 1e10 to float64 leaves); it now reports the exact relative residual,
    recomputed here in rationals, and accepts on the backward error and forward error. The
    answer itself is compared with the exact minimizer (support enumeration in rationals)."""
    from fractions import Fraction as F

    X = np.array([[2.0, -3, -1, -3], [2.0000000000993303, -3, -1, -3], [-1.0, 3, -2, 0]])
    y = np.array([-2.0, -3, -2])
    beta, cert = lib.min_norm_interpolant(X, y, 1, return_certificate=True)
    beta = np.asarray(beta)
    want = np.array([float(v) for v in _exact_min_l1(X, y)])
    np.testing.assert_allclose(beta, want, rtol=1e-12, atol=0)
    r = [sum(F(float(a)) * F(float(b)) for a, b in zip(row, beta, strict=True)) - F(float(t))
         for row, t in zip(X, y, strict=True)]
    exact = float(sum(v * v for v in r)) ** 0.5 / np.linalg.norm(y)
    assert exact > 1e-9 and cert.residual == pytest.approx(exact, rel=1e-6)
    assert cert.verified() and cert.backward_error <= 1e-15


def test_min_l1_with_near_duplicate_columns_meets_the_exact_optimum():
    """Issue 21 round 12 (item 7): with two nearly equal columns HiGHS's multipliers violated
    |X^T lam| <= 1 by 1e-9 to 1e-8 (its own tolerance is 1e-7), and 10 of 150 such draws
    raised RuntimeError. The LP is now solved again at tolerances 1e-10 before anything is
    raised; each draw's l1 norm is compared with the exact optimum (support enumeration in
    rationals; the minimizer itself need not be unique)."""
    rng = np.random.default_rng(1)
    worst = 0.0
    for _ in range(60):
        N = int(rng.integers(2, 5))
        d = int(rng.integers(N + 1, 7))
        X = rng.standard_normal((N, d))
        j = int(rng.integers(0, d - 1))
        X[:, j + 1] = X[:, j] + 10.0 ** rng.uniform(-14, -6) * rng.standard_normal(N)
        y = rng.standard_normal(N)
        beta = np.asarray(lib.min_norm_interpolant(X, y, 1))
        best = float(sum(abs(v) for v in _exact_min_l1(X, y)))
        worst = max(worst, abs(float(np.abs(beta).sum()) - best) / best)
    assert worst <= 1e-9


def _exact_unique_solution(X, y):
    """The unique exact solution of X b = y (X of full column rank, float entries read as
    exact rationals) by Gauss-Jordan on Fractions, checked to interpolate exactly."""
    from fractions import Fraction

    N, d = X.shape
    M = [[Fraction(float(v)) for v in row] + [Fraction(float(t))] for row, t in zip(X, y,
                                                                                     strict=True)]
    r = 0
    for c in range(d):
        piv = next(i for i in range(r, N) if M[i][c] != 0)
        M[r], M[piv] = M[piv], M[r]
        M[r] = [v / M[r][c] for v in M[r]]
        for i in range(N):
            if i != r and M[i][c] != 0:
                M[i] = [a - M[i][c] * b for a, b in zip(M[i], M[r], strict=True)]
        r += 1
    b = [M[i][d] for i in range(d)]
    for row, t in zip(X, y, strict=True):  # consistent and exact
        assert sum(Fraction(float(a)) * v for a, v in zip(row, b, strict=True)) == Fraction(
            float(t))
    return np.array([float(v) for v in b])


def _correct_or_refused(X, y, p, match="ill-conditioned"):
    """The answer matches the exact unique interpolant to 1e-9 (relative), or a ValueError
    matching ``match`` is raised; never a wrong answer."""
    want = _exact_unique_solution(X, y)
    try:
        beta = np.asarray(lib.min_norm_interpolant(X, y, p))
    except ValueError as err:
        assert match in str(err), str(err)
        return None
    assert np.linalg.norm(beta - want) <= 1e-9 * np.linalg.norm(want), (beta, want)
    return beta


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("X, y", [
    ([[1.0, 1.0], [1.0, 1 + 2**-52]], [1.0, 1.0]),  # exact answer [1, 0], p = 2 gave [.5, .5]
    ([[3, -3, -2], [3, -2.9999999999999996, -2], [1, -3, 0]], [3, 3, 2]),  # [2, 0, 1.5]
    ([[1.0, 2.0], [1.0, 2 + 2**-51]], [2.0, 2.0]),  # [2, 0]; p = 1 "verified" [0, 1]
])
def test_min_norm_of_x_singular_only_to_rounding_is_never_the_dropped_rank_answer(X, y, p):
    """Issue 21 round 12 (items 1, 2): an X singular to rounding but invertible exactly has a
    unique interpolant; lstsq and the LP drop the tiny singular value and answered for a
    different system. Exactly full rank is now found in rational arithmetic and refused as
    too ill-conditioned (the answer would need cond eps << 1e-9)."""
    X, y = np.array(X, dtype=float), np.array(y, dtype=float)
    _correct_or_refused(X, y, p)


def test_min_l1_of_rows_singular_only_to_rounding_is_refused():
    """Issue 21 round 12 (item 2): rows (1, 2, 3) and (1, 2, 3 + 1e-15) are independent in
    exact arithmetic (rank 2), y = (1, 1): [0, 0, 1/3] misses row 2 by 4e-16 / 3 along a
    direction of singular value 1e-16, i.e. O(1) from every interpolant. Duplicated rows
    (exact rank 1) with equal targets are still solved."""
    from fractions import Fraction

    X = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3 + 1e-15]])
    det = Fraction(1) * Fraction(3 + 1e-15) - Fraction(3.0) * Fraction(1)  # a 2 x 2 minor
    assert det != 0  # exactly rank 2
    with pytest.raises(ValueError, match="ill-conditioned.*rank 2 in exact"):
        lib.min_norm_interpolant(X, np.array([1.0, 1.0]), p=1)
    beta = np.asarray(lib.min_norm_interpolant(X[[0, 0]], np.array([1.0, 1.0]), p=1))
    np.testing.assert_allclose(beta, [0, 0, 1 / 3], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("p", [1, 2])
def test_min_norm_row_check_is_scale_safe(p):
    """Issue 21 round 12 (item 3): the per-row interpolation check divided y_i by the row's
    and beta's powers of two, and y_i underflowed to 0: X = [[1e-181, -1e-181], [0, -1e171]],
    y = (-1, 3) gave (p = 1) [-1e181, 0] with verified() True, whose row 2 gives 0, not 3.
    The exact solution (Fractions) is [-1e181 - 3e-171, -3e-171] to rounding; np.eye(2)
    with y = (5e-324, 1) returned [0, 1], row 0 off by its whole value. Each answer must
    match the exact one or be refused."""
    for X, y in ((np.array([[1e-181, -1e-181], [0.0, -1e171]]), np.array([-1.0, 3.0])),
                 (np.eye(2), np.array([5e-324, 1.0]))):
        want = _exact_unique_solution(X, y)
        try:
            beta = np.asarray(lib.min_norm_interpolant(X, y, p))
        except ValueError:
            continue
        # entry-wise, to 1e-9 of each entry (the row check is per row)
        np.testing.assert_allclose(beta, want, rtol=1e-9, atol=0)
    assert lib.convex._backward_error(np.array([-1e181, 0.0]),
                                      np.array([[1e-181, -1e-181], [0.0, -1e171]]),
                                      np.array([-1.0, 3.0])) == (1.0, 1)


@pytest.mark.parametrize("p", [1, 2])
def test_min_norm_failed_row_check_triggers_the_row_scaled_retry(p):
    """Issue 21 round 12 (item 4): rows (1, 2) and (1e-300, 1e-300), y = (1, 1e-300): the
    first answer failed the row check on the caller's X and y, which ran outside the retry,
    so p = 2 raised "row 1 residual 0.25". The unique exact solution is [1, 0]."""
    X, y = np.array([[1.0, 2.0], [1e-300, 1e-300]]), np.array([1.0, 1e-300])
    want = _exact_unique_solution(X, y)
    np.testing.assert_array_equal(want, [1.0, 0.0])
    beta = np.asarray(lib.min_norm_interpolant(X, y, p))
    assert np.linalg.norm(beta - want) <= 1e-12
    worst, _ = lib.convex._backward_error(beta, X, y)
    assert worst <= 1e-12


def test_min_l1_at_the_top_of_the_float64_range():
    """Issue 21 round 12 (item 5): X = [[1e308, -1e308]], y = [1e308] was refused ("condition
    number 1 ... relative residual nan"): the certificate's scale 2**1023 * 2 overflowed. The
    minimum-l1 interpolants are [t, t - 1] for t in [0, 1], all of l1 norm 1 (by hand), and
    HiGHS's vertex is [1, 0]; the answer is checked exactly in Fractions."""
    from fractions import Fraction as F

    for c in (1e300, 1e308):
        X, y = np.array([[c, -c]]), np.array([c])
        beta, cert = lib.min_norm_interpolant(X, y, 1, return_certificate=True)
        beta = np.asarray(beta)
        assert F(c) * F(float(beta[0])) - F(c) * F(float(beta[1])) == F(c)  # exact
        assert float(np.abs(beta).sum()) == pytest.approx(1.0, rel=1e-12)
        assert cert.verified() and cert.residual == 0.0


def test_min_l1_square_x_with_columns_at_very_different_scales():
    """Issue 21 round 12 (item 6): X = [[0, 1e35], [2e-62, 2e35]], y = (-2, -1) was refused
    with condition number 2.5e97 (the column-scaled matrix is [[0, .5], [1, 1]] to powers of
    two, well conditioned); HiGHS gives up on weights spanning 2**322. X is square and
    nonsingular, so the interpolant is unique: [1.5e62, -2e-35] (Fractions)."""
    X, y = np.array([[0.0, 1e35], [2e-62, 2e35]]), np.array([-2.0, -1.0])
    want = _exact_unique_solution(X, y)
    beta, cert = lib.min_norm_interpolant(X, y, 1, return_certificate=True)
    np.testing.assert_allclose(np.asarray(beta), want, rtol=1e-12, atol=0)
    assert cert.verified()


def test_l2_max_margin_small_integer_data_is_exact_to_rounding():
    """Issue 21 round 12 (item 7): Clarabel's answer [2.3e-7, -1, 1.7e-6] (verified at 1e-8)
    for the max-margin direction whose exact value is [0, -1, 0]: w = (0, -1, 0) meets every
    constraint y_n <x_n, w> >= 1 with equality and is the multiplier-1 combination of the
    fourth row y_4 x_4 = (0, -1, 0), a >= 0, so KKT holds exactly (checked in Fractions)."""
    from fractions import Fraction as F

    X = np.array([[-2.0, 1, -1], [2, -1, 1], [2, 1, -1], [0, 1, 0]])
    y = np.array([-1.0, 1, -1, -1])
    want = [F(0), F(-1), F(0)]
    for row, t in zip(X, y, strict=True):  # feasibility, exactly
        assert F(float(t)) * sum(F(float(a)) * b for a, b in zip(row, want, strict=True)) >= 1
    assert [F(float(y[3])) * F(float(v)) for v in X[3]] == want  # w = 1 * y_4 x_4
    w = np.asarray(lib.max_margin(X, y, p=2))
    np.testing.assert_allclose(w, [0.0, -1.0, 0.0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("delta", [1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-12])
def test_max_margin_below_float64_resolution_is_exact_or_refused(delta, p):
    """Issue 21 round 13 (item 1): rows (1, 2) and (-1, -2 + delta), labels +1. The
    constraints meet at the apex w* = Z^-1 (1, 1) (Z the rows, exact rationals below), and w*
    is the optimum when |w|_p does not decrease along the edges Z^-1 e_i of the feasible
    cone (checked exactly). p = 2 at delta = 1e-9 returned a w missing a constraint by
    1.7e-6 (margin 2.2e-10: rounding any w ~ 4.5e9 to float64 moves the margins by ~1e-6).
    Each answer now meets every constraint to 1e-8, computed exactly, with |w|_p within 1e-8
    of |w*|_p; or it is a ValueError naming X that gives the margin."""
    from fractions import Fraction as F

    X = np.array([[1.0, 2.0], [-1.0, -2.0 + delta]])
    (a, b), (c, e) = [[F(float(v)) for v in row] for row in X]
    det = a * e - b * c

    def zinv(r1, r2):  # Z^-1 (r1, r2) by Cramer's rule
        return [(e * r1 - b * r2) / det, (a * r2 - c * r1) / det]

    apex = zinv(F(1), F(1))
    sign = [F((v > 0) - (v < 0)) for v in apex]
    grad = sign if p == 1 else apex  # (sub)gradient direction of |w|_p at the apex
    assert all(v != 0 for v in apex)
    for g in (zinv(F(1), F(0)), zinv(F(0), F(1))):
        assert sum(u * v for u, v in zip(grad, g, strict=True)) > 0  # the apex is optimal
    best = (float(sum(abs(v) for v in apex)) if p == 1
            else float(sum(v * v for v in apex)) ** 0.5)
    try:
        w = np.asarray(lib.max_margin(X, np.ones(2), p))
    except ValueError as err:
        assert str(err).startswith("X: ") and "margin" in str(err), str(err)
        if p == 2 and delta == 1e-9:  # the finding: the margin is named
            assert f"margin 1 / |w|_2 = {1 / best:.3e}" in str(err)
        return
    assert not (p == 2 and delta <= 1e-8), "a margin below float64's resolution was answered"
    margins = [sum(F(float(x)) * F(float(v)) for x, v in zip(row, w, strict=True))
               for row in X]
    assert min(margins) >= 1 - F(1, 10 ** 8), [float(m) for m in margins]
    assert abs(float(np.linalg.norm(w, ord=p)) - best) <= 1e-8 * best


def _exact_rows_l2_min(X, y, beta):
    """For a 2 x 3 X of rank 2: beta (floats, read exactly) interpolates to 1e-9 per row
    (relative to |X_i| |beta| + |y_i|) and is orthogonal, to 1e-9, to the null vector
    n = x_1 cross x_2 of X: the minimum-l2 interpolant is the one orthogonal to the null
    space. Cross products and sums in exact rationals."""
    from fractions import Fraction as F

    (p1, p2, p3), (q1, q2, q3) = [[F(float(v)) for v in row] for row in X]
    n = [p2 * q3 - p3 * q2, p3 * q1 - p1 * q3, p1 * q2 - p2 * q1]
    b = [F(float(v)) for v in beta]
    for row, t in zip(X, y, strict=True):
        r = [F(float(v)) for v in row]
        res = abs(sum(u * v for u, v in zip(r, b, strict=True)) - F(float(t)))
        scale = sum(abs(u * v) for u, v in zip(r, b, strict=True)) + abs(F(float(t)))
        assert res <= scale / 10 ** 9
    dot = abs(sum(u * v for u, v in zip(n, b, strict=True)))
    nn = float(sum(v * v for v in n)) ** 0.5
    nb = float(sum(v * v for v in b)) ** 0.5
    assert float(dot) <= 1e-9 * nn * nb


def test_min_norm_interpolant_scale_only_ill_conditioning_is_solved_exactly():
    """Issue 21 round 13 (items 2, 3): systems ill-conditioned only through their scales
    (well conditioned once rows and columns are divided by powers of two) were refused
    although their interpolants are representable. X = [[1e-181, -1e-181], [0, -1e171]],
    y = (-1, 3) (both p; y_2 underflows in every float64 route): the unique solution
    (Gauss-Jordan in rationals) [-1e181 - 3e-171, -3e-171]. np.eye(2), y = (5e-324, 1), p = 1
    (refused "condition number 1"): [5e-324, 1]. X = [[0, 1e35, 1e-30], [2e-62, 2e35, 0]],
    y = (-2, -1), p = 1 (weights spanning 2**300, HiGHS gave up): the exact l1 optimum by
    support enumeration, [0, -5e-36, -1.5e30]; p = 2 there and for rows (1, 2e100, 0),
    (0, 1e100, 1) (refused as condition number 2.5e100) checked exactly orthogonal to the
    null space."""
    X, y = np.array([[1e-181, -1e-181], [0.0, -1e171]]), np.array([-1.0, 3.0])
    want = _exact_unique_solution(X, y)
    for p in (1, 2):
        np.testing.assert_array_equal(np.asarray(lib.min_norm_interpolant(X, y, p)), want)
    beta, cert = lib.min_norm_interpolant(np.eye(2), np.array([5e-324, 1.0]), 1,
                                          return_certificate=True)
    assert np.asarray(beta).tolist() == [5e-324, 1.0] and cert.verified()
    for X, y in ((np.array([[0.0, 1e35, 1e-30], [2e-62, 2e35, 0.0]]), np.array([-2.0, -1.0])),
                 (np.array([[0.0, 1e35, 1.0], [2e-62, 2e35, 0.0]]), np.array([-2.0, -1.0]))):
        beta, cert = lib.min_norm_interpolant(X, y, 1, return_certificate=True)
        want = np.array([float(v) for v in _exact_min_l1(X, y)])
        np.testing.assert_allclose(np.asarray(beta), want, rtol=1e-12, atol=0)
        assert cert.verified()
        _exact_rows_l2_min(X, y, np.asarray(lib.min_norm_interpolant(X, y, 2)))
    X, y = np.array([[1.0, 2e100, 0.0], [0.0, 1e100, 1.0]]), np.array([1.0, 2.0])
    _exact_rows_l2_min(X, y, np.asarray(lib.min_norm_interpolant(X, y, 2)))


@pytest.mark.parametrize("p", [1, 2])
def test_min_norm_interpolant_square_x_with_a_tiny_target_is_its_unique_solution(p):
    """Issue 21 round 13 (item 2b at 11 rows, beyond the 10 rows of the enumeration route):
    X = I (11 x 11), y = (t, 1, ..., 1) with t = 1e-300 or 5e-324. The unique interpolant is
    y itself (by hand); HiGHS's absolute tolerances zero the first entry and p = 1 was refused
    with "condition number 1". The square X's unique solution is now taken exactly."""
    for t in (1e-300, 5e-324):
        y = np.r_[t, np.ones(10)]
        beta = np.asarray(lib.min_norm_interpolant(np.eye(11), y, p))
        assert beta.tolist() == y.tolist()


@pytest.mark.parametrize("p", [1, 2])
def test_min_norm_interpolant_scale_only_refusal_names_the_spans(p):
    """Issue 21 round 13 (item 3): beyond the exact route's size (11 rows: X = [[0, 1e35,
    1e-30], [2e-62, 2e35, 0]] beside a 9 x 9 identity), the refusal said only "condition
    number 2.5e65 ... rank 1 to rounding". By hand, with rows and then columns divided by
    their largest entries (powers of two) X is block diagonal with blocks about [[0, .5, 1],
    [1, 1, 0]] and I: well conditioned. The message now says the ill-conditioning is only
    the scales and gives the columns' span 1e97 (1e35 / 2e-62 ~ 5e96) and why the exact
    route did not run. At 10 rows (8 x 8 identity) it answers: the first block's answer
    equals the 2 x 3 system's exact optimum (p = 1, support enumeration in rationals)."""
    from scipy.linalg import block_diag

    A, t = np.array([[0.0, 1e35, 1e-30], [2e-62, 2e35, 0.0]]), np.array([-2.0, -1.0])
    X, y = block_diag(A, np.eye(9)), np.r_[t, np.ones(9)]
    with pytest.raises(ValueError, match=r"ill-conditioned only through its scales: .* of its "
                                         r"columns 1e97, .* too large for the exact rational "
                                         r"route \(N = 11 rows"):
        lib.min_norm_interpolant(X, y, p)
    beta = np.asarray(lib.min_norm_interpolant(block_diag(A, np.eye(8)), np.r_[t, np.ones(8)],
                                               p))
    np.testing.assert_array_equal(beta[3:], np.ones(8))
    if p == 1:
        want = np.array([float(v) for v in _exact_min_l1(A, t)])
        np.testing.assert_allclose(beta[:3], want, rtol=1e-12, atol=0)


def test_max_margin_nearly_opposite_rows_are_answered_exactly_or_refused_naming_x():
    """Issue 21 round 13 (item 1, nearby variants): rows x and -x + delta g (labels +1, d = 2
    to 4, delta from 1e-12 to 1e-5) gave RuntimeError "solver status 'optimal_inaccurate'"
    (p = 1, 7 of 40 draws) or "does not verify" (6 of 80). Each is now an answer meeting every
    constraint to 1e-8 in exact rationals, whose p = 2 norm matches the exact optimum (the
    minimum-norm point of Z w = 1, w* = Z^T (Z Z^T)^-1 1, optimal since its multipliers
    (Z Z^T)^-1 1 are >= 0, checked exactly), or a ValueError naming X (margin below what
    float64 resolves); never a RuntimeError."""
    from fractions import Fraction as F

    rng = np.random.default_rng(3)
    for _ in range(30):
        d = int(rng.integers(2, 5))
        x = rng.standard_normal(d)
        X = np.array([x, -x + 10.0 ** rng.uniform(-12, -5) * rng.standard_normal(d)])
        Z = [[F(float(v)) for v in row] for row in X]
        g = [[sum(a * b for a, b in zip(r, s, strict=True)) for s in Z] for r in Z]
        det = g[0][0] * g[1][1] - g[0][1] * g[1][0]
        a = [(g[1][1] - g[0][1]) / det, (g[0][0] - g[1][0]) / det]  # (Z Z^T)^-1 (1, 1)
        assert min(a) >= 0  # both constraints active at the optimum
        best = float(a[0] + a[1]) ** 0.5  # |w*|^2 = 1^T (Z Z^T)^-1 1
        for p in (1, 2):
            try:
                w = np.asarray(lib.max_margin(X, np.ones(2), p))
            except ValueError as err:
                assert str(err).startswith("X: "), str(err)
                continue
            margins = [sum(z * F(float(v)) for z, v in zip(row, w, strict=True)) for row in Z]
            assert min(margins) >= 1 - F(1, 10 ** 8)
            if p == 2:
                assert abs(float(np.linalg.norm(w)) - best) <= 1e-8 * best
